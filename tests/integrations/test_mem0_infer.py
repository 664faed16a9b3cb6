"""mem0's add(infer=True): facts from a model (a local stub server), reconciled with the
scope's known facts; without a model, a logged warning and messages stored verbatim."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_stub import ChatStub, Reply

from spector_gpu import ModelEndpointError, SpectorMemory
from spector_gpu.integrations.mem0 import Memory
from spector_gpu.integrations.mem0_infer import NO_MODEL_WARNING


def _facts(*texts: str) -> dict[str, Any]:
    return {"facts": [{"text": t, "parents": ["m0"]} for t in texts]}


@pytest.fixture
def stub() -> Iterator[ChatStub]:
    with ChatStub() as s:
        yield s


@pytest.fixture
def m(tmp_path: Path, stub: ChatStub) -> Iterator[Memory]:
    cfg = {
        "store": {"durability": "none"},
        "llm": {"base_url": stub.url, "model": "stub", "retries": 0},
    }
    with SpectorMemory.open(tmp_path / "s", config=cfg) as mem:
        yield Memory(memory=mem)


def test_without_a_model_messages_are_stored_verbatim_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}}) as mem:
        m = Memory(memory=mem)
        with caplog.at_level(logging.WARNING, logger="spector_gpu.integrations.mem0_infer"):
            first = m.add("I moved to Lisbon", user_id="ann", infer=True)
            m.add("I like tea", user_id="ann", infer=True)
        assert [r["memory"] for r in first["results"]] == ["I moved to Lisbon"]
        assert first["results"][0]["event"] == "ADD"
        assert [r.message for r in caplog.records].count(NO_MODEL_WARNING) == 1  # once
        assert mem.count() == 2


def test_facts_are_extracted_then_reconciled(m: Memory, stub: ChatStub) -> None:
    stub.replies = [_facts("Ann lives in Lisbon.", "Ann has a cat named Pixel.")]
    got = m.add([{"role": "user", "content": "I live in Lisbon with my cat Pixel"}], user_id="ann")
    assert [(r["event"], r["memory"]) for r in got["results"]] == [
        ("ADD", "Ann lives in Lisbon."),
        ("ADD", "Ann has a cat named Pixel."),
    ]
    home, cat = (r["id"] for r in got["results"])
    assert stub.user_document()["new_turns"][0]["text"] == "I live in Lisbon with my cat Pixel"

    stub.replies = [_facts("Ann moved to Porto.", "Ann has a cat named Pixel.")]
    n = len(stub.requests)
    got = m.add("I moved to Porto; Pixel came too", user_id="ann")
    assert len(stub.requests) == n + 1  # the clear cases are the rules', not the model's
    moved, same = got["results"]
    assert moved["event"] == "UPDATE" and moved["previous_id"] == home
    assert (
        moved["previous_memory"] == "Ann lives in Lisbon."
        and moved["memory"] == "Ann moved to Porto."
    )
    assert same == {"id": cat, "memory": "Ann has a cat named Pixel.", "event": "NONE"}
    hits = m.search("where does Ann live", filters={"user_id": "ann"})["results"]
    assert moved["id"] in [h["id"] for h in hits] and home not in [h["id"] for h in hits]
    assert m.get(home) is not None  # superseded, kept in history

    stub.replies = [_facts("Ann has a cat named Pixel who is three years old.")]
    (older,) = m.add("Pixel is three", user_id="ann")["results"]
    assert older["event"] == "UPDATE" and older["id"] == cat
    got_cat = m.get(cat)
    assert (
        got_cat is not None
        and got_cat["memory"] == "Ann has a cat named Pixel who is three years old."
    )


def test_a_value_inside_a_longer_fact_is_reconciled_by_the_rules(m: Memory, stub: ChatStub) -> None:
    stub.replies = [
        _facts(
            "Ann is painting a sunset for her sister. Ann has completed 4 projects since "
            "starting painting classes, and feels confident."
        )
    ]
    (old,) = m.add("I'm painting a sunset; that's 4 projects so far", user_id="ann")["results"]
    stub.replies = [_facts("Ann just finished her 5th project since starting painting classes.")]
    n = len(stub.requests)
    (new,) = m.add("I just finished my 5th project!", user_id="ann")["results"]
    assert len(stub.requests) == n + 1  # the extraction only: the rules settled it
    assert new["event"] == "UPDATE" and new["previous_id"] == old["id"]
    hits = m.search("how many painting projects", filters={"user_id": "ann"})["results"]
    assert [h["id"] for h in hits] == [new["id"]]


def test_known_facts_come_from_the_same_scope_only(m: Memory, stub: ChatStub) -> None:
    stub.replies = [_facts("Ann lives in Lisbon.")]
    m.add("I live in Lisbon", user_id="ann")
    got = m.add("I live in Lisbon", user_id="bo")
    assert got["results"][0]["event"] == "ADD"  # Bo's memory knows nothing of Ann's


def test_the_model_decides_what_the_rules_leave_open(m: Memory, stub: ChatStub) -> None:
    stub.replies = [_facts("Ann has a cat named Pixel.")]
    (cat,) = m.add("I have a cat, Pixel", user_id="ann")["results"]
    stub.replies = [
        _facts("Ann gave Pixel to her sister."),
        {"action": "SUPERSEDE", "target": cat["id"], "text": "Ann gave Pixel to her sister."},
    ]
    n = len(stub.requests)
    (gave,) = m.add("I gave Pixel to my sister", user_id="ann")["results"]
    assert len(stub.requests) == n + 2  # the facts, then the judgement
    assert gave["event"] == "UPDATE" and gave["previous_id"] == cat["id"]


@pytest.mark.parametrize(
    "bad", ["not json", {"facts": [{"text": "x", "parents": ["m9"]}]}, Reply(status=500)]
)
def test_a_failing_model_writes_nothing(m: Memory, stub: ChatStub, bad: Any) -> None:
    stub.replies = [bad]
    with pytest.raises(ModelEndpointError, match="nothing was written"):
        m.add("I moved to Lisbon", user_id="ann")
    assert m.get_all(filters={"user_id": "ann"})["results"] == []


def test_a_failing_judgement_writes_nothing(m: Memory, stub: ChatStub) -> None:
    stub.replies = [_facts("Ann has a cat named Pixel.")]
    m.add("I have a cat, Pixel", user_id="ann")
    stub.replies = [_facts("Ann gave Pixel away.", "Ann likes tea."), "garbage"]
    with pytest.raises(ModelEndpointError):
        m.add("I gave Pixel away; I like tea", user_id="ann")
    assert len(m.get_all(filters={"user_id": "ann"})["results"]) == 1


def test_infer_false_never_asks_the_model(m: Memory, stub: ChatStub) -> None:
    got = m.add("I moved to Lisbon", user_id="ann", infer=False)
    assert got["results"][0]["memory"] == "I moved to Lisbon" and stub.requests == []
