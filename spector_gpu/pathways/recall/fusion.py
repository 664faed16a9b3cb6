"""Relevance fusion of relay scores over padded candidate pools (DESIGN §5 step 3).

Pure functions of (n_queries, W) tensors, any device; ``valid`` marks the real members of each
row (the rest is padding), rows are sorted by ordinal.

* ``weighted``: each relay's scores are min-max normalised over the pool, then summed with the
  relay weights (a normalised weighted score sum, Fox & Shaw 1994's CombSUM with weights).
  Association is an additive term computed from the fused lexical + dense base.
* ``rrf``: weighted reciprocal-rank fusion, ``sum_r w_r / (k + rank_r)`` with k = 60
  (Cormack, Clarke & Büttcher 2009); only memories a relay actually scored (> 0) get a rank.
* ``cognitive`` (default): ``weighted`` times the MF-001 factor
  ``(1 + beta·I/10·D·S^0.3)·(1 + tau·tag_overlap)``, where tag_overlap is 1 when one of the
  memory's cue tokens (speaker's first name, tags) occurs in the analysed query.

On LoCoMo's development split the weighted sum beats equal-weight RRF by a wide margin: a weak
relay fused by rank with equal weight drags a strong one down (see benchmarks/results).

Every value is computed with the operations, dtypes and order of the per-query numpy fusion
it replaced (float32 normalised scores, float64 sums), and divisions take tensor divisors (CUDA
turns division by a Python scalar into a multiply by its reciprocal), so CPU, GPU and the numpy
twin give the same bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from ...kernels.native import native
from .relevance import host_rows

__all__ = [
    "COEFFICIENT_MAX",
    "Fused",
    "cognitive_factor",
    "fuse",
    "minmax_rows",
    "ranks_rows",
    "rrf_rows",
]

#: Largest ``beta`` / ``tau`` the arithmetic uses (the config refuses larger ones; a Config
#: built directly is clipped here) and the largest ``S^0.3`` term: with I/10 and D in [0, 1]
#: the factor stays below 1e6 · 1e6 · 1e6 ≈ 1e18, finite in float32 — never inf or NaN.
COEFFICIENT_MAX = 1e6

_NEG_INF = float("-inf")
_TEXT: tuple[str, ...] = ("lexical", "dense")  # the relays whose min-max scores form the base


def _div(x: torch.Tensor, by: float) -> torch.Tensor:
    return x / torch.full_like(x, by)


def minmax_rows(x: torch.Tensor, valid: torch.Tensor, *, host: bool = False) -> torch.Tensor:
    """Min-max normalise each row over its valid finite entries to [0, 1], float32; a row
    with no spread maps to zeros (it carries no signal), as do invalid entries. With ``host``
    (the CPU code path may read values), float64 rows on the CPU take one native pass: the
    same float64 arithmetic, so the same bits, in about a tenth of the dozen tensor
    operations' time on a 2,000-member row."""
    cpu = x.device.type == "cpu" and x.dtype == torch.float64 and x.ndim == 2
    if host and native is not None and cpu:
        out = np.empty(tuple(x.shape), dtype=np.float32)
        native.minmax_rows(
            np.ascontiguousarray(x.numpy()), np.ascontiguousarray(valid.expand_as(x).numpy()), out
        )
        return torch.from_numpy(out)
    fin = valid & torch.isfinite(x)
    lo = torch.where(fin, x, float("inf")).amin(dim=1, keepdim=True)
    hi = torch.where(fin, x, _NEG_INF).amax(dim=1, keepdim=True)
    # hi > lo only in a row with two different finite members; elsewhere every entry is 0,
    # and the quotient there (of infinities, or by 0) is masked, never used
    keep = fin & (hi > lo)
    return torch.where(keep, (x - lo) / (hi - lo), 0.0).to(torch.float32)


def ranks_rows(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """1-based rank of each entry by ``x`` descending (ties: lower ordinal, i.e. position);
    0 where the relay did not score it (non-finite or <= 0) or for padding. int64."""
    scored = valid & torch.isfinite(x) & (x > 0)
    key = torch.where(scored, x, torch.full_like(x, _NEG_INF))
    order = torch.sort(key, dim=1, descending=True, stable=True).indices
    positions = torch.arange(1, x.shape[1] + 1, device=x.device).expand_as(order)
    rank = torch.empty_like(order).scatter_(1, order, positions)
    return torch.where(scored, rank, torch.zeros_like(rank))


def rrf_rows(
    ranks: dict[str, torch.Tensor], weights: dict[str, float], k: int, shape: torch.Size
) -> torch.Tensor:
    """float32 ``sum_r w_r / (k + rank_r)`` over the relays in ``ranks`` (insertion order);
    zeros of ``shape`` when no relay scored."""
    total: torch.Tensor | None = None
    for name, r in ranks.items():
        den = (k + r.clamp(min=1)).to(torch.float64)
        term = torch.where(r > 0, torch.full_like(den, weights.get(name, 0.0)) / den, 0.0)
        total = term if total is None else total + term
    if total is None:
        return torch.zeros(shape, dtype=torch.float32)
    return total.to(torch.float32)


def _factor(
    importance: torch.Tensor, d: torch.Tensor, s_term: torch.Tensor, beta: float
) -> torch.Tensor:
    """float64 ``1 + beta·I/10·D·S^0.3`` (clipped, the unclipped formula's order)."""
    b = min(max(float(beta), 0.0), COEFFICIENT_MAX)
    imp = importance.to(torch.float64).clamp(0.0, 10.0)
    return 1.0 + _div(b * imp, 10.0) * d.clamp(0.0, 1.0) * s_term


def cognitive_factor(
    importance: npt.ArrayLike,
    d: npt.ArrayLike,
    s: npt.ArrayLike,
    overlap: npt.ArrayLike,
    beta: float,
    tau: float,
) -> np.ndarray:
    """MF-001 factor ``(1 + beta·I/10·D·S^0.3)·(1 + tau·overlap)``, float32 (n,), for numpy
    inputs (what :func:`fuse` computes for each pool).

    It cannot overflow: I/10, D and overlap are clipped to [0, 1] (values the write path
    produces; damaged ones are quarantined before recall), ``S^0.3``, ``beta`` and ``tau`` to at
    most 1e6."""
    from .columns import s_term

    t = min(max(float(tau), 0.0), COEFFICIENT_MAX)
    f = _factor(
        torch.from_numpy(np.asarray(importance, dtype=np.float64)),
        torch.from_numpy(np.asarray(d, dtype=np.float64)),
        torch.from_numpy(s_term(np.asarray(s, dtype=np.float64))),
        beta,
    )
    ov = torch.from_numpy(np.clip(np.asarray(overlap, dtype=np.float64), 0.0, 1.0))
    return (f * (1.0 + t * ov)).to(torch.float32).numpy()


@dataclass(frozen=True)
class Fused:
    """Fusion of one block of pools: every tensor (n, W); ``ranks`` only when asked for."""

    fused: torch.Tensor  # float64, -inf at padding
    relevance: torch.Tensor  # float64
    factor: torch.Tensor  # float32
    raw: dict[str, torch.Tensor]  # float64 raw score per relay
    ranks: dict[str, torch.Tensor]  # int64, 0 = not scored by that relay
    time_lift: torch.Tensor | None = None  # float64, what time cues added to ``fused``


def _kth(partial: torch.Tensor, valid: torch.Tensor, k: int) -> torch.Tensor:
    """Per row, the min(k, members)-th largest ``partial`` over valid entries ((n, 1))."""
    top = min(k, partial.shape[1])
    vals = torch.topk(torch.where(valid, partial, _NEG_INF), top, dim=1, sorted=False).values
    vals = torch.sort(vals, dim=1, descending=True).values
    take = valid.sum(dim=1, keepdim=True).clamp(max=top, min=1) - 1
    return torch.gather(vals, 1, take)


def _cognitive(
    relevance: torch.Tensor,
    valid: torch.Tensor,
    strength: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    beta: float,
    tau: float,
    k: int,
    cue_match: Callable[[], torch.Tensor | None],
) -> torch.Tensor:
    """float32 MF-001 factor of each member. The tag term is checked only where it could lift
    a member into the top k (``relevance·base·(1+tau) >= the k-th relevance·base``)."""
    importance, d, s_term = strength
    base_f = _factor(importance, d, s_term, beta).to(torch.float32)
    t = min(max(float(tau), 0.0), COEFFICIENT_MAX)
    overlap = torch.zeros(valid.shape, dtype=torch.float64, device=valid.device)
    match = cue_match() if t > 0 else None
    if match is not None:
        partial = relevance * base_f.to(torch.float64)
        near = partial * (1.0 + t) >= _kth(partial, valid, k)
        overlap = torch.where(match & near & valid, 1.0, overlap)
    return (base_f.to(torch.float64) * (1.0 + t * overlap)).to(torch.float32)


def fuse(
    raw: dict[str, torch.Tensor],
    valid: torch.Tensor,
    *,
    weights: dict[str, float],
    mode: str,
    k: int,
    rrf_k: int,
    beta: float,
    tau: float,
    strength: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    association: Callable[[torch.Tensor], torch.Tensor] | None,
    cue_match: Callable[[], torch.Tensor | None],
    want_ranks: bool,
    host: bool = False,
) -> Fused:
    """Fuse relay scores (module docstring).

    Args:
        raw: float64 (n, W) raw scores: ``lexical`` and ``dense`` (when active) and
            ``salience`` (when active); association is computed here from the base.
        valid: bool (n, W) real members; weights: per relay; mode: fusion mode; k: results
            per query (for the tag-overlap pruning); rrf_k, beta, tau: the coefficients;
        strength: (importance, D float64, S^0.3 float64) of the members;
        association: base (n, W) float64 → activation (n, W), or None when inactive;
        cue_match: bool (n, W) "a cue token of this member is in the query", or None.
        want_ranks: compute the per-relay ranks (RRF and explanations need them); host: the
            CPU code path, which may read values on the host (native kernels).
    """
    base = torch.zeros(valid.shape, dtype=torch.float64, device=valid.device)
    for name in _TEXT:
        if name in raw:  # min-max rows (float32) times the weight, summed in float64
            base = base + minmax_rows(raw[name], valid, host=host) * weights[name]
    scores: dict[str, torch.Tensor] = {n: raw[n] for n in _TEXT if n in raw}
    assoc = sal = None
    if association is not None:
        scores["association"] = assoc = association(base)
    if "salience" in raw:
        scores["salience"] = raw["salience"]
        sal = minmax_rows(raw["salience"], valid, host=host)
    one = (base, assoc, sal, scores, valid, weights, mode, k, beta, tau, strength, cue_match)
    got = _fuse_host(*one) if host and not want_ranks else None
    if got is not None:
        return got
    relevance = base
    if assoc is not None:
        relevance = relevance + weights["association"] * assoc
    if sal is not None:
        relevance = relevance + sal * weights["salience"]
    ranks = {n: ranks_rows(v, valid) for n, v in scores.items()} if want_ranks else {}
    factor = torch.ones(valid.shape, dtype=torch.float32, device=valid.device)
    if mode == "rrf":
        fused = rrf_rows(ranks, weights, rrf_k, valid.shape).to(torch.float64).to(valid.device)
    elif mode == "cognitive":
        factor = _cognitive(relevance, valid, strength, beta, tau, k, cue_match)
        fused = relevance * factor.to(torch.float64)
    else:
        fused = relevance
    fused = torch.where(valid, fused, _NEG_INF)
    return Fused(fused, relevance, factor, scores, ranks)


def _fuse_host(
    base: torch.Tensor,
    assoc: torch.Tensor | None,
    sal: torch.Tensor | None,
    scores: dict[str, torch.Tensor],
    valid: torch.Tensor,
    weights: dict[str, float],
    mode: str,
    k: int,
    beta: float,
    tau: float,
    strength: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    cue_match: Callable[[], torch.Tensor | None],
) -> Fused | None:
    """:func:`fuse` of CPU rows without ranks after the base, association and normalised
    salience (``sal``), in one native pass per row (``_native.fuse_rows``: the tensor
    operations' arithmetic in their order, so the same bits); None without the native
    kernels, for RRF or CUDA rows, or when the native pass declines (a NaN that the k-th value
    would meet)."""
    if native is None or mode == "rrf" or valid.device.type != "cpu":
        return None
    shape = valid.shape
    cognitive = mode == "cognitive"
    t = min(max(float(tau), 0.0), COEFFICIENT_MAX)
    match = cue_match() if cognitive and t > 0 else None
    importance, d, s_term = (
        (host_rows(x, shape, np.float64) for x in strength) if cognitive else (None, None, None)
    )
    out_rel, out_fused = np.empty(tuple(shape)), np.empty(tuple(shape))
    out_factor = np.empty(tuple(shape), dtype=np.float32)
    done = native.fuse_rows(
        host_rows(base, shape, np.float64),
        None if assoc is None else host_rows(assoc, shape, np.float64),
        float(weights.get("association", 0.0)),
        None if sal is None else host_rows(sal, shape, np.float32),
        float(weights.get("salience", 0.0)), host_rows(valid, shape, np.bool_),
        int(cognitive), importance, d, s_term, min(max(float(beta), 0.0), COEFFICIENT_MAX), t,
        None if match is None else host_rows(match, shape, np.bool_), int(k),
        out_rel, out_factor, out_fused,
    )  # fmt: skip
    if not done:
        return None
    factor = torch.from_numpy(out_factor)
    return Fused(torch.from_numpy(out_fused), torch.from_numpy(out_rel), factor, scores, {})
