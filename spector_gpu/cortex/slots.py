"""Fixed engram slots: SemanticMemory (facts), ProceduralMemory (skills).

Slot = ``[EncodingHeader 64 B | INT8 vector dim B | crc32c u32]``, CRC over ``[0, stride-4)``;
the text lives in the text pool, addressed through the memory's index entry. Each store owns
one payload schema: a fact's payload is its text; a skill's is its name and ordered steps.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorruptionError
from ..storage.crc import crc32c
from ..storage.partition import Transaction
from ..storage.region import Region
from .layouts import HEADER_DTYPE

__all__ = ["ProceduralMemory", "SemanticMemory", "SlotMemory", "slot_stride"]


_OWNER = 52  # byte offset of the owner TSID in an EncodingHeader (layouts.HEADER_DTYPE)


def slot_stride(dim: int) -> int:
    return HEADER_DTYPE.itemsize + dim + 4


class SlotMemory:
    """Typed view of a fixed-slot engram region."""

    kind = "slots"

    def __init__(self, region: Region, dim: int) -> None:
        self.region = region
        self.dim = dim

    def encode(self, headers: np.ndarray, q: np.ndarray) -> bytes:
        n = len(headers)
        rows = np.zeros((n, self.region.spec.stride), dtype=np.uint8)
        rows[:, :64] = headers.view(np.uint8).reshape(n, 64)
        rows[:, 64 : 64 + self.dim] = np.asarray(q, dtype=np.int8).view(np.uint8)
        from ..storage.crc import crc32c_rows

        rows[:, -4:] = crc32c_rows(rows[:, :-4]).astype("<u4").view(np.uint8).reshape(n, 4)
        return rows.tobytes()

    def insert(self, tx: Transaction, headers: np.ndarray, q: np.ndarray) -> int:
        """Append slots; returns the first slot number."""
        return tx.append(self.region, self.encode(headers, q))

    def rewrite_header(self, tx: Transaction, slot: int, header: np.ndarray) -> None:
        row = self.region.read_rows(np.array([slot]))[0].copy()
        row[:64] = np.frombuffer(header.tobytes(), dtype=np.uint8)
        row[-4:] = np.frombuffer(crc32c(row[:-4].tobytes()).to_bytes(4, "little"), dtype=np.uint8)
        tx.write(self.region, self.region.record_offset(slot), row.tobytes())

    def read_header(self, slot: int) -> np.void:
        return self.region.read_rows(np.array([slot]))[0][:64].copy().view(HEADER_DTYPE)[0]

    def verify_slot(self, slot: int, owner: int) -> None:
        """Hydration check of one memory's slot: its CRC (one row read; a reader re-reads a
        row caught mid-rewrite) and its owner field (header bytes 52..59 = the memory's TSID).
        ``CorruptionError`` naming the file, region and slot if either fails."""
        region = self.region
        raw = b""
        if 0 <= slot < region.count:  # fast path: one view, one CRC
            raw = bytes(region.view(region.record_offset(slot), region.spec.stride))
        if not raw or crc32c(raw[:-4]) != int.from_bytes(raw[-4:], "little"):
            # outside, damaged or caught mid-rewrite: the region re-reads a torn row, then raises
            raw = region.read_rows(np.array([slot], dtype=np.int64))[0].tobytes()
        if int.from_bytes(raw[_OWNER : _OWNER + 8], "little", signed=True) != owner:
            raise CorruptionError(
                f"{self.region.path}: slot {slot} of region '{self.region.spec.filename}' belongs "
                "to another memory",
                file=self.region.path,
                region=self.region.spec.filename,
                slot=slot,
            )

    def headers(self, slots: np.ndarray) -> np.ndarray:
        """Headers of ``slots`` without CRC checks (open-time columns; hydration verifies)."""
        rows = self.region.read_rows(slots, verify=False)
        return rows[:, :64].copy().view(HEADER_DTYPE).reshape(-1)

    def vectors(self, slots: np.ndarray) -> np.ndarray:
        rows = self.region.read_rows(slots)
        return rows[:, 64 : 64 + self.dim].copy().view(np.int8)


class SemanticMemory(SlotMemory):
    """Facts: what is taken true."""

    kind = "semantic"


class ProceduralMemory(SlotMemory):
    """Skills: how to act (payload: name and ordered steps)."""

    kind = "procedural"
