"""WriteBatch: everything one commit of the store writes, as typed values (no bytes).

A pathway fills a batch and hands it to :meth:`~spector_gpu.cortex.cortex.Cortex.write`,
which encodes every part through the store that owns its layout, commits it as one journaled
transaction (all or nothing) and brings the in-memory state up to date.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ValidationError
from ..types import MemoryType, Source
from .payload import Payload
from .provenance_store import LineageRun

__all__ = ["NewMemories", "WriteBatch"]

_DURABLE_TYPES = (int(MemoryType.EPISODIC), int(MemoryType.SEMANTIC), int(MemoryType.PROCEDURAL))


@dataclass(frozen=True)
class NewMemories:
    """``m`` new memories, struct of arrays (row ``k`` of every field is memory ``k``).

    Attributes:
        ids: int64 (m,) TSIDs, none already stored.
        types: int (m,) ``MemoryType`` values: EPISODIC, SEMANTIC or PROCEDURAL.
        payloads: the ``m`` payloads (text, session, speaker, tags, citations, ...).
        sequences: int (m,) per-session sequence of each episode, -1 for the other types.
        vectors: float32 (m, dim) finite embeddings (quantised to the vector slab).
        timestamp_ms: int64 (m,) formation time, epoch ms.
        importance: float (m,) in [0.05, 10]; valence: int (m,) in [-127, 127];
            arousal: int (m,) in [0, 255]; pinned: bool (m,).
        provenance: int (m,) ``RecordProvenance`` values.
        source: the batch's ``Source`` (EXPERIENCED, DISTILLED, ...).
        now_ms: creation time of the strength rows (D = 1, S = 1), epoch ms.
        expires_ms: int64 (m,) epoch ms after which each memory is gone (0 = never), or None.
        replaces: int64 (m,) the ordinal each row is a newer version of (its TSID's current
            row, which the commit marks REPLACED; -1 for a new memory), or None (all new).
        consolidation_flags: the batch's header ``consolidation_flags`` byte (0; a dream
            writes SIMULATED | DREAMED).
        token_rows: the memories' token rows, ``(lengths, ids)`` as
            :meth:`~spector_gpu.cortex.token_rows.TokenVocab.rows` gives them for
            :func:`~spector_gpu.cortex.token_rows.memory_words` of each payload, when the
            pathway made them (the remember pathway does, beside each embedding group, while
            the tokeniser holds the group's lines); None: made when the batch is adopted.
    """

    ids: np.ndarray
    types: np.ndarray
    payloads: Sequence[Payload]
    sequences: np.ndarray
    vectors: np.ndarray
    timestamp_ms: np.ndarray
    importance: np.ndarray
    valence: np.ndarray
    arousal: np.ndarray
    pinned: np.ndarray
    provenance: np.ndarray
    source: Source
    now_ms: int
    expires_ms: np.ndarray | None = None
    replaces: np.ndarray | None = None
    consolidation_flags: int = 0
    token_rows: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def check(self, dim: int) -> None:
        """``ValidationError`` naming the field whose shape or type does not fit ``m`` rows."""
        m = len(self.ids)
        if self.vectors.shape != (m, dim):
            raise ValidationError(f"vectors has shape {self.vectors.shape}, expected ({m}, {dim})")
        for name in ("types", "sequences", "timestamp_ms", "importance", "valence", "arousal"):
            if len(getattr(self, name)) != m:
                raise ValidationError(f"{name} has {len(getattr(self, name))} rows, expected {m}")
        if len(self.pinned) != m or len(self.provenance) != m or len(self.payloads) != m:
            raise ValidationError(f"pinned, provenance and payloads must have {m} rows")
        if not np.isin(self.types, _DURABLE_TYPES).all():
            raise ValidationError("types must be EPISODIC, SEMANTIC or PROCEDURAL")
        for name in ("expires_ms", "replaces"):
            col = getattr(self, name)
            if col is not None and len(col) != m:
                raise ValidationError(f"{name} has {len(col)} rows, expected {m}")
        if self.token_rows is not None:
            lengths, ids = self.token_rows
            if lengths.shape != (m,) or int(lengths.sum()) != len(ids):
                raise ValidationError(f"token_rows must hold {m} rows whose lengths sum to the ids")

    def previous(self) -> np.ndarray:
        """int64 (m,): :attr:`replaces`, -1 everywhere when None."""
        if self.replaces is None:
            return np.full(len(self.ids), -1, dtype=np.int64)
        return np.asarray(self.replaces, dtype=np.int64)


@dataclass(frozen=True)
class WriteBatch:
    """The parts of one commit; any may be empty (an empty batch still commits deferred
    strength updates and queued events).

    Attributes:
        memories: new memories, appended at ordinals ``n ..``.
        consolidate: ordinals whose header gets the consolidated bit.
        record_provenance: ordinal -> ``RecordProvenance`` value to stamp in its header.
        lineage: the PARTIAL lineage records of a planned consolidation run.
        lineage_live: ``(session, pass)`` whose PARTIAL records turn LIVE (their lineage
            edges join the association graph when the commit is adopted).
        tombstone: ordinals whose header gets the TOMBSTONE bit (every row of a deleted
            memory: ``cortex.lifecycle``).
    """

    memories: NewMemories | None = None
    consolidate: Sequence[int] = ()
    record_provenance: Mapping[int, int] = field(default_factory=dict)
    lineage: LineageRun | None = None
    lineage_live: tuple[int, int] | None = None
    tombstone: Sequence[int] = ()

    def replaced(self) -> list[int]:
        """Ordinals the new memories replace (they get the REPLACED bit)."""
        if self.memories is None:
            return []
        prev = self.memories.previous()
        out: list[int] = prev[prev >= 0].tolist()
        return out

    def header_updates(self) -> list[int]:
        """Ordinals whose header this batch rewrites, each once, in the order given."""
        return list(
            dict.fromkeys(
                [*self.consolidate, *self.record_provenance, *self.tombstone, *self.replaced()]
            )
        )

    def rewrites_existing(self) -> bool:
        """True when the commit changes what gates read of memories already stored (so no
        recall cache may extend across it: ``pathways.recall.state``)."""
        if self.tombstone or self.replaced():
            return True
        mem = self.memories
        return mem is not None and any(p.supersedes for p in mem.payloads)
