"""Strength updates: onRecall (deferred), reinforce and forget (committed at once).

onRecall changes soft state on every recall; making each recall a durable commit would put a
disk barrier on the read path. Updated rows are applied to the in-memory columns at once and
written with the next commit of the store (any write, a checkpoint, ``flush()``, or close) or
when ``flush_interval_s`` has passed at the next recall — like SQLite's synchronous=NORMAL for
this one kind of state. A crash can lose at most that window of recall counts, never a memory.
"""

from __future__ import annotations

import time

import numpy as np

from ..cortex import Cortex, WriteBatch, decayed

__all__ = ["StrengthUpdater"]


class StrengthUpdater:
    def __init__(self, cortex: Cortex, *, flush_interval_s: float = 1.0) -> None:
        self.cortex = cortex
        self.flush_interval_s = flush_interval_s
        self.pending: dict[int, np.ndarray] = {}
        self._last_flush = time.monotonic()
        cortex.defer_strength(self._take)

    def rows(self, ordinals: np.ndarray) -> np.ndarray:
        c = self.cortex
        rows = c.strength.read(ordinals)
        for k, o in enumerate(ordinals.tolist()):
            if o in self.pending:
                rows[k] = self.pending[o]
        return rows

    def current_d(self, ordinals: np.ndarray, rows: np.ndarray, now: int) -> np.ndarray:
        h = self.cortex.cols.headers[ordinals]
        return decayed(rows, now, h["flags"], h["arousal"], self.cortex.config.strength)

    def _adopt(self, ordinals: np.ndarray, rows: np.ndarray) -> None:
        c = self.cortex.cols
        c.d_event[ordinals] = rows["retrieval_strength"]
        c.last_event_ms[ordinals] = rows["last_recall_ms"]
        c.storage[ordinals] = rows["storage_strength"]

    def on_recall(self, ordinals: np.ndarray, now: int) -> None:
        """onRecall of ``ordinals`` at ``now`` (epoch ms: the recall's clock)."""
        c = self.cortex
        if c.read_only or c.part.failed is not None:
            return  # a read-only handle observes only
        rows = self.rows(ordinals)
        d = self.current_d(ordinals, rows, now)
        new = c.strength.on_recall(rows, now, c.cols.created_ms[ordinals], d)
        self._adopt(ordinals, new)
        for o, row in zip(ordinals.tolist(), new):
            self.pending[o] = row
        if time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def apply_now(self, ordinals: np.ndarray, kind: str, valence: int = 0) -> np.ndarray:
        """reinforce / forget: computed and committed immediately; returns the new rows."""
        c = self.cortex
        now = int(time.time() * 1000)
        rows = self.rows(ordinals)
        d = self.current_d(ordinals, rows, now)
        if kind == "reinforce":
            new = c.strength.reinforce(rows, now, d, valence)
        else:
            new = c.strength.forget(rows, now, d)
        for o, row in zip(ordinals.tolist(), new):
            self.pending[o] = row
        c.write(WriteBatch())  # the pending rows are taken with the commit
        self._adopt(ordinals, new)
        return new

    def _take(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The pending rows, handed to the cortex's next commit (and no longer pending)."""
        if not self.pending:
            return None
        ordinals = np.fromiter(self.pending, dtype=np.int64, count=len(self.pending))
        rows = self.cortex.strength.stack([self.pending[o] for o in ordinals.tolist()])
        self.pending.clear()
        self._last_flush = time.monotonic()
        return ordinals, rows

    def flush(self) -> None:
        """Commit the pending rows now (a read-only or failed handle has none to write)."""
        c = self.cortex
        if not self.pending or c.read_only or c.part.failed is not None:
            return
        c.write(WriteBatch())
