"""The MCP server's stdio wire: the SDK's transport, with every line it cannot read answered.

The SDK's stdio reader drops a line that does not parse as a JSON-RPC message (malformed
JSON, a lone UTF-16 surrogate escape such as ``"\\ud800"``, JSON nested ~200 levels deep) and
sends nothing back, so a client waits forever for its answer. Here each line is checked
before the SDK reads it; one the SDK would drop is answered with a JSON-RPC error instead —
``-32700`` (parse error) when it is not JSON, ``-32600`` (invalid request) when it is JSON
the SDK refuses, carrying the request's ``id`` whenever the line has one — and the session
goes on serving. Blank lines are skipped without an answer.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)

__all__ = ["answered_stdio", "refusal", "refuse_session"]


def _depth(doc: Any) -> int:
    """Levels of arrays and objects in ``doc``, counted without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in node)
    return deepest


def _request_id(doc: Any) -> int | str | None:
    rid = doc.get("id") if isinstance(doc, dict) else None
    return (
        rid
        if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
        else None
    )


def _error(rid: int | str | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=code, message=message))


def refusal(line: str) -> JSONRPCError | None:
    """The JSON-RPC error answering ``line``, or None when the SDK reads it as a message."""
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValueError:  # pydantic's ValidationError is a ValueError
        pass
    try:
        doc = json.loads(line)
    except RecursionError:
        return _error(None, PARSE_ERROR, "Parse error: JSON nested too deeply")
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 JSON"
        return _error(None, PARSE_ERROR, f"Parse error: {reason}")
    rid = _request_id(doc)
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _error(
            rid,
            INVALID_REQUEST,
            "Invalid request: a string holds a lone UTF-16 surrogate escape (such as \\ud800); "
            "send well-formed Unicode",
        )
    try:
        jsonrpc_message_adapter.validate_python(doc, by_name=False)
    except ValueError:
        return _error(
            rid,
            INVALID_REQUEST,
            'Invalid request: not a JSON-RPC 2.0 message (a request is an object with "jsonrpc": '
            '"2.0", an "id", a "method" and optional "params")',
        )
    return _error(
        rid,
        INVALID_REQUEST,
        f"Invalid request: JSON nested {_depth(doc)} levels deep, deeper than this server reads",
    )


class _CheckedLines:
    """The lines of ``source`` that the SDK reads as messages; each other line's answer goes to
    ``answers`` (blank lines are dropped)."""

    def __init__(
        self, source: AsyncIterable[str], answers: MemoryObjectSendStream[JSONRPCError]
    ) -> None:
        self.source = source
        self.answers = answers

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async with self.answers:
            async for line in self.source:
                if not line.strip():
                    continue
                answer = refusal(line)
                if answer is None:
                    yield line
                else:
                    await self.answers.send(answer)


async def _forward(
    answers: MemoryObjectReceiveStream[JSONRPCError],
    write: MemoryObjectSendStream[SessionMessage],
) -> None:
    async with answers:
        async for answer in answers:
            try:
                await write.send(SessionMessage(answer))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the session ended: nobody is left to answer


@asynccontextmanager
async def answered_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server()`` streams, reading stdin through :func:`refusal`."""
    send, receive = anyio.create_memory_object_stream[JSONRPCError](math.inf)
    # stdin as UTF-8 text (invalid bytes replaced, as the SDK's reader does); never closed,
    # since a worker thread may still be blocked reading it when serving ends
    raw = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    lines = _CheckedLines(anyio.wrap_file(raw), send)
    async with (
        stdio_server(stdin=cast(Any, lines)) as (read, write),
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(_forward, receive, write)
        yield read, write
        tasks.cancel_scope.cancel()


def refuse_session(message: str) -> None:
    """Answer every request read from stdin with a JSON-RPC error carrying ``message`` (the
    client's ``initialize`` first), until the client closes stdin: a server that cannot serve
    says why to the host instead of closing the connection unexplained. On a terminal (a
    person, not a host) it returns at once: the error is on stderr already."""
    if sys.stdin.isatty():
        return
    for line in sys.stdin:
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            continue
        rid = _request_id(doc)
        if rid is not None and "method" in doc:
            answer = _error(rid, INTERNAL_ERROR, message)
            sys.stdout.write(answer.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
            sys.stdout.flush()
