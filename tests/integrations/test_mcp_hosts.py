"""Several hosts on one store, each driving ``spector-gpu mcp`` with the official SDK client
over its own subprocess: one writes, a ``--read-only`` host beside it serves the read tools and
sees the writer's commits, and a second writer is told why it cannot serve."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from spector_gpu.integrations.mcp_server import READ_TOOLS

_ENV = {k: v for k, v in os.environ.items() if k.startswith("SPECTOR_") or k == "PYTHONPATH"}
_ENV |= {"PYTHONUNBUFFERED": "1", "SPECTOR_DENSE__DEVICE": "cpu"}


def _host(store: Path, *flags: str) -> StdioServerParameters:
    args = ["-m", "spector_gpu.cli", "mcp", "--store", str(store), "--device", "cpu", *flags]
    return StdioServerParameters(command=sys.executable, args=args, env=_ENV)


def _refusal(group: BaseException) -> MCPError:
    """The MCPError inside the task groups the SDK client raises it through."""
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    assert isinstance(group, MCPError), repr(group)
    return group


async def _refused_writer(store: Path, errlog: Any) -> MCPError:
    with anyio.fail_after(120):  # a refused server answers; it never leaves the client waiting
        try:
            async with (
                stdio_client(_host(store), errlog=errlog) as (read, write),
                ClientSession(read, write) as second,
            ):
                await second.initialize()
        except BaseException as exc:  # the SDK raises it inside ExceptionGroups
            return _refusal(exc)
    raise AssertionError("a second writer initialized")


async def _hosts(store: Path, errlog: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with (
        stdio_client(_host(store), errlog=errlog) as (wr, ww),
        ClientSession(wr, ww) as writer,
    ):
        await writer.initialize()
        first = await writer.call_tool("remember", {"text": "Ann moved to Lisbon in May"})
        seen["first"] = first.structured_content["id"]
        async with (
            stdio_client(_host(store, "--read-only"), errlog=errlog) as (rr, rw),
            ClientSession(rr, rw) as reader,
        ):
            await reader.initialize()
            seen["tools"] = {t.name for t in (await reader.list_tools()).tools}
            seen["before"] = await reader.call_tool("recall", {"query": "Lisbon"})
            later = await writer.call_tool("remember", {"text": "Bo took up pottery in June"})
            seen["later"] = later.structured_content["id"]
            seen["after"] = await reader.call_tool("get", {"id": seen["later"]})
            seen["listed"] = await reader.call_tool("list", {})
            seen["write"] = await reader.call_tool("remember", {"text": "from a reader"})
            seen["second"] = await _refused_writer(store, errlog)
        seen["count"] = await writer.call_tool("list", {})
    return seen


def test_a_writer_a_reader_and_a_refused_second_writer(tmp_path: Path) -> None:
    store = tmp_path / "shared"
    with open(tmp_path / "servers.log", "w", encoding="utf-8") as errlog:
        seen = anyio.run(_hosts, store, errlog)
    assert seen["tools"] == set(READ_TOOLS)
    assert [h["id"] for h in seen["before"].structured_content["hits"]] == [seen["first"]]
    assert seen["after"].structured_content["text"] == "Bo took up pottery in June"
    listed = [m["id"] for m in seen["listed"].structured_content["memories"]]
    assert listed == [seen["first"], seen["later"]]
    assert seen["write"].is_error
    assert "read-only" in seen["write"].content[0].text
    message = seen["second"].error.message
    assert "another process writes this store" in message and "--read-only" in message
    assert str(tmp_path) not in message
    # the reader wrote nothing; the writer served on after the refused second writer
    assert len(seen["count"].structured_content["memories"]) == 2
    log = (tmp_path / "servers.log").read_text(encoding="utf-8")
    assert f"{store}: another process writes this store" in log
