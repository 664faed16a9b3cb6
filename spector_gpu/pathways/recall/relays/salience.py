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
from ....kernels.decay import decay_topk, decayed_numpy, decayed_torch
from ....kernels.selection import topk_exact_torch
from ..columns import PoolColumns, RecallColumns, host_columns
from ..gates import gate_key
from . import RecallPlan

__all__ = ["SalienceCache", "pool_strength", "salience_score", "salience_top"]


class SalienceCache:
    """The last proposals of the native scan and until when they hold: the same store
    version, gate setting and k, and no memory's decay bucket changed (the scan's horizon).
    The pathway clears it when its own onRecall rewrote strength rows."""

    def __init__(self) -> None:
        self._entry: tuple[object, int, int, torch.Tensor] | None = None  # key, from, until

    def get(self, key: object, now: int) -> torch.Tensor | None:
        e = self._entry
        if e is not None and e[0] == key and e[1] <= now < e[2]:
            return e[3]
        return None

    def put(self, key: object, now: int, until: int, rows: torch.Tensor) -> None:
        self._entry = (key, now, until, rows)

    def clear(self) -> None:
        self._entry = None


def salience_top(
    cortex: Cortex, columns: RecallColumns, plan: RecallPlan, cache: SalienceCache
) -> torch.Tensor:
    """int64 (c,) the ``min(k, n_allowed)`` most salient allowed ordinals, best first (ties:
    lower ordinal)."""
    k = min(plan.opts.k, plan.n_allowed)
    if k == 0:
        return torch.zeros(0, dtype=torch.int64, device=plan.device)
    if plan.native and plan.device.type == "cpu":
        key = (plan.store, gate_key(plan.opts), k)
        hit = cache.get(key, plan.now_ms)
        if hit is not None:
            return hit
        h = host_columns(cortex)
        _, rows, until = decay_topk(
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
            horizon=True,
        )
        found = torch.from_numpy(np.ascontiguousarray(rows))
        cache.put(key, plan.now_ms, until, found)
        return found
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


def pool_strength(
    cols: PoolColumns, plan: RecallPlan, now_ms: torch.Tensor | None = None
) -> torch.Tensor:
    """float64 retrieval strength D of gathered pool members at the plan's clock, or at
    ``now_ms`` (int64 (n, 1): each row its own clock, for a stacked block of stores)."""
    now = plan.now_ms if now_ms is None else now_ms
    if isinstance(now, int) and plan.trim and cols.d_event.device.type == "cpu":
        # the numpy twin, the same bits: a third of torch's cost for a pool of 2,000
        host = decayed_numpy(
            plan.law,
            now,
            cols.d_event.numpy(),
            cols.last_ms.numpy(),
            cols.flags.numpy(),
            cols.arousal.numpy(),
        )
        return torch.from_numpy(host.astype(np.float64))
    d: torch.Tensor = decayed_torch(
        plan.law, now, cols.d_event, cols.last_ms, cols.flags, cols.arousal
    )
    return d.to(torch.float64)


def salience_score(cols: PoolColumns, d: torch.Tensor) -> torch.Tensor:
    """float64 importance/10 × D of pool members (``d`` from :func:`pool_strength`)."""
    imp = cols.importance.to(torch.float64)
    return (imp / torch.full_like(imp, 10.0)) * d
