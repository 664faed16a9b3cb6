"""Fusion's per-row min-max normalisation against the reference twin's, bit for bit: over each
row's valid members, with infinities, NaN, extreme magnitudes and rows without spread."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from recall_reference import minmax
from spector_gpu.kernels.native import native

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
    got = minmax_rows(torch.from_numpy(x), torch.from_numpy(valid), host=True).numpy()
    for row in range(n):
        want = np.zeros(width, dtype=np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            want[valid[row]] = minmax(x[row][valid[row]])
        np.testing.assert_array_equal(got[row].view(np.uint32), want.view(np.uint32))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 40))
def test_native_minmax_has_the_tensor_operations_bits(seed: int, n: int, width: int) -> None:
    # float64 rows on the CPU take the native pass; the tensor operations stay the GPU's
    # route and the fallback without the compiled module: both must give the same bits
    # (NaN from inf - inf included), with a mask shared by every row (expanded) or per row.
    if native is None:
        pytest.skip("the native kernels are not built")
    rng = np.random.default_rng(seed)
    x = rng.choice(VALUES, (n, width)) + rng.random((n, width)) * (rng.random((n, width)) < 0.5)
    for valid in (
        torch.from_numpy(rng.random((n, width)) < 0.7),
        torch.from_numpy(rng.random((1, width)) < 0.7).expand(n, -1),
    ):
        with np.errstate(invalid="ignore", over="ignore"):
            got = minmax_rows(torch.from_numpy(x), valid, host=True).numpy()
            want = minmax_rows(torch.from_numpy(x), valid).numpy()
        assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
