"""The mem0-compatible Memory, driven as mem0's docs drive ``mem0.Memory`` (infer-free), with
mem0 2.x's return shapes and refusals."""

from __future__ import annotations

import hashlib
from collections.abc import Generator
from datetime import datetime
from pathlib import Path

import pytest

from spector_gpu.integrations.mem0 import Memory

CHAT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "I moved to Lisbon in May", "name": "Ann"},
    {"role": "assistant", "content": "Nice, how do you like Lisbon?"},
]
ITEM_KEYS = ["id", "memory", "hash", "metadata", "score", "created_at", "updated_at"]


@pytest.fixture()
def m(tmp_path: Path) -> Generator[Memory, None, None]:
    config = {"vector_store": {"provider": "spector_gpu", "config": {"path": str(tmp_path / "m")}}}
    with Memory.from_config(config) as memory:
        yield memory


def test_add_stores_messages_verbatim(m: Memory) -> None:
    out = m.add(CHAT, user_id="ann", metadata={"topic": "moving", "year": 2024})
    results = out["results"]
    assert [r["memory"] for r in results] == [CHAT[1]["content"], CHAT[2]["content"]]
    assert [r["event"] for r in results] == ["ADD", "ADD"]
    assert [r["actor_id"] for r in results] == ["Ann", None]
    assert [r["role"] for r in results] == ["user", "assistant"]
    got = m.get(results[0]["id"])
    assert got is not None
    assert list(got)[:7] == ITEM_KEYS and got["score"] is None
    assert got["hash"] == hashlib.md5(b"I moved to Lisbon in May").hexdigest()
    assert got["metadata"] == {"topic": "moving", "year": 2024}
    assert got["user_id"] == "ann" and got["actor_id"] == "Ann" and got["role"] == "user"
    assert "agent_id" not in got and "run_id" not in got
    assert datetime.fromisoformat(got["created_at"]).utcoffset() is not None
    assert m.add("plain text", agent_id="bot")["results"][0]["role"] == "user"


def test_search_and_get_all_are_scoped(m: Memory) -> None:
    m.add("I moved to Lisbon in May", user_id="ann", metadata={"topic": "moving"})
    m.add("I adopted a dog called Pixel", user_id="ann", metadata={"topic": "pets"})
    m.add("I moved to Porto last year", user_id="bo", metadata={"topic": "moving"})
    hits = m.search("where did I move", filters={"user_id": "ann"}, top_k=5, threshold=0.0)
    found = hits["results"]
    assert {h["user_id"] for h in found} == {"ann"}
    assert found[0]["memory"] == "I moved to Lisbon in May"
    assert all(0.0 <= h["score"] <= 1.0 for h in found)
    assert [h["score"] for h in found] == sorted((h["score"] for h in found), reverse=True)
    filtered = m.search("moved", filters={"user_id": "ann", "topic": {"eq": "pets"}}, threshold=0)
    assert [h["memory"] for h in filtered["results"]] == ["I adopted a dog called Pixel"]
    strict = m.search("where did I move", filters={"user_id": "ann"}, threshold=1.0)
    assert all(h["score"] >= 1.0 for h in strict["results"])
    listed = m.get_all(filters={"user_id": "ann"}, top_k=10)["results"]
    assert len(listed) == 2 and all("score" not in r for r in listed)
    assert m.get_all(filters={"user_id": "ann"}, top_k=1)["results"][0]["id"] == listed[0]["id"]
    assert m.search("moved", filters={"user_id": "ann"}, top_k=0) == {"results": []}
    assert m.get_all(filters={"user_id": "ann", "AND": [{"topic": "moving"}]})["results"][0][
        "memory"
    ].startswith("I moved")


def test_update_delete_and_history(m: Memory) -> None:
    mid = m.add("I moved to Lisbon", user_id="ann", metadata={"year": 2024})["results"][0]["id"]
    before = m.get(mid)
    assert m.update(mid, text="I moved to Porto in June", metadata={"topic": "moving"}) == {
        "message": "Memory updated successfully!"
    }
    after = m.get(mid)
    assert after is not None and before is not None
    assert after["memory"] == "I moved to Porto in June"
    assert after["metadata"] == {"year": 2024, "topic": "moving"}  # merged, as mem0 does
    assert after["created_at"] == before["created_at"] and after["hash"] != before["hash"]
    assert m.delete(mid) == {"message": "Memory deleted successfully!"}
    assert m.get(mid) is None
    events = m.history(mid)
    assert [e["event"] for e in events] == ["ADD", "UPDATE", "DELETE"]
    assert events[-1]["is_deleted"] is True and events[0]["memory_id"] == mid
    assert m.history("0000000000000") == []


def test_delete_all_and_reset(m: Memory) -> None:
    m.add("a fact about ann", user_id="ann")
    m.add("a fact about ann and a run", user_id="ann", run_id="r1")
    m.add("a fact about bo", user_id="bo")
    m.delete_all(user_id="ann", run_id="r1")
    assert len(m.get_all(filters={"user_id": "ann"})["results"]) == 1
    assert m.delete_all(user_id="ann") == {"message": "Memories deleted successfully!"}
    assert m.get_all(filters={"user_id": "ann"})["results"] == []
    assert len(m.get_all(filters={"user_id": "bo"})["results"]) == 1
    assert m.reset() is None
    assert m.get_all(filters={"user_id": "bo"})["results"] == []


def test_refusals_are_value_errors(m: Memory) -> None:
    with pytest.raises(ValueError, match="At least one of 'user_id'"):
        m.add("no scope")
    with pytest.raises(ValueError, match="At least one of 'user_id'"):
        m.search("q", filters={"topic": "x"})
    with pytest.raises(ValueError, match=r"use reset\(\)"):
        m.delete_all()
    with pytest.raises(ValueError, match="Top-level entity parameters"):
        m.get_all(user_id="ann")
    with pytest.raises(ValueError, match="not found"):
        m.delete("0000000000000")
    with pytest.raises(ValueError, match="not found"):
        m.update("0000000000000", text="x")
    with pytest.raises(ValueError, match="threshold"):
        m.search("q", filters={"user_id": "ann"}, threshold=1.5)
    with pytest.raises(ValueError, match="without whitespace"):
        m.add("x", user_id="a b")
    with pytest.raises(ValueError, match="unsupported operator"):
        m.search("q", filters={"user_id": "ann", "t": {"icontains": "x"}})
    with pytest.raises(ValueError, match="messages must be"):
        m.add(42, user_id="ann")
    with pytest.raises(ValueError, match="Unsupported vector store provider"):
        Memory.from_config({"vector_store": {"provider": "qdrant", "config": {}}})


def test_data_survives_reopen(tmp_path: Path) -> None:
    with Memory(tmp_path / "r") as m:
        mid = m.add("kept across reopen", user_id="ann")["results"][0]["id"]
    with Memory(tmp_path / "r") as m:
        got = m.get(mid)
        assert got is not None and got["memory"] == "kept across reopen"
