"""Leaf conditions on one :class:`~spector_gpu.metadata.columns.Column`, as row masks.

Each function builds an entry mask with numpy over the column's arrays and scatters it to a
bool (n,) row mask; rows without the path are False (negations are taken by the caller on
row masks, which is what makes ``$ne``/``$nin``/``$not`` match missing fields).

Numbers compare exactly, as Python compares an int with a float: the float64 column decides
every entry whose rounded value differs from the rounded bound (rounding is monotone, so the
order is right), and when the bound's magnitude is at least 2**53 (where float64 stops being
exact for ints) the entries that tie with it are re-decided from the exact int64 values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from .columns import (
    EXACT_FLOAT_INT,
    TAG_FALSE,
    TAG_INT,
    TAG_NULL,
    TAG_TRUE,
    Column,
)
from .filters import CompareOp, FilterValue
from .values import INT_MAX, INT_MIN

__all__ = ["compare", "exists", "one_of"]

Mask = npt.NDArray[np.bool_]
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": np.equal,
    "gt": np.greater,
    "gte": np.greater_equal,
    "lt": np.less,
    "lte": np.less_equal,
}
_SMALL_SET = 8  # up to this many values, OR-ed equalities beat np.isin


def compare(col: Column, op: CompareOp, value: FilterValue, n: int) -> Mask:
    """Row mask of ``field op value`` (``op`` eq, gt, gte, lt, lte or contains)."""
    if op == "contains":
        return _contains(col, value, n)
    k = col.entries_below(n)
    v = value.value
    hit: Mask | None
    if op == "eq":
        hit = _equal(col, k, value)
    elif isinstance(v, str):
        hit = None if col.code is None else col.book.ordered(op, v)[col.code[:k]]
    else:
        assert isinstance(v, (int, float))  # compile_filter admits only numbers and strings
        hit = _numeric(col, k, op, v)
    return np.zeros(n, dtype=np.bool_) if hit is None else col.to_rows(hit, n)


def one_of(col: Column, values: Iterable[FilterValue], n: int) -> Mask:
    """Row mask of ``field $in values``."""
    k = col.entries_below(n)
    tags: list[int] = []
    exact: list[float] = []
    inexact: list[int | float] = []
    codes: list[int] = []
    for fv in values:
        v = fv.value
        if v is None or isinstance(v, bool):
            tags.append(TAG_NULL if v is None else TAG_TRUE if v else TAG_FALSE)
        elif isinstance(v, (int, float)):
            (exact if abs(v) < EXACT_FLOAT_INT else inexact).append(v)
        else:
            code = col.book.codes.get(fv.key)
            if code is not None:
                codes.append(code)
    hits: list[Mask] = []
    if tags:
        hits.append(_any_equal(col.tags[:k], tags))
    if exact and col.num is not None:
        hits.append(_any_equal(col.num[:k], exact))
    for v in inexact:
        found = _numeric(col, k, "eq", v)
        if found is not None:
            hits.append(found)
    if codes and col.code is not None:
        hits.append(_codes_in(col, k, codes))
    if not hits:
        return np.zeros(n, dtype=np.bool_)
    hit = hits[0]
    for more in hits[1:]:
        hit |= more
    return col.to_rows(hit, n)


def exists(col: Column, n: int) -> Mask:
    """Row mask of rows that hold any value at the column's path."""
    return col.present(n)


def _equal(col: Column, k: int, value: FilterValue) -> Mask | None:
    v = value.value
    hit: Mask
    if v is None or isinstance(v, bool):
        hit = col.tags[:k] == (TAG_NULL if v is None else TAG_TRUE if v else TAG_FALSE)
        return hit
    if isinstance(v, (int, float)):
        return _numeric(col, k, "eq", v)
    code = col.book.codes.get(value.key)
    if code is None or col.code is None:
        return None
    hit = col.code[:k] == code
    return hit


def _contains(col: Column, value: FilterValue, n: int) -> Mask:
    out = np.zeros(n, dtype=np.bool_)
    code = col.elems.get(value.key)
    if code is not None:
        rows, elems = col.members(n)
        out[rows[elems == code]] = True
    return out


def _numeric(col: Column, k: int, op: str, bound: int | float) -> Mask | None:
    if col.num is None:
        return None
    num = col.num[:k]
    rounded = float(bound)
    hit: Mask = _OPS[op](num, rounded)
    if abs(rounded) >= EXACT_FLOAT_INT:
        ties = np.flatnonzero(num == rounded)
        if ties.size:
            hit[ties] = _OPS[op](_exact_sign(col, num, ties, bound, rounded), 0)
    return hit


def _exact_sign(
    col: Column,
    num: npt.NDArray[np.float64],
    ties: npt.NDArray[np.intp],
    bound: int | float,
    rounded: float,
) -> npt.NDArray[np.int8]:
    """sign(value - bound) for entries whose float64 equals ``rounded`` = float(bound)."""
    # A float entry equals ``rounded`` exactly, so Python's exact float-int comparison of
    # ``rounded`` with ``bound`` decides it; int entries compare as int64.
    sign = np.full(len(ties), int(rounded > bound) - int(rounded < bound), dtype=np.int8)
    is_int = col.tags[ties] == TAG_INT
    if is_int.any():
        at = ties[is_int]
        if col.ival is not None:
            ints = col.ival[at]
        else:  # no int beyond ±2**53 was stored, so the float64 values are exact
            ints = num[at].astype(np.int64)
        # |bound| >= 2**53 here, and such floats are integral: int() is exact
        sign[is_int] = _sign_against(ints, int(bound))
    return sign


def _sign_against(values: npt.NDArray[np.int64], bound: int) -> npt.NDArray[np.int8]:
    if bound > INT_MAX:
        return np.full(len(values), -1, dtype=np.int8)
    if bound < INT_MIN:
        return np.full(len(values), 1, dtype=np.int8)
    b = np.int64(bound)
    return (values > b).astype(np.int8) - (values < b).astype(np.int8)


def _any_equal(arr: npt.NDArray[Any], values: list[Any]) -> Mask:
    if len(values) > _SMALL_SET:
        return np.isin(arr, np.array(values, dtype=arr.dtype))
    out: Mask = arr == values[0]
    for v in values[1:]:
        out |= arr == v
    return out


def _codes_in(col: Column, k: int, codes: list[int]) -> Mask:
    assert col.code is not None  # checked by the caller
    if len(codes) <= _SMALL_SET:
        return _any_equal(col.code[:k], codes)
    lut = np.zeros(len(col.book) + 1, dtype=np.bool_)  # last slot: code -1, never set
    lut[codes] = True
    result: Mask = lut[col.code[:k]]
    return result
