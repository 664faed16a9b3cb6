"""Damage handling of an open store: report it, seal off damaged entries, quarantine values.

A mixin of :class:`~spector_gpu.cortex.cortex.Cortex`. ``store.strict`` refuses to open on any
corruption; otherwise damage is reported (``recovery["corruption"]``, a warning in the log,
and ``check()``) and contained:

* a damaged index entry (CRC, slot, type, a location outside its store, a repeated id) becomes
  a placeholder that joins no typed store, is left out of recall and raises when read
  (:meth:`QuarantineMixin._seal_off`);
* a header or strength value the write path never produces is kept out of recall arithmetic
  (:meth:`QuarantineMixin._quarantine`); the memory raises when read;
* damage the index cannot be read past turns the handle read-only (``structural``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import CorruptionError
from ..storage.partition import Partition
from ..storage.region import Region
from ..types import MemoryType
from .columns import Columns
from .episodic import EpisodicMemory
from .index import IndexMemory
from .layouts import FLAG_TOMBSTONE
from .slots import ProceduralMemory, SemanticMemory

__all__ = ["QuarantineMixin"]

log = logging.getLogger(__name__)
_DAMAGED_TYPE = MemoryType.WORKING  # a quarantined index entry's placeholder type (never durable)


class QuarantineMixin:
    """Finds, reports and contains damage; the cortex sets the attributes declared here."""

    path: Path
    config: Config
    part: Partition
    read_only: bool
    recovery: dict[str, Any]
    index: IndexMemory
    index_region: Region
    episodic: EpisodicMemory
    semantic: SemanticMemory
    procedural: ProceduralMemory
    id_map: dict[int, int]
    cols: Columns
    quarantined: set[int]  # ordinals with damaged header/strength values
    damaged_entries: set[int]  # quarantined ordinals whose index entry is damaged

    def report_corruption(self, exc: CorruptionError, *, structural: bool = False) -> None:
        """Record damage found while opening (or raise it under ``store.strict``)."""
        if self.config.store.strict:
            raise exc
        log.warning("%s: %s", self.path, exc)
        self.recovery.setdefault("corruption", []).append(str(exc))
        if structural and not self.read_only and self.part.failed is None:
            self.part.failed = exc  # point-in-time view: refuse writes on top of it

    def quarantine_error(self, i: int, memory_id: str | None = None) -> CorruptionError:
        """The error a read of quarantined ordinal ``i`` raises, naming what is damaged."""
        name = f"memory {memory_id}" if memory_id else f"memory ordinal {i}"
        if i in self.damaged_entries:
            return CorruptionError(
                f"{self.index_region.path}: {name}: index entry {i} is damaged; the memory is "
                "quarantined (run check() for details)",
                file=self.index_region.path,
                region="index",
                slot=i,
            )
        return CorruptionError(
            f"{self.path}: {name} has a damaged header or strength record "
            "(run check() for details)",
            file=str(self.path),
            slot=i,
        )

    def _check_tail(self, n: int) -> None:
        """Validate only what open must: the episodes the last index entries point at (a
        damaged entry itself is quarantined by ``_ingest_primary``)."""
        if not n:
            return
        entries, bad = self.index.scan(max(0, n - 8), n)
        for e in entries[~bad]:
            if int(e["type"]) == MemoryType.EPISODIC:
                self.episodic.verify(int(e["record_offset"]), int(e["id"]))

    def _verify_slot(self, i: int, verify: bool) -> None:
        if i in self.damaged_entries:
            raise self.quarantine_error(i)
        if verify:
            e = self.cols.index[i]
            store = self.semantic if int(e["type"]) == MemoryType.SEMANTIC else self.procedural
            store.verify_slot(int(e["record_offset"]), int(e["id"]))

    def _repeated_ids(self, ids: np.ndarray, bad: np.ndarray) -> None:
        """Mark (in ``bad``) entries repeating the id of an earlier good entry or of a memory
        already loaded: sealed that way, the later entry is the damage."""
        good = np.flatnonzero(~bad)
        g = ids[good]
        order = np.argsort(g, kind="stable")
        repeat = np.zeros(len(g), dtype=bool)
        repeat[order[1:]] = g[order[1:]] == g[order[:-1]]
        bad[good[repeat]] = True
        if self.id_map:
            for k in np.flatnonzero(~bad).tolist():
                if int(ids[k]) in self.id_map:
                    bad[k] = True

    def _seal_off(
        self, entries: np.ndarray, bad: np.ndarray, srows: np.ndarray, sok: np.ndarray, start: int
    ) -> np.ndarray:
        """Quarantine the damaged index entries ``entries[bad]`` (in place): each becomes a
        placeholder that joins no typed store (type WORKING, which no durable entry has; no
        location), is left out of recall and raises when read. Its id is taken only from
        evidence that survives the damage, the owner field of its CRC-valid strength row (then
        ``get(id)`` raises ``CorruptionError`` naming it); otherwise it has no id and is simply
        not found. Returns the mask of entries left without an id."""
        unnamed = np.zeros(len(entries), dtype=bool)
        named = set(self.id_map) | {int(t) for t in entries["id"][~bad].tolist()}
        for k in np.flatnonzero(bad).tolist():
            owner = int(srows["owner"][k]) if sok[k] else 0
            ok = owner > 0 and owner not in named
            named.add(owner)
            entries["id"][k] = owner if ok else 0
            unnamed[k] = not ok
            entries["type"][k] = int(_DAMAGED_TYPE)
            entries["record_offset"][k] = -1
            entries["text_offset"][k] = -1
            entries["text_length"][k] = 0
            entries["graph_slot"][k] = start + k
        ords = (start + np.flatnonzero(bad)).tolist()
        self.damaged_entries.update(ords)
        self.quarantined.update(ords)
        self.report_corruption(
            CorruptionError(
                f"{self.index_region.path}: {len(ords)} index entries are damaged (CRC, slot, "
                f"type, location or owner; first: entry {ords[0]}); their memories are "
                "quarantined: left out of recall, they raise when read",
                file=self.index_region.path,
                region="index",
                slot=ords[0],
            )
        )
        return unnamed

    def _quarantine(self, ordinals: np.ndarray) -> None:
        """Keep damaged values out of recall arithmetic. Headers and strength rows are loaded
        without reading whole records; a value the write path never produces (NaN, inf,
        importance outside [0.05, 10], D outside [0, 1], S outside [0, max_storage]) is damage:
        the memory is left out of recall (tombstone gate, in memory only), ``get`` raises for
        it, and the damage is reported (``check()`` names the record)."""
        c = self.cols
        imp, d, s = c.headers["importance"][ordinals], c.d_event[ordinals], c.storage[ordinals]
        with np.errstate(invalid="ignore"):
            ok = (
                np.isfinite(imp)
                & (imp >= 0.05)
                & (imp <= 10.0)
                & np.isfinite(d)
                & (d >= 0.0)
                & (d <= 1.0)
                & np.isfinite(s)
                & (s >= 0.0)
                & (s <= self.config.strength.max_storage)
            )
        if self.quarantined:  # a reader's refresh re-reads headers: keep earlier findings
            ok &= ~np.isin(ordinals, np.fromiter(self.quarantined, np.int64, len(self.quarantined)))
        bad = ordinals[~ok]
        if not bad.size:
            return
        c.headers["flags"][bad] |= FLAG_TOMBSTONE
        c.headers["importance"][bad] = 1.0
        c.d_event[bad] = 0.0
        c.storage[bad] = 1.0
        new = sorted(set(bad.tolist()) - self.quarantined)
        if new:
            self.quarantined.update(new)
            self.report_corruption(
                CorruptionError(
                    f"{self.path}: {len(new)} memories hold damaged header or strength values "
                    f"(first: ordinal {new[0]}); they are left out of recall and raise when read",
                    file=str(self.path),
                    slot=new[0],
                )
            )
