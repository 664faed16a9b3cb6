"""The cortex: every store and index of one memory directory, opened and closed together.

The facade owns its lifetime; pathways share it. Memory ordinal ``i`` (insertion order) is the
memory's row in the index region, the strength region, the vector slab, the BM25 index and the
association links; ``Location`` says which typed store holds its header and payload.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import (CorruptionError, EmbedderMismatchError, SpectorError, StoreError, StoreFailedError,
                      StoreFormatError)
from ..kernel.crc import crc32c, verify_rows
from ..kernel.io import atomic_write
from ..kernel.partition import Partition, Transaction, open_failure
from ..kernel.preamble import PREAMBLE_SIZE, SHAPE_APPEND, SHAPE_RECORD, RegionId
from ..kernel.region import RegionSpec
from ..types import Location, MemoryType
from .analyzer import Analyzer
from .bm25 import BM25Index
from .derived import Cues, Links
from .episodic import EpisodicMemory
from .index import IndexMemory
from .layouts import FLAG_TOMBSTONE, HEADER_DTYPE, INDEX_DTYPE, seal, vector_dtype
from .payload import Payload, attributed, decode_payload, decode_text
from .provenance_store import ProvenanceMemory
from .slots import ProceduralMemory, SemanticMemory, slot_stride
from .snapshot import read_snapshot, write_snapshot
from .strength import StrengthMemory
from .textpool import TextPool

__all__ = ["Cortex", "region_specs", "EventLog", "STORE_FORMAT"]

log = logging.getLogger(__name__)
STORE_FORMAT = 1
_SNAPSHOT = "derived.snap"
_DAMAGED_TYPE = MemoryType.WORKING  # a quarantined index entry's placeholder type (never durable)


def region_specs(dim: int, provenance_capacity: int) -> list[RegionSpec]:
    """The region files of a store, in commit order (the id index last)."""
    return [
        RegionSpec(1, "episodic.log", SHAPE_APPEND, RegionId.EPISODIC, "EPIL"),
        RegionSpec(2, "semantic.slots", SHAPE_RECORD, RegionId.SEMANTIC, "COG", slot_stride(dim)),
        RegionSpec(3, "procedural.slots", SHAPE_RECORD, RegionId.PROCEDURAL, "SKIL", slot_stride(dim)),
        RegionSpec(4, "text.pool", SHAPE_APPEND, RegionId.TEXT, "TEXT"),
        RegionSpec(5, "strength.rec", SHAPE_RECORD, RegionId.STRENGTH, "STRN", 96),
        RegionSpec(6, "vectors.slab", SHAPE_RECORD, RegionId.VECTOR, "VECS", vector_dtype(dim).itemsize),
        RegionSpec(7, "provenance.rec", SHAPE_RECORD, RegionId.PROVENANCE, "PROV", 72,
                   initial_capacity=min(provenance_capacity, 1024)),
        RegionSpec(8, "events.log", SHAPE_APPEND, RegionId.EVENTS, "AUDT"),
        RegionSpec(9, "index.midx", SHAPE_RECORD, RegionId.INDEX, "MIDX", 48),
    ]


def _regular_or_refuse(path: Path) -> None:
    """``StoreFormatError`` if ``path`` is not a regular file (a FIFO, device or directory)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise StoreFormatError(f"{path}: not a regular file; move it away (a store file must be a "
                               "regular file)", file=str(path))


def _created_ms(ids: np.ndarray) -> np.ndarray:
    """Creation time encoded in each TSID (epoch ms)."""
    from ..kernel.tsid import TSID_EPOCH_MS

    return (ids.astype(np.int64) >> 22) + TSID_EPOCH_MS


class EventLog:
    """CRC-framed records in the events region, appended inside the current transaction.

    Frame: ``length u32 · crc32c u32 · data`` padded to 8 bytes. Implements the
    ``provenance.chain.RecordLog`` protocol.
    """

    def __init__(self, cortex: "Cortex") -> None:
        self._c = cortex
        self.pending: list[bytes] = []

    def append(self, data: bytes) -> None:
        self.pending.append(data)

    def frames(self) -> bytes:
        out = []
        for data in self.pending:
            pad = (-(len(data) + 8)) % 8
            out.append(len(data).to_bytes(4, "little") + crc32c(data).to_bytes(4, "little") + data
                       + b"\0" * pad)
        self.pending.clear()
        return b"".join(out)

    def records(self):  # type: ignore[no-untyped-def]
        region = self._c.part.region("events.log")
        pos, end = PREAMBLE_SIZE, PREAMBLE_SIZE + region.count
        while pos + 8 <= end:
            head = bytes(region.view(pos, 8))
            n = int.from_bytes(head[:4], "little")
            if pos + 8 + n > end:
                raise CorruptionError(f"{region.path}: event frame at {pos} overruns the log",
                                      file=region.path, region="events", slot=pos)
            data = bytes(region.view(pos + 8, n))
            if crc32c(data) != int.from_bytes(head[4:], "little"):
                raise CorruptionError(f"{region.path}: CRC mismatch in event frame at {pos}",
                                      file=region.path, region="events", slot=pos)
            yield data
            pos += 8 + n + ((-(n + 8)) % 8)


@dataclass
class Columns:
    """In-memory copies of what gates read, one row per ordinal (kept in step with writes)."""

    ids: np.ndarray
    index: np.ndarray  # INDEX_DTYPE
    headers: np.ndarray  # HEADER_DTYPE
    created_ms: np.ndarray
    d_event: np.ndarray
    last_event_ms: np.ndarray
    storage: np.ndarray


class Cortex:
    """Opens, reads and writes every region of a store directory."""

    def __init__(self, path: Path, config: Config, embedder: Any, analyzer: Analyzer,
                 part: Partition, device: Any, read_only: bool) -> None:
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
        self.events = EventLog(self)
        self.vdtype = vector_dtype(self.dim)
        self.n = 0
        self.version = 0  # bumped by every commit and refresh: invalidates recall caches
        self.id_map = self.index.id_map  # the IndexMemory's map (one dict, shared)
        self.cols = Columns(*(np.zeros(0, dt) for dt in
                              (np.int64, INDEX_DTYPE, HEADER_DTYPE, np.int64, np.float32, np.int64,
                               np.float32)))
        self.cues = Cues()
        self.links = Links()
        lex = config.lexical
        self.bm25 = BM25Index(k1=lex.k1, b=lex.b, method=lex.method,  # type: ignore[arg-type]
                              analyzer=analyzer.name)
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
    def open(cls, path: str | os.PathLike[str], config: Config, embedder: Any, *,
             device: Any, read_only: bool) -> "Cortex":
        """Open every region of the store at ``path``; any ``OSError`` met on the way (a name
        too long, a permission, a full disk) is the library error that names the fix."""
        try:
            return cls._open(Path(path), config, embedder, device=device, read_only=read_only)
        except OSError as exc:
            if isinstance(exc, SpectorError):  # StoreLockedError, StoreFailedError, ...
                raise
            raise open_failure(Path(path), exc, writable=not read_only) from exc

    @classmethod
    def _open(cls, path: Path, config: Config, embedder: Any, *, device: Any,
              read_only: bool) -> "Cortex":
        meta_path = path / "store.json"
        analyzer = Analyzer(stopwords=config.lexical.stopwords,
                            stemming="english" if config.lexical.stemming else None)
        identity = {"format": STORE_FORMAT, "embedder": embedder.name, "dim": int(embedder.dim),
                    "analyzer": analyzer.name}
        if meta_path.exists():
            _regular_or_refuse(meta_path)  # reading a FIFO would block forever
            try:
                stored = json.loads(meta_path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise CorruptionError(f"{meta_path}: store identity file is not valid JSON",
                                      file=str(meta_path)) from None
            if not isinstance(stored, dict):
                raise CorruptionError(f"{meta_path}: store identity file is not a JSON object",
                                      file=str(meta_path))
            if stored.get("format") != STORE_FORMAT:
                raise StoreError(f"{meta_path}: store format {stored.get('format')} is not supported")
            if stored.get("embedder") != embedder.name or stored.get("dim") != int(embedder.dim):
                raise EmbedderMismatchError(
                    f"{path}: store was written with embedder {stored.get('embedder')!r} "
                    f"(dim {stored.get('dim')}), not {embedder.name!r} (dim {embedder.dim}); open it "
                    "with the same embedder (embedder= or [embedder] name)")
            if stored.get("analyzer") != analyzer.name:
                raise EmbedderMismatchError(
                    f"{path}: store was indexed with analyzer {stored.get('analyzer')!r}, not "
                    f"{analyzer.name!r}; use the same [lexical] stopwords/stemming settings")
        elif read_only:
            raise StoreError(f"{path}: no spector_gpu store here (open it writable to create one)")
        specs = region_specs(int(embedder.dim), config.store.provenance_capacity)
        part = Partition.open(path, specs, writable=not read_only,
                              durability=config.store.durability,  # type: ignore[arg-type]
                              checkpoint_bytes=config.store.checkpoint_mb << 20)
        try:
            if not meta_path.exists():
                atomic_write(meta_path, json.dumps(identity, indent=2, sort_keys=True).encode())
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

    def report_corruption(self, exc: CorruptionError, *, structural: bool = False) -> None:
        """Record damage found while opening (or raise it under ``store.strict``)."""
        if self.config.store.strict:
            raise exc
        log.warning("%s: %s", self.path, exc)
        self.recovery.setdefault("corruption", []).append(str(exc))
        if structural and not self.read_only and self.part.failed is None:
            self.part.failed = exc  # point-in-time view: refuse writes on top of it

    def _check_tail(self, n: int) -> None:
        """Validate only what open must: the episodes the last index entries point at (a
        damaged entry itself is quarantined by :meth:`_ingest_primary`)."""
        if not n:
            return
        entries, bad = self.index.scan(max(0, n - 8), n)
        for e in entries[~bad]:
            if int(e["type"]) == MemoryType.EPISODIC:
                self.episodic.verify(int(e["record_offset"]))

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
        for t, store in ((MemoryType.SEMANTIC, self.semantic), (MemoryType.PROCEDURAL, self.procedural)):
            bad |= (types == t) & ~bad & ((offs < 0) | (offs >= store.region.count))
        # settled: a reader may copy a row while the writer rewrites it (onRecall, reinforce)
        sraw, sok = self.strength.region.read_rows_settled(start, stop)
        srows = sraw.view(self.strength_dtype).reshape(-1)
        self._repeated_ids(entries["id"], bad)
        unnamed = np.zeros(stop - start, dtype=bool)
        if bad.any():
            unnamed = self._seal_off(entries, bad, srows, sok, start)
        types = entries["type"]
        headers = np.zeros(stop - start, dtype=HEADER_DTYPE)
        ep = types == MemoryType.EPISODIC
        if ep.any():
            headers[ep] = self.episodic.headers_at(entries["record_offset"][ep])
        for t, store in ((MemoryType.SEMANTIC, self.semantic), (MemoryType.PROCEDURAL, self.procedural)):
            m = types == t
            if m.any():
                headers[m] = store.headers(entries["record_offset"][m])
        c = self.cols
        vec = self.vectors.rows(start, stop).copy().view(self.vdtype).reshape(-1)
        c.ids = np.concatenate([c.ids[: self.n], entries["id"]])
        c.index = np.concatenate([c.index[: self.n], entries])
        c.headers = np.concatenate([c.headers[: self.n], headers])
        c.created_ms = np.concatenate([c.created_ms[: self.n], _created_ms(entries["id"])])
        c.d_event = np.concatenate([c.d_event[: self.n], srows["retrieval_strength"]])
        c.last_event_ms = np.concatenate([c.last_event_ms[: self.n], srows["last_recall_ms"]])
        c.storage = np.concatenate([c.storage[: self.n], srows["storage_strength"]])
        self.index.adopt(entries, skip=unnamed)
        self.dense.add(vec["q"], vec["scale"])
        self.n = stop
        self._quarantine(np.arange(start, stop))

    def _repeated_ids(self, ids: np.ndarray, bad: np.ndarray) -> None:
        """Mark (in ``bad``) entries repeating the id of an earlier good entry or of a memory
        already loaded: sealed that way, the later entry is the damage."""
        good = np.flatnonzero(~bad)
        g = ids[good]
        order = np.argsort(g, kind="stable")
        repeat = np.zeros(len(g), dtype=bool)
        repeat[order[1:]] = g[order[1:]] == g[order[:-1]]
        bad[good[repeat]] = True
        if self.id_map:
            for k in np.flatnonzero(~bad).tolist():
                if int(ids[k]) in self.id_map:
                    bad[k] = True

    def _seal_off(self, entries: np.ndarray, bad: np.ndarray, srows: np.ndarray, sok: np.ndarray,
                  start: int) -> np.ndarray:
        """Quarantine the damaged index entries ``entries[bad]`` (in place): each becomes a
        placeholder that joins no typed store (type WORKING, which no durable entry has; no
        location), is left out of recall and raises when read. Its id is taken only from
        evidence that survives the damage, the owner field of its CRC-valid strength row (then
        ``get(id)`` raises ``CorruptionError`` naming it); otherwise it has no id and is simply
        not found. Returns the mask of entries left without an id."""
        unnamed = np.zeros(len(entries), dtype=bool)
        named = set(self.id_map) | {int(t) for t in entries["id"][~bad].tolist()}
        for k in np.flatnonzero(bad).tolist():
            owner = int(srows["owner"][k]) if sok[k] else 0
            ok = owner > 0 and owner not in named
            named.add(owner)
            entries["id"][k] = owner if ok else 0
            unnamed[k] = not ok
            entries["type"][k] = int(_DAMAGED_TYPE)
            entries["record_offset"][k] = -1
            entries["text_offset"][k] = -1
            entries["text_length"][k] = 0
            entries["graph_slot"][k] = start + k
        ords = (start + np.flatnonzero(bad)).tolist()
        self.damaged_entries.update(ords)
        self.quarantined.update(ords)
        self.report_corruption(CorruptionError(
            f"{self.index_region.path}: {len(ords)} index entries are damaged (CRC, slot, type or "
            f"location; first: entry {ords[0]}); their memories are quarantined: left out of recall, "
            "they raise when read", file=self.index_region.path, region="index", slot=ords[0]))
        return unnamed

    def _quarantine(self, ordinals: np.ndarray) -> None:
        """Keep damaged values out of recall arithmetic. Headers and strength rows are loaded
        without reading whole records; a value the write path never produces (NaN, inf,
        importance outside [0.05, 10], D outside [0, 1], S outside [0, max_storage]) is damage:
        the memory is left out of recall (tombstone gate, in memory only), ``get`` raises for
        it, and the damage is reported (``check()`` names the record)."""
        c = self.cols
        imp, d, s = c.headers["importance"][ordinals], c.d_event[ordinals], c.storage[ordinals]
        with np.errstate(invalid="ignore"):
            ok = (np.isfinite(imp) & (imp >= 0.05) & (imp <= 10.0) & np.isfinite(d) & (d >= 0.0)
                  & (d <= 1.0) & np.isfinite(s) & (s >= 0.0) & (s <= self.config.strength.max_storage))
        if self.quarantined:  # a reader's refresh re-reads headers: keep earlier findings
            ok &= ~np.isin(ordinals, np.fromiter(self.quarantined, np.int64, len(self.quarantined)))
        bad = ordinals[~ok]
        if not bad.size:
            return
        c.headers["flags"][bad] |= FLAG_TOMBSTONE
        c.headers["importance"][bad] = 1.0
        c.d_event[bad] = 0.0
        c.storage[bad] = 1.0
        new = sorted(set(bad.tolist()) - self.quarantined)
        if new:
            self.quarantined.update(new)
            self.report_corruption(CorruptionError(
                f"{self.path}: {len(new)} memories hold damaged header or strength values (first: "
                f"ordinal {new[0]}); they are left out of recall and raise when read",
                file=str(self.path), slot=new[0]))

    @property
    def strength_dtype(self) -> np.dtype:
        from .layouts import STRENGTH_DTYPE

        return STRENGTH_DTYPE

    # ---- derived state ---------------------------------------------------------------
    def _load_derived(self, n: int) -> None:
        snap = self.path / _SNAPSHOT
        covered = 0
        if snap.exists():
            try:
                _regular_or_refuse(snap)  # a FIFO would block the read: rebuild instead
                meta, arrays = read_snapshot(snap)
                covered = int(meta.get("covered", -1))
                if meta.get("analyzer") != self.analyzer.name or not 0 <= covered <= n:
                    raise CorruptionError(f"{snap}: snapshot does not match this store", file=str(snap))
                bm = {k[5:]: v for k, v in arrays.items() if k.startswith("bm25.")}
                cue = {k[4:]: v for k, v in arrays.items() if k.startswith("cue.")}
                bm25 = BM25Index.from_state(bm, analyzer=self.analyzer.name)
                lex = self.config.lexical
                if (bm25.k1, bm25.b, bm25.method) != (lex.k1, lex.b, lex.method):
                    raise CorruptionError(f"{snap}: BM25 parameters differ from [lexical]; rebuilding",
                                          file=str(snap))
                if len(bm25) != covered:
                    raise CorruptionError(f"{snap}: BM25 covers {len(bm25)} docs, not {covered}", file=str(snap))
                cues = Cues.from_state(cue, covered, str(snap))
                self.bm25, self.cues = bm25, cues
                self._rebuild_links(0, covered)
            except (CorruptionError, KeyError, ValueError) as exc:
                log.warning("%s: derived snapshot unusable (%s); rebuilding", self.path, exc)
                covered = 0
                lex = self.config.lexical
                self.bm25 = BM25Index(k1=lex.k1, b=lex.b, method=lex.method,  # type: ignore[arg-type]
                                      analyzer=self.analyzer.name)
                self.cues = Cues()
                self.links = Links()
        self.recovery["snapshot_covered"] = covered
        self.recovery["replayed_memories"] = n - covered
        self._snap_n = covered
        self._derive(covered, n)
        self.link_lineage()

    def _derive(self, start: int, stop: int) -> None:
        """Rebuild cues, links and BM25 for ordinals [start, stop) from their payloads."""
        if stop <= start:
            return
        texts: list[str] = []
        step = 4096
        for lo in range(start, stop, step):
            hi = min(stop, lo + step)
            payloads = [self._payload_or_blank(i) for i in range(lo, hi)]
            for i, p in zip(range(lo, hi), payloads):
                self._append_cues(i, p)
            texts = [self.index_text(p) for p in payloads]
            self.bm25.add(self.analyzer.tokens_batch(texts))
        self._rebuild_links(start, stop)

    def _payload_or_blank(self, i: int) -> Payload:
        """A memory's payload for index building; a damaged one is reported and left blank."""
        if i in self.damaged_entries:  # reported when its entry was read
            return Payload(text="")
        try:
            return self.payload(i, verify_slot=False)
        except CorruptionError as exc:
            self.report_corruption(exc)
            return Payload(text="")

    def _rebuild_links(self, start: int, stop: int) -> None:
        if start == 0:
            self.links = Links()
            self._lineage_linked = set()
        tw = self.config.association.tag_weight
        for i in range(start, stop):
            t = int(MemoryType(int(self.cols.index["type"][i])))
            session = int(self.cues.session[i]) if t == MemoryType.EPISODIC else None
            self.links.append(session, self.cues.tags[i], tw)

    def link_lineage(self) -> None:
        """Add lineage edges fact <-> parent turns for every LIVE provenance record not yet linked.

        The parents are the record's turn range (what ``explain`` reports), so the edges are a
        function of the persisted regions alone: a writer after consolidation, a reopened store
        and a refreshed reader hold the same graph.
        """
        from .layouts import PROV_LIVE

        rows = self.provenance.rows(verify=False)
        lw = self.config.association.lineage_weight
        for r in rows[rows["flags"] == PROV_LIVE]:
            target = int(r["target_tsid"])
            fact = self.id_map.get(target)
            if fact is None or target in self._lineage_linked:
                continue
            for parent in self.session_turns(int(r["session_id"]), int(r["first_seq"]), int(r["last_seq"])):
                self.links.link(fact, parent, lw)
            self._lineage_linked.add(target)

    def session_cursor(self, session: int, *, after_seq: int = -1):  # type: ignore[no-untyped-def]
        """Iterate a session's episodes in sequence order (``EpisodeRecord``), after ``after_seq``."""
        big = int(np.iinfo(np.int32).max)
        ords = self.session_turns(session, after_seq + 1, big)
        ords.sort(key=lambda o: int(self.cues.sequence[o]))
        return self.episodic.cursor([int(self.cols.index["record_offset"][o]) for o in ords])

    def session_turns(self, session: int, first_seq: int, last_seq: int) -> list[int]:
        """Ordinals of the episodes of ``session`` with sequence in [first_seq, last_seq]."""
        c = self.cues
        m = (c.session[: c.n] == session) & (c.sequence[: c.n] >= first_seq) & (c.sequence[: c.n] <= last_seq)
        m &= self.cols.index["type"][: c.n] == MemoryType.EPISODIC
        return np.flatnonzero(m).tolist()

    def _append_cues(self, i: int, p: Payload) -> None:
        t = int(self.cols.index["type"][i])
        seq = -1
        if t == MemoryType.EPISODIC:
            seq = int(self.episodic.prefixes_at(np.array([self.cols.index["record_offset"][i]]))["sequence"][0])
            if seq >= 1 << 31:  # read without the record's CRC: a damaged prefix (reported when read)
                seq = -1
        self.cues.append(p.session_id, seq, bool(p.citations), p.speaker, p.tags, p.external_id,
                         p.source_uri, self.cue_tokens(p))

    def cue_tokens(self, p: Payload) -> frozenset[str]:
        """Analysed tokens of a memory's cues: its speaker's first name and its tags."""
        key = (p.speaker, p.tags)
        cached = self._cue_cache.get(key)
        if cached is None:
            words = [p.speaker.split()[0]] if p.speaker.strip() else []
            words.extend(p.tags)
            cached = frozenset(self.analyzer.tokens(" ".join(words))) if words else frozenset()
            if len(self._cue_cache) > 65536:
                self._cue_cache.clear()
            self._cue_cache[key] = cached
        return cached

    @staticmethod
    def index_text(p: Payload) -> str:
        """What the lexical relay indexes: speaker, text, tags, skill name and steps."""
        parts = [attributed(p.speaker, p.text)]
        if p.skill_name:
            parts.append(p.skill_name)
        parts.extend(p.steps)
        parts.extend(p.tags)
        return " ".join(parts)

    def save_snapshot(self) -> None:
        """Write the derived-index snapshot. An I/O error fails the handle like a failed
        commit (``StoreFailedError``; no write after it touches the disk): the memories stay
        safe in the regions and a reopen rebuilds what the snapshot would have held."""
        if self.read_only or self.part.failed is not None or self.n == self._snap_n:
            return
        arrays = {f"bm25.{k}": v for k, v in self.bm25.state().items()}
        arrays.update({f"cue.{k}": v for k, v in self.cues.state().items()})
        try:
            write_snapshot(self.path / _SNAPSHOT, arrays,
                           {"covered": self.n, "analyzer": self.analyzer.name, "ts": int(time.time() * 1000)},
                           durable=self.config.store.durability != "none")
        except OSError as exc:
            self.part.failed = exc
            raise StoreFailedError(
                f"{self.path / _SNAPSHOT}: could not write the derived-index snapshot ({exc}); the "
                "store is now read-only — free space or check the device, then close and reopen it "
                "(every committed memory is kept; the indexes are rebuilt on open)") from exc
        self._snap_n = self.n

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
            return self.episodic.read(int(e["record_offset"])).payload
        self._verify_slot(i, verify_slot)
        raw = self.text.read(int(e["text_offset"]), int(e["text_length"]), int(e["id"]))
        return decode_payload(raw, where=f"{self.text.region.path}: memory {i}")

    def text_of(self, i: int) -> str:
        e = self.cols.index[i]
        if int(e["type"]) == MemoryType.EPISODIC:
            return self.episodic.read(int(e["record_offset"])).payload.text
        self._verify_slot(i, True)
        return decode_text(self.text.read(int(e["text_offset"]), int(e["text_length"]), int(e["id"])))

    def _verify_slot(self, i: int, verify: bool) -> None:
        if i in self.damaged_entries:
            raise self.quarantine_error(i)
        if verify:
            e = self.cols.index[i]
            store = self.semantic if int(e["type"]) == MemoryType.SEMANTIC else self.procedural
            store.verify_slot(int(e["record_offset"]), int(e["id"]))

    def quarantine_error(self, i: int, memory_id: str | None = None) -> CorruptionError:
        """The error a read of quarantined ordinal ``i`` raises, naming what is damaged."""
        name = f"memory {memory_id}" if memory_id else f"memory ordinal {i}"
        if i in self.damaged_entries:
            return CorruptionError(
                f"{self.index_region.path}: {name}: index entry {i} is damaged; the memory is "
                "quarantined (run check() for details)", file=self.index_region.path,
                region="index", slot=i)
        return CorruptionError(f"{self.path}: {name} has a damaged header or strength record "
                               "(run check() for details)", file=str(self.path), slot=i)

    def refresh(self) -> None:
        """Readers: pick up memories and header/strength changes committed since open."""
        self.part.refresh()
        n = self.index_region.count
        if n < self.n:
            raise CorruptionError(f"{self.index_region.path}: committed index shrank ({self.n} -> {n})",
                                  file=self.index_region.path, region="index")
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
        e = self.cols.index[ordinals]
        headers = np.zeros(len(ordinals), dtype=HEADER_DTYPE)
        types = e["type"]
        ep = types == MemoryType.EPISODIC
        if ep.any():
            headers[ep] = self.episodic.headers_at(e["record_offset"][ep])
        for t, store in ((MemoryType.SEMANTIC, self.semantic), (MemoryType.PROCEDURAL, self.procedural)):
            m = types == t
            if m.any():
                headers[m] = store.headers(e["record_offset"][m])
        self.cols.headers[ordinals] = headers
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

    def index_entries(self, ids: np.ndarray, types: np.ndarray, offsets: np.ndarray,
                      text: list[tuple[int, int]], first: int) -> np.ndarray:
        return self.index.encode(ids, types, offsets, text, first)

    def vector_rows(self, q: np.ndarray, scale: np.ndarray, first: int) -> np.ndarray:
        rows = np.zeros(len(q), dtype=self.vdtype)
        rows["q"] = q
        rows["scale"] = scale
        rows["ordinal"] = np.arange(first, first + len(q))
        return seal(rows)

    def adopt(self, entries: np.ndarray, headers: np.ndarray, strength_rows: np.ndarray,
              q: np.ndarray, scale: np.ndarray, payloads: list[Payload], sequences: list[int]) -> None:
        """After a commit: bring in-memory columns and derived indexes up to date."""
        first = self.n
        c = self.cols
        c.ids = np.concatenate([c.ids[:first], entries["id"]])
        c.index = np.concatenate([c.index[:first], entries])
        c.headers = np.concatenate([c.headers[:first], headers])
        c.created_ms = np.concatenate([c.created_ms[:first], _created_ms(entries["id"])])
        c.d_event = np.concatenate([c.d_event[:first], strength_rows["retrieval_strength"]])
        c.last_event_ms = np.concatenate([c.last_event_ms[:first], strength_rows["last_recall_ms"]])
        c.storage = np.concatenate([c.storage[:first], strength_rows["storage_strength"]])
        self.index.adopt(entries)
        self.dense.add(q, scale)
        tw = self.config.association.tag_weight
        for k, p in enumerate(payloads):
            t = int(entries["type"][k])
            self.cues.append(p.session_id, sequences[k], bool(p.citations), p.speaker, p.tags,
                             p.external_id, p.source_uri, self.cue_tokens(p))
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
