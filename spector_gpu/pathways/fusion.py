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

__all__ = ["COEFFICIENT_MAX", "cognitive_factor", "minmax", "ranks", "rrf"]


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


#: Largest ``beta`` / ``tau`` the arithmetic uses (the config refuses larger ones; a Config
#: built directly is clipped here) and the largest ``S^0.3`` term: with I/10 and D in [0, 1]
#: the factor stays below 1e6 · 1e6 · 1e6 ≈ 1e18, finite in float32 — never inf or NaN.
COEFFICIENT_MAX = 1e6
_S_TERM_MAX = 1e6


def cognitive_factor(
    importance: np.ndarray,
    d: np.ndarray,
    s: np.ndarray,
    overlap: np.ndarray,
    beta: float,
    tau: float,
) -> np.ndarray:
    """MF-001 factor ``(1 + beta·I/10·D·S^0.3)·(1 + tau·overlap)``, float32 (n,).

    Computed so that it cannot overflow: I/10, D and overlap are clipped to [0, 1] (values the
    write path produces; damaged ones are quarantined before recall), ``S^0.3``, ``beta`` and
    ``tau`` to at most 1e6."""
    b = min(max(float(beta), 0.0), COEFFICIENT_MAX)
    t = min(max(float(tau), 0.0), COEFFICIENT_MAX)
    imp = np.clip(np.asarray(importance, dtype=np.float64), 0.0, 10.0)
    s_term = np.minimum(
        np.power(np.clip(np.asarray(s, dtype=np.float64), 0.0, None), 0.3), _S_TERM_MAX
    )
    f = 1.0 + b * imp / 10.0 * np.clip(d, 0.0, 1.0) * s_term  # the unclipped formula's order
    return (f * (1.0 + t * np.clip(overlap, 0.0, 1.0))).astype(np.float32)
