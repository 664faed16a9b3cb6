"""Per-hit explanations of a recall: the values the fusion used for each result
(``RecallOptions.explain``)."""

from __future__ import annotations

import numpy as np
import torch

from ...types import Explanation, RelayExplanation
from .fusion import Fused
from .gates import active_gates
from .relays import RecallPlan

__all__ = ["explanations"]


def explanations(
    plan: RecallPlan,
    fz: Fused,
    at: torch.Tensor,
    hit: torch.Tensor,
    d: np.ndarray,
    s: np.ndarray,
) -> list[list[Explanation]]:
    """Per query, the explanation of each hit (the values the fusion used)."""

    def take(t: torch.Tensor) -> np.ndarray:
        return torch.gather(t, 1, at).cpu().numpy()

    raw = {name: take(v) for name, v in fz.raw.items()}
    ranks = {name: take(v) for name, v in fz.ranks.items()}
    rel, fac, fus = take(fz.relevance), take(fz.factor), take(fz.fused)
    lift = None if fz.time_lift is None else take(fz.time_lift)
    gates = active_gates(plan.opts)
    out = []
    for i, row in enumerate(hit.cpu().numpy()):
        items = []
        for j in np.flatnonzero(row).tolist():
            relays: dict[str, RelayExplanation] = {
                name: RelayExplanation(
                    score=float(raw[name][i, j])
                    if name in raw and np.isfinite(raw[name][i, j])
                    else None,
                    rank=int(ranks[name][i, j]) or None if name in ranks else None,
                    weight=plan.weights[name],
                )
                for name in plan.opts.relays
            }
            items.append(
                Explanation(
                    relays=relays,
                    base=float(rel[i, j]),
                    cognitive_factor=float(fac[i, j]),
                    fused=float(fus[i, j]),
                    retrieval_strength=float(d[i, j]),
                    storage_strength=float(s[i, j]),
                    gates=gates,
                    time_cue=0.0 if lift is None else float(lift[i, j]),
                )
            )
        out.append(items)
    return out
