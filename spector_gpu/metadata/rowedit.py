"""In-place edits of one row of a flushed :class:`~spector_gpu.metadata.columns.Column`.

Appends only ever add rows above the last one; :meth:`MetadataIndex.replace` (an update that
keeps a memory's ordinal) needs to drop a row's value from the middle of a column and write
a new one there. Dense storage edits the slot; sparse storage shifts the entries above it
(O(entries) per edit, which is fine for the occasional update and keeps every array sorted
by row, as masks and snapshots require).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from .columns import EXACT_FLOAT_INT, TAG_FLOAT, TAG_INT, TAG_LIST, TAG_STRING, Column, grown

__all__ = ["clear_row", "put_value"]


def clear_row(col: Column, row: int) -> None:
    """Remove whatever ``col`` holds for ``row`` (nothing if it holds nothing)."""
    if col.dense:
        if row < col.size and col.tags[row]:
            col.tags[row] = 0
            if col.num is not None:
                col.num[row] = np.nan
            if col.code is not None:
                col.code[row] = -1
            col.count -= 1
    else:
        at = int(np.searchsorted(col.rows[: col.size], row))
        if at < col.size and col.rows[at] == row:
            for arr in col.arrays():
                arr[at : col.size - 1] = arr[at + 1 : col.size]
            col.size -= 1
            col.count -= 1
    lo, hi = np.searchsorted(col.mem_rows[: col.mem_size], [row, row + 1]).tolist()
    if hi > lo:
        for arr in (col.mem_rows, col.mem_elems):
            arr[lo : col.mem_size - (hi - lo)] = arr[hi : col.mem_size]
        col.mem_size -= hi - lo


def put_value(col: Column, row: int, tag: int, payload: Any) -> None:
    """Store one value for ``row``, which must hold none at this path (see :func:`clear_row`).

    ``payload`` is as :meth:`Column.queued_values` gives it: the number, the string, the
    list's equality key, or None.
    """
    numeric, coded = tag in (TAG_INT, TAG_FLOAT), tag in (TAG_STRING, TAG_LIST)
    if numeric and col.num is None:
        col.num = np.full(len(col.tags), np.nan)
    if coded and col.code is None:
        col.code = np.full(len(col.tags), -1, dtype=np.int32)
    big = tag == TAG_INT and not -EXACT_FLOAT_INT <= payload <= EXACT_FLOAT_INT
    if big and col.ival is None:
        col.start_ival()
    at = _open_slot(col, row)
    col.tags[at] = tag
    if col.num is not None:
        col.num[at] = float(payload) if numeric else np.nan
    if col.code is not None:
        col.code[at] = col.book.code(payload) if coded else -1
    if col.ival is not None:
        col.ival[at] = int(payload) if tag == TAG_INT else 0
    col.count += 1
    if tag == TAG_LIST:
        _insert_members(col, row, payload[1])
    col.rebalance()


def _open_slot(col: Column, row: int) -> int:
    """The entry index where ``row``'s value goes, made free."""
    if col.dense:
        if row >= col.size:
            col.reserve(row + 1)
            col.size = row + 1
        return row
    at = int(np.searchsorted(col.rows[: col.size], row))
    col.reserve(col.size + 1)
    for arr in col.arrays():
        arr[at + 1 : col.size + 1] = arr[at : col.size]
    col.rows[at] = row
    col.size += 1
    return at


def _insert_members(col: Column, row: int, elements: tuple[Hashable, ...]) -> None:
    k = len(elements)
    if not k:
        return
    end = col.mem_size + k
    col.mem_rows = grown(col.mem_rows, end, 0)
    col.mem_elems = grown(col.mem_elems, end, 0)
    at = int(np.searchsorted(col.mem_rows[: col.mem_size], row))
    for arr in (col.mem_rows, col.mem_elems):
        arr[at + k : end] = arr[at : col.mem_size]
    col.mem_rows[at : at + k] = row
    col.mem_elems[at : at + k] = [col.elem_code(e) for e in elements]
    col.mem_size = end
