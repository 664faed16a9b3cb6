"""A transaction: the pending writes of one commit (see :class:`.partition.Partition`).

Appends land past each region's committed end (the count including this transaction's
earlier appends); in-place writes overwrite committed bytes. Nothing touches a file before
``Partition.commit``, except reserving space for the appends (``posix_fallocate``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..errors import StoreFailedError
from .preamble import PREAMBLE_SIZE, SHAPE_RECORD
from .region import Region

__all__ = ["Transaction", "capacity_of", "publish_key"]


class _Failable(Protocol):
    failed: BaseException | None


class Transaction:
    """Pending writes of one commit. Appends land past each region's committed end."""

    def __init__(self, partition: _Failable) -> None:
        self._p = partition
        self.writes: list[tuple[int, int, bytes]] = []
        self.counts: dict[int, int] = {}

    def count(self, region: Region) -> int:
        """The region's count including this transaction's appends."""
        return self.counts.get(region.spec.file_no, region.count)

    def append(self, region: Region, data: bytes) -> int:
        """Append ``data``; returns the first slot (RECORD) or the absolute byte offset (APPEND)."""
        spec = region.spec
        count = self.count(region)
        if spec.shape == SHAPE_RECORD:
            if len(data) % spec.stride:
                raise ValueError(
                    f"{spec.filename}: append of {len(data)} bytes is not whole records"
                )
            offset = PREAMBLE_SIZE + count * spec.stride
            new_count = count + len(data) // spec.stride
            result = count
        else:
            offset = PREAMBLE_SIZE + count
            new_count = count + len(data)
            result = offset
        try:
            region.ensure_bytes(offset + len(data))
        except OSError as exc:  # ENOSPC/EIO reserving space: the handle fails, like a commit
            self._p.failed = exc
            raise StoreFailedError(
                f"{region.path}: could not reserve space ({exc}); the store is now read-only — "
                "free space, then close and reopen it (the last durable state is kept)"
            ) from exc
        self.writes.append((spec.file_no, offset, bytes(data)))
        self.counts[spec.file_no] = new_count
        return result

    def write(self, region: Region, offset: int, data: bytes) -> None:
        """Overwrite bytes in place (a committed record update)."""
        if offset < PREAMBLE_SIZE or offset + len(data) > region.mapped_size:
            raise ValueError(f"{region.spec.filename}: in-place write outside the data area")
        self.writes.append((region.spec.file_no, offset, bytes(data)))

    def __bool__(self) -> bool:
        return bool(self.writes)


def publish_key(order: Sequence[Region]) -> Callable[[int], tuple[bool, int]]:
    """Sort key of the order in which a commit publishes counts: file number, ``order`` last."""
    late = [r.spec.file_no for r in order]
    return lambda n: (n in late, late.index(n) if n in late else n)


def capacity_of(region: Region) -> int:
    room = max(region.mapped_size - PREAMBLE_SIZE, 0)
    return room // region.spec.stride if region.spec.shape == SHAPE_RECORD else room
