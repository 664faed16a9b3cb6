"""onRecall owed by a ``learn`` recall scored under a shared hold (see :mod:`.pathway`).

A ``learn`` recall strengthens what it returns. Scoring only reads, so the owner scores under
its lock's shared hold — beside other reads — and keeps an :class:`OwedLearning`; it then takes
the exclusive hold and :meth:`.RecallPathway.learn` applies it. Writes may run in between: the
hits are found again by id (a compaction renumbers rows), a memory deleted since is skipped,
and the pathway's caches take the in-place strength update as their own only when nothing
else changed the store (else they re-sync from it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .scorer import Scored
from .state import StoreVersion

__all__ = ["OwedLearning"]


@dataclass(frozen=True)
class OwedLearning:
    """The hits a ``learn`` recall returned and the state it scored them in.

    Attributes:
        ordinals: int64 (h,) distinct hit ordinals, as scored.
        raw_ids: int64 (h,) their TSIDs (to find them again after a compaction).
        now_ms: the recall's clock (epoch ms): onRecall is stamped with it.
        before: the store version the recall scored at.
        epoch: the cortex epoch the ordinals belong to.
    """

    ordinals: np.ndarray
    raw_ids: np.ndarray
    now_ms: int
    before: StoreVersion
    epoch: int

    @classmethod
    def of(
        cls, scored: Scored, ids: np.ndarray, now_ms: int, before: StoreVersion, epoch: int
    ) -> OwedLearning | None:
        """What ``scored`` owes (``ids``: int64 TSIDs of every row), None without a hit."""
        hit = np.unique(scored.ordinals[scored.ordinals >= 0]).astype(np.int64)
        if not len(hit):
            return None
        return cls(hit, ids[hit].astype(np.int64), now_ms, before, epoch)
