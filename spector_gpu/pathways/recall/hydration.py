"""Hydration: typed results read from the store each memory's ``Location.type`` names.

A recall returns ordinals and scores; :class:`Hydrator` turns them into
:class:`~spector_gpu.types.CognitiveResult` objects on demand (``RecallBatch.results(i)``),
one query at a time: the header columns of the query's hits are gathered once, each payload is
read (and verified) from its store. The retrieval strength D and storage strength S shown are
the ones that ranked the memory (taken at the recall's clock), not re-read at hydration time.

A batch may be hydrated after the handle's lock was released and taken again, with writes in
between (``recall_batch`` in one thread, ``delete`` and ``compact`` in another): its ordinals
are only valid in the cortex epoch that scored them. :meth:`Hydrator.rows_now` resolves each hit
again by its id when a compaction renumbered the rows since, and leaves out the hits whose
memory was deleted (or erased) in between, so a hit never carries another memory's text.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...cortex.cortex import Cortex
from ...cortex.ids import encode_tsid
from ...cortex.layouts import FLAG_CONSOLIDATED
from ...cortex.lifecycle import tombstoned
from ...cortex.payload import Payload
from ...cortex.strength import decayed
from ...frozen import frozen_builder
from ...lifecycle import MemoryKind
from ...provenance.record import RecordProvenance
from ...types import CognitiveResult, Explanation, MemoryType, Role, Source

__all__ = ["Hydrator", "lifecycle_fields", "retrieval_strength"]

_STRENGTH_ROWS = np.dtype([("last_recall_ms", "<i8"), ("retrieval_strength", "<f4")])


def retrieval_strength(cortex: Cortex, ordinals: np.ndarray, now_ms: int) -> np.ndarray:
    """Current D (float64) of memory ordinals at ``now_ms`` (the decay law of
    :mod:`spector_gpu.cortex.strength` over the in-memory columns)."""
    rows = np.zeros(len(ordinals), dtype=_STRENGTH_ROWS)
    rows["last_recall_ms"] = cortex.cols.last_event_ms[ordinals]
    rows["retrieval_strength"] = cortex.cols.d_event[ordinals]
    h = cortex.cols.headers[ordinals]
    return decayed(rows, now_ms, h["flags"], h["arousal"], cortex.config.strength).astype(
        np.float64
    )


def lifecycle_fields(cortex: Cortex, o: int, p: Payload) -> dict[str, Any]:
    """The lifecycle fields of ordinal ``o`` (payload ``p``) as ``CognitiveResult`` keywords:
    scopes, kind, confidence, metadata, times (epoch ms), version and supersession links
    (``superseded_by``: the live memories that supersede it)."""
    cols = cortex.cols
    return _lifecycle(cortex, p, int(cols.created_ms[o]), int(cols.expires_ms[o]), int(cols.ids[o]))


def _lifecycle(
    cortex: Cortex, p: Payload, created_ms: int, expires: int, tsid: int
) -> dict[str, Any]:
    cols = cortex.cols
    created = p.created_ms or created_ms
    after = cortex.derived.attrs.successors(tsid)
    live = [j for j in after if cols.current[j] and not tombstoned(cols.headers[j : j + 1])[0]]
    return {
        "user_id": p.user_id,
        "agent_id": p.agent_id,
        "run_id": p.run_id,
        "namespace": p.namespace,
        "kind": None if not p.kind else MemoryKind(p.kind),
        "confidence": p.confidence,
        "metadata": p.metadata,
        "created_at": created,
        "updated_at": p.updated_ms or created,
        "expires_at": expires or None,
        "version": p.version,
        "supersedes": None if not p.supersedes else encode_tsid(p.supersedes),
        "also_supersedes": tuple(encode_tsid(t) for t in p.also_supersedes),
        "superseded_by": tuple(encode_tsid(int(cols.ids[j])) for j in live),
    }


# the header fields a result shows, read for a query's hits at once (one numpy gather each)
_HEADER_FIELDS = (
    "provenance",
    "source",
    "importance",
    "timestamp_ms",
    "valence",
    "arousal",
    "flags",
)
# enum members by code: a dict lookup instead of an Enum call per field of every hit
_TYPES = {int(t): t for t in MemoryType}
_ROLES = {int(r): r for r in Role}
_SOURCES = {int(x): x for x in Source}
_PROVENANCE = {int(x): x for x in RecordProvenance}
_RESULT = frozen_builder(CognitiveResult)  # a result in one step (frozen.py: ~8 -> ~2 us)


class Hydrator:
    """Builds typed results from a cortex (the caller holds the store's lock)."""

    def __init__(self, cortex: Cortex) -> None:
        self.cortex = cortex

    def result(
        self,
        o: int,
        score: float | None,
        d: float,
        s: float | None = None,
        explain: Explanation | None = None,
        relevance: float = 0.0,
        tsid: str | None = None,
    ) -> CognitiveResult:
        """Hydrate ordinal ``o``; ``score`` None for a memory read rather than ranked (``get``,
        listings); ``s`` defaults to the current storage strength; ``tsid`` is its id when the
        caller already encoded it."""
        storage = float(self.cortex.cols.storage[o]) if s is None else s
        return self.results(
            np.array([o], dtype=np.int64),
            None if score is None else np.array([score]),
            np.array([d]),
            np.array([storage]),
            None if explain is None else [explain],
            np.array([relevance]),
            None if tsid is None else np.array([tsid]),
        )[0]

    def rows_now(self, raw_ids: np.ndarray, ordinals: np.ndarray, epoch: int) -> np.ndarray:
        """Where the hits a recall scored in cortex ``epoch`` (int64 TSIDs ``raw_ids`` at
        int64 ``ordinals``) are now: their ordinals, or -1 for a memory deleted since or erased
        by a compaction (the caller holds the store's lock)."""
        c = self.cortex
        if epoch == c.epoch:
            rows = ordinals.astype(np.int64, copy=True)
        else:  # a compaction (ours, or the writer's a reader followed) renumbered every row
            get = c.id_map.get
            rows = np.array([get(t, -1) for t in raw_ids.tolist()], dtype=np.int64)
        there = rows >= 0
        rows[there] = np.where(tombstoned(c.cols.headers[rows[there]]), -1, rows[there])
        return rows

    def results(
        self,
        ordinals: np.ndarray,
        scores: np.ndarray | None,
        d: np.ndarray,
        s: np.ndarray,
        explain: list[Explanation] | None,
        relevance: np.ndarray | None = None,
        tsids: np.ndarray | None = None,
    ) -> list[CognitiveResult]:
        """One query's hits, best first: int64 ordinals, float32 scores (None: read, not
        ranked), float64 D and S, float32 absolute relevance, and their ids when already
        encoded."""
        c = self.cortex
        cols = c.cols
        rel = np.zeros(len(ordinals)) if relevance is None else relevance
        raw_ids = cols.ids[ordinals].tolist()
        ids = [encode_tsid(i) for i in raw_ids] if tsids is None else tsids.tolist()
        h = cols.headers[ordinals]
        rows = zip(
            self.payloads(ordinals),
            zip(*(h[name].tolist() for name in _HEADER_FIELDS)),
            cols.index["type"][ordinals].tolist(),
            cols.created_ms[ordinals].tolist(),
            cols.expires_ms[ordinals].tolist(),
            raw_ids,
            ids,
            [None] * len(ordinals) if scores is None else scores.tolist(),
            d.tolist(),
            s.tolist(),
            rel.tolist(),
            explain if explain is not None else [None] * len(ordinals),
        )
        return [self._result(*row) for row in rows]

    def payloads(self, ordinals: np.ndarray) -> list[Payload]:
        """Each ordinal's verified payload (``Cortex.payload``), the episodes among them read
        in one pass over the log (``EpisodicMemory.payloads``)."""
        c = self.cortex
        entries = c.cols.index[ordinals]
        episode = entries["type"] == MemoryType.EPISODIC
        read = iter(
            c.stores.episodic.payloads(entries["record_offset"][episode], entries["id"][episode])
        )
        return [
            next(read) if e else c.payload(o) for o, e in zip(ordinals.tolist(), episode.tolist())
        ]

    def _result(
        self,
        p: Payload,
        head: tuple[Any, ...],
        t: int,
        created_ms: int,
        expires_ms: int,
        raw_id: int,
        tsid: str,
        score: float | None,
        d: float,
        s: float,
        relevance: float,
        explain: Explanation | None,
    ) -> CognitiveResult:
        c = self.cortex
        provenance, source, importance, stamp, valence, arousal, flags = head
        return _RESULT(
            {
                "id": tsid,
                "text": p.text,
                "score": score,
                "memory_type": _TYPES[t] if t in _TYPES else MemoryType(t),
                "importance": importance,
                "provenance": _PROVENANCE.get(provenance, RecordProvenance.UNKNOWN),
                "retrieval_strength": d,
                "storage_strength": s,
                "timestamp_ms": stamp,
                "session_id": p.session_id,
                "role": None if p.role is None else _ROLES.get(p.role),
                "speaker": p.speaker,
                "tags": p.tags,
                "external_id": p.external_id,
                "source": _SOURCES.get(source, Source.EXPERIENCED),
                "valence": valence,
                "arousal": arousal,
                "citations": p.citations,
                "source_uri": p.source_uri,
                "source_span": p.source_span,
                "skill_name": p.skill_name,
                "steps": p.steps,
                "consolidated": bool(flags & FLAG_CONSOLIDATED),
                "breakdown": explain,
                "relevance": relevance,
                **_lifecycle(c, p, created_ms, expires_ms, raw_id),
            }
        )
