"""TextPool: payloads of facts, skills and thoughts (region TEXT, append-only).

Entry = ``length u32 · crc32c u32 (over owner ‖ payload) · owner i64 (TSID) · payload``,
padded to 8 bytes. The owner inside the CRC binds an entry to its memory.
"""

from __future__ import annotations

import struct

from ..errors import CorruptionError
from ..storage.crc import crc32c
from ..storage.partition import Transaction
from ..storage.preamble import PREAMBLE_SIZE
from ..storage.region import Region

__all__ = ["TextPool"]

_ENTRY = struct.Struct("<IIq")


class TextPool:
    def __init__(self, region: Region) -> None:
        self.region = region

    @staticmethod
    def encode(owner: int, payload: bytes) -> bytes:
        crc = crc32c(payload, crc32c(struct.pack("<q", owner)))
        pad = (-(len(payload) + _ENTRY.size)) % 8
        return _ENTRY.pack(len(payload), crc, owner) + payload + b"\0" * pad

    def append(
        self, tx: Transaction, owners: list[int], payloads: list[bytes]
    ) -> list[tuple[int, int]]:
        """Append entries; returns ``(offset, length)`` of each payload."""
        parts, rel, pos = [], [], 0
        for owner, payload in zip(owners, payloads):
            entry = self.encode(owner, payload)
            parts.append(entry)
            rel.append((pos, len(payload)))
            pos += len(entry)
        base = tx.append(self.region, b"".join(parts))
        return [(base + r, n) for r, n in rel]

    def read(self, offset: int, length: int, owner: int) -> bytes:
        """The payload at ``offset`` (an entry start), verified against its CRC and owner."""
        end = PREAMBLE_SIZE + self.region.count
        where = f"{self.region.path}: text entry at offset {offset}"
        if offset < PREAMBLE_SIZE or offset + _ENTRY.size + max(length, 0) > end:
            raise CorruptionError(
                f"{where} is outside the committed pool",
                file=self.region.path,
                region="text",
                slot=offset,
            )
        n, crc, stored_owner = _ENTRY.unpack(self.region.view(offset, _ENTRY.size))
        if n != length or stored_owner != owner:
            raise CorruptionError(
                f"{where}: entry belongs to another memory or has another length",
                file=self.region.path,
                region="text",
                slot=offset,
            )
        payload = bytes(self.region.view(offset + _ENTRY.size, n))
        if crc32c(payload, crc32c(struct.pack("<q", owner))) != crc:
            raise CorruptionError(
                f"{where}: CRC mismatch", file=self.region.path, region="text", slot=offset
            )
        return payload
