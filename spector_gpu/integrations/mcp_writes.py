"""The MCP server's write tools: ``remember``, ``update``, ``delete``, ``forget``,
``consolidate`` (left out of a ``--read-only`` server)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from ..errors import DuplicateIdError
from .mcp_arguments import (
    ExternalId,
    Importance,
    MemoryId,
    Metadata,
    Scope,
    SessionId,
    Speaker,
    Tags,
)
from .mcp_errors import ToolRefusalError, not_found, refusals
from .mcp_models import ConsolidateResult, DeleteResult, ForgetResult, MemoryOut, RememberResult

if TYPE_CHECKING:
    from .mcp_reads import ReadTools

__all__ = ["WriteTools"]


class WriteTools:
    """The write tools over the handle of ``reads`` (which they use to find memories)."""

    def __init__(self, reads: ReadTools) -> None:
        self.reads = reads
        self.mem = reads.mem

    def remember(
        self,
        text: Annotated[str, Field(min_length=1, description="what to remember")],
        session_id: SessionId = None,
        speaker: Speaker = "",
        importance: Importance = 1.0,
        tags: Tags = None,
        external_id: ExternalId = None,
        upsert: Annotated[
            bool, Field(description="update the memory already holding external_id instead")
        ] = False,
        metadata: Metadata = None,
        user_id: Scope = None,
        agent_id: Scope = None,
        run_id: Scope = None,
    ) -> RememberResult:
        """Store a memory durably; returns its id. A fact or note needs no session; turns of
        one conversation share a session_id."""
        fields: dict[str, Any] = {
            "session_id": session_id,
            "speaker": speaker,
            "importance": importance,
            "tags": tags or (),
            "external_id": external_id,
            "metadata": metadata,
            "user_id": user_id,
            "agent_id": agent_id,
            "run_id": run_id,
            "upsert": upsert,
        }
        try:
            with refusals(self.mem.path):
                mid = self.mem.remember(text, **fields)
        except ToolRefusalError as exc:
            if isinstance(exc.__cause__, DuplicateIdError):
                raise self._duplicate(external_id, user_id, agent_id, run_id) from exc
            # the engine names the item of a batch; this call has one
            message = str(exc).removeprefix("items[0].").removeprefix("items[0]: ")
            raise ToolRefusalError(message) from exc.__cause__
        return RememberResult(id=mid, text=text)

    def _duplicate(self, external_id: str | None, *scope: str | None) -> ToolRefusalError:
        holder = self.mem.get_by_external_id(
            str(external_id), user_id=scope[0], agent_id=scope[1], run_id=scope[2]
        )
        who = f" by memory {holder.id}" if holder is not None else ""
        return ToolRefusalError(
            f"external_id {external_id!r} is already used in this scope{who}; pass "
            '"upsert": true to update that memory instead, or choose another external_id'
        )

    def update(
        self,
        id: MemoryId,
        text: Annotated[str | None, Field(min_length=1, description="the new text")] = None,
        metadata: Metadata = None,
        importance: Importance | None = None,
        tags: Tags = None,
    ) -> MemoryOut:
        """Correct a memory in place (same id; its previous version stays in its history)."""
        if text is None and metadata is None and importance is None and tags is None:
            raise ToolRefusalError("update needs text, metadata, importance or tags")
        self.reads.stored(id)
        with refusals(self.mem.path, id):
            self.mem.update(id, text=text, metadata=metadata, importance=importance, tags=tags)
        return MemoryOut.of(self.reads.stored(id), ranked=False)

    def delete(
        self,
        id: MemoryId,
        cascade: Annotated[bool, Field(description="also facts consolidated only from it")] = False,
    ) -> DeleteResult:
        """Erase a memory: it is never recalled again and its text leaves the store."""
        self.reads.stored(id)  # an unknown id is an error result, not a silent no-op
        with refusals(self.mem.path, id):
            deleted = self.mem.delete_batch([id], cascade=cascade)
        if deleted == 0:  # deleted by another call since
            raise not_found(id)
        return DeleteResult(id=id, deleted=deleted)

    def forget(self, id: MemoryId) -> ForgetResult:
        """Make a memory harder to recall (lowers its retrieval strength; it stays stored)."""
        self.reads.stored(id)
        with refusals(self.mem.path, id):
            self.mem.forget(id)
        strength = self.reads.stored(id).retrieval_strength
        return ForgetResult(id=id, retrieval_strength=float(strength))

    def consolidate(self) -> ConsolidateResult:
        """Distil the conversation turns not yet consolidated into semantic facts."""
        with refusals(self.mem.path):
            return ConsolidateResult.of(self.mem.consolidate())
