"""The cortex: every store and index of one memory directory, opened and closed together.

The engine owns its lifetime; pathways share it. Memory ordinal ``i`` (insertion order) is its
row in every per-memory structure; ``Location`` says which typed store holds its payload.
:class:`Cortex` composes :class:`~.stores.Stores` (region-backed stores, their codecs),
:class:`~.columns.Columns` (what gates read), :class:`~.derived_indexes.DerivedIndexes` (BM25,
cues, links, dense index; snapshot, replay) and :class:`~.quarantine.Quarantine` (damage
contained). It opens, loads, refreshes, hydrates and writes a :class:`~.batch.WriteBatch`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..embedders.protocol import declared
from ..errors import CorruptionError, SpectorError, StoreError, StoreFailedError
from ..storage.partition import Transaction, open_failure
from ..types import Location, MemoryType
from .analyzer import Analyzer
from .batch import NewMemories, WriteBatch
from .bm25 import BM25Index
from .columns import Columns
from .cues import Cues
from .derived_indexes import IVF_SNAPSHOT_NAME, SNAPSHOT_NAME, DerivedIndexes
from .episodic import EpisodeRecord
from .identity import STORE_FORMAT, bound_snapshot, open_bound, snapshot_stamp
from .index import IndexMemory
from .lifecycle import marked_headers, removed
from .links import Links
from .loader import PrimaryLoader
from .payload import Payload
from .provenance_store import LineageState
from .quarantine import Quarantine
from .stores import Staged, Stores, region_specs

__all__ = ["STORE_FORMAT", "Cortex", "DeferredStrength", "region_specs"]

log = logging.getLogger(__name__)

#: A source of deferred strength rows, asked at every commit: ``(ordinals int64 (m,), rows
#: STRENGTH_DTYPE (m,))`` to write with it, or None (see ``pathways.reinforcement``).
DeferredStrength = Callable[[], tuple[np.ndarray, np.ndarray] | None]


class Cortex:
    """Opens, reads and writes every region of a store directory (see the module docstring).
    ``version`` moves at every commit and refresh (recall caches), ``epoch`` at every reopen
    over a swap (ordinals are valid within one); ``recovery``: what the open found and did."""

    def __init__(
        self,
        path: Path,
        config: Config,
        embedder: Any,
        stores: Stores,
        derived: DerivedIndexes,
        *,
        device: Any,
        read_only: bool,
    ) -> None:
        self.path = path
        self.config = config
        self.embedder = declared(embedder)  # every capability typed (an undeclared one warns)
        self.device = device
        self.read_only = read_only
        self.dim = int(embedder.dim)
        self.version = 0
        self.epoch = 0
        self._deferred: list[DeferredStrength] = []
        self._wire(stores, derived)

    def _wire(self, stores: Stores, derived: DerivedIndexes) -> None:
        """Take ``stores`` and ``derived`` (at open, and again after a compaction swap)."""
        self.stores = stores
        self.derived = derived
        self.cols = Columns()
        self.recovery: dict[str, Any] = {"replayed_journal_records": stores.part.replayed_records}
        self.quarantine = Quarantine(
            self.path,
            stores.index.path,
            strict=self.config.store.strict,
            max_storage=self.config.strength.max_storage,
            recovery=self.recovery,
            fail=self._fail_writer,
        )
        self._loader = PrimaryLoader(stores, self.cols, derived, self.quarantine)
        # Aliases of components' members (changed only by a compaction's reopen): what the
        # read side (recall, gates, delegates, the facade, tests) reads.
        self.part, self.events = stores.part, stores.events
        self.episodic, self.text = stores.episodic, stores.text
        self.semantic, self.procedural = stores.semantic, stores.procedural
        self.strength, self.provenance = stores.strength, stores.provenance
        self.index, self.vectors = stores.index, stores.vectors
        self.id_map = stores.index.id_map  # dict[int TSID, int ordinal], cleared in place
        self.quarantined = self.quarantine.quarantined  # set of ordinals, updated in place
        self.analyzer, self.dense = derived.analyzer, derived.dense

    # derived structures a loaded snapshot replaces: always read through the component
    @property
    def bm25(self) -> BM25Index:
        return self.derived.bm25

    @property
    def cues(self) -> Cues:
        return self.derived.cues

    @property
    def links(self) -> Links:
        return self.derived.links

    def quarantine_error(self, i: int, memory_id: str | None = None) -> CorruptionError:
        """The error a read of quarantined ordinal ``i`` raises (:meth:`Quarantine.error`)."""
        return self.quarantine.error(i, memory_id)

    def report_corruption(self, exc: CorruptionError, *, structural: bool = False) -> None:
        """Record damage (or raise it under ``store.strict``): :meth:`Quarantine.report`."""
        self.quarantine.report(exc, structural=structural)

    # ---- opening -------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: Config,
        embedder: Any,
        *,
        device: Any,
        read_only: bool,
        create_in_nonempty: bool = False,
    ) -> Cortex:
        """Open every region of the store at ``path`` (an ``OSError`` becomes the library error
        naming the fix); ``create_in_nonempty``: create one in a directory holding others."""
        where = Path(path)
        analyzer = Analyzer(
            stopwords=config.lexical.stopwords,
            stemming="english" if config.lexical.stemming else None,
        )
        try:
            stores = open_bound(
                where / "store.json", embedder, analyzer, read_only, create_in_nonempty, config
            )
        except OSError as exc:
            if isinstance(exc, SpectorError):  # StoreLockedError, StoreFailedError, ...
                raise
            raise open_failure(where, exc, writable=not read_only) from exc
        try:
            derived = DerivedIndexes(config, analyzer, int(embedder.dim), device)
            cortex = cls(
                where, config, embedder, stores, derived, device=device, read_only=read_only
            )
            cortex._load()
        except BaseException as exc:
            stores.close()
            if isinstance(exc, OSError) and not isinstance(exc, SpectorError):
                raise open_failure(where, exc, writable=not read_only) from exc
            raise
        return cortex

    @property
    def n(self) -> int:
        """Memories adopted: ordinals ``0..n-1``."""
        return len(self.cols)

    def _fail_writer(self, exc: CorruptionError) -> None:
        """Structural damage: a point-in-time view, so refuse writes on top of it."""
        if not self.read_only and self.part.failed is None:
            self.part.failed = exc

    def _load(self) -> None:
        """Open-time validation and loading, point-in-time (``store.strict`` refuses): damage
        is reported; a damaged record is left out of the derived indexes, a damaged entry
        quarantines its memory, damage the index cannot be read past keeps the prefix before
        it and turns the handle read-only (docs/architecture.md, "open after damage")."""
        for exc in self.part.damage:  # files missing, restored or foreign (storage.identity)
            self.quarantine.report(exc, structural=True)
        n = self._loader.load_primary()
        covered = self.derived.load_snapshot(
            self.path, n, self.cols.index["type"], binding=bound_snapshot(self)
        )
        self.recovery["snapshot_covered"] = covered
        self.derived.load_partition(self.path, n, bound_snapshot(self, IVF_SNAPSHOT_NAME))
        self.recovery["replayed_memories"] = n - covered
        self._loader.derive(covered, n, self._payload_or_blank)
        self.link_lineage()
        self.derived.retire(removed(self.cols.headers), self._payload_or_blank)

    def _payload_or_blank(self, i: int) -> Payload:
        """A memory's payload for index building; a damaged one is reported and left blank."""
        if i in self.quarantine.damaged_entries:  # reported when its entry was read
            return Payload(text="")
        try:
            return self.payload(i, verify_slot=False)
        except CorruptionError as exc:
            self.quarantine.report(exc)
            return Payload(text="")

    # ---- reading ---------------------------------------------------------------------
    def location(self, i: int) -> Location:
        """Where ordinal ``i`` lives (type, partition, record offset, vector and graph slot)."""
        return IndexMemory.location(self.cols.index[i])

    def payload(self, i: int, *, verify_slot: bool = True) -> Payload:
        """Hydrate ordinal ``i``'s payload from the store its ``Location.type`` names.

        Everything returned is verified: an episode's record CRC; for a fact or skill, its
        slot row's CRC and owner (``verify_slot``; index building, which reads only the text,
        skips it) and its text pool entry's CRC and owner. ``CorruptionError`` names the file,
        region and slot that failed (a quarantined index entry: the entry)."""
        entry = self.cols.index[i]
        if int(entry["type"]) != MemoryType.EPISODIC:
            self.quarantine.check_entry(i)
        return self.stores.payload(entry, i, verify_slot=verify_slot)

    def text_of(self, i: int) -> str:
        """Ordinal ``i``'s text alone (verified as :meth:`payload`)."""
        entry = self.cols.index[i]
        if int(entry["type"]) != MemoryType.EPISODIC:
            self.quarantine.check_entry(i)
        return self.stores.text_of(entry)

    def reopen(self) -> None:
        """Load again over the files a compaction swap installed (new ordinals: ``version`` and
        ``epoch`` move on); a reader keeps its files and state until then, and if that fails."""
        kept, part = dict(vars(self)), self.part.reopen()
        try:
            derived = DerivedIndexes(self.config, self.analyzer, self.dim, self.device)
            self._wire(Stores(part, self.dim, self.config), derived)
            self.version, self.epoch = self.version + 2, self.epoch + 1
            self._load()
        except BaseException:
            if self.read_only:  # a writer's old partition handed its lock over: nothing to keep
                part.close()
                vars(self).update(kept)
            raise
        if self.read_only:
            kept["part"].close()

    def refresh(self) -> None:
        """Readers: pick up what was committed since open (all of it after a swap; a reader
        that cannot open the swapped-in files yet keeps serving the generation it holds)."""
        if self.part.swapped():
            try:
                return self.reopen()
            except StoreError as exc:
                if isinstance(exc, CorruptionError):
                    raise
                return log.warning("%s: serving the generation held (%s)", self.path, exc)
        if not self.stores.refresh():
            return  # nothing committed since the last look: what is loaded is current
        n = self.stores.index.count
        if n < self.n:
            raise CorruptionError(
                f"{self.stores.index.path}: committed index shrank ({self.n} -> {n})",
                file=self.stores.index.path,
                region="index",
            )
        old, self.version = self.n, self.version + 1
        self._loader.follow(old, n, self._payload_or_blank)
        self.link_lineage()
        self.derived.retire(removed(self.cols.headers), self._payload_or_blank)

    def reload_mutable(self, ordinals: np.ndarray) -> None:
        """Re-read headers and strength columns of existing ordinals (after in-place updates)."""
        self._loader.reload_mutable(ordinals)

    def session_turns(self, session: int, first_seq: int, last_seq: int) -> list[int]:
        """Ordinals of the episodes of ``session`` with sequence in [first_seq, last_seq] (the
        current version of each turn; deleted turns included: lineage still names them)."""
        turns = self.derived.session_turns(self.cols.index["type"], session, first_seq, last_seq)
        return [o for o in turns if self.cols.current[o]]

    def session_cursor(self, session: int, *, after_seq: int = -1) -> Iterator[EpisodeRecord]:
        """A session's episodes in sequence order, after ``after_seq``."""
        ords = self.session_turns(session, after_seq + 1, int(np.iinfo(np.int32).max))
        ords = [o for o in ords if not removed(self.cols.headers[o : o + 1])[0]]
        ords.sort(key=lambda o: int(self.cues.sequence[o]))
        return self.episodic.cursor([int(self.cols.index["record_offset"][o]) for o in ords])

    def link_lineage(self) -> None:
        """Join every LIVE lineage record not yet linked to the association graph."""
        self.derived.link_lineage(self.stores.provenance, self.id_map, self.cols.index["type"])

    # ---- writing ---------------------------------------------------------------------
    def defer_strength(self, source: DeferredStrength) -> None:
        """Register a source of deferred strength rows written with every commit."""
        self._deferred.append(source)

    def write(self, batch: WriteBatch, *, audit: Callable[[], object] | None = None) -> None:
        """Encode, commit (one journaled transaction: all or nothing) and adopt ``batch``.
        ``audit`` runs once every part is encoded, before the commit (it queues the batch's
        event). Raises what the stores raise: ``ValidationError`` for a malformed batch,
        ``RegionFullError``, ``CorruptionError`` for a quarantined memory's header,
        ``ReadOnlyStoreError`` / ``StoreFailedError`` when the handle cannot write."""
        tx = self.stores.transaction()
        staged = None
        if batch.memories is not None:
            staged = self.stores.stage_memories(tx, batch.memories, self.n)
        headers = self._stage_headers(tx, batch)
        prov = self.stores.provenance
        if batch.lineage is not None:
            prov.append_run(tx, batch.lineage)
        if batch.lineage_live is not None:
            slots = prov.run_slots(*batch.lineage_live)
            if slots.size:
                prov.set_state(tx, slots, LineageState.LIVE)
        if audit is not None:
            audit()
        self.commit(tx)
        del tx  # the batch's encoded bytes are written: free them before the indexes grow
        if staged is not None and batch.memories is not None:
            self._adopt_memories(batch.memories, staged)
        for o, header in headers.items():
            self.cols.headers[o] = header[0]
        if batch.lineage_live is not None:
            self.link_lineage()
        if batch.rewrites_existing():
            self.version += 1  # gates of stored rows changed: no recall cache extends
            self.derived.retire(removed(self.cols.headers), self._payload_or_blank)

    def _stage_headers(self, tx: Transaction, batch: WriteBatch) -> dict[int, np.ndarray]:
        out = marked_headers(self.cols.headers, batch, self.n)
        for o, header in out.items():
            self.rewrite_header(tx, o, header)
        return out

    def _adopt_memories(self, new: NewMemories, staged: Staged) -> None:
        prev = new.previous()
        self.cols.extend(self.n, staged.entries, staged.headers, staged.strength_rows, prev)
        self.stores.index.adopt(staged.entries, versions=prev >= 0)
        self.derived.dense.add(staged.q, staged.scale)
        self.derived.append(new.types, new.payloads, list(new.sequences), new.token_rows)

    def rewrite_header(self, tx: Transaction, i: int, header: np.ndarray) -> None:
        """Stage, in ``tx``, ordinal ``i``'s header (HEADER_DTYPE (1,)) rewritten in place
        (never a quarantined memory's: ``CorruptionError``). Prefer :meth:`write`."""
        if i in self.quarantined:
            raise self.quarantine_error(i)
        self.stores.rewrite_header(tx, self.cols.index[i], header)

    def transaction(self) -> Transaction:
        """A raw transaction for :meth:`rewrite_header` / :meth:`commit` (prefer :meth:`write`)."""
        return self.stores.transaction()

    def commit(self, tx: Transaction) -> None:
        """Commit ``tx`` with the deferred strength rows and the queued events (no adoption);
        a snapshot every ``store.snapshot_every`` memories."""
        for source in self._deferred:
            pending = source()
            if pending is not None:
                self.stores.stage_strength(tx, *pending)
        self.stores.commit(tx)
        self.version += 1
        if self.n - self.derived.snapshot_covers >= self.config.store.snapshot_every:
            try:
                self.save_snapshot()
            except StoreFailedError as exc:
                # The commit is durable and the caller must still adopt it (raising here would
                # leave the in-memory state behind the disk); the failed handle refuses the
                # next write and says why.
                log.warning("%s", exc)

    def save_snapshot(self) -> None:
        """Write the derived-index snapshots that are behind (``derived.snap``, ``ivf.snap``); an
        I/O error fails the handle like a failed commit (``StoreFailedError``; reopen rebuilds)."""
        if self.read_only or self.part.failed is not None:
            return
        try:
            self.derived.save_snapshots(
                self.path,
                durable=self.config.store.durability != "none",
                stamp=lambda n: snapshot_stamp(self.part, self.cols.ids, n),
            )
        except OSError as exc:
            self.part.failed = exc
            raise StoreFailedError(
                f"{self.path}: could not write a derived-index snapshot ({SNAPSHOT_NAME} or "
                f"{IVF_SNAPSHOT_NAME}: {exc}); the store is now read-only — free space or check "
                "the device, then close and reopen it (every committed memory is kept; the "
                "indexes are rebuilt on open)"
            ) from exc

    # ---- closing ---------------------------------------------------------------------
    def close(self) -> None:
        """Write deferred state and a snapshot (a writer in its own process), then close."""
        if self.part.closed:
            return
        try:
            if not self.read_only and self.part.failed is None and self.part.in_this_process():
                if self._deferred:
                    self.write(WriteBatch())
                self.save_snapshot()
        finally:
            self.stores.close()
