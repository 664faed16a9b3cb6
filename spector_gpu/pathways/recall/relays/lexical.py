"""The lexical relay: BM25 scores of a chunk of queries as one (m, N) float32 block.

On the CPU the block is :meth:`BM25Index.score_dense` — scipy's sparse product ``Q @ W``
expanded to a dense array, formed by one native pass over the postings in place. On a GPU the
same sums are formed on the device in *rounds*: round r adds, for every query, the postings of
its r-th term (``index_add_`` into the flattened block; a (query, document) pair occurs once
per round, so no two additions race), which keeps the float32 accumulation order of scipy's
product — ascending term — and with it the exact bits. The relay proposes each query's
``depth`` best positive scores and scores any pool member by a gather from the block (0 where
no term matched).

In the sparse pool layout on the CPU the block is not formed at all (:func:`lexical_select`):
each query's sums go into one native scratch row, its proposals are selected from the
documents it touched, and the pool's members are scored afterwards (:func:`lexical_members`:
from the proposals themselves when the pool is nothing else, from the row a single query
keeps until then, else by a second pass) — the block's values, bit for bit, without clearing
and scanning N scores per query. A large batch's chunks are selected one ahead
(:class:`SelectAhead`): each chunk's queries start on the helper threads while the chunk
before it runs its Python stages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from ....cortex.bm25 import BM25Index
from ....cortex.bm25_select import ScoredRow, select_ahead
from ....kernels.ahead import Pending
from ....kernels.selection import rows_topk
from ....kernels.sharing import helpers
from ..pool import PAD, Pool
from . import RecallPlan

if TYPE_CHECKING:
    from ....cortex.cortex import Cortex

#: Pool members (rows × expected width) a chunk of queries may hold without a lexical block.
_POOL_BUDGET = 1 << 18

AHEAD_CHUNKS = 2
"""Chunks a batch whose lexical selection goes ahead is cut into at least (:class:`SelectAhead`)."""

AHEAD_QUERIES = 64
"""The fewest queries of such a chunk."""


class Selection(NamedTuple):
    """:func:`lexical_select`'s proposals: float32 scores and int64 ordinals (m, depth), and
    a single query's kept scores row (else None)."""

    keys: torch.Tensor
    slots: torch.Tensor
    row: ScoredRow | None


__all__ = [
    "AHEAD_CHUNKS",
    "AHEAD_QUERIES",
    "SelectAhead",
    "Selection",
    "lexical_block",
    "lexical_block_rounds",
    "lexical_members",
    "lexical_select",
    "lexical_select_ahead",
    "lexical_top",
    "select_chunk",
    "selects",
]


def lexical_block(
    bm25: BM25Index, tokens: list[list[str]], plan: RecallPlan, *, rounds: bool
) -> torch.Tensor:
    """float32 (m, N) BM25 scores of ``tokens`` over the allowed memories, on plan.device."""
    if not rounds:
        return torch.from_numpy(bm25.score_dense(tokens, allowed=plan.gate))
    q, w = bm25.weights(tokens, allowed=plan.allowed)
    return lexical_block_rounds(q, w, plan.allowed.shape[0], plan.device)


def lexical_block_rounds(q, w, n_docs: int, device: torch.device) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """The device twin of ``(q @ w).toarray()`` for float32 csr ``q`` (m, u) and ``w`` (u, N)
    (rows of ``q`` ascending in column), accumulated in ascending term order."""
    m = q.shape[0]
    block = torch.zeros(m * n_docs, dtype=torch.float32, device=device)
    if q.nnz == 0 or w.nnz == 0:
        return block.view(m, n_docs)
    row = np.repeat(np.arange(m, dtype=np.int64), np.diff(q.indptr))
    rank = np.arange(q.nnz, dtype=np.int64) - q.indptr[row]  # position of the term in its query
    starts, lens = w.indptr[q.indices], np.diff(w.indptr)[q.indices]
    docs = torch.from_numpy(w.indices.astype(np.int64)).to(device)
    vals = torch.from_numpy(w.data.astype(np.float32)).to(device)
    for r in range(int(rank.max()) + 1):
        pick = np.flatnonzero(rank == r)
        counts = lens[pick]
        total = int(counts.sum())
        if not total:
            continue
        # flat positions of each picked pair's postings inside w.indices / w.data
        offs = np.repeat(starts[pick] - np.cumsum(counts) + counts, counts) + np.arange(total)
        pair = np.repeat(pick, counts)
        at = torch.from_numpy(offs).to(device)
        rows_t = torch.from_numpy(row[pair]).to(device)
        mult = torch.from_numpy(q.data[pair].astype(np.float32)).to(device)
        block.index_add_(0, rows_t * n_docs + docs[at], mult * vals[at])
    return block.view(m, n_docs)


def lexical_top(block: torch.Tensor, plan: RecallPlan) -> torch.Tensor:
    """int64 (m, depth): each query's best positive-scoring ordinals (ties: lower), -1 padding."""
    slots: torch.Tensor = rows_topk(block, plan.depth, positive=True, use_native=plan.native)[1]
    return slots


def selects(plan: RecallPlan, exact_rounds: bool, dense_layout: bool) -> bool:
    """Whether the lexical relay selects each query's proposals natively from its scratch row
    (:func:`lexical_select`) instead of forming the (m, N) score block: on the CPU with the
    native kernels, outside the device's round-based sums, in the sparse pool layout (a store
    larger than the candidate lists), where the block costs O(N) per query to clear and
    scan."""
    return (
        "lexical" in plan.relays
        and plan.native
        and not exact_rounds
        and plan.device.type == "cpu"
        and not dense_layout
    )


def select_chunk(plan: RecallPlan, window: int) -> int:
    """Queries per chunk when the lexical relay selects without a block: as many as keep the
    pool's expected members (each relay's proposals, times the neighbours association adds:
    ``window`` turns on each side and a few tag and lineage edges) within :data:`_POOL_BUDGET`,
    between 16 and 1,024. (A thousand all-relay queries over 100k memories in one chunk held
    515 MB of pool tensors and ran slower than in chunks of a hundred.)"""
    width = plan.depth * (("lexical" in plan.relays) + ("dense" in plan.relays)) + plan.top
    if "association" in plan.relays:
        width *= 1 + 2 * window + 4
    return min(max(_POOL_BUDGET // max(width, 1), 16), 1024)


def lexical_select(bm25: BM25Index, tokens: list[list[str]], plan: RecallPlan) -> Selection:
    """float32 (m, depth) scores and int64 (m, depth) ordinals of each query's best positive
    BM25 scores over the allowed memories (:func:`lexical_top` of :func:`lexical_block`,
    without the block; ``-inf`` / ``-1`` padding), on the CPU. A single query keeps its
    scores row (:meth:`.BM25Index.score_row`) for :func:`lexical_members`."""
    if len(tokens) == 1:
        row = bm25.score_row(tokens[0], plan.depth, allowed=plan.gate)
        return Selection(torch.from_numpy(row.scores), torch.from_numpy(row.slots), row)
    keys, slots, _ = bm25.select(tokens, plan.depth, allowed=plan.gate)
    return Selection(torch.from_numpy(keys), torch.from_numpy(slots), None)


def lexical_select_ahead(
    bm25: BM25Index, tokens: list[list[str]], plan: RecallPlan
) -> Pending[Selection]:
    """:func:`lexical_select` of two queries or more started now on the helper threads (taken
    by its result; one query's is computed at once)."""
    if len(tokens) < 2:
        return Pending.done(lexical_select(bm25, tokens, plan))
    started = select_ahead(bm25, tokens, plan.depth, plan.gate)
    return started.then(
        lambda got: Selection(torch.from_numpy(got[0]), torch.from_numpy(got[1]), None)
    )


class SelectAhead:
    """A batch's :func:`lexical_select` chunk by chunk (``step`` queries each), each chunk's
    queries started on the helper threads as the chunk before it takes its own (:meth:`take`):
    chunk c + 1's BM25 selection runs beside chunk c's Python stages (the pool, its columns,
    fusion, top-k). With a helper thread, a batch of 2 * AHEAD_QUERIES queries or more is cut
    into AHEAD_CHUNKS chunks or more, each of AHEAD_QUERIES or more (within
    :func:`select_chunk`). :meth:`settle` lets a chunk started and not taken end."""

    def __init__(self, cortex: Cortex, plan: RecallPlan) -> None:
        self.bm25, self.plan, n = cortex.bm25, plan, len(plan.tokens)
        self.step = select_chunk(plan, cortex.config.association.temporal_window)
        if helpers() and n >= 2 * AHEAD_QUERIES:
            self.step = min(self.step, max(AHEAD_QUERIES, -(-n // AHEAD_CHUNKS)))
        self.started: dict[int, Pending[Selection]] = {}

    def take(self, lo: int, hi: int) -> Selection:
        """Queries ``[lo, hi)``'s selection (started before, else now); the next chunk's
        then starts."""
        mine = self.started.pop(lo, None) or self._start(lo, hi)
        got: Selection = mine.result()
        if hi < len(self.plan.tokens):
            self.started[hi] = self._start(hi, min(len(self.plan.tokens), hi + self.step))
        return got

    def _start(self, lo: int, hi: int) -> Pending[Selection]:
        return lexical_select_ahead(self.bm25, self.plan.tokens[lo:hi], self.plan)

    def settle(self) -> None:
        """Withdraw or wait for any chunk started and not taken."""
        for pending in self.started.values():
            pending.settle()
        self.started.clear()


def lexical_members(
    bm25: BM25Index, tokens: list[list[str]], plan: RecallPlan, selected: Selection, pool: Pool
) -> torch.Tensor:
    """float64 (m, W) BM25 score of every pool member (0 at padding): read off the
    :func:`lexical_select` proposals when the pool holds nothing else (each row's members are
    then its proposals in ascending order), from a single query's kept row, else scored by
    :meth:`.BM25Index.select`. A kept row is released."""
    keys, slots, row = selected
    if not pool.dense and torch.equal(pool.valid.sum(dim=1), (slots >= 0).sum(dim=1)):
        order = pool.order  # a pool of the proposals alone knows where its members came from
        if order is None:
            order = torch.argsort(torch.where(slots < 0, PAD, slots), dim=1, stable=True)
        got = torch.gather(keys, 1, order[:, : pool.width]).to(torch.float64)
        if row is not None:
            row.release()
        return torch.where(pool.valid, got, torch.zeros_like(got))
    cand = torch.where(pool.valid, pool.ordinals, torch.full_like(pool.ordinals, -1)).numpy()
    if row is not None:
        return torch.from_numpy(row.at(cand)).to(torch.float64)  # (reading releases the row)
    _, _, scores = bm25.select(tokens, 0, allowed=plan.gate, candidates=cand)
    assert scores is not None
    return torch.from_numpy(scores).to(torch.float64)
