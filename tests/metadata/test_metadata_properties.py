"""MetadataIndex.mask against a plain-Python reference evaluator of the filter language.

The reference below walks each memory's metadata dict and reads the filter document directly
(no compiled Filter, no columns), following the semantics written in filters.py: JSON
equality (numbers by value, bool apart from numbers, lists element-wise), ordering only
number-number and string-string, $ne/$nin/$not matching missing fields, $exists, $contains.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spector_gpu.metadata import MetadataIndex, compile_filter
from spector_gpu.metadata import columns as columns_module

MISSING = object()

# -- reference evaluator ---------------------------------------------------------------


def ref_split(path: str) -> list[str]:
    keys, cur, i = [], "", 0
    while i < len(path):
        if path[i] == "\\":
            cur += path[i + 1]
            i += 2
        elif path[i] == ".":
            keys.append(cur)
            cur, i = "", i + 1
        else:
            cur, i = cur + path[i], i + 1
    return [*keys, cur]


def resolve(md: Any, path: str) -> Any:
    cur = md
    for key in ref_split(path):
        if not isinstance(cur, dict) or key not in cur:
            return MISSING
        cur = cur[key]
    return cur


def is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def jeq(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_num(a) or is_num(b):
        return is_num(a) and is_num(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(jeq(x, y) for x, y in zip(a, b))
        )
    return bool(a.keys() == b.keys() and all(jeq(a[k], b[k]) for k in a))


def ordered(v: Any, bound: Any, op: str) -> bool:
    if not ((is_num(v) and is_num(bound)) or (isinstance(v, str) and isinstance(bound, str))):
        return False
    return bool({"$gt": v > bound, "$gte": v >= bound, "$lt": v < bound, "$lte": v <= bound}[op])


def ref_op(v: Any, op: str, arg: Any) -> bool:
    present = v is not MISSING
    if op == "$eq":
        return present and jeq(v, arg)
    if op == "$ne":
        return not (present and jeq(v, arg))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return present and ordered(v, arg, op)
    if op == "$in":
        return present and any(jeq(v, a) for a in arg)
    if op == "$nin":
        return not (present and any(jeq(v, a) for a in arg))
    if op == "$exists":
        return present is bool(arg)
    if op == "$contains":
        return present and isinstance(v, list) and any(jeq(e, arg) for e in v)
    assert op == "$not"
    return not ref_field(v, arg)


def ref_field(v: Any, spec: Any) -> bool:
    if isinstance(spec, dict):
        return all(ref_op(v, op, arg) for op, arg in spec.items())
    return ref_op(v, "$eq", spec)


def ref_match(doc: dict[str, Any], md: Any) -> bool:
    for key, spec in doc.items():
        if key == "$and":
            ok = all(ref_match(d, md) for d in spec)
        elif key == "$or":
            ok = any(ref_match(d, md) for d in spec)
        elif key == "$not":
            ok = not ref_match(spec, md)
        else:
            ok = ref_field(resolve(md, key), spec)
        if not ok:
            return False
    return True


# -- strategies ------------------------------------------------------------------------

KEYS = ["a", "b", "x.y", "k\\"]
PATHS = ["a", "b", "a.b", "x\\.y", "k\\\\", "a.x\\.y", "zz"]
INTS = [0, 1, -1, 2, 7, 2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1, -(2**63), -(2**53) - 1]
FLOATS = [0.0, -0.0, 1.0, 0.5, 2.0, 7.0, -1.5, 2.0**53, 2.0**63, -(2.0**63), 1e300, 2.0**62]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(INTS),
    st.integers(-3, 3),
    st.sampled_from(FLOATS),
    st.text(alphabet="ab\x00é😀", max_size=2),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)
metadata = st.one_of(st.none(), st.dictionaries(st.sampled_from(KEYS), values, max_size=4))


def esc(path: tuple[str, ...]) -> str:
    return ".".join(k.replace("\\", "\\\\").replace(".", "\\.") for k in path)


def seen_pairs(rows: list[Any]) -> list[tuple[str, Any]]:
    """(path, value) for every non-object value in ``rows``, and (path, element) for list
    elements, so that filters can be built from values the rows really hold."""
    pairs: list[tuple[str, Any]] = []
    for md in rows:
        stack: list[tuple[tuple[str, ...], Any]] = [((), md)] if md is not None else []
        while stack:
            prefix, obj = stack.pop()
            for key, v in obj.items():
                path = (*prefix, key)
                if isinstance(v, dict):
                    stack.append((path, v))
                    continue
                pairs.append((esc(path), v))
                if isinstance(v, list):
                    pairs.extend((esc(path), e) for e in v if not isinstance(e, dict))
    return pairs


def is_orderable(v: Any) -> bool:
    return isinstance(v, (int, float, str)) and not isinstance(v, bool)


def twins(v: Any) -> list[Any]:
    """``v`` and the numbers next to it across the int/float divide (float(v), int(v), v ± 1),
    where float64 rounding would blur exact comparisons."""
    if not is_num(v):
        return [v]
    out = [v, float(v)]
    if isinstance(v, float) and v.is_integer() and -(2**63) <= v < 2**63:
        out.append(int(v))
    if isinstance(v, int):
        out += [w for w in (v - 1, v + 1) if -(2**63) <= w < 2**63]
    return out


def specs_about(v: Any) -> st.SearchStrategy[Any]:
    """Field specs built around a value ``v`` the rows hold."""
    near = st.one_of(st.sampled_from(twins(v)), scalars)
    bound = st.sampled_from(twins(v)) if is_orderable(v) else st.sampled_from(INTS + FLOATS + ["a"])
    single = st.one_of(
        st.tuples(st.sampled_from(["$eq", "$ne", "$contains"]), near),
        st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), bound),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(near, max_size=3)),
        st.tuples(st.just("$exists"), st.booleans()),
    )
    ops = st.lists(single, min_size=1, max_size=2).map(dict)
    return st.one_of(st.just(v), ops, ops, ops.map(lambda d: {"$not": d}))


def filter_docs(pairs: list[tuple[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Filter documents, mostly about values that occur in the rows (``pairs``) so that they
    split the rows instead of matching none or all; some about random paths and values."""
    anywhere = st.tuples(st.sampled_from(PATHS), st.one_of(scalars, st.lists(values, max_size=3)))
    if pairs:
        pair = st.integers(0, len(pairs) - 1).map(pairs.__getitem__)
        chosen = st.one_of(pair, pair, pair, anywhere)
    else:
        chosen = anywhere
    condition = chosen.flatmap(lambda pv: specs_about(pv[1]).map(lambda spec: (pv[0], spec)))
    leaf = st.lists(condition, min_size=1, max_size=2).map(dict)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3).map(lambda ds: {"$and": ds}),
            st.lists(inner, min_size=1, max_size=3).map(lambda ds: {"$or": ds}),
            inner.map(lambda d: {"$not": d}),
            st.tuples(leaf, inner).map(lambda t: {**t[0], "$or": [t[1]]}),
        ),
        max_leaves=5,
    )


def expected(doc: dict[str, Any], rows: list[Any], n: int) -> list[bool]:
    return [ref_match(doc, md) for md in rows[:n]]


# -- properties ------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(metadata, max_size=25), st.data())
def test_mask_equals_reference(rows: list[Any], data: st.DataObject) -> None:
    docs = data.draw(st.lists(filter_docs(seen_pairs(rows)), min_size=1, max_size=4))
    # a tiny dense threshold makes columns switch between sparse and dense storage often
    with mock.patch.object(columns_module, "_MIN_DENSE", data.draw(st.sampled_from([1, 4, 64]))):
        index = MetadataIndex()
        cut = data.draw(st.integers(0, len(rows)))
        index.extend(rows[:cut])
        for md in rows[cut:]:
            index.append(md)
        filters = [compile_filter(d) for d in docs]
        for doc, f in zip(docs, filters):
            assert index.mask(f, len(rows)).tolist() == expected(doc, rows, len(rows)), doc
            n = data.draw(st.integers(0, len(rows)))
            assert index.mask(f, n).tolist() == expected(doc, rows, n), (doc, n)
        restored = MetadataIndex.from_state(index.state(), len(rows))
        for doc, f in zip(docs, filters):
            assert restored.mask(f, len(rows)).tolist() == expected(doc, rows, len(rows)), doc


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(metadata, max_size=20), st.data())
def test_interleaved_appends_truncates_and_masks(rows: list[Any], data: st.DataObject) -> None:
    doc = data.draw(filter_docs(seen_pairs(rows)))
    with mock.patch.object(columns_module, "_MIN_DENSE", data.draw(st.sampled_from([1, 64]))):
        f = compile_filter(doc)
        index, model = MetadataIndex(), []
        for md in rows:
            index.append(md)
            model.append(md)
            if data.draw(st.booleans()):
                assert index.mask(f, len(model)).tolist() == expected(doc, model, len(model))
            if data.draw(st.integers(0, 5)) == 0:
                keep = data.draw(st.integers(0, len(model)))
                index.truncate(keep)
                del model[keep:]
                assert len(index) == keep
        assert index.mask(f, len(model)).tolist() == expected(doc, model, len(model))
        rebuilt = MetadataIndex.from_list(model)
        assert rebuilt.mask(f, len(model)).tolist() == expected(doc, model, len(model))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(metadata, min_size=1, max_size=12), st.data())
def test_many_rows_with_default_thresholds(rows: list[Any], data: st.DataObject) -> None:
    docs = data.draw(st.lists(filter_docs(seen_pairs(rows)), min_size=1, max_size=3))
    # repeated to a few hundred rows so columns cross the real dense/sparse thresholds
    big = (rows * (300 // len(rows) + 1))[:300]
    index = MetadataIndex.from_list(big)
    for doc in docs:
        got = index.mask(compile_filter(doc), len(big))
        assert got.dtype == np.bool_ and got.shape == (len(big),)
        assert got.tolist() == expected(doc, big, len(big)), doc


NUMBERS = st.one_of(
    st.sampled_from(INTS + FLOATS),
    st.sampled_from(INTS + FLOATS).flatmap(lambda v: st.sampled_from(twins(v))),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(NUMBERS, st.just("s"), st.none()), max_size=30),
    st.lists(
        st.tuples(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), NUMBERS),
        min_size=1,
        max_size=6,
    ),
    st.lists(NUMBERS, max_size=12),
    st.sampled_from([1, 64]),
)
def test_numeric_comparisons_are_exact(
    values_: list[Any], ops: list[tuple[str, Any]], choices: list[Any], min_dense: int
) -> None:
    # ints beyond ±2**53 and floats next to them: float64 alone would call 2**53 + 1 == 2.0**53
    rows = [{"a": v} for v in values_]
    with mock.patch.object(columns_module, "_MIN_DENSE", min_dense):
        index = MetadataIndex.from_list(rows)
        for op, bound in ops:
            doc = {"a": {op: bound}}
            assert index.mask(compile_filter(doc), len(rows)).tolist() == expected(
                doc, rows, len(rows)
            ), doc
        for doc in ({"a": {"$in": choices}}, {"a": {"$nin": choices}}):
            assert index.mask(compile_filter(doc), len(rows)).tolist() == expected(
                doc, rows, len(rows)
            ), doc


POOL = [
    None,
    True,
    False,
    0,
    1,
    1.0,
    -0.0,
    2**53 + 1,
    2.0**53,
    "",
    "a",
    "b",
    "é",
    [],
    ["a"],
    [1, "a"],
    [1.0, "a"],
    [[1]],
    {"b": 1},
    {},
]
pool_value = st.sampled_from(POOL)
literal = st.sampled_from([v for v in POOL if not isinstance(v, dict)])
bound = st.sampled_from([v for v in POOL if is_orderable(v)])
field_op = st.one_of(
    st.tuples(st.sampled_from(["$eq", "$ne", "$contains"]), literal),
    st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), bound),
    st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(literal, max_size=3)),
    st.tuples(st.just("$exists"), st.booleans()),
)
one_field_rows = st.lists(
    st.one_of(pool_value.map(lambda v: {"a": v}), st.just({}), st.none()), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(one_field_rows, st.lists(field_op, min_size=1, max_size=8), st.sampled_from([1, 64]))
def test_every_operator_on_every_value_type(
    rows: list[Any], ops: list[tuple[str, Any]], min_dense: int
) -> None:
    with mock.patch.object(columns_module, "_MIN_DENSE", min_dense):
        index = MetadataIndex.from_list(rows)
        for op, arg in ops:
            for doc in ({"a": {op: arg}}, {"a": {"$not": {op: arg}}}):
                got = index.mask(compile_filter(doc), len(rows)).tolist()
                assert got == expected(doc, rows, len(rows)), doc


@settings(max_examples=200, deadline=None)
@given(one_field_rows, st.lists(field_op, min_size=1, max_size=3), st.data())
def test_truncate_then_regrow_leaves_no_stale_values(
    rows: list[Any], ops: list[tuple[str, Any]], data: st.DataObject
) -> None:
    with mock.patch.object(columns_module, "_MIN_DENSE", data.draw(st.sampled_from([1, 64]))):
        index, model = MetadataIndex(), []
        for md in rows:
            index.append(md)
            model.append(md)
            if data.draw(st.integers(0, 3)) == 0:
                keep = data.draw(st.integers(0, len(model)))
                index.truncate(keep)
                del model[keep:]
        for op, arg in ops:
            doc = {"a": {op: arg}}
            assert index.mask(compile_filter(doc), len(model)).tolist() == expected(
                doc, model, len(model)
            ), doc


short_text = st.text(alphabet="ab\x00é😀", max_size=3)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(short_text, st.just(["a"]), st.integers(0, 2)), max_size=12), max_size=5
    ),
    st.lists(
        st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), short_text),
        min_size=1,
        max_size=4,
    ),
)
def test_string_ranges_while_the_codebook_grows(
    chunks: list[list[Any]], ranges: list[tuple[str, str]]
) -> None:
    # new strings arrive between queries, so the sorted view is merged incrementally
    index, rows = MetadataIndex(), list[dict[str, Any]]()
    for chunk in chunks:
        index.extend({"s": v} for v in chunk)
        rows.extend({"s": v} for v in chunk)
        for op, bound in ranges:
            doc = {"s": {op: bound}}
            assert index.mask(compile_filter(doc), len(rows)).tolist() == expected(
                doc, rows, len(rows)
            ), doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(metadata, min_size=1, max_size=20), st.data())
def test_replace_rewrites_rows_like_a_list(rows: list[Any], data: st.DataObject) -> None:
    with mock.patch.object(columns_module, "_MIN_DENSE", data.draw(st.sampled_from([1, 4, 64]))):
        index = MetadataIndex.from_list(rows)
        model = list(rows)
        docs = data.draw(st.lists(filter_docs(seen_pairs(rows)), min_size=1, max_size=2))
        for _ in range(data.draw(st.integers(1, 8))):
            if model and data.draw(st.integers(0, 3)) > 0:
                i = data.draw(st.integers(0, len(model) - 1))
                md = data.draw(st.one_of(metadata, st.sampled_from(model)))
                index.replace(i, md)
                model[i] = md
            else:
                md = data.draw(metadata)
                index.append(md)
                model.append(md)
            if data.draw(st.booleans()):
                doc = docs[0]
                assert index.mask(compile_filter(doc), len(model)).tolist() == expected(
                    doc, model, len(model)
                )
        docs += data.draw(st.lists(filter_docs(seen_pairs(model)), min_size=1, max_size=2))
        restored = MetadataIndex.from_state(index.state(), len(model))
        for doc in docs:
            want = expected(doc, model, len(model))
            assert index.mask(compile_filter(doc), len(model)).tolist() == want, doc
            assert restored.mask(compile_filter(doc), len(model)).tolist() == want, doc


@settings(max_examples=200, deadline=None)
@given(one_field_rows.filter(bool), st.lists(field_op, min_size=1, max_size=3), st.data())
def test_replace_on_one_field_keeps_every_operator_right(
    rows: list[Any], ops: list[tuple[str, Any]], data: st.DataObject
) -> None:
    with mock.patch.object(columns_module, "_MIN_DENSE", data.draw(st.sampled_from([1, 64]))):
        index, model = MetadataIndex.from_list(rows), list(rows)
        for _ in range(data.draw(st.integers(1, 6))):
            i = data.draw(st.integers(0, len(model) - 1))
            md = data.draw(st.one_of(pool_value.map(lambda v: {"a": v}), st.just({}), st.none()))
            index.replace(i, md)
            model[i] = md
        ops = [*ops, ("$contains", "a"), ("$contains", 1)]
        n = data.draw(st.integers(0, len(model)))
        for op, arg in ops:
            doc = {"a": {op: arg}}
            f = compile_filter(doc)
            assert index.mask(f, len(model)).tolist() == expected(doc, model, len(model)), doc
            assert index.mask(f, n).tolist() == expected(doc, model, n), (doc, n)
        index.truncate(n)
        index.append({"a": ["a", 1]})
        model[n:] = [{"a": ["a", 1]}]
        for op, arg in ops:
            doc = {"a": {op: arg}}
            assert index.mask(compile_filter(doc), n + 1).tolist() == expected(doc, model, n + 1), (
                doc
            )
