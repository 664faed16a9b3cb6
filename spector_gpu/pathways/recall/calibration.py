"""The one score of a recall: absolute, in [0, 1], non-increasing down the returned list
(``CognitiveResult.score``, ``RecallBatch.scores``, ``RecallOptions(min_score=…)``).

The fusion orders the hits; its value is relative to the candidate pool (min-max normalised
relays, a cognitive factor), so it means nothing across queries or stores. Each hit's absolute
relevance (:mod:`.relevance`: the noisy-or of its BM25 share of the query's ceiling and its
dense cosine) does, but it does not follow the fused order. The score joins the two::

    score[j] = min(relevance[0], …, relevance[j])      the running minimum down the list

the largest non-increasing sequence that never exceeds a hit's own relevance. So
``score >= t`` holds for a prefix of the list exactly, and every hit of that prefix has an
absolute relevance of at least ``t`` — ``min_score`` keeps that prefix. The order is the
fusion's, untouched (session lift and token re-scoring included: the score is taken last).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .scorer import Scored

__all__ = ["calibrated", "running_min"]


def running_min(relevance: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """float32 (n, k): the running minimum of each row's float relevance (n, k) over its
    first ``counts[i]`` hits, ``-inf`` at padding."""
    rel = np.clip(np.nan_to_num(relevance.astype(np.float32), nan=0.0), 0.0, 1.0)
    score = np.minimum.accumulate(rel, axis=1) if rel.size else rel
    pad = np.arange(rel.shape[1])[None, :] >= counts[:, None]
    return np.where(pad, np.float32(-np.inf), score).astype(np.float32)


def calibrated(scored: Scored, min_score: float | None) -> Scored:
    """``scored`` with its :attr:`~.scorer.Scored.score` set (the module's running minimum)
    and, with ``min_score``, every row cut after its last hit scoring at least that (a prefix,
    since the score is non-increasing): ordinals -1, scores -inf, relevance 0 past the cut."""
    rel = scored.relevance
    if rel is None:
        rel = np.zeros(scored.ordinals.shape, np.float32)
    score = running_min(rel, scored.counts)
    if min_score is None:
        return replace(scored, relevance=rel, score=score)
    counts = (score >= np.float32(min_score)).sum(axis=1).astype(np.int32)
    pad = np.arange(score.shape[1])[None, :] >= counts[:, None]
    explain = scored.explain
    if explain is not None:
        explain = [row[:c] for row, c in zip(explain, counts.tolist(), strict=True)]
    return Scored(
        np.where(pad, -1, scored.ordinals),
        np.where(pad, np.float32(-np.inf), scored.fused).astype(np.float32),
        counts,
        np.where(pad, 0.0, scored.d),
        np.where(pad, 0.0, scored.s),
        explain,
        np.where(pad, np.float32(0.0), rel).astype(np.float32),
        np.where(pad, np.float32(-np.inf), score).astype(np.float32),
    )
