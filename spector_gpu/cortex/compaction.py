"""Compaction: the store rewritten without its dead rows, then swapped in atomically.

:func:`compact` builds a complete store of the rows to keep in ``.compact/`` inside the store
directory (:mod:`spector_gpu.storage.swap`), then commits the swap and reopens the cortex over
it. The rebuilt store is written through the same stores and codecs as any commit:

* every kept row, in ordinal order (so version chains and sessions keep their order), gets
  new ordinal ``remap[old]``: its index entry, header, episode record or slot and text-pool
  entry, strength row and vector row are copied (bytes re-sealed where they embed a position:
  the vector row's ordinal, the entry's offsets); the derived indexes (BM25, cues, links,
  dense) and their snapshot are built from the new rows, so no posting, cue or link of a
  dropped row survives;
* lineage records are copied with their parents' episode offsets remapped — a parent that was
  dropped keeps its place in the record with offset ``-1`` (erased), and a record whose fact
  was dropped is kept as a TOMBSTONE record (pass numbers stay unique);
* the event log is replaced by the records the caller hands over (the pathway redacts and
  re-chains them); the journal starts fresh.

The rebuilt store keeps the store id and counts generations on from the old one, so a file of
the old store can never pass for one of the new. A kill before the commit marker leaves the
old store (the next writer removes ``.compact/``); after it, the new one (the next open
finishes the install).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SpectorError, StoreError
from ..storage import swap
from ..storage.io import File, fsync_dir, remove_file
from ..storage.killpoints import killpoint
from ..storage.preamble import PREAMBLE_SIZE
from ..types import MemoryType
from .cortex import Cortex
from .derived_indexes import IVF_SNAPSHOT_NAME, SNAPSHOT_NAME, DerivedIndexes
from .identity import snapshot_stamp
from .layouts import PROV_TOMBSTONE
from .lifecycle import removed
from .payload import Payload, decode_payload, encode_payload
from .stores import STORE_COMPANIONS, Stores

__all__ = ["CompactionResult", "compact", "store_names"]

log = logging.getLogger(__name__)

_CHUNK = 4096  # rows per transaction of the rebuild (bounds the journal record)
_SLOTS = (MemoryType.SEMANTIC, MemoryType.PROCEDURAL)


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did.

    Attributes:
        kept: rows in the rebuilt store; dropped: rows erased.
        remap: int64 (n_before,) new ordinal of each old one, -1 where dropped.
        bytes_before, bytes_after: total size of the store's files, in bytes.
    """

    kept: int
    dropped: int
    remap: np.ndarray
    bytes_before: int
    bytes_after: int


def store_names(cortex: Cortex) -> list[str]:
    """Every file name a swap may install (regions, journal and companions)."""
    return [r.spec.filename for r in cortex.part.regions.values()] + list(STORE_COMPANIONS)


def _store_bytes(directory: Path, names: Sequence[str]) -> int:
    return sum(os.lstat(directory / n).st_size for n in names if os.path.lexists(directory / n))


def compact(cortex: Cortex, keep: np.ndarray, events: Sequence[bytes]) -> CompactionResult:
    """Rewrite ``cortex``'s store with only the rows where ``keep`` (bool (n,)) is True and
    the event log ``events`` (encoded event records, in order), swap it in, and reopen
    ``cortex`` over it. Deferred state must be committed first (ordinals change).

    Raises ``StoreError`` for a handle that cannot be compacted (read-only, failed, or holding
    damaged or quarantined memories: a rebuild must not copy damage or lose what is behind it)
    and what a commit raises (``StoreFailedError``) for I/O errors; the old store is then
    unchanged."""
    part, directory = cortex.part, cortex.path
    part.check_writable()
    if cortex.quarantined or part.damage or cortex.quarantine.damaged_entries:
        raise StoreError(
            f"{directory}: the store holds damaged memories; run check() and restore them "
            "from a backup before compacting (a rebuild would copy or drop damage)"
        )
    keep = np.asarray(keep, dtype=bool)
    if keep.shape != (cortex.n,):
        raise StoreError(f"keep mask has shape {keep.shape}, expected ({cortex.n},)")
    names = store_names(cortex)
    before = _store_bytes(directory, names)
    staging = swap.begin(directory, names)
    # the old snapshot holds the dead rows' terms; it is only derived (rebuilt at open), and
    # the new one is installed after every region
    if remove_file(directory / SNAPSHOT_NAME) | remove_file(directory / IVF_SNAPSHOT_NAME):
        fsync_dir(directory)
    cortex.derived.snapshot_covers = 0  # should the build fail, closing writes it again
    killpoint("compact.after_scrub")
    try:
        remap, generation = _build(cortex, staging, keep, events)
    except OSError as exc:
        if isinstance(exc, SpectorError):
            raise
        raise StoreError(
            f"{staging}: compaction failed while building the new store ({exc}); the store is "
            "unchanged — free space or check the device, then compact again"
        ) from exc
    staged = [n for n in names if os.path.lexists(staging / n)]
    for name in staged:
        _fsync(staging / name)
    order = [n for n in staged if n != SNAPSHOT_NAME] + [n for n in staged if n == SNAPSHOT_NAME]
    marker = swap.SwapMarker(int(part.store_id or 0), generation, tuple(order))
    swap.commit(directory, marker)
    cortex.reopen()  # the writer's open installs the staged files and removes .compact/
    kept = int(keep.sum())
    after = _store_bytes(directory, names)
    log.info(
        "%s: compacted %d -> %d rows, %d -> %d bytes", directory, len(keep), kept, before, after
    )
    return CompactionResult(kept, len(keep) - kept, remap, before, after)


def _fsync(path: Path) -> None:
    f = File(path, writable=False)  # through storage.io: the power-loss recorder sees it
    try:
        f.sync("full")
    finally:
        f.close()


def _build(
    cortex: Cortex, staging: Path, keep: np.ndarray, events: Sequence[bytes]
) -> tuple[np.ndarray, int]:
    """Write the staged store (regions, journal, snapshot); returns the remap and the
    generation its files carry."""
    cfg = cortex.config
    derived = DerivedIndexes(cfg, cortex.analyzer, cortex.dim, cortex.device)
    stores = Stores.open(staging, cortex.dim, cfg, writable=True)
    try:
        stores.part.adopt_identity(int(cortex.part.store_id or 0), cortex.part.generation)
        rows = np.flatnonzero(keep)
        remap = np.full(len(keep), -1, dtype=np.int64)
        remap[rows] = np.arange(len(rows))
        offsets: dict[int, int] = {}  # old episode record offset -> new
        history: dict[int, Payload] = {}  # kept REPLACED rows: out of the BM25 statistics
        for lo in range(0, len(rows), _CHUNK):
            chunk = rows[lo : lo + _CHUNK]
            offsets.update(_copy_rows(cortex, stores, derived, chunk, lo, history))
        derived.retire(np.isin(np.arange(len(rows)), list(history)), history.__getitem__)
        _copy_lineage(cortex, stores, offsets, set(cortex.cols.ids[rows].tolist()))
        for lo in range(0, len(events), _CHUNK):
            tx = stores.transaction()
            stores.events.pending.extend(events[lo : lo + _CHUNK])
            stores.commit(tx)
        if stores.part.generation == cortex.part.generation:  # nothing written: stamp the ids
            stores.part.commit(stores.transaction(), stamp_only=True)
        generation = stores.part.generation
        killpoint("compact.mid_build")
        if len(rows):  # the kept rows' BM25 and cue state, bound to the staged files
            stamp = snapshot_stamp(stores.part, cortex.cols.ids[rows], len(rows))
            derived.save_snapshot(staging, durable=True, stamp=stamp)
    finally:
        stores.close()
    return remap, generation


def _copy_rows(
    cortex: Cortex,
    stores: Stores,
    derived: DerivedIndexes,
    rows: np.ndarray,
    first: int,
    history: dict[int, Payload],
) -> dict[int, int]:
    """Copy old ordinals ``rows`` to new ordinals ``first ..`` in one commit and index them
    in ``derived`` (``history`` gains the payload of each kept REPLACED row, by new
    ordinal); returns the episodes' old -> new record offsets."""
    cols, src = cortex.cols, cortex.stores
    entries, headers = cols.index[rows], np.array(cols.headers[rows])
    ids, types = np.asarray(entries["id"], np.int64), np.asarray(entries["type"], np.int32)
    old_off = np.asarray(entries["record_offset"], np.int64)
    tx = stores.transaction()
    offsets = np.zeros(len(rows), dtype=np.int64)
    text_loc: list[tuple[int, int]] = [(0, 0)] * len(rows)
    payloads: list[Payload] = [Payload(text="")] * len(rows)
    seqs = np.full(len(rows), -1, dtype=np.int64)
    ep = np.flatnonzero(types == MemoryType.EPISODIC)
    if ep.size:
        recs = [src.episodic.read(int(old_off[k]), int(ids[k])) for k in ep.tolist()]
        for k, r in zip(ep.tolist(), recs):
            payloads[k], seqs[k] = r.payload, r.sequence
        raw = [encode_payload(r.payload) for r in recs]
        offsets[ep] = stores.episodic.append(tx, ids[ep], headers[ep], raw, seqs[ep])
    for t in _SLOTS:
        sel = np.flatnonzero(types == t)
        if not sel.size:
            continue
        texts = [src.text.read(int(o), int(n), int(i)) for o, n, i in _text_refs(entries[sel])]
        for k, raw_text in zip(sel.tolist(), texts):
            payloads[k] = decode_payload(raw_text, where=f"{src.text.region.path}: memory {k}")
        for k, loc in zip(sel.tolist(), stores.text.append(tx, ids[sel].tolist(), texts)):
            text_loc[k] = loc
        slot0 = stores.slot_store(t).insert(
            tx, headers[sel], src.slot_store(t).vectors(old_off[sel])
        )
        offsets[sel] = np.arange(slot0, slot0 + sel.size)
    stores.strength.append(tx, src.strength.read(rows))
    vec = src.vectors.read(rows)
    stores.vectors.append_rows(tx, vec["q"], vec["scale"], first)
    stores.index.register(tx, stores.index.encode_entries(ids, types, offsets, text_loc, first))
    stores.commit(tx)
    derived.append(types, payloads, seqs.tolist())
    for k in np.flatnonzero(removed(headers)).tolist():
        history[first + k] = payloads[k]
    return dict(zip(old_off[ep].tolist(), offsets[ep].tolist()))


def _text_refs(entries: np.ndarray) -> zip[tuple[int, int, int]]:
    """``(offset, length, owner)`` of each entry's text-pool entry."""
    return zip(
        entries["text_offset"].tolist(), entries["text_length"].tolist(), entries["id"].tolist()
    )


def _copy_lineage(cortex: Cortex, stores: Stores, offsets: dict[int, int], kept: set[int]) -> None:
    """Copy every lineage record: parent episode offsets remapped (-1: the parent was
    erased), the record of a fact that was erased kept as a TOMBSTONE record."""
    records = cortex.provenance.rows()
    if not len(records):
        return
    out = np.array(records, copy=True)
    for field in ("first_offset", "last_offset"):
        old = (out[field].astype(np.int64) + PREAMBLE_SIZE).tolist()
        out[field] = [offsets[o] - PREAMBLE_SIZE if o in offsets else -1 for o in old]
    gone = np.array(
        [t in cortex.id_map and t not in kept for t in out["target_tsid"].tolist()], dtype=bool
    )
    out["flags"][gone] = PROV_TOMBSTONE
    tx = stores.transaction()
    stores.provenance.append(tx, out)
    stores.commit(tx)
