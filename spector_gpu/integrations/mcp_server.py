"""An MCP server over one memory store (optional extra ``mcp``; the official SDK, 2.x).

Run it as ``spector-gpu mcp --store DIR`` (stdio transport). A desktop client starts it
from its config, e.g. ``claude_desktop_config.json``::

    {"mcpServers": {"spector-memory": {
        "command": "/abs/path/to/venv/bin/spector-gpu",
        "args": ["mcp", "--store", "/abs/path/to/memory"]}}}

Tools (typed input schemas, structured results; see :mod:`.mcp_models`): ``remember``,
``recall`` (query, k, scope ids and a metadata ``where`` filter), ``get``, ``update``,
``delete`` (erasure), ``forget`` (lower a memory's retrieval strength; it stays stored),
``consolidate``, ``explain`` (lineage naming the parent turns). The store is the only state:
the server holds an open handle and nothing else, so a restart serves the same memories.

Errors: an engine refusal (``SpectorError``: an unknown or malformed id, a bad field) becomes
an MCP error result carrying the engine's message, which names the field and the rule; the
SDK reports arguments its schema refuses (``k=0``, a missing ``text``) and unknown tools the
same way. The session keeps serving after every error. stdout is the JSON-RPC channel, so
the store is opened and logging is pointed at stderr before serving starts.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

from ..errors import SpectorError, UnknownIdError
from ._extras import missing_extra

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field
except ImportError as exc:
    raise missing_extra("mcp", "mcp", exc) from exc

from .mcp_models import (
    ConsolidateResult,
    DeleteResult,
    ForgetResult,
    Lineage,
    MemoryOut,
    RecallResult,
    RememberResult,
)

if TYPE_CHECKING:
    import os

    from ..memory import SpectorMemory
    from ..types import CognitiveResult

__all__ = ["build_server", "serve"]

log = logging.getLogger(__name__)

MemoryId = Annotated[str, Field(description="a memory id (TSID) returned by remember or recall")]
MAX_K = 100  # recall results per call: more than a model can read in one tool result
Scope = Annotated[str | None, Field(description="scope id (a user, agent or run)")]
Metadata = Annotated[dict[str, Any] | None, Field(description="a JSON object to keep with it")]
_WHERE = 'metadata filter, e.g. {"topic": "travel", "year": {"$gte": 2023}}'


@contextmanager
def _tool_errors() -> Iterator[None]:
    # The SDK shows the message of a ToolError to the client; any other exception becomes a
    # generic "Error executing tool", which would hide the field and rule the engine names.
    try:
        yield
    except SpectorError as exc:
        raise ToolError(str(exc)) from exc


def _stored(mem: SpectorMemory, memory_id: str) -> CognitiveResult:
    hit = mem.get(memory_id)
    if hit is None:
        raise UnknownIdError(f"no memory with id {memory_id!r} in this store")
    return hit


def _memory(mem: SpectorMemory, memory_id: str) -> MemoryOut:
    return MemoryOut.of(_stored(mem, memory_id), ranked=False)


def build_server(mem: SpectorMemory, *, name: str = "spector-memory") -> MCPServer:
    """An ``MCPServer`` whose tools read and write ``mem`` (which the caller keeps open).

    Tools run on the SDK's worker threads; the memory handle serialises its own writes.
    """
    server = MCPServer(
        name,
        instructions="Long-term memory: remember facts and conversation turns, recall them "
        "by meaning, fetch, correct or erase one by id, and see where a consolidated fact "
        "came from.",
        log_level="WARNING",
    )
    _add_writes(server, mem)
    _add_reads(server, mem)
    _add_corrections(server, mem)
    return server


def _add_writes(server: MCPServer, mem: SpectorMemory) -> None:
    @server.tool()
    def remember(
        text: Annotated[str, Field(min_length=1, description="what to remember")],
        session_id: Annotated[int, Field(ge=0, description="conversation session")] = 0,
        speaker: Annotated[str, Field(description="who said it")] = "",
        importance: Annotated[float, Field(ge=0.0, le=10.0)] = 1.0,
        tags: Annotated[list[str] | None, Field(description="labels to filter by")] = None,
        external_id: Annotated[str | None, Field(description="your own id for it")] = None,
        metadata: Metadata = None,
        user_id: Scope = None,
        agent_id: Scope = None,
        run_id: Scope = None,
    ) -> RememberResult:
        """Store a memory durably; returns its id."""
        with _tool_errors():
            mid = mem.remember(
                text,
                session_id=session_id,
                speaker=speaker,
                importance=importance,
                tags=tags or (),
                external_id=external_id,
                metadata=metadata,
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
            )
        return RememberResult(id=mid, text=text)

    @server.tool()
    def consolidate() -> ConsolidateResult:
        """Distil the conversation turns not yet consolidated into semantic facts."""
        with _tool_errors():
            return ConsolidateResult.of(mem.consolidate())


def _add_reads(server: MCPServer, mem: SpectorMemory) -> None:
    from ..types import RecallOptions

    @server.tool()
    def recall(
        query: Annotated[str, Field(min_length=1, description="what to look for")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="how many memories")] = 5,
        tags: Annotated[list[str] | None, Field(description="only memories with a tag")] = None,
        session_id: Annotated[int | None, Field(ge=0, description="only this session")] = None,
        user_id: Scope = None,
        agent_id: Scope = None,
        run_id: Scope = None,
        where: Annotated[dict[str, Any] | None, Field(description=_WHERE)] = None,
    ) -> RecallResult:
        """Recall the memories that best match a query, best first."""
        if not query.strip():
            raise ToolError("query must contain a non-whitespace character")
        with _tool_errors():
            opts = RecallOptions(
                k=k,
                tags=frozenset(tags) if tags else None,
                session_id=session_id,
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
                where=where,
            )
            hits = mem.recall(query, opts)
        return RecallResult(query=query, hits=[MemoryOut.of(h, ranked=True) for h in hits])

    @server.tool()
    def get(id: MemoryId) -> MemoryOut:
        """Fetch one memory by id."""
        with _tool_errors():
            return _memory(mem, id)

    @server.tool()
    def explain(id: MemoryId) -> Lineage:
        """Where a memory came from: for a consolidated fact, the turns it was distilled from."""
        with _tool_errors():
            memory = _stored(mem, id)
            return Lineage.of(memory, mem.explain(id, include_parents=True))


def _add_corrections(server: MCPServer, mem: SpectorMemory) -> None:
    @server.tool()
    def update(
        id: MemoryId,
        text: Annotated[str | None, Field(min_length=1, description="the new text")] = None,
        metadata: Metadata = None,
        importance: Annotated[float | None, Field(ge=0.0, le=10.0)] = None,
    ) -> MemoryOut:
        """Correct a memory in place (same id; its previous version stays in its history)."""
        if text is None and metadata is None and importance is None:
            raise ToolError("update needs text, metadata or importance")
        with _tool_errors():
            mem.update(id, text=text, metadata=metadata, importance=importance)
            return _memory(mem, id)

    @server.tool()
    def delete(
        id: MemoryId,
        cascade: Annotated[bool, Field(description="also facts consolidated only from it")] = False,
    ) -> DeleteResult:
        """Erase a memory: it is never recalled again and its text leaves the store."""
        with _tool_errors():
            _memory(mem, id)  # an unknown id is an error result, not a silent no-op
            return DeleteResult(id=id, deleted=mem.delete_batch([id], cascade=cascade))

    @server.tool()
    def forget(id: MemoryId) -> ForgetResult:
        """Make a memory harder to recall (lowers its retrieval strength; it stays stored)."""
        with _tool_errors():
            mem.forget(id)
            strength = _stored(mem, id).retrieval_strength
        return ForgetResult(id=id, retrieval_strength=float(strength))


def serve(
    store: str | os.PathLike[str], *, device: str | None = None, log_level: str = "WARNING"
) -> None:
    """Open (creating if needed) the store at ``store`` and serve it over stdio until the
    client disconnects; logs go to stderr."""
    from ..memory import SpectorMemory

    # basicConfig is a no-op once the root logger has handlers, so ours (stderr) wins over the
    # SDK's; nothing may reach stdout before the transport takes it over.
    logging.basicConfig(
        stream=sys.stderr, level=log_level, format="%(levelname)s %(name)s: %(message)s"
    )
    with SpectorMemory.open(store, device=device) as mem:
        log.info("serving %s over stdio", mem.path)
        build_server(mem).run(transport="stdio")
