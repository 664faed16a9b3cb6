"""Stores: the region-backed typed stores of one store directory, opened and committed together.

Each region file has one store that owns its layout (the episodic log, the semantic and
procedural slots, the text pool, strength rows, the vector slab, lineage records, the id
index and the audit event log). :class:`Stores` opens them over one
:class:`~spector_gpu.storage.partition.Partition`, encodes a batch's new memories through
them (:meth:`Stores.stage_memories`), commits a transaction with the index published last,
hydrates a memory from the store its ``Location.type`` names, and audits the preambles.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Config
from ..errors import StoreFormatError
from ..storage.identity import identity_problem
from ..storage.partition import Partition, Transaction
from ..storage.preamble import PREAMBLE_SIZE, SHAPE_APPEND, SHAPE_RECORD, Preamble, RegionId
from ..storage.region import RegionSpec, regions_moved
from ..types import MemoryType
from .batch import NewMemories
from .episodic import RECORD_OVERHEAD, EpisodicMemory
from .event_log import EventLog
from .header import encode_headers
from .index import IndexMemory
from .layouts import HEADER_DTYPE, STRENGTH_DTYPE, vector_dtype
from .payload import Payload, decode_payload, decode_text, encode_payload
from .provenance_store import ProvenanceMemory
from .slots import ProceduralMemory, SemanticMemory, SlotMemory, slot_stride
from .strength import StrengthMemory
from .textpool import TextPool
from .vectors import VectorSlab

__all__ = ["Staged", "Stores", "region_specs"]

_GROUP_CHARS = 1 << 22  # characters of payload text encoded at once by stage_memories


def _groups(ordinals: np.ndarray, payloads: Sequence[Payload]) -> Iterator[np.ndarray]:
    """``ordinals`` (int64 (m,)) in consecutive groups of about ``_GROUP_CHARS`` characters of
    text (at least one memory each); nothing for an empty ``ordinals``."""
    start, size = 0, 0
    for pos, k in enumerate(ordinals.tolist()):
        size += len(payloads[k].text)
        if size >= _GROUP_CHARS:
            yield ordinals[start : pos + 1]
            start, size = pos + 1, 0
    if start < len(ordinals):
        yield ordinals[start:]


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


@dataclass(frozen=True)
class Staged:
    """What a batch's new memories became in a transaction: INDEX_DTYPE ``entries`` (m,),
    HEADER_DTYPE ``headers`` (m,), STRENGTH_DTYPE ``strength_rows`` (m,), and the vector
    slab's int8 ``q`` (m, dim) and float32 ``scale`` (m,)."""

    entries: np.ndarray
    headers: np.ndarray
    strength_rows: np.ndarray
    q: np.ndarray
    scale: np.ndarray


#: The files a store keeps beside its regions (the foreign-directory check knows them).
STORE_COMPANIONS = ("store.json", "config.json", "derived.snap", "ivf.snap")
#: Those only a store writes (a user's folder may well hold a config.json).
STORE_MARKERS = ("store.json", "derived.snap")


class Stores:
    """Every region-backed store of one directory (see the module docstring)."""

    def __init__(self, part: Partition, dim: int, config: Config) -> None:
        r = part.region
        self.part = part
        self.dim = dim
        self.episodic = EpisodicMemory(r("episodic.log"))
        self.semantic = SemanticMemory(r("semantic.slots"), dim)
        self.procedural = ProceduralMemory(r("procedural.slots"), dim)
        self.text = TextPool(r("text.pool"))
        self.strength = StrengthMemory(r("strength.rec"), config.strength)
        self.vectors = VectorSlab(r("vectors.slab"), dim)
        self.provenance = ProvenanceMemory(r("provenance.rec"), config.store.provenance_capacity)
        self.index = IndexMemory(r("index.midx"))
        self.events = EventLog(part)

    @classmethod
    def open(
        cls,
        path: Path,
        dim: int,
        config: Config,
        *,
        writable: bool,
        create_in_nonempty: bool = False,
    ) -> Stores:
        """Open (a writer creates and recovers) every region of the store at ``path``; a
        writer creates a store only in a new or empty directory unless
        ``create_in_nonempty`` (``storage.directory``)."""
        part = Partition.open(
            path,
            region_specs(dim, config.store.provenance_capacity),
            writable=writable,
            durability=config.store.durability,  # type: ignore[arg-type]
            checkpoint_bytes=config.store.checkpoint_mb << 20,
            companions=STORE_COMPANIONS,
            markers=STORE_MARKERS,
            create_in_nonempty=create_in_nonempty,
        )
        try:
            return cls(part, dim, config)
        except BaseException:
            part.close()
            raise

    def slot_store(self, memory_type: int) -> SlotMemory:
        """The slot store of a SEMANTIC or PROCEDURAL memory."""
        return self.semantic if memory_type == MemoryType.SEMANTIC else self.procedural

    # ---- transactions ------------------------------------------------------------------
    def transaction(self) -> Transaction:
        """A new transaction (``ReadOnlyStoreError`` / ``StoreFailedError`` if no writes)."""
        return self.part.transaction()

    def commit(self, tx: Transaction) -> None:
        """Make ``tx`` and the queued events durable as one journal record; the id index's
        count is published last, so a reader never sees an entry before its records."""
        frames = self.events.frames()
        if frames:
            tx.append(self.part.region("events.log"), frames)
        self.part.commit(tx, order=[self.index.region])

    def refresh(self) -> bool:
        """Readers: re-read every preamble to see commits made since open; False when nothing
        was committed since the last look."""
        return self.part.refresh()

    def moved(self) -> bool:
        """Readers: whether a compaction swapped the files or a commit moved them since the
        last :meth:`refresh` — a probe that changes nothing, safe beside other readers (a
        closed handle is refused, as by every read)."""
        self.part.check_usable()
        return self.part.swapped() or regions_moved(self.part.regions)

    def close(self) -> None:
        self.part.close()

    # ---- encoding ----------------------------------------------------------------------
    def stage_memories(self, tx: Transaction, new: NewMemories, first: int) -> Staged:
        """Encode ``new`` (ordinals ``first ..``) into ``tx``: headers, records or slots and
        their text, strength rows, vector rows and index entries (in that order)."""
        new.check(self.dim)
        qv = VectorSlab.quantise(new.vectors)
        ids = np.asarray(new.ids, dtype=np.int64)
        types = np.asarray(new.types, dtype=np.int32)
        headers = encode_headers(
            types=types,
            owners=ids,
            timestamp_ms=new.timestamp_ms,
            importance=new.importance,
            valence=new.valence,
            arousal=new.arousal,
            pinned=new.pinned,
            exact_norm=qv.norm,
            tags=[p.tags for p in new.payloads],
            source=int(new.source),
            provenance=new.provenance,
            consolidation_flags=new.consolidation_flags,
        )
        offsets, text_loc = self._stage_payloads(tx, new, ids, types, headers, qv.q)
        srows = self.strength.init_rows(
            ids,
            new.now_ms,
            headers["valence"],
            headers["importance"],
            headers["timestamp_ms"],
            new.expires_ms,
        )
        self.strength.append(tx, srows)
        self.vectors.append_rows(tx, qv.q, qv.scale, first)
        entries = self.index.encode_entries(ids, types, offsets, text_loc, first)
        self.index.register(tx, entries)
        return Staged(entries, headers, srows, qv.q, qv.scale)

    def _stage_payloads(
        self,
        tx: Transaction,
        new: NewMemories,
        ids: np.ndarray,
        types: np.ndarray,
        headers: np.ndarray,
        q: np.ndarray,
    ) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """Episode records, and fact/skill slots with their text-pool entries, staged in
        ``tx``; returns each memory's record offset or slot and its ``(offset, length)`` in the
        text pool (``(0, 0)`` for an episode). Payloads are encoded in groups of about
        ``_GROUP_CHARS`` characters, so only one group's encoded copies exist beside ``tx``."""
        offsets = np.zeros(len(ids), dtype=np.int64)
        text_loc: list[tuple[int, int]] = [(0, 0)] * len(ids)
        seqs = np.asarray(new.sequences)
        for sel in _groups(np.flatnonzero(types == MemoryType.EPISODIC), new.payloads):
            raw = [encode_payload(new.payloads[k]) for k in sel]
            offsets[sel] = self.episodic.append(tx, ids[sel], headers[sel], raw, seqs[sel])
        for t, store in (
            (MemoryType.SEMANTIC, self.semantic),
            (MemoryType.PROCEDURAL, self.procedural),
        ):
            every = np.flatnonzero(types == t)
            if not every.size:
                continue
            for sel in _groups(every, new.payloads):
                raw = [encode_payload(new.payloads[k]) for k in sel]
                for k, loc in zip(sel.tolist(), self.text.append(tx, ids[sel].tolist(), raw)):
                    text_loc[k] = loc
            slot0 = store.insert(tx, headers[every], q[every])
            offsets[every] = np.arange(slot0, slot0 + every.size)
        return offsets, text_loc

    def rewrite_header(self, tx: Transaction, entry: np.void, header: np.ndarray) -> None:
        """Rewrite, in the store ``entry`` (INDEX_DTYPE) names, its memory's header."""
        t, offset = int(entry["type"]), int(entry["record_offset"])
        if t == MemoryType.EPISODIC:
            self.episodic.rewrite_header(tx, offset, header)
        else:
            self.slot_store(t).rewrite_header(tx, offset, header)

    def stage_strength(self, tx: Transaction, ordinals: np.ndarray, rows: np.ndarray) -> None:
        """Rewrite the strength rows (STRENGTH_DTYPE (m,)) of committed ``ordinals``."""
        self.strength.write(tx, ordinals, np.array(rows, dtype=STRENGTH_DTYPE))

    # ---- reading -----------------------------------------------------------------------
    def headers(self, entries: np.ndarray) -> np.ndarray:
        """HEADER_DTYPE (m,): the headers of index entries (INDEX_DTYPE (m,)), each read from
        the store its type names; zeros for a quarantined entry (type WORKING)."""
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

    def payload(self, entry: np.void, ordinal: int, *, verify_slot: bool = True) -> Payload:
        """Hydrate the payload of the memory ``entry`` (INDEX_DTYPE) describes, verified: an
        episode's record CRC; a fact's or skill's slot CRC and owner (``verify_slot``) and
        its text pool entry's CRC and owner. ``CorruptionError`` names what failed."""
        t = int(entry["type"])
        if t == MemoryType.EPISODIC:
            return self.episodic.read(int(entry["record_offset"]), int(entry["id"])).payload
        raw = self._slot_text(entry, verify_slot)
        return decode_payload(raw, where=f"{self.text.region.path}: memory {ordinal}")

    def text_of(self, entry: np.void) -> str:
        """The text alone of the memory ``entry`` describes (verified as :meth:`payload`)."""
        if int(entry["type"]) == MemoryType.EPISODIC:
            return self.episodic.read(int(entry["record_offset"]), int(entry["id"])).payload.text
        return decode_text(self._slot_text(entry, True))

    def _slot_text(self, entry: np.void, verify_slot: bool) -> bytes:
        owner = int(entry["id"])
        if verify_slot:
            self.slot_store(int(entry["type"])).verify_slot(int(entry["record_offset"]), owner)
        return self.text.read(int(entry["text_offset"]), int(entry["text_length"]), owner)

    def episode_in_log(self, offsets: np.ndarray) -> np.ndarray:
        """bool mask of episode record ``offsets`` that lie inside the committed log."""
        return (offsets >= PREAMBLE_SIZE) & (offsets + RECORD_OVERHEAD <= self.episodic.end)

    # ---- auditing ----------------------------------------------------------------------
    def audit_preambles(self) -> list[tuple[str, str, str]]:
        """``(file, region, message)`` for each region whose 64-byte preamble, re-read from
        disk, fails its CRC or magic, names another layout or region id, or another store or
        generation (``storage.identity``); and the damage the open found."""
        problems = []
        for region in self.part.regions.values():
            name = region.spec.filename.split(".")[0]
            for attempt in range(3):  # a concurrent writer may be rewriting it (readers)
                try:
                    pre = Preamble.unpack(region.file.pread(PREAMBLE_SIZE, 0), file=region.path)
                except StoreFormatError as exc:
                    if attempt == 2:
                        problems.append((region.path, name, f"preamble: {exc}"))
                    continue
                spec = region.spec
                if (pre.layout_id, pre.region_id) != (spec.layout_id, spec.region_id):
                    problems.append(
                        (region.path, name, "preamble names another layout or region id")
                    )
                why = identity_problem(region, pre, self.part)
                if why is not None:
                    problems.append((region.path, name, why))
                break
        for found in self.part.damage:  # found at open: files missing, restored or foreign
            problems.append(
                (found.file or str(self.part.directory), found.region or "store", str(found))
            )
        return problems

    def committed_ids(self) -> set[int]:
        """The TSIDs of every committed index entry, after a fresh look at the index's count
        (a reader: a writer may have committed since this handle last looked)."""
        self.part.refresh(order=[self.index.region])
        n = self.index.count
        return set(self.index.decode(self.index.region.rows(0, n).copy())["id"].tolist())
