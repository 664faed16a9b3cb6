"""SpectorStore side by side with LangGraph's ``InMemoryStore`` on the same operations:
namespace validation, batches, labels, blank queries, non-JSON values, tagged filters,
query embedding and ``list_namespaces`` without loading items."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from spector_gpu import SpectorMemory
from spector_gpu.errors import ValidationError
from spector_gpu.integrations.langgraph import SpectorStore


@pytest.fixture()
def pair(tmp_path: Path) -> Generator[tuple[InMemoryStore, SpectorStore], None, None]:
    with SpectorStore(tmp_path / "s") as ours:
        yield InMemoryStore(), ours


def _outcome(fn: Callable[[BaseStore], Any], store: BaseStore) -> Any:
    try:
        return ("ok", fn(store))
    except Exception as exc:  # the comparison is of which exception type, if any
        return ("raised", type(exc))


BAD_NAMESPACES: list[tuple[str, ...]] = [
    (),
    ("langgraph",),
    ("langgraph", "x"),
    ("a.b",),
    ("a", ""),
    ("a\x00b",),
]


@pytest.mark.parametrize("ns", BAD_NAMESPACES, ids=repr)
def test_put_refuses_what_in_memory_store_refuses(
    pair: tuple[InMemoryStore, SpectorStore], ns: tuple[str, ...]
) -> None:
    theirs, ours = pair
    with pytest.raises(InvalidNamespaceError):
        theirs.put(ns, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        ours.put(ns, "k", {"v": 1})


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get(("a.b",), "k"),
        lambda s: s.search(("a.b",)),
        lambda s: s.delete(("a", ""), "k"),
        lambda s: s.list_namespaces(prefix=("x.y",)),
    ],
    ids=["get", "search", "delete", "list_namespaces"],
)
def test_reads_refuse_invalid_labels_with_langgraphs_error(
    pair: tuple[InMemoryStore, SpectorStore], call: Callable[[BaseStore], Any]
) -> None:
    for store in pair:
        with pytest.raises(InvalidNamespaceError):
            call(store)


def test_batch_takes_a_langgraph_root_as_in_memory_store_does(
    pair: tuple[InMemoryStore, SpectorStore],
) -> None:
    for store in pair:
        ops: list[Any] = [
            PutOp(("langgraph", "sys"), "k", {"v": 1}),
            GetOp(("langgraph", "sys"), "k"),
        ]
        assert store.batch(ops) == [None, None]  # the get sees the state before the batch
        item = store.get(("langgraph", "sys"), "k")
        assert item is not None and item.value == {"v": 1}
        assert store.batch([ListNamespacesOp()]) == [[("langgraph", "sys")]]


@pytest.mark.parametrize("label", ["line\nbreak", "tab\there", "é ü 東京", " padded "])
def test_any_label_langgraph_accepts_round_trips(
    pair: tuple[InMemoryStore, SpectorStore], label: str
) -> None:
    for store in pair:
        store.put(("docs", label), "k", {"text": "hello"})
        item = store.get(("docs", label), "k")
        assert item is not None and item.namespace == ("docs", label)
        assert [i.key for i in store.search(("docs", label))] == ["k"]
        assert store.list_namespaces() == [("docs", label)]


@pytest.mark.parametrize("query", ["", " ", "\n\t "])
def test_a_blank_query_lists_as_in_memory_store(
    pair: tuple[InMemoryStore, SpectorStore], query: str
) -> None:
    got = []
    for store in pair:
        for key in ("b", "a", "c"):
            store.put(("n",), key, {"text": f"item {key}"})
        got.append([(i.key, i.score) for i in store.search(("n",), query=query, limit=2)])
    assert got[0] == got[1] == [("b", None), ("a", None)]


VALUES: list[dict[str, Any]] = [
    {"at": datetime(2024, 5, 1, 12, 30, tzinfo=UTC), "naive": datetime(2024, 5, 1, 9)},
    {"day": date(2024, 5, 1), "clock": time(7, 15, 2)},
    {"raw": b"\x00\xffbytes", "buf": bytearray(b"ab")},
    {"pair": (1, "two", (3.0, None)), "tags": {"b", "a"}, "frozen": frozenset({1, 2})},
    {"id": uuid.UUID(int=7), "price": Decimal("1.10")},
    {"nested": [{"at": date(2020, 1, 1)}, {"__spector_type__": "user data"}]},
    {"__spector_type__": "datetime", "v": "not a tag: user data"},
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: ",".join(v))
def test_non_json_values_come_back_as_put(
    pair: tuple[InMemoryStore, SpectorStore], value: dict[str, Any], tmp_path: Path
) -> None:
    got = []
    for store in pair:
        store.put(("v",), "k", value)
        item = store.get(("v",), "k")
        assert item is not None
        got.append(item.value)
    assert got[0] == got[1] == value
    assert {k: type(v) for k, v in got[1].items()} == {k: type(v) for k, v in value.items()}
    pair[1].close()
    with SpectorStore(tmp_path / "s") as reopened:
        item = reopened.get(("v",), "k")
        assert item is not None and item.value == value


def test_values_no_store_can_keep_are_clear_errors(
    pair: tuple[InMemoryStore, SpectorStore],
) -> None:
    ours = pair[1]
    with pytest.raises(ValidationError, match=r"value\.obj: a object cannot be stored"):
        ours.put(("v",), "k", {"obj": object()})
    with pytest.raises(ValidationError, match="keys must be str"):
        ours.put(("v",), "k", {"m": {1: "one"}})
    assert ours.get(("v",), "k") is None


@pytest.mark.parametrize(
    "filter",
    [
        {"at": datetime(2024, 5, 1, tzinfo=UTC)},
        {"at": {"$ne": datetime(2024, 5, 1, tzinfo=UTC)}},
        {"raw": b"x"},
        {"id": uuid.UUID(int=1)},
        {"pair": (1, 2)},
        {"pair": [1, 2]},
        {"day": {"$eq": date(2023, 1, 1)}},
    ],
    ids=repr,
)
def test_filters_on_non_json_values_match_as_in_memory_store(
    pair: tuple[InMemoryStore, SpectorStore], filter: dict[str, Any]
) -> None:
    rows = [
        ("1", {"at": datetime(2024, 5, 1, tzinfo=UTC), "raw": b"x", "pair": [1, 2]}),
        ("2", {"at": datetime(2024, 5, 2, tzinfo=UTC), "id": uuid.UUID(int=1)}),
        ("3", {"day": date(2023, 1, 1), "raw": b"y", "pair": [2, 1]}),
    ]
    got = []
    for store in pair:
        for key, value in rows:
            store.put(("f",), key, value)
        got.append(sorted(i.key for i in store.search(("f",), filter=filter)))
    assert got[0] == got[1]


class _Asymmetric(Embeddings):
    """Queries and documents embed differently, so the two calls are told apart."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [0.0, 1.0] if "cat" in text else [1.0, 0.0]  # points at the other documents


def test_queries_are_embedded_with_embed_query(tmp_path: Path) -> None:
    ranked = []
    for make in (InMemoryStore, lambda index: SpectorStore(tmp_path / "e", index=index)):
        emb = _Asymmetric()
        store = make(index={"dims": 2, "embed": emb, "fields": ["text"]})
        store.put(("e",), "cat", {"text": "a cat"})
        store.put(("e",), "dog", {"text": "a dog"})
        hits = store.search(("e",), query="cat", limit=1)
        assert emb.queries == ["cat"]
        ranked.append(hits[0].key)
    assert ranked[0] == "dog"  # InMemoryStore ranks by the query embedding
    # the engine fuses BM25 ("cat" is a word of the cat item) with the dense relay, which
    # alone points at the dog; what is asserted is the call InMemoryStore makes


def test_list_namespaces_loads_no_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SpectorMemory.open(tmp_path / "m") as memory:
        store = SpectorStore(memory)
        ops = [PutOp(("t", f"u{i % 50}", f"s{i % 7}"), f"k{i}", {"i": i}) for i in range(700)]
        store.batch(ops)
        theirs = InMemoryStore()
        theirs.batch(ops)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("list_namespaces must not load memories")

        for name in ("list", "get", "recall", "get_by_external_id"):
            monkeypatch.setattr(memory, name, refuse)
        for kwargs in ({}, {"max_depth": 2}, {"prefix": ("t", "u3")}, {"suffix": ("s1",)}):
            for limit, offset in ((100, 0), (10, 40)):
                want = theirs.list_namespaces(limit=limit, offset=offset, **kwargs)  # type: ignore[arg-type]
                got = store.list_namespaces(limit=limit, offset=offset, **kwargs)  # type: ignore[arg-type]
                assert got == want


def test_search_op_in_a_batch_matches_in_memory_store(
    pair: tuple[InMemoryStore, SpectorStore],
) -> None:
    results = []
    for store in pair:
        store.put(("s", "a"), "1", {"n": 1})
        store.put(("s", "b"), "2", {"n": 2})
        out = store.batch(
            [
                SearchOp(("s",), filter={"n": {"$gte": 1}}, limit=10),
                PutOp(("s", "a"), "3", {"n": 3}),
                SearchOp(("s",), limit=1, offset=1),
            ]
        )
        results.append([None if r is None else [i.key for i in r] for r in out])
    assert results[0] == results[1]
