"""The structured results of the MCP server's tools (pydantic models: the SDK lists their JSON
schemas as each tool's ``outputSchema`` and validates every result against them).

Every model is built from the engine's one serialiser, :meth:`CognitiveResult.to_dict`. Times
are ISO-8601 UTC strings (``2026-05-01T09:30:00.000Z``). A hit is compact — id, text, score,
type, time, session, user and metadata — and carries every other field of the engine's result
under ``details`` only when the caller asks (``full``). Fields with no value are left out of
the JSON. ``score`` is the engine's one score of a recall hit: in [0, 1], non-increasing down
the list, the same scale for every query and store (docs/retrieval.md); ``relevance`` and the
other parts of the fusion are never shown as scores.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

if TYPE_CHECKING:
    from .. import MemoryProvenance, ReflectReport
    from ..lifecycle import MemoryEvent
    from ..types import CognitiveResult

__all__ = [
    "ConsolidateResult",
    "DeleteResult",
    "ForgetResult",
    "HistoryEvent",
    "HistoryResult",
    "Lineage",
    "ListResult",
    "MemoryOut",
    "RecallResult",
    "RememberResult",
    "iso_time",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_COMPACT = frozenset({"id", "text", "score", "memory_type", "session_id", "user_id", "metadata"})
_TIMES = ("created_at", "updated_at", "expires_at")
# relevance is one of the parts of the score (see explain), never shown as a score itself
_NEVER = frozenset({"relevance", "timestamp_ms", "explain"})


def iso_time(ms: int) -> str:
    """Epoch milliseconds (UTC) as ISO-8601 with milliseconds and ``Z``; a time outside the
    years 1-9999 (which ``datetime`` cannot hold) as its epoch ms in decimal."""
    try:
        moment = _EPOCH + timedelta(milliseconds=int(ms))
    except OverflowError:
        return str(int(ms))
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Compact(BaseModel):
    """A model whose JSON leaves out the fields that hold None."""

    @model_serializer(mode="wrap")
    def _without_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class MemoryOut(_Compact):
    """One memory as a tool returns it."""

    id: str = Field(description="the memory's id (13 Crockford base32 characters)")
    text: str
    score: float | None = Field(
        default=None, description="recall's score in [0, 1], non-increasing down the hits"
    )
    type: str = Field(description="episodic, semantic or procedural")
    time: str = Field(description="when it happened, ISO-8601 UTC")
    session_id: int | None = Field(default=None, description="its conversation, if a turn")
    user_id: str | None = None
    metadata: dict[str, Any] | None = None
    details: dict[str, Any] | None = Field(
        default=None, description="every other field of the memory (with full=true)"
    )

    @classmethod
    def of(cls, r: CognitiveResult, *, ranked: bool, full: bool = False) -> MemoryOut:
        """The model of one engine result (``ranked``: it came from recall, keep its score;
        ``full``: add every other field under ``details``)."""
        doc = r.to_dict()
        details = None
        if full:
            details = {k: v for k, v in doc.items() if k not in _COMPACT and k not in _NEVER}
            for key in _TIMES:
                if details.get(key) is not None:
                    details[key] = iso_time(details[key])
        return cls(
            id=doc["id"],
            text=doc["text"],
            score=float(doc["score"]) if ranked and doc["score"] is not None else None,
            type=doc["memory_type"],
            time=iso_time(doc["timestamp_ms"]),
            # 0 is the engine's "no session" as well as a session of that number
            session_id=doc["session_id"] or None,
            user_id=doc["user_id"],
            metadata=doc["metadata"],
            details=details,
        )


class RememberResult(_Compact):
    """What ``remember`` stored."""

    id: str
    text: str


class RecallResult(_Compact):
    """The memories recall ranked for a query, best first."""

    query: str
    hits: list[MemoryOut]


class ListResult(_Compact):
    """Live memories passing the filters, oldest first, one page of them."""

    memories: list[MemoryOut]
    next_offset: int | None = Field(
        default=None, description="pass as offset for the next page; absent on the last page"
    )


class HistoryEvent(_Compact):
    """One change of a memory: ADD, UPDATE or DELETE."""

    event: str = Field(description="ADD, UPDATE or DELETE")
    version: int
    time: str = Field(description="when it happened, ISO-8601 UTC")
    text: str | None = Field(default=None, description="the text after it (absent once erased)")
    previous_text: str | None = None
    deleted: bool = Field(description="the memory is deleted now")

    @classmethod
    def of(cls, e: MemoryEvent) -> HistoryEvent:
        """The model of one :class:`MemoryEvent`."""
        return cls(
            event=e.event,
            version=int(e.version),
            time=iso_time(e.at_ms),
            text=e.new_text,
            previous_text=e.previous_text,
            deleted=bool(e.is_deleted),
        )


class HistoryResult(_Compact):
    """A memory's changes, oldest first."""

    id: str
    events: list[HistoryEvent]


class DeleteResult(_Compact):
    """The memory ``delete`` erased (it is gone from every read from this commit on)."""

    id: str
    deleted: int = Field(description="memories erased (more than 1 with cascade)")


class ForgetResult(_Compact):
    """The memory whose retrieval strength ``forget`` lowered (it stays stored)."""

    id: str
    retrieval_strength: float = Field(description="after forgetting, in [0, 1]")


class ConsolidateResult(_Compact):
    """One consolidation call: the sessions distilled, the turns read, the facts written."""

    sessions: list[int]
    turns_consolidated: int
    fact_ids: list[str] = Field(description="ids of the SEMANTIC facts written")
    resumed_runs: int = Field(description="interrupted runs finished first")

    @classmethod
    def of(cls, report: ReflectReport) -> ConsolidateResult:
        """The model of a :class:`ReflectReport`."""
        return cls(
            sessions=[int(s) for s in report.sessions],
            turns_consolidated=int(report.turns_consolidated),
            fact_ids=list(report.fact_ids),
            resumed_runs=int(report.resumed_runs),
        )


class Lineage(_Compact):
    """Where a memory came from: for a consolidated fact, the turns it was distilled from."""

    memory: MemoryOut
    consolidated_from: bool = Field(description="the memory was written by consolidation")
    session_id: int | None = None
    consolidated_at: str | None = Field(default=None, description="ISO-8601 UTC")
    parent_ids: list[str] = Field(default_factory=list)
    parents: list[MemoryOut] = Field(default_factory=list, description="the parent turns")

    @classmethod
    def of(cls, memory: CognitiveResult, lineage: MemoryProvenance | None) -> Lineage:
        """The model of a memory and its (possibly absent) lineage."""
        out = MemoryOut.of(memory, ranked=False)
        if lineage is None:
            return cls(memory=out, consolidated_from=False)
        return cls(
            memory=out,
            consolidated_from=True,
            session_id=int(lineage.session_id),
            consolidated_at=iso_time(lineage.consolidated_at_ms),
            parent_ids=list(lineage.parent_ids),
            parents=[MemoryOut.of(p, ranked=False) for p in lineage.parents or ()],
        )
