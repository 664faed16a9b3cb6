"""Piecewise-constant decay, and the exact top-k of weight × decayed value (the salience scan).

For row i (DESIGN §5, Spector's 12-bucket power law; the table comes from
:func:`spector_gpu.cortex.strength.decayed`'s parameters)::

    t_i  = max(now_ms - last_ms_i, 0) / 1000 / (1 + arousal_i / 255)      seconds, float64
    b_i  = the last bucket edge <= t_i                                     (edges ascending, from 0)
    f_i  = 1 if flags_i & freeze_set or not flags_i & need_set, else factors[b_i]
    D_i  = float32(float64(d_i) * f_i)
    v_i  = (float64(w_i) / w_div) * float64(D_i)

each operation in that order, so :func:`decayed_torch` (any device), the native CPU kernel and
the numpy function it mirrors agree bit for bit. :func:`decay_topk` returns the ``k`` best
allowed rows by ``v`` (ties: lower row), one pass, no per-row temporaries on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .native import native

__all__ = ["DecayLaw", "decay_topk", "decay_topk_reference", "decayed_numpy", "decayed_torch"]


@dataclass(frozen=True)
class DecayLaw:
    """Bucket edges (seconds, float64, ascending from 0), the factor of each bucket (float64),
    and the flag bits that freeze decay: ``freeze_set`` (set → no decay) and ``need_set``
    (clear → no decay)."""

    edges: np.ndarray
    factors: np.ndarray
    freeze_set: int
    need_set: int


def decayed_numpy(
    law: DecayLaw,
    now_ms: int,
    d: np.ndarray,
    last_ms: np.ndarray,
    flags: np.ndarray,
    arousal: np.ndarray,
) -> np.ndarray:
    """D float32 (m,) of m rows (numpy; the reference of the other two)."""
    t = np.maximum(now_ms - last_ms.astype(np.int64), 0).astype(np.float64) / 1000.0
    t = t / (1.0 + arousal.astype(np.float64) / 255.0)
    f = law.factors[np.searchsorted(law.edges, t, side="right") - 1]
    frozen = ((flags & law.freeze_set) != 0) | ((flags & law.need_set) == 0)
    return (d.astype(np.float64) * np.where(frozen, 1.0, f)).astype(np.float32)


def decayed_torch(
    law: DecayLaw,
    now_ms: int | torch.Tensor,
    d: torch.Tensor,
    last_ms: torch.Tensor,
    flags: torch.Tensor,
    arousal: torch.Tensor,
) -> torch.Tensor:
    """D float32 of rows given as tensors on one device; equals :func:`decayed_numpy`.
    ``now_ms`` is one clock, or an int64 tensor that broadcasts against the rows (one per row).

    Divisions take tensor divisors: CUDA turns division by a Python scalar into a multiply by
    its reciprocal, which is not the IEEE quotient."""
    dev = d.device
    dt = torch.clamp(now_ms - last_ms.to(torch.int64), min=0).to(torch.float64)
    t = dt / torch.full_like(dt, 1000.0)
    a = arousal.to(torch.float64)
    t = t / (1.0 + a / torch.full_like(a, 255.0))
    edges = torch.from_numpy(law.edges).to(dev)
    factors = torch.from_numpy(law.factors).to(dev)
    f = factors[torch.searchsorted(edges, t, right=True) - 1]
    fl = flags.to(torch.int64)
    frozen = ((fl & law.freeze_set) != 0) | ((fl & law.need_set) == 0)
    f = torch.where(frozen, torch.ones_like(f), f)
    return (d.to(torch.float64) * f).to(torch.float32)


def decay_topk_reference(
    law: DecayLaw,
    now_ms: int,
    w_div: float,
    w: np.ndarray,
    d: np.ndarray,
    last_ms: np.ndarray,
    flags: np.ndarray,
    arousal: np.ndarray,
    allowed: np.ndarray | None,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """numpy twin of :func:`decay_topk`: float64 (c,) values and int64 (c,) rows, c <= k."""
    v = (w.astype(np.float64) / w_div) * decayed_numpy(law, now_ms, d, last_ms, flags, arousal)
    rows = np.arange(len(v)) if allowed is None else np.flatnonzero(allowed)
    order = rows[np.lexsort((rows, -v[rows]))[:k]]
    return v[order], order


def decay_topk(
    law: DecayLaw,
    now_ms: int,
    w_div: float,
    w: np.ndarray,
    d: np.ndarray,
    last_ms: np.ndarray,
    flags: np.ndarray,
    arousal: np.ndarray,
    allowed: np.ndarray | None,
    k: int,
    *,
    horizon: bool = False,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The ``k`` allowed rows with the largest ``v`` (module docstring), best first.

    Args:
        w: float32 (N,) weights; d: float32 (N,) values at the last event; last_ms: int64
            (N,) times of the last event; flags, arousal: uint8 (N,) — each may be a strided
            view (a field of a structured array); allowed: bool (N,) or None; k >= 1.

        horizon: also find the earliest time (ms, a lower bound) at which any allowed row's
            bucket may change: until then the answer stays the same (costs the pruning).

    Returns:
        ``(values float64 (c,), rows int64 (c,), until_ms)`` with c = min(k, allowed rows);
        ``until_ms`` is the horizon, or ``now_ms`` when not asked for (or without the native
        kernels).
    """
    n = len(d)
    if native is None:
        v, r = decay_topk_reference(law, now_ms, w_div, w, d, last_ms, flags, arousal, allowed, k)
        return v, r, int(now_ms)
    keys = np.empty(k, dtype=np.float64)
    rows = np.empty(k, dtype=np.int64)
    got = native.decay_topk(
        n,
        int(now_ms),
        float(w_div),
        w,
        flags,
        arousal,
        d,
        last_ms,
        allowed,
        int(law.freeze_set),
        int(law.need_set),
        law.edges,
        law.factors,
        keys,
        rows,
        horizon,
    )
    count, until = got if horizon else (got, now_ms)
    return keys[:count], rows[:count], int(until)
