"""The pure translations of the LangGraph adapter, checked against LangGraph's own
``InMemoryStore`` where it defines the behaviour (namespace listing, indexed text)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.base import ListNamespacesOp, MatchCondition
from langgraph.store.memory import InMemoryStore

from spector_gpu.errors import ValidationError
from spector_gpu.integrations.langgraph_ops import (
    decode_key,
    encode_key,
    index_text,
    list_namespaces,
    translate_filter,
    ttl_seconds,
)
from spector_gpu.metadata import compile_filter

NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "a_%"),
    ("users", "ab"),
]

label = st.text(st.characters(blacklist_characters=".\x00", min_codepoint=32), min_size=1)


@given(st.lists(label, min_size=0, max_size=4), label)
@settings(max_examples=60, deadline=None)
def test_keys_round_trip(namespace: list[str], key: str) -> None:
    assert decode_key(encode_key(namespace, key)) == (tuple(namespace), key)


def test_keys_differ_at_label_boundaries() -> None:
    assert encode_key(("a", "b"), "c") != encode_key(("a",), "b,c")
    assert encode_key(("ab",), "c") != encode_key(("a", "b"), "c")


CASES = [
    (None, None),
    ((MatchCondition("prefix", ("a", "b")),), None),
    ((MatchCondition("prefix", ("a", "b")),), 3),
    ((MatchCondition("suffix", ("f",)),), None),
    ((MatchCondition("prefix", ("a", "*")), MatchCondition("suffix", ("f",))), None),
    ((MatchCondition("prefix", ("users", "a_%")),), None),
    ((MatchCondition("prefix", ("a",)),), 1),
    ((MatchCondition("suffix", ("x", "y", "z", "w", "v")),), None),
]


@pytest.mark.parametrize(("conditions", "max_depth"), CASES)
@pytest.mark.parametrize(("limit", "offset"), [(100, 0), (2, 1), (1, 5)])
def test_list_namespaces_matches_in_memory_store(
    conditions: tuple[MatchCondition, ...] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> None:
    ref = InMemoryStore()
    for ns in NAMESPACES:
        ref.put(ns, "k", {"v": 1})
    op = ListNamespacesOp(conditions, max_depth, limit, offset)
    want = ref.batch([op])[0]
    assert list_namespaces(NAMESPACES, conditions, max_depth, limit, offset) == want


def test_index_text_follows_langgraph_paths() -> None:
    value = {"text": "Ann moved", "tags": ["a", "b"], "meta": {"lang": "en"}, "n": 3}
    assert index_text(value, ["text"]) == "Ann moved"
    assert index_text(value, ["tags[*]", "meta.lang"]) == "a\nb\nen"
    assert index_text(value, ["missing"]) == ""
    whole = index_text(value, ["$"])
    assert json.loads(whole) == value


def test_filters_translate_to_engine_where() -> None:
    assert translate_filter(None) is None and translate_filter({}) is None
    assert translate_filter({"k": "v"}) == {"k": {"$eq": "v"}}
    assert translate_filter({"l": [1, 2]}) == {"l": {"$eq": [1, 2]}}
    nested = translate_filter({"meta": {"lang": "en", "n": {"$gt": 2}}, "x": {"$ne": 1}})
    assert nested == {
        "$and": [
            {"meta.lang": {"$eq": "en"}},
            {"meta.n": {"$gt": 2}},
            {"x": {"$ne": 1}},
        ]
    }
    dotted = translate_filter({"file.name": "a"})
    assert dotted == {"file\\.name": {"$eq": "a"}}  # a dot inside a key is escaped
    for doc in (nested, dotted):
        compile_filter(doc)  # every translation is a valid engine filter


def test_bad_filters_and_ttls_are_refused() -> None:
    with pytest.raises(ValidationError, match=r"unsupported operator \$in"):
        translate_filter({"k": {"$in": [1]}})
    assert ttl_seconds(None) is None and ttl_seconds(2) == 120.0
    for bad in (0, -1, True, "5"):
        with pytest.raises(ValidationError, match="ttl"):
            ttl_seconds(bad)  # type: ignore[arg-type]
