"""kernels/sharing.py: a batch's rows (share_rows) or chunks (share) shared between the
caller and helper threads.

Every claim here is proven by events and counts, never by timing: the caller finishes a batch
alone while the helper is held elsewhere; a helper that claimed work is waited for; errors
come back; the kernels that share (the BM25 selection, the token relay) give the same bits
with and without helpers, offered to the helpers from two rows on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from spector_gpu.kernels import sharing
from spector_gpu.kernels.native import native
from spector_gpu.kernels.sharing import RowsAhead, helpers, helpers_for, share, share_rows

TWO_CORES = sharing.usable_helpers() >= 1
needs_two = pytest.mark.skipif(not TWO_CORES, reason="the process may run on one core only")


def test_no_helpers_runs_one_call_on_the_caller() -> None:
    calls: list[tuple[int, int, str]] = []
    share(100, 1, lambda lo, hi: calls.append((lo, hi, threading.current_thread().name)))
    assert calls == [(0, 100, threading.current_thread().name)]
    share(0, 1, lambda lo, hi: calls.append((lo, hi, "never")))  # nothing to do: no call
    assert len(calls) == 1


@needs_two
def test_chunks_cover_the_rows_once_and_a_helper_takes_some() -> None:
    seen: list[tuple[int, int]] = []
    names: set[str] = set()
    lock = threading.Lock()
    meet = threading.Barrier(2, timeout=10)  # each thread's first chunk waits for the other's

    def run(lo: int, hi: int) -> None:
        name = threading.current_thread().name
        with lock:
            first = name not in names
            seen.append((lo, hi))
            names.add(name)
        if first:
            meet.wait()

    with helpers_for(1):
        assert helpers() == 1
        share(160, 10, run)
    covered = sorted(seen)
    assert covered == [(lo, lo + 10) for lo in range(0, 160, 10)]
    assert any(n.startswith("spector-helper") for n in names)
    assert threading.current_thread().name in names


@needs_two
def test_the_caller_never_waits_for_a_helper_that_has_not_started() -> None:
    release = threading.Event()
    pool = sharing._executor()
    busy = [pool.submit(release.wait, 30) for _ in range(sharing.usable_helpers())]  # all held
    try:
        callers: set[str] = set()
        with helpers_for(1):
            share(64, 1, lambda lo, hi: callers.add(threading.current_thread().name))
        assert callers == {threading.current_thread().name}  # all 16 chunks, no wait
        assert not any(b.done() for b in busy)
    finally:
        release.set()
        for b in busy:
            b.result()


@needs_two
def test_a_helpers_error_is_raised_to_the_caller_and_the_rest_skipped() -> None:
    started = threading.Event()
    ran: list[int] = []

    def run(lo: int, hi: int) -> None:
        if threading.current_thread().name.startswith("spector-helper"):
            started.set()
            raise RuntimeError("helper chunk failed")
        assert started.wait(10)  # the caller's chunk ends after the helper's error
        ran.append(lo)

    with helpers_for(1), pytest.raises(RuntimeError, match="helper chunk failed"):
        share(160, 10, run)
    assert len(ran) < 15  # the caller stopped claiming once the error was seen


def test_a_callers_error_propagates() -> None:
    def run(lo: int, hi: int) -> None:
        raise ValueError(f"rows {lo}:{hi}")

    with helpers_for(1), pytest.raises(ValueError, match="rows 0:"):
        share(160, 10, run)


def test_helpers_are_per_thread_and_checked() -> None:
    seen: list[int] = []
    with helpers_for(3):
        t = threading.Thread(target=lambda: seen.append(helpers()))
        t.start()
        t.join()
        assert helpers() == min(3, sharing.usable_helpers())
        with helpers_for(0):
            assert helpers() == 0
        assert helpers() == min(3, sharing.usable_helpers())
    assert seen == [0] and helpers() == 0
    for bad in (-1, 1.5, True, "2"):
        with (
            pytest.raises(ValueError, match="count must be an int >= 0"),
            helpers_for(bad),  # type: ignore[arg-type]
        ):
            pass


@needs_two
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_helper() -> None:
    sharing._executor()  # the parent's pool exists before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            names: set[str] = set()
            with helpers_for(1):
                share(64, 1, lambda lo, hi: names.add(threading.current_thread().name))
            os.write(write, b"ok" if len(names) >= 1 and sharing._pool is not None else b"no")
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 2) == b"ok"
    os.close(read)


def _claiming(rows: int, row: Callable[[int], None]) -> Callable[[np.ndarray], None]:
    """A ``share_rows`` kernel in Python: claims rows from the counter (under a lock, where a
    native kernel increments it atomically) and calls ``row(i)`` for each."""
    lock = threading.Lock()

    def run(next_row: np.ndarray) -> None:
        while True:
            with lock:
                i = int(next_row[0])
                next_row[0] = i + 1
            if i >= rows:
                return
            row(i)

    return run


def test_share_rows_without_helpers_is_one_call_on_the_caller() -> None:
    seen: list[tuple[int, str]] = []
    calls: list[int] = []

    def row(i: int) -> None:
        seen.append((i, threading.current_thread().name))

    def run(next_row: np.ndarray) -> None:
        calls.append(int(next_row[0]))
        _claiming(50, row)(next_row)

    share_rows(50, 1, run)  # no helpers outside helpers_for
    with helpers_for(1):
        share_rows(50, 30, run)  # fewer than 2 * min_rows rows: no helper either
    me = threading.current_thread().name
    assert calls == [0, 0] and seen == [(i, me) for i in range(50)] * 2
    share_rows(0, 1, lambda _next: calls.append(-1))  # nothing to do: no call
    assert calls == [0, 0]


@needs_two
def test_share_rows_claims_each_row_once_and_a_helper_takes_some() -> None:
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()
    meet = threading.Barrier(2, timeout=10)  # each thread's first row waits for the other's

    def row(i: int) -> None:
        name = threading.current_thread().name
        with lock:
            first = all(n != name for _, n in seen)
            seen.append((i, name))
        if first:
            meet.wait()

    with helpers_for(1):
        share_rows(40, 1, _claiming(40, row))
    assert sorted(i for i, _ in seen) == list(range(40))
    names = {n for _, n in seen}
    assert threading.current_thread().name in names
    assert any(n.startswith("spector-helper") for n in names)


@needs_two
def test_share_rows_never_waits_for_a_helper_that_has_not_started() -> None:
    release = threading.Event()
    pool = sharing._executor()
    busy = [pool.submit(release.wait, 30) for _ in range(sharing.usable_helpers())]  # all held
    try:
        names: set[str] = set()
        with helpers_for(1):
            share_rows(64, 1, _claiming(64, lambda i: names.add(threading.current_thread().name)))
        assert names == {threading.current_thread().name}  # every row, no wait
        assert not any(b.done() for b in busy)
    finally:
        release.set()
        for b in busy:
            b.result()


@needs_two
def test_share_rows_errors_come_back_and_a_callers_error_stops_the_claims() -> None:
    started = threading.Event()

    def helper_fails(i: int) -> None:
        if threading.current_thread().name.startswith("spector-helper"):
            started.set()
            raise RuntimeError(f"helper row {i} failed")
        assert started.wait(10)  # the caller's rows go on after the helper's error

    with helpers_for(1), pytest.raises(RuntimeError, match="helper row"):
        share_rows(40, 1, _claiming(40, helper_fails))

    claimed: list[int] = []
    going = threading.Event()
    counters: list[np.ndarray] = []

    def claim(i: int) -> None:
        claimed.append(i)
        going.set()
        # the helper's first row lasts until the caller's error has moved the counter, however
        # slowly the caller is scheduled
        deadline = time.monotonic() + 10
        while i == 0 and counters[0][0] < 10**6 and time.monotonic() < deadline:
            time.sleep(0.001)

    def caller_fails(next_row: np.ndarray) -> None:
        if threading.current_thread().name.startswith("spector-helper"):
            counters.append(next_row)
            _claiming(10**6, claim)(next_row)  # stops only once the counter passes the rows
        else:
            assert going.wait(10)  # the helper is claiming rows
            raise ValueError("caller's kernel failed")

    with helpers_for(1), pytest.raises(ValueError, match="caller's kernel failed"):
        share_rows(10**6, 1, caller_fails)
    assert claimed == [0]  # the helper claimed nothing after the caller's error


@needs_two
def test_rows_ahead_start_before_the_wait_and_the_wait_finishes_every_row() -> None:
    seen: list[tuple[int, str]] = []
    helper_ran = threading.Event()
    caller_may_go = threading.Event()

    def row(i: int) -> None:
        name = threading.current_thread().name
        seen.append((i, name))
        if name.startswith("spector-helper"):
            helper_ran.set()
            assert caller_may_go.wait(10)  # the helper's rows wait for the caller's wait

    with helpers_for(1):
        ahead = RowsAhead(40, 1, _claiming(40, row))
    assert helper_ran.wait(10)  # a row done before anyone waited
    caller_may_go.set()
    ahead.wait()
    ahead.wait()  # once only
    assert sorted(i for i, _ in seen) == list(range(40))
    assert {n for _, n in seen} >= {threading.current_thread().name}


@needs_two
def test_rows_ahead_settle_claims_nothing_more_and_waits_for_the_row_held() -> None:
    claimed: list[int] = []
    going = threading.Event()
    ended = threading.Event()

    def claim(i: int) -> None:
        claimed.append(i)
        going.set()
        deadline = time.monotonic() + 10  # the first row lasts until settle moved the counter
        while i == 0 and ahead.next_row[0] < 10**6 and time.monotonic() < deadline:
            time.sleep(0.001)
        ended.set()

    with helpers_for(1):
        ahead = RowsAhead(10**6, 1, _claiming(10**6, claim))
    assert going.wait(10)
    ahead.settle()
    assert ended.is_set() and claimed == [0]  # the row held ended before settle returned
    ahead.wait()  # settled: nothing more runs
    assert claimed == [0]


def test_rows_ahead_without_helpers_run_on_the_wait_and_a_callers_error_settles() -> None:
    calls: list[str] = []
    ahead = RowsAhead(5, 1, _claiming(5, lambda i: calls.append(threading.current_thread().name)))
    assert calls == [] and ahead.futures == []  # no helpers outside helpers_for
    ahead.wait()
    assert calls == [threading.current_thread().name] * 5

    def fails(_next: np.ndarray) -> None:
        raise ValueError("the kernel failed")

    failing = RowsAhead(5, 1, fails)
    with pytest.raises(ValueError, match="the kernel failed"):
        failing.wait()
    assert failing.next_row[0] == 5  # moved past the rows: nothing more is claimed


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_shared_recall_batches_equal_the_caller_alone(
    rows_shared_finely: None, tmp_path: Path
) -> None:
    from spector_gpu import RecallOptions, SpectorMemory

    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(words, 12)) for _ in range(400)]
    queries = [" ".join(rng.choice(words, 4)) for _ in range(40)]
    opts = RecallOptions(k=10, mode="observe")
    with SpectorMemory.open(tmp_path, embedder="hashing") as mem:
        mem.remember_batch([{"text": t} for t in texts])
    got = {}
    for threads in (0, 1, 3):  # [recall] helper_threads, read by the recall pathway
        config = {"recall": {"helper_threads": threads}}
        with SpectorMemory.open(tmp_path, embedder="hashing", config=config) as mem:
            got[threads] = mem.recall_batch(queries, opts)
    for threads in (1, 3):
        np.testing.assert_array_equal(got[threads].ids, got[0].ids)
        np.testing.assert_array_equal(got[threads].scores, got[0].scores)
    assert (got[0].counts > 0).all()


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_pool_columns_read_in_shared_chunks_equal_one_pass(
    rows_shared_finely: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The pool members' columns and D (every member its own importance and age) read in
    chunks shared with a helper give the scores of one pass on the caller."""
    from spector_gpu import RecallOptions, SpectorMemory
    from spector_gpu.pathways.recall import columns

    rng = np.random.default_rng(9)
    words = [f"w{i}" for i in range(200)]
    now = 1_750_000_000_000
    items = [
        {
            "text": " ".join(rng.choice(words, 10)),
            "importance": float(rng.uniform(0.1, 10.0)),
            "timestamp_ms": now - int(rng.integers(0, 400 * 86_400_000)),
        }
        for _ in range(3000)  # a store over 2,048: the sparse pool layout, gathered per member
    ]
    queries = [" ".join(rng.choice(words, 3)) for _ in range(30)]
    opts = RecallOptions(k=15, relays=("lexical", "dense", "salience"), mode="observe", now_ms=now)
    with SpectorMemory.open(tmp_path, embedder="hashing") as mem:
        mem.remember_batch(items)
    chunked: list[int] = []
    real = columns.share

    def counted(rows: int, min_rows: int, run: Callable[[int, int], object]) -> None:
        chunked.append(min_rows)
        real(rows, min_rows, run)

    monkeypatch.setattr(columns, "share", counted)
    got = {}
    for threads in (0, 1):
        config = {"recall": {"helper_threads": threads}}
        with SpectorMemory.open(tmp_path, embedder="hashing", config=config) as mem:
            got[threads] = mem.recall_batch(queries, opts)
    np.testing.assert_array_equal(got[1].ids, got[0].ids)
    np.testing.assert_array_equal(got[1].scores, got[0].scores)
    assert len(set(got[0].scores[:, 0].tolist())) > 20 and chunked and set(chunked) == {1}


def test_helper_threads_config_is_checked(tmp_path: Path) -> None:
    from spector_gpu import ConfigError, SpectorMemory

    for bad in (-1, 65, "two"):
        with pytest.raises(ConfigError, match="helper_threads"):
            SpectorMemory.open(tmp_path / "s", config={"recall": {"helper_threads": bad}})


@pytest.mark.parametrize("inference", [False, True])
def test_dense_tiles_in_shared_query_chunks_equal_one_pass(
    inference: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from spector_gpu.kernels.dense import DenseIndex
    from spector_gpu.kernels.quant import quantize_int8

    rng = np.random.default_rng(11)
    index = DenseIndex(32, device="cpu")
    rows = rng.standard_normal((3000, 32)).astype(np.float32)
    index.add(*quantize_int8(rows))
    queries = index.queries(rng.standard_normal((70, 32)).astype(np.float32))
    gate = rng.random(3000) < 0.9
    with helpers_for(0), torch.inference_mode(inference):
        want = index.topk(queries, 9, allowed=gate)
    calls: list[tuple[int, int]] = []
    real = sharing.share

    def counted(rows: int, min_rows: int, run: object) -> None:
        calls.append((rows, min_rows))
        real(rows, min_rows, run)  # type: ignore[arg-type]

    monkeypatch.setattr(sharing, "share", counted)
    with helpers_for(1), torch.inference_mode(inference):
        got = index.topk(queries, 9, allowed=gate)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)
    assert calls == ([(70, 35)] if TWO_CORES else [])  # two chunks of >= 16 queries
