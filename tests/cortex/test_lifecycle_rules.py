"""The lifecycle rule (cortex/lifecycle.py): dead rows, live rows, what compaction keeps."""

from __future__ import annotations

import numpy as np

from spector_gpu.cortex.columns import Columns
from spector_gpu.cortex.layouts import HEADER_DTYPE, INDEX_DTYPE, STRENGTH_DTYPE
from spector_gpu.cortex.lifecycle import (
    bad_repeats,
    dead_mask,
    expired,
    keep_mask,
    live_mask,
    previous_rows,
    removed,
    replaced,
    tombstoned,
    with_replaced,
    with_tombstone,
)

NOW = 1_800_000_000_000


def _columns(ids: list[int], prev: list[int], expires: list[int]) -> Columns:
    n = len(ids)
    entries = np.zeros(n, dtype=INDEX_DTYPE)
    entries["id"] = ids
    entries["graph_slot"] = np.arange(n)
    strength = np.zeros(n, dtype=STRENGTH_DTYPE)
    strength["expires_ms"] = expires
    cols = Columns()
    for k in range(n):  # one commit per row, as the write path adopts them
        cols.extend(
            k,
            entries[k : k + 1],
            np.zeros(1, dtype=HEADER_DTYPE),
            strength[k : k + 1],
            np.array([prev[k]]),
        )
    return cols


def test_marks_are_bits_that_only_add() -> None:
    h = np.zeros(3, dtype=HEADER_DTYPE)
    h["flags"] = [0x20, 0x22, 0x28]
    h["consolidation_flags"] = [0, 0x02, 0x80]
    t, r = with_tombstone(h), with_replaced(h)
    assert tombstoned(t).all() and not tombstoned(h).any()
    assert replaced(r).all() and not replaced(h).any()
    assert ((t["flags"] & 0xFE) == h["flags"]).all()  # nothing else changed
    assert ((r["consolidation_flags"] & 0xBF) == h["consolidation_flags"]).all()
    assert removed(t).all() and removed(r).all() and not removed(h).any()


def test_expiry_is_at_or_before_now_and_zero_is_never() -> None:
    e = np.array([0, NOW - 1, NOW, NOW + 1], dtype=np.int64)
    assert expired(e, NOW).tolist() == [False, True, True, False]


def test_dead_live_and_kept_rows() -> None:
    # memory A: rows 0 (v1) and 2 (v2); B: row 1, deleted; C: rows 3 (v1), 4 (v2), expired;
    # D: row 5, live
    cols = _columns([1, 2, 1, 3, 3, 4], [-1, -1, 0, -1, 3, -1], [0, 0, 0, 0, NOW - 5, 0])
    h = cols.headers
    h[[0, 3]] = with_replaced(h[[0, 3]])
    h[1:2] = with_tombstone(h[1:2])
    assert cols.current.tolist() == [False, True, True, False, True, True]
    assert dead_mask(cols, NOW).tolist() == [True, True, False, True, True, False]
    assert live_mask(cols, NOW).tolist() == [False, False, True, False, False, True]
    assert keep_mask(cols, NOW).tolist() == [True, False, True, False, False, True]
    assert keep_mask(cols, NOW, keep_history=False).tolist() == [
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    # before C expires, its history is kept too
    assert keep_mask(cols, NOW - 10).tolist() == [True, False, True, True, True, True]


def test_truncate_makes_older_rows_current_again() -> None:
    cols = _columns([7, 7], [-1, 0], [0, 0])
    assert cols.current.tolist() == [False, True]
    cols.truncate(1)
    assert cols.current.tolist() == [True]


def test_previous_rows_and_bad_repeats() -> None:
    prev = previous_rows(np.array([5, 6, 5, 9]), 10, {9: 3})
    assert prev.tolist() == [-1, -1, 10, 3]
    assert bad_repeats(prev, np.array([False, False, True, False])).tolist() == [
        False,
        False,
        False,
        True,
    ]
