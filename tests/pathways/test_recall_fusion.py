"""Fusion's per-row min-max normalisation against the reference twin's, bit for bit: over each
row's valid members, with infinities, NaN, extreme magnitudes and rows without spread. (Fusion
and relevance are one tensor implementation on every device; the recall twin tests compare
their results with the numpy reference.)"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from recall_reference import minmax

from spector_gpu.pathways.recall.fusion import minmax_rows

VALUES = [0.0, 1.0, -2.0, 0.5, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324, 3e38]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 4),
    st.integers(1, 40),
    st.sampled_from([np.float32, np.float64]),
)
def test_minmax_rows_equals_the_reference(seed: int, n: int, width: int, dtype: type) -> None:
    rng = np.random.default_rng(seed)
    x = rng.choice(VALUES, (n, width)) + rng.random((n, width)) * (rng.random((n, width)) < 0.5)
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    valid = rng.random((n, width)) < 0.7
    got = minmax_rows(torch.from_numpy(x), torch.from_numpy(valid)).numpy()
    for row in range(n):
        want = np.zeros(width, dtype=np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            want[valid[row]] = minmax(x[row][valid[row]])
        np.testing.assert_array_equal(got[row].view(np.uint32), want.view(np.uint32))
