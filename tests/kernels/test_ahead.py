"""kernels/ahead.py and ``native.ScanAhead``: a few queries' dense scans started on a native
thread of their own, the caller joining in when it takes them.

The outputs equal ``int8_topk`` on the caller bit for bit (keys, slots, every row's key), with
gates, ties, several queries, and more rows than one claimed block, whoever scanned which
block: the thread alone (the caller busy until it has ended), both (the caller joining at
once), or the caller alone (``thread=False``, or a job withdrawn before the thread started).
Which of them ran is read back (``thread_ran`` and the merged sides), never inferred from
timing.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from spector_gpu.kernels.ahead import Pending, scan_ahead
from spector_gpu.kernels.native import native
from spector_gpu.kernels.quant import l2_normalize, quantize_int8

needs_native = pytest.mark.skipif(native is None, reason="native kernels not built")
N, D = 20_000, 24  # five claimed blocks of 4,096 rows (the last one short)


def corpus(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes with ties across blocks and zero rows, their scales, and 7 query codes."""
    rng = np.random.default_rng(seed)
    x = l2_normalize(rng.standard_normal((N, D), dtype=np.float32))
    x[5000:5600] = x[11]  # equal keys in two blocks: the merge breaks ties by slot
    x[9000:9100] = 0.0
    codes, scales = quantize_int8(x)
    xq, _ = quantize_int8(l2_normalize(rng.standard_normal((7, D), dtype=np.float32)))
    xq[2] = codes[11]  # a query that ties with the 600 copies
    return codes, scales, xq


def on_caller(codes, scales, xq, k, gate):
    """int8_topk of each query on the caller: the reference outputs."""
    m = xq.shape[0]
    keys, slots = np.empty((m, k), np.float32), np.empty((m, k), np.int64)
    every = np.empty((m, N), np.float32)
    for i in range(m):
        native.int8_topk(codes, N, D, D, scales, xq[i : i + 1], gate, keys[i : i + 1],
                         slots[i : i + 1], every[i : i + 1])  # fmt: skip
    return keys, slots, every


def started(codes, scales, xq, k, gate, *, thread: bool = True):
    m = xq.shape[0]
    out = np.empty((m, k), np.float32), np.empty((m, k), np.int64), np.empty((m, N), np.float32)
    job = native.ScanAhead(codes, N, D, D, scales, xq, gate, *out, thread=thread)
    return job, out


@needs_native
@pytest.mark.parametrize("when", ["at once", "after a pause", "no thread"])
def test_the_outputs_equal_the_scan_on_the_caller(when: str) -> None:
    codes, scales, xq = corpus(1)
    gate = np.random.default_rng(2).random(N) < 0.8
    ran: list[bool] = []
    for m, k, g in ((1, 10, None), (3, 600, gate), (7, 50, gate), (1, 1, None)):
        want = on_caller(codes, scales, xq[:m], k, g)
        for _ in range(5):
            job, got = started(codes, scales, xq[:m], k, g, thread=when != "no thread")
            if when == "after a pause":
                time.sleep(0.02)  # (the thread then has time to start: most often it ends)
            job.wait()
            for w, o in zip(want, got, strict=True):
                np.testing.assert_array_equal(o, w)
            assert job.threaded == (when != "no thread")
            ran.append(job.thread_ran)
    assert any(ran) if when == "after a pause" else not any(ran) if when == "no thread" else True


@needs_native
def test_both_sides_scan_and_their_lists_merge_exactly() -> None:
    """The caller joining as soon as the thread has started: each scanned blocks (k = every
    row: each side's list names the rows it scanned), and the merge equals the reference."""
    rng = np.random.default_rng(3)
    n, d = 60_000, 16  # fifteen blocks; k = n makes every offer a heap insert (a slow scan)
    codes = rng.integers(-127, 128, (n, d), dtype=np.int8)
    codes[100:30_000:7] = codes[50]  # ties across blocks
    scales = np.ones(n, np.float32)
    q = codes[50:51].copy()
    keys, slots = np.empty((1, n), np.float32), np.empty((1, n), np.int64)
    native.int8_topk(codes, n, d, d, scales, q, None, keys, slots)
    both = 0
    for _ in range(20):
        out = np.empty((1, n), np.float32), np.empty((1, n), np.int64)
        job = native.ScanAhead(codes, n, d, d, scales, q, None, *out)
        deadline = time.monotonic() + 10
        while not job.thread_started and time.monotonic() < deadline:
            time.sleep(0)
        job.wait()
        np.testing.assert_array_equal(out[0], keys)
        np.testing.assert_array_equal(out[1], slots)
        mine = job.thread_slots[0]
        found = int((mine >= 0).sum())
        both += job.thread_ran and 0 < found < n
        if both >= 2:
            break
    assert both >= 1  # the thread's rows and the caller's, merged exactly


@needs_native
def test_wait_twice_settle_and_drop_leave_the_outputs_and_arrays_alone() -> None:
    codes, scales, xq = corpus(4)
    want = on_caller(codes, scales, xq[:2], 20, None)
    job, got = started(codes, scales, xq[:2], 20, None)
    job.wait()
    job.wait()  # nothing more: the outputs stay
    job.settle()
    for w, o in zip(want, got, strict=True):
        np.testing.assert_array_equal(o, w)
    job, got = started(codes, scales, xq[:2], 20, None)
    job.settle()  # withdrawn or waited for; a wait afterwards still gives the whole answer
    job.wait()
    for w, o in zip(want, got, strict=True):
        np.testing.assert_array_equal(o, w)
    before = _threads()
    for _ in range(20):  # dropped unwaited: the thread is withdrawn or joined, never left running
        started(codes, scales, xq[:1], 5, None)
    gc.collect()
    assert _threads() == before


def _threads() -> int | None:
    """This process's threads (Linux), or None where /proc is missing."""
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None


@needs_native
def test_bad_arguments_are_refused_before_anything_starts() -> None:
    codes, scales, xq = corpus(5)
    keys, slots = np.empty((1, 4), np.float32), np.empty((1, 4), np.int64)
    with pytest.raises(ValueError, match="allowed must be bool"):
        native.ScanAhead(codes, N, D, D, scales, xq[:1], np.ones(N, np.int64), keys, slots)
    with pytest.raises(ValueError, match="out_slots must be"):
        native.ScanAhead(codes, N, D, D, scales, xq[:1], None, keys, np.empty((1, 5), np.int64))
    with pytest.raises(ValueError, match="out_all must be"):
        native.ScanAhead(codes, N, D, D, scales, xq[:1], None, keys, slots,
                         np.empty((1, N - 1), np.float32))  # fmt: skip
    with pytest.raises(ValueError, match="fewer than n_rows"):
        native.ScanAhead(codes, N + 1, D, D, scales, xq[:1], None, keys, slots)


@needs_native
def test_scan_ahead_gives_tensors_of_the_scan() -> None:
    codes, scales, xq = corpus(6)
    want = on_caller(codes, scales, xq[:3], 8, None)
    cap = np.zeros((N + 100, D), np.int8)
    cap[:N] = codes
    for thread in (True, False):
        got = scan_ahead(
            torch.from_numpy(cap), torch.from_numpy(np.r_[scales, np.zeros(100, np.float32)]),
            N, D, xq[:3], 8, None, thread=thread,
        ).result()  # fmt: skip
        for w, o in zip(want, got, strict=True):
            assert isinstance(o, torch.Tensor)
            np.testing.assert_array_equal(o.numpy(), w)


def test_pending_computes_once_and_settles_once() -> None:
    calls: list[str] = []
    p = Pending(lambda: calls.append("finish") or 7, lambda: calls.append("settle"))
    assert p.result() == 7 and p.result() == 7
    p.settle()  # after the result: nothing to settle
    assert calls == ["finish"]
    q = Pending(lambda: calls.append("never"), lambda: calls.append("settle"))
    q.settle()
    q.settle()
    assert calls == ["finish", "settle"]
    with pytest.raises(RuntimeError, match="settled without its result"):
        q.result()
    assert Pending.done([1]).result() == [1]


def test_pending_errors_come_back_every_time_and_then_maps_the_value() -> None:
    def fails() -> int:
        raise ValueError("the work failed")

    p: Pending[int] = Pending(fails)
    for _ in range(2):
        with pytest.raises(ValueError, match="the work failed"):
            p.result()
    settled: list[int] = []
    base = Pending(lambda: 20, lambda: settled.append(1))
    doubled = base.then(lambda v: v * 2)
    assert doubled.result() == 40 and base.result() == 20
    left = Pending(lambda: 1, lambda: settled.append(2)).then(lambda v: v + 1)
    left.settle()  # settles the work it maps
    assert settled == [2]


@needs_native
def test_recalls_whose_scans_go_ahead_equal_the_caller_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Single recalls and a batch of three: the same ids and scores with the scans started on
    their own thread (``[recall] helper_threads = 1``) as on the caller alone (0)."""
    from spector_gpu.kernels import dense as dense_index
    from spector_gpu.kernels.sharing import usable_helpers

    from spector_gpu import RecallOptions, SpectorMemory
    from spector_gpu.pathways.recall.relays import dense as dense_relay

    rng = np.random.default_rng(8)
    words = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(words, 12)) for _ in range(3000)]
    queries = [" ".join(rng.choice(words, 4)) for _ in range(12)]
    opts = RecallOptions(k=10, mode="observe")
    with SpectorMemory.open(tmp_path, embedder="hashing") as mem:
        mem.remember_batch([{"text": t} for t in texts])
    monkeypatch.setattr(dense_relay, "AHEAD_ROWS", 1)  # this small store's scans go ahead too
    threaded: list[bool] = []
    real = dense_index.scan_ahead

    def counted(*args: object, thread: bool) -> object:
        threaded.append(thread)
        return real(*args, thread=thread)  # type: ignore[arg-type]

    monkeypatch.setattr(dense_index, "scan_ahead", counted)
    got: dict[int, list[list[tuple[str, float]]]] = {}
    for threads in (0, 1):
        config = {"recall": {"helper_threads": threads}}
        with SpectorMemory.open(tmp_path, embedder="hashing", config=config) as mem:
            got[threads] = [[(r.id, r.score) for r in mem.recall(q, opts)] for q in queries]
            got[threads].append([(r.id, r.score) for r in mem.recall_batch(queries[:3], opts)[0]])
    assert got[1] == got[0] and all(got[0])
    assert len(threaded) == 2 * (len(queries) + 1)  # every one took the native scan
    assert sum(threaded) == (len(queries) + 1 if usable_helpers() else 0)  # helper_threads = 1
