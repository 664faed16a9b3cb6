"""The lifecycle verbs of the facade (correct, erase, list), one line of delegation each.

:class:`~spector_gpu.memory.SpectorMemory` inherits them; the work is in
:class:`~spector_gpu.delegates.MemoryLifecycle` and the pathways it composes.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from .delegates import MemoryAdminView, MemoryCompaction, MemoryLifecycle
from .lifecycle import MemoryEvent, MemoryKind
from .pathways.compact import CompactionReport
from .types import CognitiveResult, MemoryType

__all__ = ["LifecycleMethods"]


class LifecycleMethods:
    """update, supersede, delete, delete_batch, delete_all, history, list, external_ids,
    list_external_ids, get_by_external_id, compact."""

    _lifecycle: MemoryLifecycle
    _compaction: MemoryCompaction
    _admin: MemoryAdminView

    def compact(self, *, keep_history: bool = True) -> CompactionReport:
        """Rewrite the store without its dead rows (deleted, expired; older versions too with
        ``keep_history=False``): their bytes leave every file. Crash-safe (old or new store)."""
        return self._compaction.compact(keep_history=keep_history)

    def update(
        self,
        memory_id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        kind: MemoryKind | str | None = None,
        confidence: float | None = None,
        expires_at: int | None = None,
        ttl_s: float | None = None,
        pinned: bool | None = None,
        external_id: str | None = None,
    ) -> None:
        """Correct a memory in place: same id and ``created_at``, ``updated_at`` moves, every
        relay re-indexes, the previous version is kept in :meth:`history`. Fields left None
        are kept. ``UnknownIdError`` if no live memory has this id."""
        return self._lifecycle.update(memory_id, {"text": text, "metadata": metadata, "importance": importance, "tags": tags, "kind": kind, "confidence": confidence, "expires_at": expires_at, "ttl_s": ttl_s, "pinned": pinned, "external_id": external_id})  # fmt: skip  # noqa: E501

    def supersede(self, old_id: str, new_text: str, **fields: Any) -> str:
        """Write ``new_text`` as a new memory that supersedes ``old_id`` (reciprocal
        ``supersedes`` / ``superseded_by``); recall leaves the old one out unless
        ``RecallOptions(include_superseded=True)``. Returns the new id."""
        return self._lifecycle.supersede(old_id, new_text, fields)

    def delete(self, memory_id: str, *, cascade: bool = False) -> None:
        """Erase a memory: from this commit it is out of recall/get/list and its text and
        vector weigh on no score; ``compact()`` removes its bytes. ``cascade`` also deletes
        facts consolidated only from it. The event chain keeps a hash, never the text."""
        self._lifecycle.delete([memory_id], cascade=cascade)

    def delete_batch(self, memory_ids: Sequence[str], *, cascade: bool = False) -> int:
        """:meth:`delete` of many memories in one commit; returns how many were deleted."""
        return self._lifecycle.delete(memory_ids, cascade=cascade)

    def delete_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, where: Mapping[str, Any] | None = None) -> int:  # fmt: skip  # noqa: E501
        """Delete every live memory of a scope (at least one filter); returns the count."""
        return self._lifecycle.delete_all(user_id=user_id, agent_id=agent_id, run_id=run_id, where=where)  # fmt: skip  # noqa: E501

    def history(self, memory_id: str) -> builtins.list[MemoryEvent]:
        """The memory's ADD / UPDATE / DELETE events, oldest first (``[]`` if unknown)."""
        return self._lifecycle.history(memory_id)

    def list(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, where: Mapping[str, Any] | None = None, kind: MemoryKind | str | None = None, memory_type: MemoryType | str | None = None, offset: int = 0, limit: int = 100) -> list[CognitiveResult]:  # fmt: skip  # noqa: E501
        """Live memories passing the filters, by id (creation order), without a query."""
        return self._lifecycle.list(offset, limit, user_id=user_id, agent_id=agent_id, run_id=run_id, where=where, kind=kind, memory_type=memory_type)  # fmt: skip  # noqa: E501

    def external_ids(self) -> dict[str, str]:
        """``{external_id: memory id}`` of every memory that has one."""
        return self._admin.external_ids()

    def list_external_ids(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, where: Mapping[str, Any] | None = None, kind: MemoryKind | str | None = None) -> builtins.list[str]:  # fmt: skip  # noqa: E501
        """The external ids of the live memories passing the filters (those with one), by
        id; cheaper than :meth:`list` (nothing hydrated)."""
        return self._lifecycle.list_external_ids(user_id=user_id, agent_id=agent_id, run_id=run_id, where=where, kind=kind)  # fmt: skip  # noqa: E501

    def get_by_external_id(self, external_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> CognitiveResult | None:  # fmt: skip  # noqa: E501
        """The live memory holding ``external_id`` in exactly this scope, or None."""
        return self._lifecycle.get_by_external_id(external_id, user_id, agent_id, run_id)

    def count(self, memory_type: MemoryType | str | None = None, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, where: Mapping[str, Any] | None = None, kind: MemoryKind | str | None = None) -> int:  # fmt: skip  # noqa: E501
        """Number of live memories (of one type, scope, kind or ``where``, if given)."""
        return self._lifecycle.count(memory_type=memory_type, user_id=user_id, agent_id=agent_id, run_id=run_id, where=where, kind=kind)  # fmt: skip  # noqa: E501
