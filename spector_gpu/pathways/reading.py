"""The shared read layer: what every read of stored memories uses — the gates, hydration and
retrieval strength over one cortex.

Recall, listing (``list``, ``count``, ``get_by_external_id``), ``get`` and lineage
(``explain(include_parents=True)``) read through one :class:`ReadLayer` instead of each
building its own (or a whole recall pathway to reach its private helpers), so a memory
hydrated by any of them carries the same fields and the same D.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..cortex import Cortex
from ..types import CognitiveResult, RecallOptions
from .recall.gates import gate_mask
from .recall.hydration import Hydrator, retrieval_strength
from .recall.lifecycle_gates import unexpired

__all__ = ["ReadLayer"]


class ReadLayer:
    """Gates, hydration and retrieval strength of one cortex (the caller holds its lock)."""

    def __init__(self, cortex: Cortex, hydrator: Hydrator | None = None) -> None:
        self.cortex = cortex
        self.hydrator = hydrator if hydrator is not None else Hydrator(cortex)

    def passing(self, options: RecallOptions, now_ms: int) -> np.ndarray:
        """bool (n,): the rows ``options``' gates let through that are unexpired at
        ``now_ms`` (deleted and replaced rows never pass)."""
        return unexpired(self.cortex, gate_mask(self.cortex, options), now_ms)

    def strength(self, ordinals: np.ndarray | Sequence[int], now_ms: int) -> np.ndarray:
        """float64 (m,): retrieval strength D of ``ordinals`` at ``now_ms``."""
        return retrieval_strength(self.cortex, np.asarray(ordinals, dtype=np.int64), now_ms)

    def hydrated(self, ordinals: np.ndarray | Sequence[int], now_ms: int) -> list[CognitiveResult]:
        """The memories at ``ordinals``, in that order, each with its D at ``now_ms`` (score None:
        no query ranked them)."""
        rows = np.asarray(ordinals, dtype=np.int64)
        if rows.size == 0:
            return []
        d = self.strength(rows, now_ms)
        return [self.hydrator.result(int(o), None, float(dd)) for o, dd in zip(rows, d)]
