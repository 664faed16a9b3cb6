"""Each query's best BM25 scores without the (n, N) score block (:mod:`.bm25`'s ``select`` and
``score_row``).

:func:`select_scores` accumulates each query's sums into one scratch row (the native
``bm25_select``: the float32 sums of :func:`.bm25_scoring.dense_scores`, in the same order),
selects its ``depth`` best positive scores from the documents it touched (a query of many
postings: from the whole row) and reads the scores of given slots, on the calling thread (or,
:func:`select_ahead`, on the helper threads too); a document's sum starts from 0 where the query
first reaches it, so the row is never cleared after a query. :class:`ScoredRow` keeps one
query's row in the calling thread's :class:`RowScratch` of the index until released, so that
slots chosen later (a recall's pool) are scored without a second pass.
:func:`select_reference` is the numpy twin.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from spector_gpu.errors import ValidationError

from ..kernels.ahead import Pending
from ..kernels.native import native
from .bm25_scoring import KernelInputs, check_allowed, check_slots, native_args

__all__ = [
    "BM25Scores",
    "RowScratch",
    "ScoredRow",
    "check_select",
    "index_row",
    "index_select",
    "score_row",
    "select_ahead",
    "select_reference",
    "select_scores",
]


class BM25Scores(Protocol):
    """What :func:`index_select` and :func:`index_row` need of a ``BM25Index``."""

    def __len__(self) -> int: ...

    def kernel_inputs(self, query_tokens: Sequence[Sequence[str]]) -> KernelInputs: ...

    def score_dense(
        self, query_tokens: Sequence[Sequence[str]], *, allowed: np.ndarray | None = None
    ) -> np.ndarray: ...


def check_select(
    query_tokens: object,
    depth: object,
    candidates: object,
    threads: object,
    n_docs: int,
    *,
    name: str = "depth",
) -> int:
    """``depth`` as an int once the arguments of :meth:`.BM25Index.select` are checked
    (``name``: what the caller calls ``depth``)."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
        raise ValidationError(f"{name}={depth!r}: use an int >= 0")
    if threads is not None:
        if isinstance(threads, bool) or threads not in (1, 2):
            raise ValidationError(f"threads={threads!r}: leave it out (deprecated and ignored)")
        warnings.warn(
            "BM25Index.select(threads=...) is deprecated and ignored: the selection runs on "
            "the calling thread; leave the argument out",
            DeprecationWarning,
            stacklevel=4,
        )
    if candidates is None:
        return int(depth)
    n = -1 if isinstance(query_tokens, (str, bytes)) else len(query_tokens)  # type: ignore[arg-type]
    check_slots(candidates, n_docs, queries=n, name="candidates")
    return int(depth)


class RowScratch:
    """An index's scratch for :class:`ScoredRow` (zero between rows): float32 scores (N,)
    and a uint64 bitset of the documents a row wrote; replaced when the index has grown,
    cleared if a row was never released."""

    def __init__(self) -> None:
        self.acc = np.zeros(0, dtype=np.float32)
        self.mark = np.zeros(1, dtype=np.uint64)
        self.live: ScoredRow | None = None

    def take(self, n_docs: int) -> None:
        """Make the scratch ready for a row over ``n_docs`` documents."""
        if self.live is not None:
            self.live.release()
        if len(self.acc) != n_docs:
            self.acc = np.zeros(n_docs, dtype=np.float32)
            self.mark = np.zeros(n_docs // 64 + 1, dtype=np.uint64)


class ScoredRow:
    """One query's BM25 scores: its ``depth`` best ``scores`` float32 and ``slots`` int64
    (best first, ties to the lower slot; ``-inf`` / ``-1`` padding), and once, by :meth:`at`,
    the scores of any slots — the values of ``score_dense``, without a second pass over the
    postings. Made by ``BM25Index.score_row``, whose scratch row it holds until :meth:`at` or
    :meth:`release` (or the index's next row) lets it go."""

    def __init__(
        self,
        scores: np.ndarray,
        slots: np.ndarray,
        row: np.ndarray | None,
        scratch: RowScratch | None = None,
        whole: bool = False,
    ) -> None:
        self.scores, self.slots = scores, slots
        self._row, self._scratch, self._whole = row, scratch, whole
        self.released = False

    def at(self, slots: np.ndarray) -> np.ndarray:
        """float32 scores of int ``slots`` (any shape; -1: padding, scored 0); the row is
        released after this read."""
        if self.released:
            raise ValidationError("this scored row was released: score the query again")
        slots = np.asarray(slots)
        n = len(self._row) if self._row is not None else len(self._scratch.acc)  # type: ignore[union-attr]
        check_slots(slots.reshape(1, -1), n)
        flat = np.ascontiguousarray(slots.reshape(-1), dtype=np.int64)
        if self._row is not None:
            got = np.where(flat >= 0, self._row[np.maximum(flat, 0)], 0).astype(np.float32)
            return got.reshape(slots.shape)
        out = np.empty(len(flat), dtype=np.float32)
        self._release(flat, out)
        return out.reshape(slots.shape)

    def release(self) -> None:
        """Clear the index's scratch row (idempotent)."""
        if not self.released:
            self._release(None, None)

    def _release(self, flat: np.ndarray | None, out: np.ndarray | None) -> None:
        self.released = True
        sc = self._scratch
        if sc is None:
            return
        native.bm25_row_release(sc.acc, sc.mark, self._whole, flat, out)
        if sc.live is self:
            sc.live = None


def score_row(
    inputs: KernelInputs,
    allowed: np.ndarray | None,
    depth: int,
    scratch: RowScratch,
) -> ScoredRow:
    """A :class:`ScoredRow` of one query in ``scratch`` (native; the caller checked it is
    built and released any earlier row)."""
    keys = np.empty(depth, dtype=np.float32)
    slots = np.empty(depth, dtype=np.int64)
    args = native_args(inputs, allowed)
    # (the kernel allocates before it writes: an error leaves the scratch zero)
    whole = native.bm25_row(
        *args, depth, keys, slots, scratch.acc, scratch.mark, *inputs.cache_args()
    )
    inputs.cached()
    row = ScoredRow(keys[None], slots[None], None, scratch, whole)
    scratch.live = row
    return row


def select_reference(
    block: np.ndarray, depth: int, candidates: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`select_scores` from a float32 (n, N) score block (the numpy twin)."""
    n, width = block.shape
    keys = np.full((n, depth), -np.inf, dtype=np.float32)
    slots = np.full((n, depth), -1, dtype=np.int64)
    for i in range(n):
        hit = np.flatnonzero(block[i] > 0)
        order = hit[np.lexsort((hit, -block[i, hit]))][:depth]
        keys[i, : len(order)] = block[i, order]
        slots[i, : len(order)] = order
    cand_out = None
    if candidates is not None:
        safe = np.where(candidates >= 0, candidates, 0)
        got = np.take_along_axis(block, safe, axis=1) if width else np.zeros(safe.shape)
        cand_out = np.where(candidates >= 0, got, 0).astype(np.float32)
    return keys, slots, cand_out


def select_scores(
    inputs: KernelInputs,
    allowed: np.ndarray | None,
    depth: int,
    candidates: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Each query's ``depth`` best positive scores of ``Q @ W`` (float32 (n, depth), best
    first, ties to the lower slot; ``-inf`` padding) with their slots (int64, ``-1``), and the
    scores of ``candidates`` int64 (n, W) (0 where a slot matches nothing or is ``-1``), or
    None without candidates — the values of :func:`dense_scores`, bit for bit (native; the
    caller checked it is built)."""
    got: tuple[np.ndarray, np.ndarray, np.ndarray | None]
    got = _select(inputs, allowed, depth, candidates, ahead=False).result()
    return got


def _select(
    inputs: KernelInputs,
    allowed: np.ndarray | None,
    depth: int,
    candidates: np.ndarray | None,
    *,
    ahead: bool,
) -> Pending[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """:func:`select_scores`, done, or with ``ahead`` started on the helper threads."""
    n = inputs.q.shape[0]
    keys = np.empty((n, depth), dtype=np.float32)
    slots = np.empty((n, depth), dtype=np.int64)
    cand_out = None
    if candidates is not None:
        candidates = np.ascontiguousarray(candidates, dtype=np.int64)
        cand_out = np.empty(candidates.shape, dtype=np.float32)
    started = native.bm25_select(
        *native_args(inputs, allowed),
        depth,
        keys,
        slots,
        candidates,
        cand_out,
        *inputs.cache_args(),
        ahead=ahead,
    )
    inputs.cached()  # (the call computed the weights before any query ran)
    if started is None:
        return Pending.done((keys, slots, cand_out))

    def finish() -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        started.wait()
        return keys, slots, cand_out

    return Pending(finish, started.settle)


def select_ahead(
    index: BM25Scores,
    query_tokens: Sequence[Sequence[str]],
    depth: int,
    allowed: np.ndarray | None,
) -> Pending[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """``index.select(query_tokens, depth, allowed=allowed)`` started now: the arguments
    checked, then natively the queries start on the helper threads (``kernels.sharing.
    RowsAhead``) and the rest run when the result is taken; without the native kernels the
    numpy twin runs at once."""
    depth = check_select(query_tokens, depth, None, None, len(index))
    return _index_started(index, query_tokens, depth, allowed, None, ahead=True)


def index_select(
    index: BM25Scores,
    query_tokens: Sequence[Sequence[str]],
    depth: int,
    allowed: np.ndarray | None,
    candidates: np.ndarray | None,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``BM25Index.select``: the arguments checked, natively or by the numpy twin."""
    depth = check_select(query_tokens, depth, candidates, threads, len(index))
    got: tuple[np.ndarray, np.ndarray, np.ndarray | None]
    got = _index_started(index, query_tokens, depth, allowed, candidates, ahead=False).result()
    return got


def _index_started(
    index: BM25Scores,
    query_tokens: Sequence[Sequence[str]],
    depth: int,
    allowed: np.ndarray | None,
    candidates: np.ndarray | None,
    *,
    ahead: bool,
) -> Pending[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """:func:`index_select` once ``depth`` is checked: ``allowed`` checked, then natively
    (:func:`_select`) or by the numpy twin, done at once."""
    allowed = check_allowed(allowed, len(index))
    if native is None:
        block = index.score_dense(query_tokens, allowed=allowed)
        return Pending.done(select_reference(block, depth, candidates))
    return _select(index.kernel_inputs(query_tokens), allowed, depth, candidates, ahead=ahead)


def index_row(
    index: BM25Scores,
    tokens: Sequence[str],
    depth: int,
    allowed: np.ndarray | None,
    scratch: RowScratch,
) -> ScoredRow:
    """``BM25Index.score_row``: the arguments checked, natively in the index's ``scratch``
    (any earlier row released first) or by the numpy twin."""
    depth = check_select([tokens], depth, None, None, len(index))
    allowed = check_allowed(allowed, len(index))
    if native is None or depth == 0:
        row = index.score_dense([tokens], allowed=allowed)
        keys, slots, _ = select_reference(row, depth, None)
        return ScoredRow(keys, slots, row[0])
    scratch.take(len(index))
    return score_row(index.kernel_inputs([tokens]), allowed, depth, scratch)
