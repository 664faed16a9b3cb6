"""Compiling filter documents (filters.py) and dotted paths (paths.py)."""

from __future__ import annotations

from typing import Any

import pytest

from spector_gpu.errors import ValidationError
from spector_gpu.metadata import Filter, compile_filter, format_path, parse_path
from spector_gpu.metadata.filters import (
    MAX_FILTER_DEPTH,
    And,
    Compare,
    Exists,
    Not,
    OneOf,
    Or,
)


def test_a_document_compiles_to_an_and_of_conditions() -> None:
    f = compile_filter({"topic": "travel", "year": {"$gte": 2023}, "lang": {"$in": ["en", "pt"]}})
    assert isinstance(f.root, And)
    kinds = sorted(type(c).__name__ for c in f.root.children)
    assert kinds == ["Compare", "Compare", "OneOf"]
    assert str(f) == "(lang in ['en', 'pt'] AND topic == 'travel' AND year >= 2023)"


def test_negations_compile_to_not() -> None:
    assert compile_filter({"a": {"$ne": 1}}).root == Not(compile_filter({"a": 1}).root)
    assert compile_filter({"a": {"$nin": [1]}}).root == Not(
        compile_filter({"a": {"$in": [1]}}).root
    )
    assert compile_filter({"a": {"$exists": False}}).root == Not(Exists(("a",)))
    assert compile_filter({"$not": {"a": {"$not": {"$eq": 1}}}}) == compile_filter({"a": 1})


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ({"a": 1}, {"a": 1.0}),
        ({"a": 1}, {"a": {"$eq": 1}}),
        ({"a": {"$ne": 1}}, {"$not": {"a": 1}}),
        ({"a": {"$in": [1, 2]}}, {"a": {"$in": [2, 1, 2.0]}}),
        ({"$and": [{"a": 1}, {"b": 2}]}, {"a": 1, "b": 2}),
        ({"$and": [{"a": 1}, {"$and": [{"b": 2}]}]}, {"b": 2, "a": 1}),
        ({"$or": [{"a": 1}, {"b": 2}]}, {"$or": [{"b": 2}, {"a": 1}]}),
        ({"$or": [{"a": 1}]}, {"a": 1}),
        ({"a": {"$gte": 1, "$lt": 5}}, {"$and": [{"a": {"$lt": 5}}, {"a": {"$gte": 1}}]}),
        ({"a": [1, "x"]}, {"a": [1.0, "x"]}),
        ({}, {"$and": [{}]}),
    ],
)
def test_filters_that_mean_the_same_are_equal_and_hash_alike(
    one: dict[str, Any], other: dict[str, Any]
) -> None:
    f, g = compile_filter(one), compile_filter(other)
    assert f == g and hash(f) == hash(g)
    assert len({f, g}) == 1


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"a": True}, {"a": 1}),
        ({"a": False}, {"a": 0}),
        ({"a": None}, {"a": 0}),
        ({"a": "1"}, {"a": 1}),
        ({"a": ["x"]}, {"a": "x"}),
        ({"a": [1, 2]}, {"a": [2, 1]}),
        ({"a": 2**53 + 1}, {"a": 2.0**53}),
        ({"a": {"$gt": 1}}, {"a": {"$gte": 1}}),
        ({"a": 1}, {"b": 1}),
        ({"a.b": 1}, {"a\\.b": 1}),
        ({"$or": [{"a": 1}, {"b": 2}]}, {"a": 1, "b": 2}),
        ({"a": {"$contains": "x"}}, {"a": "x"}),
    ],
)
def test_filters_that_differ_are_unequal(one: dict[str, Any], other: dict[str, Any]) -> None:
    assert compile_filter(one) != compile_filter(other)


def test_filter_is_immutable_and_compile_accepts_a_filter() -> None:
    f = compile_filter({"a": 1})
    assert compile_filter(f) is f
    with pytest.raises(AttributeError):
        f.root = Exists(("b",))  # type: ignore[misc]
    cache = {f: "mask"}
    assert cache[compile_filter({"a": 1.0})] == "mask"


def test_empty_filter_matches_everything() -> None:
    assert compile_filter({}).matches_everything
    assert compile_filter({"$and": [{}, {}]}).matches_everything
    assert not compile_filter({"a": 1}).matches_everything


def test_dotted_paths_and_escapes() -> None:
    assert parse_path("a.b.c") == ("a", "b", "c")
    assert parse_path("file\\.name.ext") == ("file.name", "ext")
    assert parse_path("back\\\\slash") == ("back\\slash",)
    assert parse_path("a\\\\.b") == ("a\\", "b")
    for keys in (["a"], ["file.name", "ext"], ["x\\", ".y", "z.\\"], ["é", "😀"]):
        assert parse_path(format_path(keys)) == tuple(keys)
    root = compile_filter({"file\\.name": "a"}).root
    assert isinstance(root, Compare) and root.path == ("file.name",)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("a..b", "empty key"),
        (".a", "empty key"),
        ("a.", "empty key"),
        ("", "empty key"),
        ("a\\", "bad escape"),
        ("a\\x", "bad escape"),
        ("a.$b", "starts with '$'"),
        ("a" * 257, "longer than 256"),
        (".".join(["a"] * 33), "33 keys"),
    ],
)
def test_bad_paths_are_refused(path: str, rule: str) -> None:
    with pytest.raises(ValidationError, match=r"^where\.") as info:
        compile_filter({path: 1})
    assert rule in str(info.value)


@pytest.mark.parametrize(
    ("doc", "where", "rule"),
    [
        ({"a": {"$regex": "x"}}, "where.a.$regex", "unknown operator"),
        ({"$gt": 1}, "where.$gt", "must be inside a field"),
        ({"$nor": []}, "where.$nor", "is not an operator"),
        ({"a": {"$and": [{}]}}, "where.a.$and", "document level"),
        ({"a": {"$in": "en"}}, "where.a.$in", "must be a list"),
        ({"a": {"$nin": {"x": 1}}}, "where.a.$nin", "must be a list"),
        ({"a": {"$exists": 1}}, "where.a.$exists", "true or false"),
        ({"a": {"$exists": "yes"}}, "where.a.$exists", "true or false"),
        ({"a": {"$gt": True}}, "where.a.$gt", "number or a string"),
        ({"a": {"$lte": None}}, "where.a.$lte", "number or a string"),
        ({"a": {"$lt": [1]}}, "where.a.$lt", "number or a string"),
        ({"a": {"$gte": float("nan")}}, "where.a.$gte", "finite"),
        ({"a": float("inf")}, "where.a", "finite"),
        ({"a": 2**64}, "where.a", "int64"),
        ({"a": {"$in": [1, (2,)]}}, "where.a.$in[1]", "tuple"),
        ({"a": {"b": 1}}, "where.a", "dotted path"),
        ({"a": {"$gt": 1, "b": 1}}, "where.a", "mixes operators and keys"),
        ({"$contains": 1}, "where.$contains", "must be inside a field"),
        ({"a": {}}, "where.a", "operator document"),
        ({"a": {"$eq": {"b": 1}}}, "where.a.$eq", "dotted path"),
        ({"a": {"$not": 1}}, "where.a.$not", "operator document"),
        ({"a": {"$not": {}}}, "where.a.$not", "operator document"),
        ({"$and": []}, "where.$and", "non-empty list"),
        ({"$or": {"a": 1}}, "where.$or", "non-empty list"),
        ({"$and": [{"a": 1}, 3]}, "where.$and[1]", "must be a dict"),
        ({"$or": [{"a": {"$gte": "x", "$bad": 1}}]}, "where.$or[0].a.$bad", "unknown operator"),
        ({"$not": [{"a": 1}]}, "where.$not", "must be a dict"),
        ({1: 2}, "where", "keys must be str"),
        ({"a": "\ud800"}, "where.a", "UTF-8"),
    ],
)
def test_invalid_filters_fail_fast_naming_the_path(doc: Any, where: str, rule: str) -> None:
    with pytest.raises(ValidationError) as info:
        compile_filter(doc)
    message = str(info.value)
    assert message.startswith((where + ":", where + "[")), message
    assert rule in message, message


def test_a_filter_document_must_be_a_dict() -> None:
    for bad in (None, [{"a": 1}], "a", 1):
        with pytest.raises(
            ValidationError, match=r"^recall\.where: a filter document must be a dict"
        ):
            compile_filter(bad, field="recall.where")  # type: ignore[arg-type]


def test_nesting_depth_is_bounded_without_recursion_errors() -> None:
    doc: dict[str, Any] = {"a": 1}
    for _ in range(MAX_FILTER_DEPTH - 1):
        doc = {"$not": doc}
    compile_filter(doc)
    deep: dict[str, Any] = {"a": 1}
    for _ in range(10_000):
        deep = {"$and": [deep]}
    with pytest.raises(ValidationError, match="nested deeper than 32 levels"):
        compile_filter(deep)
    field_level: dict[str, Any] = {"$eq": 1}
    for _ in range(10_000):
        field_level = {"$not": field_level}
    with pytest.raises(ValidationError, match="nested deeper than 32 levels"):
        compile_filter({"a": field_level})


def test_tree_nodes_expose_paths_and_values() -> None:
    f = compile_filter({"$or": [{"a.b": {"$in": [1, "x"]}}, {"c": {"$exists": True}}]})
    assert isinstance(f.root, Or)
    nodes = set(f.root.children)
    one_of = next(n for n in nodes if isinstance(n, OneOf))
    assert one_of.path == ("a", "b")
    assert sorted(map(repr, (v.value for v in one_of.values))) == ["'x'", "1"]
    assert Exists(("c",)) in nodes
    assert isinstance(f, Filter)
