"""The derived state of an open store: cues, association links and BM25, and their snapshot.

A mixin of :class:`~spector_gpu.cortex.cortex.Cortex`. Everything here is a function of the
primary regions (:mod:`.derived` holds the structures): opening loads the snapshot
(``derived.snap``) and replays the memories after it; a missing, stale or damaged snapshot is
rebuilt, never an error. A damaged payload is reported and indexed as blank text. Lineage
edges (fact <-> parent turns) come from the LIVE provenance records, so a writer, a reopened
store and a refreshed reader hold the same graph.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

import numpy as np

from ..errors import CorruptionError, StoreFailedError
from ..storage.identity import snapshot_binding, snapshot_mismatch
from ..types import MemoryType
from .analyzer import Analyzer
from .bm25 import BM25Index
from .derived import Cues, Links
from .identity import regular_or_refuse
from .payload import Payload, attributed
from .provenance_store import ProvenanceMemory
from .quarantine import QuarantineMixin
from .snapshot import read_snapshot, write_snapshot

__all__ = ["DerivedStateMixin"]

log = logging.getLogger(__name__)
_SNAPSHOT = "derived.snap"


class DerivedStateMixin(QuarantineMixin):
    """Builds, extends and snapshots the derived indexes; the cortex sets the attributes."""

    analyzer: Analyzer
    provenance: ProvenanceMemory
    bm25: BM25Index
    cues: Cues
    links: Links
    n: int
    _snap_n: int  # memories the snapshot on disk covers
    _cue_cache: dict[tuple[str, tuple[str, ...]], frozenset[str]]
    _lineage_linked: set[int]  # fact TSIDs whose lineage edges are in self.links

    if TYPE_CHECKING:

        def payload(self, i: int, *, verify_slot: bool = True) -> Payload: ...

    def _load_derived(self, n: int) -> None:
        snap = self.path / _SNAPSHOT
        covered = 0
        if snap.exists():
            try:
                regular_or_refuse(snap)  # a FIFO would block the read: rebuild instead
                meta, arrays = read_snapshot(snap)
                covered = int(meta.get("covered", -1))
                if meta.get("analyzer") != self.analyzer.name or not 0 <= covered <= n:
                    raise CorruptionError(
                        f"{snap}: snapshot does not match this store", file=str(snap)
                    )
                last = int(self.cols.ids[covered - 1]) if covered else None
                why = snapshot_mismatch(
                    meta,
                    self.part.store_id,
                    self.part.generation if self.part.writable else None,
                    last,
                    unbound_ok=self.part.upgraded_from is not None,
                )
                if why is not None:  # rebuilt; a foreign or future snapshot is also damage
                    unusable = CorruptionError(f"{snap}: not this store's snapshot: {why[0]}")
                    if why[1]:
                        self.report_corruption(unusable)
                    raise unusable
                bm = {k[5:]: v for k, v in arrays.items() if k.startswith("bm25.")}
                cue = {k[4:]: v for k, v in arrays.items() if k.startswith("cue.")}
                bm25 = BM25Index.from_state(bm, analyzer=self.analyzer.name)
                lex = self.config.lexical
                if (bm25.k1, bm25.b, bm25.method) != (lex.k1, lex.b, lex.method):
                    raise CorruptionError(
                        f"{snap}: BM25 parameters differ from [lexical]; rebuilding", file=str(snap)
                    )
                if len(bm25) != covered:
                    raise CorruptionError(
                        f"{snap}: BM25 covers {len(bm25)} docs, not {covered}", file=str(snap)
                    )
                cues = Cues.from_state(cue, covered, str(snap))
                self.bm25, self.cues = bm25, cues
                self._rebuild_links(0, covered)
            except (CorruptionError, KeyError, ValueError) as exc:
                log.warning("%s: derived snapshot unusable (%s); rebuilding", self.path, exc)
                covered = 0
                lex = self.config.lexical
                self.bm25 = BM25Index(
                    k1=lex.k1,
                    b=lex.b,
                    method=lex.method,  # type: ignore[arg-type]
                    analyzer=self.analyzer.name,
                )
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
            for parent in self.session_turns(
                int(r["session_id"]), int(r["first_seq"]), int(r["last_seq"])
            ):
                self.links.link(fact, parent, lw)
            self._lineage_linked.add(target)

    def session_cursor(self, session: int, *, after_seq: int = -1):  # type: ignore[no-untyped-def]
        """Iterate a session's episodes in sequence order, after ``after_seq``.

        Yields ``EpisodeRecord`` objects.
        """
        big = int(np.iinfo(np.int32).max)
        ords = self.session_turns(session, after_seq + 1, big)
        ords.sort(key=lambda o: int(self.cues.sequence[o]))
        return self.episodic.cursor([int(self.cols.index["record_offset"][o]) for o in ords])

    def session_turns(self, session: int, first_seq: int, last_seq: int) -> list[int]:
        """Ordinals of the episodes of ``session`` with sequence in [first_seq, last_seq]."""
        c = self.cues
        m = (
            (c.session[: c.n] == session)
            & (c.sequence[: c.n] >= first_seq)
            & (c.sequence[: c.n] <= last_seq)
        )
        m &= self.cols.index["type"][: c.n] == MemoryType.EPISODIC
        return np.flatnonzero(m).tolist()

    def _append_cues(self, i: int, p: Payload) -> None:
        t = int(self.cols.index["type"][i])
        seq = -1
        if t == MemoryType.EPISODIC:
            seq = int(
                self.episodic.prefixes_at(np.array([self.cols.index["record_offset"][i]]))[
                    "sequence"
                ][0]
            )
            if (
                seq >= 1 << 31
            ):  # read without the record's CRC: a damaged prefix (reported when read)
                seq = -1
        self.cues.append(
            p.session_id,
            seq,
            bool(p.citations),
            p.speaker,
            p.tags,
            p.external_id,
            p.source_uri,
            self.cue_tokens(p),
        )

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
        target = self.path / _SNAPSHOT
        if os.path.isdir(target) and not os.path.islink(target):
            # something that is not ours sits under the snapshot's name: leave it alone and
            # keep writing memories (the snapshot only speeds up opening)
            log.warning(
                "%s is a directory, not the derived-index snapshot: the snapshot is not "
                "saved and the indexes are rebuilt at each open; remove it to restore "
                "fast opens",
                target,
            )
            self._snap_n = self.n
            return
        arrays = {f"bm25.{k}": v for k, v in self.bm25.state().items()}
        arrays.update({f"cue.{k}": v for k, v in self.cues.state().items()})
        try:
            write_snapshot(
                self.path / _SNAPSHOT,
                arrays,
                {
                    "covered": self.n,
                    "analyzer": self.analyzer.name,
                    "ts": int(time.time() * 1000),
                    **snapshot_binding(
                        self.part.store_id,
                        self.part.generation,
                        int(self.cols.ids[self.n - 1]) if self.n else 0,
                    ),
                },
                durable=self.config.store.durability != "none",
            )
        except OSError as exc:
            self.part.failed = exc
            raise StoreFailedError(
                f"{self.path / _SNAPSHOT}: could not write the derived-index snapshot ({exc}); the "
                "store is now read-only — free space or check the device, then close and reopen it "
                "(every committed memory is kept; the indexes are rebuilt on open)"
            ) from exc
        self._snap_n = self.n
