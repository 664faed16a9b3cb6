"""Many small stores in one batched recall: the dense pool layout with a leading store axis.

The evaluation shape (LongMemEval, LoCoMo) is many small stores, each asked a few questions:
store by store, every question pays the recall's fixed cost (a few hundred small tensor ops)
on a block of a few hundred columns. A store no larger than the candidate lists is recalled in
the *dense* pool layout (:mod:`.pool`): column j of every row is memory j. Rows of different
stores therefore line up once each store's columns are padded to the widest store, and
:func:`recall_stacked` answers a whole mixed batch with one sequence of tensor ops:

1. each *part* — the queries of one store sharing one ``RecallOptions`` — is planned exactly
   as its own ``recall_batch`` plans it (clock, gate mask, tokens, query vectors, caches:
   :meth:`.RecallPathway.stack_plan`), and its per-store work runs: the BM25 block, the dense
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

from ...kernels.decay import decayed_torch
from ...kernels.selection import topk_exact_torch, topk_mask
from .fusion import fuse
from .relays import RecallPlan
from .relays.lexical import lexical_block
from .relays.salience import salience_top
from .relevance import absolute_relevance
from .scorer import Scored, Scorer
from .time_cues import time_lift

__all__ = ["STACK_BUDGET", "STACK_MAX_ROWS", "StackPart", "block_key", "blocks", "recall_stacked"]

#: Rows × widest store of one stacked block (the scorer's CPU lexical block budget: 16 MiB of
#: float32 per tensor); a part alone larger than this is answered by its own store instead.
STACK_BUDGET = 1 << 22
#: Queries of one store from which its own ``recall_batch`` answers them: the block gives each
#: row its own copy of its store's neighbour table ((rows, W, E)), while a store's own batch
#: shares one — on LoCoMo (150 questions per store) the block measured half as fast.
STACK_MAX_ROWS = 16
_NEG_INF = float("-inf")
_COLUMNS = ("importance", "flags", "arousal", "d_event", "last_ms", "storage", "formed_ms")


@dataclass(frozen=True)
class StackPart:
    """One store's queries under one set of options: its scorer, its plan (from
    :meth:`.RecallPathway.stack_plan`) and whether its lexical block takes the device's
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
class _Inputs:
    """One part's per-store tensors, padded to the block's width W."""

    rows: int
    n: int
    block: torch.Tensor | None  # float32 (m, W) BM25 scores, 0 at padding
    keys: torch.Tensor | None  # float32 (m, W) dense keys, -inf at padding
    dense: torch.Tensor | None  # float32 (m, W) dense scores, -inf at padding
    salience: torch.Tensor  # bool (W,) the salience proposals
    allowed: torch.Tensor  # bool (W,)
    cols: dict[str, torch.Tensor]  # each (W,) (s_term float64)
    nbr: torch.Tensor  # int64 (W, E_part), -1 for none
    weight: torch.Tensor  # float64 (W, E_part)
    match: torch.Tensor | None  # bool (m, W) tag-cue matches


def _pad(t: torch.Tensor, width: int, fill: float | bool | int) -> torch.Tensor:
    if t.shape[-1] == width:
        return t
    out = torch.full((*t.shape[:-1], width), fill, dtype=t.dtype, device=t.device)
    out[..., : t.shape[-1]] = t
    return out


def _inputs(part: StackPart, width: int) -> _Inputs:
    s, plan = part.scorer, part.plan
    c, m, n = s.cortex, len(plan.tokens), s.cortex.n
    block = keys = dense = None
    if "lexical" in plan.relays and plan.n_allowed:
        raw = lexical_block(c.bm25, plan.tokens, plan, rounds=part.rounds).to(plan.device)
        block = _pad(raw, width, 0.0)
    if "dense" in plan.relays and plan.dense is not None and plan.n_allowed:
        k_all = c.dense.keys_all(plan.dense)
        keys = _pad(k_all, width, _NEG_INF)
        scores = torch.where(k_all == _NEG_INF, k_all, k_all * plan.dense.qs_t[:, None])
        dense = _pad(scores, width, _NEG_INF)
    sal = torch.zeros(width + 1, dtype=torch.bool, device=plan.device)
    if "salience" in plan.relays and plan.n_allowed:
        top = salience_top(c, s.columns, plan, s.salience)
        sal.scatter_(0, torch.where(top < 0, width, top), True)  # -1 lands in a spare column
    everyone = torch.arange(n, device=plan.device)
    one = s.columns.gather(everyone[None, :])
    cols = {name: _pad(getattr(one, name)[0], width, 0) for name in (*_COLUMNS, "s_term")}
    nbr = torch.full((width, 0), -1, dtype=torch.int64, device=plan.device)
    weight = torch.zeros((width, 0), dtype=torch.float64, device=plan.device)
    if "association" in plan.relays:
        graph = s.graph(plan)
        nbr = torch.full((width, graph.nbr.shape[1]), -1, dtype=torch.int64, device=plan.device)
        nbr[:n] = graph.nbr
        weight = torch.zeros(nbr.shape, dtype=torch.float64, device=plan.device)
        weight[:n] = graph.weight
    match = None
    if plan.opts.fusion == "cognitive" and c.config.recall.tag_tau > 0:
        got = s.cues.match(everyone[None, :].expand(m, -1), plan.tokens)
        match = None if got is None else _pad(got, width, False)
    allowed = _pad(plan.allowed_t, width, False)
    return _Inputs(m, n, block, keys, dense, sal[:width], allowed, cols, nbr, weight, match)


def _stack(parts: Sequence[_Inputs], attr: str, fill: float | bool) -> torch.Tensor | None:
    """The parts' (m, W) tensors ``attr`` one above the other; a part without one (nothing
    allowed there: its rows have no members) contributes ``fill``; None if none has one."""
    got = [getattr(p, attr) for p in parts]
    model = next((t for t in got if t is not None), None)
    if model is None:
        return None
    rows = [
        t if t is not None else torch.full((p.rows, model.shape[1]), fill, dtype=model.dtype)
        for p, t in zip(parts, got, strict=True)
    ]
    return torch.cat([r.to(model.device) for r in rows])


def _per_row(parts: Sequence[_Inputs], attr: str) -> torch.Tensor:
    """The parts' (W, …) per-store tensor ``attr`` repeated for each of their rows."""
    return torch.cat([getattr(p, attr).expand(p.rows, *getattr(p, attr).shape) for p in parts])


def _neighbours(parts: Sequence[_Inputs]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's neighbour table and weights, padded to the widest: (n, W, E)."""
    e = max(p.nbr.shape[1] for p in parts)
    nbr = [_pad(p.nbr, e, -1).expand(p.rows, -1, -1) for p in parts]
    weight = [_pad(p.weight, e, 0.0).expand(p.rows, -1, -1) for p in parts]
    return torch.cat(nbr), torch.cat(weight)


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
    """float64 (n, W) max-product activation, each row over its own table: the products of
    :meth:`.DenseGraph.spread` in the same order."""
    act = torch.zeros_like(base)
    n, w, e = nbr.shape
    if e == 0:
        return act
    jj = nbr.clamp(min=0).reshape(n, w * e)
    live = (valid[:, :, None] & (nbr >= 0)) & torch.gather(valid, 1, jj).view(n, w, e)
    zero = torch.zeros((), dtype=base.dtype, device=base.device)
    src = base
    for hop in range(max(int(hops), 1)):
        prod = (weight * torch.gather(src, 1, jj).view(n, w, e)) * (decay**hop)
        step = torch.maximum(torch.where(live, prod, zero).amax(dim=2), zero)
        act = torch.maximum(act, step)
        src = step
    return act


def _membership(
    plan: RecallPlan,
    ins: Sequence[_Inputs],
    block: torch.Tensor | None,
    keys: torch.Tensor | None,
    nbr: torch.Tensor,
) -> torch.Tensor:
    """bool (n, W): every row's pool (the relays' top lists, then the neighbours)."""
    allowed = _per_row(ins, "allowed")
    valid = _per_row(ins, "salience").clone()
    if block is not None:
        valid |= topk_mask(block, plan.depth, valid=block > 0, host_reads=plan.trim)
    if keys is not None:  # min(depth, allowed) of the allowed: the depth best of them
        valid |= topk_mask(keys, plan.depth, valid=allowed, host_reads=plan.trim)
    if "association" in plan.relays:
        valid = _expand(valid, allowed, nbr)
    return valid


def _strength(
    parts: Sequence[StackPart], ins: Sequence[_Inputs], device: torch.device
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Each row's columns (n, W) and D float64 (n, W) at the row's own clock."""
    cols = {name: torch.cat([p.cols[name].expand(p.rows, -1) for p in ins]) for name in ins[0].cols}
    clock = [q.plan.now_ms for q, p in zip(parts, ins, strict=True) for _ in range(p.rows)]
    now = torch.tensor(clock, dtype=torch.int64, device=device)[:, None]
    law = parts[0].plan.law
    d = decayed_torch(law, now, cols["d_event"], cols["last_ms"], cols["flags"], cols["arousal"])
    return cols, d.to(torch.float64)


def _score(parts: Sequence[StackPart], ins: Sequence[_Inputs]) -> tuple[torch.Tensor, ...]:
    """The block's top-k: (positions, fused float32, D, S, relevance float32) per row."""
    plan, cfg = parts[0].plan, parts[0].scorer.cortex.config
    block, keys = _stack(ins, "block", 0.0), _stack(ins, "keys", _NEG_INF)
    nbr, weight = _neighbours(ins)
    valid = _membership(plan, ins, block, keys, nbr)
    raw: dict[str, torch.Tensor] = {}
    if block is not None:
        raw["lexical"] = block.to(torch.float64)
    dense = _stack(ins, "dense", _NEG_INF)
    if dense is not None:
        raw["dense"] = torch.where(valid, dense, _NEG_INF).to(torch.float64)
    cols, d = _strength(parts, ins, valid.device)
    if "salience" in plan.relays:
        imp = cols["importance"].to(torch.float64)
        raw["salience"] = (imp / torch.full_like(imp, 10.0)) * d
    assoc = None
    if "association" in plan.relays:
        a = cfg.association

        def assoc(base: torch.Tensor) -> torch.Tensor:
            return _spread(valid, base, nbr, weight, a.hops, a.decay)

    match = _stack(ins, "match", False)
    fz = fuse(
        raw,
        valid,
        weights=plan.weights,
        mode=plan.opts.fusion,
        k=plan.opts.k,
        rrf_k=cfg.recall.rrf_k,
        beta=cfg.recall.cognitive_beta,
        tau=cfg.recall.tag_tau,
        strength=(cols["importance"], d, cols["s_term"]),
        association=assoc,
        cue_match=lambda: match,
        want_ranks=plan.opts.fusion == "rrf",
    )
    ceilings = [q.plan.ceiling for q in parts]
    ceiling = None if any(c is None for c in ceilings) else torch.cat(ceilings)  # type: ignore[arg-type]
    rel = absolute_relevance(raw, ceiling, valid.shape).to(valid.device)
    fused = fz.fused
    cues = tuple(c for q in parts for c in q.plan.cues)
    lift = cfg.recall.time_cue_weight
    if lift > 0 and any(cues):
        fused = fused + time_lift(fused, valid, rel > 0, cols["formed_ms"], cues, lift)
    floor = plan.opts.min_relevance
    vals, pos = topk_exact_torch(fused, plan.opts.k, valid=None if floor is None else rel >= floor)
    hit = pos >= 0
    at = pos.clamp(min=0)
    return (
        torch.where(hit, at, torch.full_like(at, -1)),
        vals.to(torch.float32),
        torch.gather(d, 1, at),
        torch.gather(cols["storage"], 1, at).to(torch.float64),
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
    computed as one (the parts must be in the dense layout, as ``stack_plan`` returns them).
    Call under ``torch.inference_mode`` and, on the CPU, with torch at one thread."""
    out: list[Scored | None] = [None] * len(parts)
    for members in blocks(parts, budget):
        group = [parts[i] for i in members]
        width = max(p.scorer.cortex.n for p in group)
        ins = [_inputs(p, width) for p in group]
        o_h, f_h, d_h, s_h, r_h = (t.cpu().numpy() for t in _score(group, ins))  # one transfer
        lo = 0
        for i, inp in zip(members, ins, strict=True):
            hi = lo + inp.rows
            ordinals = o_h[lo:hi].astype(np.int64)
            counts = (ordinals >= 0).sum(axis=1).astype(np.int32)
            out[i] = Scored(ordinals, f_h[lo:hi], counts, d_h[lo:hi], s_h[lo:hi], None, r_h[lo:hi])
            lo = hi
    return [s for s in out if s is not None]
