"""The LoCoMo development split (read from ../shared/data/locomo10; skipped when absent).

Nothing from the data is copied here: the tests assert structure, counts the README states,
and that a plain BM25 baseline scored through the metrics and the runner is far above chance.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import Stemmer
from rank_bm25 import BM25Okapi

from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.loaders import load_dataset
from spector_gpu.eval.metrics import evaluate_run
from spector_gpu.eval.runner import evaluate
from spector_gpu.types import RecallBatch, RecallOptions

pytestmark = pytest.mark.locomo

DATA = Path(__file__).resolve().parents[3] / "shared/data/locomo10" / "locomo10-dev.json"
_STEM = Stemmer.Stemmer("english")


@pytest.fixture(scope="module")
def locomo() -> Dataset:
    if not DATA.is_file():
        pytest.skip(f"LoCoMo dev split not found at {DATA}")
    return load_dataset(DATA)


def _tokens(text: str) -> list[str]:
    return _STEM.stemWords(re.findall(r"[a-z0-9]+", text.lower()))


def test_counts_match_the_readme(locomo: Dataset) -> None:
    assert [c.conv_id for c in locomo.conversations] == [
        "conv-26",
        "conv-30",
        "conv-41",
        "conv-42",
        "conv-43",
    ]
    assert locomo.n_turns == 2760 and len(locomo.questions) == 999
    assert {q.category for q in locomo.questions} == {1, 2, 3, 4, 5}
    assert all(re.fullmatch(r"conv-\d+/q\d+", q.qid) for q in locomo.questions)


def test_turns_are_ordered_in_time_and_carry_captions(locomo: Dataset) -> None:
    for conv in locomo.conversations:
        assert len(conv.speakers) == 2
        stamps = [t.timestamp_ms for t in conv.turns]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        assert all(re.fullmatch(r"D\d+:\d+", t.dia_id) for t in conv.turns)
        captioned = [t for t in conv.turns if t.caption]
        assert captioned and all(t.index_text.endswith(f"[image: {t.caption}]") for t in captioned)


def test_malformed_evidence_is_normalised(locomo: Dataset) -> None:
    evidence = [e for q in locomo.questions for e in q.evidence]
    assert all(
        re.fullmatch(r"D\d+:\d+", e) for e in evidence
    )  # "D8:6; D9:17", "D:11:26", "D" fixed
    dangling = [
        e
        for q in locomo.questions
        for e in q.evidence
        if e not in set(locomo.conversation(q.conv_id).turn_ids)
    ]
    assert len(dangling) <= 1  # kept as given; it simply cannot be retrieved
    assert sum(not q.evidence for q in locomo.questions) == 2  # no evidence: skipped by metrics


def _bm25_run(dataset: Dataset, depth: int = 20) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for conv in dataset.conversations:
        bm25 = BM25Okapi([_tokens(t.index_text) for t in conv.turns])
        for q in dataset.questions_for(conv.conv_id):
            scores = bm25.get_scores(_tokens(q.text))
            top = sorted(range(len(scores)), key=lambda i: (-scores[i], conv.turns[i].dia_id))[
                :depth
            ]
            run[q.qid] = {conv.turns[i].dia_id: float(scores[i]) for i in top}
    return run


def test_bm25_baseline_through_the_metrics(locomo: Dataset) -> None:
    result = evaluate_run(_bm25_run(locomo), locomo.qrels(), categories=locomo.categories())
    assert result["n_questions"] + result["category_5"]["n_questions"] + result["n_skipped"] == 999
    assert result["n_skipped"] == 2
    chance = 10 / 700  # ten turns of a ~550-700 turn conversation
    assert result["recall@10"] > 20 * chance
    assert (
        result["recall@1"] <= result["recall@5"] <= result["recall@10"] <= result["recall@20"] < 1.0
    )


class _Bm25Memory:
    """A lexical stand-in for SpectorMemory: BM25 over the remembered texts."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.external: list[str] = []

    def remember_batch(self, records: list[dict[str, Any]]) -> list[str]:
        self.texts += [r["text"] for r in records]
        self.external += [r["external_id"] for r in records]
        self.bm25 = BM25Okapi([_tokens(t) for t in self.texts])
        return [f"{i + 1:013d}" for i in range(len(records))]

    def recall_batch(self, queries: list[str], options: RecallOptions) -> RecallBatch:
        ids = np.full((len(queries), options.k), "", dtype="<U13")
        scores = np.zeros((len(queries), options.k), dtype=np.float32)
        for i, q in enumerate(queries):
            s = self.bm25.get_scores(_tokens(q))
            top = sorted(range(len(s)), key=lambda j: (-s[j], self.external[j]))[: options.k]
            ids[i, : len(top)] = [f"{j + 1:013d}" for j in top]
            scores[i, : len(top)] = s[top]
        return RecallBatch(
            ids=ids, scores=scores, counts=np.full(len(queries), options.k, dtype=np.int32)
        )


def test_runner_on_one_conversation_matches_the_direct_baseline(locomo: Dataset) -> None:
    conv26 = locomo.filter(conversations=["conv-26"])

    @contextmanager
    def factory(path: Path) -> Iterator[_Bm25Memory]:
        yield _Bm25Memory()

    result = evaluate(conv26, memory_factory=factory, progress=False, batch_size=50)
    direct = evaluate_run(_bm25_run(conv26), conv26.qrels(), categories=conv26.categories())
    got = result.metrics["configs"]["default"]
    for key in ("recall@1", "recall@5", "recall@10", "recall@20", "hit@10", "mrr", "ndcg@10"):
        assert got[key] == pytest.approx(direct[key], abs=1e-12), key
    for cat, expected in direct["by_category"].items():
        assert got["by_category"][cat] == pytest.approx(expected, abs=1e-12), cat
