"""A large batch's native stages shared with helper threads; the caller never waits for work
that no helper has started.

A native stage that loops over a batch's rows (the BM25 selection, the token relay) calls
:func:`share_rows` with a kernel that claims rows one at a time from a shared counter by an
atomic increment, without the GIL; the caller and up to :func:`helpers` threads of one
process-wide ``ThreadPoolExecutor`` each run it until no row is left. Python-level work (a
store's batch, a dense tile chunk) calls :func:`share` with a function of one range of rows,
and the rows go in chunks claimed the same way. Either way the caller starts at once, so a
helper that starts late (a busy machine, another batch using it) only takes less work; the
caller waits only for work a helper has claimed: one row of a kernel, one chunk of
:func:`share`. Results do not depend on who ran which row: every row is computed alone, into
its own slots. :class:`RowsAhead` starts a kernel's helpers now and takes the caller's part
later (a batch's next chunk selected beside the Python of the chunk before it).

The number of helpers is a per-thread setting (a context variable): the recall pathway sets
it from ``[recall] helper_threads`` around its scoring (:func:`helpers_for`); code that calls
the kernels directly shares nothing unless it sets it too. Helpers are never more than the
cores this process may run on, less one.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

__all__ = [
    "MAX_CHUNKS",
    "SHARED_QUERIES",
    "RowsAhead",
    "helpers",
    "helpers_for",
    "share",
    "share_rows",
    "shared_queries",
    "usable_helpers",
]

MAX_CHUNKS = 16
"""Chunks a shared batch is cut into at most: the last chunk, which the caller may wait for,
is about a sixteenth of the work; each chunk costs a call (~10 us)."""

SHARED_QUERIES = 16
"""The fewest queries of a dense tile chunk (:func:`shared_queries`)."""

_HELPERS: contextvars.ContextVar[int] = contextvars.ContextVar("spector_helpers", default=0)
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_cores: int | None = None


def _reset_after_fork() -> None:
    global _pool, _cores, _lock
    _pool, _cores, _lock = None, None, threading.Lock()  # the parent's threads are not here


os.register_at_fork(after_in_child=_reset_after_fork)


def usable_helpers() -> int:
    """The cores this process may run on, less one (the caller's)."""
    global _cores
    if _cores is None:
        try:
            _cores = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - platforms without affinity
            _cores = os.cpu_count() or 1
    return max(0, _cores - 1)


def helpers() -> int:
    """Helper threads :func:`share` uses on this thread now (0: the caller alone)."""
    return min(_HELPERS.get(), usable_helpers())


@contextlib.contextmanager
def helpers_for(count: int) -> Iterator[None]:
    """Let :func:`share` use up to ``count`` helper threads inside the block (this thread
    only; nested blocks restore the outer value)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"helpers_for: count must be an int >= 0, got {count!r}")
    token = _HELPERS.set(count)
    try:
        yield
    finally:
        _HELPERS.reset(token)


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=max(1, usable_helpers()), thread_name_prefix="spector-helper"
            )
        return _pool


def share(rows: int, min_rows: int, run: Callable[[int, int], object]) -> None:
    """``run(lo, hi)`` over ``[0, rows)`` in chunks of at least ``min_rows`` rows, on the
    caller and the helpers (module docstring); with no helper, one call ``run(0, rows)``.

    An exception of a chunk is raised here (the caller's own first, else a helper's); the
    remaining chunks are then skipped.
    """
    count = min(helpers(), MAX_CHUNKS)
    chunks = min(MAX_CHUNKS, rows // max(1, min_rows))
    if count == 0 or chunks < 2:
        if rows:
            run(0, rows)
        return
    step = -(-rows // chunks)
    chunks = -(-rows // step)
    claims = itertools.count()  # next() is atomic under the GIL
    failed = threading.Event()

    def loop() -> int:
        done = 0
        while not failed.is_set():
            c = next(claims)
            if c >= chunks:
                break
            done += 1
            try:
                run(c * step, min(rows, (c + 1) * step))
            except BaseException:
                failed.set()
                raise
        return done

    futures: list[Future[int]] = [_executor().submit(loop) for _ in range(count)]
    try:
        mine = loop()
    except BaseException:
        for f in futures:  # the chunks running elsewhere read the caller's arrays: let them end
            if not f.cancel():
                with contextlib.suppress(BaseException):
                    f.result()
        raise
    for f in futures:  # one not started yet never will; one that started may hold a chunk
        if not f.cancel() and mine < chunks:
            f.result()


def share_rows(rows: int, min_rows: int, run: Callable[[np.ndarray], object]) -> None:
    """``run(next_row)`` on the caller and on each helper (module docstring): ``next_row`` is
    one int64 (1,) counter from 0 that every call advances atomically to claim its next row,
    returning once a claim reaches ``rows``. Helpers join only when there are ``2 * min_rows``
    rows or more (``min_rows``: the rows worth a helper's start, about 0.1 ms); otherwise one
    call on the caller.

    An exception of a call is raised here (the caller's own first, else a helper's) once the
    calls that started have ended; the caller's own error first moves the counter past the
    rows so that the helpers claim nothing more.
    """
    RowsAhead(rows, min_rows, run).wait()


class RowsAhead:
    """:func:`share_rows` with the helpers started now and the caller's part taken later: the
    helpers claim rows while the caller goes on (a batch's next chunk of a native stage beside
    the Python of the chunk before it); :meth:`wait` runs the caller's claims and waits for
    the rows the helpers hold, :meth:`settle` moves the counter past the rows and waits for
    them (nothing then reads or writes the job's arrays). Either once; each a no-op after."""

    def __init__(self, rows: int, min_rows: int, run: Callable[[np.ndarray], object]) -> None:
        self.rows, self.run = rows, run
        self.next_row = np.zeros(1, dtype=np.int64)
        count = min(helpers(), max(0, rows // max(1, min_rows) - 1))
        self.futures: list[Future[object]] = [
            _executor().submit(run, self.next_row) for _ in range(count)
        ]
        self.ended = False

    def wait(self) -> None:
        """The caller's claims, then the helpers' rows: every row done (module docstring)."""
        if self.ended:
            return
        try:
            if self.rows:
                self.run(self.next_row)
        except BaseException:
            self.settle()  # the calls running elsewhere read the caller's arrays: let them end
            raise
        self.ended = True
        for f in self.futures:  # one not started yet never will; one that started may hold a row
            if not f.cancel():
                f.result()

    def settle(self) -> None:
        """Claim nothing more and let the helpers' rows end (their errors dropped)."""
        if self.ended:
            return
        self.ended = True
        self.next_row[0] = self.rows  # (an aligned store: the helpers' next claims see it)
        for f in self.futures:
            if not f.cancel():
                with contextlib.suppress(BaseException):
                    f.result()


def shared_queries(
    xq: np.ndarray, k: int, tiles: Callable[[np.ndarray], tuple[torch.Tensor, torch.Tensor]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``tiles(xq)`` — a batch's tile loop over every row, (n, k) keys and slots — with the
    queries cut into two chunks of at least 16 shared with the helper threads (:func:`share`)
    when there are helpers. Each query's answer is exact alone, so the chunks make the whole
    batch's. Two, not more: each chunk pays a pass over the rows and a narrower GEMM (200k x
    384 rows, 256 queries: 116-122 ms in two chunks, 136-157 in four, 184 on two torch
    threads without chunks; by row ranges instead, 200, each range warming its own
    thresholds)."""
    n = xq.shape[0]
    if helpers() == 0 or n < 2 * SHARED_QUERIES:
        return tiles(xq)
    keys = torch.empty((n, k), dtype=torch.float32)
    slots = torch.empty((n, k), dtype=torch.int64)
    inference = torch.is_inference_mode_enabled()  # (thread-local in torch)

    def run(lo: int, hi: int) -> None:  # queries [lo, hi), on the caller or a helper
        with torch.inference_mode(inference):
            keys[lo:hi], slots[lo:hi] = tiles(xq[lo:hi])

    share(n, max(SHARED_QUERIES, -(-n // 2)), run)
    return keys, slots
