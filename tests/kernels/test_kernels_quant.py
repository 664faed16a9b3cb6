"""INT8 symmetric per-vector quantisation and L2 normalisation, numpy vs torch twins."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from spector_gpu.kernels.quant import (
    dequantize_int8,
    dequantize_int8_torch,
    l2_normalize,
    quantize_int8,
    quantize_int8_torch,
)

from spector_gpu.errors import ValidationError

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32)
matrices = arrays(np.float32, st.tuples(st.integers(0, 6), st.integers(1, 40)), elements=finite)


def test_hand_example() -> None:
    x = np.array(
        [[1.0, -0.5, 0.25, 0.0], [0.0, 0.0, 0.0, 0.0], [-2.0, 1.0, 0.0, 0.004]], np.float32
    )
    q, s = quantize_int8(x)
    assert q.dtype == np.int8 and s.dtype == np.float32
    np.testing.assert_array_equal(
        q[0], [127, -64, 32, 0]
    )  # -63.5 and 31.75 round half-even / nearest
    np.testing.assert_array_equal(q[1], [0, 0, 0, 0])
    assert s[1] == 0.0
    np.testing.assert_array_equal(q[2], [-127, 64, 0, 0])
    assert s[0] == np.float32(1.0) / np.float32(127)


@settings(max_examples=60, deadline=None)
@given(matrices)
@example(np.array([[1.64e-43]], dtype=np.float32))  # a subnormal row (found by CI)
def test_roundtrip_error_within_half_a_step(x: np.ndarray) -> None:
    q, s = quantize_int8(x)
    assert q.shape == x.shape and s.shape == (x.shape[0],)
    assert np.abs(q.astype(np.int16)).max(initial=0) <= 127
    err = np.abs(dequantize_int8(q, s) - x)
    assert (err <= s[:, None] * 0.5 * (1 + 1e-5) + 1e-30).all()
    scaled = s > 0  # a row of subnormals may underflow to scale 0 (and codes 0)
    # a normal scale reaches the full code range; a subnormal one is too coarse to (x =
    # 1.64e-43: scale = the smallest subnormal, largest code 117), within the error bound above
    normal = s >= np.finfo(np.float32).tiny
    assert (np.abs(q[normal].astype(np.int16)).max(axis=1) == 127).all()
    assert (np.abs(q[scaled].astype(np.int16)).max(axis=1) >= 1).all()
    assert (q[~scaled] == 0).all()


@settings(max_examples=60, deadline=None)
@given(matrices)
def test_torch_twin_is_bit_identical(x: np.ndarray) -> None:
    q, s = quantize_int8(x)
    tq, ts = quantize_int8_torch(torch.from_numpy(x))
    np.testing.assert_array_equal(tq.numpy(), q)
    np.testing.assert_array_equal(ts.numpy(), s)
    np.testing.assert_array_equal(dequantize_int8_torch(tq, ts).numpy(), dequantize_int8(q, s))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_names_the_row(bad: float) -> None:
    x = np.ones((4, 3), np.float32)
    x[2, 1] = bad
    with pytest.raises(ValidationError, match="row 2"):
        quantize_int8(x)
    with pytest.raises(ValidationError, match="row 2"):
        quantize_int8_torch(torch.from_numpy(x))
    with pytest.raises(ValidationError, match="row 2"):
        l2_normalize(x)


@pytest.mark.parametrize("shape", [(3,), (2, 2, 2)])
def test_shape_errors(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValidationError, match="2-D"):
        quantize_int8(np.zeros(shape, np.float32))
    with pytest.raises(ValidationError):
        quantize_int8_torch(torch.zeros(shape))


def test_dequantize_shape_mismatch() -> None:
    with pytest.raises(ValidationError):
        dequantize_int8(np.zeros((3, 2), np.int8), np.zeros(2, np.float32))


def test_l2_normalize() -> None:
    x = np.array([[3.0, 4.0], [0.0, 0.0], [1e-20, 0.0]], np.float32)
    y = l2_normalize(x)
    np.testing.assert_allclose(y[0], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(y[1], [0.0, 0.0])
    np.testing.assert_allclose(y[2], [1.0, 0.0])
    assert y.dtype == np.float32 and not np.shares_memory(x, y)
    np.testing.assert_array_equal(l2_normalize(x, eps=1e-10)[2], [0.0, 0.0])


@settings(max_examples=40, deadline=None)
@given(matrices)
def test_l2_normalize_unit_rows(x: np.ndarray) -> None:
    y = l2_normalize(x)
    norms = np.linalg.norm(y.astype(np.float64), axis=1)
    zero = np.linalg.norm(x.astype(np.float64), axis=1) == 0
    np.testing.assert_allclose(norms[~zero], 1.0, rtol=1e-5)
    assert (norms[zero] == 0).all()
