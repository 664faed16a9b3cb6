"""Columns: exact-length views over growable buffers, appended in O(rows appended)."""

from __future__ import annotations

import numpy as np

from spector_gpu.cortex.columns import Columns, created_ms
from spector_gpu.cortex.layouts import HEADER_DTYPE, INDEX_DTYPE, STRENGTH_DTYPE
from spector_gpu.storage.tsid import TSID_EPOCH_MS


def _rows(first: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    entries = np.zeros(m, dtype=INDEX_DTYPE)
    entries["id"] = (np.arange(first, first + m, dtype=np.int64) + 1) << 22
    entries["graph_slot"] = np.arange(first, first + m)
    headers = np.zeros(m, dtype=HEADER_DTYPE)
    headers["importance"] = np.arange(first, first + m) + 0.5
    srows = np.zeros(m, dtype=STRENGTH_DTYPE)
    srows["retrieval_strength"] = 1.0
    srows["last_recall_ms"] = np.arange(first, first + m) * 10
    srows["storage_strength"] = 2.0
    return entries, headers, srows


def test_extend_appends_rows_and_every_column_has_exactly_n_rows() -> None:
    cols = Columns.empty()
    n = 0
    for m in (1, 3, 1500, 1, 2600):  # crosses several buffer growths
        cols.extend(n, *_rows(n, m))
        n += m
        assert len(cols) == n
        for col in (cols.ids, cols.index, cols.headers, cols.created_ms, cols.d_event):
            assert len(col) == n
        assert len(cols.last_event_ms) == len(cols.storage) == n
    assert cols.index["graph_slot"].tolist() == list(range(n))
    assert cols.headers["importance"][4] == 4.5
    assert cols.last_event_ms[-1] == (n - 1) * 10
    assert (cols.storage == 2.0).all() and (cols.d_event == 1.0).all()
    assert (cols.created_ms == (cols.ids >> 22) + TSID_EPOCH_MS).all()


def test_writes_through_a_view_land_in_the_column_and_survive_appends() -> None:
    cols = Columns.empty()
    cols.extend(0, *_rows(0, 4))
    cols.headers["flags"][[1, 3]] |= 0x08
    cols.d_event[2] = 0.25
    cols.extend(4, *_rows(4, 5000))  # forces a growth: values are carried over
    assert cols.headers["flags"][:4].tolist() == [0, 8, 0, 8]
    assert cols.d_event[2] == np.float32(0.25)


def test_extend_from_an_earlier_first_row_replaces_the_tail() -> None:
    cols = Columns.empty()
    cols.extend(0, *_rows(0, 10))
    entries, headers, srows = _rows(0, 3)
    headers["importance"] = 9.0
    cols.extend(2, entries, headers, srows)  # keeps rows 0..1, then 3 new rows
    assert len(cols) == 5
    assert cols.headers["importance"].tolist() == [0.5, 1.5, 9.0, 9.0, 9.0]
    cols.truncate(1)
    assert len(cols) == 1 and len(cols.headers) == 1 and cols.ids.tolist() == [1 << 22]


def test_created_ms_decodes_the_tsid_timestamp() -> None:
    ids = np.array([0, 5 << 22], dtype=np.int64)
    assert created_ms(ids).tolist() == [TSID_EPOCH_MS, TSID_EPOCH_MS + 5]
