"""Where chain events are kept: the append-only record log protocol and an in-memory log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

__all__ = ["MemoryRecordLog", "RecordLog"]


class RecordLog(Protocol):
    """Append-only storage of opaque records (backed by a CRC-protected region in a store)."""

    def append(self, data: bytes) -> None:
        """Durably append one record."""

    def records(self) -> Iterator[bytes]:
        """Every record, oldest first."""


class MemoryRecordLog:
    """A :class:`RecordLog` held in a Python list (tests, scratch chains)."""

    def __init__(self, items: list[bytes] | None = None) -> None:
        self.items: list[bytes] = list(items or [])

    def append(self, data: bytes) -> None:
        self.items.append(bytes(data))

    def records(self) -> Iterator[bytes]:
        return iter(list(self.items))
