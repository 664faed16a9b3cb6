"""Relevance fusion of relay scores over one query's candidate pool (DESIGN §5 step 3).

* ``weighted``: each relay's scores are min-max normalised over the pool, then summed with the
  relay weights (a normalised weighted score sum, Fox & Shaw 1994's CombSUM with weights).
  Association is an additive term computed from the fused lexical+dense base (see recall.py).
* ``rrf``: weighted reciprocal-rank fusion, ``sum_r w_r / (k + rank_r)`` with k = 60
  (Cormack, Clarke & Büttcher 2009); only memories a relay actually scored (> 0) get a rank.
* ``cognitive`` (default): ``weighted`` times the MF-001 factor
  ``(1 + beta·I/10·D·S^0.3)·(1 + tau·tag_overlap)``, where tag_overlap is 1 when one of the
  memory's cue tokens (speaker's first name, tags) occurs in the analysed query.

On LoCoMo's development split the weighted sum beats equal-weight RRF by a wide margin: a weak
relay fused by rank with equal weight drags a strong one down (see benchmarks/results).
"""

from __future__ import annotations

import numpy as np

__all__ = ["minmax", "ranks", "rrf", "cognitive_factor"]


def minmax(x: np.ndarray) -> np.ndarray:
    """Min-max normalise to [0, 1]; a constant vector maps to zeros (it carries no signal)."""
    if not x.size:
        return x.astype(np.float32)
    finite = np.isfinite(x)
    if not finite.any():
        return np.zeros_like(x, dtype=np.float32)
    lo = x[finite].min()
    hi = x[finite].max()
    if hi <= lo:
        return np.zeros_like(x, dtype=np.float32)
    out = (np.where(finite, x, lo) - lo) / (hi - lo)
    return out.astype(np.float32)


def ranks(x: np.ndarray, pool: np.ndarray, *, positive_only: bool) -> np.ndarray:
    """1-based rank of each pool entry by ``x`` descending (ties: lower ordinal first);
    0 where the relay did not score the entry (non-finite, or <= 0 when ``positive_only``)."""
    valid = np.isfinite(x) & ((x > 0) if positive_only else True)
    order = np.lexsort((pool, -np.where(valid, x, -np.inf)))
    r = np.zeros(len(x), dtype=np.int64)
    r[order] = np.arange(1, len(x) + 1)
    return np.where(valid, r, 0)


def rrf(rank_lists: dict[str, np.ndarray], weights: dict[str, float], k: int) -> np.ndarray:
    total = None
    for name, r in rank_lists.items():
        term = np.where(r > 0, weights.get(name, 0.0) / (k + np.maximum(r, 1)), 0.0)
        total = term if total is None else total + term
    return np.zeros(0) if total is None else total.astype(np.float32)


def cognitive_factor(importance: np.ndarray, d: np.ndarray, s: np.ndarray, overlap: np.ndarray,
                     beta: float, tau: float) -> np.ndarray:
    f = (1.0 + beta * importance / 10.0 * d * np.power(np.maximum(s, 0.0), 0.3))
    return (f * (1.0 + tau * overlap)).astype(np.float32)
