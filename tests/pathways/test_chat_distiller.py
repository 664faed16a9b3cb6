"""The language-model distiller against a local stub server (tests/chat_stub.py): canned,
malformed, slow and cut answers; nothing written on failure; never a network call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_stub import ChatStub, Reply

from spector_gpu import (
    ChatDistiller,
    ChatEndpoint,
    MemoryType,
    ModelEndpointError,
    SpectorMemory,
    ValidationError,
)
from spector_gpu.config import LLMConfig
from spector_gpu.pathways.chat_distiller import DISTILL_PROMPT

FAST = {"store": {"durability": "none"}}
TURNS = [
    ("Ann", "Hi Bo! I moved to Lisbon in May with my partner Rui."),
    ("Bo", "How is the new flat?"),
    ("Ann", "Small, but it has a view of the Tagus. I moved there for work."),
]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    with SpectorMemory.open(tmp_path / "s", config=FAST) as m:
        m.remember_batch(
            [
                {"text": t, "speaker": s, "session_id": 3, "timestamp_ms": 1_683_504_000_000 + i}
                for i, (s, t) in enumerate(TURNS)
            ]
        )
        yield m


def _ids(mem: SpectorMemory) -> list[str]:
    return [r.id for r in mem.list(memory_type=MemoryType.EPISODIC)]


def _distiller(stub: ChatStub, **kw: Any) -> ChatDistiller:
    opts: dict[str, Any] = {"retries": 2, "backoff_s": 0.0, "timeout_s": 5.0} | kw
    return ChatDistiller(ChatEndpoint(stub.url, "stub-model", opts.pop("api_key", None), **opts))


def _nothing_written(mem: SpectorMemory) -> None:
    assert mem.count(MemoryType.SEMANTIC) == 0
    assert all(not r.consolidated for r in mem.list())
    assert mem.session_provenance(3) == []


def test_canned_facts_are_written_with_parents_and_spans(mem: SpectorMemory) -> None:
    ids = _ids(mem)
    answer = {
        "facts": [
            {
                "text": "Ann moved to Lisbon in May with Rui.",
                "parents": [ids[0], ids[2]],
                "quote": "I moved to Lisbon in May",
            },
            {"text": "Ann's flat has a view of the Tagus.", "parents": [ids[2]], "quote": None},
        ]
    }
    with ChatStub(answer) as stub:
        report = mem.consolidate(distiller=_distiller(stub, api_key="k-123"))
    assert len(stub.requests) == 1
    req = stub.requests[0]
    assert req["model"] == "stub-model" and req["temperature"] == 0
    assert req["response_format"] == {"type": "json_object"}
    assert req["messages"][0] == {"role": "system", "content": DISTILL_PROMPT}
    doc = stub.user_document()
    assert doc["session"] == 3 and doc["context"] == []
    assert [t["id"] for t in doc["new_turns"]] == ids
    assert doc["new_turns"][0]["date"] == "2023-05-08" and doc["new_turns"][0]["speaker"] == "Ann"
    assert stub.headers[0]["Authorization"] == "Bearer k-123"
    facts = [mem.get(f) for f in report.fact_ids]
    assert [f.text for f in facts if f] == [answer["facts"][0]["text"], answer["facts"][1]["text"]]
    first = facts[0]
    assert first is not None and first.metadata == {"parents": [ids[0], ids[2]]}
    assert first.source_uri == f"doc:{ids[0]}" and first.source_span is not None
    start, end = first.source_span
    assert TURNS[0][1].encode()[start:end].decode() == "I moved to Lisbon in May"
    assert all(r.consolidated for r in mem.list(memory_type=MemoryType.EPISODIC))
    lineage = mem.explain(report.fact_ids[0])
    assert lineage is not None and lineage.session_id == 3


def test_a_quote_that_is_not_in_its_parent_is_dropped_not_the_fact(mem: SpectorMemory) -> None:
    ids = _ids(mem)
    answer = {"facts": [{"text": "Ann lives in Lisbon.", "parents": [ids[0]], "quote": "invented"}]}
    with ChatStub(answer) as stub:
        (fid,) = mem.consolidate(distiller=_distiller(stub)).fact_ids
    fact = mem.get(fid)
    assert fact is not None and fact.text == "Ann lives in Lisbon."


def test_the_configured_endpoint_is_used_with_its_key_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", "from-env")
    with ChatStub({"facts": []}) as stub:
        cfg = {
            "store": {"durability": "none"},
            "reflect": {"distiller": "llm"},
            "llm": {"base_url": stub.url, "model": "m1", "api_key_env": "STUB_KEY"},
        }
        with SpectorMemory.open(tmp_path / "s", config=cfg) as m:
            m.remember("I adopted a cat named Pixel.", speaker="Ann", session_id=1)
            report = m.consolidate()
            assert report.fact_ids == [] and report.turns_consolidated == 1
    assert stub.requests[0]["model"] == "m1"
    assert stub.headers[0]["Authorization"] == "Bearer from-env"


def test_no_configured_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"\[llm\] base_url and model"):
        ChatDistiller.from_config(LLMConfig())
    cfg = {"store": {"durability": "none"}, "reflect": {"distiller": "llm"}}
    with SpectorMemory.open(tmp_path / "s", config=cfg) as m:
        m.remember("I adopted a cat named Pixel.", speaker="Ann", session_id=3)
        with pytest.raises(ValidationError, match="no language model is configured"):
            m.consolidate()
        _nothing_written(m)


@pytest.mark.parametrize(
    "bad",
    [
        "this is not JSON",
        {"fact": []},
        {"facts": "none"},
        {"facts": [{"text": "", "parents": ["?"]}]},
        {"facts": [{"text": "Ann lives in Lisbon.", "parents": []}]},
        {"facts": [{"text": "Ann lives in Lisbon.", "parents": ["0000000000000"]}]},
        {"facts": [{"text": "Ann lives in Lisbon.", "parents": "x"}]},
        {"facts": [{"text": 42, "parents": ["x"]}]},
        {"facts": ["Ann lives in Lisbon."]},
        {"facts": [{"text": "x" * 2001, "parents": ["x"]}]},
        Reply(raw_body='{"id": "no choices"}'),
        Reply(raw_body="<html>gateway</html>"),
    ],
)
def test_an_answer_outside_the_schema_is_retried_then_refused(mem: SpectorMemory, bad: Any) -> None:
    with ChatStub(bad) as stub, pytest.raises(ModelEndpointError, match="nothing was written"):
        mem.consolidate(distiller=_distiller(stub))
    assert len(stub.requests) == 3  # the first attempt and two retries
    _nothing_written(mem)


def test_more_facts_than_asked_for_is_outside_the_schema(mem: SpectorMemory) -> None:
    ids = _ids(mem)
    many = {"facts": [{"text": f"Fact {i}.", "parents": [ids[0]]} for i in range(3)]}
    with ChatStub(many) as stub, pytest.raises(ModelEndpointError, match="max_facts=2"):
        mem.consolidate(
            distiller=ChatDistiller(ChatEndpoint(stub.url, "m", retries=0), max_facts=2)
        )
    _nothing_written(mem)


def test_a_server_error_is_retried_and_a_good_answer_then_used(mem: SpectorMemory) -> None:
    ids = _ids(mem)
    good = {"facts": [{"text": "Ann moved to Lisbon.", "parents": [ids[0]]}]}
    with ChatStub(Reply(status=503), Reply(status=429), good) as stub:
        report = mem.consolidate(distiller=_distiller(stub))
    assert len(stub.requests) == 3 and len(report.fact_ids) == 1


def test_a_client_error_is_not_retried(mem: SpectorMemory) -> None:
    bad_key = Reply(status=401, raw_body='{"error": "bad key"}')
    with ChatStub(bad_key) as stub, pytest.raises(ModelEndpointError, match="HTTP 401"):
        mem.consolidate(distiller=_distiller(stub))
    assert len(stub.requests) == 1
    _nothing_written(mem)


def test_a_slow_answer_times_out(mem: SpectorMemory) -> None:
    ids = _ids(mem)
    late = Reply({"facts": [{"text": "Ann moved.", "parents": [ids[0]]}]}, delay_s=1.0)
    with ChatStub(late) as stub, pytest.raises(ModelEndpointError, match="timeout_s"):
        mem.consolidate(distiller=_distiller(stub, timeout_s=0.2, retries=1))
    assert len(stub.requests) == 2
    _nothing_written(mem)


def test_a_dropped_connection_is_an_error(mem: SpectorMemory) -> None:
    cut = Reply(disconnect=True)
    with ChatStub(cut) as stub, pytest.raises(ModelEndpointError, match="connection failed"):
        mem.consolidate(distiller=_distiller(stub, retries=1))
    assert len(stub.requests) == 2
    _nothing_written(mem)


def test_an_unreachable_endpoint_is_an_error(mem: SpectorMemory) -> None:
    with ChatStub() as stub:
        url = stub.url  # the port is free again once the stub is closed
    with pytest.raises(ModelEndpointError, match="connection failed"):
        mem.consolidate(distiller=ChatDistiller(ChatEndpoint(url, "m", retries=0)))
    _nothing_written(mem)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "localhost:11434", "model": "m"}, "http"),
        ({"base_url": "http://x/v1", "model": ""}, "model"),
        ({"base_url": "http://x/v1", "model": "m", "timeout_s": 0}, "timeout_s"),
        ({"base_url": "http://x/v1", "model": "m", "retries": -1}, "retries"),
    ],
)
def test_bad_endpoint_settings_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        ChatEndpoint(**kwargs)


def test_the_key_is_never_printed() -> None:
    endpoint = ChatEndpoint("http://x/v1", "m", "sk-secret")
    assert "sk-secret" not in repr(endpoint) and "sk-secret" not in str(endpoint)


def test_a_distiller_needs_an_endpoint() -> None:
    with pytest.raises(ValidationError, match="ChatEndpoint"):
        ChatDistiller("http://x/v1")  # type: ignore[arg-type]
