"""mem0's ``Memory`` API over a spector_gpu store, without an LLM (extra ``mem0``; mem0
itself is not needed and not imported).

Switching from mem0 changes one import::

    from spector_gpu.integrations.mem0 import Memory      # was: from mem0 import Memory

    m = Memory.from_config({"vector_store": {"provider": "spector_gpu",
                                             "config": {"path": "memory/"}}})
    m.add([{"role": "user", "content": "I moved to Lisbon", "name": "Ann"}], user_id="ann")
    m.search("where do I live?", filters={"user_id": "ann"}, top_k=5)["results"]

The methods, arguments and return shapes are mem0 2.x's (see :mod:`.mem0_shapes`), with
these deliberate differences:

* ``add(..., infer=True)`` extracts facts with the configured language model (``[llm]``,
  :mod:`.mem0_infer`) and reconciles them with the scope's known facts (ADD / UPDATE /
  NONE events, a contradicted fact superseded); with no model configured it logs a warning
  once per handle and stores every message verbatim, as ``infer=False`` does: one memory
  each (system messages skipped), in mem0's ``infer=False`` shape. Each is a SEMANTIC
  memory, embedded alone: an episode would be embedded with the turns stored before it,
  whatever their scope.
* ``score`` is the engine's one score (``CognitiveResult.score``: in [0, 1], non-increasing
  down the list) and ``threshold`` its floor (``RecallOptions.min_score``).
* filters are mem0's language (:mod:`.mem0_filters`: plain values, ``eq ne gt gte lt lte
  in nin``, ``"*"``, nested ``AND``/``OR``/``NOT``); ``contains``/``icontains`` are
  refused (ValueError), a scope id inside ``AND``/``OR``/``NOT`` must also be given at
  the top level, and ``"*"`` matches the memories that have the field (mem0's default
  Qdrant store skips a ``"*"`` condition, matching every memory).
* ``expiration_date`` is mem0's: the day is kept in the memory's metadata, expired
  memories are hidden from ``search``/``get_all`` unless ``show_expired=True`` and
  returned by ``get``, and nothing purges them (as in mem0). Items carry
  ``expiration_date`` when set.
* refusals raise :class:`~spector_gpu.errors.ValidationError` (a ``ValueError``; mem0 raises
  a plain ``ValueError`` for most, and its own non-ValueError ``ValidationError`` for a bad
  ``messages`` type or a missing scope in ``add``).
* ``history`` keeps a deleted memory's events, as mem0 does, but the engine erases deleted
  text, so ``old_memory``/``new_memory`` of a deleted memory are ``None``.
* the history lives in the store itself (no SQLite file); ``reset`` erases every memory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UnknownIdError, ValidationError
from ._owned import OwnedMemory
from .mem0_shapes import (
    EXPIRATION,
    SCOPES,
    caller_metadata,
    event_dict,
    expiration_day,
    expired_where,
    item_dict,
    messages_of,
    scope_ids,
    split_filters,
)

if TYPE_CHECKING:
    from ..memory import SpectorMemory
    from ..types import CognitiveResult

__all__ = ["Memory"]

_UNSET: Any = object()
_RESET_PAGE = 1000  # memories erased per commit by reset()
DEFAULT_PATH = Path("~/.spector_gpu/mem0")  # like mem0's ~/.mem0, when no path is given


def _top_k(top_k: Any) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValidationError(f"top_k must be a non-negative int, got {top_k!r}")
    return int(top_k)


def _no_top_level_scopes(method: str, kwargs: Mapping[str, Any]) -> None:
    given = sorted(set(kwargs) & set(SCOPES))
    if given:
        raise ValidationError(
            f"Top-level entity parameters {set(given)} are not supported in {method}(). "
            f"Use filters={{'{given[0]}': '...'}} instead."
        )
    if kwargs:
        raise ValidationError(f"{method}() got unexpected arguments {sorted(kwargs)}")


def _gated(
    filters: Mapping[str, Any] | None, show_expired: bool, what: str
) -> tuple[dict[str, str], Any]:
    """``(scopes, where)`` of ``filters``, with the expiry gate unless ``show_expired``."""
    scopes, where = split_filters(filters, what=f"filters of {what}")
    if show_expired or where is False:
        return scopes, where
    gate = expired_where()
    return scopes, gate if where is None else {"$and": [where, gate]}


class Memory(OwnedMemory):
    """mem0's ``Memory`` over the store at ``path`` (or an open ``memory`` handle, which the
    caller keeps open). Module docstring: what differs from mem0."""

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, memory: SpectorMemory | None = None
    ) -> None:
        from ..memory import SpectorMemory

        if path is not None and memory is not None:
            raise ValidationError("give path or memory, not both")
        self._owned = memory is None
        if memory is None:
            memory = SpectorMemory.open(Path(path or DEFAULT_PATH).expanduser())
        self._memory = memory

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> Memory:
        """``{"vector_store": {"provider": "spector_gpu", "config": {"path": DIR}}}``; the
        ``llm``, ``embedder``, ``history_db_path`` and ``version`` keys of a mem0 config are
        accepted and unused (no LLM; the store's own embedder; history in the store)."""
        unknown = set(config_dict) - {
            "vector_store",
            "llm",
            "embedder",
            "history_db_path",
            "version",
        }
        if unknown:
            raise ValidationError(f"unknown config keys {sorted(unknown)}")
        store = dict(config_dict.get("vector_store") or {})
        provider = store.get("provider", "spector_gpu")
        if provider != "spector_gpu":
            raise ValidationError(f"Unsupported vector store provider: {provider}")
        path = dict(store.get("config") or {}).get("path")
        if path is None:
            raise ValidationError("vector_store.config.path (the store directory) is required")
        return cls(path)

    # ---- writes --------------------------------------------------------------------------
    def add(
        self,
        messages: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        timestamp: Any = None,
        expiration_date: Any = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
    ) -> dict[str, Any]:
        """Store each message as its own memory in one commit; ``{"results": [...]}``
        (``infer=True`` with an ``[llm]`` model: facts extracted and reconciled, mem0_infer)."""
        scopes = scope_ids(
            {"user_id": user_id, "agent_id": agent_id, "run_id": run_id},
            required=True,
            what="add",
        )
        if timestamp is not None:
            raise ValidationError("timestamp is not supported (mem0 platform only)")
        if memory_type is not None:
            raise ValidationError("memory_type needs an LLM pipeline; it is not supported")
        meta, expires = caller_metadata(metadata), expiration_day(expiration_date)
        if expires is not None:
            meta[EXPIRATION] = expires
        msgs = messages_of(messages)
        if infer:  # without a configured model: a logged warning, stored verbatim
            from .mem0_infer import infer_add

            # the expiry day travels in ``meta`` (mem0's expiration_date), not as expires_at
            if (inferred := infer_add(self._memory, msgs, scopes, meta, None)) is not None:
                return inferred
        items = [
            {
                "text": str(m["content"]),
                "type": "semantic",
                "role": str(m["role"]),
                "speaker": str(m.get("name") or ""),
                "metadata": meta,
                **scopes,
            }
            for m in msgs
        ]
        ids = self._memory.remember_batch(items) if items else []
        return {
            "results": [
                {
                    "id": mid,
                    "memory": it["text"],
                    "event": "ADD",
                    "actor_id": it["speaker"] or None,
                    "role": it["role"],
                }
                for mid, it in zip(ids, items)
            ]
        }

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        expiration_date: Any = _UNSET,
        data: str | None = None,
    ) -> dict[str, str]:
        """Change a memory's text and/or merge into its metadata (id and created_at kept)."""
        text = text if text is not None else data
        if text is None and metadata is None and expiration_date is _UNSET:
            raise ValidationError("update needs text, metadata or expiration_date")
        current = self._require(memory_id)
        changes: dict[str, Any] = {}
        if text is not None:
            changes["text"] = text
        meta = dict(current.metadata or {})
        if metadata is not None:  # mem0 merges the new keys into the stored metadata
            meta.update(caller_metadata(metadata))
        if expiration_date is not _UNSET:  # None clears it (kept as null, as mem0 does)
            meta[EXPIRATION] = expiration_day(expiration_date)
        if metadata is not None or expiration_date is not _UNSET:
            changes["metadata"] = meta
        self._memory.update(memory_id, **changes)
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str) -> dict[str, str]:
        """Erase one memory (ValueError when it is not stored)."""
        self._require(memory_id)
        self._memory.delete(memory_id)
        return {"message": "Memory deleted successfully!"}

    def delete_all(
        self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> dict[str, str]:
        """Erase every memory of a scope (several ids: all must match); a scope is required
        (``reset`` erases everything)."""
        scopes = scope_ids(
            {"user_id": user_id, "agent_id": agent_id, "run_id": run_id},
            required=True,
            what="delete_all; to delete all memories, use reset()",
        )
        self._memory.delete_all(
            user_id=scopes.get("user_id"),
            agent_id=scopes.get("agent_id"),
            run_id=scopes.get("run_id"),
        )
        return {"message": "Memories deleted successfully!"}

    def reset(self) -> None:
        """Erase every memory in the store (a commit per thousand memories)."""
        while batch := self._memory.list(limit=_RESET_PAGE):
            self._memory.delete_batch([r.id for r in batch])

    # ---- reads ---------------------------------------------------------------------------
    def _require(self, memory_id: str) -> CognitiveResult:
        try:
            found = self._memory.get(memory_id)
        except ValidationError:
            found = None
        if found is None:
            raise ValidationError(
                f"Memory with id {memory_id} not found. Please provide a valid 'memory_id'"
            )
        return found

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """One memory in mem0's item shape (``score: None``), or None; an expired memory is
        returned too, as mem0 does."""
        try:
            r = self._memory.get(memory_id)
        except (ValidationError, UnknownIdError):
            return None
        return None if r is None else item_dict(r, with_score=True)

    def get_all(
        self,
        *,
        filters: Mapping[str, Any] | None = None,
        top_k: int = 20,
        show_expired: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Up to ``top_k`` memories of a scope (``filters`` must name one), newest first, no
        query; memories past their ``expiration_date`` only with ``show_expired``."""
        _no_top_level_scopes("get_all", kwargs)
        scopes, where = _gated(filters, show_expired, "get_all")
        k = _top_k(top_k)
        rows = []
        if k and where is not False:
            rows = self._memory.list(
                user_id=scopes.get("user_id"),
                agent_id=scopes.get("agent_id"),
                run_id=scopes.get("run_id"),
                where=where,
                limit=k,
            )
        return {"results": [item_dict(r, with_score=False) for r in rows]}

    def search(
        self,
        query: str,
        *,
        top_k: int = 20,
        filters: Mapping[str, Any] | None = None,
        threshold: float = 0.1,
        show_expired: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Memories of a scope ranked for ``query``, score >= ``threshold``, best first;
        memories past their ``expiration_date`` only with ``show_expired``."""
        from ..types import RecallOptions

        for flag in ("rerank", "explain"):
            kwargs.pop(flag, None)  # accepted for compatibility; nothing to rerank or explain
        _no_top_level_scopes("search", kwargs)
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise ValidationError(f"threshold must be a number in [0, 1], got {threshold!r}")
        if not 0.0 <= threshold <= 1.0:
            raise ValidationError(f"threshold must be in [0, 1], got {threshold}")
        scopes, where = _gated(filters, show_expired, "search")
        k = _top_k(top_k)
        if k == 0 or where is False:
            return {"results": []}
        opts = RecallOptions(
            k=k,
            where=where,
            min_score=float(threshold),
            mode="observe",
            user_id=scopes.get("user_id"),
            agent_id=scopes.get("agent_id"),
            run_id=scopes.get("run_id"),
        )
        hits = self._memory.recall(query.strip(), opts)
        return {"results": [item_dict(r, with_score=True) for r in hits]}

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The memory's ADD / UPDATE / DELETE events, oldest first ([] for an unknown id)."""
        try:
            events = self._memory.history(memory_id)
        except (ValidationError, UnknownIdError):
            return []
        return [event_dict(e) for e in events]
