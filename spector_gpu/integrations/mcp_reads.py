"""The MCP server's read tools: ``recall``, ``get``, ``list``, ``history``, ``explain``.

They change no memory (a recall strengthens its hits' retrieval strength, as every recall of
the engine does; a read-only server leaves even that), so a host may call them unasked and a
``--read-only`` server serves them beside another process that writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from .mcp_arguments import MAX_K, Full, MemoryId, Scope, SessionId, Where
from .mcp_errors import ToolRefusalError, not_found, refusals
from .mcp_models import HistoryEvent, HistoryResult, Lineage, ListResult, MemoryOut, RecallResult

if TYPE_CHECKING:
    from ..memory import SpectorMemory
    from ..types import CognitiveResult

__all__ = ["ReadTools"]


class ReadTools:
    """The read tools over one open handle (their methods are the tools; their docstrings
    what a model reads)."""

    def __init__(self, mem: SpectorMemory) -> None:
        self.mem = mem

    def stored(self, memory_id: str) -> CognitiveResult:
        """The live memory ``memory_id``, or the one not-found refusal."""
        with refusals(self.mem.path, memory_id):
            hit = self.mem.get(memory_id)
        if hit is None:
            raise not_found(memory_id)
        return hit

    def recall(
        self,
        query: Annotated[str, Field(min_length=1, description="what to look for")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="how many memories at most")] = 5,
        min_score: Annotated[
            float | None, Field(ge=0.0, le=1.0, description="leave out hits scored below it")
        ] = None,
        tags: Annotated[list[str] | None, Field(description="only memories with a tag")] = None,
        session_id: SessionId = None,
        user_id: Scope = None,
        agent_id: Scope = None,
        run_id: Scope = None,
        where: Where = None,
        full: Full = False,
    ) -> RecallResult:
        """Recall the memories that best match a query, best first, each with its score in
        [0, 1]."""
        from ..types import RecallOptions

        if not query.strip():
            raise ToolRefusalError("query must contain a non-whitespace character")
        with refusals(self.mem.path):
            opts = RecallOptions(
                k=k,
                tags=frozenset(tags) if tags else None,
                session_id=session_id,
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
                where=where,
                min_score=min_score,
                mode="observe" if self.mem.read_only else "learn",
            )
            hits = self.mem.recall(query, opts)
        out = [MemoryOut.of(h, ranked=True, full=full) for h in hits]
        return RecallResult(query=query, hits=out)

    def get(self, id: MemoryId, full: Full = False) -> MemoryOut:
        """Fetch one memory by id."""
        return MemoryOut.of(self.stored(id), ranked=False, full=full)

    def list_memories(
        self,
        user_id: Scope = None,
        agent_id: Scope = None,
        run_id: Scope = None,
        where: Where = None,
        offset: Annotated[int, Field(ge=0, description="memories to skip")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_K, description="memories per page")] = 20,
        full: Full = False,
    ) -> ListResult:
        """List the stored memories passing the filters, oldest first, a page at a time."""
        with refusals(self.mem.path):
            page = self.mem.list(
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
                where=where,
                offset=offset,
                limit=limit + 1,  # one more than shown: is there a next page?
            )
        more = len(page) > limit
        return ListResult(
            memories=[MemoryOut.of(m, ranked=False, full=full) for m in page[:limit]],
            next_offset=offset + limit if more else None,
        )

    def history(self, id: MemoryId) -> HistoryResult:
        """A memory's changes, oldest first: when it was added, updated or deleted (the text
        of a deleted memory is erased)."""
        with refusals(self.mem.path, id):
            events = self.mem.history(id)
        if not events:
            raise not_found(id)
        return HistoryResult(id=id, events=[HistoryEvent.of(e) for e in events])

    def explain(self, id: MemoryId) -> Lineage:
        """Where a memory came from: for a consolidated fact, the turns it was distilled from."""
        memory = self.stored(id)
        with refusals(self.mem.path, id):
            return Lineage.of(memory, self.mem.explain(id, include_parents=True))
