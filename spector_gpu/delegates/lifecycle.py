"""The lifecycle side of the facade: update, supersede, delete, history, list, count,
delete_all, get_by_external_id (each under the handle's lock)."""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..cortex.cortex import Cortex
from ..cortex.working import WorkingMemory
from ..errors import ValidationError
from ..lifecycle import MemoryEvent
from ..pathways.lifecycle import LifecyclePathway
from ..pathways.listing import ListingPathway, scope_options
from ..pathways.recall.hydration import Hydrator
from ..pathways.remember import RememberPathway
from ..types import CognitiveResult, MemoryType

__all__ = ["MemoryLifecycle"]


class MemoryLifecycle:
    """Correcting, erasing and listing memories (one journaled commit per write)."""

    def __init__(
        self,
        cortex: Cortex,
        remember: RememberPathway,
        working: WorkingMemory,
        lock: threading.RLock,
        after_removal: Callable[[], object] | None = None,
    ) -> None:
        self.cortex = cortex
        self.working = working
        # run after a write that leaves dead rows (the automatic compaction check)
        self.after_removal = after_removal or (lambda: None)
        self.pathway = LifecyclePathway(cortex, remember.chain, remember)
        self.listing = ListingPathway(cortex, Hydrator(cortex))
        self.lock = lock

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> None:
        with self.lock:
            self.pathway.update(memory_id, changes)
            self.after_removal()

    def supersede(self, old_id: str, new_text: str, fields: Mapping[str, Any]) -> str:
        with self.lock:
            return self.pathway.supersede(old_id, new_text, fields)

    def delete(self, memory_ids: Sequence[str], *, cascade: bool = False) -> int:
        with self.lock:
            n = self.pathway.delete(memory_ids, cascade=cascade)
            self.after_removal()
            return n

    def delete_all(self, **scope: Any) -> int:
        """Delete every live memory of a scope; at least one of ``user_id``, ``agent_id``,
        ``run_id`` or ``where`` must be given (an unscoped call is refused)."""
        if all(scope.get(k) is None for k in ("user_id", "agent_id", "run_id", "where")):
            raise ValidationError(
                "delete_all needs a scope (user_id, agent_id, run_id or where); it never "
                "deletes the whole store unasked"
            )
        with self.lock:
            rows = self.listing.selected(scope_options(**scope), _now())
            n = self.pathway.delete_rows(rows)
            self.after_removal()
            return n

    def history(self, memory_id: str) -> list[MemoryEvent]:
        with self.lock:
            return self.listing.history(memory_id)

    def list(self, offset: int, limit: int, **scope: Any) -> list[CognitiveResult]:
        with self.lock:
            return self.listing.list(scope_options(**scope), offset, limit)

    def list_external_ids(self, **scope: Any) -> builtins.list[str]:
        with self.lock:
            return self.listing.external_ids(scope_options(**scope))

    def count(self, **scope: Any) -> int:
        """Live memories of a scope; ``memory_type=WORKING`` counts working memory."""
        t = scope.get("memory_type")
        if t is not None and MemoryType.parse(t) == MemoryType.WORKING:
            return len(self.working)
        with self.lock:
            return self.listing.count(scope_options(**scope))

    def get_by_external_id(
        self,
        external_id: str,
        user_id: str | None,
        agent_id: str | None,
        run_id: str | None,
    ) -> CognitiveResult | None:
        with self.lock:
            return self.listing.by_external_id(external_id, user_id, agent_id, run_id)


def _now() -> int:
    return time.time_ns() // 1_000_000
