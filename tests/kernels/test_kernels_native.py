"""The native CPU kernels (kernels/csrc/*.c, bound by kernels/_*.pyx) against their numpy twins."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spector_gpu.kernels.dense import DenseIndex
from spector_gpu.kernels.dense_reference import score_slots_reference, search_reference
from spector_gpu.kernels.native import native
from spector_gpu.kernels.quant import l2_normalize, quantize_int8
from spector_gpu.kernels.selection import rows_topk
from spector_gpu.kernels.topk import topk_stable

from spector_gpu.device import single_threaded

pytestmark = pytest.mark.skipif(native is None, reason="native kernels not built")


def corpus(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = l2_normalize(rng.standard_normal((n, d), dtype=np.float32))
    x[5 : 5 + n // 4] = x[1]  # ties everywhere
    x[n // 2 : n // 2 + 3] = 0.0
    q, s = quantize_int8(x)
    return x, q, s


@pytest.mark.parametrize("d", [1, 7, 63, 64, 65, 130, 384])
@pytest.mark.parametrize("nq", [1, 2])
def test_scan_equals_reference(d: int, nq: int) -> None:
    x, q, s = corpus(700, d, d)
    rng = np.random.default_rng(nq)
    queries = np.vstack([x[1], rng.standard_normal((nq - 1, d))]).astype(np.float32)
    for allowed in (None, rng.random(700) < 0.4, np.zeros(700, dtype=bool)):
        index = DenseIndex(d, device="cpu", cpu_kernel="native")
        index.add(q, s)
        got = index.search(queries, 25, allowed=allowed)
        slots = rng.integers(-1, 700, (nq, 40))
        scored = index.score_slots(queries, slots)
        want = search_reference(q, s, queries, 25, allowed)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(scored, score_slots_reference(q, s, queries, slots))


def test_gemm_tiles_with_native_selection_equal_torch_and_reference() -> None:
    x, q, s = corpus(3000, 48, 3)
    queries = np.vstack([x[:5], np.random.default_rng(0).standard_normal((9, 48))]).astype(
        np.float32
    )
    fast = DenseIndex(48, device="cpu", tile_rows=512, cpu_kernel="native")
    slow = DenseIndex(48, device="cpu", tile_rows=512, cpu_kernel="torch")
    for index in (fast, slow):
        index.add(q, s)
    allowed = np.random.default_rng(1).random(3000) < 0.5
    for gate in (None, allowed, allowed & (np.arange(3000) < 200)):
        for k in (1, 10, 300):
            got = fast.search(queries, k, allowed=gate)
            want = search_reference(q, s, queries, k, gate)
            for a, b, c in zip(got, slow.search(queries, k, allowed=gate), want):
                np.testing.assert_array_equal(a, c)
                np.testing.assert_array_equal(b, c)


@pytest.mark.parametrize("d", [5, 40, 128, 384])
def test_keys_all_native_equals_torch(d: int) -> None:
    """Every row's key for every query: the native scan (any number of queries) gives the
    torch GEMM's float32(dot) * s bit for bit."""
    x, q, s = corpus(613, d, d)
    queries = np.vstack([x[:3], np.random.default_rng(d).standard_normal((37, d))])
    fast = DenseIndex(d, device="cpu", cpu_kernel="native")
    slow = DenseIndex(d, device="cpu", cpu_kernel="torch")
    for index in (fast, slow):
        index.add(q, s)
    for n in (1, 2, 40):
        dq = fast.queries(queries[:n].astype(np.float32))
        got = fast.keys_all(dq)
        want = slow.keys_all(dq)
        assert got.shape == (n, 613) and got.dtype == torch.float32
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        want_np = (q.astype(np.int64) @ dq.xq.astype(np.int64).T).astype(np.float32) * s[:, None]
        np.testing.assert_array_equal(got.numpy(), want_np.T)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 5),
    st.integers(1, 300),
    st.integers(1, 40),
    st.booleans(),
)
def test_rows_topk_equals_stable_topk(
    seed: int, n: int, width: int, k: int, positive: bool
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.choice([0.0, -1.0, 0.5, 0.25, 3.0, -np.inf], (n, width)).astype(np.float32)
    x += (rng.random((n, width)) < 0.3) * rng.random((n, width), dtype=np.float32)
    keep = x > 0 if positive else np.isfinite(x)
    want = topk_stable(np.where(keep, x, -np.inf), k)
    t = torch.from_numpy(x)
    for use_native in (False, True):
        got = rows_topk(t, k, positive=positive, use_native=use_native)
        np.testing.assert_array_equal(got[0].numpy(), want[0])
        np.testing.assert_array_equal(got[1].numpy(), want[1])


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 21),
    st.integers(1, 30),
    st.booleans(),
    st.booleans(),
)
def test_topk_update_equals_stable_topk_over_tiles(
    seed: int, n: int, k: int, as_float: bool, gathered: bool
) -> None:
    """The tile loop's selection: tiles of keys float32(dot) * scale offered in slot order
    (consecutive or gathered slots, a gate), heavy ties; every selection width gives the
    stable top-k of all keys, int32 and float32 dots alike."""
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 400))
    dots = rng.integers(-3, 4, (rows, n)).astype(np.int32)  # few values: ties everywhere
    scales = rng.choice([0.5, 1.0, 2.0], rows).astype(np.float32)
    gate = rng.random(rows) < 0.8
    slots = np.sort(rng.choice(10 * rows, rows, replace=False)) if gathered else np.arange(rows)
    keys = (dots.astype(np.float32) * scales[:, None]).T  # (n, rows)
    full = np.full((n, 10 * rows), -np.inf, dtype=np.float32)
    full[:, slots[gate]] = keys[:, gate]
    want = topk_stable(full, k)
    cut = sorted({0, rows, *rng.integers(0, rows, 3).tolist()})
    cands = np.empty((n, 4 * k), np.int64)
    sizes, thr = np.zeros(n, np.int64), np.full(n, -np.inf)
    for lo, hi in itertools.pairwise(cut):
        tile = dots[lo:hi].astype(np.float32) if as_float else dots[lo:hi]
        mapped = slots[lo:hi] if gathered else None
        native.topk_update(
            np.ascontiguousarray(tile), scales[lo:hi], lo, mapped, gate[lo:hi],
            cands, sizes, thr,
        )  # fmt: skip
    got_keys, got_slots = np.empty((n, k), np.float32), np.empty((n, k), np.int64)
    native.topk_finish(cands, sizes, thr, got_keys, got_slots)
    np.testing.assert_array_equal(got_keys, want[0])
    np.testing.assert_array_equal(got_slots, np.where(want[1] < 0, -1, want[1]))


def test_topk_update_refuses_bad_state() -> None:
    dots, scales = np.zeros((3, 2), np.int32), np.ones(3, np.float32)
    sizes, thr = np.zeros(2, np.int64), np.full(2, -np.inf)
    with pytest.raises(ValueError, match="candidates must be"):
        native.topk_update(dots, scales, 0, None, None, np.empty((2, 3), np.int64), sizes, thr)
    with pytest.raises(ValueError, match="outside"):
        bad = np.array([0, 8], np.int64)  # k = 2 holds at most 3 between selections
        native.topk_update(dots, scales, 0, None, None, np.empty((2, 8), np.int64), bad, thr)
    with pytest.raises(ValueError, match="expected 4-byte items"):
        native.topk_update(dots.astype(np.float64), scales, 0, None, None,
                           np.empty((2, 8), np.int64), sizes, thr)  # fmt: skip


def test_native_entry_points_refuse_bad_buffers() -> None:
    codes = np.zeros((4, 8), dtype=np.int8)
    scales = np.ones(4, dtype=np.float32)
    keys, slots = np.empty((1, 2), np.float32), np.empty((1, 2), np.int64)
    with pytest.raises(ValueError, match="codes hold fewer"):
        native.int8_topk(codes, 5, 8, 8, scales, np.zeros(8, np.int8), None, keys, slots)
    with pytest.raises(ValueError, match="expected"):
        native.int8_topk(codes.astype(np.int16), 4, 8, 8, scales, codes[0], None, keys, slots)
    with pytest.raises(ValueError, match="outside"):
        native.int8_score_rows(
            codes, 4, 8, 8, scales, codes[0], np.array([[4]]), np.empty((1, 1), np.float32)
        )


def test_single_threaded_restores_the_callers_setting() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with single_threaded():
            assert torch.get_num_threads() == 1
            with single_threaded():
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with single_threaded(False):
            assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), single_threaded():
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("d", [32, 128, 160, 200])
def test_single_query_scan_with_and_without_every_key_equals_reference(d: int) -> None:
    """One query, dims with and without a tail past the 32-byte steps: the keys of eight rows
    at a time (and their gate) give the twin's top-k whether or not every row's key is kept,
    and the kept keys are the twin's float32(dot) * s of every row (-inf where gated)."""
    x, q, s = corpus(1003, d, d)  # not a multiple of eight rows
    rng = np.random.default_rng(d)
    query = x[7:8]
    xq, qs = quantize_int8(query)
    few = np.zeros(1003, dtype=bool)
    few[rng.choice(1003, 9, replace=False)] = True
    for allowed in (None, rng.random(1003) < 0.5, few, np.zeros(1003, dtype=bool)):
        gate = None if allowed is None else allowed.astype(np.uint8)
        for k in (1, 30, 1003):
            want_scores, want_slots = search_reference(q, s, query, k, allowed)
            keys, slots = np.empty((1, k), np.float32), np.empty((1, k), np.int64)
            native.int8_topk(q, 1003, d, d, s, xq, gate, keys, slots)
            every = np.empty((1, 1003), np.float32)
            keys2, slots2 = np.empty((1, k), np.float32), np.empty((1, k), np.int64)
            native.int8_topk(q, 1003, d, d, s, xq, gate, keys2, slots2, every)
            for got_keys, got_slots in ((keys, slots), (keys2, slots2)):
                np.testing.assert_array_equal(got_slots, want_slots)
                rescaled = np.where(got_keys == -np.inf, got_keys, got_keys * qs[:, None])
                np.testing.assert_array_equal(rescaled, want_scores)
            dots = q.astype(np.int32) @ xq[0].astype(np.int32)
            want_every = dots.astype(np.float32) * s
            if allowed is not None:
                want_every[~allowed] = -np.inf
            np.testing.assert_array_equal(every[0], want_every)
