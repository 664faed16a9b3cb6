"""The per-query numpy recall of the first release: the reference twin of the batched pathway.

Kept only for the tests (``test_recall_twin.py`` compares it with ``RecallPathway``): one query
at a time, numpy throughout, dict and set lookups in Python. Two things differ from the code it
was taken from, both decisions of the batched pathway: every strength value is computed at one
``now_ms`` passed in (the first release read the clock three times), and the salience relay
breaks ties by the lower ordinal (it used ``argpartition``, whose choice among equal values is
unspecified).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from spector_gpu.kernels.dense_reference import score_slots_reference, search_reference

from spector_gpu.cortex.strength import decayed
from spector_gpu.cortex.token_rows import token_vocab
from spector_gpu.pathways.recall.gates import gate_mask
from spector_gpu.pathways.recall.time_cues import DAY_MS, time_cues
from spector_gpu.types import RecallOptions

__all__ = ["Reference", "reference_recall"]

_COEFFICIENT_MAX = 1e6
_S_TERM_MAX = 1e6


@dataclass
class Reference:
    """One query's answer: ordinals, fused scores and, per result, the explanation values."""

    ordinals: np.ndarray  # int64 (c,)
    fused: np.ndarray  # float32 (c,)
    explain: list[dict[str, object]]


def minmax(x: np.ndarray) -> np.ndarray:
    if not x.size:
        return x.astype(np.float32)
    finite = np.isfinite(x)
    if not finite.any():
        return np.zeros_like(x, dtype=np.float32)
    lo, hi = x[finite].min(), x[finite].max()
    if hi <= lo:
        return np.zeros_like(x, dtype=np.float32)
    return ((np.where(finite, x, lo) - lo) / (hi - lo)).astype(np.float32)


def ranks(x: np.ndarray, pool: np.ndarray) -> np.ndarray:
    valid = np.isfinite(x) & (x > 0)
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


def cognitive_factor(
    importance: np.ndarray, d: np.ndarray, s: np.ndarray, beta: float
) -> np.ndarray:
    b = min(max(float(beta), 0.0), _COEFFICIENT_MAX)
    imp = np.clip(np.asarray(importance, dtype=np.float64), 0.0, 10.0)
    s_term = np.minimum(np.power(np.clip(s.astype(np.float64), 0.0, None), 0.3), _S_TERM_MAX)
    f = 1.0 + b * imp / 10.0 * np.clip(d, 0.0, 1.0) * s_term  # the unclipped formula's order
    return f.astype(np.float32)  # the tag term is applied by the caller


def current_d(c, ordinals: np.ndarray, now: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    rows = np.zeros(len(ordinals), dtype=[("last_recall_ms", "<i8"), ("retrieval_strength", "<f4")])
    rows["last_recall_ms"] = c.cols.last_event_ms[ordinals]
    rows["retrieval_strength"] = c.cols.d_event[ordinals]
    h = c.cols.headers[ordinals]
    return decayed(rows, now, h["flags"], h["arousal"], c.config.strength).astype(np.float64)


def weights_of(c, opts: RecallOptions) -> dict[str, float]:  # type: ignore[no-untyped-def]
    r = c.config.recall
    w = {
        "lexical": r.lexical_weight,
        "dense": r.dense_weight * float(getattr(c.embedder, "fusion_weight", 1.0)),
        "association": r.association_weight,
        "salience": r.salience_weight,
    }
    w["token"] = r.token_weight
    w["session"] = r.session_weight * float(getattr(c.embedder, "fusion_weight", 1.0))
    if opts.weights:
        w.update({name: float(v) for name, v in opts.weights.items()})
    return {n: (min(w[n], _COEFFICIENT_MAX) if n in opts.relays else 0.0) for n in w}


def _token_ids(text: str) -> list[int]:
    vocab = token_vocab()
    return sorted({t for t in vocab.tokenizer.ids(text) if vocab.weight[t] > 0})  # type: ignore[attr-defined]


def _token_score(query: list[int], words: str) -> float:
    """MaxSim of one memory, member by member in float64: Σ_t w_t max_u cos(t, u) / Σ_t w_t."""
    vocab = token_vocab()
    mine = _token_ids(words)
    if not query or not mine:
        return 0.0
    best = [max(_cosine(t, u) for u in mine) for t in query]
    w = [float(vocab.weight[t]) for t in query]
    return math.fsum(a * b for a, b in zip(w, best, strict=True)) / math.fsum(w)


@functools.cache
def _cosine(t: int, u: int) -> float:
    """cos of two tokens: their int8 rows' exact integer dot product over their lengths (one
    rounding; the same bits wherever asked)."""
    vocab = token_vocab()
    dot = sum(int(a) * int(b) for a, b in zip(vocab.codes[t], vocab.codes[u], strict=True))
    return dot / (float(vocab.norm[t]) * float(vocab.norm[u]))


def _sessions(c, ref: Reference, dense: dict[int, float], weight: float) -> Reference:  # type: ignore[no-untyped-def]
    """The session relay over one query's fused top list (session_lift.py), member by member:
    a turn (an episode of a session other than 0) lifted by the best dense score of the
    listed turns of its session, any other member by its own."""
    n = len(ref.ordinals)
    if n == 0 or weight <= 0:
        return ref
    ords = ref.ordinals.tolist()

    def key(o: int) -> tuple[int, int]:
        turn = int(c.cues.sequence[o]) >= 0 and int(c.cues.session[o]) != 0
        return (0, int(c.cues.session[o])) if turn else (1, o)

    best: dict[tuple[int, int], float] = {}
    for o in ords:
        best[key(o)] = max(best.get(key(o), -np.inf), dense[o])
    lift = np.array([best[key(o)] for o in ords])

    def spread(x: np.ndarray) -> np.ndarray:  # float64 min-max, a constant column is 0
        return (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros_like(x)

    score = spread(ref.fused.astype(np.float64)) + weight * spread(lift)
    order = np.lexsort((ref.ordinals, -score))
    explain = []
    for j in order.tolist():
        e = dict(ref.explain[j])
        e["relays"] = {**e["relays"], "session": (float(lift[j]), None, weight)}  # type: ignore[dict-item]
        explain.append(e)
    return Reference(ref.ordinals[order], score[order].astype(np.float32), explain)


def _rescore(c, query: str, ref: Reference, k: int, weight: float) -> Reference:  # type: ignore[no-untyped-def]
    """The token relay over one query's fused top list (token_relay.py), cut to k."""
    n = len(ref.ordinals)
    if n == 0:
        return ref
    q = _token_ids(query)
    token = np.zeros(n)
    for j, o in enumerate(ref.ordinals.tolist()):
        p = c.payload(o)
        words = " ".join(w for w in (p.speaker, p.text, p.skill_name or "", *p.steps) if w)
        token[j] = _token_score(q, words)

    def spread(x: np.ndarray) -> np.ndarray:  # float64 min-max, a constant column is 0
        return (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros_like(x)

    score = spread(ref.fused.astype(np.float64)) + weight * spread(token)
    order = np.lexsort((ref.ordinals, -score))[:k]
    by_token = np.lexsort((np.arange(n), -token))
    rank = np.empty(n, dtype=np.int64)
    rank[by_token] = np.arange(1, n + 1)
    explain = []
    for j in order.tolist():
        e = dict(ref.explain[j])
        e["relays"] = {**e["relays"], "token": (float(token[j]), int(rank[j]), weight)}  # type: ignore[dict-item]
        explain.append(e)
    return Reference(ref.ordinals[order], score[order].astype(np.float32), explain)


def _top_positive(slots: np.ndarray, scores: np.ndarray, depth: int) -> np.ndarray:
    keep = scores > 0
    slots, scores = slots[keep], scores[keep]
    return slots[np.lexsort((slots, -scores))[:depth]]


def _lookup(row: tuple[np.ndarray, np.ndarray], pool: np.ndarray) -> np.ndarray:
    slots, scores = row
    dense = np.zeros(int(max(slots.max(initial=0), pool.max(initial=0))) + 1, dtype=np.float64)
    dense[slots] = scores
    return dense[pool]


def _expand(c, pool: np.ndarray, allowed: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    _, nbr = c.links.temporal_neighbours(pool, c.config.association.temporal_window)
    _, extra, _ = c.links.extra_neighbours(pool)
    more = np.concatenate([nbr, extra]).astype(np.int64)
    more = more[allowed[more]] if more.size else more
    return np.unique(np.concatenate([pool, more]))


def _association(c, pool: np.ndarray, base: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    cfg = c.config.association
    src_i, dst = c.links.temporal_neighbours(pool, cfg.temporal_window)
    w = np.full(len(dst), cfg.temporal_weight)
    e_i, e_dst, e_w = c.links.extra_neighbours(pool)
    src_i = np.concatenate([src_i, e_i])
    dst = np.concatenate([dst, e_dst])
    w = np.concatenate([w, e_w.astype(np.float64)])
    pos = np.minimum(np.searchsorted(pool, dst), len(pool) - 1)
    ok = pool[pos] == dst
    src_i, pos, w = src_i[ok], pos[ok], w[ok]
    act = np.zeros(len(pool), dtype=np.float64)
    src = base.copy()
    for hop in range(max(cfg.hops, 1)):
        step = np.zeros(len(pool), dtype=np.float64)
        np.maximum.at(step, src_i, w * src[pos] * (cfg.decay**hop))
        act = np.maximum(act, step)
        src = step
    return act


def _dense_codes(c):  # type: ignore[no-untyped-def]
    n = len(c.dense)
    return c.dense._codes[:n, : c.dense.dim].numpy(), c.dense._scales[:n].numpy()


def reference_recall(c, queries: list[str], opts: RecallOptions, now: int) -> list[Reference]:  # type: ignore[no-untyped-def]
    """Answers of ``queries`` over cortex ``c`` at ``now`` (ms; ``opts.now_ms`` when given),
    one query at a time."""
    now = now if opts.now_ms is None else opts.now_ms
    cfg = c.config
    allowed = gate_mask(c, opts)
    n_allowed = int(allowed.sum())
    relays = set(opts.relays)
    weights = weights_of(c, opts)
    depth = max(cfg.recall.candidates, opts.k)
    rescored = weights["token"] > 0
    top = max(opts.k, cfg.recall.token_depth) if rescored else opts.k
    tokens = c.analyzer.tokens_batch(queries)
    qvec = np.asarray(c.embedder.embed(queries), dtype=np.float32) if "dense" in relays else None
    codes, scales = _dense_codes(c)
    sal_all = None
    if "salience" in relays:
        sal_all = (c.cols.headers["importance"][: c.n].astype(np.float64) / 10.0) * current_d(
            c, np.arange(c.n), now
        )
    sal_top = np.zeros(0, dtype=np.int64)
    if sal_all is not None and n_allowed:
        masked = np.where(allowed, sal_all, -np.inf)
        rows = np.flatnonzero(allowed)
        sal_top = rows[np.lexsort((rows, -masked[rows]))[: min(opts.k, n_allowed)]]
    out = []
    for i in range(len(queries)):
        parts = [sal_top]
        lex_row = None
        if "lexical" in relays and n_allowed:
            m = c.bm25.score_batch([tokens[i]], allowed=allowed)
            lex_row = (m.indices.astype(np.int64), m.data.astype(np.float64))
            parts.append(_top_positive(*lex_row, depth))
        if qvec is not None and n_allowed:
            den_k = min(depth, max(n_allowed, 1))
            slots = search_reference(codes, scales, qvec[i : i + 1], den_k, allowed)[1][0]
            parts.append(slots[slots >= 0])
        pool = np.unique(np.concatenate(parts).astype(np.int64))
        if "association" in relays and pool.size:
            pool = _expand(c, pool, allowed)
        raw: dict[str, np.ndarray] = {}
        if lex_row is not None:
            raw["lexical"] = _lookup(lex_row, pool) if pool.size else np.zeros(0)
        if qvec is not None:
            raw["dense"] = score_slots_reference(codes, scales, qvec[i : i + 1], pool[None, :])[
                0
            ].astype(np.float64)
        cues = time_cues(queries[i], now) if opts.time_cues else ()
        ref = _fuse(c, pool, raw, set(tokens[i]), opts, weights, sal_all, now, cues, top)
        if "dense" in raw:
            dense = dict(zip(pool.tolist(), np.nan_to_num(raw["dense"], neginf=0.0).tolist()))
            ref = _sessions(c, ref, dense, weights["session"])
        out.append(_rescore(c, queries[i], ref, opts.k, weights["token"]) if rescored else ref)
    return out


def _time_lift(c, pool: np.ndarray, fused: np.ndarray, raw, cues) -> np.ndarray:  # type: ignore[no-untyped-def]
    """weight × best fused (1 when none is above 0) × the best cue window's kernel of each
    member a relay scored above 0 (time_cues.py)."""
    weight = c.config.recall.time_cue_weight
    lift = np.zeros(len(pool), dtype=np.float64)
    if not cues or not len(pool) or weight <= 0:
        return lift
    matched = np.zeros(len(pool), dtype=bool)
    for name in ("lexical", "dense"):
        if name in raw:
            matched |= np.nan_to_num(raw[name], nan=0.0, neginf=0.0) > 0
    t = c.cols.headers["timestamp_ms"][pool].astype(np.float64)
    for cue in cues:
        width = float(max(cue.hi_ms - cue.lo_ms, DAY_MS))
        gap = np.maximum(cue.lo_ms - t, 0.0) + np.maximum(t - cue.hi_ms, 0.0)
        lift = np.maximum(lift, np.clip(1.0 - gap / width, 0.0, None))
    best = float(fused.max())
    return np.where(matched, weight * (best if best > 0 else 1.0) * lift, 0.0)


def _fuse(c, pool, raw, qtokens, opts, weights, sal_all, now, cues, top) -> Reference:  # type: ignore[no-untyped-def]
    cfg = c.config.recall
    relays = set(opts.relays)
    norm = {name: minmax(np.where(np.isfinite(v), v, np.nan)) for name, v in raw.items()}
    base = np.zeros(len(pool), dtype=np.float64)
    for name in ("lexical", "dense"):
        if name in norm:
            base += weights[name] * norm[name]
    if "association" in relays:
        raw["association"] = _association(c, pool, base) if pool.size else np.zeros(0)
        norm["association"] = raw["association"]
    if "salience" in relays and sal_all is not None:
        raw["salience"] = sal_all[pool]
        norm["salience"] = minmax(raw["salience"])
    h = c.cols.headers[pool]
    d = current_d(c, pool, now)
    s = c.cols.storage[pool].astype(np.float64)
    relevance = base.copy()
    if "association" in norm:
        relevance += weights["association"] * norm["association"]
    if "salience" in norm:
        relevance += weights["salience"] * norm["salience"]
    factor = np.ones(len(pool), dtype=np.float32)
    rank_lists = {name: ranks(v, pool) for name, v in raw.items()}
    if opts.fusion == "rrf":
        fused = rrf(rank_lists, weights, cfg.rrf_k).astype(np.float64)
    else:
        fused = relevance
        if opts.fusion == "cognitive" and len(pool):
            base_f = cognitive_factor(h["importance"], d, s, cfg.cognitive_beta)
            partial = relevance * base_f
            overlap = np.zeros(len(pool))
            tau = min(max(cfg.tag_tau, 0.0), _COEFFICIENT_MAX)
            if tau > 0 and qtokens:
                m = min(top, len(partial))
                kth = np.partition(partial, len(partial) - m)[len(partial) - m]
                for j in np.flatnonzero(partial * (1.0 + tau) >= kth).tolist():
                    if c.cues.cue_tokens[int(pool[j])] & qtokens:
                        overlap[j] = 1.0
            factor = (base_f * (1.0 + tau * overlap)).astype(np.float32)
            fused = relevance * factor
    lift = _time_lift(c, pool, fused, raw, cues)
    fused = fused + lift
    order = np.lexsort((pool, -fused))[:top]
    explain = [
        {
            "relays": {
                name: (
                    float(raw[name][j]) if name in raw and np.isfinite(raw[name][j]) else None,
                    int(rank_lists[name][j]) or None if name in rank_lists else None,
                    weights[name],
                )
                for name in opts.relays
            },
            "relevance": float(relevance[j]),
            "cognitive_factor": float(factor[j]),
            "fused": float(fused[j]),
            "retrieval_strength": float(d[j]),
            "storage_strength": float(s[j]),
            "time_cue": float(lift[j]),
        }
        for j in order.tolist()
    ]
    return Reference(pool[order].astype(np.int64), fused[order].astype(np.float32), explain)
