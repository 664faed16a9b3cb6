"""The association neighbourhood as a walk sees it, shared by dream and wander.

:class:`Neighbourhood` answers, for one memory ordinal, which memories a walk may step to and
why: the same-session turns within ``association.temporal_window`` (kind ``temporal``), then
every extra edge of the association graph (``hebbian``, ``dream``, ``lineage`` or ``tag``), one
entry per neighbour with the largest weight among its edges (the recall's max-product rule).
Which memories are allowed is the recall's own gate mask (tombstones, retracted and — unless
asked — simulated memories never), less quarantined ones. A step is drawn with probability
proportional to ``(link weight × retrieval strength D) ** (1 / temperature)`` from a numpy
``Generator``, so a walk is a function of the store, the time and the seed alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cortex import Cortex
from ..types import MemoryType, RecallOptions
from .hebbian import HebbianLinks, pair_key
from .recall.gates import gate_mask
from .reinforcement import StrengthUpdater

__all__ = ["Candidate", "Neighbourhood", "draw"]


@dataclass(frozen=True)
class Candidate:
    """A memory one step away: its ordinal, the link's kind and weight."""

    ordinal: int
    kind: str
    weight: float


class Neighbourhood:
    """Neighbours, allowed memories and strengths of one store at one time ``now_ms``."""

    def __init__(
        self,
        cortex: Cortex,
        hebbian: HebbianLinks,
        strength: StrengthUpdater,
        now_ms: int,
        *,
        include_simulated: bool = False,
    ) -> None:
        self.cortex = cortex
        self.hebbian = hebbian
        self.now_ms = now_ms
        n = cortex.n
        allowed = gate_mask(cortex, RecallOptions(include_simulated=include_simulated))
        if cortex.quarantined:
            allowed[list(cortex.quarantined)] = False
        self.allowed: np.ndarray = allowed
        everyone = np.arange(n, dtype=np.int64)
        rows = strength.rows(everyone)
        self.strength: np.ndarray = (
            strength.current_d(everyone, rows, now_ms) if n else np.zeros(0, np.float32)
        )
        self.recalled_ms: np.ndarray = rows["last_recall_ms"].astype(np.int64)
        self.created_ms: np.ndarray = np.asarray(cortex.cols.created_ms[:n], dtype=np.int64)

    def _extra_kind(self, a: int, b: int, weight: float) -> str:
        h = self.hebbian
        if pair_key(a, b) in h.weights and h.weight(a, b) == weight:
            return "hebbian"
        if b in h.dream_edges.get(a, ()) or a in h.dream_edges.get(b, ()):
            return "dream"
        types = self.cortex.cols.index["type"]
        lineage = float(np.float32(self.cortex.config.association.lineage_weight))
        if weight == lineage and MemoryType.EPISODIC in (int(types[a]), int(types[b])):
            fact = a if int(types[a]) != MemoryType.EPISODIC else b
            if len(self.cortex.provenance.find_by_target(int(self.cortex.cols.ids[fact]))):
                return "lineage"
        return "tag"

    def of(self, node: int) -> list[Candidate]:
        """Allowed neighbours of ``node``, one per memory (largest weight), ascending ordinal."""
        c = self.cortex
        best: dict[int, Candidate] = {}
        window = c.config.association.temporal_window
        _, temporal = c.links.temporal_neighbours(np.array([node], dtype=np.int64), window)
        tw = float(c.config.association.temporal_weight)
        for j in temporal.tolist():
            best[j] = Candidate(j, "temporal", tw)
        for j, w in c.links.extra.get(node, ()):
            w32 = float(np.float32(w))
            if j not in best or w32 > best[j].weight:
                best[j] = Candidate(j, self._extra_kind(node, j, w32), w32)
        return [
            best[j]
            for j in sorted(best)
            if j != node and j < len(self.allowed) and self.allowed[j] and best[j].weight > 0
        ]


def draw(
    rng: np.random.Generator,
    candidates: list[Candidate],
    strength: np.ndarray,
    temperature: float,
) -> tuple[Candidate, float] | None:
    """One candidate drawn with probability ∝ ``(weight × D) ** (1 / temperature)``, and that
    probability; None when no candidate has a positive score."""
    if not candidates:
        return None
    score = np.array([c.weight * float(strength[c.ordinal]) for c in candidates], np.float64)
    score = np.maximum(score, 0.0) ** (1.0 / temperature)
    total = float(score.sum())
    if not total > 0 or not np.isfinite(total):
        return None
    p = score / total
    k = int(rng.choice(len(candidates), p=p))
    return candidates[k], float(p[k])
