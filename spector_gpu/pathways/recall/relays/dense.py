"""The dense relay: INT8 similarity of the query vectors (``DenseIndex``, spector_gpu.kernels).

The index chooses its kernel from the batch and the device (native fused scan for one or two
queries on the CPU, GEMM tiles with native selection for batches, Triton or block-max on a
GPU); the relay asks only for the top ``depth`` slots and for the exact score of pool members.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import torch

from ....device import single_threaded
from ....kernels.dense import DenseIndex
from ....kernels.quant import DenseQueries
from ....kernels.sharing import Ahead, helpers
from . import RecallPlan

__all__ = ["AHEAD_QUERIES", "AHEAD_ROWS", "Proposals", "dense_ahead", "dense_score", "dense_top",
           "slice_queries"]  # fmt: skip

AHEAD_QUERIES = 8
"""Batches below this size scan each query natively (``kernels/dense_cpu.py``'s rule) ..."""
AHEAD_ROWS = 20_000
"""... and from this many rows their scans go ahead on a helper thread (:func:`dense_ahead`)."""

Proposals: TypeAlias = torch.Tensor | Ahead[torch.Tensor | None] | None
"""The dense relay's proposals (``Scorer.dense_proposals``), or their work going ahead."""


def dense_ahead(
    proposals: Callable[[RecallPlan], torch.Tensor | None],
    plan: RecallPlan,
    n_rows: int,
    single: bool,
) -> Proposals:
    """``proposals(plan)`` (under :func:`single_threaded` when ``single``), offered to a
    helper thread (:class:`~spector_gpu.kernels.sharing.Ahead`) where a small CPU batch scans
    each query natively over ``n_rows`` rows — the scans then run beside the salience and
    lexical relays, which do not need them, and the scorer takes them before its pool — else
    computed now."""

    def now() -> torch.Tensor | None:
        with single_threaded(single):
            return proposals(plan)

    ahead = plan.native and "dense" in plan.relays and helpers() > 0
    if not (ahead and len(plan.tokens) < AHEAD_QUERIES and n_rows >= AHEAD_ROWS):
        return now()
    inference = torch.is_inference_mode_enabled()  # (thread-local in torch)

    def offered() -> torch.Tensor | None:
        with torch.inference_mode(inference):
            return now()

    return Ahead(offered)


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
