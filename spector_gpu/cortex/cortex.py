"""The cortex: every store and index of one memory directory, opened and closed together.

The facade owns its lifetime; pathways share it. Memory ordinal ``i`` (insertion order) is the
memory's row in the index region, the strength region, the vector slab, the BM25 index and the
association links; ``Location`` says which typed store holds its header and payload.

This module opens, loads, refreshes, reads, commits and adopts; its mixins hold the damage
handling (:mod:`.quarantine`) and the derived indexes and their snapshot
(:mod:`.derived_state`). The in-memory columns are :mod:`.columns`, the audit log
:mod:`.event_log`, the ``store.json`` identity :mod:`.identity`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import CorruptionError, SpectorError, StoreFailedError
from ..storage.partition import Partition, Transaction, open_failure
from ..storage.preamble import PREAMBLE_SIZE, SHAPE_APPEND, SHAPE_RECORD, RegionId
from ..storage.region import RegionSpec
from ..types import Location, MemoryType
from .analyzer import Analyzer
from .bm25 import BM25Index
from .columns import Columns
from .derived import Cues, Links
from .derived_state import DerivedStateMixin
from .episodic import EpisodicMemory
from .event_log import EventLog
from .identity import STORE_FORMAT, bind_identity, verify_identity
from .index import IndexMemory
from .layouts import HEADER_DTYPE, seal, vector_dtype
from .payload import Payload, decode_payload, decode_text
from .provenance_store import ProvenanceMemory
from .slots import ProceduralMemory, SemanticMemory, slot_stride
from .strength import StrengthMemory
from .textpool import TextPool

__all__ = ["STORE_COMPANIONS", "STORE_FORMAT", "Cortex", "EventLog", "region_specs"]

#: The files a store keeps beside its regions (the foreign-directory check knows them).
STORE_COMPANIONS = ("store.json", "config.json", "derived.snap")
#: Those only a store writes (a user's folder may well hold a config.json).
STORE_MARKERS = ("store.json", "derived.snap")

log = logging.getLogger(__name__)


def region_specs(dim: int, provenance_capacity: int) -> list[RegionSpec]:
    """The region files of a store, in commit order (the id index last)."""
    return [
        RegionSpec(1, "episodic.log", SHAPE_APPEND, RegionId.EPISODIC, "EPIL"),
        RegionSpec(2, "semantic.slots", SHAPE_RECORD, RegionId.SEMANTIC, "COG", slot_stride(dim)),
        RegionSpec(
            3, "procedural.slots", SHAPE_RECORD, RegionId.PROCEDURAL, "SKIL", slot_stride(dim)
        ),
        RegionSpec(4, "text.pool", SHAPE_APPEND, RegionId.TEXT, "TEXT"),
        RegionSpec(5, "strength.rec", SHAPE_RECORD, RegionId.STRENGTH, "STRN", 96),
        RegionSpec(
            6, "vectors.slab", SHAPE_RECORD, RegionId.VECTOR, "VECS", vector_dtype(dim).itemsize
        ),
        RegionSpec(
            7,
            "provenance.rec",
            SHAPE_RECORD,
            RegionId.PROVENANCE,
            "PROV",
            72,
            initial_capacity=min(provenance_capacity, 1024),
        ),
        RegionSpec(8, "events.log", SHAPE_APPEND, RegionId.EVENTS, "AUDT"),
        RegionSpec(9, "index.midx", SHAPE_RECORD, RegionId.INDEX, "MIDX", 48),
    ]


class Cortex(DerivedStateMixin):
    """Opens, reads and writes every region of a store directory."""

    def __init__(
        self,
        path: Path,
        config: Config,
        embedder: Any,
        analyzer: Analyzer,
        part: Partition,
        device: Any,
        read_only: bool,
    ) -> None:
        self.path = path
        self.config = config
        self.embedder = embedder
        self.analyzer = analyzer
        self.part = part
        self.device = device
        self.read_only = read_only
        self.dim = int(embedder.dim)
        r = part.region
        self.episodic = EpisodicMemory(r("episodic.log"))
        self.semantic = SemanticMemory(r("semantic.slots"), self.dim)
        self.procedural = ProceduralMemory(r("procedural.slots"), self.dim)
        self.text = TextPool(r("text.pool"))
        self.strength = StrengthMemory(r("strength.rec"), config.strength)
        self.provenance = ProvenanceMemory(r("provenance.rec"), config.store.provenance_capacity)
        self.vectors = r("vectors.slab")
        self.index_region = r("index.midx")
        self.index = IndexMemory(self.index_region)
        self.events = EventLog(part)
        self.vdtype = vector_dtype(self.dim)
        self.n = 0
        self.version = 0  # bumped by every commit and refresh: invalidates recall caches
        self.id_map = self.index.id_map  # the IndexMemory's map (one dict, shared)
        self.cols = Columns.empty()
        self.cues = Cues()
        self.links = Links()
        lex = config.lexical
        self.bm25 = BM25Index(
            k1=lex.k1,
            b=lex.b,
            method=lex.method,  # type: ignore[arg-type]
            analyzer=analyzer.name,
        )
        from ..kernels.dense import DenseIndex

        self.dense = DenseIndex(self.dim, device=device, backend=config.dense.backend)  # type: ignore[arg-type]
        self.recovery: dict[str, Any] = {"replayed_journal_records": part.replayed_records}
        self.pre_commit: list[Any] = []  # callables(tx) run before every commit (deferred state)
        self._snap_n = 0
        self._cue_cache: dict[tuple[str, tuple[str, ...]], frozenset[str]] = {}
        self._lineage_linked: set[int] = set()  # fact TSIDs whose lineage edges are in self.links
        self.quarantined: set[int] = set()  # ordinals with damaged header/strength values
        self.damaged_entries: set[int] = set()  # quarantined ordinals whose index entry is damaged

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
        """Open every region of the store at ``path``; any ``OSError`` met on the way (a name
        too long, a permission, a full disk) is the library error that names the fix.
        ``create_in_nonempty`` allows creating a store in a directory that holds other files."""
        try:
            return cls._open(
                Path(path),
                config,
                embedder,
                device=device,
                read_only=read_only,
                create_in_nonempty=create_in_nonempty,
            )
        except OSError as exc:
            if isinstance(exc, SpectorError):  # StoreLockedError, StoreFailedError, ...
                raise
            raise open_failure(Path(path), exc, writable=not read_only) from exc

    @classmethod
    def _open(
        cls,
        path: Path,
        config: Config,
        embedder: Any,
        *,
        device: Any,
        read_only: bool,
        create_in_nonempty: bool = False,
    ) -> Cortex:
        meta_path = path / "store.json"
        analyzer = Analyzer(
            stopwords=config.lexical.stopwords,
            stemming="english" if config.lexical.stemming else None,
        )
        stored_id = None
        if os.path.lexists(meta_path):
            stored_id = verify_identity(meta_path, embedder, analyzer)
        specs = region_specs(int(embedder.dim), config.store.provenance_capacity)
        part = Partition.open(
            path,
            specs,
            writable=not read_only,
            durability=config.store.durability,  # type: ignore[arg-type]
            checkpoint_bytes=config.store.checkpoint_mb << 20,
            companions=STORE_COMPANIONS,
            markers=STORE_MARKERS,
            create_in_nonempty=create_in_nonempty,
        )
        try:
            damage = bind_identity(meta_path, part, stored_id, embedder, analyzer)
            if damage is not None:
                part.damage.append(damage)
            cortex = cls(path, config, embedder, analyzer, part, device, read_only)
            cortex._load()
        except BaseException:
            part.close()
            raise
        return cortex

    def _load(self) -> None:
        """Open-time validation and loading, point-in-time by default.

        ``store.strict`` refuses to open on any corruption found here. Otherwise damage is
        reported (``recovery["corruption"]``, a warning in the log, and ``check()``): a damaged
        record raises when read and is left out of the derived indexes; a damaged index entry
        quarantines its one memory; damage the index cannot be read past (a region shorter
        than its count) exposes the prefix of memories before it and turns the handle
        read-only, so no write can build on it.
        """
        for exc in self.part.damage:  # files missing, restored or foreign (storage.identity)
            self.report_corruption(exc, structural=True)
        n = self.index_region.count
        try:
            self._check_tail(n)
        except CorruptionError as exc:
            self.report_corruption(exc)
        try:
            self._ingest_primary(0, n)
        except CorruptionError as exc:
            self.report_corruption(exc, structural=True)
            good = exc.slot if isinstance(exc.slot, int) and 0 <= exc.slot < n else 0
            self.n = 0
            self.id_map.clear()
            self.quarantined.clear()
            self.damaged_entries.clear()
            self._ingest_primary(0, good)
            n = good
        self._load_derived(n)

    def _ingest_primary(self, start: int, stop: int) -> None:
        """Append index entries, headers and strength columns of ordinals [start, stop).

        An index entry that is damaged (CRC, slot, type), points outside its store or repeats
        an id is quarantined (:meth:`_seal_off`); the other memories are unaffected."""
        if stop <= start:
            return
        entries, bad = self.index.scan(start, stop)
        types, offs = entries["type"], entries["record_offset"]
        ep = (types == MemoryType.EPISODIC) & ~bad
        bad |= ep & ((offs < PREAMBLE_SIZE) | (offs + 96 > self.episodic.end))
        for t, store in (
            (MemoryType.SEMANTIC, self.semantic),
            (MemoryType.PROCEDURAL, self.procedural),
        ):
            bad |= (types == t) & ~bad & ((offs < 0) | (offs >= store.region.count))
        # settled: a reader may copy a row while the writer rewrites it (onRecall, reinforce)
        sraw, sok = self.strength.region.read_rows_settled(start, stop)
        srows = sraw.view(self.strength_dtype).reshape(-1)
        self._repeated_ids(entries["id"], bad)
        # Belonging: a header or a CRC-valid strength row naming another memory (a file
        # restored from an older copy, or taken from another store) quarantines the entry.
        good = np.flatnonzero(~bad)
        bad[good[self._headers(entries[good])["owner"] != entries["id"][good]]] = True
        bad |= sok & (srows["owner"] != entries["id"])
        unnamed = np.zeros(stop - start, dtype=bool)
        if bad.any():
            unnamed = self._seal_off(entries, bad, srows, sok, start)
        vec = self.vectors.rows(start, stop).copy().view(self.vdtype).reshape(-1)
        self.cols.extend(self.n, entries, self._headers(entries), srows)
        self.index.adopt(entries, skip=unnamed)
        self.dense.add(vec["q"], vec["scale"])
        self.n = stop
        self._quarantine(np.arange(start, stop))

    def _headers(self, entries: np.ndarray) -> np.ndarray:
        """HEADER_DTYPE (m,): the headers of index entries (INDEX_DTYPE (m,)), each read from the
        store its type names; zeros for a quarantined entry (type WORKING)."""
        types = entries["type"]
        headers = np.zeros(len(entries), dtype=HEADER_DTYPE)
        ep = types == MemoryType.EPISODIC
        if ep.any():
            headers[ep] = self.episodic.headers_at(entries["record_offset"][ep])
        for t, store in (
            (MemoryType.SEMANTIC, self.semantic),
            (MemoryType.PROCEDURAL, self.procedural),
        ):
            m = types == t
            if m.any():
                headers[m] = store.headers(entries["record_offset"][m])
        return headers

    @property
    def strength_dtype(self) -> np.dtype:
        from .layouts import STRENGTH_DTYPE

        return STRENGTH_DTYPE

    # ---- reading ---------------------------------------------------------------------
    def location(self, i: int) -> Location:
        return self.index.location(self.cols.index[i])

    def payload(self, i: int, *, verify_slot: bool = True) -> Payload:
        """Hydrate ordinal ``i``'s payload from the store its ``Location.type`` names.

        Everything returned is verified: an episode's record CRC; for a fact or skill, its
        slot row's CRC and owner (``verify_slot``; index building, which reads only the text,
        skips it) and its text pool entry's CRC and owner. ``CorruptionError`` names the file,
        region and slot that failed."""
        e = self.cols.index[i]
        t = int(e["type"])
        if t == MemoryType.EPISODIC:
            return self.episodic.read(int(e["record_offset"]), int(e["id"])).payload
        self._verify_slot(i, verify_slot)
        raw = self.text.read(int(e["text_offset"]), int(e["text_length"]), int(e["id"]))
        return decode_payload(raw, where=f"{self.text.region.path}: memory {i}")

    def text_of(self, i: int) -> str:
        e = self.cols.index[i]
        if int(e["type"]) == MemoryType.EPISODIC:
            return self.episodic.read(int(e["record_offset"]), int(e["id"])).payload.text
        self._verify_slot(i, True)
        return decode_text(
            self.text.read(int(e["text_offset"]), int(e["text_length"]), int(e["id"]))
        )

    def refresh(self) -> None:
        """Readers: pick up memories and header/strength changes committed since open."""
        self.part.refresh()
        n = self.index_region.count
        if n < self.n:
            raise CorruptionError(
                f"{self.index_region.path}: committed index shrank ({self.n} -> {n})",
                file=self.index_region.path,
                region="index",
            )
        old = self.n
        self.version += 1
        self._ingest_primary(old, n)
        self._derive(old, n)
        self.link_lineage()
        self.reload_mutable(np.arange(0, old))

    def reload_mutable(self, ordinals: np.ndarray) -> None:
        """Re-read headers and strength columns of existing ordinals (after in-place updates)."""
        if not len(ordinals):
            return
        self.cols.headers[ordinals] = self._headers(self.cols.index[ordinals])
        # Strength rows are rewritten in place: re-read any caught mid-rewrite, and keep the
        # last good values of a row damaged on disk (check() reports it) rather than garbage.
        # (Episode and slot headers need no such care: a rewrite changes only single-byte
        # fields, flags and provenance, so a copy can never mix two values of one field.)
        raw, ok = self.strength.region.read_rows_settled(0, self.n)
        good = ordinals[ok[ordinals]]
        rows = raw.view(self.strength_dtype).reshape(-1)[good]
        self.cols.d_event[good] = rows["retrieval_strength"]
        self.cols.last_event_ms[good] = rows["last_recall_ms"]
        self.cols.storage[good] = rows["storage_strength"]
        self._quarantine(ordinals)

    # ---- writing ---------------------------------------------------------------------
    def transaction(self) -> Transaction:
        return self.part.transaction()

    def commit(self, tx: Transaction) -> None:
        for hook in self.pre_commit:
            hook(tx)
        frames = self.events.frames()
        if frames:
            tx.append(self.part.region("events.log"), frames)
        self.part.commit(tx, order=[self.index_region])
        self.version += 1
        if self.n - self._snap_n >= self.config.store.snapshot_every:
            try:
                self.save_snapshot()
            except StoreFailedError as exc:
                # The commit is durable and the caller must still adopt it (raising here would
                # leave the in-memory state behind the disk); the failed handle refuses the
                # next write and says why.
                log.warning("%s", exc)

    def index_entries(
        self,
        ids: np.ndarray,
        types: np.ndarray,
        offsets: np.ndarray,
        text: list[tuple[int, int]],
        first: int,
    ) -> np.ndarray:
        return self.index.encode(ids, types, offsets, text, first)

    def vector_rows(self, q: np.ndarray, scale: np.ndarray, first: int) -> np.ndarray:
        rows = np.zeros(len(q), dtype=self.vdtype)
        rows["q"] = q
        rows["scale"] = scale
        rows["ordinal"] = np.arange(first, first + len(q))
        return seal(rows)

    def adopt(
        self,
        entries: np.ndarray,
        headers: np.ndarray,
        strength_rows: np.ndarray,
        q: np.ndarray,
        scale: np.ndarray,
        payloads: list[Payload],
        sequences: list[int],
    ) -> None:
        """After a commit: bring in-memory columns and derived indexes up to date."""
        first = self.n
        self.cols.extend(first, entries, headers, strength_rows)
        self.index.adopt(entries)
        self.dense.add(q, scale)
        tw = self.config.association.tag_weight
        for k, p in enumerate(payloads):
            t = int(entries["type"][k])
            self.cues.append(
                p.session_id,
                sequences[k],
                bool(p.citations),
                p.speaker,
                p.tags,
                p.external_id,
                p.source_uri,
                self.cue_tokens(p),
            )
            self.links.append(p.session_id if t == MemoryType.EPISODIC else None, p.tags, tw)
        self.bm25.add(self.analyzer.tokens_batch([self.index_text(p) for p in payloads]))
        self.n = first + len(entries)

    def rewrite_header(self, tx: Transaction, i: int, header: np.ndarray) -> None:
        """Rewrite ordinal ``i``'s header in place; a quarantined memory's in-memory header is
        not trustworthy and is never written back (``CorruptionError``)."""
        if i in self.quarantined:
            raise self.quarantine_error(i)
        e = self.cols.index[i]
        t = int(e["type"])
        if t == MemoryType.EPISODIC:
            self.episodic.rewrite_header(tx, int(e["record_offset"]), header)
        elif t == MemoryType.SEMANTIC:
            self.semantic.rewrite_header(tx, int(e["record_offset"]), header)
        else:
            self.procedural.rewrite_header(tx, int(e["record_offset"]), header)

    # ---- closing ---------------------------------------------------------------------
    def close(self) -> None:
        if self.part.closed:
            return
        try:
            if not self.read_only and self.part.failed is None and os.getpid() == self.part._pid:
                if any(True for _ in self.pre_commit):
                    self.commit(self.transaction())
                self.save_snapshot()
        finally:
            self.part.close()
