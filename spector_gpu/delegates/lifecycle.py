"""The lifecycle side of the facade: update, supersede, delete, history, list, count,
delete_all, get_by_external_id (writes hold the handle's lock exclusive, reads shared)."""

from __future__ import annotations

import builtins
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..cortex.cortex import Cortex
from ..cortex.working import WorkingMemory
from ..errors import ValidationError
from ..hub import EventHub
from ..lifecycle import MemoryEvent
from ..metadata import compile_filter
from ..pathways.lifecycle import LifecyclePathway
from ..pathways.listing import ListingPathway, scope_options
from ..pathways.reading import ReadLayer
from ..pathways.remember import RememberPathway
from ..rwlock import RWLock
from ..types import CognitiveResult, MemoryType
from ._holds import reading

__all__ = ["MemoryLifecycle"]


class MemoryLifecycle:
    """Correcting, erasing and listing memories (one journaled commit per write). A write that
    leaves dead rows emits ``"removed"`` (the automatic compaction check answers it)."""

    def __init__(
        self,
        cortex: Cortex,
        remember: RememberPathway,
        working: WorkingMemory,
        lock: RWLock,
        events: EventHub,
    ) -> None:
        self.cortex = cortex
        self.working = working
        self.events = events
        self.pathway = LifecyclePathway(cortex, remember.chain, remember)
        self.listing = ListingPathway(cortex, ReadLayer(cortex))
        self.lock = lock

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> None:
        with self.lock:
            self.pathway.update(memory_id, changes)
            self.events.emit("removed")

    def supersede(self, old_id: str, new_text: str, fields: Mapping[str, Any]) -> str:
        with self.lock:
            return self.pathway.supersede(old_id, new_text, fields)

    def delete(self, memory_ids: Sequence[str], *, cascade: bool = False) -> int:
        with self.lock:
            n = self.pathway.delete(memory_ids, cascade=cascade)
            self.events.emit("removed")
            return n

    def delete_all(self, **scope: Any) -> int:
        """Delete every live memory of a scope; at least one of ``user_id``, ``agent_id``,
        ``run_id`` or ``where`` must be given, and a ``where`` given alone must not select
        everything by its form (``{}``, ``{"$and": [{}]}``, ``{"f": {"$nin": []}}``, a
        condition or'ed with its negation: ``Filter.selects_everything``);
        such a call is refused like an unscoped one."""
        opts = scope_options(**scope)
        ids = [opts.user_id, opts.agent_id, opts.run_id]
        where = opts.where
        if all(v is None for v in ids) and (
            where is None or compile_filter(where).selects_everything
        ):
            raise ValidationError(
                "delete_all needs a scope (user_id, agent_id, run_id or a where filter that "
                "selects by metadata); a where that matches every memory (such as {}) is no "
                "scope: it never deletes the whole store unasked"
            )
        with self.lock:
            rows = self.listing.selected(opts, _now())
            n = self.pathway.delete_rows(rows)
            self.events.emit("removed")
            return n

    def history(self, memory_id: str) -> list[MemoryEvent]:
        with reading(self.lock, self.cortex):
            return self.listing.history(memory_id)

    def list(self, offset: int, limit: int, **scope: Any) -> list[CognitiveResult]:
        with reading(self.lock, self.cortex):
            return self.listing.list(scope_options(**scope), offset, limit)

    def list_external_ids(self, **scope: Any) -> builtins.list[str]:
        with reading(self.lock, self.cortex):
            return self.listing.external_ids(scope_options(**scope))

    def count(self, **scope: Any) -> int:
        """Live memories of a scope; ``memory_type=WORKING`` counts working memory."""
        t = scope.get("memory_type")
        if t is not None and MemoryType.parse(t) == MemoryType.WORKING:
            return len(self.working)
        with reading(self.lock, self.cortex):
            return self.listing.count(scope_options(**scope))

    def get_by_external_id(
        self,
        external_id: str,
        user_id: str | None,
        agent_id: str | None,
        run_id: str | None,
    ) -> CognitiveResult | None:
        with reading(self.lock, self.cortex):
            return self.listing.by_external_id(external_id, user_id, agent_id, run_id)


def _now() -> int:
    return time.time_ns() // 1_000_000
