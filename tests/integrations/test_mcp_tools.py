"""The MCP server's tools, driven in-process by the official SDK's ``Client``: annotations and
version, strict schemas whose bounds are the engine's, one-line errors in the project's words,
no session glue, compact hits, paging, and a read-only server."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

import spector_gpu
from spector_gpu import SpectorMemory
from spector_gpu.errors import ValidationError
from spector_gpu.integrations.mcp_errors import without_paths
from spector_gpu.integrations.mcp_models import iso_time
from spector_gpu.integrations.mcp_server import READ_TOOLS, WRITE_TOOLS, build_server

FACTS = [
    "Ann moved to Lisbon in May",
    "Bo likes pottery",
    "Ann adopted a dog called Pixel",
    "Cy plays the cello on Sundays",
    "Bo works at the harbour",
]

Call = tuple[str, dict[str, Any]]


def _open(tmp_path: Path, name: str = "mem", **kw: Any) -> SpectorMemory:
    return SpectorMemory.open(tmp_path / name, device="cpu", **kw)


def _session(mem: SpectorMemory, body: Callable[[Client], Any]) -> Any:
    async def run() -> Any:
        async with Client(build_server(mem)) as client:
            return await body(client)

    return anyio.run(run)


def _calls(mem: SpectorMemory, calls: list[Call]) -> list[Any]:
    async def body(client: Client) -> list[Any]:
        return [await client.call_tool(name, args) for name, args in calls]

    return list(_session(mem, body))


def _error(result: Any) -> str:
    assert result.is_error, result
    return str(result.content[0].text)


def test_annotations_version_and_strict_schemas(tmp_path: Path) -> None:
    async def body(client: Client) -> Any:
        return client.server_info, (await client.list_tools()).tools

    with _open(tmp_path) as mem:
        info, tools = _session(mem, body)
    assert info.version == spector_gpu.__version__
    assert {t.name for t in tools} == set(READ_TOOLS) | set(WRITE_TOOLS)
    for t in tools:
        hints = t.annotations
        assert None not in (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint)
        assert hints.read_only_hint is (t.name in READ_TOOLS)
        assert t.input_schema["additionalProperties"] is False, t.name
        assert "\n    " not in (t.description or "")  # docstrings dedented
    by_name = {t.name: t.annotations for t in tools}
    assert by_name["delete"].destructive_hint is True and by_name["delete"].idempotent_hint
    assert by_name["remember"].destructive_hint is False


# (argument, the last value the engine accepts, the first it refuses), on each side
BOUNDS: list[tuple[str, Any, Any]] = [
    ("importance", 0.05, 0.049),
    ("importance", 10.0, 10.01),
    ("tags", ["t"] * 64, ["t"] * 65),
    ("speaker", "s" * 1024, "s" * 1025),
    ("external_id", "e" * 1024, "e" * 1025),
    ("user_id", "u" * 256, "u" * 257),
    ("session_id", (1 << 63) - 1, 1 << 63),
    ("session_id", -(1 << 63), -(1 << 63) - 1),
]


@pytest.mark.parametrize(("field", "ok", "bad"), BOUNDS)
def test_bounds_are_the_engines(tmp_path: Path, field: str, ok: Any, bad: Any) -> None:
    with _open(tmp_path) as mem:
        engine_side = mem.remember("engine side", **{field: ok})
        with pytest.raises(ValidationError):
            mem.remember("engine side", **{field: bad})
        mem.delete(engine_side)  # its external_id free again
        good, refused = _calls(
            mem,
            [
                ("remember", {"text": "tool side", field: ok}),
                ("remember", {"text": "x", field: bad}),
            ],
        )
        assert not good.is_error
        assert _error(refused).startswith(f"invalid arguments for remember: {field}")
        assert mem.count() == 1  # the refused call stored nothing


def test_errors_are_one_line_in_the_projects_words(tmp_path: Path) -> None:
    calls: list[Call] = [
        ("remember", {"text": "", "importance": 0, "userid": "ann"}),
        ("remember", {"text": "x", "tags": "a"}),
        ("remember", {"text": "x", "importance": "nan"}),
        ("recall", {"query": "x", "k": 1000, "min_score": 2}),
        ("recall", {"query": "x", "where": {"a": {"$bogus": 1}}}),
        ("list", {"limit": 0, "offset": -1}),
        ("update", {"id": "0000000000000"}),
        ("nope", {}),
        ("recall", {"query": "x", "k": True, "session_id": "5"}),
        ("delete", {"id": "0000000000000", "cascade": "no"}),
        ("list", {"where": {"$and": []}}),
    ]
    with _open(tmp_path) as mem:
        texts = [_error(r) for r in _calls(mem, calls)]
    for text in texts:
        assert "\n" not in text and "pydantic" not in text and "http" not in text
        assert str(tmp_path) not in text and "Error executing" not in text
    assert texts[0] == (
        "invalid arguments for remember: text must not be empty; importance must be at least "
        "0.05, got 0; 'userid' is not an argument of this tool (it takes text, session_id, "
        "speaker, importance, tags, external_id, upsert, metadata, user_id, agent_id, run_id)"
    )
    assert "tags must be a list" in texts[1]
    assert texts[2].endswith('importance must be a number, got "nan"')
    assert "k must be at most 100" in texts[3] and "min_score must be at most 1" in texts[3]
    assert "$bogus" in texts[4]
    assert "limit must be at least 1" in texts[5] and "offset must be at least 0" in texts[5]
    assert texts[6] == "update needs text, metadata, importance or tags"
    assert texts[7].startswith("unknown tool 'nope'; the tools are: remember")
    assert texts[8] == (  # no coercion, as in the engine
        "invalid arguments for recall: k must be an integer, got true; session_id must be an "
        'integer, got "5"'
    )
    assert texts[9] == 'invalid arguments for delete: cascade must be true or false, got "no"'
    assert texts[10].startswith("where.$and: ")


def test_store_paths_are_taken_out_of_engine_messages(tmp_path: Path) -> None:
    store = tmp_path / "mem"
    message = f"{store}/episodic.log: record 3 is damaged; {store} needs a check"
    assert (
        without_paths(message, store)
        == "episodic.log: record 3 is damaged; the store needs a check"
    )


def test_not_found_reads_the_same_in_every_tool(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        gone = mem.remember("soon erased")
        mem.delete(gone)
        calls: list[Call] = []
        for mid in ("0000000000000", "not-an-id", gone):
            calls += [(name, {"id": mid}) for name in ("get", "delete", "forget", "explain")]
            calls.append(("update", {"id": mid, "text": "new"}))
        calls.append(("history", {"id": "0000000000000"}))
        texts = [_error(r) for r in _calls(mem, calls)]
    expected = [
        f"no memory with id {mid!r} in this store" for mid in ("0000000000000", "not-an-id", gone)
    ]
    assert texts == [e for e in expected for _ in range(5)] + [expected[0]]


def test_duplicate_external_id_advises_upsert_which_the_tool_takes(tmp_path: Path) -> None:
    first: dict[str, Any] = {"text": "Ann lives in Lisbon", "external_id": "home", "user_id": "ann"}
    again = {**first, "text": "Ann lives in Porto"}
    with _open(tmp_path) as mem:
        made, refused, upserted, other_scope = _calls(
            mem,
            [
                ("remember", first),
                ("remember", again),
                ("remember", {**again, "upsert": True}),
                ("remember", {**again, "user_id": "bo"}),
            ],
        )
        mid = made.structured_content["id"]
        assert _error(refused) == (
            f"external_id 'home' is already used in this scope by memory {mid}; pass "
            '"upsert": true to update that memory instead, or choose another external_id'
        )
        assert upserted.structured_content["id"] == mid
        assert mem.get(mid).text == "Ann lives in Porto" and mem.get(mid).version == 2
        assert other_scope.structured_content["id"] != mid


def test_remember_without_a_session_is_not_glued_to_its_neighbour(tmp_path: Path) -> None:
    query = "where does Ann live?"
    with _open(tmp_path, "tool") as mem:
        _calls(mem, [("remember", {"text": t}) for t in FACTS])
        hits = _calls(mem, [("recall", {"query": query, "k": 5})])[0].structured_content["hits"]
    with _open(tmp_path, "engine") as ref:
        for t in FACTS:
            ref.remember(t)  # no session: each embedded as exactly its text
        want = ref.recall(query, spector_gpu.RecallOptions(k=5))
    with _open(tmp_path, "glued") as glued:
        for t in FACTS:
            glued.remember(t, session_id=0)  # the old default: one conversation
        old = glued.recall(query, spector_gpu.RecallOptions(k=5))
    assert [(h["text"], h["score"]) for h in hits] == [
        (w.text, pytest.approx(w.score)) for w in want
    ]
    assert [w.score for w in want] != pytest.approx([o.score for o in old])
    assert all("session_id" not in h for h in hits)


def test_compact_hits_details_on_request_and_min_score(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        for t in FACTS:
            mem.remember(t, user_id="ann", metadata={"n": len(t)})
        plain, full, floor = (
            r.structured_content
            for r in _calls(
                mem,
                [
                    ("recall", {"query": "Ann Lisbon dog", "k": 5}),
                    ("recall", {"query": "Ann Lisbon dog", "k": 5, "full": True}),
                    ("recall", {"query": "Ann Lisbon dog", "k": 5, "min_score": 0.5}),
                ],
            )
        )
        stored = {m.id: m for m in mem.list()}
    hit = plain["hits"][0]
    assert set(hit) == {"id", "text", "score", "type", "time", "user_id", "metadata"}
    moment = datetime.fromisoformat(hit["time"].replace("Z", "+00:00"))
    assert int(moment.timestamp() * 1000) == stored[hit["id"]].timestamp_ms
    details = full["hits"][0]["details"]
    assert details["version"] == 1 and details["created_at"].endswith("Z")
    assert "relevance" not in json.dumps(full) and "timestamp_ms" not in details
    scores = [h["score"] for h in plain["hits"]]
    kept = [h["id"] for h in plain["hits"] if h["score"] >= 0.5]
    assert [h["id"] for h in floor["hits"]] == kept and scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores) and kept and len(kept) < len(scores)


def test_list_pages_through_every_memory(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        ids = [mem.remember(t) for t in FACTS]

        async def body(client: Client) -> list[str]:
            seen: list[str] = []
            offset: int | None = 0
            while offset is not None:
                page = await client.call_tool("list", {"offset": offset, "limit": 2})
                doc = page.structured_content
                seen += [m["id"] for m in doc["memories"]]
                offset = doc.get("next_offset")
            return seen

        assert _session(mem, body) == ids


def test_read_only_server_serves_the_read_tools_only(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mid = mem.remember(FACTS[0])

    async def body(client: Client) -> Any:
        names = {t.name for t in (await client.list_tools()).tools}
        return (
            names,
            client.instructions,
            [
                await client.call_tool("remember", {"text": "x"}),
                await client.call_tool("recall", {"query": "Lisbon"}),
                await client.call_tool("get", {"id": mid}),
            ],
        )

    with _open(tmp_path, read_only=True) as ro:
        names, instructions, (write, recall, got) = _session(ro, body)
    assert names == set(READ_TOOLS)
    assert "read-only" in (instructions or "")
    assert _error(write) == "remember is not available: this server is read-only (--read-only)"
    assert recall.structured_content["hits"][0]["id"] == mid
    assert got.structured_content["text"] == FACTS[0]


def test_iso_times() -> None:
    assert iso_time(0) == "1970-01-01T00:00:00.000Z"
    assert iso_time(1_777_777_777_123) == "2026-05-03T03:09:37.123Z"
    assert iso_time(-(1 << 63)) == str(-(1 << 63))  # outside datetime's years: epoch ms
