"""An MCP server over one memory store (optional extra ``mcp``; the official SDK, 2.x).

Run it as ``spector-gpu mcp --store DIR`` (stdio transport). A desktop client starts it
from its config, e.g. ``claude_desktop_config.json``::

    {"mcpServers": {"spector-memory": {
        "command": "/abs/path/to/venv/bin/spector-gpu",
        "args": ["mcp", "--store", "/abs/path/to/memory"]}}}

Tools (strict input schemas: an unknown argument is refused; bounds are the engine's;
structured results, see :mod:`.mcp_models`): ``remember``, ``update``, ``delete`` (erasure),
``forget`` (lower a memory's retrieval strength), ``consolidate`` — and the read tools
``recall`` (query, k, ``min_score``, scopes, a metadata ``where``), ``get``, ``list``,
``history``, ``explain`` (lineage naming the parent turns). Each carries ``readOnlyHint``,
``destructiveHint`` and ``idempotentHint``; the server reports the package's version.

One process writes a store at a time (the writer lock). ``read_only=True``
(``--read-only``) serves only the read tools from a handle that takes no lock, so any number
of hosts share a store beside the one that writes; a second writer is refused at start with
an error saying so.

Errors: a refused call is an MCP error result of one line in the project's words
(:mod:`.mcp_errors`); the session keeps serving. A line of input that is not a JSON-RPC
message is answered with a JSON-RPC error (:mod:`.mcp_wire`). stdout is the JSON-RPC
channel, so the store is opened and logging is pointed at stderr before serving starts.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import SpectorError, StoreLockedError
from ._extras import missing_extra

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
    from pydantic import BaseModel, ConfigDict
    from pydantic import ValidationError as ArgumentsError
except ImportError as exc:
    raise missing_extra("mcp", "mcp", exc) from exc

from .mcp_errors import ToolRefusalError, arguments_message, without_paths
from .mcp_reads import ReadTools
from .mcp_wire import answered_stdio, refuse_session
from .mcp_writes import WriteTools

if TYPE_CHECKING:
    import os

    from mcp.server.mcpserver import Context

    from ..memory import SpectorMemory

__all__ = ["READ_TOOLS", "WRITE_TOOLS", "build_server", "serve"]

log = logging.getLogger(__name__)

# name -> (readOnlyHint, destructiveHint, idempotentHint)
READ_TOOLS = dict.fromkeys(("recall", "get", "list", "history", "explain"), (True, False, True))
WRITE_TOOLS = {
    "remember": (False, False, False),
    "update": (False, True, False),  # replaces the text (the old version stays in history)
    "delete": (False, True, True),
    "forget": (False, False, False),  # lowers retrieval strength a step each call
    "consolidate": (False, False, True),  # a second call finds nothing new to distil
}
# strict: as in the engine, "5" is not a session id, true is not a k and "no" is not false
# (a JSON object or list sent as a string is still read: the SDK parses it before checking)
_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, arbitrary_types_allowed=True)


def _tool(name: str, fn: Callable[..., Any]) -> Tool:
    """``fn`` as a tool whose arguments are checked strictly (unknown ones refused) and
    which carries its hints."""
    ro, destructive, idempotent = (READ_TOOLS | WRITE_TOOLS)[name]
    hints = ToolAnnotations(
        read_only_hint=ro,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )
    doc = inspect.cleandoc(fn.__doc__ or "")
    tool = Tool.from_function(fn, name=name, description=doc, annotations=hints)
    loose = tool.fn_metadata.arg_model
    strict = cast(
        "type[BaseModel]",
        type(loose.__name__, (loose,), {"model_config": _STRICT, "__module__": __name__}),
    )
    return tool.model_copy(
        update={
            "fn_metadata": tool.fn_metadata.model_copy(update={"arg_model": strict}),
            "parameters": strict.model_json_schema(by_alias=True),
        }
    )


def _tools(mem: SpectorMemory) -> list[Tool]:
    reads = ReadTools(mem)
    tools = [
        _tool("recall", reads.recall),
        _tool("get", reads.get),
        _tool("list", reads.list_memories),
        _tool("history", reads.history),
        _tool("explain", reads.explain),
    ]
    if not mem.read_only:
        writes = WriteTools(reads)
        tools[:0] = [
            _tool("remember", writes.remember),
            _tool("update", writes.update),
            _tool("delete", writes.delete),
            _tool("forget", writes.forget),
            _tool("consolidate", writes.consolidate),
        ]
    return tools


class _MemoryServer(MCPServer[Any]):
    """The SDK's server with this project's error messages and stdio wire."""

    def __init__(self, name: str, *, tools: list[Tool], read_only: bool, **settings: Any) -> None:
        super().__init__(name, tools=tools, **settings)
        self.known = {t.name: t for t in tools}
        self.read_only = read_only

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:  # a defect: the SDK logs its traceback to stderr
            raise UnexpectedToolError(
                f"{name} failed inside the server; the server's log (stderr) has the details"
            ) from exc.__cause__
        except ToolError as exc:
            raise ToolError(self._message(name, exc)) from exc

    def _message(self, name: str, exc: ToolError) -> str:
        cause = exc.__cause__  # the SDK's wrapper around what the tool or validator raised
        while isinstance(cause, ToolError) and not isinstance(cause, ToolRefusalError):
            cause = cause.__cause__
        if isinstance(cause, ToolRefusalError):
            return str(cause)
        tool = self.known.get(name)
        if tool is None:
            if self.read_only and name in WRITE_TOOLS:
                return f"{name} is not available: this server is read-only (--read-only)"
            names = ", ".join(self.known)
            return f"unknown tool {name!r}; the tools are: {names}"
        if isinstance(cause, ArgumentsError):
            return arguments_message(name, cause, list(tool.parameters.get("properties", {})))
        return str(cause or exc)

    async def run_stdio_async(self) -> None:
        # the SDK's own run_stdio_async, over the wire that answers every line
        async with answered_stdio() as (read, write):
            server = self._lowlevel_server
            await server.run(read, write, server.create_initialization_options())


def build_server(mem: SpectorMemory, *, name: str = "spector-memory") -> MCPServer[Any]:
    """An ``MCPServer`` whose tools read (and, unless ``mem`` is read-only, write) ``mem``,
    which the caller keeps open. Tools run on the SDK's worker threads; the handle
    serialises its own writes."""
    from .. import __version__

    access = "read-only: recall, fetch and list memories, see their history and lineage"
    if not mem.read_only:
        access = (
            "remember facts and conversation turns, recall them by meaning, list them, fetch, "
            "correct or erase one by id, and see its history and where a consolidated fact "
            "came from"
        )
    return _MemoryServer(
        name,
        tools=_tools(mem),
        read_only=mem.read_only,
        version=__version__,
        instructions=f"Long-term memory ({access}).",
        log_level="WARNING",
    )


def serve(
    store: str | os.PathLike[str],
    *,
    device: str | None = None,
    log_level: str = "WARNING",
    read_only: bool = False,
) -> None:
    """Open the store at ``store`` (creating it if needed, unless ``read_only``) and serve it
    over stdio until the client disconnects; logs go to stderr.

    Raises:
        SpectorError: the store cannot be opened — ``StoreLockedError`` when another process
            writes it and ``read_only`` is False — after answering the client's requests with a
            JSON-RPC error saying why, until it closes stdin.
    """
    from ..memory import SpectorMemory

    # basicConfig is a no-op once the root logger has handlers, so ours (stderr) wins over the
    # SDK's; nothing may reach stdout before the transport takes it over.
    logging.basicConfig(
        stream=sys.stderr, level=log_level, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        mem = SpectorMemory.open(store, device=device, read_only=read_only)
    except SpectorError as exc:
        why = str(exc)
        if isinstance(exc, StoreLockedError):
            why = (
                f"{store}: another process writes this store (it holds the writer lock); start "
                "this server with --read-only to share the store beside that writer, or stop "
                "the writer"
            )
        log.error("%s", why)
        # the host learns why, not only that the connection closed
        refuse_session(f"cannot serve the memory store: {without_paths(why, Path(store))}")
        if isinstance(exc, StoreLockedError):
            raise StoreLockedError(why) from exc
        raise
    with mem:
        log.info("serving %s over stdio%s", mem.path, " (read-only)" if read_only else "")
        build_server(mem).run(transport="stdio")
