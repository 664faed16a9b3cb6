"""Hydration: typed results read from the store each memory's ``Location.type`` names.

A recall returns ordinals and scores; :class:`Hydrator` turns them into
:class:`~spector_gpu.types.CognitiveResult` objects on demand (``RecallBatch.results(i)``),
one query at a time: the header columns of the query's hits are gathered once, each payload is
read (and verified) from its store. The retrieval strength D and storage strength S shown are
the ones that ranked the memory (taken at the recall's clock), not re-read at hydration time.
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
    created = p.created_ms or int(cols.created_ms[o])
    expires = int(cols.expires_ms[o])
    after = cortex.derived.attrs.successors(int(cols.ids[o]))
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
        "superseded_by": tuple(encode_tsid(int(cols.ids[j])) for j in live),
    }


class Hydrator:
    """Builds typed results from a cortex (the caller holds the store's lock)."""

    def __init__(self, cortex: Cortex) -> None:
        self.cortex = cortex

    def result(
        self,
        o: int,
        score: float,
        d: float,
        s: float | None = None,
        explain: Explanation | None = None,
        relevance: float = 0.0,
        tsid: str | None = None,
    ) -> CognitiveResult:
        """Hydrate ordinal ``o``; ``s`` defaults to the current storage strength; ``tsid`` is
        its id when the caller already encoded it."""
        c = self.cortex
        h = c.cols.headers[o]
        p = c.payload(o)
        life = lifecycle_fields(c, o, p)
        provenance, source = int(h["provenance"]), int(h["source"])
        return CognitiveResult(
            id=tsid if tsid is not None else encode_tsid(int(c.cols.ids[o])),
            text=p.text,
            score=score,
            memory_type=MemoryType(int(c.cols.index["type"][o])),
            importance=float(h["importance"]),
            provenance=RecordProvenance(provenance)
            if provenance <= 4
            else RecordProvenance.UNKNOWN,
            retrieval_strength=d,
            storage_strength=float(c.cols.storage[o]) if s is None else s,
            timestamp_ms=int(h["timestamp_ms"]),
            session_id=p.session_id,
            role=Role(p.role) if p.role is not None and p.role <= 5 else None,
            speaker=p.speaker,
            tags=p.tags,
            external_id=p.external_id,
            source=Source(source) if source <= 3 else Source.EXPERIENCED,
            valence=int(h["valence"]),
            arousal=int(h["arousal"]),
            citations=p.citations,
            source_uri=p.source_uri,
            source_span=p.source_span,
            skill_name=p.skill_name,
            steps=p.steps,
            consolidated=bool(int(h["flags"]) & FLAG_CONSOLIDATED),
            breakdown=explain,
            relevance=relevance,
            **life,
        )

    def results(
        self,
        ordinals: np.ndarray,
        scores: np.ndarray,
        d: np.ndarray,
        s: np.ndarray,
        explain: list[Explanation] | None,
        relevance: np.ndarray | None = None,
        tsids: np.ndarray | None = None,
    ) -> list[CognitiveResult]:
        """One query's hits, best first: int64 ordinals, float32 scores, float64 D and S,
        float32 absolute relevance, and their ids when already encoded."""
        rel = np.zeros(len(ordinals)) if relevance is None else relevance
        ids: list[str | None] = [None] * len(ordinals) if tsids is None else tsids.tolist()
        return [
            self.result(o, sc, dd, ss, explain[j] if explain is not None else None, rr, ids[j])
            for j, (o, sc, dd, ss, rr) in enumerate(
                zip(ordinals.tolist(), scores.tolist(), d.tolist(), s.tolist(), rel.tolist())
            )
        ]
