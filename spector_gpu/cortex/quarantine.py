"""Quarantine: the damage an open store found, reported and contained.

``store.strict`` refuses to open on any corruption; otherwise damage is reported (the open
report's ``"corruption"`` list, a warning in the log, and ``check()``) and contained:

* a damaged index entry (CRC, slot, type, a location outside its store, a repeated id) becomes
  a placeholder that joins no typed store, is left out of recall and raises when read
  (:meth:`Quarantine.seal_off`);
* a header or strength value the write path never produces is kept out of recall arithmetic
  (:meth:`Quarantine.contain`); the memory raises when read;
* damage the index cannot be read past fails the writer (``structural``): the handle turns
  read-only, so no write builds on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorruptionError
from ..types import MemoryType
from .columns import Columns
from .layouts import FLAG_TOMBSTONE

__all__ = ["Quarantine"]

log = logging.getLogger(__name__)
_DAMAGED_TYPE = MemoryType.WORKING  # a quarantined index entry's placeholder type (never durable)


class Quarantine:
    """Damage found in one store: what is quarantined, and how it is reported.

    Args:
        path: the store directory (named in reports).
        index_path: the index region's file (named for damaged entries).
        strict: ``store.strict`` — raise the first damage instead of containing it.
        max_storage: the largest storage strength S the write path produces.
        recovery: the open report; damage is appended to its ``"corruption"`` list.
        fail: called with structural damage (it fails the writer; a reader passes a no-op).
    """

    def __init__(
        self,
        path: Path,
        index_path: str,
        *,
        strict: bool,
        max_storage: float,
        recovery: dict[str, Any],
        fail: Callable[[CorruptionError], None],
    ) -> None:
        self.path = path
        self.index_path = index_path
        self.strict = strict
        self.max_storage = max_storage
        self.recovery = recovery
        self._fail = fail
        self.quarantined: set[int] = set()  # ordinals with damaged header/strength values
        self.damaged_entries: set[int] = set()  # quarantined ordinals with a damaged entry

    def __contains__(self, ordinal: object) -> bool:
        return ordinal in self.quarantined

    def clear(self) -> None:
        """Forget every finding (a reload after structural damage starts over)."""
        self.quarantined.clear()
        self.damaged_entries.clear()

    def report(self, exc: CorruptionError, *, structural: bool = False) -> None:
        """Record damage found while opening (or raise it under ``store.strict``)."""
        if self.strict:
            raise exc
        log.warning("%s: %s", self.path, exc)
        self.recovery.setdefault("corruption", []).append(str(exc))
        if structural:
            self._fail(exc)

    def error(self, i: int, memory_id: str | None = None) -> CorruptionError:
        """The error a read of quarantined ordinal ``i`` raises, naming what is damaged."""
        name = f"memory {memory_id}" if memory_id else f"memory ordinal {i}"
        if i in self.damaged_entries:
            return CorruptionError(
                f"{self.index_path}: {name}: index entry {i} is damaged; the memory is "
                "quarantined (run check() for details)",
                file=self.index_path,
                region="index",
                slot=i,
            )
        return CorruptionError(
            f"{self.path}: {name} has a damaged header or strength record "
            "(run check() for details)",
            file=str(self.path),
            slot=i,
        )

    def check_entry(self, i: int) -> None:
        """``CorruptionError`` if ordinal ``i``'s index entry is damaged (it has no store)."""
        if i in self.damaged_entries:
            raise self.error(i)

    @staticmethod
    def repeated_ids(ids: np.ndarray, bad: np.ndarray, known: Collection[int]) -> None:
        """Mark (in ``bad``) entries repeating the id of an earlier good entry or one of the
        ``known`` ids already loaded: sealed that way, the later entry is the damage."""
        good = np.flatnonzero(~bad)
        g = ids[good]
        order = np.argsort(g, kind="stable")
        repeat = np.zeros(len(g), dtype=bool)
        repeat[order[1:]] = g[order[1:]] == g[order[:-1]]
        bad[good[repeat]] = True
        if known:
            for k in np.flatnonzero(~bad).tolist():
                if int(ids[k]) in known:
                    bad[k] = True

    def seal_off(
        self,
        entries: np.ndarray,
        bad: np.ndarray,
        owners: np.ndarray,
        named: set[int],
        start: int,
    ) -> np.ndarray:
        """Quarantine the damaged index entries ``entries[bad]`` (rewritten in place).

        Each becomes a placeholder that joins no typed store (type WORKING, which no durable
        entry has; no location), is left out of recall and raises when read. Its id is taken
        only from evidence that survives the damage — ``owners`` (int64, the owner field of
        each CRC-valid strength row, 0 where the row is damaged) — and only if no memory in
        ``named`` (updated) holds it; then ``get(id)`` raises ``CorruptionError`` naming it,
        otherwise it has no id and is simply not found. Returns the mask of entries left
        without an id."""
        unnamed = np.zeros(len(entries), dtype=bool)
        for k in np.flatnonzero(bad).tolist():
            owner = int(owners[k])
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
        self.report(
            CorruptionError(
                f"{self.index_path}: {len(ords)} index entries are damaged (CRC, slot, type "
                f"or location; first: entry {ords[0]}); their memories are quarantined: left out "
                "of recall, they raise when read",
                file=self.index_path,
                region="index",
                slot=ords[0],
            )
        )
        return unnamed

    def contain(self, cols: Columns, ordinals: np.ndarray) -> None:
        """Keep damaged values out of recall arithmetic.

        Headers and strength rows are loaded without reading whole records; a value the write
        path never produces (NaN, inf, importance outside [0.05, 10], D outside [0, 1], S
        outside [0, max_storage]) is damage: the memory is left out of recall (tombstone gate,
        in memory only), ``get`` raises for it, and the damage is reported (``check()`` names
        the record)."""
        headers = cols.headers
        imp, d, s = headers["importance"][ordinals], cols.d_event[ordinals], cols.storage[ordinals]
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
                & (s <= self.max_storage)
            )
        if self.quarantined:  # a reader's refresh re-reads headers: keep earlier findings
            ok &= ~np.isin(ordinals, np.fromiter(self.quarantined, np.int64, len(self.quarantined)))
        bad = ordinals[~ok]
        if not bad.size:
            return
        headers["flags"][bad] |= FLAG_TOMBSTONE
        headers["importance"][bad] = 1.0
        cols.d_event[bad] = 0.0
        cols.storage[bad] = 1.0
        new = sorted(set(bad.tolist()) - self.quarantined)
        if new:
            self.quarantined.update(new)
            self.report(
                CorruptionError(
                    f"{self.path}: {len(new)} memories hold damaged header or strength values "
                    f"(first: ordinal {new[0]}); they are left out of recall and raise when read",
                    file=str(self.path),
                    slot=new[0],
                )
            )
