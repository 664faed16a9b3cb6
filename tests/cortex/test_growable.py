"""Growable: the append-only numpy column behind BM25, cues and links."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.cortex.growable import Growable, GrowableBuffer


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(-1000, 1000), st.lists(st.integers(-1000, 1000), max_size=40)),
        max_size=60,
    ),
    st.integers(1, 8),
)
def test_appends_and_extends_match_a_list(ops: list, capacity: int) -> None:
    col, model = Growable(np.int64, capacity), []
    for op in ops:
        if isinstance(op, list):
            col.extend(np.array(op, dtype=np.int64))
            model.extend(op)
        else:
            assert col.append(op) == len(model)
            model.append(op)
        assert len(col) == len(model) and col.view().tolist() == model
        assert len(col.buf) >= len(model) and not col.buf[len(model) :].any()  # spare room is zero


def test_growth_doubles_and_keeps_dtype() -> None:
    col = Growable(np.float32, 4)
    col.extend(np.arange(5))
    assert len(col.buf) == 8 and col.buf.dtype == np.float32
    col.reserve(100)
    assert len(col.buf) == 100 and col.view().tolist() == [0, 1, 2, 3, 4]


def test_clear_forgets_and_zeroes() -> None:
    col = Growable(np.int32, 2)
    col.extend(np.array([7, 8, 9]))
    col.clear()
    assert len(col) == 0 and not col.buf.any()
    col.append(3)
    assert col.view().tolist() == [3]


def test_buffer_descriptor_reads_the_whole_allocation() -> None:
    class Table:
        score = GrowableBuffer()

        def __init__(self) -> None:
            self._score = Growable(np.int64, 4)

    t = Table()
    t._score.extend(np.array([1, 2]))
    t.score[1] = 5  # in-place writes land in the column
    assert t._score.view().tolist() == [1, 5] and len(t.score) == 4
    with pytest.raises(AttributeError, match="per-instance"):
        Table.score  # noqa: B018
