"""The batched recall computation: relays → pool → fusion → top-k, as tensor work.

Query-independent and whole-batch work runs once (the salience proposals; the dense relay's
top list, one GEMM or GPU search for every query), then queries go through in chunks whose
lexical score block stays bounded: lexical block and proposals, the padded pool and its
expansion, every relay's exact score of every member, fusion, and the final top-k (a stable
sort, so ties go to the lower ordinal). Nothing is read back to the host until the chunk's
top-k is done; on the CPU the pool is trimmed to its widest row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from ...config import RecallConfig
from ...cortex.cortex import Cortex
from ...device import single_threaded
from ...kernels.ahead import Pending
from ...kernels.selection import topk_exact, topk_mask
from ...types import Explanation
from .columns import PoolColumns, RecallColumns
from .explain import explanations
from .fusion import Fused, fuse
from .pool import Pool, expand, union
from .relays import RecallPlan
from .relays import lexical as lexical_relay
from .relays.association import (
    DenseGraph,
    association_score,
    dense_graph,
    expanded_host,
    neighbours,
    spread_host,
)
from .relays.dense import Proposals, dense_score, dense_top, slice_queries
from .relays.lexical import lexical_block, lexical_members, lexical_top, selects
from .relays.salience import SalienceCache, pool_strength, salience_score, salience_top
from .relevance import absolute_relevance
from .tables import CueTable, LinkTables
from .time_cues import time_lift

__all__ = ["Scored", "Scorer", "fuse_plan"]

_CPU_BLOCK = 1 << 22  # lexical scores held per chunk on the CPU (16 MiB of float32)
_GPU_BLOCK = 1 << 28  # ... on a GPU (1 GiB)
_DENSE_LAYOUT_MIN = 2048  # stores up to this size always take the dense pool layout


@dataclass
class Scored:
    """Host results of a batch: ordinals int64 (n, k) (-1 padding), fused float32 (n, k),
    counts int32 (n,), D and S float64 (n, k), explanations per query or None, relevance, and
    the one score (set last, by :func:`.calibration.calibrated`, once the order is final)."""

    ordinals: np.ndarray
    fused: np.ndarray
    counts: np.ndarray
    d: np.ndarray
    s: np.ndarray
    explain: list[list[Explanation]] | None
    relevance: np.ndarray | None = None  # float32 (n, k) absolute relevance, 0 at padding
    score: np.ndarray | None = None  # float32 (n, k) in [0, 1], non-increasing, -inf padding


class Scorer:
    """Runs a :class:`RecallPlan` over the store's cached tables (see the module docstring)."""

    def __init__(
        self,
        cortex: Cortex,
        columns: RecallColumns,
        links: LinkTables,
        cues: CueTable,
        *,
        layout: str = "auto",
    ) -> None:
        self.layout = layout  # "auto", or "dense" / "sparse" forced (the tests run both)
        self.cortex = cortex
        self.columns = columns
        self.links = links
        self.cues = cues
        self.salience = SalienceCache()
        self._graph_at: tuple[object, DenseGraph] | None = None

    def dense_layout(self, plan: RecallPlan) -> bool:
        """Whether pools cover the whole store (:mod:`.pool`'s dense layout): a store no
        larger than the candidate lists, whose dense scores are one small GEMM."""
        cortex = self.cortex
        if cortex.dense.backend != "torch" or self.layout == "sparse":
            return False
        limit = max(2 * plan.depth + plan.top, _DENSE_LAYOUT_MIN)
        return self.layout == "dense" or cortex.n <= limit

    def dense_proposals(self, plan: RecallPlan, *, ahead: bool = False) -> Proposals:
        """The dense relay's top list of every query (one GEMM or GPU search for the batch),
        or None when the relay is off, nothing is allowed, or the dense layout scores it per
        chunk. With ``ahead``, a small CPU batch's native scans start on a thread of their own
        and come back pending (:func:`.relays.dense.dense_top`)."""
        if "dense" in plan.relays and plan.n_allowed and not self.dense_layout(plan):
            top = dense_top(self.cortex.dense, plan, ahead=ahead)
            return top if ahead else top.result()
        return None

    def dense_ahead(self, plan: RecallPlan, single: bool) -> Proposals:
        """:meth:`dense_proposals` with ``ahead`` (what is computed now runs under
        :func:`single_threaded` when ``single``)."""
        with single_threaded(single):
            return self.dense_proposals(plan, ahead=True)

    def run(self, plan: RecallPlan, den: Proposals, *, exact_rounds: bool) -> Scored:
        """Score every query of ``plan`` given its :meth:`dense_proposals` (or their work
        going ahead: settled before this returns); ``exact_rounds`` forms the lexical block by
        the device's round-based accumulation (the GPU path) instead of scipy."""
        try:
            return self._run(plan, den, exact_rounds=exact_rounds)
        finally:
            if isinstance(den, Pending):
                den.settle()

    def _run(self, plan: RecallPlan, den: Proposals, *, exact_rounds: bool) -> Scored:
        n, k = len(plan.tokens), plan.top
        sal = torch.zeros(0, dtype=torch.int64, device=plan.device)
        if "salience" in plan.relays and plan.n_allowed:
            sal = salience_top(self.cortex, self.columns, plan, self.salience)
        budget = _GPU_BLOCK if plan.device.type == "cuda" else _CPU_BLOCK
        step, ahead = max(1, budget // max(self.cortex.n, 1)), None
        if selects(plan, exact_rounds, self.dense_layout(plan)):  # chunks' selections ahead
            ahead = lexical_relay.SelectAhead(self.cortex, plan)
            step = ahead.step
        try:
            parts = [
                self._chunk(plan, lo, min(n, lo + step), sal, den, exact_rounds, ahead)
                for lo in range(0, n, step)
            ]
        finally:
            if ahead is not None:
                ahead.settle()
        if not parts:
            empty = np.zeros((0, k))
            return Scored(
                np.zeros((0, k), np.int64),
                np.zeros((0, k), np.float32),
                np.zeros(0, np.int32),
                empty,
                empty,
                [] if plan.opts.explain else None,
            )
        ordinals = np.concatenate([p[0] for p in parts])
        counts = (ordinals >= 0).sum(axis=1).astype(np.int32)
        return Scored(
            ordinals,
            np.concatenate([p[1] for p in parts]),
            counts,
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]),
            [e for p in parts for e in p[4]] if plan.opts.explain else None,
            np.concatenate([p[5] for p in parts]),
        )

    def _neighbours(self, plan: RecallPlan, pool: Pool) -> tuple[torch.Tensor, torch.Tensor]:
        return neighbours(self.links, pool, self.cortex.config.association)

    def graph(self, plan: RecallPlan) -> DenseGraph:
        """The store's :class:`DenseGraph`, built once per store version (dense layout only:
        the store is small)."""
        cfg = self.cortex.config.association
        if self._graph_at is None or self._graph_at[0] != plan.store:
            graph = dense_graph(self.links, self.cortex.n, plan.device, cfg)
            self._graph_at = (plan.store, graph)
        return self._graph_at[1]

    def _pool(
        self,
        plan: RecallPlan,
        lo: int,
        hi: int,
        sal: torch.Tensor,
        den: Proposals,
        block: torch.Tensor | None,
        lex_top: torch.Tensor | None = None,
    ) -> tuple[Pool, torch.Tensor | None]:
        """The chunk's pool, and in the dense layout the dense relay's scores of every memory
        (``lex_top``: the lexical proposals when selected without a block; ``den`` taken
        here when it went ahead, the lexical relay having run beside it)."""
        den = den.result() if isinstance(den, Pending) else den
        n, trim, m = self.cortex.n, plan.trim, hi - lo
        parts, scores = [sal.expand(m, -1)], None
        if self.dense_layout(plan):
            masks = []
            if block is not None:
                masks.append(topk_mask(block, plan.depth, valid=block > 0, host_reads=trim))
            if "dense" in plan.relays and plan.dense is not None and plan.n_allowed:
                dq = slice_queries(plan.dense, lo, hi)
                keys = self.cortex.dense.keys_all(dq)
                k_den = min(plan.depth, max(plan.n_allowed, 1))
                allowed = plan.allowed_t.expand_as(keys)
                masks.append(topk_mask(keys, k_den, valid=allowed, host_reads=trim))
                scores = torch.where(keys == float("-inf"), keys, keys * dq.qs_t[:, None])
            pool = union(parts, n_store=n, trim=trim, dense=True, masks=masks)
        else:
            if block is not None:
                parts.append(lexical_top(block, plan))
            if lex_top is not None:
                parts.append(lex_top)
            if den is not None:
                parts.append(den[lo:hi])
            if "association" in plan.relays and plan.native and trim:
                grown = expanded_host(self.links, parts, plan.gate, n)
                if grown is not None:
                    return grown, scores
            pool = union(parts, n_store=n, trim=trim)
        if "association" in plan.relays and pool.width:
            if pool.dense:
                valid = self.graph(plan).expand(pool.valid, plan.allowed_t)
                pool = Pool(pool.ordinals, valid, True)
            else:
                nbr, _ = self._neighbours(plan, pool)
                pool = expand(pool, nbr, plan.allowed_t, n_store=n, trim=trim)
        return pool, scores

    def _chunk(
        self,
        plan: RecallPlan,
        lo: int,
        hi: int,
        sal: torch.Tensor,
        den: Proposals,
        exact_rounds: bool,
        ahead: lexical_relay.SelectAhead | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[list[Explanation]], np.ndarray]:
        k, m = plan.top, hi - lo
        sel = ahead.take(lo, hi) if ahead is not None and plan.n_allowed else None
        out = self.compute(plan, lo, hi, sal, den, exact_rounds, sel)
        if out is None:
            empty = np.zeros((m, k))
            return (
                np.full((m, k), -1, np.int64),
                np.full((m, k), -np.inf, np.float32),
                empty,
                empty.copy(),
                [[] for _ in range(m)],
                np.zeros((m, k), np.float32),
            )
        fz, at, hit, take = out
        o_h, f_h, d_h, s_h, r_h = (t.cpu().numpy() for t in take)  # the chunk's one transfer
        explain = explanations(plan, fz, at, hit, d_h, s_h) if plan.opts.explain else []
        return o_h, f_h, d_h, s_h, explain, r_h

    def compute(
        self,
        plan: RecallPlan,
        lo: int,
        hi: int,
        sal: torch.Tensor,
        den: Proposals,
        exact_rounds: bool,
        sel: lexical_relay.Selection | None = None,
    ) -> tuple[Fused, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]] | None:
        """The device work of queries ``[lo, hi)``: fusion, the top-k positions and the
        results (ordinals, float32 scores, D, S), all still on the device; None when the pool
        is empty. On a GPU nothing here reads a value back to the host. ``sel``: the lexical
        relay's proposals when it selects without a block (:func:`selects`)."""
        block = None
        if "lexical" in plan.relays and plan.n_allowed and sel is None:
            block = lexical_block(self.cortex.bm25, plan.tokens[lo:hi], plan, rounds=exact_rounds)
            block = block.to(plan.device)
        pool, dense_all = self._pool(plan, lo, hi, sal, den, block, None if sel is None else sel[1])
        if pool.width == 0:
            return None  # (a kept lexical row is released by the index's next one)
        valid, idx = pool.valid, pool.index()
        raw: dict[str, torch.Tensor] = {}
        if block is not None:
            raw["lexical"] = torch.gather(block, 1, idx).to(torch.float64)
        elif sel is not None:
            raw["lexical"] = lexical_members(self.cortex.bm25, plan.tokens[lo:hi], plan, sel, pool)
        if plan.dense is not None:
            if dense_all is not None:  # dense layout: column j is memory j
                raw["dense"] = torch.where(valid, dense_all, float("-inf")).to(torch.float64)
            else:
                raw["dense"] = dense_score(
                    self.cortex.dense, slice_queries(plan.dense, lo, hi), idx, valid
                )
        cols, d = self._columns(plan, pool, idx)
        if "salience" in plan.relays:
            raw["salience"] = salience_score(cols, d)
        fz = self._fuse(plan, lo, hi, pool, raw, (cols.importance, d, cols.s_term))
        rel = absolute_relevance(raw, _rows(plan.ceiling, lo, hi), valid.shape, host=plan.native)
        rel = rel.to(valid.device)
        cues = plan.cues[lo:hi]
        weight = self.cortex.config.recall.time_cue_weight
        if weight > 0 and any(cues):
            lift = time_lift(fz.fused, valid, rel > 0, cols.formed_ms, cues, weight)
            fz = replace(fz, fused=fz.fused + lift, time_lift=lift)
        floor = plan.opts.min_relevance
        gate = None if floor is None else rel >= floor
        vals, pos = topk_exact(fz.fused, plan.top, valid=gate, use_native=plan.native)
        hit = pos >= 0
        at = pos.clamp(min=0)
        ordinals = torch.where(hit, torch.gather(pool.ordinals, 1, at), torch.full_like(at, -1))
        take = (
            ordinals,
            vals.to(torch.float32),
            torch.gather(d, 1, at),
            torch.gather(cols.storage, 1, at).to(torch.float64),
            torch.where(hit, torch.gather(rel, 1, at), torch.zeros_like(vals)).to(torch.float32),
        )
        return fz, at, hit, take

    def _columns(
        self, plan: RecallPlan, pool: Pool, idx: torch.Tensor
    ) -> tuple[PoolColumns, torch.Tensor]:
        """The members' columns and retrieval strength D. In the dense layout (every row is
        ordinals 0..N-1) one row is gathered and its D computed once for every query (they
        are query-independent); the values at non-members differ from a gather at ``idx``,
        and nothing reads them."""
        m = pool.ordinals.shape[0]
        if not pool.dense or m < 2:
            fused = (
                self.columns.gather_host(idx, plan.law, plan.now_ms)
                if plan.native and isinstance(plan.now_ms, int)
                else None
            )
            if fused is not None:
                return fused
            cols = self.columns.gather(idx)
            return cols, pool_strength(cols, plan)
        one = self.columns.gather(pool.ordinals[:1])
        d = pool_strength(one, plan).expand(m, -1)
        return PoolColumns(**{f.name: getattr(one, f.name).expand(m, -1) for f in fields(one)}), d

    def _fuse(
        self,
        plan: RecallPlan,
        lo: int,
        hi: int,
        pool: Pool,
        raw: dict[str, torch.Tensor],
        strength: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    ) -> Fused:
        cfg = self.cortex.config
        assoc, toks = None, plan.tokens[lo:hi]
        if "association" in plan.relays and pool.dense:
            graph = self.graph(plan)

            def assoc(base: torch.Tensor) -> torch.Tensor:
                return graph.spread(pool.valid, base, cfg.association, plan.native)

        elif "association" in plan.relays:

            def assoc(base: torch.Tensor) -> torch.Tensor:
                got = spread_host(self.links, pool, base, cfg.association) if plan.native else None
                if got is None:
                    nbr, weight = self._neighbours(plan, pool)
                    got = association_score(pool, nbr, weight, base, cfg.association)
                return got

        return fuse_plan(
            plan,
            raw,
            pool.valid,
            strength,
            assoc,
            lambda: self.cues.match_pool(pool, toks) if self.cues.names_any(toks) else None,
            cfg.recall,
        )


def fuse_plan(
    plan: RecallPlan,
    raw: dict[str, torch.Tensor],
    valid: torch.Tensor,
    strength: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    association: Callable[[torch.Tensor], torch.Tensor] | None,
    cue_match: Callable[[], torch.Tensor | None],
    recall: RecallConfig,
) -> Fused:
    """:func:`.fusion.fuse` with the plan's weights, mode and k and the store's coefficients."""
    return fuse(
        raw,
        valid,
        weights=plan.weights,
        mode=plan.opts.fusion,
        k=plan.top,
        rrf_k=recall.rrf_k,
        beta=recall.cognitive_beta,
        tau=recall.tag_tau,
        strength=strength,
        association=association,
        cue_match=cue_match,
        want_ranks=plan.opts.fusion == "rrf" or plan.opts.explain,
        host=plan.native,
    )


def _rows(t: torch.Tensor | None, lo: int, hi: int) -> torch.Tensor | None:
    return None if t is None else t[lo:hi]
