"""The read side of the facade: recall, recall_batch, get."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager

import numpy as np

from ..cortex.cortex import Cortex
from ..cortex.working import WorkingMemory
from ..errors import ValidationError
from ..pathways.limits import check_recall
from ..pathways.reading import ReadLayer
from ..pathways.recall import RecallPathway
from ..pathways.recall.learning import OwedLearning
from ..pathways.recall.scorer import Scored
from ..pathways.recall.stacked import StackPart
from ..pathways.reinforcement import StrengthUpdater
from ..pathways.versions import alive
from ..provenance.record import RecordProvenance
from ..rwlock import RWLock
from ..types import CognitiveResult, MemoryType, RecallBatch, RecallOptions
from ._holds import exclusive, reading
from ._ids import ordinal_of

__all__ = ["MemoryRecall"]


class MemoryRecall:
    """Read side: recall, recall_batch, get, each under the handle's lock shared. A ``learn``
    recall (onRecall rewrites strength rows) scores and builds its batch under the shared
    hold, then applies onRecall under the exclusive one (:mod:`.pathways.recall.learning`)."""

    def __init__(
        self,
        cortex: Cortex,
        strength: StrengthUpdater,
        working: WorkingMemory,
        lock: RWLock,
    ) -> None:
        self.cortex = cortex
        self.pathway = RecallPathway(cortex, strength, lock=lock.read())
        self.reader = ReadLayer(cortex, self.pathway.hydrator)  # recall's own hydrator, shared
        self.working = working
        self.lock = lock

    def recall(self, query: str, options: RecallOptions | None = None) -> list[CognitiveResult]:
        self._check([query], options, single=True)
        with reading(self.lock, self.cortex):  # scored and hydrated in one hold: one state
            batch, owed = self.pathway.recall_owing([query], options)
            hits = batch.results(0)
        self._learn(owed)
        return hits

    def recall_batch(
        self, queries: Sequence[str], options: RecallOptions | None = None
    ) -> RecallBatch:
        self._check(queries, options)
        with reading(self.lock, self.cortex):
            batch, owed = self.pathway.recall_owing(queries, options)  # hydrates under one too
        self._learn(owed)
        return batch

    def recall_vectors(self, vectors: object, options: RecallOptions | None = None) -> RecallBatch:
        """Recall by query embeddings (:meth:`.RecallPathway.recall_vectors`), checked here:
        a float array (n, dim) of finite values, within the recall caps."""
        dim = self.cortex.embedder.dim
        try:
            arr = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError):
            raise ValidationError(
                f"vectors must be numbers, float (n, {dim}); got {type(vectors).__name__}"
            ) from None
        if arr.ndim != 2 or arr.shape[1] != dim:
            raise ValidationError(
                f"vectors must have shape (n, {dim}) (this store's embedder dimension), "
                f"got {arr.shape}"
            )
        if not np.isfinite(arr).all():
            raise ValidationError("vectors hold NaN or inf")
        self._check(["vector"] * len(arr), options)  # the caps of as many queries
        with reading(self.lock, self.cortex):
            batch, owed = self.pathway.recall_owing([], options, arr)
        self._learn(owed)
        return batch

    def stack_part(
        self,
        queries: Sequence[str],
        options: RecallOptions | None = None,
        vectors: np.ndarray | None = None,
    ) -> StackPart | None:
        """``recall_batch``'s checks and plan as a part of a stacked batch (``MultiStore``:
        :meth:`.RecallPathway.stack_part`); the caller holds :meth:`stacking` until it has
        the part's batch (:meth:`stacked_batch`)."""
        self._check(queries, options)
        return self.pathway.stack_part(queries, options, vectors)

    def stacking(self) -> AbstractContextManager[None]:
        """The hold a stacked batch keeps on this store: exclusive (a read-only handle
        refreshed in it), as the stacked scoring runs outside the pathway's scoring hold."""
        return exclusive(self.lock, self.cortex)

    def _learn(self, owed: OwedLearning | None) -> None:
        """Apply a ``learn`` recall's onRecall under the exclusive hold (after its reads)."""
        if owed is not None:
            with self.lock.write():
                self.pathway.learn(owed)

    def stacked_batch(self, scored: Scored) -> RecallBatch:
        """The batch of a stacked part's scores, hydrated under this handle's lock."""
        return self.pathway.batch_of(scored)

    def cue(self, text: str) -> str | None:
        """The memory a text names: its best recall hit, recalled without side effects
        (``"cue"`` on the hub: wander's text cues)."""
        hits = self.recall(text, RecallOptions(k=1, mode="observe"))
        return hits[0].id if hits else None

    def _check(self, queries: object, options: object, *, single: bool = False) -> None:
        """The call's caps and queries (:func:`~..pathways.limits.check_recall`)."""
        if options is not None and not isinstance(options, RecallOptions):
            raise ValidationError(f"options must be a RecallOptions, got {type(options).__name__}")
        limits = self.cortex.config.recall
        k = options.k if options is not None else limits.k
        check_recall(queries, k, limits, single=single)

    def get(self, memory_id: str) -> CognitiveResult | None:
        with reading(self.lock, self.cortex):
            c = self.cortex
            c.part.check_usable()
            o = ordinal_of(c, memory_id)
            if o is None:
                return self._working(memory_id)
            if o in c.quarantined:
                raise c.quarantine_error(o, memory_id)
            now = int(time.time() * 1000)
            if not alive(c, o, now):  # deleted or expired: gone from every read
                return None
            return self.reader.hydrated([o], now)[0]

    def _working(self, memory_id: str) -> CognitiveResult | None:
        t = self.working.get(memory_id)
        if t is None:
            return None
        return CognitiveResult(
            id=t.id,
            text=t.text,
            score=None,
            memory_type=MemoryType.WORKING,
            importance=t.importance,
            provenance=RecordProvenance.USER_AUTHORED,
            retrieval_strength=1.0,
            storage_strength=1.0,
            timestamp_ms=t.timestamp_ms,
            session_id=0,
            tags=t.tags,
        )
