"""PrimaryLoader: reads the primary regions into the in-memory state of an open store.

Opening ingests every committed memory (index entry, header, strength columns, vector) into
the :class:`~.columns.Columns` and the dense index, and rebuilds the derived indexes of the
memories the snapshot does not cover; a reader's refresh does the same for the memories
committed since, then re-reads the values writers update in place. Damage met on the way is
the :class:`~.quarantine.Quarantine`'s to contain.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import CorruptionError
from ..types import MemoryType
from .columns import Columns
from .derived_indexes import DerivedIndexes
from .lifecycle import previous_rows, replaced
from .payload import Payload
from .quarantine import Quarantine
from .stores import Stores

__all__ = ["PrimaryLoader"]

_DERIVE_CHUNK = 4096  # memories whose payloads are held at once while (re)building indexes


class PrimaryLoader:
    """Loads ordinals from the ``stores`` into ``cols`` and ``derived`` (see module doc)."""

    def __init__(
        self, stores: Stores, cols: Columns, derived: DerivedIndexes, quarantine: Quarantine
    ) -> None:
        self.stores = stores
        self.cols = cols
        self.derived = derived
        self.quarantine = quarantine

    def load_primary(self) -> int:
        """Open: check the tail, then ingest every committed memory; damage the index cannot
        be read past keeps the prefix before it (reported as structural). Returns the count
        of memories loaded."""
        n = self.stores.index.count
        try:
            self.check_tail(n)
        except CorruptionError as exc:
            self.quarantine.report(exc)
        try:
            self.ingest(0, n)
        except CorruptionError as exc:
            self.quarantine.report(exc, structural=True)
            good = exc.slot if isinstance(exc.slot, int) and 0 <= exc.slot < n else 0
            self.cols.truncate(0)
            self.stores.index.id_map.clear()
            self.quarantine.clear()
            self.ingest(0, good)
            n = good
        return n

    def check_tail(self, n: int) -> None:
        """Validate only what open must: the episodes the last index entries point at (a
        damaged entry itself is quarantined by :meth:`ingest`); ``CorruptionError``."""
        if not n:
            return
        entries, bad = self.stores.index.scan(max(0, n - 8), n)
        for e in entries[~bad]:
            if int(e["type"]) == MemoryType.EPISODIC:
                self.stores.episodic.verify(int(e["record_offset"]), int(e["id"]))

    def ingest(self, start: int, stop: int) -> None:
        """Append index entries, headers, strength columns and vectors of ordinals
        [start, stop) (``start`` = the rows already loaded). An index entry that is damaged
        (CRC, slot, type), points outside its store or repeats an id is quarantined; the
        other memories are unaffected. ``CorruptionError`` for damage the index cannot be
        read past (a region shorter than its count)."""
        if stop <= start:
            return
        st = self.stores
        id_map = st.index.id_map
        entries, bad = st.index.scan(start, stop)
        types, offs = entries["type"], entries["record_offset"]
        bad |= (types == MemoryType.EPISODIC) & ~bad & ~st.episode_in_log(offs)
        for t, store in (
            (MemoryType.SEMANTIC, st.semantic),
            (MemoryType.PROCEDURAL, st.procedural),
        ):
            bad |= (types == t) & ~bad & ((offs < 0) | (offs >= store.count))
        # settled: a reader may copy a row while the writer rewrites it (onRecall, reinforce)
        srows, sok = st.strength.settled(start, stop)
        prev = self._versions(entries, bad, start)
        version = prev >= 0
        flagged = bad | version  # a newer version repeats its id legitimately
        Quarantine.repeated_ids(entries["id"], flagged, id_map)
        bad |= flagged & ~version
        # Belonging: a header or a CRC-valid strength row naming another memory (a file
        # restored from an older copy, or taken from another store) quarantines the entry.
        good = np.flatnonzero(~bad)
        bad[good[st.headers(entries[good])["owner"] != entries["id"][good]]] = True
        bad |= sok & (srows["owner"] != entries["id"])
        unnamed = np.zeros(stop - start, dtype=bool)
        if bad.any():
            named = set(id_map) | set(entries["id"][~bad].tolist())
            owners = np.where(sok, srows["owner"], 0)
            unnamed = self.quarantine.seal_off(entries, bad, owners, named, start)
        q, scale = st.vectors.codes(start, stop)
        prev[bad] = -1
        self.cols.extend(start, entries, st.headers(entries), srows, prev)
        st.index.adopt(entries, skip=unnamed, versions=prev >= 0)
        self.derived.dense.add(q, scale)
        self.quarantine.contain(self.cols, np.arange(start, stop))

    def _versions(self, entries: np.ndarray, bad: np.ndarray, start: int) -> np.ndarray:
        """int64 (m,): for each entry that is a newer version of a memory — it repeats the
        id of an earlier row whose header on disk carries REPLACED (``cortex.lifecycle``) —
        that row's ordinal; -1 for the others (a repeat without REPLACED is damage, left to
        :meth:`Quarantine.repeated_ids`)."""
        prev = previous_rows(entries["id"], start, self.stores.index.id_map)
        has = np.flatnonzero((prev >= 0) & ~bad)
        if has.size:
            p = prev[has]
            older = np.zeros(len(p), dtype=entries.dtype)
            loaded = p < start
            older[loaded] = self.cols.index[p[loaded]]
            older[~loaded] = entries[p[~loaded] - start]
            ok = replaced(self.stores.headers(older))  # on disk: a reader's may be stale
            prev[has[~ok]] = -1
        prev[bad] = -1
        return prev

    def derive(self, start: int, stop: int, payload_or_blank: Callable[[int], Payload]) -> None:
        """Index ordinals [start, stop) from their payloads (``payload_or_blank(i)``)."""
        types = self.cols.index["type"]
        for lo in range(start, stop, _DERIVE_CHUNK):
            hi = min(stop, lo + _DERIVE_CHUNK)
            payloads = [payload_or_blank(i) for i in range(lo, hi)]
            entries = self.cols.index[lo:hi]
            seqs = np.full(hi - lo, -1, dtype=np.int64)
            ep = entries["type"] == MemoryType.EPISODIC
            seqs[ep] = self.stores.episodic.sequences_at(entries["record_offset"][ep])
            self.derived.append(types[lo:hi], payloads, seqs.tolist())

    def follow(self, old: int, n: int, payload_or_blank: Callable[[int], Payload]) -> None:
        """A reader's refresh: load ordinals [old, n) committed since, then re-read what
        writers update in place in the rows it had (the caller links lineage afterwards)."""
        self.ingest(old, n)
        self.derive(old, n, payload_or_blank)
        self.reload_mutable(np.arange(0, old))

    def reload_mutable(self, ordinals: np.ndarray) -> None:
        """Re-read headers and strength columns of loaded ordinals (after in-place updates)."""
        if not len(ordinals):
            return
        cols = self.cols
        cols.headers[ordinals] = self.stores.headers(cols.index[ordinals])
        # Strength rows are rewritten in place: re-read any caught mid-rewrite, and keep the
        # last good values of a row damaged on disk (check() reports it) rather than garbage.
        # (Episode and slot headers need no such care: a rewrite changes only single-byte
        # fields, flags and provenance, so a copy can never mix two values of one field.)
        records, ok = self.stores.strength.settled(0, len(cols))
        good = ordinals[ok[ordinals]]
        rows = records[good]
        cols.d_event[good] = rows["retrieval_strength"]
        cols.last_event_ms[good] = rows["last_recall_ms"]
        cols.storage[good] = rows["storage_strength"]
        self.quarantine.contain(cols, ordinals)
