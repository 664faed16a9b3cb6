"""The MCP server (``spector-gpu mcp --store DIR``) driven by the official SDK's own client over
a real subprocess: typed schemas, structured results, error results that keep the session
alive, nothing but JSON-RPC on stdout, and data that survives a restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

# The stdio client passes only a few variables (HOME, PATH, ...) to the server: give it the
# ones the test run depends on.
_ENV = {
    k: v
    for k, v in os.environ.items()
    if k.startswith("SPECTOR_") or k in {"PYTHONPATH", "VIRTUAL_ENV"}
} | {"PYTHONUNBUFFERED": "1", "SPECTOR_DENSE__DEVICE": "cpu"}

TURNS = [
    "Ann moved to Lisbon in May",
    "Ann adopted a dog called Pixel",
    "Bo started a job at the pottery studio",
]


def _server(store: Path) -> StdioServerParameters:
    args = ["-m", "spector_gpu.cli", "mcp", "--store", str(store), "--device", "cpu"]
    return StdioServerParameters(command=sys.executable, args=args, env=_ENV)


async def _session(store: Path, errlog: Any, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """Initialize, list tools, then make ``calls`` in order; returns (tools, results)."""
    async with (
        stdio_client(_server(store), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        results = [await session.call_tool(name, args) for name, args in calls]
        return tools, results


def _run(tmp_path: Path, store: Path, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    with open(tmp_path / "server-stderr.log", "a", encoding="utf-8") as err:
        return anyio.run(_session, store, err, calls)


def _error_text(result: Any) -> str:
    assert result.is_error, result
    assert result.structured_content is None
    return str(result.content[0].text)


def test_tools_schemas_results_and_errors(tmp_path: Path) -> None:
    store = tmp_path / "mem"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("remember", {"text": t, "session_id": 1, "speaker": "Ann"}) for t in TURNS
    ]
    calls += [
        ("recall", {"query": "where does Ann live now", "k": 2}),
        ("get", {"id": "0000000000000"}),  # well-formed, not stored
        ("get", {"id": "not-an-id"}),  # malformed
        ("recall", {"query": "dog", "k": 0}),
        ("recall", {"query": "   "}),
        ("remember", {}),
        ("no_such_tool", {}),
        ("remember", {"text": "typo", "userid": "ann"}),
        ("consolidate", {}),
    ]
    tools, results = _run(tmp_path, store, calls)

    assert set(tools) == {
        "remember",
        "recall",
        "get",
        "list",
        "history",
        "forget",
        "delete",
        "update",
        "consolidate",
        "explain",
    }
    recall_in = tools["recall"].input_schema
    assert recall_in["required"] == ["query"]
    assert recall_in["additionalProperties"] is False
    assert recall_in["properties"]["k"]["minimum"] == 1
    assert recall_in["properties"]["query"]["minLength"] == 1
    assert tools["recall"].output_schema is not None
    assert "hits" in tools["recall"].output_schema["properties"]
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["delete"].annotations.destructive_hint is True

    ids = [r.structured_content["id"] for r in results[:3]]
    assert all(not r.is_error for r in results[:3]) and len(set(ids)) == 3
    hits = results[3].structured_content["hits"]
    assert hits[0]["id"] == ids[0] and hits[0]["text"] == TURNS[0]
    assert len(hits) == 2 and 1.0 >= hits[0]["score"] >= hits[1]["score"] >= 0.0
    assert set(hits[0]) == {"id", "text", "score", "type", "time", "session_id"}
    assert hits[0]["session_id"] == 1 and hits[0]["time"].endswith("Z")

    assert _error_text(results[4]) == "no memory with id '0000000000000' in this store"
    assert _error_text(results[5]) == "no memory with id 'not-an-id' in this store"
    assert _error_text(results[6]) == "invalid arguments for recall: k must be at least 1, got 0"
    assert "query" in _error_text(results[7])
    assert _error_text(results[8]) == "invalid arguments for remember: text is required"
    assert "no_such_tool" in _error_text(results[9])
    assert "'userid' is not an argument" in _error_text(results[10])
    # after every error above, the session still served a successful call (and the typo
    # stored nothing)
    facts = results[11].structured_content
    assert not results[11].is_error and facts["sessions"] == [1] and facts["fact_ids"]
    assert facts["turns_consolidated"] == 3


def test_explain_forget_and_restart(tmp_path: Path) -> None:
    store = tmp_path / "mem"
    first = [("remember", {"text": t, "session_id": 3, "speaker": "Ann"}) for t in TURNS]
    first.append(("consolidate", {}))
    _, results = _run(tmp_path, store, first)
    turn_ids = [r.structured_content["id"] for r in results[:3]]
    fact_id = results[3].structured_content["fact_ids"][0]

    # a second server process serves what the first one stored
    second = [
        ("explain", {"id": fact_id}),
        ("explain", {"id": turn_ids[0]}),
        ("get", {"id": turn_ids[1]}),
        ("forget", {"id": turn_ids[1]}),
    ]
    _, (lineage, original, before, forgotten) = _run(tmp_path, store, second)
    lin = lineage.structured_content
    assert lin["consolidated_from"] and lin["memory"]["id"] == fact_id
    assert set(lin["parent_ids"]) == set(turn_ids)
    assert {p["text"] for p in lin["parents"]} == set(TURNS)
    assert original.structured_content["consolidated_from"] is False
    assert before.structured_content["text"] == TURNS[1]
    after = forgotten.structured_content["retrieval_strength"]
    assert not forgotten.is_error and after < 1.0


def test_scopes_filters_update_and_delete(tmp_path: Path) -> None:
    store = tmp_path / "mem"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("remember", {"text": TURNS[0], "user_id": "ann", "metadata": {"topic": "moving"}}),
        ("remember", {"text": TURNS[1], "user_id": "ann", "metadata": {"topic": "pets"}}),
        ("remember", {"text": TURNS[2], "user_id": "bo", "metadata": {"topic": "work"}}),
    ]
    _, results = _run(tmp_path, store, calls)
    ann_move, ann_dog, bo_job = (r.structured_content["id"] for r in results)
    calls = [
        ("recall", {"query": "Ann", "k": 5, "user_id": "ann", "full": True}),
        ("recall", {"query": "Ann", "k": 5, "where": {"topic": "pets"}}),
        ("update", {"id": ann_move, "text": "Ann moved to Porto in June"}),
        ("delete", {"id": ann_dog}),
        ("get", {"id": ann_dog}),
        ("delete", {"id": ann_dog}),
        ("update", {"id": bo_job}),
        ("recall", {"query": "x", "where": {"topic": {"$bogus": 1}}}),
        ("recall", {"query": "Ann moved", "k": 5}),
        ("list", {"user_id": "ann"}),
        ("history", {"id": ann_move}),
        ("history", {"id": ann_dog}),
    ]
    _, results = _run(tmp_path, store, calls)
    scoped, filtered, upd, dele, gone, again, empty, bad, after = results[:9]
    listed, moved, erased = (r.structured_content for r in results[9:])
    assert {h["id"] for h in scoped.structured_content["hits"]} == {ann_move, ann_dog}
    assert [h["id"] for h in filtered.structured_content["hits"]] == [ann_dog]
    assert filtered.structured_content["hits"][0]["metadata"] == {"topic": "pets"}
    assert all(h["details"]["version"] == 1 for h in scoped.structured_content["hits"])
    changed = upd.structured_content
    assert changed["text"] == "Ann moved to Porto in June" and "details" not in changed
    assert dele.structured_content == {"id": ann_dog, "deleted": 1}
    assert _error_text(gone) == _error_text(again) == f"no memory with id {ann_dog!r} in this store"
    assert "update needs" in _error_text(empty)
    assert "$bogus" in _error_text(bad)
    texts = [h["text"] for h in after.structured_content["hits"]]
    assert "Ann moved to Porto in June" in texts and TURNS[0] not in texts
    assert TURNS[1] not in texts
    assert [m["id"] for m in listed["memories"]] == [ann_move] and "next_offset" not in listed
    assert [e["event"] for e in moved["events"]] == ["ADD", "UPDATE"]
    assert moved["events"][1]["text"] == "Ann moved to Porto in June"
    assert moved["events"][1]["previous_text"] == TURNS[0]
    assert [e["event"] for e in erased["events"]] == ["ADD", "DELETE"]
    assert all(e["deleted"] for e in erased["events"])


def test_stdout_carries_only_json_rpc(tmp_path: Path) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"text": "raw wire"}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get"}},
    ]
    # -v: INFO logging while serving, which must all go to stderr
    args = _server(tmp_path / "mem").args
    cmd = [sys.executable, *args[:2], "-v", *args[2:]]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **_ENV},
    )
    watchdog = threading.Timer(120, proc.kill)  # a hung server fails the test, not the run
    watchdog.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        proc.stdin.flush()
        lines = [proc.stdout.readline() for _ in range(3)]  # the three responses
        rest, err = proc.communicate()  # closes stdin: end of input, the server shuts down
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    messages = [json.loads(line) for line in [*lines, *rest.splitlines()]]
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    by_id = {m["id"]: m for m in messages}
    assert set(by_id) == {1, 2, 3}
    assert by_id[2]["result"]["isError"] is False
    assert by_id[2]["result"]["structuredContent"]["text"] == "raw wire"
    assert by_id[3]["result"]["isError"] is True  # missing id argument: an error result
    assert "serving" in err  # the INFO log went to stderr
