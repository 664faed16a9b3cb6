"""The read side of the facade: recall, recall_batch, get."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from ..cortex.cortex import Cortex
from ..cortex.working import WorkingMemory
from ..errors import ValidationError
from ..pathways.recall import RecallPathway, retrieval_strength
from ..pathways.reinforcement import StrengthUpdater
from ..pathways.versions import alive
from ..provenance.record import RecordProvenance
from ..types import CognitiveResult, MemoryType, RecallBatch, RecallOptions
from ._ids import ordinal_of

__all__ = ["MemoryRecall"]


class MemoryRecall:
    """Read side: recall, recall_batch, get (each under the handle's lock)."""

    def __init__(
        self,
        cortex: Cortex,
        strength: StrengthUpdater,
        working: WorkingMemory,
        lock: threading.RLock,
    ) -> None:
        self.cortex = cortex
        self.pathway = RecallPathway(cortex, strength, lock=lock)
        self.working = working
        self.lock = lock

    def recall(self, query: str, options: RecallOptions | None = None) -> list[CognitiveResult]:
        if not isinstance(query, str):
            raise ValidationError(f"query must be a string, got {type(query).__name__}")
        return self.recall_batch([query], options).results(0)

    def recall_batch(
        self, queries: Sequence[str], options: RecallOptions | None = None
    ) -> RecallBatch:
        with self.lock:
            return self.pathway.recall_batch(queries, options)  # hydrates under self.lock

    def get(self, memory_id: str) -> CognitiveResult | None:
        with self.lock:
            c = self.cortex
            c.part.check_usable()
            if c.read_only:
                c.refresh()
            o = ordinal_of(c, memory_id)
            if o is None:
                return self._working(memory_id)
            if o in c.quarantined:
                raise c.quarantine_error(o, memory_id)
            now = int(time.time() * 1000)
            if not alive(c, o, now):  # deleted or expired: gone from every read
                return None
            d = retrieval_strength(c, np.array([o]), now)
            return self.pathway.hydrator.result(o, 0.0, float(d[0]))

    def _working(self, memory_id: str) -> CognitiveResult | None:
        t = self.working.get(memory_id)
        if t is None:
            return None
        return CognitiveResult(
            id=t.id,
            text=t.text,
            score=0.0,
            memory_type=MemoryType.WORKING,
            importance=t.importance,
            provenance=RecordProvenance.USER_AUTHORED,
            retrieval_strength=1.0,
            storage_strength=1.0,
            timestamp_ms=t.timestamp_ms,
            session_id=0,
            tags=t.tags,
        )
