"""SpectorStore as LangGraph uses a ``BaseStore``: batch semantics, the inherited sync and
async methods, filters and listing checked against LangGraph's own ``InMemoryStore``, query
search, index configs, TTL, reopen, and a compiled ``StateGraph`` remembering across threads."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from spector_gpu.integrations.langgraph import SpectorStore


def bag_of_words(texts: list[str]) -> list[list[float]]:
    """An offline embedding: each word lights one of 64 dimensions."""
    out = []
    for t in texts:
        v = [0.0] * 64
        for w in t.lower().split():
            v[hashlib.sha256(w.strip(".,?!").encode()).digest()[0] % 64] += 1.0
        out.append(v)
    return out


INDEX: Any = {"dims": 64, "embed": bag_of_words, "fields": ["text"]}


@pytest.fixture()
def store(tmp_path: Path) -> Generator[SpectorStore, None, None]:
    with SpectorStore(tmp_path / "lg", index=INDEX) as s:
        yield s


DOCS = [
    (("docs", "a"), "1", {"text": "Ann plays the cello", "n": 1, "tags": ["x"], "m": {"l": "en"}}),
    (("docs", "a"), "2", {"text": "Bo bakes bread", "n": 2, "tags": ["x", "y"], "m": {"l": "pt"}}),
    (("docs", "b"), "3", {"text": "Cy rides a bike", "n": 3, "tags": [], "m": {"l": "en"}}),
    (("docsx",), "4", {"text": "Di reads", "n": 4, "m": {}}),
    (("tenant", "a_%"), "5", {"text": "literal labels", "n": 5}),
]


def _fill(*stores: BaseStore) -> None:
    for s in stores:
        for ns, key, value in DOCS:
            s.put(ns, key, value)


def test_batch_results_in_op_order_with_pre_batch_reads(store: SpectorStore) -> None:
    store.put(("n",), "k", {"v": 0})
    results = store.batch(
        [
            PutOp(("n",), "k", {"v": 1}),
            GetOp(("n",), "k"),  # sees the state before the batch
            PutOp(("n",), "new", {"v": 2}),
            PutOp(("n",), "new", {"v": 3}),  # last put per key wins
            SearchOp(("n",)),
            ListNamespacesOp(),
        ]
    )
    assert results[0] is None and results[2] is None and results[3] is None
    assert results[1] is not None and results[1].value == {"v": 0}
    assert [i.key for i in results[4]] == ["k"]
    assert results[5] == [("n",)]
    got = store.get(("n",), "new")
    assert got is not None and got.value == {"v": 3}
    assert store.get(("n",), "k").value == {"v": 1}  # type: ignore[union-attr]


def test_values_round_trip_and_timestamps(store: SpectorStore) -> None:
    value = {"text": "hi", "i": 1, "f": 1.0, "b": True, "z": None, "l": [1, [2.5, "é"]]}
    store.put(("u",), "k", value)
    first = store.get(("u",), "k")
    assert first is not None and first.value == value
    assert type(first.value["i"]) is int and type(first.value["f"]) is float
    time.sleep(0.01)
    store.put(("u",), "k", {"text": "changed"})
    second = store.get(("u",), "k")
    assert second is not None and second.value == {"text": "changed"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    store.delete(("u",), "k")
    assert store.get(("u",), "k") is None
    store.delete(("u",), "never-stored")  # fine


@pytest.mark.parametrize(
    ("prefix", "filter"),
    [
        (("docs",), None),
        (("docs", "a"), None),
        ((), {"n": {"$gte": 2}}),
        ((), {"n": {"$ne": 2}, "m": {"l": "en"}}),
        ((), {"tags": ["x"]}),
        (("tenant", "a_%"), None),
        (("tenant", "a"), None),
        ((), {"n": {"$gt": 1, "$lt": 4}}),
    ],
)
def test_listing_and_filters_match_in_memory_store(
    store: SpectorStore, prefix: tuple[str, ...], filter: dict[str, Any] | None
) -> None:
    ref = InMemoryStore()
    _fill(store, ref)
    for limit, offset in ((10, 0), (2, 1), (1, 3)):
        ours = store.search(prefix, filter=filter, limit=limit, offset=offset)
        want = ref.search(prefix, filter=filter, limit=limit, offset=offset)
        assert [(i.namespace, i.key, i.value) for i in ours] == [
            (i.namespace, i.key, i.value) for i in want
        ]
        assert all(i.score is None for i in ours)


def test_list_namespaces_match_in_memory_store(store: SpectorStore) -> None:
    ref = InMemoryStore()
    _fill(store, ref)
    for kwargs in ({}, {"prefix": ("docs",)}, {"max_depth": 1}, {"suffix": ("a",)}):
        assert store.list_namespaces(**kwargs) == ref.list_namespaces(**kwargs)  # type: ignore[arg-type]


def test_query_search_ranks_and_respects_index_choices(store: SpectorStore) -> None:
    _fill(store)
    store.put(("docs", "a"), "hidden", {"text": "cello cello"}, index=False)
    store.put(("docs", "a"), "other", {"text": "nothing", "alt": "a cello"}, index=["alt"])
    hits = store.search(("docs",), query="who plays the cello", limit=10)
    keys = [h.key for h in hits]
    assert keys[0] == "1" and "other" in keys
    scored = [h for h in hits if h.score is not None]
    assert all(0.0 <= h.score <= 1.0 for h in scored)  # type: ignore[operator]
    assert hits[-1].key == "hidden" and hits[-1].score is None  # unindexed fill the tail
    assert [h.key for h in store.search(("docs",), query="Ann cello", limit=1)] == ["1"]
    assert store.search(("docs", "b"), query="cello", limit=5)[0].key == "3"  # prefix gate
    assert store.search(("docs",), query="bread", filter={"n": 2})[0].key == "2"


def test_ttl_expires_items(store: SpectorStore) -> None:
    store.put(("t",), "short", {"text": "gone soon"}, ttl=0.001)  # 60 ms
    store.put(("t",), "kept", {"text": "stays"})
    time.sleep(0.2)
    assert store.get(("t",), "short") is None
    assert [i.key for i in store.search(("t",))] == ["kept"]


def test_async_twins(store: SpectorStore) -> None:
    async def run() -> list[Any]:
        await store.aput(("a",), "k", {"text": "async works"})
        got = await store.aget(("a",), "k")
        found = await store.asearch(("a",), query="async")
        spaces = await store.alist_namespaces()
        await store.adelete(("a",), "k")
        return [got, found, spaces, await store.aget(("a",), "k")]

    got, found, spaces, gone = asyncio.run(run())
    assert got.value == {"text": "async works"} and found[0].key == "k"
    assert spaces == [("a",)] and gone is None


class State(TypedDict):
    user: str
    text: str
    seen: list[str]


def _remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    store.put(("memories", state["user"]), f"m{time.time_ns()}", {"text": state["text"]})
    return {}


def _recall(state: State, *, store: BaseStore) -> dict[str, Any]:
    hits = store.search(("memories", state["user"]), query=state["text"], limit=5)
    return {"seen": sorted(h.value["text"] for h in hits)}


def test_compiled_graph_remembers_across_threads_and_reopen(tmp_path: Path) -> None:
    g = StateGraph(State)
    g.add_node("remember", _remember)
    g.add_node("recall", _recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    with SpectorStore(tmp_path / "g", index=INDEX) as store:
        graph = g.compile(checkpointer=InMemorySaver(), store=store)
        graph.invoke(
            {"user": "ann", "text": "I moved to Lisbon", "seen": []},
            {"configurable": {"thread_id": "t1"}},
        )
        out = graph.invoke(
            {"user": "ann", "text": "I play cello", "seen": []},
            {"configurable": {"thread_id": "t2"}},
        )
        assert out["seen"] == ["I moved to Lisbon", "I play cello"]
    with SpectorStore(tmp_path / "g", index=INDEX) as store:
        graph = g.compile(store=store)
        out = graph.invoke({"user": "ann", "text": "Lisbon", "seen": []})
        assert out["seen"] == ["I moved to Lisbon", "I play cello", "Lisbon"]
        other = graph.invoke({"user": "bo", "text": "hello", "seen": []})
        assert other["seen"] == ["hello"]  # another user's namespace sees nothing of ann's
