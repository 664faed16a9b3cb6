"""The native INT8 scan (``int8_topk``, ``kernels/csrc/scan.c``) against the numpy twin, bit for
bit: keys, slots and every row's key, with ties, zero rows, gates, infinite and NaN keys, and
beside other threads calling it at once (the GIL is released while it runs). It runs on the
calling thread: the former helper thread and ``[dense] scan_threads`` are gone (deprecated)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from spector_gpu.kernels.dense import DenseIndex
from spector_gpu.kernels.dense_reference import search_reference
from spector_gpu.kernels.native import native
from spector_gpu.kernels.quant import l2_normalize, quantize_int8

pytestmark = pytest.mark.skipif(native is None, reason="native kernels not built")
N, D = 6_000, 384


def rows(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes with ties everywhere, zero rows, and their scales; plus float rows for queries."""
    rng = np.random.default_rng(seed)
    x = l2_normalize(rng.standard_normal((N, D), dtype=np.float32))
    x[7 : 7 + N // 5] = x[3]
    x[N // 2 : N // 2 + 40] = 0.0
    codes, scales = quantize_int8(x)
    return x, codes, scales


def scan(
    codes: np.ndarray, scales: np.ndarray, xq: np.ndarray, k: int, gate: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = xq.shape[0]
    keys, slots = np.empty((m, k), np.float32), np.empty((m, k), np.int64)
    every = np.empty((m, N), np.float32)
    native.int8_topk(codes, N, D, D, scales, xq, gate, keys, slots, every)
    return keys, slots, every


def every_key(codes: np.ndarray, scales: np.ndarray, xq: np.ndarray, gate: np.ndarray | None):
    """float32(dot) * scale of every row for every query, -inf where gated (numpy)."""
    dots = (codes.astype(np.int64) @ xq.astype(np.int64).T).T.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        keys = dots * scales[None, :]
    return keys if gate is None else np.where(gate[None, :], keys, np.float32(-np.inf))


def reference_top(keys: np.ndarray, gate: np.ndarray | None, k: int):
    """The heap's order: key descending, slot ascending; NaN never enters; allowed rows only
    (-inf ones too, slot ascending); padding (-inf, -1)."""
    out_k, out_s = np.full((keys.shape[0], k), -np.inf, np.float32), np.full((keys.shape[0], k), -1)
    for j, row in enumerate(keys):
        ok = ~np.isnan(row) if gate is None else ~np.isnan(row) & gate
        idx = np.flatnonzero(ok)
        order = idx[np.lexsort((idx, -row[idx].astype(np.float64)))][:k]
        out_k[j, : order.size], out_s[j, : order.size] = row[order], order
    return out_k, out_s


def assert_bits(a: np.ndarray, b: np.ndarray) -> None:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))  # bits, NaN too


def gates(rng: np.random.Generator) -> list[np.ndarray | None]:
    few = np.zeros(N, bool)
    few[rng.choice(N, 30, replace=False)] = True
    return [None, rng.random(N) < 0.4, few, np.zeros(N, bool)]


@pytest.mark.parametrize("m", [1, 2, 3])
def test_scan_equals_the_twin_with_every_row_key(m: int) -> None:
    x, codes, scales = rows(m)
    rng = np.random.default_rng(10 + m)
    queries = np.vstack([x[3], rng.standard_normal((m - 1, D))]).astype(np.float32)
    xq, qs = quantize_int8(queries)
    for gate in gates(rng):
        for k in (1, 10, 200):
            keys, slots, every = scan(codes, scales, xq, k, gate)
            want_scores, want_slots = search_reference(codes, scales, queries, k, gate)
            np.testing.assert_array_equal(slots, want_slots)
            got = np.where(keys == -np.inf, keys, keys * qs[:, None])
            np.testing.assert_array_equal(got, want_scores)
            assert_bits(every, every_key(codes, scales, xq, gate))


def test_infinite_and_nan_keys_order_as_the_heap_does() -> None:
    """Rows whose key overflows to +-inf (huge scales) or is NaN (0 x inf): NaN never enters,
    allowed -inf rows fill the rest, slot ascending."""
    _, codes, scales = rows(5)
    scales = scales.copy()
    rng = np.random.default_rng(5)
    scales[rng.choice(N, 400, replace=False)] = 3e38
    scales[N // 2 : N // 2 + 40] = np.inf  # zero rows: 0 x inf is NaN
    xq = codes[[3, 11]].copy()
    for gate in (None, rng.random(N) < 0.2):
        want_every = every_key(codes, scales, xq, gate)
        for k in (5, 300, N):
            keys, slots, every = scan(codes, scales, xq, k, gate)
            assert_bits(every, want_every)
            want_keys, want_slots = reference_top(want_every, gate, k)
            assert_bits(keys, want_keys)
            np.testing.assert_array_equal(slots, want_slots)
    keys = scan(codes, scales, xq[:1], N, None)[0]
    assert np.isposinf(keys).any() and np.isneginf(keys).any()


def test_concurrent_callers_each_get_their_own_answer() -> None:
    x, codes, scales = rows(8)
    xqs = [quantize_int8(x[[i]])[0] for i in (3, 50, 700, 2000)]
    want = [scan(codes, scales, xq, 20, None) for xq in xqs]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(10):
                for u, v in zip(scan(codes, scales, xqs[i], 20, None), want[i]):
                    assert_bits(u, v)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_bad_arguments_raise_value_errors_naming_them() -> None:
    _, codes, scales = rows(1)
    xq = codes[:1].copy()
    keys, slots = np.empty((1, 5), np.float32), np.empty((1, 5), np.int64)
    with pytest.raises(ValueError, match="allowed"):
        native.int8_topk(codes, N, D, D, scales, xq, np.ones(N, np.int64), keys, slots)
    with pytest.raises(ValueError, match="allowed"):
        native.int8_topk(codes, N, D, D, scales, xq, np.ones(N - 1, bool), keys, slots)
    with pytest.raises(ValueError, match="out_slots"):
        native.int8_topk(codes, N, D, D, scales, xq, None, keys, np.empty((1, 4), np.int64))
    with pytest.raises(ValueError, match="out_all"):
        native.int8_topk(
            codes, N, D, D, scales, xq, None, keys, slots, np.empty((1, 3), np.float32)
        )
    with pytest.raises(ValueError, match="queries"):
        native.int8_topk(codes, N, D, D, scales, codes[0, :7], None, keys, slots)
    with pytest.raises(ValueError, match="scales hold fewer"):
        native.int8_topk(codes, N, D, D, scales[:10], xq, None, keys, slots)
    with pytest.raises(ValueError):  # read-only outputs are refused, not silently copied
        keys.flags.writeable = False
        native.int8_topk(codes, N, D, D, scales, xq, None, keys, slots)


def test_dense_index_scan_threads_is_deprecated_and_ignored() -> None:
    x, codes, scales = rows(9)
    plain = DenseIndex(D, device="cpu")
    with pytest.warns(DeprecationWarning, match="scan_threads"):
        old = DenseIndex(D, device="cpu", scan_threads=2)
    for index in (plain, old):
        index.add(codes, scales)
    queries = np.vstack([x[3], x[4000]])
    for q in (queries[:1], queries):
        for u, v in zip(plain.search(q, 30), old.search(q, 30)):
            np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strict", [True, False])
def test_rows_topk_equals_a_stable_sort_above_the_bound(dtype: type, strict: bool) -> None:
    """Each row's k best values above the bound (``>`` when strict, else ``>=``), value
    descending then column ascending, NaN never entering, padded; heap (small k) and
    buffered (k >= 32) paths alike, rows given flat or (n, width)."""
    rng = np.random.default_rng(3)
    x = rng.integers(-4, 5, (6, 300)).astype(dtype)  # ties everywhere
    x[1, ::7] = np.nan
    x[2, ::5] = -np.inf
    x[3] = 0.0  # every value on the bound
    for bound in (-np.inf, 0.0):
        for k in (1, 10, 40, 300):
            keys, slots = np.empty((6, k)), np.empty((6, k), np.int64)
            count = np.empty(6, np.int64)
            native.rows_topk(x.reshape(-1), 300, bound, strict, keys, slots, count)
            for j, row in enumerate(x.astype(np.float64)):
                ok = ~np.isnan(row) & ((row > bound) if strict else (row >= bound))
                idx = np.flatnonzero(ok)
                want = idx[np.lexsort((idx, -row[idx]))][:k]
                assert count[j] == want.size
                np.testing.assert_array_equal(slots[j, : want.size], want)
                np.testing.assert_array_equal(keys[j, : want.size], row[want])
                assert (slots[j, want.size :] == -1).all()
                assert np.isneginf(keys[j, want.size :]).all()
    with pytest.raises(ValueError, match="float32 or float64"):
        native.rows_topk(np.zeros((6, 300), np.int32), 300, 0.0, True, keys, slots, count)
    with pytest.raises(ValueError, match="width"):
        native.rows_topk(x, 299, 0.0, True, keys, slots, count)
