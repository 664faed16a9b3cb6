"""The four delegates behind the ``SpectorMemory`` facade (seed ADR-0047).

Each is constructible and testable alone against a shared :class:`~spector_gpu.cortex.cortex.Cortex`
and takes the cortex lock around its work; the facade only wires them and forwards calls.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .cortex.cortex import Cortex
from .cortex.working import Thought, WorkingMemory
from .errors import CorruptionError, ReadOnlyStoreError, UnknownIdError, ValidationError
from .pathways.check import CheckReport, check_store
from .pathways.recall import RecallPathway, retrieval_strength
from .pathways.reinforcement import StrengthUpdater
from .pathways.remember import RememberPathway
from .provenance.chain import ChainBreak, ChainReport, EventChain, verify_chain
from .provenance.record import RecordProvenance
from .storage.tsid import TsidGenerator, decode_tsid, encode_tsid
from .types import CognitiveResult, MemoryType, RecallBatch, RecallOptions

__all__ = ["MemoryAdminView", "MemoryRecall", "MemoryReflection", "MemoryRemember", "ordinal_of"]


def ordinal_of(cortex: Cortex, memory_id: Any) -> int | None:
    """Ordinal of a TSID string; None if absent or malformed; ValidationError if not a str."""
    if not isinstance(memory_id, str):
        raise ValidationError(f"memory id must be a TSID string, got {type(memory_id).__name__}")
    try:
        return cortex.id_map.get(decode_tsid(memory_id))
    except ValidationError:
        return None


class MemoryRemember:
    """Write side: remember, remember_batch, working memory, reinforce, forget."""

    def __init__(
        self,
        cortex: Cortex,
        chain: EventChain,
        strength: StrengthUpdater,
        working: WorkingMemory,
        lock: threading.RLock,
        ids: TsidGenerator,
    ) -> None:
        self.cortex = cortex
        self.pathway = RememberPathway(cortex, chain, ids)
        self.chain = chain
        self.strength = strength
        self.working = working
        self.lock = lock
        self.ids = ids

    def remember(self, text: str, **fields: Any) -> str:
        item = {"text": text, **{k: v for k, v in fields.items() if v is not None}}
        return self.remember_batch([item])[0]

    def remember_batch(self, items: Sequence[str | Mapping[str, Any]]) -> list[str]:
        with self.lock:
            return self.pathway.remember_batch(items)

    def remember_working(
        self, text: str, *, importance: float = 1.0, tags: Sequence[str] = ()
    ) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("working memory text must be a non-empty string")
        with self.lock:
            tid = self.ids.next()
            self.working.add(
                Thought(tid, text, int(time.time() * 1000), float(importance), tuple(tags))
            )
            return tid

    def _ordinal(self, memory_id: str) -> int:
        """Ordinal of a memory a write may update; a quarantined one raises ``CorruptionError``
        (its in-memory values stand in for damaged ones and must not reach the disk)."""
        o = ordinal_of(self.cortex, memory_id)
        if o is None:
            raise UnknownIdError(f"no memory with id {memory_id!r} in {self.cortex.path}")
        if o in self.cortex.quarantined:
            raise self.cortex.quarantine_error(o, memory_id)
        return o

    def reinforce(self, memory_id: str, valence: int = 0) -> None:
        """Explicit reinforcement: S += 0.1·(1−D) (capped at 5), D back to 1, valence stored."""
        if isinstance(valence, bool) or not isinstance(valence, int) or not -127 <= valence <= 127:
            raise ValidationError(f"valence must be an int in [-127, 127], got {valence!r}")
        with self.lock:
            o = self._ordinal(memory_id)
            self.cortex.part.check_writable()
            self.chain.append("reinforce", memory_id, {"valence": valence})
            self.strength.apply_now(np.array([o]), "reinforce", valence)

    def forget(self, memory_id: str) -> None:
        """Lower retrieval strength D (× strength.forget_factor); S is never lowered."""
        with self.lock:
            o = self._ordinal(memory_id)
            self.cortex.part.check_writable()
            self.chain.append("forget", memory_id, {})
            self.strength.apply_now(np.array([o]), "forget")


class MemoryRecall:
    """Read side: recall, recall_batch, get."""

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
                t = self.working.get(memory_id)
                if t is None:
                    return None
                return CognitiveResult(
                    id=t.id,
                    text=t.text,
                    score=0.0,
                    memory_type=MemoryType.WORKING,
                    importance=t.importance,
                    provenance=_user_authored(),
                    retrieval_strength=1.0,
                    storage_strength=1.0,
                    timestamp_ms=t.timestamp_ms,
                    session_id=0,
                    tags=t.tags,
                )
            if o in c.quarantined:
                raise c.quarantine_error(o, memory_id)
            d = retrieval_strength(c, np.array([o]), int(time.time() * 1000))
            return self.pathway.hydrator.result(o, 0.0, float(d[0]))


def _user_authored() -> RecordProvenance:
    return RecordProvenance.USER_AUTHORED


class MemoryReflection:
    """Consolidation and lineage (see :mod:`spector_gpu.pathways.reflect`)."""

    def __init__(self, cortex: Cortex, remember: MemoryRemember, lock: threading.RLock) -> None:
        from .pathways.reflect import ReflectPathway

        self.cortex = cortex
        self.pathway = ReflectPathway(cortex, remember.pathway)
        self.lock = lock

    def consolidate(
        self,
        *,
        sessions: Sequence[int] | None = None,
        distiller: Any = None,
        max_sessions: int | None = None,
    ) -> Any:
        with self.lock:
            return self.pathway.consolidate(
                sessions=sessions, distiller=distiller, max_sessions=max_sessions
            )

    def explain(self, memory_id: str, *, include_parents: bool = False) -> Any:
        with self.lock:
            return self.pathway.explain(memory_id, include_parents=include_parents)

    def session_provenance(self, session_id: int) -> list[Any]:
        with self.lock:
            return self.pathway.session_provenance(session_id)

    def backfill_provenance(self, *, execute: bool = False) -> Any:
        with self.lock:
            return self.pathway.backfill_provenance(execute=execute)


class _UpToDamage:
    """The event log's records up to the first damaged frame (kept in ``damage``)."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self.damage: CorruptionError | None = None

    def append(self, data: bytes) -> None:  # pragma: no cover - read-only view
        raise ReadOnlyStoreError("a verification view of the event log is read-only")

    def records(self) -> Iterator[bytes]:
        try:
            yield from self.log.records()
        except CorruptionError as exc:
            self.damage = exc


class MemoryAdminView:
    """Administration: counts, integrity, event chain, forensic bundles, snapshots."""

    def __init__(
        self,
        cortex: Cortex,
        strength: StrengthUpdater,
        working: WorkingMemory,
        lock: threading.RLock,
        public_key: bytes | None = None,
    ) -> None:
        self.cortex = cortex
        self.strength = strength
        self.working = working
        self.lock = lock
        self.public_key = public_key

    def count(self, memory_type: MemoryType | str | None = None) -> int:
        with self.lock:
            c = self.cortex
            c.part.check_usable()
            if c.read_only:
                c.refresh()
            if memory_type is None:
                return c.n
            t = MemoryType.parse(memory_type)
            if t == MemoryType.WORKING:
                return len(self.working)
            return int((c.cols.index["type"][: c.n] == t).sum())

    def check(self) -> CheckReport:
        with self.lock:
            self.cortex.part.check_usable()
            return check_store(self.cortex)

    def verify_chain(self, *, public_key: bytes | None = None) -> ChainReport:
        """Verify the event chain; damaged log framing is reported as a break, never raised."""
        with self.lock:
            self.cortex.part.check_usable()
            log = _UpToDamage(self.cortex.events)
            report = verify_chain(log, public_key=public_key or self.public_key)
            if log.damage is None:
                return report
            why = f"events log unreadable from here on: {log.damage}"
            return replace(
                report, ok=False, breaks=[*report.breaks, ChainBreak(report.events, why)]
            )

    def flush(self) -> None:
        """Write deferred strength updates and a derived-index snapshot now."""
        with self.lock:
            part = self.cortex.part
            part.check_usable()
            if part.failed is not None:
                part.check_writable()  # a failed handle refuses, saying why
            self.strength.flush()
            self.cortex.save_snapshot()

    def export_bundle(
        self, memory_id: str, path: str | os.PathLike[str], *, include_parents: bool = True
    ) -> Any:
        from .pathways.export import export_bundle

        with self.lock:
            return export_bundle(self.cortex, memory_id, path, include_parents=include_parents)

    def verify_bundle(self, path: str | os.PathLike[str]) -> Any:
        from .provenance.bundle import verify_bundle

        return verify_bundle(path)

    @property
    def recovery(self) -> dict[str, Any]:
        return dict(self.cortex.recovery)

    def external_ids(self) -> dict[str, str]:
        """``{external_id: memory id}`` for every memory that has one."""
        with self.lock:
            c = self.cortex
            return {
                e: encode_tsid(int(c.cols.ids[i]))
                for i, e in enumerate(c.cues.external_id)
                if e is not None
            }
