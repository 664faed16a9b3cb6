"""IndexMemory: memory id → Location (region MIDX, one 48-byte entry per ordinal).

Entry ``i`` describes memory ordinal ``i`` (layout in :mod:`.layouts`). The id map is rebuilt
from the entries on open — a vectorised CRC check, a positional check (each entry's
``graph_slot`` is its own slot) and a duplicate check — and kept in step with every commit.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorruptionError
from ..storage.partition import Transaction
from ..storage.region import Region
from ..types import Location, MemoryType
from .fixed import FixedStrideStore
from .layouts import INDEX_DTYPE, seal

__all__ = ["IndexMemory"]

_ID_LEN = 13  # characters of a TSID string (kept in each entry for Spector's layout)


class IndexMemory(FixedStrideStore):
    """Typed view of the id index; ``id_map`` maps each adopted TSID to its ordinal."""

    owner_field = "graph_slot"  # entry i describes ordinal i

    def __init__(self, region: Region) -> None:
        super().__init__(region, INDEX_DTYPE)
        self.id_map: dict[int, int] = {}

    def read_range(self, start: int, stop: int) -> np.ndarray:
        """Validated entries of ordinals [start, stop); ``CorruptionError.slot`` = first bad one."""
        entries, bad = self.scan(start, stop)
        if bad.any():
            slot = int(start + np.flatnonzero(bad)[0])
            raise CorruptionError(
                f"{self.region.path}: index entry {slot} is damaged or not at its slot",
                file=self.region.path,
                region="index",
                slot=slot,
            )
        return entries

    def scan(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Entries of ordinals [start, stop) and a bool mask of the damaged ones (CRC, not at
        their own slot, or an unknown type), never raised. A reader re-reads rows that fail
        their CRC until they verify or stop changing (``Region.read_rows_settled``), so a row
        copied while a writer wrote it is not taken for damage."""
        entries, ok = self.settled(start, stop)
        bad = (
            ~ok
            | (entries["graph_slot"] != np.arange(start, stop))
            | ~np.isin(entries["type"], [int(t) for t in MemoryType])
        )
        return entries, bad

    def encode_entries(
        self,
        ids: np.ndarray,
        types: np.ndarray,
        offsets: np.ndarray,
        text: list[tuple[int, int]],
        first: int,
        partition: int = 0,
    ) -> np.ndarray:
        """Sealed entries (m,) of ordinals ``first ..``: TSIDs ``ids`` int64 (m,), ``types``
        (m,) MemoryType values, ``offsets`` (m,) record offsets (log bytes or slots) and
        ``text`` ``(offset, length)`` of each text pool entry ((0, 0) for an episode)."""
        n = len(ids)
        e = np.zeros(n, dtype=INDEX_DTYPE)
        e["id"] = ids
        e["id_len"] = _ID_LEN
        e["type"] = types
        e["record_offset"] = offsets
        e["graph_slot"] = np.arange(first, first + n)
        e["text_offset"] = [t[0] for t in text]
        e["text_length"] = [t[1] for t in text]
        e["partition"] = partition
        return seal(e)

    def register(self, tx: Transaction, entries: np.ndarray) -> int:
        """Append sealed entries in ``tx`` (the commit writes this region's count last)."""
        return tx.append(self.region, entries.tobytes())

    def adopt(
        self,
        entries: np.ndarray,
        *,
        skip: np.ndarray | None = None,
        versions: np.ndarray | None = None,
    ) -> None:
        """Add committed entries to the id map; ``CorruptionError`` on a repeated id. Entries
        where ``skip`` (bool, same length) is True are left out (quarantined ordinals); where
        ``versions`` is True, an entry is a newer version of its id and takes its place."""
        ids, slots = entries["id"].tolist(), entries["graph_slot"].tolist()
        keep = [True] * len(ids) if skip is None else (~skip).tolist()
        newer = [False] * len(ids) if versions is None else versions.tolist()
        for tsid, slot, k, v in zip(ids, slots, keep, newer):
            if not k:
                continue
            if tsid in self.id_map and not v:
                raise CorruptionError(
                    f"{self.region.path}: id appears twice (slot {slot})",
                    file=self.region.path,
                    region="index",
                    slot=int(slot),
                )
            self.id_map[tsid] = int(slot)

    def locate(self, tsid: int) -> int | None:
        """Ordinal of a TSID (its slot here), or None."""
        return self.id_map.get(tsid)

    @staticmethod
    def location(entry: np.void) -> Location:
        i = int(entry["graph_slot"])
        return Location(
            MemoryType(int(entry["type"])),
            int(entry["partition"]),
            int(entry["record_offset"]),
            i,
            i,
        )
