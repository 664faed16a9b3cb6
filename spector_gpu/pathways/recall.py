"""RecallPathway: relays → hard gates → fusion → hydration → onRecall (DESIGN §5 Recall).

1. Gates become one ``allowed`` mask that every relay applies before its own top-k.
2. Relays propose candidates: lexical (BM25), dense (INT8 similarity), salience (importance ×
   retrieval strength from header/strength columns alone). The pool is their union plus the
   association neighbours of its members; no relay truncates another before fusion.
3. Every pool member is scored exactly by every active relay, normalised over the pool and
   fused (see :mod:`.fusion`). Association spreads the fused lexical+dense base to temporal
   neighbours (same session, within ``association.temporal_window``), tag neighbours and
   lineage (fact ↔ parent turns): ``A_i = max_j w_ij·base_j``, ``hops`` times with ``decay``.
4. The top ``k`` by fused score (ties: lower ordinal) are hydrated from the store their
   ``Location.type`` names — lazily for batches.
5. In ``learn`` mode the returned memories get the onRecall strength update.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cortex.cortex import Cortex
from ..cortex.strength import decayed
from ..errors import ValidationError
from ..kernels.dense_scan import SCAN_MAX_ELEMENTS
from ..provenance.record import RecordProvenance
from ..storage.tsid import encode_tsid, encode_tsids
from ..types import (
    CognitiveResult,
    Explanation,
    MemoryType,
    RecallBatch,
    RecallOptions,
    RelayExplanation,
    Role,
    Source,
)
from .fusion import COEFFICIENT_MAX, cognitive_factor, minmax, ranks, rrf
from .gates import active_gates, gate_key, gate_mask

__all__ = ["RecallPathway"]

_MAX_QUERY_CHARS = 100_000
_LEXICAL_CHUNK = 128  # queries per sparse BM25 product (bounds its memory)


def _top_positive(slots: np.ndarray, scores: np.ndarray, depth: int) -> np.ndarray:
    """The ``depth`` best slots with a positive score (ties: lower slot)."""
    keep = scores > 0
    slots, scores = slots[keep], scores[keep]
    if len(scores) > depth:
        cut = np.partition(scores, len(scores) - depth)[len(scores) - depth]
        keep = scores >= cut
        slots, scores = slots[keep], scores[keep]
    return slots[np.lexsort((slots, -scores))[:depth]]


def _lookup(row: tuple[np.ndarray, np.ndarray], pool: np.ndarray) -> np.ndarray:
    """Scores of ``pool`` members in a (slots, scores) row; 0 where BM25 did not match."""
    slots, scores = row
    if not len(slots) or not len(pool):
        return np.zeros(len(pool), dtype=np.float64)
    if len(slots) <= 4 * len(pool):
        order = np.argsort(slots, kind="stable")
        slots, scores = slots[order], scores[order]
        pos = np.minimum(np.searchsorted(slots, pool), len(slots) - 1)
        return np.where(slots[pos] == pool, scores[pos], 0.0)
    dense = np.zeros(int(max(slots.max(), pool.max())) + 1, dtype=np.float64)
    dense[slots] = scores
    return dense[pool]


@dataclass
class _Scored:
    ordinals: np.ndarray  # int64 (k,)
    fused: np.ndarray  # float32 (k,)
    explain: list[Explanation] | None


class RecallPathway:
    def __init__(self, cortex: Cortex, strength_writer: Any) -> None:
        self.cortex = cortex
        self.strength_writer = strength_writer
        self._gate_cache: tuple[Any, np.ndarray] | None = None
        self._sal_cache: tuple[Any, np.ndarray] | None = None

    # ---- public ----------------------------------------------------------------------
    def recall(self, query: str, options: RecallOptions | None = None) -> list[CognitiveResult]:
        return self.recall_batch([query], options).results(0)

    def recall_batch(
        self, queries: Sequence[str], options: RecallOptions | None = None
    ) -> RecallBatch:
        opts = options if options is not None else self.default_options()
        if not isinstance(opts, RecallOptions):
            raise ValidationError(f"options must be a RecallOptions, got {type(opts).__name__}")
        if isinstance(queries, str) or not isinstance(queries, Sequence):
            raise ValidationError("recall_batch takes a list of query strings")
        for i, q in enumerate(queries):
            if not isinstance(q, str):
                raise ValidationError(f"queries[{i}] must be a string, got {type(q).__name__}")
            if len(q) > _MAX_QUERY_CHARS:
                raise ValidationError(f"queries[{i}] is longer than {_MAX_QUERY_CHARS} characters")
        c = self.cortex
        c.part.check_usable()
        if c.read_only:
            c.refresh()
        n_q, k = len(queries), opts.k
        ids = np.full((n_q, k), "", dtype="<U13")
        scores = np.full((n_q, k), -np.inf, dtype=np.float32)
        counts = np.zeros(n_q, dtype=np.int32)
        scored: list[_Scored] = []
        if n_q and c.n:
            scored = self._score(list(queries), opts)
            for i, s in enumerate(scored):
                m = len(s.ordinals)
                counts[i] = m
                scores[i, :m] = s.fused
                ids[i, :m] = encode_tsids(c.cols.ids[s.ordinals])
            if opts.mode == "learn":
                hit: np.ndarray = np.unique(np.concatenate([s.ordinals for s in scored]))
                if len(hit):
                    self.strength_writer.on_recall(hit.astype(np.int64))
        else:
            scored = [
                _Scored(np.zeros(0, np.int64), np.zeros(0, np.float32), None) for _ in queries
            ]
        hydrate = self._hydrator(scored)
        return RecallBatch(ids=ids, scores=scores, counts=counts, _hydrate=hydrate)

    def default_options(self) -> RecallOptions:
        r = self.cortex.config.recall
        return RecallOptions(k=r.k, fusion=r.fusion)  # type: ignore[arg-type]

    # ---- scoring ---------------------------------------------------------------------
    def _weights(self, opts: RecallOptions) -> dict[str, float]:
        r = self.cortex.config.recall
        emb_w = float(getattr(self.cortex.embedder, "fusion_weight", 1.0))
        w = {
            "lexical": r.lexical_weight,
            "dense": r.dense_weight * emb_w,
            "association": r.association_weight,
            "salience": r.salience_weight,
        }
        if opts.weights:
            w.update({name: float(v) for name, v in opts.weights.items()})
        # weights are relative; clipping keeps sums of weighted [0, 1] scores finite
        return {name: (min(w[name], COEFFICIENT_MAX) if name in opts.relays else 0.0) for name in w}

    def _score(self, queries: list[str], opts: RecallOptions) -> list[_Scored]:
        c = self.cortex
        cfg = c.config
        now = int(time.time() * 1000)
        allowed = self._gates(opts)
        n_allowed = int(allowed.sum())
        relays = set(opts.relays)
        weights = self._weights(opts)
        depth = max(cfg.recall.candidates, opts.k)
        tokens = c.analyzer.tokens_batch(queries)
        need_dense = "dense" in relays
        qvec = np.asarray(c.embedder.embed(queries), dtype=np.float32) if need_dense else None
        # one sparse BM25 product per batch gives both the lexical top list and the exact
        # lexical score of every pool member (no second pass over the postings)
        lex_rows = (
            self._lexical_rows(tokens, allowed) if "lexical" in relays and n_allowed else None
        )
        lex_slots = (
            [_top_positive(ix, sc, depth) for ix, sc in lex_rows] if lex_rows is not None else None
        )
        # A few queries on the CPU: one scan gives both the dense top list and, below, the
        # exact dense score of every pool member (identical to search + score_slots)
        scan = (
            c.dense.scan(qvec)
            if qvec is not None
            and n_allowed
            and c.dense.backend == "torch"
            and c.dense.device.type == "cpu"
            and len(queries) * len(c.dense) <= SCAN_MAX_ELEMENTS
            else None
        )
        den_slots = None
        if need_dense and n_allowed:
            den_k = min(depth, max(n_allowed, 1))
            den_slots = (
                scan.search(den_k, allowed=allowed)[1]
                if scan is not None
                else c.dense.search(qvec, den_k, allowed=allowed)[1]
            )
        sal_all = (
            self._salience(now) if "salience" in relays or opts.fusion == "cognitive" else None
        )
        sal_top = np.zeros(0, dtype=np.int64)
        if "salience" in relays and n_allowed and sal_all is not None:
            # salience proposes only k candidates: it ranks by importance x strength, not by
            # relevance, so a deep salience list would crowd the pool with unrelated memories
            masked = np.where(allowed, sal_all, -np.inf)
            top = min(opts.k, n_allowed)
            part = np.argpartition(-masked, top - 1)[:top]
            sal_top = part[np.isfinite(masked[part])]
        pools = []
        for i in range(len(queries)):
            parts = [sal_top]
            if lex_slots is not None:
                parts.append(lex_slots[i][lex_slots[i] >= 0])
            if den_slots is not None:
                parts.append(den_slots[i][den_slots[i] >= 0])
            pool = np.unique(np.concatenate(parts).astype(np.int64))
            if "association" in relays and pool.size:
                pool = self._expand(pool, allowed)
            pools.append(pool)
        width = max((len(p) for p in pools), default=0)
        if width == 0:
            return [
                _Scored(
                    np.zeros(0, np.int64), np.zeros(0, np.float32), [] if opts.explain else None
                )
                for _ in queries
            ]
        padded = np.full((len(queries), width), -1, dtype=np.int64)
        for i, p in enumerate(pools):
            padded[i, : len(p)] = p
        den = (
            scan.score_slots(padded)
            if scan is not None
            else c.dense.score_slots(qvec, padded)
            if qvec is not None
            else None
        )
        out = []
        for i, pool in enumerate(pools):
            m = len(pool)
            raw = {}
            if lex_rows is not None:
                raw["lexical"] = _lookup(lex_rows[i], pool)
            if den is not None:
                raw["dense"] = den[i, :m].astype(np.float64)
            out.append(self._fuse(pool, raw, set(tokens[i]), opts, weights, sal_all, now))
        return out

    def _lexical_rows(
        self, tokens: list[list[str]], allowed: np.ndarray
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query, the slots BM25 scored and their scores (gates applied; unordered)."""
        rows = []
        for lo in range(0, len(tokens), _LEXICAL_CHUNK):
            m = self.cortex.bm25.score_batch(tokens[lo : lo + _LEXICAL_CHUNK], allowed=allowed)
            for i in range(m.shape[0]):
                a, b = m.indptr[i], m.indptr[i + 1]
                rows.append((m.indices[a:b].astype(np.int64), m.data[a:b].astype(np.float64)))
        return rows

    def _gates(self, opts: RecallOptions) -> np.ndarray:
        """The gate mask, cached until the store changes (writes bump ``cortex.version``)."""
        key = (self.cortex.version, self.cortex.n, gate_key(opts))
        if self._gate_cache is None or self._gate_cache[0] != key:
            self._gate_cache = (key, gate_mask(self.cortex, opts))
        return self._gate_cache[1]

    def _salience(self, now: int) -> np.ndarray:
        """importance/10 × current D for every memory (header + strength columns only);
        cached for a second of wall time or until the store changes."""
        c = self.cortex
        key = (c.version, c.n, now // 1000)
        if self._sal_cache is not None and self._sal_cache[0] == key:
            return self._sal_cache[1]
        h = c.cols.headers[: c.n]
        d = self._current_d(np.arange(c.n), now)
        sal = (h["importance"].astype(np.float64) / 10.0) * d
        self._sal_cache = (key, sal)
        return sal

    def _current_d(self, ordinals: np.ndarray, now: int) -> np.ndarray:
        c = self.cortex
        rows = np.zeros(
            len(ordinals), dtype=[("last_recall_ms", "<i8"), ("retrieval_strength", "<f4")]
        )
        rows["last_recall_ms"] = c.cols.last_event_ms[ordinals]
        rows["retrieval_strength"] = c.cols.d_event[ordinals]
        h = c.cols.headers[ordinals]
        return decayed(rows, now, h["flags"], h["arousal"], c.config.strength).astype(np.float64)

    def _expand(self, pool: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        links = self.cortex.links
        window = self.cortex.config.association.temporal_window
        _, nbr = links.temporal_neighbours(pool, window)
        _, extra, _ = links.extra_neighbours(pool)
        more = np.concatenate([nbr, extra]).astype(np.int64)
        more = more[allowed[more]] if more.size else more
        return np.unique(np.concatenate([pool, more]))

    def _association(self, pool: np.ndarray, base: np.ndarray) -> np.ndarray:
        c = self.cortex
        cfg = c.config.association
        act = np.zeros(len(pool), dtype=np.float64)
        src = base.copy()
        src_i, dst = c.links.temporal_neighbours(pool, cfg.temporal_window)
        w = np.full(len(dst), cfg.temporal_weight)
        e_i, e_dst, e_w = c.links.extra_neighbours(pool)
        src_i = np.concatenate([src_i, e_i])
        dst = np.concatenate([dst, e_dst])
        w = np.concatenate([w, e_w.astype(np.float64)])
        pos = np.searchsorted(pool, dst)
        pos = np.minimum(pos, len(pool) - 1)
        ok = pool[pos] == dst
        src_i, pos, w = src_i[ok], pos[ok], w[ok]
        for hop in range(max(cfg.hops, 1)):
            step = np.zeros(len(pool), dtype=np.float64)
            np.maximum.at(step, src_i, w * src[pos] * (cfg.decay**hop))
            act = np.maximum(act, step)
            src = step
        return act

    def _fuse(
        self,
        pool: np.ndarray,
        raw: dict[str, np.ndarray],
        qtokens: set[str],
        opts: RecallOptions,
        weights: dict[str, float],
        sal_all: np.ndarray | None,
        now: int,
    ) -> _Scored:
        c = self.cortex
        cfg = c.config.recall
        relays = set(opts.relays)
        norm = {name: minmax(np.where(np.isfinite(v), v, np.nan)) for name, v in raw.items()}
        base = np.zeros(len(pool), dtype=np.float64)
        for name in ("lexical", "dense"):
            if name in norm:
                base += weights[name] * norm[name]
        if "association" in relays:
            raw["association"] = self._association(pool, base)
            norm["association"] = raw["association"]
        if "salience" in relays and sal_all is not None:
            raw["salience"] = sal_all[pool]
            norm["salience"] = minmax(raw["salience"])
        h = c.cols.headers[pool]
        d = self._current_d(pool, now)
        s = c.cols.storage[pool].astype(np.float64)
        relevance = base.copy()
        if "association" in norm:
            relevance += weights["association"] * norm["association"]
        if "salience" in norm:
            relevance += weights["salience"] * norm["salience"]
        factor = np.ones(len(pool), dtype=np.float32)
        need_ranks = opts.fusion == "rrf" or opts.explain
        rank_lists = (
            {name: ranks(v, pool, positive_only=True) for name, v in raw.items()}
            if need_ranks
            else {}
        )
        if opts.fusion == "rrf":
            fused = rrf(rank_lists, weights, cfg.rrf_k).astype(np.float64)
        else:
            fused = relevance
            if opts.fusion == "cognitive":
                base_f = cognitive_factor(
                    h["importance"].astype(np.float64),
                    d,
                    s,
                    np.zeros(len(pool)),
                    cfg.cognitive_beta,
                    0.0,
                )
                partial = relevance * base_f
                overlap = np.zeros(len(pool))
                tau = min(max(cfg.tag_tau, 0.0), COEFFICIENT_MAX)  # as cognitive_factor clips it
                if tau > 0 and qtokens:
                    # only members that the tag bonus could lift into the top k need the check
                    kth = np.partition(partial, len(partial) - min(opts.k, len(partial)))[
                        len(partial) - min(opts.k, len(partial))
                    ]
                    cues = c.cues.cue_tokens
                    for j in np.flatnonzero(partial * (1.0 + tau) >= kth).tolist():
                        if cues[int(pool[j])] & qtokens:
                            overlap[j] = 1.0
                factor = (base_f * (1.0 + tau * overlap)).astype(np.float32)
                fused = relevance * factor
        order = np.lexsort((pool, -fused))[: opts.k]
        ordinals = pool[order]
        explain = None
        if opts.explain:
            gates = active_gates(opts)
            explain = []
            for j in order.tolist():
                rel: dict[str, RelayExplanation] = {
                    name: RelayExplanation(
                        score=float(raw[name][j])
                        if name in raw and np.isfinite(raw[name][j])
                        else None,
                        rank=int(rank_lists[name][j]) or None if name in rank_lists else None,
                        weight=weights[name],
                    )
                    for name in opts.relays
                }
                explain.append(
                    Explanation(
                        relays=rel,
                        relevance=float(relevance[j]),
                        cognitive_factor=float(factor[j]),
                        fused=float(fused[j]),
                        retrieval_strength=float(d[j]),
                        storage_strength=float(s[j]),
                        gates=gates,
                    )
                )
        return _Scored(ordinals.astype(np.int64), fused[order].astype(np.float32), explain)

    # ---- hydration -------------------------------------------------------------------
    def _hydrator(self, scored: list[_Scored]):  # type: ignore[no-untyped-def]
        now = int(time.time() * 1000)

        def hydrate(i: int) -> list[CognitiveResult]:
            s = scored[i]
            out = []
            d = self._current_d(s.ordinals, now) if len(s.ordinals) else np.zeros(0)
            for j, o in enumerate(s.ordinals.tolist()):
                out.append(
                    self.result(
                        o,
                        float(s.fused[j]),
                        float(d[j]),
                        s.explain[j] if s.explain is not None else None,
                    )
                )
            return out

        return hydrate

    def result(
        self, o: int, score: float, d: float, explain: Explanation | None = None
    ) -> CognitiveResult:
        """Hydrate ordinal ``o`` by its ``Location.type`` into a typed result."""
        c = self.cortex
        p = c.payload(o)
        h = c.cols.headers[o]
        from ..cortex.layouts import FLAG_CONSOLIDATED

        mtype = MemoryType(int(c.cols.index["type"][o]))
        return CognitiveResult(
            id=encode_tsid(int(c.cols.ids[o])),
            text=p.text,
            score=score,
            memory_type=mtype,
            importance=float(h["importance"]),
            provenance=RecordProvenance(int(h["provenance"]))
            if int(h["provenance"]) <= 4
            else RecordProvenance.UNKNOWN,
            retrieval_strength=d,
            storage_strength=float(c.cols.storage[o]),
            timestamp_ms=int(h["timestamp_ms"]),
            session_id=p.session_id,
            role=Role(p.role) if p.role is not None and p.role <= 5 else None,
            speaker=p.speaker,
            tags=p.tags,
            external_id=p.external_id,
            source=Source(int(h["source"])) if int(h["source"]) <= 3 else Source.EXPERIENCED,
            valence=int(h["valence"]),
            arousal=int(h["arousal"]),
            citations=p.citations,
            source_uri=p.source_uri,
            source_span=p.source_span,
            skill_name=p.skill_name,
            steps=p.steps,
            consolidated=bool(int(h["flags"]) & FLAG_CONSOLIDATED),
            breakdown=explain,
        )
