"""The LongMemEval development split (read from ../shared/data/longmemeval; skipped when absent).

Nothing from the data is copied here: the tests check the counts the protocol implies, and that
the official BM25 baseline (rank_bm25 over whitespace tokens of the user turns, the paper's
``flat-bm25`` at turn granularity), scored by this package, gives the figures issue 13 reports.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from spector_gpu.eval.dataset import Dataset
from spector_gpu.eval.loaders import load_dataset
from spector_gpu.eval.longmemeval_protocol import OFFICIAL_KS, LongMemEvalScorer

pytestmark = pytest.mark.longmemeval

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "longmemeval" / "longmemeval_s_cleaned.dev.json"


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    if not DATA.is_file():
        pytest.skip(f"LongMemEval dev split not found at {DATA}")
    with open(DATA, encoding="utf-8") as fh:
        data: list[dict[str, Any]] = json.load(fh)
    return data


@pytest.fixture(scope="module")
def dev(raw: list[dict[str, Any]]) -> Dataset:
    return load_dataset(DATA)


def _scorer(ds: Dataset) -> LongMemEvalScorer:
    assert isinstance(ds.scorer, LongMemEvalScorer)
    return ds.scorer


def test_counts(dev: Dataset, raw: list[dict[str, Any]]) -> None:
    scorer = _scorer(dev)
    judged = [scorer.judgement(q.qid) for q in dev.questions]
    assert len(judged) == 200 and sum(j.scored for j in judged) == 162
    assert sum(j.abstention for j in judged) == 13
    assert Counter(j.question_type for j in judged if not j.abstention and not j.turn_gold) == {
        "single-session-assistant": 25
    }
    counts = scorer.describe()["protocol"]
    assert counts["n_skipped_empty_turns"] == 10 and counts["n_skipped_empty_user_turns"] == 7
    assert counts["n_repeated_session_ids"] == 6
    assert counts["n_turns"] == sum(len(s) for r in raw for s in r["haystack_sessions"])
    assert dev.n_turns == counts["n_remembered_turns"] == counts["n_turns"] - 10
    for j, r in zip(judged, raw, strict=True):
        assert set(j.answer_session_ids) <= set(j.session_ids)
        # memory_session counts a gold session once; the code would count a repeat twice
        assert all(j.session_corpus.count(g) == 1 for g in j.session_gold)
        assert j.session_ids == tuple(r["haystack_session_ids"])


def _bm25_rankings(raw: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The paper's flat-bm25 at turn granularity, as dia_ids (an empty turn has none)."""
    out: dict[str, list[str]] = {}
    for r in raw:
        corpus, dia = [], []
        for p, session in enumerate(r["haystack_sessions"], 1):
            for n, turn in enumerate(session, 1):
                if turn["role"] == "user":
                    corpus.append(turn["content"])
                    dia.append(f"S{p}:{n}")
        scores = BM25Okapi([doc.split(" ") for doc in corpus]).get_scores(r["question"].split(" "))
        out[r["question_id"]] = [dia[i] for i in np.argsort(scores)[::-1]]
    return out


def test_official_bm25_baseline_reproduces_the_issue(
    dev: Dataset, raw: list[dict[str, Any]]
) -> None:
    summary = _scorer(dev).summary(_bm25_rankings(raw), dev.questions, OFFICIAL_KS)
    assert summary["n_scored"] == 162
    expected = {  # issue 13, "official BM25 baseline (rank_bm25, whitespace tokens)"
        "session/recall_any@5": 0.735,
        "session/recall_all@5": 0.525,
        "session/recall_all@10": 0.654,
        "turn/recall_all@10": 0.586,
        "session/ndcg_any@10": 0.560,
    }
    for key, value in expected.items():
        assert summary[key] == pytest.approx(value, abs=5e-4), key
