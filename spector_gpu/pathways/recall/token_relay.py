"""The token relay: late interaction over static token vectors, re-scoring the fused top list.

The other relays rank by word overlap (BM25), one vector per text (dense), neighbours
(association) and strength (salience). None of them can tell the turn that *states* the fact
from its siblings on the same topic: a mean of token vectors blurs the words that differ, and
BM25 needs the very words. The token relay scores each of the fused top ``[recall]
token_depth`` results by MaxSim (as ColBERT does, here over the packaged static vectors,
:mod:`spector_gpu.cortex.token_rows`)::

    token(q, m) = Σ_t w_t · max_u cos(t, u) / Σ_t w_t

over the query's distinct meaningful tokens ``t`` (``w_t`` the token's SIF weight: rare tokens
count more) and the memory's tokens ``u``; a memory without tokens scores 0. The list is then
ordered by ``minmax(fused) + w · minmax(token)`` over its members (``w`` = the relay's weight,
``[recall] token_weight`` = 1.0; a constant column normalises to 0), ties to the lower ordinal,
and cut to ``k``; that sum is each result's ``score``. D, S, absolute relevance and the
explanations travel with their members.

It runs on the host after the batch's scores are there (on a GPU too: the list is
``token_depth`` members per query, a few hundred microseconds of numpy). Measured on the
development splits (``docs/retrieval.md``): LongMemEval_S session nDCG@10 0.730 → 0.784
with LoCoMo recall@10 unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ...cortex.token_rows import TokenVocab
from ...types import Explanation, RelayExplanation
from .relays import RecallPlan
from .scorer import Scored

__all__ = ["maxsim", "query_tokens", "rescore"]


def query_tokens(queries: Sequence[str], vocab: TokenVocab) -> tuple[np.ndarray, ...]:
    """Each query's distinct meaningful token ids (int32 ascending)."""
    return tuple(vocab.ids(q) for q in queries)


def maxsim(
    query: np.ndarray, members: np.ndarray, rows: tuple[np.ndarray, np.ndarray], vocab: TokenVocab
) -> np.ndarray:
    """float64 (len(members),): the token score of each member ordinal for one query's token
    ids (module docstring); 0 for a member without tokens or a query without any."""
    offsets, ids = rows
    out = np.zeros(len(members), dtype=np.float64)
    if len(query) == 0 or len(members) == 0:
        return out
    starts, ends = offsets[members], offsets[members + 1]
    lengths = ends - starts
    full = np.flatnonzero(lengths)
    if len(full) == 0:
        return out
    lengths, starts = lengths[full], starts[full]
    total = int(lengths.sum())
    first = np.cumsum(lengths) - lengths  # each member's first column
    at = np.arange(total, dtype=np.int64) + np.repeat(starts - first, lengths)
    # each distinct token's cosines once: a token shared by members gives them the same bits
    distinct, where = np.unique(ids[at], return_inverse=True)
    sim = (vocab.unit[query] @ vocab.unit[distinct].T)[:, where]  # float32 (t, total)
    best = np.maximum.reduceat(sim, first, axis=1).astype(np.float64)  # (t, members)
    w = vocab.weight[query]
    out[full] = (w @ best) / w.sum()
    return out


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def rescore(
    scored: Scored, plan: RecallPlan, rows: tuple[np.ndarray, np.ndarray], vocab: TokenVocab
) -> Scored:
    """``scored`` (the fused top ``plan.top`` per query) re-ordered by the token relay and cut
    to ``k``; unchanged but cut when the relay is off."""
    k = plan.opts.k
    if plan.token_depth == 0:
        return _cut(scored, k)
    weight = plan.weights["token"]
    order = np.tile(np.arange(scored.ordinals.shape[1]), (len(scored.ordinals), 1))
    fused = scored.fused.copy()
    tokens: list[np.ndarray] = []
    for i, query in enumerate(plan.token_queries):
        c = int(scored.counts[i])
        members = scored.ordinals[i, :c]
        t = maxsim(query, members, rows, vocab)
        tokens.append(t)
        if c == 0:
            continue
        score = _minmax(scored.fused[i, :c].astype(np.float64)) + weight * _minmax(t)
        by = np.lexsort((members, -score))
        order[i, :c] = by
        fused[i, :c] = score[by].astype(np.float32)
    take = np.take_along_axis
    out = Scored(
        take(scored.ordinals, order, 1),
        fused,
        scored.counts,
        take(scored.d, order, 1),
        take(scored.s, order, 1),
        None if scored.explain is None else _explained(scored.explain, order, tokens, weight),
        None if scored.relevance is None else take(scored.relevance, order, 1),
    )
    return _cut(out, k)


def _explained(
    explain: list[list[Explanation]], order: np.ndarray, tokens: list[np.ndarray], weight: float
) -> list[list[Explanation]]:
    """Each hit's explanation, re-ordered, with the token relay's score and rank."""
    out = []
    for row, by, t in zip(explain, order, tokens, strict=True):
        rank = np.empty(len(t), dtype=np.int64)
        rank[np.lexsort((np.arange(len(t)), -t))] = np.arange(1, len(t) + 1)
        items = []
        for j in by[: len(row)].tolist():
            relays = dict(row[j].relays)
            relays["token"] = RelayExplanation(float(t[j]), int(rank[j]), weight)
            items.append(dataclasses.replace(row[j], relays=relays))
        out.append(items)
    return out


def _cut(scored: Scored, k: int) -> Scored:
    if scored.ordinals.shape[1] <= k:
        return scored
    return Scored(
        scored.ordinals[:, :k],
        scored.fused[:, :k],
        np.minimum(scored.counts, k).astype(np.int32),
        scored.d[:, :k],
        scored.s[:, :k],
        None if scored.explain is None else [row[:k] for row in scored.explain],
        None if scored.relevance is None else scored.relevance[:, :k],
    )
