"""Work started now and taken later (:class:`Pending`), and a few queries' native dense scans
started on a thread of their own (:func:`scan_ahead`).

A small CPU batch's dense scans (fewer than 8 queries: one pass over the rows each) need no
Python while they run. ``native.ScanAhead`` (``kernels/_scan.pyx``) starts them on a POSIX
thread created for the call, which runs ``int8_topk`` without the GIL while the caller goes on
with the salience and lexical relays. The caller takes them before its pool and joins in: each
query's blocks of rows go to whichever of the two claims them first, and the two top-k lists
are merged exactly. If the thread has not started by then (a busy machine), the caller
withdraws it and scans alone; it then only waits for that thread to exit, never for its work.

A pool thread running Python could not overlap the scan: each of its steps (the call, the
arrays, the future) needed the GIL while the caller held it for its own Python, and the
hand-offs cost what the overlap saved. Measured through ``recall`` over 100k rows on this
project's 2-core host: the same p50 with the offer as without it. Creating the native thread
costs ~30 µs, and it runs ~60 µs after the call (docs/architecture.md, "Work that goes
ahead").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import numpy as np
import torch

from .native import native

__all__ = ["Pending", "scan_ahead"]

T = TypeVar("T")
U = TypeVar("U")


class Pending(Generic[T]):
    """A value taken later. :meth:`result` calls ``finish`` once and returns its value (or
    raises its error) every time; a caller that leaves without the result calls :meth:`settle`,
    which calls ``settle`` (withdraw or wait for the work: it may read what the caller is about
    to release). Both are no-ops once the other has run."""

    def __init__(self, finish: Callable[[], T], settle: Callable[[], None] | None = None) -> None:
        self._finish: Callable[[], T] | None = finish
        self._settle = settle
        self._value: tuple[T] | None = None
        self._error: BaseException | None = None

    @classmethod
    def done(cls, value: T) -> Pending[T]:
        """A value already computed."""
        pending: Pending[T] = cls(lambda: value)
        pending.result()
        return pending

    def result(self) -> T:
        """The value (computed once); the error, if computing it raised."""
        finish, self._finish, self._settle = self._finish, None, None
        if finish is not None:
            try:
                self._value = (finish(),)
            except BaseException as exc:
                self._error = exc
        if self._error is not None:
            raise self._error
        if self._value is None:
            raise RuntimeError("Pending.result(): the work was settled without its result")
        return self._value[0]

    def settle(self) -> None:
        """Withdraw the work or wait for it to end, its value and errors dropped."""
        settle, self._settle = self._settle, None
        if settle is not None and self._finish is not None:
            self._finish = None
            settle()

    def then(self, fn: Callable[[T], U]) -> Pending[U]:
        """``fn(value)`` taken later, settled with this one."""
        return Pending(lambda: fn(self.result()), self.settle)


def scan_ahead(
    codes: torch.Tensor,
    scales: torch.Tensor,
    n_rows: int,
    dim: int,
    xq: np.ndarray,
    k: int,
    gate: np.ndarray | None,
    *,
    thread: bool,
) -> Pending[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The native scan of each query, one pass over the rows each: float32 (n, k) keys and
    int64 (n, k) slots (``(-inf, -1)`` padding), and every row's key, float32 (n, n_rows)
    (``-inf`` for gated rows). Written as the scan goes (4 bytes per row beside the row it
    reads), the keys let the pool be scored by a gather instead of a second pass.

    Args:
        codes: int8 (capacity, stride) CPU corpus codes, the first ``n_rows`` live; scales:
            float32 (capacity,); xq: int8 (n, dim) query codes, n >= 1; gate: bool (n_rows,)
            or None;
        thread: start the scans now on a thread of their own (module docstring), else they
            run when the result is taken.
    """
    n = xq.shape[0]
    keys = np.empty((n, k), dtype=np.float32)
    slots = np.empty((n, k), dtype=np.int64)
    every = np.empty((n, n_rows), dtype=np.float32)  # every row written, gated ones -inf
    job = native.ScanAhead(
        codes.numpy(),
        n_rows,
        dim,
        codes.shape[1],
        scales.numpy(),
        np.ascontiguousarray(xq),
        gate,
        keys,
        slots,
        every,
        thread=thread,
    )

    def finish() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        job.wait()
        return torch.from_numpy(keys), torch.from_numpy(slots), torch.from_numpy(every)

    return Pending(finish, job.settle)
