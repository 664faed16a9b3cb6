"""The session relay: each listed conversation turn lifted by its session's best dense match.

A session about the question's topic is evidence for each of its turns, even the one whose own
words are weak: "accessories for my photography setup" meets a session about a camera's bag,
lens and flash, whose turns each name one of them. The fusion sees each turn alone (its
association spreads to the two turns on either side); this relay sees the session. Over the
fused top list of each query (the list the token relay re-scores, ``max(k, [recall]
token_depth)`` members, so every gate of the recall already holds for it)::

    session(m) = max { dense(q, u) : u listed, u in m's session }

with ``dense`` the dense relay's exact score (the INT8 cosine of the stored vectors); a turn is
a memory with a per-session sequence (an episode) in a session other than 0, and every other
memory (session 0: none given; facts, skills) is a session of its own, its own dense score.
The list is then ordered by ``minmax(fused) + w · minmax(session)`` (``w`` = the relay's
weight, ``[recall] session_weight`` × the embedder's ``fusion_weight``, as the dense relay's;
a constant column normalises to 0), ties to the lower ordinal, before the token relay
re-scores it; D, S, absolute relevance and the explanations travel with their members.

It needs the dense relay (no dense scores, no lift) and proposes nothing. Measured on the
development splits (``docs/retrieval.md``, step 8 of the recipe and its sweep).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ...cortex.cortex import Cortex
from ...kernels.native import native
from ...types import RelayExplanation
from .relays import RecallPlan
from .scorer import Scored

__all__ = ["lift_rows", "lift_sessions", "session_scores"]


def session_scores(
    dense: np.ndarray, session: np.ndarray, turn: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """float64 (n, W): each listed member's session maximum of ``dense`` within its row.

    ``dense`` float64 (n, W) the members' dense scores, ``session`` int64 (n, W) their
    sessions, ``turn`` bool (n, W) whether each is a turn of its session (any other member is
    a session of its own: its own score), ``counts`` (n,) members per row; padding past a
    row's count is 0. One sort for the batch: the turns by row, then session."""
    listed = np.arange(dense.shape[1])[None, :] < np.asarray(counts)[:, None]
    out = np.where(listed, dense, 0.0)
    rows, cols = np.nonzero(listed & turn)
    if len(rows):
        by = np.lexsort((session[rows, cols], rows))
        rows, cols = rows[by], cols[by]
        s = session[rows, cols]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (s[1:] != s[:-1])
        best = np.maximum.reduceat(dense[rows, cols], np.flatnonzero(first))
        out[rows, cols] = best[np.cumsum(first) - 1]
    return out


def _spread(x: np.ndarray, listed: np.ndarray) -> np.ndarray:
    """Each row's listed values min-max normalised (float64; a constant row is 0)."""
    lo = np.where(listed, x, np.inf).min(axis=1, keepdims=True)
    hi = np.where(listed, x, -np.inf).max(axis=1, keepdims=True)
    width = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(listed & (width > 0), (x - lo) / np.where(width > 0, width, 1.0), 0.0)


def lift_sessions(scored: Scored, plan: RecallPlan, cortex: Cortex) -> Scored:
    """``scored`` re-ordered by the session relay (module docstring); unchanged when it is
    off (weight 0, or no dense relay). On the CPU code path one native pass per row
    (``session_lift_rows``: the same bits as the numpy steps, :func:`lift_rows`)."""
    weight = plan.weights.get("session", 0.0)
    if weight <= 0 or plan.dense is None or not scored.counts.any():
        return scored
    ordinals = scored.ordinals
    listed = ordinals >= 0
    at = np.where(listed, ordinals, 0)
    slots = torch.from_numpy(np.where(listed, ordinals, -1)).to(cortex.dense.device)
    dense = cortex.dense.score(plan.dense, slots).cpu().numpy().astype(np.float64)
    dense = np.where(np.isfinite(dense), dense, 0.0)
    session, sequence = cortex.cues.session[at], cortex.cues.sequence[at]
    turn = (sequence >= 0) & (session != 0)
    got = _native_rows(scored, dense, session, turn, weight) if plan.native else None
    order, fused, lift = got if got is not None else lift_rows(scored, dense, session, turn, weight)
    return _reordered(scored, order, fused, lift, weight)


def lift_rows(
    scored: Scored, dense: np.ndarray, session: np.ndarray, turn: np.ndarray, weight: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order (positions into each row), the lifted scores float32 in that order and the
    lift float64 in the input order, by numpy steps (the twin of ``session_lift_rows``)."""
    ordinals = scored.ordinals
    listed = ordinals >= 0
    lift = session_scores(dense, session, turn, scored.counts)
    score = _spread(scored.fused.astype(np.float64), listed) + weight * _spread(lift, listed)
    score = np.where(listed, score, -np.inf)  # padding stays last
    # per row: score descending, ties to the lower ordinal (stable sorts along the rows:
    # by ordinal, then by score; padding, at -inf and the largest key, stays last)
    pre = np.argsort(np.where(listed, ordinals, np.iinfo(np.int64).max), axis=1, kind="stable")
    by = np.argsort(-np.take_along_axis(score, pre, 1), axis=1, kind="stable")
    order = np.take_along_axis(pre, by, 1)
    fused = np.where(listed, np.take_along_axis(score, order, 1), scored.fused).astype(np.float32)
    return order, fused, lift


def _native_rows(
    scored: Scored, dense: np.ndarray, session: np.ndarray, turn: np.ndarray, weight: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`lift_rows` by the native pass, or None where it declines or is not built."""
    if native is None:
        return None
    shape = scored.ordinals.shape
    order = np.empty(shape, dtype=np.int64)
    fused = np.empty(shape, dtype=np.float32)
    lift = np.empty(shape, dtype=np.float64)
    done = native.session_lift_rows(
        np.ascontiguousarray(scored.fused, dtype=np.float32),
        np.ascontiguousarray(scored.counts, dtype=np.int32),
        np.ascontiguousarray(scored.ordinals, dtype=np.int64),
        np.ascontiguousarray(dense),
        np.ascontiguousarray(session, dtype=np.int64),
        np.ascontiguousarray(turn),
        float(weight),
        order,
        fused,
        lift,
    )
    return (order, fused, lift) if done else None


def _reordered(
    scored: Scored, order: np.ndarray, fused: np.ndarray, lift: np.ndarray, weight: float
) -> Scored:
    take = np.take_along_axis
    explain = None
    if scored.explain is not None:
        explain = []
        for row, by, s in zip(scored.explain, order, lift, strict=True):
            items = []
            for j in by[: len(row)].tolist():
                relays = dict(row[j].relays)
                relays["session"] = RelayExplanation(float(s[j]), None, weight)
                items.append(dataclasses.replace(row[j], relays=relays))
            explain.append(items)
    return Scored(
        take(scored.ordinals, order, 1),
        fused,
        scored.counts,
        take(scored.d, order, 1),
        take(scored.s, order, 1),
        explain,
        None if scored.relevance is None else take(scored.relevance, order, 1),
    )
