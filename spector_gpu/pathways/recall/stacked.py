"""Many small stores in one batched recall: the dense pool layout with a leading store axis.

The evaluation shape (LongMemEval, LoCoMo) is many small stores, each asked a few questions:
store by store, every question pays the recall's fixed cost (a few hundred small tensor ops)
on a block of a few hundred columns. A store no larger than the candidate lists is recalled in
the *dense* pool layout (:mod:`.pool`): column j of every row is memory j. Rows of different
stores therefore line up once each store's columns are padded to the widest store, and
:func:`recall_stacked` answers a whole mixed batch with one sequence of tensor ops:

1. each *part* — the queries of one store sharing one ``RecallOptions`` — is planned exactly
   as its own ``recall_batch`` plans it (clock, gate mask, tokens, query vectors, caches:
   :meth:`.RecallPathway.stack_part`), and its per-store work runs: the BM25 block, the dense
   keys of every memory, the salience proposals, one row of columns, the neighbour table and
   the tag-cue matches;
2. those are padded to the widest store (padding columns are never members) and stacked;
3. membership (top lists as masks), expansion by each row's own neighbour table, retrieval
   strength at each row's own clock, fusion, association spreading, absolute relevance, time
   cues and the exact top-k run once over the (rows, widest store) block on the device.

Every step after the stacking is row-wise and reads only member columns, so each row's ids
and scores equal its store's own ``recall_batch`` bit for bit (the tests compare every fusion
mode and relay mix). Parts whose settings differ (options, weights, coefficients, decay law,
device) form separate blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass

import numpy as np
import torch

from ...cortex.token_rows import token_vocab
from ...kernels.selection import topk_exact_torch, topk_mask
from .columns import PoolColumns
from .relays import RecallPlan
from .relays.association import spread_gathered
from .relays.lexical import lexical_block
from .relays.salience import pool_strength, salience_score, salience_top
from .relevance import absolute_relevance
from .scorer import Scored, Scorer, fuse_plan
from .session_lift import lift_sessions
from .time_cues import time_lift
from .token_relay import rescore

__all__ = ["STACK_BUDGET", "STACK_MAX_ROWS", "StackPart", "block_key", "blocks", "recall_stacked"]

#: Rows × widest store of one stacked block (the scorer's CPU lexical block budget: 16 MiB of
#: float32 per tensor); a part alone larger than this is answered by its own store instead.
STACK_BUDGET = 1 << 22
#: Queries of one store from which its own ``recall_batch`` answers them: the block gives each
#: row its own copy of its store's neighbour table ((rows, W, E)), while a store's own batch
#: shares one — on LoCoMo (150 questions per store) the block measured half as fast.
STACK_MAX_ROWS = 16
_NEG_INF = float("-inf")


@dataclass(frozen=True)
class StackPart:
    """One store's queries under one set of options: its scorer, its plan (from
    :meth:`.RecallPathway.stack_part`) and whether its lexical block takes the device's
    round-based accumulation."""

    scorer: Scorer
    plan: RecallPlan
    rounds: bool


def block_key(part: StackPart) -> tuple[object, ...]:
    """What parts must share to be stacked into one block (every value the row-wise steps
    read that is not per row)."""
    p, cfg = part.plan, part.scorer.cortex.config
    o = p.opts
    law = (p.law.edges.tobytes(), p.law.factors.tobytes(), p.law.freeze_set, p.law.need_set)
    recall = (cfg.recall.rrf_k, cfg.recall.cognitive_beta, cfg.recall.tag_tau)
    return (
        str(p.device),
        p.trim,
        o.k,
        p.top,
        o.fusion,
        o.min_relevance,
        tuple(sorted(p.relays)),
        tuple(sorted(p.weights.items())),
        p.depth,
        recall,
        cfg.recall.time_cue_weight,
        astuple(cfg.association),
        law,
    )


@dataclass
class _Block:
    """Every row's per-store inputs, written in place part by part: (n, W) tensors (the
    neighbour table (n, W, E)); a relay's tensor is None when no part has it."""

    lexical: torch.Tensor | None  # float32 BM25 scores, 0 at padding
    keys: torch.Tensor | None  # float32 dense keys, -inf at padding
    dense: torch.Tensor | None  # float32 dense scores, -inf at padding
    salience: torch.Tensor  # bool: the salience proposals
    allowed: torch.Tensor  # bool
    cols: PoolColumns  # the members' columns, 0 at padding
    nbr: torch.Tensor  # int64 (n, W, E), -1 for none
    weight: torch.Tensor  # float64 (n, W, E)
    match: torch.Tensor | None  # bool tag-cue matches


_DTYPES = {
    "importance": torch.float32,
    "flags": torch.uint8,
    "arousal": torch.uint8,
    "d_event": torch.float32,
    "last_ms": torch.int64,
    "storage": torch.float32,
    "formed_ms": torch.int64,
    "s_term": torch.float64,
}


def _allocate(parts: Sequence[StackPart], width: int) -> _Block:
    plan = parts[0].plan
    n, dev = sum(len(p.plan.tokens) for p in parts), plan.device
    e = 0
    if "association" in plan.relays:
        e = max(p.scorer.graph(p.plan).nbr.shape[1] for p in parts)

    def full(fill: float | bool, dtype: torch.dtype, *shape: int) -> torch.Tensor:
        return torch.full(shape or (n, width), fill, dtype=dtype, device=dev)

    lexical = "lexical" in plan.relays and any(p.plan.n_allowed for p in parts)
    dense = "dense" in plan.relays and any(p.plan.n_allowed for p in parts)
    cognitive = plan.opts.fusion == "cognitive" and parts[0].scorer.cortex.config.recall.tag_tau > 0
    return _Block(
        full(0.0, torch.float32) if lexical else None,
        full(_NEG_INF, torch.float32) if dense else None,
        full(_NEG_INF, torch.float32) if dense else None,
        full(False, torch.bool, n, width + 1),  # the spare column takes -1 proposals
        full(False, torch.bool),
        PoolColumns(**{name: full(0, dtype) for name, dtype in _DTYPES.items()}),
        full(-1, torch.int64, n, width, e),
        full(0.0, torch.float64, n, width, e),
        full(False, torch.bool) if cognitive else None,
    )


def _fill(b: _Block, lo: int, part: StackPart) -> None:
    """Write ``part``'s per-store inputs into rows ``[lo, lo + m)`` of ``b``."""
    s, plan = part.scorer, part.plan
    c, m, n = s.cortex, len(plan.tokens), s.cortex.n
    hi, width = lo + m, b.allowed.shape[1]
    if b.lexical is not None and plan.n_allowed:
        raw = lexical_block(c.bm25, plan.tokens, plan, rounds=part.rounds)
        b.lexical[lo:hi, :n] = raw.to(plan.device)
    if b.keys is not None and b.dense is not None and plan.dense is not None and plan.n_allowed:
        k_all = c.dense.keys_all(plan.dense)
        b.keys[lo:hi, :n] = k_all
        b.dense[lo:hi, :n] = torch.where(k_all == _NEG_INF, k_all, k_all * plan.dense.qs_t[:, None])
    if "salience" in plan.relays and plan.n_allowed:
        top = salience_top(c, s.columns, plan, s.salience)
        b.salience[lo:hi].index_fill_(1, torch.where(top < 0, width, top), True)
    one = s.columns.gather(torch.arange(n, device=plan.device)[None, :])
    for name in _DTYPES:
        getattr(b.cols, name)[lo:hi, :n] = getattr(one, name)
    b.allowed[lo:hi, :n] = plan.allowed_t
    if b.nbr.shape[2]:
        graph = s.graph(plan)
        e = graph.nbr.shape[1]
        b.nbr[lo:hi, :n, :e] = graph.nbr
        b.weight[lo:hi, :n, :e] = graph.weight
    if b.match is not None:
        members = torch.arange(n, device=plan.device)[None, :].expand(m, -1)
        got = s.cues.match(members, plan.tokens)
        if got is not None:
            b.match[lo:hi, :n] = got


def _build(parts: Sequence[StackPart]) -> _Block:
    """The block of ``parts`` (the width of the widest store)."""
    b = _allocate(parts, max(p.scorer.cortex.n for p in parts))
    lo = 0
    for part in parts:
        _fill(b, lo, part)
        lo += len(part.plan.tokens)
    b.salience = b.salience[:, :-1]
    return b


def _expand(valid: torch.Tensor, allowed: torch.Tensor, nbr: torch.Tensor) -> torch.Tensor:
    """bool (n, W): the members plus every allowed neighbour of a member (each row its own
    table; :meth:`.DenseGraph.expand`)."""
    n, w = valid.shape
    reached = torch.zeros((n, w + 1), dtype=torch.int32, device=valid.device)
    members = valid.to(torch.int32)
    for e in range(nbr.shape[2]):
        j = nbr[:, :, e]
        ok = (j >= 0) & torch.gather(allowed, 1, j.clamp(min=0))
        reached.scatter_add_(1, torch.where(ok, j, w), members)  # column w: no neighbour
    return valid | (reached[:, :w] > 0)


def _spread(
    valid: torch.Tensor,
    base: torch.Tensor,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    hops: int,
    decay: float,
) -> torch.Tensor:
    """float64 (n, W) max-product activation, each row over its own (W, E) table."""
    n, w, e = nbr.shape
    jj = nbr.clamp(min=0).reshape(n, w * e)

    def take(x: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, jj).view(n, w, e)

    return spread_gathered(valid, base, nbr >= 0, weight, take, hops, decay)


def _membership(plan: RecallPlan, b: _Block) -> torch.Tensor:
    """bool (n, W): every row's pool (the relays' top lists, then the neighbours)."""
    valid = b.salience.clone()
    if b.lexical is not None:
        valid |= topk_mask(b.lexical, plan.depth, valid=b.lexical > 0, host_reads=plan.trim)
    if b.keys is not None:  # min(depth, allowed) of the allowed: the depth best of them
        valid |= topk_mask(b.keys, plan.depth, valid=b.allowed, host_reads=plan.trim)
    if "association" in plan.relays:
        valid = _expand(valid, b.allowed, b.nbr)
    return valid


def _strength(parts: Sequence[StackPart], b: _Block) -> torch.Tensor:
    """D float64 (n, W), each row at its own clock."""
    clock = [p.plan.now_ms for p in parts for _ in p.plan.tokens]
    now = torch.tensor(clock, dtype=torch.int64, device=b.allowed.device)[:, None]
    return pool_strength(b.cols, parts[0].plan, now)


def _score(parts: Sequence[StackPart], b: _Block) -> tuple[torch.Tensor, ...]:
    """The block's top-k: (positions, fused float32, D, S, relevance float32) per row."""
    plan, cfg = parts[0].plan, parts[0].scorer.cortex.config
    valid = _membership(plan, b)
    raw: dict[str, torch.Tensor] = {}
    if b.lexical is not None:
        raw["lexical"] = b.lexical.to(torch.float64)
    if b.dense is not None:
        raw["dense"] = torch.where(valid, b.dense, _NEG_INF).to(torch.float64)
    cols, d = b.cols, _strength(parts, b)
    if "salience" in plan.relays:
        raw["salience"] = salience_score(cols, d)
    assoc = None
    if "association" in plan.relays:
        a = cfg.association

        def assoc(base: torch.Tensor) -> torch.Tensor:
            return _spread(valid, base, b.nbr, b.weight, a.hops, a.decay)

    strength = (cols.importance, d, cols.s_term)
    fz = fuse_plan(plan, raw, valid, strength, assoc, lambda: b.match, cfg.recall)
    ceilings = [p.plan.ceiling for p in parts]
    ceiling = None if any(c is None for c in ceilings) else torch.cat(ceilings)  # type: ignore[arg-type]
    rel = absolute_relevance(raw, ceiling, valid.shape, host=plan.native).to(valid.device)
    fused = fz.fused
    cues = tuple(c for p in parts for c in p.plan.cues)
    lift = cfg.recall.time_cue_weight
    if lift > 0 and any(cues):
        fused = fused + time_lift(fused, valid, rel > 0, cols.formed_ms, cues, lift)
    floor = plan.opts.min_relevance
    vals, pos = topk_exact_torch(fused, plan.top, valid=None if floor is None else rel >= floor)
    hit = pos >= 0
    at = pos.clamp(min=0)
    return (
        torch.where(hit, at, torch.full_like(at, -1)),
        vals.to(torch.float32),
        torch.gather(d, 1, at),
        torch.gather(cols.storage, 1, at).to(torch.float64),
        torch.where(hit, torch.gather(rel, 1, at), torch.zeros_like(vals)).to(torch.float32),
    )


def blocks(parts: Sequence[StackPart], budget: int) -> list[list[int]]:
    """Indices of ``parts`` grouped into blocks: parts sharing a :func:`block_key`, in order,
    each block at most ``budget`` rows × widest store (a larger part is a block alone)."""
    out: list[list[int]] = []
    for members in _by_key(parts).values():
        current: list[int] = []
        rows = width = 0
        for i in members:
            m, n = len(parts[i].plan.tokens), parts[i].scorer.cortex.n
            if current and (rows + m) * max(width, n) > budget:
                out.append(current)
                current, rows, width = [], 0, 0
            current.append(i)
            rows, width = rows + m, max(width, n)
        out.append(current)
    return out


def _by_key(parts: Sequence[StackPart]) -> dict[tuple[object, ...], list[int]]:
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, part in enumerate(parts):
        groups.setdefault(block_key(part), []).append(i)
    return groups


def recall_stacked(parts: Sequence[StackPart], *, budget: int = STACK_BUDGET) -> list[Scored]:
    """The :class:`~.scorer.Scored` of every part, in order, each block of :func:`blocks`
    computed as one (the parts must be in the dense layout, as ``stack_part`` returns them).
    Call under ``torch.inference_mode`` and, on the CPU, with torch at one thread."""
    out: list[Scored | None] = [None] * len(parts)
    for members in blocks(parts, budget):
        group = [parts[i] for i in members]
        o_h, f_h, d_h, s_h, r_h = (t.cpu().numpy() for t in _score(group, _build(group)))
        lo = 0
        for i in members:
            hi = lo + len(parts[i].plan.tokens)
            ordinals = o_h[lo:hi].astype(np.int64)
            counts = (ordinals >= 0).sum(axis=1).astype(np.int32)
            scored = Scored(ordinals, f_h[lo:hi], counts, d_h[lo:hi], s_h[lo:hi], None, r_h[lo:hi])
            cortex = parts[i].scorer.cortex
            scored = lift_sessions(scored, parts[i].plan, cortex)
            out[i] = rescore(scored, parts[i].plan, cortex.derived.tokens.rows(), token_vocab())
            lo = hi
    return [s for s in out if s is not None]
