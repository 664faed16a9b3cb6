"""The structured results of the MCP server's tools (pydantic models: the SDK lists their JSON
schemas as each tool's ``outputSchema`` and validates every result against them).

Times are epoch milliseconds (UTC). ``relevance`` is the engine's absolute match of the query
and the memory, in [0, 1]; ``score`` is its fused ranking score, comparable only within one
recall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from ..pathways.lineage import MemoryProvenance
    from ..pathways.reflect import ReflectReport
    from ..types import CognitiveResult

__all__ = [
    "ConsolidateResult",
    "DeleteResult",
    "ForgetResult",
    "Lineage",
    "MemoryOut",
    "RecallResult",
    "RememberResult",
]


class MemoryOut(BaseModel):
    """One memory as a tool returns it."""

    id: str = Field(description="the memory's TSID (13 Crockford base32 characters)")
    text: str
    memory_type: str = Field(description="episodic, semantic, procedural or working")
    importance: float
    timestamp_ms: int = Field(description="when it happened, epoch ms")
    session_id: int
    role: str | None = None
    speaker: str = ""
    tags: list[str] = Field(default_factory=list)
    external_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: int = Field(description="first version written, epoch ms")
    updated_at: int = Field(description="this version written, epoch ms")
    version: int = Field(description="1 for a memory never updated")
    consolidated: bool = Field(description="a consolidation pass has distilled this turn")
    relevance: float | None = Field(
        default=None, ge=0.0, le=1.0, description="recall's absolute relevance; None for get"
    )
    score: float | None = Field(default=None, description="recall's fused score; None for get")

    @classmethod
    def of(cls, r: CognitiveResult, *, ranked: bool) -> MemoryOut:
        """The model of one engine result (``ranked``: it came from recall, keep its score)."""
        return cls(
            id=r.id,
            text=r.text,
            memory_type=r.memory_type.name.lower(),
            importance=float(r.importance),
            timestamp_ms=int(r.timestamp_ms),
            session_id=int(r.session_id),
            role=r.role.name.lower() if r.role is not None else None,
            speaker=r.speaker,
            tags=list(r.tags),
            external_id=r.external_id,
            user_id=r.user_id,
            agent_id=r.agent_id,
            run_id=r.run_id,
            metadata=dict(r.metadata) if r.metadata is not None else None,
            created_at=int(r.created_at),
            updated_at=int(r.updated_at),
            version=int(r.version),
            consolidated=bool(r.consolidated),
            relevance=min(1.0, max(0.0, float(r.relevance))) if ranked else None,
            score=float(r.score) if ranked and r.score is not None else None,
        )


class RememberResult(BaseModel):
    """What ``remember`` stored."""

    id: str
    text: str


class RecallResult(BaseModel):
    """The memories recall ranked for a query, best first."""

    query: str
    hits: list[MemoryOut]


class DeleteResult(BaseModel):
    """The memory ``delete`` erased (it is gone from every read from this commit on)."""

    id: str
    deleted: int = Field(description="memories erased (more than 1 with cascade)")


class ForgetResult(BaseModel):
    """The memory whose retrieval strength ``forget`` lowered (it stays stored)."""

    id: str
    retrieval_strength: float = Field(description="after forgetting, in [0, 1]")


class ConsolidateResult(BaseModel):
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


class Lineage(BaseModel):
    """Where a memory came from: for a consolidated fact, the turns it was distilled from."""

    memory: MemoryOut
    consolidated_from: bool = Field(description="the memory was written by consolidation")
    session_id: int | None = None
    consolidated_at_ms: int | None = None
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
            consolidated_at_ms=int(lineage.consolidated_at_ms),
            parent_ids=list(lineage.parent_ids),
            parents=[MemoryOut.of(p, ranked=False) for p in lineage.parents or ()],
        )
