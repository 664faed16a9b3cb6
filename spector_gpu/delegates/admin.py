"""Administration behind the facade: counts, integrity, event chain, bundles, snapshots."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from typing import cast

from .. import checks
from ..cortex.cortex import Cortex
from ..cortex.ids import encode_tsid
from ..cortex.lifecycle import tombstoned
from ..cortex.working import WorkingMemory
from ..errors import CorruptionError, ReadOnlyStoreError, ValidationError
from ..pathways.check import CheckReport, check_store
from ..pathways.export import export_bundle
from ..pathways.reinforcement import StrengthUpdater
from ..provenance.bundle import BundleInfo, BundleReport, verify_bundle
from ..provenance.chain import ChainBreak, ChainReport, RecordLog, verify_chain
from ..rwlock import RWLock
from ..types import MemoryType, Recovery
from ._holds import reading

__all__ = ["MemoryAdminView", "flush_store"]


def flush_store(cortex: Cortex, strength: StrengthUpdater) -> None:
    """Write deferred strength updates and a derived-index snapshot now (the caller holds the
    handle's lock)."""
    part = cortex.part
    part.check_usable()
    if part.failed is not None:
        part.check_writable()  # a failed handle refuses, saying why
    strength.flush()
    cortex.save_snapshot()


class _UpToDamage:
    """The event log's records up to the first damaged frame (kept in ``damage``)."""

    def __init__(self, log: RecordLog) -> None:
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
        lock: RWLock,
        public_key: bytes | None = None,
    ) -> None:
        self.cortex = cortex
        self.strength = strength
        self.working = working
        self.lock = lock
        self.public_key = public_key

    def count(self, memory_type: MemoryType | str | None = None) -> int:
        with reading(self.lock, self.cortex):
            c = self.cortex
            c.part.check_usable()
            if memory_type is None:
                return c.n
            t = MemoryType.parse(memory_type)
            if t == MemoryType.WORKING:
                return len(self.working)
            return int((c.cols.index["type"][: c.n] == t).sum())

    def check(self) -> CheckReport:
        with reading(self.lock, self.cortex):
            self.cortex.part.check_usable()
            return check_store(self.cortex)

    def verify_chain(self, *, public_key: bytes | None = None) -> ChainReport:
        """Verify the event chain; damaged log framing is reported as a break, never raised."""
        if public_key is not None and not (isinstance(public_key, bytes) and len(public_key) == 32):
            raise ValidationError(
                f"public_key must be 32 bytes (an Ed25519 public key) or None, got "
                f"{type(public_key).__name__}"
            )
        with reading(self.lock, self.cortex):
            self.cortex.part.check_usable()
            log = _UpToDamage(self.cortex.events)
            report = verify_chain(log, public_key=public_key or self.public_key)
            if log.damage is None:
                return report
            why = f"events log unreadable from here on: {log.damage}"
            breaks = [*report.breaks, ChainBreak(report.events, why)]
            return replace(report, ok=False, breaks=breaks)

    def flush(self) -> None:
        """Write deferred strength updates and a derived-index snapshot now."""
        with self.lock:
            flush_store(self.cortex, self.strength)

    def export_bundle(
        self, memory_id: str, path: str | os.PathLike[str], *, include_parents: bool = True
    ) -> BundleInfo:
        where = checks.path(path, "path")
        parents = checks.boolean(include_parents, "include_parents")
        with reading(self.lock, self.cortex):  # writes a file outside the store, reads it
            return export_bundle(self.cortex, memory_id, where, include_parents=parents)

    def verify_bundle(self, path: str | os.PathLike[str]) -> BundleReport:
        # a path that names no readable bundle is a report (ok False); a non-path is refused
        if not isinstance(path, (str, os.PathLike)):
            raise ValidationError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        return verify_bundle(path)

    @property
    def recovery(self) -> Recovery:
        return cast(Recovery, dict(self.cortex.recovery))

    def external_ids(self) -> dict[str, str]:
        """``{external_id: memory id}`` for every memory that has one."""
        with reading(self.lock, self.cortex):
            c = self.cortex
            return {
                e: encode_tsid(int(c.cols.ids[i]))
                for i, e in enumerate(c.cues.external_id)
                if e is not None
                and c.cols.current[i]
                and not tombstoned(c.cols.headers[i : i + 1])[0]
            }
