"""The token relay: late interaction over static token vectors, re-scoring the fused top list.

The other relays rank by word overlap (BM25), one vector per text (dense), neighbours
(association) and strength (salience). None of them can tell the turn that *states* the fact
from its siblings on the same topic: a mean of token vectors blurs the words that differ, and
BM25 needs the very words. The token relay scores each of the fused top ``[recall]
token_depth`` results by MaxSim (as ColBERT does, here over the packaged static vectors,
:mod:`spector_gpu.cortex.token_rows`)::

    token(q, m) = Σ_t w_t · max_u cos(t, u) / Σ_t w_t

over the query's distinct meaningful tokens ``t`` (``w_t`` the token's SIF weight: rare tokens
count more) and the memory's tokens ``u``, the cosine taken exactly from the table's int8 rows
(:meth:`~spector_gpu.cortex.token_rows.TokenVocab.cosines`); a memory without tokens scores 0.
The list is then ordered by ``minmax(fused) + w · minmax(token)`` over its members (``w`` =
the relay's weight, ``[recall] token_weight`` = 1.0; a constant column normalises to 0), ties
to the lower ordinal, and cut to ``k``; that sum is each result's ``score``. D, S, absolute
relevance and the explanations travel with their members.

It runs on the host after the batch's scores are there (on a GPU too: the list is
``token_depth`` members per query): the compiled kernel ``token_rescore``
(``kernels/csrc/token.c``) when it is built, tens of microseconds a query on the calling
thread; else :func:`maxsim` in numpy per query, the twin the tests compare it with (the same
cosines bit for bit, the weighted sums to rounding).
Measured on the development splits (``docs/retrieval.md``): LongMemEval_S session nDCG@10
0.730 → 0.784 with LoCoMo recall@10 unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ...cortex.token_rows import TokenVocab
from ...kernels.native import native
from ...types import Explanation, RelayExplanation
from .relays import RecallPlan
from .scorer import Scored

__all__ = ["maxsim", "query_tokens", "rescore"]


def query_tokens(queries: Sequence[str], vocab: TokenVocab) -> tuple[np.ndarray, ...]:
    """Each query's distinct meaningful token ids (int32 ascending): :meth:`TokenVocab.rows`
    of the batch, cut per query."""
    if len(queries) <= 1:  # (one query: ids' set beats the batch sort; none: no split)
        return tuple(vocab.ids(q) for q in queries)
    lengths, ids = vocab.rows(queries)
    return tuple(np.split(ids, np.cumsum(lengths[:-1])))


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
    sim = vocab.cosines(query, distinct)[:, where]  # float64 (t, total)
    best = np.maximum.reduceat(sim, first, axis=1)  # (t, members)
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
    if native is not None and len(scored.counts):
        order, fused, tokens = _native_rescore(scored, plan.token_queries, rows, vocab, weight)
    else:
        order, fused, tokens = _numpy_rescore(scored, plan.token_queries, rows, vocab, weight)
    order, fused = order[:, :k], fused[:, :k]  # the cut first: fewer elements to gather
    take = np.take_along_axis
    return Scored(
        take(scored.ordinals, order, 1),
        np.ascontiguousarray(fused),
        np.minimum(scored.counts, k).astype(np.int32),
        take(scored.d, order, 1),
        take(scored.s, order, 1),
        None
        if scored.explain is None
        else _explained(scored.explain, order, tokens, scored.counts, weight),
        None if scored.relevance is None else take(scored.relevance, order, 1),
    )


def _native_rescore(
    scored: Scored,
    queries: Sequence[np.ndarray],
    rows: tuple[np.ndarray, np.ndarray],
    vocab: TokenVocab,
    weight: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order (positions into each row), the mixed scores in that order, and the token
    scores float64 (n, width) in the input order, by the compiled kernel."""
    n, width = scored.ordinals.shape
    lengths = np.fromiter((len(q) for q in queries), dtype=np.int64, count=len(queries))
    q_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=q_offsets[1:])
    q_ids = np.concatenate(queries) if int(q_offsets[-1]) else np.zeros(0, dtype=np.int32)
    order = np.empty((n, width), dtype=np.int64)
    fused = np.empty((n, width), dtype=np.float32)
    token = np.empty((n, width), dtype=np.float64)
    native.token_rescore(
        np.ascontiguousarray(scored.fused, dtype=np.float32),
        np.ascontiguousarray(scored.counts, dtype=np.int32),
        np.ascontiguousarray(scored.ordinals, dtype=np.int64),
        rows[0],
        rows[1],
        vocab.codes,
        vocab.norm,
        vocab.weight,
        q_offsets,
        q_ids.astype(np.int32, copy=False),
        float(weight),
        order,
        fused,
        token,
    )
    return order, fused, token


def _numpy_rescore(
    scored: Scored,
    queries: Sequence[np.ndarray],
    rows: tuple[np.ndarray, np.ndarray],
    vocab: TokenVocab,
    weight: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same by :func:`maxsim` per query (the twin of :func:`_native_rescore`)."""
    order = np.tile(np.arange(scored.ordinals.shape[1]), (len(scored.ordinals), 1))
    fused = scored.fused.copy()
    tokens = np.zeros(scored.ordinals.shape, dtype=np.float64)
    for i, query in enumerate(queries):
        c = int(scored.counts[i])
        members = scored.ordinals[i, :c]
        t = maxsim(query, members, rows, vocab)
        tokens[i, :c] = t
        if c == 0:
            continue
        score = _minmax(scored.fused[i, :c].astype(np.float64)) + weight * _minmax(t)
        by = np.lexsort((members, -score))
        order[i, :c] = by
        fused[i, :c] = score[by].astype(np.float32)
    return order, fused, tokens


def _explained(
    explain: list[list[Explanation]],
    order: np.ndarray,
    tokens: np.ndarray,
    counts: np.ndarray,
    weight: float,
) -> list[list[Explanation]]:
    """Each hit's explanation, re-ordered, with the token relay's score and rank."""
    out = []
    for row, by, tok, c in zip(explain, order, tokens, counts.tolist(), strict=True):
        t = tok[:c]
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
