"""FixedStrideStore: the codec and the checks every fixed-stride record store shares.

A record region holds ``count`` records of one packed little-endian structured dtype whose
last field is ``crc32c`` over the bytes before it (:func:`.layouts.seal`). This base owns:

* the codec — :meth:`~FixedStrideStore.encode` seals records into bytes,
  :meth:`~FixedStrideStore.decode` views ``uint8 (m, stride)`` rows as records;
* verified reads — a CRC mismatch or a slot outside the committed records raises
  ``CorruptionError`` naming the file, the region and the slot; a reader re-reads a row caught
  mid-rewrite before calling it damage;
* writes inside a :class:`~spector_gpu.storage.partition.Transaction` (appends and in-place
  rewrites, both sealed here);
* belonging — ``owner_field`` names the field binding a row to its memory (a CRC cannot tell
  slot *i* copied into slot *j*): :meth:`~FixedStrideStore.verify_owner` checks one row,
  :meth:`~FixedStrideStore.owners` gives the field of many.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..errors import CorruptionError, StoreFormatError
from ..storage.crc import crc32c
from ..storage.partition import Transaction
from ..storage.region import Region
from .layouts import seal

__all__ = ["FixedStrideStore"]


class FixedStrideStore:
    """Typed records of one fixed-stride region (see the module docstring).

    Args:
        region: the open region; its stride must be ``dtype.itemsize``.
        dtype: the record layout (last field ``crc32c``).
    """

    #: field holding the memory a row belongs to (``None``: rows belong to no one memory)
    owner_field: ClassVar[str | None] = None

    def __init__(self, region: Region, dtype: np.dtype) -> None:
        if region.spec.stride != dtype.itemsize:
            raise StoreFormatError(
                f"{getattr(region, 'path', '?')}: stride {region.spec.stride} is not the "
                f"{dtype.itemsize}-byte record this store reads"
            )
        self.region = region
        self.dtype = dtype

    # ---- what it is --------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Committed records (as this handle last saw them)."""
        return self.region.count

    @property
    def path(self) -> str:
        return self.region.path

    @property
    def name(self) -> str:
        """The region's file name (``strength.rec``), as corruption errors name it."""
        return self.region.spec.filename

    # ---- codec -------------------------------------------------------------------------
    def decode(self, rows: np.ndarray) -> np.ndarray:
        """Records (``dtype`` (m,)) viewing ``uint8 (m, stride)`` rows (no copy, no check)."""
        return np.ascontiguousarray(rows).view(self.dtype).reshape(-1)

    def encode(self, records: np.ndarray) -> bytes:
        """The bytes of ``records`` (``dtype`` (m,)) with their CRCs sealed (input unchanged)."""
        return seal(np.array(records, dtype=self.dtype, copy=True)).tobytes()

    def owners(self, records: np.ndarray) -> np.ndarray:
        """The owner field of ``records`` (int64 (m,)); ``TypeError`` for an ownerless store."""
        if self.owner_field is None:
            raise TypeError(f"{type(self).__name__} rows carry no owner field")
        return np.asarray(records[self.owner_field], dtype=np.int64)

    # ---- writing -----------------------------------------------------------------------
    def append(self, tx: Transaction, records: np.ndarray) -> int:
        """Append sealed ``records`` in ``tx``; returns the first new slot."""
        return tx.append(self.region, self.encode(records))

    def write(self, tx: Transaction, slots: np.ndarray, records: np.ndarray) -> None:
        """Rewrite committed ``slots`` in place with ``records`` (sealed here, in place)."""
        seal(records)
        for slot, row in zip(np.asarray(slots).tolist(), records):
            tx.write(self.region, self.region.record_offset(int(slot)), row.tobytes())

    # ---- reading -----------------------------------------------------------------------
    def read(self, slots: np.ndarray, *, verify: bool = True) -> np.ndarray:
        """A copy of committed ``slots`` as records; ``CorruptionError`` (file, region, slot)
        for a slot outside the committed records or, with ``verify``, a CRC mismatch."""
        return self.decode(self.region.read_rows(np.asarray(slots, dtype=np.int64), verify=verify))

    def settled(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Records of slots ``[start, stop)`` (a copy) and a bool mask of those whose CRC
        verifies; never raises for damage (a reader re-reads rows caught mid-rewrite)."""
        raw, ok = self.region.read_rows_settled(start, stop)
        return self.decode(raw), ok

    def audit(self, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`settled` over the first ``count`` records (default: all committed)."""
        n = self.count if count is None else count
        if n <= 0:
            return np.zeros(0, dtype=self.dtype), np.zeros(0, dtype=bool)
        return self.settled(0, n)

    def verify_owner(self, slot: int, owner: int) -> None:
        """Hydration check of one row: its CRC and that its owner field is ``owner``.

        One view and one CRC on the fast path; a row outside, damaged or caught mid-rewrite
        goes through the region's verified read (which re-reads a torn row, then raises).
        ``CorruptionError`` naming the file, region and slot if either check fails."""
        region = self.region
        stride = region.spec.stride
        raw = b""
        if 0 <= slot < region.count:
            raw = bytes(region.view(region.record_offset(slot), stride))
        if not raw or crc32c(raw[:-4]) != int.from_bytes(raw[-4:], "little"):
            raw = region.read_rows(np.array([slot], dtype=np.int64))[0].tobytes()
        record = np.frombuffer(raw, dtype=self.dtype)
        if int(self.owners(record)[0]) != owner:
            raise CorruptionError(
                f"{region.path}: slot {slot} of region '{self.name}' belongs to another memory",
                file=region.path,
                region=self.name,
                slot=slot,
            )
