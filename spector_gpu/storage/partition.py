"""A partition: one store directory of region files, its writer lock and its redo journal.

One writer process per directory (``flock`` on ``LOCK``, :mod:`.lock`; a writer whose ``LOCK``
was replaced stops writing); read-only processes take no lock and are never blocked. Writes
are grouped in a :class:`Transaction`; :meth:`Partition.commit` appends them to the journal,
makes that durable per the durability level, then applies them to the regions — data first,
each region's preamble (its committed count) after, in spec order, so a reader that sees a
count sees the bytes behind it. Durability levels: ``none`` (no barrier: survives a process
crash, not power loss), ``flush`` (``fdatasync`` of the journal at each commit) and ``fsync``
(``fsync`` of the journal and of the directory when files were created). A compaction swaps
the files (:mod:`.swap`): :meth:`Partition.swapped` tells, :meth:`Partition.reopen` follows.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import (
    CorruptionError,
    ReadOnlyStoreError,
    SpectorError,
    StoreClosedError,
    StoreError,
    StoreFailedError,
    ValidationError,
)
from . import identity, swap
from .directory import OpenedRegions, claim_directory, open_failure, open_store_files
from .io import fsync_dir
from .journal import encode_record_parts
from .killpoints import killpoint
from .lock import lost_lock, track_writer
from .preamble import PREAMBLE_SIZE, SHAPE_APPEND, Preamble, RegionId
from .recovery import open_writer
from .region import Region, RegionSpec
from .transaction import Transaction, capacity_of, publish_key

__all__ = [
    "DURABILITY_LEVELS",
    "JOURNAL_SPEC",
    "Durability",
    "Partition",
    "Transaction",
    "open_failure",
]

Durability = Literal["none", "flush", "fsync"]
DURABILITY_LEVELS: tuple[str, ...] = ("none", "flush", "fsync")
JOURNAL_SPEC = RegionSpec(0, "journal.jrn", SHAPE_APPEND, RegionId.JOURNAL, "JRNL")
_DEFAULT_CHECKPOINT_BYTES = 16 << 20


@dataclass(frozen=True)
class _Settings:
    """What a partition was opened with (a reopen after a compaction repeats it)."""

    specs: tuple[RegionSpec, ...]
    writable: bool
    durability: Durability
    checkpoint_bytes: int
    companions: tuple[str, ...]


class Partition:
    """The open region files of one store directory."""

    def __init__(
        self,
        directory: Path,
        regions: dict[int, Region],
        settings: _Settings,
        *,
        lock_fd: int | None,
        store_id: int | None,
    ) -> None:
        self.directory, self.regions = directory, regions
        self.by_name = {r.spec.filename: r for r in regions.values()}
        self.settings = settings  # what a reopen repeats
        self.writable, self.durability = settings.writable, settings.durability
        self.checkpoint_bytes = settings.checkpoint_bytes
        self.store_id = store_id  # None only while a format-1 store awaits its upgrade
        self.lock_fd = lock_fd
        self._pid, self._closed = os.getpid(), False
        self.failed: BaseException | None = None
        self.damage: list[CorruptionError] = []  # found at open: identity, generation, missing
        self.created = False  # this open created the store's files
        self.upgraded_from: int | None = None  # the schema this open upgraded the store from
        self.replayed_records = 0
        self._orders: dict[tuple[int, ...], list[int]] = {}
        self._next_seq, self._journal_end = regions[0].count, PREAMBLE_SIZE

    @property
    def generation(self) -> int:
        """Commits applied to the store (the generation every region file carries)."""
        return self._next_seq

    def resume(self, next_seq: int, journal_end: int) -> None:
        """Continue the journal where recovery found its end (the next seq, its offset)."""
        self._next_seq, self._journal_end = next_seq, journal_end

    # ---- opening -----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        specs: Sequence[RegionSpec],
        *,
        writable: bool,
        durability: Durability = "flush",
        checkpoint_bytes: int = _DEFAULT_CHECKPOINT_BYTES,
        companions: Sequence[str] = (),
        markers: Sequence[str] = (),
        create_in_nonempty: bool = False,
    ) -> Partition:
        """Open (a writer creates, in a new or empty directory) the store in ``directory``:
        see :func:`.directory.claim_directory` for ``companions`` / ``markers`` (the other
        names a store writes / those that prove one); ``damage`` lists what the open found."""
        if durability not in DURABILITY_LEVELS:
            raise ValidationError(
                f"durability must be one of {DURABILITY_LEVELS}, got {durability!r}"
            )
        where = Path(directory)
        how = _Settings(
            (JOURNAL_SPEC, *specs), writable, durability, checkpoint_bytes, tuple(companions)
        )
        names, nonempty = [s.filename for s in how.specs], create_in_nonempty
        owned, proof = names + list(companions), [*names, *markers]
        lock_fd = claim_directory(
            where, owned, proof, writable=writable, create_in_nonempty=nonempty
        )
        return cls._open(where, how, lock_fd)

    @classmethod
    def _open(cls, directory: Path, how: _Settings, lock_fd: int | None) -> Partition:
        """Open the files (the writer lock, if any, already held); a reader never holds a mix
        of files a compaction swap was installing (:func:`.swap.open_current`)."""
        if how.writable:
            return cls._open_files(directory, how, lock_fd)
        return swap.open_current(lambda: cls._open_files(directory, how, lock_fd), directory)

    @classmethod
    def _open_files(cls, directory: Path, how: _Settings, lock_fd: int | None) -> Partition:
        names = [s.filename for s in how.specs] + list(how.companions)
        paths = None if how.writable else swap.current_paths(directory, names[: len(how.specs)])
        opened = OpenedRegions()
        part: Partition | None = None
        try:
            opened, ref, legacy = open_store_files(
                directory, how.specs, names, writable=how.writable, paths=paths
            )
            part = cls(directory, opened.regions, how, lock_fd=lock_fd, store_id=ref)
            part.damage = list(opened.damage)
            part.created = opened.created
            if lock_fd is not None:
                track_writer(part)
            if how.writable:
                open_writer(part, legacy)
            else:
                part._open_reader()
        except BaseException as exc:
            opened.close()
            if part is not None:
                part.lock_fd = None  # closed below: the after-fork hook must not close it again
            if lock_fd is not None:
                os.close(lock_fd)
            if isinstance(exc, OSError) and not isinstance(exc, SpectorError):
                raise open_failure(directory, exc, writable=how.writable) from exc
            raise
        return part

    def _open_reader(self) -> None:
        """Re-read the preambles in the reverse of the publish order (the per-file reads of
        the open ran in file order), then check identities and generations from them."""
        self.refresh()
        order = sorted(self.regions, key=publish_key(()), reverse=True)
        self.damage += identity.reader_findings([self.regions[n] for n in order], self.store_id)

    def reopen(self) -> Partition:
        """This store opened again (same settings) over the files a compaction swap installed:
        a writer closes this partition (no checkpoint), hands its lock over and finishes the
        swap (:func:`.swap.recover`); a reader's stays open until its caller closes it."""
        if not self.writable:
            return Partition._open(self.directory, self.settings, None)
        lock_fd, self.lock_fd = self.lock_fd, None
        self.close(checkpoint=False)
        return Partition._open(self.directory, self.settings, lock_fd)

    def swapped(self) -> bool:
        """A reader: whether a compaction installed new files since this one opened."""
        return not self.writable and swap.replaced(self.directory, self.regions[max(self.regions)])

    def adopt_identity(self, store_id: int, generation: int) -> None:
        """A store this open created, before its first commit, takes ``store_id`` and counts
        commits on from ``generation`` (a compaction's rebuilt store continues the old one,
        so no file of the old store can pass for one of the new)."""
        if not self.created or self._next_seq or self._journal_end != PREAMBLE_SIZE:
            raise StoreError(f"{self.directory}: only a new, empty store can adopt an identity")
        self.store_id, self._next_seq = store_id, generation

    # ---- guards ------------------------------------------------------------------------
    def in_this_process(self) -> bool:
        """False in a forked child of the process that opened the partition."""
        return self._pid == os.getpid()

    def check_usable(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self.directory}: store handle is closed")
        if os.getpid() != self._pid:
            raise StoreClosedError(
                f"{self.directory}: store handle was opened in process {self._pid} and cannot be "
                "used in a forked child; open the store again in the child"
            )

    def check_writable(self) -> None:
        self.check_usable()
        if self.failed is None and self.lock_fd is not None:  # another file under LOCK's name
            self.failed = lost_lock(self.directory, self.lock_fd)
        if isinstance(self.failed, CorruptionError):
            raise StoreFailedError(
                f"{self.directory}: the store is read-only: it was opened point-in-time over "
                f"damage ({self.failed}); no write is built on it — restore the damaged file, "
                "then reopen"
            ) from self.failed
        if self.failed is not None:
            raise StoreFailedError(
                f"{self.directory}: an earlier write failed ({self.failed}); the store is now "
                "read-only. Close and reopen it to recover the last durable state"
            ) from self.failed
        if not self.writable:
            raise ReadOnlyStoreError(f"{self.directory}: store is open read-only")

    # ---- writing -----------------------------------------------------------------------
    def transaction(self) -> Transaction:
        self.check_writable()
        return Transaction(self)

    def commit(
        self, tx: Transaction, *, order: Sequence[Region] = (), stamp_only: bool = False
    ) -> None:
        """Make ``tx`` durable (journal), then apply it. Every region's preamble is rewritten
        with the new generation (and its count); ``order`` lists regions whose preamble
        update must come last, in that order (e.g. the id index). ``stamp_only`` commits an
        empty transaction (the format upgrade)."""
        self.check_writable()
        if not tx.writes and not tx.counts and not stamp_only:
            return
        sid = self.store_id
        assert sid is not None  # set at open; None only before a format upgrade
        try:
            self._check_sizes({f for f, _, _ in tx.writes} | set(tx.counts))
        except CorruptionError as exc:
            self.failed = exc
            raise
        writes = list(tx.writes)
        published: list[tuple[Region, Preamble]] = []
        generation = self._next_seq + 1
        for file_no in self._publish_order(order):
            region = self.regions[file_no]
            if file_no in tx.counts or stamp_only:
                count = tx.counts.get(file_no, region.count)
                pre = region.preamble.committed(count, capacity_of(region), sid, generation)
                published.append((region, pre))
                writes.append((file_no, 0, pre.pack()))
            else:  # only the generation changes (the in-memory preamble keeps its count)
                writes.append((file_no, 0, region.preamble.pack_at(sid, generation)))
        parts = encode_record_parts(self._next_seq, writes)
        journal = self.regions[0]
        try:
            end = self._journal_end + sum(len(b) for b in parts)
            journal.ensure_bytes(end)
            journal.file.pwritev(parts, self._journal_end)
            killpoint("journal.after_append")
            if self.durability == "flush":
                journal.file.sync("data")
            elif self.durability == "fsync":
                journal.file.sync("full")
            killpoint("journal.after_sync")
            self._journal_end = end
            self._next_seq += 1
            self.apply(writes, killable=True)
            killpoint("commit.after_apply")
            for region, pre in published:  # what was just written: no need to read it back
                region.preamble = pre
            if self._journal_end - PREAMBLE_SIZE > self.checkpoint_bytes:
                self.checkpoint()
        except StoreFailedError:
            raise  # from checkpoint(): already a library error (it subclasses OSError)
        except OSError as exc:
            self.failed = exc
            raise StoreFailedError(
                f"{self.directory}: write failed ({exc}); the store is now read-only — close and "
                "reopen it to recover the last durable state"
            ) from exc

    def _check_sizes(self, touched: set[int]) -> None:
        """``CorruptionError`` if a file this commit writes (or the journal) is shorter than
        this writer made it: another program truncated it under the handle, and the commit
        would build on lost bytes. (A file it only stamps is checked when next read.)"""
        for file_no in (0, *touched):
            r = self.regions[file_no]
            r.check_backed(r.mapped_size)

    def _publish_order(self, order: Sequence[Region]) -> list[int]:
        """The regions a commit stamps (all but the journal), in publish order."""
        key = tuple(r.spec.file_no for r in order)
        got = self._orders.get(key)
        if got is None:
            got = [n for n in sorted(self.regions, key=publish_key(order)) if n]
            self._orders[key] = got
        return got

    def apply(self, writes: Sequence[tuple[int, int, bytes]], *, killable: bool = False) -> None:
        half = len(writes) // 2
        for i, (file_no, offset, data) in enumerate(writes):
            region = self.regions.get(file_no)
            if region is None:
                raise StoreError(f"{self.directory}: journal names unknown region file {file_no}")
            region.ensure_bytes(offset + len(data))
            region.file.pwrite(data, offset)
            if killable and i == half:
                killpoint("commit.mid_apply")

    def checkpoint(self, *, force: bool = False) -> None:
        """Sync every region, then restart the journal at the next sequence number."""
        if not self.writable:
            return
        journal = self.regions[0]
        if not force and self._journal_end == PREAMBLE_SIZE:
            return
        try:
            if self.durability != "none":
                for r in self.regions.values():
                    if r is not journal:
                        r.file.sync("data" if self.durability == "flush" else "full")
            killpoint("checkpoint.after_region_sync")
            pre = journal.preamble.with_count(self._next_seq, capacity_of(journal))
            if self.store_id is not None:
                pre = pre.stamped(self.store_id, self._next_seq)
            journal.file.pwrite(pre.pack(), 0)
            if self.durability != "none":
                journal.file.sync("data" if self.durability == "flush" else "full")
            killpoint("checkpoint.after_reset")
            journal.reload_preamble()
            self._journal_end = PREAMBLE_SIZE
        except OSError as exc:
            self.failed = exc
            raise StoreFailedError(
                f"{self.directory}: checkpoint failed ({exc}); the store is now read-only — close "
                "and reopen it to recover the last durable state"
            ) from exc

    # ---- reading, closing -----------------------------------------------------------------------
    def refresh(self, *, order: Sequence[Region] = ()) -> bool:
        """Readers: re-read every preamble to see commits made since open; whether one moved
        (every commit stamps its generation into every preamble; a torn read counts as moved).

        Preambles are read in the reverse of the writer's publish order (``order`` as given to
        :meth:`commit`, last-published first, then the other regions by descending file
        number), so a count seen in one region implies that every region published before it
        is at least as new: an index entry never points past its records' committed counts.
        """
        self.check_usable()
        moved = False
        for file_no in sorted(self.regions, key=publish_key(order), reverse=True):
            if file_no:
                region, before = self.regions[file_no], self.regions[file_no].preamble
                region.reload_preamble()
                identity.check_refresh(region, before.store_id, before.generation)
                moved = moved or region.torn_preamble or region.preamble != before
        return moved

    def region(self, filename: str) -> Region:
        return self.by_name[filename]

    def close(self, *, checkpoint: bool = True) -> None:
        """Checkpoint (a healthy writer in its own process, unless ``checkpoint`` is False),
        then close every file and release the writer lock."""
        if self._closed:
            return
        try:
            if checkpoint and self.writable and self.failed is None and os.getpid() == self._pid:
                self.checkpoint()
                if self.durability == "fsync":
                    fsync_dir(self.directory)
        finally:
            self._closed = True
            for r in self.regions.values():
                r.close()
            if self.lock_fd is not None:
                os.close(self.lock_fd)
                self.lock_fd = None

    @property
    def closed(self) -> bool:
        return self._closed
