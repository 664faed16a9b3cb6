"""numpy twins of :class:`~.dense.DenseIndex` searches: exact and slow, for tests.

They compute the similarity the :mod:`.dense` docstring defines with float64 integer dots
(exact: ``|dot| < 2**53``), one float32 multiply by the corpus scale (the ranking key) and one
by the query scale (the score), so every backend can be checked bit for bit against them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .quant import quantize_int8
from .topk import topk_stable

__all__ = ["rescale", "score_slots_reference", "search_reference"]

_NEG_INF = float("-inf")


def _exact_dot_keys(codes: np.ndarray, cscale: np.ndarray, xq: np.ndarray) -> np.ndarray:
    dot = xq.astype(np.float64) @ codes.astype(np.float64).T  # exact: |dot| < 2**53
    return dot.astype(np.float32) * cscale[None, :].astype(np.float32)


def rescale(keys: np.ndarray, qscale: np.ndarray) -> np.ndarray:
    """Scores from keys: float32 (n, m) ``keys * qscale[:, None]``, ``-inf`` kept as ``-inf``."""
    out = np.full(keys.shape, _NEG_INF, dtype=np.float32)
    qs = np.broadcast_to(qscale.astype(np.float32)[:, None], keys.shape)
    np.multiply(keys, qs, out=out, where=~np.isneginf(keys))  # -inf * 0 would be NaN
    return out


def search_reference(
    corpus_q: npt.ArrayLike,
    scale: npt.ArrayLike,
    queries: npt.ArrayLike,
    k: int,
    allowed: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """numpy twin of :meth:`DenseIndex.search` (exact, slow; for tests).

    Args:
        corpus_q: int8 (N, d) codes; scale: float32 (N,); queries: float32 (n, d);
        k: results per query; allowed: optional bool (N,) gate.

    Returns:
        float32 (n, k) scores and int64 (n, k) slots, as :meth:`DenseIndex.search` defines them.
    """
    codes = np.asarray(corpus_q, dtype=np.int8)
    xq, qs = quantize_int8(queries)
    keys = _exact_dot_keys(codes, np.asarray(scale, np.float32), xq)
    if allowed is not None:
        keys[:, ~np.asarray(allowed, dtype=bool)] = _NEG_INF
    vals, slots = topk_stable(keys, k)
    return rescale(vals, qs), slots


def score_slots_reference(
    corpus_q: npt.ArrayLike, scale: npt.ArrayLike, queries: npt.ArrayLike, slots: npt.ArrayLike
) -> np.ndarray:
    """numpy twin of :meth:`DenseIndex.score_slots`: float32 (n, c), ``-inf`` where slot = -1."""
    codes = np.asarray(corpus_q, dtype=np.int8)
    xq, qs = quantize_int8(queries)
    keys = _exact_dot_keys(codes, np.asarray(scale, np.float32), xq)
    sl = np.asarray(slots, dtype=np.int64)
    out = np.take_along_axis(keys, np.maximum(sl, 0), axis=1)
    return rescale(np.where(sl < 0, np.float32(_NEG_INF), out), qs)
