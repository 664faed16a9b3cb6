"""The lexical relay: BM25 scores of a chunk of queries as one (m, N) float32 block.

On the CPU the block is :meth:`BM25Index.score_dense` — scipy's sparse product ``Q @ W``
expanded to a dense array, formed by one native pass over the postings in place. On a GPU the
same sums are formed on the device in *rounds*: round r adds, for every query, the postings of
its r-th term (``index_add_`` into the flattened block; a (query, document) pair occurs once
per round, so no two additions race), which keeps the float32 accumulation order of scipy's
product — ascending term — and with it the exact bits. The relay proposes each query's
``depth`` best positive scores and scores any pool member by a gather from the block (0 where
no term matched).
"""

from __future__ import annotations

import numpy as np
import torch

from ....cortex.bm25 import BM25Index
from ....kernels.selection import rows_topk
from . import RecallPlan

__all__ = ["lexical_block", "lexical_block_rounds", "lexical_top"]


def lexical_block(
    bm25: BM25Index, tokens: list[list[str]], plan: RecallPlan, *, rounds: bool
) -> torch.Tensor:
    """float32 (m, N) BM25 scores of ``tokens`` over the allowed memories, on plan.device."""
    if not rounds:
        return torch.from_numpy(bm25.score_dense(tokens, allowed=plan.allowed))
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
