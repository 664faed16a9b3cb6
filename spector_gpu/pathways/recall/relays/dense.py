"""The dense relay: INT8 similarity of the query vectors (``DenseIndex``, spector_gpu.kernels).

The index chooses its kernel from the batch and the device (native fused scan for one or two
queries on the CPU, GEMM tiles with native selection for batches, Triton or block-max on a
GPU); the relay asks only for the top ``depth`` slots and for the exact score of pool members.
"""

from __future__ import annotations

import torch

from ....kernels.dense import DenseIndex
from ....kernels.quant import DenseQueries
from . import RecallPlan

__all__ = ["dense_score", "dense_top", "slice_queries"]


def slice_queries(dq: DenseQueries, lo: int, hi: int) -> DenseQueries:
    """Queries ``[lo, hi)`` of a batch (the batch itself when that is all of it, so the index
    can recognise the queries it just scanned)."""
    if lo == 0 and hi == len(dq):
        return dq
    return DenseQueries(dq.x[lo:hi], dq.xq[lo:hi], dq.qs[lo:hi], dq.qs_t[lo:hi])


def dense_top(index: DenseIndex, plan: RecallPlan) -> torch.Tensor:
    """int64 (n, min(depth, n_allowed)) best slots of every query, -1 padding."""
    assert plan.dense is not None
    k = min(plan.depth, max(plan.n_allowed, 1))
    gate = plan.gate
    slots: torch.Tensor = index.topk(plan.dense, k, allowed=gate)[1]
    return slots


def dense_score(
    index: DenseIndex, dq: DenseQueries, pool: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """float64 (m, W) exact scores of pool members (padding: -inf)."""
    slots = torch.where(valid, pool, torch.full_like(pool, -1))
    scores: torch.Tensor = index.score(dq, slots)
    return scores.to(torch.float64)
