"""The typed column of one leaf path, the storage behind :class:`MetadataIndex`.

One :class:`Column` holds every value found at one path (e.g. ``("place", "city")``) across
all rows. Each present value is an *entry* with:

=========  ========  =================================================================
array      dtype     content
=========  ========  =================================================================
``tags``   uint8     the value's type (``TAG_*``; 0 = no value, dense storage only)
``num``    float64   the number for ``TAG_INT``/``TAG_FLOAT``, NaN otherwise (so every
                     comparison against a non-number is false without a type test)
``code``   int32     dictionary code of a string or list (:class:`Codebook`), -1 otherwise
``ival``   int64     the exact int for ``TAG_INT``; only kept once an int beyond ±2**53
                     (where float64 rounds) has been seen
=========  ========  =================================================================

``num``, ``code`` and ``ival`` are allocated the first time they are needed. Storage is
*dense* (indexed by row, length ``size`` = rows covered) when at least a quarter of the rows
up to the last one carry the path, else *sparse* (``rows`` int32 ascending, ``size``
entries); a dense column that falls under 1/16 goes back to sparse. Dense costs no scatter
when a mask is built; sparse keeps rare paths at O(entries) memory.

List values also feed a membership list (``mem_rows`` int32 ascending, ``mem_elems`` int32
codes of the elements' equality keys) for ``$contains``.

Appends go to Python lists first (each ``add_*`` is a few list appends) and are moved into
the arrays in bulk by :meth:`Column.flush`, which the index calls before it reads a column.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from .codebook import Codebook

__all__ = [
    "EXACT_FLOAT_INT",
    "TAG_FALSE",
    "TAG_FLOAT",
    "TAG_INT",
    "TAG_LIST",
    "TAG_NULL",
    "TAG_OBJECT",
    "TAG_STRING",
    "TAG_TRUE",
    "Column",
]

TAG_NULL, TAG_FALSE, TAG_TRUE, TAG_INT, TAG_FLOAT, TAG_STRING, TAG_LIST, TAG_OBJECT = range(1, 9)
EXACT_FLOAT_INT = 2**53  # every int of at most this magnitude is exact in float64

_DENSE_AT = 4  # sparse -> dense when entries * 4 >= rows covered
_SPARSE_AT = 16  # dense -> sparse when entries * 16 < rows covered
_MIN_DENSE = 64  # entries below which a column stays sparse

Array = npt.NDArray[Any]


def grown(arr: Array, need: int, fill: Any) -> Array:
    """``arr`` with capacity for ``need`` elements (doubling), new slots set to ``fill``."""
    if need <= len(arr):
        return arr
    out = np.full(max(need, 2 * len(arr), 16), fill, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


class Column:
    """All values at one leaf path (layout in the module docstring)."""

    __slots__ = (
        "_p_big",
        "_p_mem_elems",
        "_p_mem_rows",
        "_p_rows",
        "_p_tags",
        "_p_vals",
        "book",
        "code",
        "count",
        "dense",
        "elems",
        "ival",
        "mem_elems",
        "mem_rows",
        "mem_size",
        "num",
        "rows",
        "size",
        "tags",
    )

    def __init__(self) -> None:
        self.dense = False
        self.size = 0  # sparse: entries; dense: rows covered
        self.count = 0  # entries (values present)
        self.rows: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.tags: npt.NDArray[np.uint8] = np.zeros(0, dtype=np.uint8)
        self.num: npt.NDArray[np.float64] | None = None
        self.code: npt.NDArray[np.int32] | None = None
        self.ival: npt.NDArray[np.int64] | None = None
        self.book = Codebook()
        self.elems: dict[Hashable, int] = {}  # list element equality key -> element code
        self.mem_rows: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.mem_elems: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.mem_size = 0
        self._p_rows: list[int] = []
        self._p_tags: list[int] = []
        self._p_vals: list[int | float] = []
        self._p_big: list[tuple[int, int]] = []
        self._p_mem_rows: list[int] = []
        self._p_mem_elems: list[int] = []

    # -- appending ---------------------------------------------------------------------

    def add_string(self, row: int, text: str) -> None:
        """Queue a string value of ``row``."""
        self._p_rows.append(row)
        self._p_tags.append(TAG_STRING)
        code = self.book.codes.get(text)
        self._p_vals.append(self.book.code(text) if code is None else code)

    def add_number(self, row: int, tag: int, value: int | float) -> None:
        """Queue a number (``tag`` TAG_INT or TAG_FLOAT) of ``row``."""
        self._p_rows.append(row)
        self._p_tags.append(tag)
        self._p_vals.append(value)
        if tag == TAG_INT and not -EXACT_FLOAT_INT <= value <= EXACT_FLOAT_INT:
            self._p_big.append((len(self._p_rows) - 1, int(value)))

    def add_list(self, row: int, key: tuple[str, tuple[Hashable, ...]]) -> None:
        """Queue a list of ``row``, given as its equality key ``("list", element keys)``."""
        self._p_rows.append(row)
        self._p_tags.append(TAG_LIST)
        self._p_vals.append(self.book.code(key))
        elems = self.elems
        for element in key[1]:
            code = elems.get(element)
            if code is None:
                code = elems[element] = len(elems)
            self._p_mem_rows.append(row)
            self._p_mem_elems.append(code)

    def add_tag(self, row: int, tag: int) -> None:
        """Queue a value that its tag says all about (null, true, false, an object)."""
        self._p_rows.append(row)
        self._p_tags.append(tag)
        self._p_vals.append(0)

    def discard_queued(self, first_row: int) -> None:
        """Drop queued values of rows ``>= first_row`` (an append that failed half-way)."""
        keep = len(self._p_rows)
        while keep and self._p_rows[keep - 1] >= first_row:
            keep -= 1
        del self._p_rows[keep:], self._p_tags[keep:], self._p_vals[keep:]
        self._p_big = [(pos, v) for pos, v in self._p_big if pos < keep]
        keep = len(self._p_mem_rows)
        while keep and self._p_mem_rows[keep - 1] >= first_row:
            keep -= 1
        del self._p_mem_rows[keep:], self._p_mem_elems[keep:]

    def queued_values(self) -> list[tuple[int, int, Any]]:
        """(row, tag, payload) of every queued value: the number, the string, the list's
        equality key, or None."""
        out: list[tuple[int, int, Any]] = []
        for row, tag, val in zip(self._p_rows, self._p_tags, self._p_vals):
            coded = tag in (TAG_STRING, TAG_LIST)
            numeric = tag in (TAG_INT, TAG_FLOAT)
            out.append((row, tag, self.book.keys[int(val)] if coded else val if numeric else None))
        return out

    def arrays(self) -> list[Array]:
        """The allocated per-entry arrays (``rows`` when sparse, ``tags``, ``num``, ``code``,
        ``ival``), for edits that shift entries."""
        out: list[Array] = [] if self.dense else [self.rows]
        out.append(self.tags)
        out.extend(a for a in (self.num, self.code, self.ival) if a is not None)
        return out

    def is_empty(self) -> bool:
        """No stored and no queued values."""
        return self.count == 0 and not self._p_rows

    def elem_code(self, key: Hashable) -> int:
        """The element code of a list element's equality key, adding it if new."""
        found = self.elems.get(key)
        if found is None:
            found = self.elems[key] = len(self.elems)
        return found

    def flush(self) -> None:
        """Move queued values into the arrays (vectorised) and rebalance dense/sparse."""
        if not self._p_rows:
            return
        if self._p_mem_rows:
            end = self.mem_size + len(self._p_mem_rows)
            self.mem_rows = grown(self.mem_rows, end, 0)
            self.mem_elems = grown(self.mem_elems, end, 0)
            self.mem_rows[self.mem_size : end] = self._p_mem_rows
            self.mem_elems[self.mem_size : end] = self._p_mem_elems
            self.mem_size = end
            self._p_mem_rows, self._p_mem_elems = [], []
        rows = np.array(self._p_rows, dtype=np.int64)
        tags = np.array(self._p_tags, dtype=np.uint8)
        vals = np.array(self._p_vals, dtype=np.float64)
        big, self._p_big = self._p_big, []
        self._p_rows, self._p_tags, self._p_vals = [], [], []
        self.store(rows, tags, vals, big)

    def store(
        self,
        rows: npt.NDArray[np.int64],
        tags: npt.NDArray[np.uint8],
        vals: npt.NDArray[np.float64],
        big: list[tuple[int, int]],
    ) -> None:
        """Write entries for ascending ``rows`` above every stored row.

        ``vals`` holds the number (rounded for big ints) or the code per entry; ``big`` the
        exact ints beyond ±2**53 as (position in this batch, value).
        """
        numeric = (tags == TAG_INT) | (tags == TAG_FLOAT)
        coded = (tags == TAG_STRING) | (tags == TAG_LIST)
        if self.num is None and numeric.any():
            self.num = np.full(len(self.tags), np.nan)
        if self.code is None and coded.any():
            self.code = np.full(len(self.tags), -1, dtype=np.int32)
        if self.ival is None and big:
            self.start_ival()
        if self.dense:
            at: Any = rows
            self.size = max(self.size, int(rows[-1]) + 1)
            end = self.size
        else:
            at = slice(self.size, self.size + len(rows))
            end = self.size = self.size + len(rows)
        self.reserve(end)
        if not self.dense:
            self.rows[at] = rows
        self.tags[at] = tags
        if self.num is not None:
            self.num[at] = np.where(numeric, vals, np.nan)
        if self.code is not None:
            self.code[at] = np.where(coded, vals, -1)
        if self.ival is not None:
            self.ival[at] = _exact_ints(tags, vals, big)
        self.count += len(rows)
        self.rebalance()

    def start_ival(self) -> None:
        """Allocate ``ival`` (the first int beyond ±2**53 is about to be stored)."""
        self.ival = np.zeros(len(self.tags), dtype=np.int64)
        if self.num is not None:  # every int stored so far is within ±2**53: exact in num
            ints = np.flatnonzero(self.tags[: self.size] == TAG_INT)
            self.ival[ints] = self.num[ints].astype(np.int64)

    def reserve(self, end: int) -> None:
        """Capacity for ``end`` entries (sparse) or rows (dense) in every allocated array."""
        self.tags = grown(self.tags, end, 0)
        if not self.dense:
            self.rows = grown(self.rows, end, 0)
        if self.num is not None:
            self.num = grown(self.num, end, np.nan)
        if self.code is not None:
            self.code = grown(self.code, end, -1)
        if self.ival is not None:
            self.ival = grown(self.ival, end, 0)

    # -- storage layout ----------------------------------------------------------------

    def extent(self) -> int:
        """Rows covered: the last row holding a value, plus one."""
        if self.dense:
            return self.size
        return int(self.rows[self.size - 1]) + 1 if self.size else 0

    def rebalance(self) -> None:
        """Switch between dense and sparse storage when the density crossed a threshold."""
        extent = self.extent()
        if not self.dense and self.count >= _MIN_DENSE and self.count * _DENSE_AT >= extent:
            self._to_dense(extent)
        elif self.dense and self.count * _SPARSE_AT < extent:
            self._to_sparse()

    def _to_dense(self, extent: int) -> None:
        where = self.rows[: self.size]
        cap = max(extent, 16)
        self.tags = _scatter(self.tags[: self.size], where, cap, 0)
        if self.num is not None:
            self.num = _scatter(self.num[: self.size], where, cap, np.nan)
        if self.code is not None:
            self.code = _scatter(self.code[: self.size], where, cap, -1)
        if self.ival is not None:
            self.ival = _scatter(self.ival[: self.size], where, cap, 0)
        self.rows = np.zeros(0, dtype=np.int32)
        self.dense, self.size = True, extent

    def _to_sparse(self) -> None:
        where = np.flatnonzero(self.tags[: self.size])
        self.tags = self.tags[where]
        if self.num is not None:
            self.num = self.num[where]
        if self.code is not None:
            self.code = self.code[where]
        if self.ival is not None:
            self.ival = self.ival[where]
        self.rows = where.astype(np.int32)
        self.dense, self.size = False, len(where)

    def truncate(self, n: int) -> None:
        """Drop every value of rows ``>= n`` (queued values must have been flushed)."""
        if self.dense:
            keep = min(self.size, n)
            self.tags[keep : self.size] = 0
            if self.num is not None:
                self.num[keep : self.size] = np.nan
            if self.code is not None:
                self.code[keep : self.size] = -1
            self.size = keep
            self.count = int(np.count_nonzero(self.tags[:keep]))
        else:
            self.size = self.count = self.entries_below(n)
        self.mem_size = int(np.searchsorted(self.mem_rows[: self.mem_size], n))
        self.rebalance()

    # -- reading -----------------------------------------------------------------------

    def entries_below(self, n: int) -> int:
        """How many leading entries belong to rows < ``n`` (dense: rows covered below n)."""
        if self.dense:
            return min(self.size, n)
        if self.size == 0 or self.rows[self.size - 1] < n:
            return self.size
        return int(np.searchsorted(self.rows[: self.size], n))

    def to_rows(self, hit: npt.NDArray[np.bool_], n: int) -> npt.NDArray[np.bool_]:
        """Row mask bool (n,) from an entry mask over the first ``len(hit)`` entries."""
        k = len(hit)
        if self.dense and k == n:
            return hit
        out = np.zeros(n, dtype=np.bool_)
        if self.dense:
            out[:k] = hit
        else:
            out[self.rows[:k][hit]] = True
        return out

    def present(self, n: int) -> npt.NDArray[np.bool_]:
        """Row mask bool (n,): rows < n that hold a value at this path."""
        k = self.entries_below(n)
        if self.dense:
            return self.to_rows(self.tags[:k] != 0, n)
        out = np.zeros(n, dtype=np.bool_)
        out[self.rows[:k]] = True
        return out

    def entries(self) -> tuple[Array, Array, Array, Array, Array | None]:
        """Copies of (rows int32, tags, num, code, ival or None) for every entry, rows ascending
        (num NaN and code -1 where absent)."""
        if self.dense:
            sel: Any = np.flatnonzero(self.tags[: self.size])
            rows = sel.astype(np.int32)
        else:
            sel = slice(0, self.size)
            rows = self.rows[sel].copy()
        k = len(rows)
        num = self.num[sel].copy() if self.num is not None else np.full(k, np.nan)
        code = self.code[sel].copy() if self.code is not None else np.full(k, -1, np.int32)
        ival = self.ival[sel].copy() if self.ival is not None else None
        return rows, self.tags[sel].copy(), num, code, ival

    def members(self, n: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """(rows, element codes) of list elements in rows < n, rows ascending."""
        m = int(np.searchsorted(self.mem_rows[: self.mem_size], n))
        return self.mem_rows[:m], self.mem_elems[:m]


def _exact_ints(
    tags: npt.NDArray[np.uint8], vals: npt.NDArray[np.float64], big: list[tuple[int, int]]
) -> npt.NDArray[np.int64]:
    out = np.zeros(len(tags), dtype=np.int64)
    small = (tags == TAG_INT) & (np.abs(vals) <= EXACT_FLOAT_INT)
    out[small] = vals[small].astype(np.int64)
    for pos, value in big:
        out[pos] = value
    return out


def _scatter(values: Array, where: Array, cap: int, fill: Any) -> Array:
    out = np.full(cap, fill, dtype=values.dtype)
    out[where] = values
    return out
