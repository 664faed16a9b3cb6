"""What a writer does when it opens a store: check every file's identity, replay the journal,
checkpoint, and upgrade a format-1 store (functions of :class:`.partition.Partition`).

Identity before replay (:mod:`.identity`): a file of another store, or one whose generation
lies outside what the journal can account for, is damage — nothing is replayed or written on
top of it and the partition turns read-only, so a later open (after the file is restored)
still finds the journal it needs.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..errors import CorruptionError, StoreFormatError
from . import identity
from .io import fsync_dir
from .journal import JREC_MAGIC, coalesce, decode_records
from .preamble import LEGACY_SCHEMA_VERSION, PREAMBLE_SIZE
from .region import Region
from .transaction import Transaction


class Partition(Protocol):
    """What recovery uses of :class:`.partition.Partition` (named structurally: the
    partition imports this module)."""

    directory: Path
    regions: dict[int, Region]
    created: bool
    damage: list[CorruptionError]
    failed: BaseException | None
    store_id: int | None
    upgraded_from: int | None
    replayed_records: int

    def resume(self, next_seq: int, journal_end: int) -> None: ...
    def apply(
        self, writes: Sequence[tuple[int, int, bytes]], *, killable: bool = False
    ) -> None: ...
    def checkpoint(self, *, force: bool = False) -> None: ...
    def commit(
        self, tx: Transaction, *, order: Sequence[Region] = (), stamp_only: bool = False
    ) -> None: ...


__all__ = ["Partition", "first_seq", "open_writer", "recover", "upgrade"]

log = logging.getLogger(__name__)


def open_writer(part: Partition, legacy: bool) -> None:
    """A writer's open: make the names of what it created durable, then recover (unless a
    file is missing) and upgrade a format-1 store. Each created file was fsynced whole
    before its rename (``Region.create``), so only the directory needs a barrier here."""
    if part.created:
        fsync_dir(part.directory)
    if part.damage:  # a missing file: write nothing on top of it
        part.failed = part.damage[0]
        return
    recover(part)
    if legacy and part.failed is None:
        upgrade(part)


def recover(part: Partition) -> None:
    """Check every file's identity against the journal, replay whole journal records past
    the last checkpoint, then checkpoint. A file of another store, or one older or newer
    than the journal allows, is damage: nothing is replayed or written on top of it."""
    journal = part.regions[0]
    data = journal.view(0, journal.mapped_size)
    base = journal.count
    torn = False
    try:
        journal.reload_preamble()
    except StoreFormatError:
        # Torn journal preamble: only a checkpoint writes it, after syncing every region,
        # so replaying whatever contiguous run of records follows is harmless.
        base, torn = first_seq(data), True
        log.warning("%s: journal preamble damaged; replaying from seq %d", part.directory, base)
    records = []
    next_seq, journal_end = base, PREAMBLE_SIZE
    for end, seq, writes in decode_records(data, base, path=journal.path):
        records.append(writes)
        next_seq, journal_end = seq + 1, end
    del data
    regions = list(part.regions.values())
    if torn:  # the checkpoint being written when it tore had synced every region first
        base = 0
        next_seq = max(next_seq, *(r.preamble.generation for r in regions))
    part.resume(next_seq, journal_end)
    part.damage += identity.writer_findings(regions, part.store_id, base, next_seq)
    if part.damage:
        part.failed = part.damage[0]
        return
    # Each byte once, with its final value: readers of a store being recovered never see
    # an older count or record version come back (re-applying record by record would).
    part.apply(coalesce(records))
    replayed = len(records)
    part.replayed_records = replayed
    if replayed:
        log.info("%s: replayed %d journal record(s)", part.directory, replayed)
    for r in regions:
        if r is not journal:  # the checkpoint below rewrites (and reloads) the journal's
            r.reload_preamble()
            r.torn_preamble = False
    if part.store_id is None:  # format 1: an upgrade's journaled stamp may have replayed
        part.store_id = identity.reference_id(regions)
    if part.created and not replayed and not torn:
        # A store that has never committed: every file holds only the preamble it was
        # fsynced with at creation and the journal is empty, so a checkpoint would sync
        # nothing new (11 barriers per new store).
        return
    part.checkpoint(force=True)


def upgrade(part: Partition) -> None:
    """Format 1 -> 2 in place: one journaled commit stamps a new store id and the
    generation on every region's preamble, then the checkpoint stamps the journal's. A
    crash in between leaves a journal record whose replay finishes the upgrade."""
    if not any(identity.is_legacy(r) for r in part.regions.values()):
        return
    if part.store_id is None:
        part.store_id = identity.new_store_id()
    part.commit(Transaction(part), stamp_only=True)
    part.checkpoint(force=True)
    part.upgraded_from = LEGACY_SCHEMA_VERSION
    log.info("%s: upgraded from store format %d", part.directory, LEGACY_SCHEMA_VERSION)


def first_seq(data: memoryview) -> int:
    """The seq of the journal's first record, read past a torn journal preamble (0 if none)."""
    if len(data) >= PREAMBLE_SIZE + 16:
        magic, _, seq = struct.unpack_from("<IIQ", data, PREAMBLE_SIZE)
        if magic == JREC_MAGIC and seq < 1 << 62:  # a damaged seq must still fit the preamble
            return int(seq)
    return 0
