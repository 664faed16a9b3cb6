"""What one :func:`~spector_gpu.eval.runner.evaluate` call gathers: rankings, latencies, timings.

For each configuration and question, :class:`RunLog` keeps the engine's ranking as ``dia_id``
(best first, each once; an id that is no turn keeps its TSID) with the engine's scores, and the
per-query latency of every ``recall_batch``. It also times the stores' lifecycle across the
whole evaluation (:attr:`RunLog.timing`, seconds): ``open_s`` (``SpectorMemory.open`` of a
fresh store), ``remember_s`` (the one ``remember_batch`` of its turns), ``recall_s`` (every
recall, warm-up included), ``close_s`` (closing the store) and ``cleanup_s`` (removing a
temporary store directory).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SpectorError

if TYPE_CHECKING:
    from .records import Question
    from .scorer import Scorer

__all__ = ["PHASES", "RunLog"]

PHASES: tuple[str, ...] = ("open", "remember", "recall", "close", "cleanup")


class RunLog:
    """Rankings, scores, latencies and store timings of one evaluation (see the module)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.ranked: dict[str, dict[str, tuple[list[str], list[float]]]] = {n: {} for n in names}
        self.latency_ms: dict[str, list[float]] = {n: [] for n in names}
        self.seconds: dict[str, float] = dict.fromkeys(names, 0.0)
        self.timing: dict[str, float] = {f"{p}_s": 0.0 for p in PHASES}
        self.stores = 0
        self.skipped_turns = 0  # empty or whitespace-only turns the import left out
        self.described: dict[str, Any] | None = None

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the wall time of the ``with`` body to ``timing[name + "_s"]``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timing[f"{name}_s"] += time.perf_counter() - t0

    def add(
        self, name: str, qids: list[str], batch: Any, to_doc: Mapping[str, str], seconds: float
    ) -> None:
        """Record one ``RecallBatch`` (ids ``<U13`` (n, k), scores float32 (n, k), counts int
        (n,)) recalled for ``qids`` in ``seconds``."""
        ids, scores = np.asarray(batch.ids), np.asarray(batch.scores)
        counts = np.asarray(batch.counts)
        if ids.shape[0] != len(qids):
            raise SpectorError(f"recall_batch returned {ids.shape[0]} rows for {len(qids)} queries")
        for i, qid in enumerate(qids):
            docs: dict[str, float] = {}
            for j in range(int(counts[i])):
                tsid = str(ids[i, j])
                if tsid:
                    docs.setdefault(to_doc.get(tsid, tsid), float(scores[i, j]))
            self.ranked[name][qid] = (list(docs), list(docs.values()))
        self.latency_ms[name] += [seconds * 1000.0 / len(qids)] * len(qids)
        self.seconds[name] += seconds

    def rankings(self, name: str) -> dict[str, list[str]]:
        """``{qid: [dia_id, …]}`` of configuration ``name``."""
        return {qid: docs for qid, (docs, _) in self.ranked[name].items()}

    def rows(
        self, questions: Sequence[Question], ks: Sequence[int], scorer: Scorer
    ) -> list[dict[str, Any]]:
        """One record per (configuration, question): the question, the top ``max(ks)``
        retrieved ``dia_id`` and their scores, the rank of the first evidence (whole ranking)
        and the scorer's per-question metrics."""
        rows: list[dict[str, Any]] = []
        depth = max(ks)
        for name in self.ranked:
            scored = scorer.per_question(self.rankings(name), questions, ks)
            for q in questions:
                docs, vals = self.ranked[name].get(q.qid, ([], []))
                evidence = set(q.evidence)
                first = next((r for r, d in enumerate(docs, 1) if d in evidence), None)
                rows.append(
                    {
                        "config": name,
                        "qid": q.qid,
                        "conv_id": q.conv_id,
                        "category": q.category,
                        "question": q.text,
                        "answer": q.answer,
                        "evidence": list(q.evidence),
                        "retrieved": docs[:depth],
                        "scores": vals[:depth],
                        "first_evidence_rank": first,
                        **scored.get(q.qid, {}),
                    }
                )
        return rows

    def summaries(
        self, questions: Sequence[Question], ks: Sequence[int], scorer: Scorer
    ) -> dict[str, dict[str, Any]]:
        """``{name: scorer summary + latency_ms_p50 / latency_ms_p95 (ms per query) and
        queries_per_s}`` for every configuration."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.ranked:
            entry = scorer.summary(self.rankings(name), questions, ks)
            lat = np.asarray(self.latency_ms[name], dtype=np.float64)
            entry["latency_ms_p50"] = float(np.percentile(lat, 50)) if lat.size else None
            entry["latency_ms_p95"] = float(np.percentile(lat, 95)) if lat.size else None
            secs = self.seconds[name]
            entry["queries_per_s"] = lat.size / secs if secs > 0 else None
            out[name] = entry
        return out

    def timing_report(self) -> dict[str, float | int]:
        """``timing`` plus ``stores`` (how many were built), ``skipped_turns`` (empty turns
        left out) and ``build_s`` (open + remember + close), JSON-ready."""
        t = self.timing
        build = t["open_s"] + t["remember_s"] + t["close_s"]
        return {**t, "stores": self.stores, "skipped_turns": self.skipped_turns, "build_s": build}
