"""The salience relay: importance/10 × retrieval strength D, from the columns alone.

D is taken at the plan's one clock (:mod:`spector_gpu.kernels.decay`). The relay proposes only
``k`` memories — it ranks by importance and recency, not by relevance, so a deep list would
crowd the pool with unrelated memories — chosen over every allowed memory by one native pass
on the CPU (nothing of size N written) or a sort of the column product on a GPU.
"""

from __future__ import annotations

import numpy as np
import torch

from ....cortex.cortex import Cortex
from ....kernels.decay import decay_topk, decayed_torch
from ....kernels.topk import topk_exact_torch
from ..columns import PoolColumns, RecallColumns, host_columns
from . import RecallPlan

__all__ = ["pool_strength", "salience_score", "salience_top"]


def salience_top(cortex: Cortex, columns: RecallColumns, plan: RecallPlan) -> torch.Tensor:
    """int64 (c,) the ``min(k, n_allowed)`` most salient allowed ordinals, best first (ties:
    lower ordinal)."""
    k = min(plan.opts.k, plan.n_allowed)
    if k == 0:
        return torch.zeros(0, dtype=torch.int64, device=plan.device)
    if plan.native and plan.device.type == "cpu":
        h = host_columns(cortex)
        _, rows = decay_topk(
            plan.law,
            plan.now_ms,
            10.0,
            h["importance"],
            h["d_event"],
            h["last_ms"],
            h["flags"],
            h["arousal"],
            plan.allowed,
            k,
        )
        return torch.from_numpy(np.ascontiguousarray(rows))
    d = decayed_torch(
        plan.law,
        plan.now_ms,
        columns.column("d_event"),
        columns.column("last_ms"),
        columns.column("flags"),
        columns.column("arousal"),
    )
    imp = columns.column("importance").to(torch.float64)
    sal = (imp / torch.full_like(imp, 10.0)) * d.to(torch.float64)
    top: torch.Tensor = topk_exact_torch(sal, k, valid=plan.allowed_t)[1]
    return top


def pool_strength(cols: PoolColumns, plan: RecallPlan) -> torch.Tensor:
    """float64 retrieval strength D of gathered pool members at the plan's clock."""
    d: torch.Tensor = decayed_torch(
        plan.law, plan.now_ms, cols.d_event, cols.last_ms, cols.flags, cols.arousal
    )
    return d.to(torch.float64)


def salience_score(cols: PoolColumns, d: torch.Tensor) -> torch.Tensor:
    """float64 importance/10 × D of pool members (``d`` from :func:`pool_strength`)."""
    imp = cols.importance.to(torch.float64)
    return (imp / torch.full_like(imp, 10.0)) * d
