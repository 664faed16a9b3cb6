"""The audit event log: CRC-framed records in the events region (``events.log``)."""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import CorruptionError
from ..storage.crc import crc32c
from ..storage.partition import Partition
from ..storage.preamble import PREAMBLE_SIZE

__all__ = ["EventLog"]


class EventLog:
    """CRC-framed records in the events region, appended inside the current transaction.

    Frame: ``length u32 · crc32c u32 · data`` padded to 8 bytes. Implements the
    ``provenance.chain.RecordLog`` protocol.
    """

    def __init__(self, part: Partition, name: str = "events.log") -> None:
        self._part = part
        self._name = name
        self.pending: list[bytes] = []

    @property
    def path(self) -> str:
        """The events region's file."""
        return self._part.region(self._name).path

    def append(self, data: bytes) -> None:
        """Queue ``data`` for the next commit of the store."""
        self.pending.append(data)

    def frames(self) -> bytes:
        """The queued records, framed back to back (the queue is emptied)."""
        out = []
        for data in self.pending:
            pad = (-(len(data) + 8)) % 8
            out.append(
                len(data).to_bytes(4, "little")
                + crc32c(data).to_bytes(4, "little")
                + data
                + b"\0" * pad
            )
        self.pending.clear()
        return b"".join(out)

    def records(self) -> Iterator[bytes]:
        """Every committed record's data, in order; ``CorruptionError`` at a damaged frame."""
        region = self._part.region(self._name)
        pos, end = PREAMBLE_SIZE, PREAMBLE_SIZE + region.count
        while pos + 8 <= end:
            head = bytes(region.view(pos, 8))
            n = int.from_bytes(head[:4], "little")
            if pos + 8 + n > end:
                raise CorruptionError(
                    f"{region.path}: event frame at {pos} overruns the log",
                    file=region.path,
                    region="events",
                    slot=pos,
                )
            data = bytes(region.view(pos + 8, n))
            if crc32c(data) != int.from_bytes(head[4:], "little"):
                raise CorruptionError(
                    f"{region.path}: CRC mismatch in event frame at {pos}",
                    file=region.path,
                    region="events",
                    slot=pos,
                )
            yield data
            pos += 8 + n + ((-(n + 8)) % 8)
