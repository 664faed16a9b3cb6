"""The native scan shared with its helper thread (``int8_topk(..., threads=2)``) against the
single-thread fused scan and the numpy twin, bit for bit: keys, slots and every row's key,
whichever thread computed which chunk (the test pauses drive each path), beside other callers,
and in a child forked after the helper started."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
from spector_gpu.kernels.dense import DenseIndex
from spector_gpu.kernels.dense_reference import search_reference
from spector_gpu.kernels.native import native
from spector_gpu.kernels.quant import l2_normalize, quantize_int8

pytestmark = pytest.mark.skipif(native is None, reason="native kernels not built")
N, D = 6_000, 384  # 2.3 MB of codes: above the size from which the helper is asked


def rows(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes with ties everywhere, zero rows, and their scales; plus float rows for queries."""
    rng = np.random.default_rng(seed)
    x = l2_normalize(rng.standard_normal((N, D), dtype=np.float32))
    x[7 : 7 + N // 5] = x[3]
    x[N // 2 : N // 2 + 40] = 0.0
    codes, scales = quantize_int8(x)
    return x, codes, scales


def scan(
    codes: np.ndarray,
    scales: np.ndarray,
    xq: np.ndarray,
    k: int,
    gate: np.ndarray | None,
    threads: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = xq.shape[0]
    keys, slots = np.empty((m, k), np.float32), np.empty((m, k), np.int64)
    every = np.empty((m, N), np.float32)
    native.int8_topk(codes, N, D, D, scales, xq, gate, keys, slots, every, threads)
    return keys, slots, every


def assert_same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> None:
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u.view(np.uint8), v.view(np.uint8))  # bits, NaN too


def gates(rng: np.random.Generator) -> list[np.ndarray | None]:
    few = np.zeros(N, bool)
    few[rng.choice(N, 30, replace=False)] = True
    return [None, rng.random(N) < 0.4, few, np.zeros(N, bool)]


@pytest.mark.parametrize("m", [1, 2, 3])
def test_shared_scan_equals_the_single_thread_scan_and_the_twin(m: int) -> None:
    x, codes, scales = rows(m)
    rng = np.random.default_rng(10 + m)
    queries = np.vstack([x[3], rng.standard_normal((m - 1, D))]).astype(np.float32)
    xq, qs = quantize_int8(queries)
    for gate in gates(rng):
        for k in (1, 10, 200):
            one = scan(codes, scales, xq, k, gate, 1)
            two = scan(codes, scales, xq, k, gate, 2)
            assert_same(one, two)
            want_scores, want_slots = search_reference(codes, scales, queries, k, gate)
            np.testing.assert_array_equal(two[1], want_slots)
            got = np.where(two[0] == -np.inf, two[0], two[0] * qs[:, None])
            np.testing.assert_array_equal(got, want_scores)


def test_infinite_and_nan_keys_order_as_the_fused_heap_does() -> None:
    """Rows whose key overflows to +-inf (huge scales) or is NaN (0 x inf): the selection
    skips NaN, and fills with allowed -inf rows, slot ascending, as the heap does."""
    _, codes, scales = rows(5)
    scales = scales.copy()
    rng = np.random.default_rng(5)
    scales[rng.choice(N, 400, replace=False)] = 3e38
    scales[N // 2 : N // 2 + 40] = np.inf  # zero rows: 0 x inf is NaN
    xq = codes[[3, 11]].copy()
    for gate in (None, rng.random(N) < 0.2):
        for k in (5, 300, N):
            assert_same(scan(codes, scales, xq, k, gate, 1), scan(codes, scales, xq, k, gate, 2))
    keys = scan(codes, scales, xq[:1], N, None, 2)[0]
    assert np.isposinf(keys).any() and np.isneginf(keys).any()


_SHARES = r"""
import sys, time
import numpy as np
from spector_gpu.kernels.native import native

# before the helper starts: at normal priority it gets a core on a busy test machine too
native.scan_pool_testing(0, 0, True)
rng = np.random.default_rng(7)
n, d = 8000, 384
codes = rng.integers(-127, 128, (n, d), dtype=np.int8)
codes[10:900] = codes[5]  # ties
scales = rng.random(n).astype(np.float32)
q = codes[5].copy()

def scan(threads):
    keys, slots = np.empty((1, 50), np.float32), np.empty((1, 50), np.int64)
    every = np.empty((1, n), np.float32)
    native.int8_topk(codes, n, d, d, scales, q, None, keys, slots, every, threads)
    return keys.tobytes(), slots.tobytes(), every.tobytes()

want = scan(1)
# none; the caller late (the helper computes nearly every chunk, the caller copies them); the
# helper stalled on a claimed chunk (the caller computes it itself; last, since the helper is
# still paused when the next calls come, which then scan alone). A loaded machine may wake the
# helper late, so a share is tried up to five times (the caller's head start for the helper
# growing, still well inside its stall) until its counter moves; every answer must be exact.
for counter, worker_us, caller_us in (
    ("jobs", 0, 0), ("copied", 0, 30_000), ("recomputed", 300_000, 2_000)
):
    for attempt in range(5):
        native.scan_pool_testing(worker_us, caller_us * (1 + 2 * attempt), True)
        while native.scan_pool_stats()["busy"]:  # a job not run yet: the next call scans alone
            time.sleep(0.01)
        before = native.scan_pool_stats()
        assert all(scan(2) == want for _ in range(3)), counter
        after = native.scan_pool_stats()
        if after[counter] > before[counter]:
            break
    assert after[counter] > before[counter], (counter, before, after)
"""


def test_every_share_of_the_chunks_gives_the_same_answer() -> None:
    """Whichever thread computed which chunk (driven by the test pauses, in a fresh process
    whose helper runs at normal priority), the answer is the single-thread one."""
    proc = subprocess.run(
        [sys.executable, "-c", _SHARES], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])


def test_concurrent_callers_each_get_their_own_answer() -> None:
    """Threads scanning at once: one owns the helper, the others scan alone."""
    x, codes, scales = rows(8)
    xqs = [quantize_int8(x[[i]])[0] for i in (3, 50, 700, 2000)]
    want = [scan(codes, scales, xq, 20, None, 1) for xq in xqs]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(20):
                assert_same(scan(codes, scales, xqs[i], 20, None, 2), want[i])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_dense_index_scan_threads_one_and_two_agree() -> None:
    x, codes, scales = rows(9)
    indexes = [DenseIndex(D, device="cpu", scan_threads=t) for t in (1, 2)]
    for index in indexes:
        index.add(codes, scales)
    queries = np.vstack([x[3], x[4000]])
    for q in (queries[:1], queries):
        a, b = (index.search(q, 30) for index in indexes)
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    with pytest.raises(Exception, match="scan_threads"):
        DenseIndex(D, scan_threads=3)


_FORKED = r"""
import os, sys
import numpy as np
from spector_gpu.kernels.native import native
rng = np.random.default_rng(0)
n, d = 8000, 384
codes = rng.integers(-127, 128, (n, d), dtype=np.int8)
scales = rng.random(n).astype(np.float32)
q = codes[5].copy()

def scan(threads):
    keys, slots = np.empty((1, 10), np.float32), np.empty((1, 10), np.int64)
    every = np.empty((1, n), np.float32)
    native.int8_topk(codes, n, d, d, scales, q, None, keys, slots, every, threads)
    return slots[0].tolist(), every.tobytes()

want = scan(1)
assert scan(2) == want and native.scan_pool_stats()["alive"]
pid = os.fork()
if pid == 0:
    ok = native.scan_pool_stats()["alive"] == 0  # the helper thread was not copied
    ok = ok and all(scan(2) == want for _ in range(5)) and native.scan_pool_stats()["alive"]
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
assert scan(2) == want
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_starts_its_own_helper() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _FORKED],
        capture_output=True,
        text=True,
        timeout=120,  # a child waiting on the parent's helper would hang here
        check=False,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
