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
from typing import Protocol

import numpy as np

from ...cortex.cortex import Cortex
from .columns import RecallColumns
from .hydration import Hydrator
from .relays.salience import SalienceCache
from .scorer import Scored
from .state import StoreVersion, VersionTracker

__all__ = ["OwedLearning", "StrengthWriter", "Strengthening"]


class StrengthWriter(Protocol):
    """Applies onRecall to the ordinals a ``learn`` recall returned, at ``now_ms`` (the
    recall's clock, epoch ms)."""

    def on_recall(self, ordinals: np.ndarray, now_ms: int) -> None: ...


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


class Strengthening:
    """onRecall of a recall's hits, and the recall caches following the strength rows it
    rewrites in place. ``writer``: the onRecall sink (a ``StrengthWriter``; None: observe)."""

    def __init__(
        self,
        cortex: Cortex,
        writer: StrengthWriter | None,
        tracker: VersionTracker,
        columns: RecallColumns,
        salience: SalienceCache,
    ) -> None:
        self.cortex, self.writer, self.tracker = cortex, writer, tracker
        self.columns, self.salience = columns, salience

    def now(
        self, hit: np.ndarray, now_ms: int, before: StoreVersion | None, patch: bool = True
    ) -> None:
        """onRecall of int64 ordinals ``hit`` at ``now_ms``; the device columns re-read those
        rows (``patch``), and a commit the onRecall's flush made is the caches' own when the
        store was at ``before`` (None: other writes came between; the caches re-sync)."""
        if self.writer is not None:
            self.writer.on_recall(hit, now_ms)
        if patch:
            self.columns.patch(self.cortex, hit)
        self.salience.clear()  # strength rows changed in place
        if before is not None:
            self.tracker.absorb(self.cortex, before)

    def owed(self, owed: OwedLearning) -> None:
        """Apply ``owed`` to the hits still there (the caller holds the lock exclusive)."""
        c = self.cortex
        if self.writer is None or c.part.closed:
            return
        rows = Hydrator(c).rows_now(owed.raw_ids, owed.ordinals, owed.epoch)
        hit = np.unique(rows[rows >= 0])
        if len(hit):
            same = self.tracker.current(c) == owed.before
            # a compaction renumbered the rows: the caches rebuild, nothing to patch
            self.now(hit, owed.now_ms, owed.before if same else None, owed.epoch == c.epoch)
