"""DerivedIndexes: BM25, cues, association links and the dense index of one open store.

Everything here is a function of the primary regions and can be rebuilt from them. BM25 and
the cues are persisted as a snapshot (``derived.snap``) stamped with the number of memories it
covers: opening loads it and the owner replays the memories after it; a missing, stale or
damaged snapshot is rebuilt, never an error. The links are rebuilt from the cues (and the
lineage edges from the LIVE provenance records), so a writer, a reopened store and a
refreshed reader hold the same graph. The dense index is loaded from the vector slab.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import CorruptionError
from ..kernels.dense import DenseIndex
from ..kernels.dense_ivf import FirstPass
from ..types import MemoryType
from .analyzer import Analyzer
from .attributes import Attributes
from .bm25 import BM25Index
from .cues import Cues
from .identity import regular_or_refuse
from .ivf_snapshot import IVF_SNAPSHOT_NAME, load_partition, save_partition
from .layouts import PROV_PARTIAL
from .links import Links
from .payload import Payload, attributed
from .provenance_store import ProvenanceMemory
from .snapshot import blocked_by_directory, read_snapshot, write_snapshot
from .token_rows import TokenRows

__all__ = ["IVF_SNAPSHOT_NAME", "SNAPSHOT_NAME", "DerivedIndexes", "index_text"]

log = logging.getLogger(__name__)
SNAPSHOT_NAME = "derived.snap"
_CUE_CACHE_MAX = 65536
_INDEX_GROUP_TOKENS = 1 << 18  # tokens added to BM25 per call


def index_text(p: Payload) -> str:
    """What the lexical relay indexes: speaker, text, tags, skill name and steps."""
    parts = [attributed(p.speaker, p.text)]
    if p.skill_name:
        parts.append(p.skill_name)
    parts.extend(p.steps)
    parts.extend(p.tags)
    return " ".join(parts)


class DerivedIndexes:
    """The derived state of one store (see the module docstring).

    Args:
        config: the store's configuration ([lexical], [association], [dense]).
        analyzer: the lexical analyzer (its name is stamped into the snapshot).
        dim: vector dimension; device: where the dense index lives.
    """

    def __init__(self, config: Config, analyzer: Analyzer, dim: int, device: Any) -> None:
        self.config = config
        self.analyzer = analyzer
        self.bm25 = self._new_bm25()
        self.cues = Cues()
        self.links = Links()
        self.attrs = Attributes()
        self.tokens = TokenRows()
        self.dense = DenseIndex(
            dim,
            device=device,
            backend=config.dense.backend,
            first_pass=_first_pass(config),
        )
        self.snapshot_covers = 0  # memories the snapshot on disk covers
        self._cue_cache: dict[tuple[str, tuple[str, ...]], frozenset[str]] = {}
        self._lineage_linked: set[int] = set()  # fact TSIDs whose lineage edges are linked
        self._lineage_scanned = 0  # provenance slots below this were looked at
        self._lineage_waiting: set[int] = set()  # of those, slots to look at again

    def __len__(self) -> int:
        return self.cues.n

    def _new_bm25(self) -> BM25Index:
        lex = self.config.lexical
        return BM25Index(k1=lex.k1, b=lex.b, method=lex.method, analyzer=self.analyzer.name)  # type: ignore[arg-type]

    # ---- building ----------------------------------------------------------------------
    def append(
        self,
        types: np.ndarray,
        payloads: Sequence[Payload],
        sequences: Sequence[int],
        token_rows: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Index the next ``m`` memories: ``types`` (m,) MemoryType values, their payloads and
        per-session ``sequences`` (-1 for non-episodes); their token rows when made already
        (:class:`~spector_gpu.cortex.batch.NewMemories`). Cost ∝ the new memories alone."""
        tw = self.config.association.tag_weight
        for k, p in enumerate(payloads):
            # a later version of a turn is not a new turn: it joins no temporal chain
            episodic = int(types[k]) == MemoryType.EPISODIC and p.version == 1
            self.cues.append(
                p.session_id,
                int(sequences[k]),
                bool(p.citations),
                p.speaker,
                p.tags,
                p.external_id,
                p.source_uri,
                self.cue_tokens(p),
            )
            self.links.append(p.session_id if episodic else None, p.tags, tw)
        # Added to BM25 in groups of about _INDEX_GROUP_TOKENS tokens: the token lists and
        # BM25's per-posting scratch exist for one group at a time, not for the whole batch
        # (the postings are the same as from one call).
        group: list[list[str]] = []
        size = 0
        for p in payloads:
            group.append(self.analyzer.tokens(index_text(p)))
            size += len(group[-1])
            if size >= _INDEX_GROUP_TOKENS:
                self.bm25.add(group)
                group, size = [], 0
        if group:
            self.bm25.add(group)
        self.attrs.append(payloads)
        self.tokens.append(payloads, token_rows)

    def retire(self, removed: np.ndarray, payload: Callable[[int], Payload]) -> None:
        """Take the rows of bool ``removed`` (n,) (deleted or replaced: ``lifecycle.removed``)
        out of the BM25 statistics, reading each newly removed row's text (``payload(i)``)."""
        fresh = np.flatnonzero(removed[: len(self.bm25)] & ~self.bm25.retired())
        for i in fresh.tolist():
            self.bm25.retire(i, self.analyzer.tokens(index_text(payload(i))))

    def _links_from_cues(self, stop: int, types: np.ndarray) -> None:
        """Rebuild the links of ordinals ``[0, stop)`` from the cues (a loaded snapshot)."""
        self.links = Links()
        self._lineage_linked = set()
        self._lineage_scanned, self._lineage_waiting = 0, set()
        tw = self.config.association.tag_weight
        version = np.asarray(self.attrs.column("version")[:stop])
        episodic = (np.asarray(types[:stop]) == MemoryType.EPISODIC) & (version == 1)
        self.links.extend(self.cues.session[:stop], episodic, self.cues.tags[:stop], tw)

    def cue_tokens(self, p: Payload) -> frozenset[str]:
        """Analysed tokens of a memory's cues: its speaker's first name and its tags."""
        key = (p.speaker, p.tags)
        cached = self._cue_cache.get(key)
        if cached is None:
            words = [p.speaker.split()[0]] if p.speaker.strip() else []
            words.extend(p.tags)
            cached = frozenset(self.analyzer.tokens(" ".join(words))) if words else frozenset()
            if len(self._cue_cache) > _CUE_CACHE_MAX:
                self._cue_cache.clear()
            self._cue_cache[key] = cached
        return cached

    # ---- lineage -----------------------------------------------------------------------
    def session_turns(
        self, types: np.ndarray, session: int, first_seq: int, last_seq: int
    ) -> list[int]:
        """Ordinals of the episodes of ``session`` with sequence in [first_seq, last_seq]
        (``types``: the MemoryType of every ordinal), ascending. Cost ∝ the session's turns."""
        ords = np.asarray(self.cues.session_index.get(session, ()), dtype=np.int64)
        if not ords.size:
            return []
        seq = self.cues.sequence[ords]
        m = (seq >= first_seq) & (seq <= last_seq) & (types[ords] == MemoryType.EPISODIC)
        turns: list[int] = ords[m].tolist()
        return turns

    def link_lineage(
        self, provenance: ProvenanceMemory, id_map: dict[int, int], types: np.ndarray
    ) -> None:
        """Add lineage edges fact <-> parent turns for every LIVE record not yet linked.

        The parents are the record's turn range (what ``explain`` reports), so the edges are a
        function of the persisted regions alone. Only records appended since the last call and
        those still waiting (PARTIAL, or LIVE before their fact is indexed) are read, and the
        turns of one run are found once: a consolidation of S sessions links in O(its facts)."""
        n = provenance.count
        if n < self._lineage_scanned:  # a different region: start over
            self._lineage_scanned, self._lineage_waiting = 0, set()
        slots = np.array(
            sorted(self._lineage_waiting | set(range(self._lineage_scanned, n))), dtype=np.int64
        )
        self._lineage_scanned = n
        if not slots.size:
            return
        rows = provenance.read(slots, verify=False)
        lw = self.config.association.lineage_weight
        live = ProvenanceMemory.live(rows)
        runs: dict[tuple[int, int, int], list[int]] = {}
        for slot, r, is_live in zip(slots.tolist(), rows, live.tolist(), strict=True):
            # a turn range a record names is never handed out again (after its turns are
            # deleted and compacted away), so it keeps meaning those turns or none
            self.cues.reserve_sequence(int(r["session_id"]), int(r["last_seq"]))
            target = int(r["target_tsid"])
            if target in self._lineage_linked:
                self._lineage_waiting.discard(slot)
                continue
            fact = id_map.get(target)
            if not is_live or fact is None:
                # PARTIAL (it may turn LIVE), or LIVE ahead of its fact: looked at again
                if is_live or int(r["flags"]) == PROV_PARTIAL:
                    self._lineage_waiting.add(slot)
                else:
                    self._lineage_waiting.discard(slot)
                continue
            key = (int(r["session_id"]), int(r["first_seq"]), int(r["last_seq"]))
            if key not in runs:
                first = self.attrs.column("version")
                # first versions only: what the consolidation saw, whenever the links are built
                runs[key] = [t for t in self.session_turns(types, *key) if first[t] == 1]
            for parent in runs[key]:
                if parent < fact:  # parents precede their fact (a later turn never is one)
                    self.links.link(fact, parent, lw)
            self._lineage_linked.add(target)
            self._lineage_waiting.discard(slot)

    # ---- snapshot ----------------------------------------------------------------------
    def load_snapshot(
        self,
        directory: Path,
        n: int,
        types: np.ndarray,
        *,
        binding: Callable[[Mapping[str, Any], int], None] | None = None,
    ) -> int:
        """Load ``directory/derived.snap`` if it matches this store of ``n`` memories; returns
        the memories it covers (0 when it is missing or unusable: everything is replayed).
        ``binding(meta, covered)`` raises ``CorruptionError`` for a snapshot of another store
        or generation (``storage.identity``). The caller then appends the memories after it."""
        snap = directory / SNAPSHOT_NAME
        if not os.path.lexists(snap):
            return 0
        try:
            covered = self._read_snapshot(snap, n, binding)
        except FileNotFoundError:  # replaced (a writer's save or compaction) since the look
            return 0
        except (CorruptionError, KeyError, ValueError) as exc:
            log.warning("%s: derived snapshot unusable (%s); rebuilding", directory, exc)
            self.bm25, self.cues, self.links = self._new_bm25(), Cues(), Links()
            self.attrs, self.tokens = Attributes(), TokenRows()
            return 0
        self._links_from_cues(covered, types)
        self.snapshot_covers = covered
        return covered

    def _read_snapshot(
        self, snap: Path, n: int, binding: Callable[[Mapping[str, Any], int], None] | None
    ) -> int:
        regular_or_refuse(snap)  # a FIFO would block the read: rebuild instead
        meta, arrays = read_snapshot(snap)
        covered = int(meta.get("covered", -1))
        if meta.get("analyzer") != self.analyzer.name or not 0 <= covered <= n:
            raise CorruptionError(f"{snap}: snapshot does not match this store", file=str(snap))
        if binding is not None:
            binding(meta, covered)
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
        if "life.user" not in arrays:  # written before the lifecycle columns existed
            raise CorruptionError(f"{snap}: snapshot has no lifecycle columns", file=str(snap))
        if "tok.ids" not in arrays:  # written before the token relay existed
            raise CorruptionError(f"{snap}: snapshot has no token rows", file=str(snap))
        cues = Cues.from_state(cue, covered, str(snap))
        life = {k[5:]: v for k, v in arrays.items() if k.startswith("life.")}
        self.attrs = Attributes.from_state(life, covered, cues.external_id, str(snap))
        tok = {k[4:]: v for k, v in arrays.items() if k.startswith("tok.")}
        self.tokens = TokenRows.from_state(tok, covered, str(snap))
        self.bm25, self.cues = bm25, cues
        return covered

    def save_snapshot(
        self, directory: Path, *, durable: bool, stamp: Mapping[str, Any] | None = None
    ) -> None:
        """Write the snapshot of every memory indexed so far (atomic: ``.partial`` → rename).

        Something that is not ours under the snapshot's name (a directory) is left alone with
        a warning: the snapshot only speeds up opening. ``OSError`` from the write is the
        caller's to handle (the memories stay safe in the regions either way)."""
        n = len(self)
        target = directory / SNAPSHOT_NAME
        why = "the snapshot is not saved and the indexes are rebuilt at each open"
        if blocked_by_directory(target, "derived-index snapshot", why):
            self.snapshot_covers = n
            return
        arrays = {f"bm25.{k}": v for k, v in self.bm25.state().items()}
        arrays.update({f"cue.{k}": v for k, v in self.cues.state().items()})
        arrays.update({f"life.{k}": v for k, v in self.attrs.state().items()})
        arrays.update({f"tok.{k}": v for k, v in self.tokens.state().items()})
        write_snapshot(
            target,
            arrays,
            {
                "covered": n,
                "analyzer": self.analyzer.name,
                "ts": int(time.time() * 1000),
                **(stamp or {}),  # the store's identity (storage.identity.snapshot_binding)
            },
            durable=durable,
        )
        self.snapshot_covers = n

    def save_snapshots(
        self, directory: Path, *, durable: bool, stamp: Callable[[int], Mapping[str, Any]]
    ) -> None:
        """:meth:`save_snapshot` when memories were indexed since the last one, and the IVF
        partition (:mod:`.ivf_snapshot`) when it changed since written; ``stamp(n)`` is the
        store's identity at ``n`` memories."""
        if len(self) != self.snapshot_covers:
            self.save_snapshot(directory, durable=durable, stamp=stamp(len(self)))
        save_partition(directory, self.dense.first_pass, stamp, durable=durable)

    def load_partition(
        self, directory: Path, n: int, binding: Callable[[Mapping[str, Any], int], None]
    ) -> bool:
        """Offer the persisted IVF partition to the dense relay's first pass (when it has one
        and the file describes this store of ``n`` memories: :mod:`.ivf_snapshot`)."""
        return load_partition(directory, self.dense.first_pass, n, self.dense.dim, binding)


def _first_pass(config: Config) -> FirstPass | None:
    """The dense relay's IVF first pass the config asks for (``[dense] ivf_min_rows`` > 0)."""
    d = config.dense
    if d.ivf_min_rows <= 0:
        return None
    return FirstPass(d.ivf_min_rows, d.ivf_nprobe, d.ivf_lists or None)
