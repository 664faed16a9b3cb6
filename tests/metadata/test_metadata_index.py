"""MetadataIndex: hand-checked masks for every operator, and the append/truncate contract."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from spector_gpu.errors import ValidationError
from spector_gpu.metadata import MetadataIndex, compile_filter

ROWS: list[Any] = [
    {"topic": "travel", "year": 2023, "lang": "en", "tags": ["a", "b"], "geo": {"city": "Lisbon"}},
    {"topic": "work", "year": 2021, "lang": "pt", "tags": ["b"], "score": 1.0, "ok": True},
    {"topic": "travel", "year": 2024.0, "lang": "de", "tags": ["a", "b"], "ok": False},
    None,
    {"year": "2023", "file.name": "x.txt", "geo": {"city": None}, "score": 1, "tags": "a"},
    {"topic": "Travel", "geo": "Lisbon", "tags": [], "n": {"deep": {"er": [1, 2]}}},
    {},
]


@pytest.fixture
def index() -> MetadataIndex:
    return MetadataIndex.from_list(ROWS)


def rows_of(index: MetadataIndex, doc: dict[str, Any], n: int | None = None) -> list[int]:
    mask = index.mask(compile_filter(doc), len(index) if n is None else n)
    return np.flatnonzero(mask).tolist()


@pytest.mark.parametrize(
    ("doc", "rows"),
    [
        ({"topic": "travel"}, [0, 2]),  # case-sensitive, exact strings
        ({"topic": {"$eq": "Travel"}}, [5]),
        ({"topic": {"$ne": "travel"}}, [1, 3, 4, 5, 6]),  # $ne matches missing keys
        ({"year": 2023}, [0]),  # the string "2023" is not the number 2023
        ({"year": {"$gte": 2023}}, [0, 2]),  # int and float compare by value, no strings
        ({"year": {"$gt": 2023}}, [2]),
        ({"year": {"$lt": 2023}}, [1]),
        ({"year": {"$lte": 2023.0}}, [0, 1]),
        ({"year": {"$gte": "2000"}}, [4]),  # a string bound only meets strings
        ({"year": 2024}, [2]),  # 2024 == 2024.0
        ({"score": 1}, [1, 4]),  # 1.0 and 1
        ({"score": 1.0}, [1, 4]),
        ({"ok": True}, [1]),  # booleans are not numbers
        ({"ok": 1}, []),
        ({"ok": False}, [2]),
        ({"ok": 0}, []),
        ({"lang": {"$in": ["en", "pt"]}}, [0, 1]),
        ({"lang": {"$nin": ["en", "pt"]}}, [2, 3, 4, 5, 6]),  # $nin matches missing keys
        ({"lang": {"$in": []}}, []),
        ({"lang": {"$nin": []}}, [0, 1, 2, 3, 4, 5, 6]),
        ({"year": {"$in": [2021, "2023"]}}, [1, 4]),
        ({"topic": {"$exists": True}}, [0, 1, 2, 5]),
        ({"topic": {"$exists": False}}, [3, 4, 6]),
        ({"geo.city": "Lisbon"}, [0]),  # dotted path into an object
        ({"geo.city": None}, [4]),  # explicit null only
        ({"geo.city": {"$exists": True}}, [0, 4]),  # null exists
        ({"geo.city": {"$exists": False}}, [1, 2, 3, 5, 6]),  # geo a string in row 5: no city
        ({"geo": {"$exists": True}}, [0, 4, 5]),  # an object value exists
        ({"geo": "Lisbon"}, [5]),
        ({"file\\.name": "x.txt"}, [4]),  # a key with a dot, escaped in the path
        ({"file.name": "x.txt"}, []),  # unescaped: the path file -> name, absent
        ({"n.deep.er": [1, 2]}, [5]),
        ({"n.deep.er": [1.0, 2.0]}, [5]),
        ({"n.deep.er": [2, 1]}, []),
        ({"tags": ["a", "b"]}, [0, 2]),  # exact list equality
        ({"tags": ["b", "a"]}, []),  # order matters
        ({"tags": ["b"]}, [1]),
        ({"tags": []}, [5]),
        ({"tags": "a"}, [4]),  # a scalar never equals a list holding it
        ({"tags": {"$contains": "a"}}, [0, 2]),  # membership is $contains, lists only
        ({"tags": {"$contains": "b"}}, [0, 1, 2]),
        ({"tags": {"$in": [["b"], "a"]}}, [1, 4]),
        ({"tags": {"$gt": "a"}}, []),  # lists are not ordered
        ({"missing": {"$gt": 0}}, []),
        ({"missing": {"$ne": 0}}, [0, 1, 2, 3, 4, 5, 6]),
        ({"$or": [{"topic": "work"}, {"lang": "de"}]}, [1, 2]),
        ({"$and": [{"topic": "travel"}, {"$or": [{"lang": "en"}, {"ok": False}]}]}, [0, 2]),
        ({"$not": {"topic": "travel"}}, [1, 3, 4, 5, 6]),
        ({"year": {"$not": {"$gte": 2023}}}, [1, 3, 4, 5, 6]),  # missing and non-numbers too
        ({"year": {"$gte": 2022, "$lt": 2024}}, [0]),
        ({"topic": "travel", "year": {"$gte": 2023}, "lang": {"$in": ["en", "pt"]}}, [0]),
        ({}, [0, 1, 2, 3, 4, 5, 6]),
    ],
)
def test_hand_checked_masks(index: MetadataIndex, doc: dict[str, Any], rows: list[int]) -> None:
    assert rows_of(index, doc) == rows


def test_big_ints_are_exact_beyond_float_precision() -> None:
    values = [2**63 - 1, 2**63 - 2, 2**53, 2**53 + 1, -(2**63), 2.0**63, 2.0**53]
    index = MetadataIndex.from_list([{"v": v} for v in values])
    assert rows_of(index, {"v": 2**63 - 1}) == [0]
    assert rows_of(index, {"v": 2**63 - 2}) == [1]
    assert rows_of(index, {"v": {"$gt": 2**63 - 2}}) == [0, 5]  # 2.0**63 is above every int64
    assert rows_of(index, {"v": {"$lt": 2.0**63}}) == [0, 1, 2, 3, 4, 6]
    assert rows_of(index, {"v": 2**53 + 1}) == [3]
    assert rows_of(index, {"v": 2.0**53}) == [2, 6]  # 2**53 == 2.0**53; 2**53 + 1 is not
    assert rows_of(index, {"v": {"$gte": 2**53 + 1, "$lt": 2**63 - 2}}) == [3]
    assert rows_of(index, {"v": {"$in": [2**53 + 1, -(2**63)]}}) == [3, 4]
    assert rows_of(index, {"v": {"$lte": -(2**63)}}) == [4]


def test_negative_zero_and_unicode() -> None:
    index = MetadataIndex.from_list(
        [{"z": -0.0, "s": "café"}, {"z": 0, "s": "cafe\u0301"}, {"s": "😀"}, {"s": "\x00"}]
    )
    assert rows_of(index, {"z": 0.0}) == [0, 1]
    assert rows_of(index, {"s": "café"}) == [0]  # no Unicode normalisation: code points
    assert rows_of(index, {"s": {"$gt": "z"}}) == [2]  # code-point order
    assert rows_of(index, {"s": {"$lt": "a"}}) == [3]
    assert rows_of(index, {"s": {"$in": ["😀", "\x00"]}}) == [2, 3]


def test_mask_over_a_prefix_of_rows(index: MetadataIndex) -> None:
    assert rows_of(index, {"topic": "travel"}, n=2) == [0]
    assert rows_of(index, {"topic": {"$exists": False}}, n=4) == [3]
    assert index.mask(compile_filter({"topic": "travel"}), 0).shape == (0,)
    for bad in (-1, len(index) + 1, 1.5, True):
        with pytest.raises(ValidationError, match=r"mask\(n\): must be an int in \[0, 7\]"):
            index.mask(compile_filter({}), bad)  # type: ignore[arg-type]


def test_mask_returns_a_fresh_bool_array(index: MetadataIndex) -> None:
    f = compile_filter({"topic": "travel"})
    first = index.mask(f, len(index))
    assert first.dtype == np.bool_ and first.shape == (len(index),)
    first[:] = False
    assert rows_of(index, {"topic": "travel"}) == [0, 2]
    assert (
        index.mask({"topic": "travel"}, len(index)).tolist() == index.mask(f, len(index)).tolist()
    )


def test_append_returns_ordinals_and_is_seen_by_the_next_mask() -> None:
    index = MetadataIndex()
    assert index.append({"a": 1}) == 0
    assert rows_of(index, {"a": 1}) == [0]
    assert index.append(None) == 1
    assert index.extend([{"a": 1}, {"a": 2}]) == range(2, 4)
    assert index.append({"a": 1}) == 4
    assert rows_of(index, {"a": 1}) == [0, 2, 4]
    assert len(index) == 5


@pytest.mark.parametrize(
    ("bad", "rule"),
    [
        ({"a": float("nan")}, "metadata[1].a: float must be finite"),
        ({"a": {"b": [1, float("inf")]}}, "metadata[1].a.b[1]: float must be finite"),
        ({"a": 2**63}, "metadata[1].a: int outside the int64 range"),
        ({"a": {"b": b"raw"}}, "metadata[1].a.b: unsupported type bytes"),
        ({"a": "\udc00"}, "metadata[1].a: string is not valid UTF-8"),
        ({3: 1}, "metadata[1]: keys must be str"),
        ([1, 2], "metadata[1]: must be a dict or None"),
    ],
)
def test_invalid_rows_are_refused_before_anything_is_written(bad: Any, rule: str) -> None:
    index = MetadataIndex.from_list([{"a": 1}])
    with pytest.raises(ValidationError) as info:
        index.append(bad)
    assert str(info.value).startswith(rule), str(info.value)
    with pytest.raises(ValidationError):
        index.extend([{"a": 5}, {"b": 6}, bad])
    assert len(index) == 1
    assert index.paths() == ["a"]
    assert rows_of(index, {"a": {"$exists": True}}) == [0]
    assert index.append({"a": 2}) == 1  # the index is still usable


def test_deep_rows_are_refused_without_recursion() -> None:
    deep: Any = {}
    for _ in range(100_000):
        deep = {"a": deep}
    deep_list: Any = []
    for _ in range(100_000):
        deep_list = [deep_list]
    index = MetadataIndex()
    for bad in (deep, {"l": deep_list}):
        with pytest.raises(ValidationError, match="nested"):
            index.append(bad)
    assert len(index) == 0


def test_truncate_rolls_back_rows(index: MetadataIndex) -> None:
    index.truncate(2)
    assert len(index) == 2
    assert rows_of(index, {"topic": "travel"}) == [0]
    assert "file\\.name" not in index.paths()
    index.append({"topic": "travel"})
    index.append({})
    assert rows_of(index, {"topic": "travel"}) == [0, 2]
    assert rows_of(index, {"topic": {"$exists": False}}) == [3]
    with pytest.raises(ValidationError, match=r"truncate\(n\)"):
        index.truncate(5)
    index.truncate(0)
    assert len(index) == 0 and index.paths() == []


def test_dense_and_sparse_columns_give_the_same_masks() -> None:
    # "common" is in every row (dense); "rare" in 1 row of 500 (sparse); "half" turns dense
    # over the first 300 rows and back to sparse after a long tail without it
    rows: list[Any] = []
    for i in range(3000):
        row: dict[str, Any] = {"common": i % 7, "tag": ["x"] if i % 3 else ["y", "x"]}
        if i % 500 == 0:
            row["rare"] = "r"
        if i < 300 and i % 2 == 0:
            row["half"] = i
        rows.append(row)
    rows.append({"half": 1})
    index = MetadataIndex.from_list(rows[:300])
    assert rows_of(index, {"half": {"$gte": 296}}) == [296, 298]
    cols = index._columns
    assert cols[("half",)].dense
    index.extend(rows[300:])
    assert rows_of(index, {"half": {"$gte": 296}}) == [296, 298]
    assert rows_of(index, {"rare": "r"}) == [0, 500, 1000, 1500, 2000, 2500]
    assert rows_of(index, {"half": 1}) == [3000]
    want = [i for i in range(3000) if i % 7 == 3 and i % 3 == 0]
    assert rows_of(index, {"common": 3, "tag": {"$contains": "y"}}) == want
    want = [i for i in range(0, 3000, 500) if i % 7 != 3]
    assert rows_of(index, {"common": {"$ne": 3}, "rare": {"$exists": True}}) == want
    assert cols[("common",)].dense and not cols[("rare",)].dense and not cols[("half",)].dense


def test_replace_rewrites_one_row_in_place(index: MetadataIndex) -> None:
    index.replace(1, {"topic": "travel", "tags": ["z"], "year": 2**63 - 1})
    assert rows_of(index, {"topic": "travel"}) == [0, 1, 2]
    assert rows_of(index, {"lang": "pt"}) == []  # the old keys are gone
    assert rows_of(index, {"ok": {"$exists": True}}) == [2]
    assert rows_of(index, {"tags": {"$contains": "b"}}) == [0, 2]
    assert rows_of(index, {"tags": {"$contains": "z"}}) == [1]
    assert rows_of(index, {"year": 2**63 - 1}) == [1]
    index.replace(3, {"brand": "new"})  # was None
    index.replace(0, None)
    assert rows_of(index, {"brand": "new"}) == [3]
    assert rows_of(index, {"geo.city": {"$exists": True}}) == [4]
    assert "brand" in index.paths()
    index.replace(3, {})
    assert "brand" not in index.paths()  # a path no row holds any more is dropped
    index.append({"topic": "travel"})
    assert rows_of(index, {"topic": "travel"}) == [1, 2, 7]


def test_replace_checks_before_changing_anything(index: MetadataIndex) -> None:
    before = [rows_of(index, {"topic": "travel"}), rows_of(index, {"year": {"$exists": True}})]
    with pytest.raises(ValidationError, match=r"^metadata\[2\]\.year: float must be finite"):
        index.replace(2, {"topic": "x", "year": float("nan")})
    after = [rows_of(index, {"topic": "travel"}), rows_of(index, {"year": {"$exists": True}})]
    assert after == before
    for bad in (-1, len(index), "0"):
        with pytest.raises(ValidationError, match=r"replace\(row\)"):
            index.replace(bad, {})  # type: ignore[arg-type]
