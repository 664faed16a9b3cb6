"""The dense relay: INT8 similarity of the query vectors (``DenseIndex``, spector_gpu.kernels).

The index chooses its kernel from the batch and the device (the native scan for fewer than 8
queries on the CPU, which may go ahead on a thread of its own, GEMM tiles with native selection
for larger batches, Triton or block-max on a GPU); the relay asks only for the top ``depth``
slots and for the exact score of pool members.
"""

from __future__ import annotations

from typing import TypeAlias

import torch

from ....kernels.ahead import Pending
from ....kernels.dense import DenseIndex
from ....kernels.quant import DenseQueries
from ....kernels.sharing import helpers
from . import RecallPlan

__all__ = ["AHEAD_ROWS", "Proposals", "dense_score", "dense_top", "slice_queries"]

AHEAD_ROWS = 20_000
"""Rows from which a small CPU batch's native scans start on a thread of their own
(:func:`dense_top` with ``ahead``)."""

Proposals: TypeAlias = torch.Tensor | Pending[torch.Tensor] | None
"""The dense relay's proposals (``Scorer.dense_proposals``), or their scans going ahead."""


def slice_queries(dq: DenseQueries, lo: int, hi: int) -> DenseQueries:
    """Queries ``[lo, hi)`` of a batch (the batch itself when that is all of it, so the index
    can recognise the queries it just scanned)."""
    if lo == 0 and hi == len(dq):
        return dq
    return DenseQueries(dq.x[lo:hi], dq.xq[lo:hi], dq.qs[lo:hi], dq.qs_t[lo:hi])


def dense_top(index: DenseIndex, plan: RecallPlan, *, ahead: bool = False) -> Pending[torch.Tensor]:
    """int64 (n, min(depth, n_allowed)) best slots of every query, -1 padding, taken later.

    With ``ahead``, a small CPU batch's native scans (:meth:`DenseIndex.topk_ahead`) start now
    on a thread of their own when the store has helper threads and :data:`AHEAD_ROWS` rows:
    they run beside the salience and lexical relays, which do not need them, and the scorer
    takes them before its pool. Otherwise the slots are computed now."""
    assert plan.dense is not None
    k = min(plan.depth, max(plan.n_allowed, 1))
    thread = ahead and plan.native and helpers() > 0 and len(index) >= AHEAD_ROWS
    top = index.topk_ahead(plan.dense, k, allowed=plan.gate, thread=thread)
    return top.then(lambda scored: scored[1])


def dense_score(
    index: DenseIndex, dq: DenseQueries, pool: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """float64 (m, W) exact scores of pool members (padding: -inf)."""
    slots = torch.where(valid, pool, torch.full_like(pool, -1))
    scores: torch.Tensor = index.score(dq, slots)
    return scores.to(torch.float64)
