"""Fixed engram slots: SemanticMemory (facts), ProceduralMemory (skills).

Slot = ``[EncodingHeader 64 B | INT8 vector dim B | crc32c u32]``, CRC over ``[0, stride-4)``
(:func:`.layouts.slot_dtype`); the text lives in the text pool, addressed through the
memory's index entry. Each store owns one payload schema: a fact's payload is its text; a
skill's is its name and ordered steps. A slot belongs to the memory whose TSID its header's
owner field (bytes 52..59) holds.
"""

from __future__ import annotations

import numpy as np

from ..storage.partition import Transaction
from ..storage.region import Region
from .fixed import FixedStrideStore
from .layouts import HEADER_DTYPE, slot_dtype

__all__ = ["ProceduralMemory", "SemanticMemory", "SlotMemory", "slot_stride"]


def slot_stride(dim: int) -> int:
    """Bytes of one slot of ``dim``-dimensional vectors."""
    return slot_dtype(dim).itemsize


class SlotMemory(FixedStrideStore):
    """Typed view of a fixed-slot engram region."""

    kind = "slots"
    owner_field = "header"  # see owners(): the header's owner TSID

    def __init__(self, region: Region, dim: int) -> None:
        super().__init__(region, slot_dtype(dim))
        self.dim = dim

    def owners(self, records: np.ndarray) -> np.ndarray:
        """The owner TSID of each slot (header bytes 52..59), int64 (m,)."""
        return np.asarray(records["header"]["owner"], dtype=np.int64)

    def slot_records(self, headers: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Unsealed slots (m,) of HEADER_DTYPE ``headers`` (m,) and int8 ``q`` (m, dim)."""
        rows = np.zeros(len(headers), dtype=self.dtype)
        rows["header"] = headers
        rows["q"] = np.asarray(q, dtype=np.int8)
        return rows

    def insert(self, tx: Transaction, headers: np.ndarray, q: np.ndarray) -> int:
        """Append slots; returns the first slot number."""
        return self.append(tx, self.slot_records(headers, q))

    def rewrite_header(self, tx: Transaction, slot: int, header: np.ndarray) -> None:
        """Replace slot ``slot``'s header (HEADER_DTYPE (1,)) in place, re-sealing its CRC;
        ``CorruptionError`` if the slot is damaged or outside the committed slots."""
        row = self.read(np.array([slot]))
        row["header"] = header
        self.write(tx, np.array([slot]), row)

    def read_header(self, slot: int) -> np.void:
        """One slot's header, CRC-verified."""
        header: np.void = self.read(np.array([slot]))["header"][0]
        return header

    def verify_slot(self, slot: int, owner: int) -> None:
        """Hydration check of one memory's slot: CRC and owner (:meth:`verify_owner`)."""
        self.verify_owner(slot, owner)

    def headers(self, slots: np.ndarray) -> np.ndarray:
        """Headers of ``slots`` (HEADER_DTYPE copy) without CRC checks (open-time columns;
        hydration verifies)."""
        return np.array(self.read(slots, verify=False)["header"], dtype=HEADER_DTYPE)

    def vectors(self, slots: np.ndarray) -> np.ndarray:
        """int8 (m, dim) vectors of ``slots``, CRC-verified."""
        return np.array(self.read(slots)["q"], dtype=np.int8)


class SemanticMemory(SlotMemory):
    """Facts: what is taken true."""

    kind = "semantic"


class ProceduralMemory(SlotMemory):
    """Skills: how to act (payload: name and ordered steps)."""

    kind = "procedural"
