"""Metrics: hand-checkable fixtures, the tie rule, category handling, and ranx as reference."""

from __future__ import annotations

import math
import random
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.errors import ValidationError
from spector_gpu.eval.metrics import (
    evaluate_run,
    hit_at_k,
    mrr,
    ndcg_at_k,
    per_question,
    rank_documents,
    recall_at_k,
)

# q1: ranking a, b, c — evidence b, c. q2: ranking x, y — evidence x.
RUN = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 0.9, "y": 0.1}}
QRELS = {"q1": {"b": 1, "c": 1}, "q2": {"x": 1, "z": 0}}


def test_hand_checked_values() -> None:
    assert recall_at_k(RUN, QRELS, 1) == {"q1": 0.0, "q2": 1.0}
    assert recall_at_k(RUN, QRELS, 2) == {"q1": 0.5, "q2": 1.0}
    assert recall_at_k(RUN, QRELS, 3) == {"q1": 1.0, "q2": 1.0}
    assert hit_at_k(RUN, QRELS, 1) == {"q1": 0.0, "q2": 1.0}
    assert hit_at_k(RUN, QRELS, 2) == {"q1": 1.0, "q2": 1.0}
    assert mrr(RUN, QRELS) == {"q1": 0.5, "q2": 1.0}
    # DCG@3 = 1/log2(3) + 1/log2(4); IDCG@3 = 1 + 1/log2(3)
    expected = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(RUN, QRELS, 3)["q1"] == pytest.approx(expected, abs=1e-12)
    assert ndcg_at_k(RUN, QRELS, 1) == {"q1": 0.0, "q2": 1.0}


def test_ties_break_by_doc_id_ascending() -> None:
    assert rank_documents({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]
    run = {"q": {"b": 1.0, "a": 1.0}}
    assert recall_at_k(run, {"q": {"a": 1}}, 1) == {"q": 1.0}
    assert recall_at_k(run, {"q": {"b": 1}}, 1) == {"q": 0.0}


def test_missing_run_scores_zero_and_no_evidence_is_skipped() -> None:
    qrels = {"q1": {"b": 1}, "q_none": {"a": 0}, "q_absent": {"a": 1}}
    rows = per_question(RUN, qrels, ks=(1, 10))
    assert set(rows) == {"q1", "q_absent"}
    assert all(v == 0.0 for v in rows["q_absent"].values())
    assert rows["q1"]["recall@10"] == 1.0 and rows["q1"]["mrr"] == 0.5
    result = evaluate_run(RUN, qrels, ks=(1, 10))
    assert result["n_questions"] == 2 and result["n_skipped"] == 1


def test_categories_overall_excludes_5_and_reports_it_apart() -> None:
    run = {"a": {"d1": 1.0}, "b": {"d1": 1.0}, "c": {"d1": 1.0}, "u": {"d1": 1.0}}
    qrels = {"a": {"d1": 1}, "b": {"d2": 1}, "c": {"d1": 1}, "u": {"d2": 1}}
    result = evaluate_run(run, qrels, ks=(1,), categories={"a": 1, "b": 2, "c": 5})
    # overall: a (1.0), b (0.0), u uncategorised (0.0)
    assert result["recall@1"] == pytest.approx(1 / 3)
    assert result["n_questions"] == 3
    assert result["by_category"] == {
        "1": {"recall@1": 1.0, "hit@1": 1.0, "mrr": 1.0, "ndcg@1": 1.0, "n_questions": 1},
        "2": {"recall@1": 0.0, "hit@1": 0.0, "mrr": 0.0, "ndcg@1": 0.0, "n_questions": 1},
    }
    assert result["category_5"] == {
        "recall@1": 1.0,
        "hit@1": 1.0,
        "mrr": 1.0,
        "ndcg@1": 1.0,
        "n_questions": 1,
    }


def test_empty_groups_give_none() -> None:
    result = evaluate_run({}, {"q": {"d": 1}}, ks=(5,), categories={"q": 5})
    assert result["n_questions"] == 0 and result["recall@5"] is None
    assert result["category_5"]["recall@5"] == 0.0


def test_bad_inputs_raise_validation_error() -> None:
    with pytest.raises(ValidationError, match="k must be"):
        recall_at_k(RUN, QRELS, 0)
    with pytest.raises(ValidationError, match="NaN"):
        mrr({"q1": {"a": float("nan")}}, QRELS)


def _random_case(seed: int, n_queries: int = 60) -> tuple[dict, dict]:
    rng = random.Random(seed)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in range(n_queries):
        docs = [f"d{i}" for i in range(rng.randrange(1, 40))]
        # distinct scores: ranx's order among equal scores is not specified, ours is
        scores = rng.sample(range(10_000), len(docs))
        run[f"q{q}"] = {d: s / 100.0 for d, s in zip(docs, scores)}
        pool = [f"d{i}" for i in range(50)]
        rels = rng.sample(pool, rng.randrange(1, 6))
        qrels[f"q{q}"] = dict.fromkeys(rels, 1)
        qrels[f"q{q}"][rng.choice([d for d in pool if d not in rels])] = 0  # judged, not relevant
    return run, qrels


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_ranx(seed: int) -> None:
    ranx = pytest.importorskip("ranx")
    run, qrels = _random_case(seed)
    r_run, r_qrels = ranx.Run(run), ranx.Qrels(qrels)
    ks = (1, 5, 10, 20)
    names = [f"{m}@{k}" for k in ks for m in ("recall", "hit_rate", "ndcg")] + ["mrr"]
    with warnings.catch_warnings():
        # numba warns about its own integer casts while compiling ranx's kernels
        warnings.simplefilter("ignore")
        ranx_means = ranx.evaluate(r_qrels, r_run, names)
    ours = per_question(run, qrels, ks=ks)
    assert set(ours) == set(run)
    for q, row in ours.items():
        for k in ks:
            # ranx's hit_rate@k is our hit@k; its ndcg@k uses Järvelin gains (= rel), identical
            # to our binary gains because the qrels are binary.
            assert row[f"recall@{k}"] == pytest.approx(r_run.scores[f"recall@{k}"][q], abs=1e-9)
            assert row[f"hit@{k}"] == pytest.approx(r_run.scores[f"hit_rate@{k}"][q], abs=1e-9)
            assert row[f"ndcg@{k}"] == pytest.approx(r_run.scores[f"ndcg@{k}"][q], abs=1e-9)
        assert row["mrr"] == pytest.approx(r_run.scores["mrr"][q], abs=1e-9)
    means = evaluate_run(run, qrels, ks=ks)
    for k in ks:
        assert means[f"recall@{k}"] == pytest.approx(ranx_means[f"recall@{k}"], abs=1e-9)
        assert means[f"ndcg@{k}"] == pytest.approx(ranx_means[f"ndcg@{k}"], abs=1e-9)
    assert means["mrr"] == pytest.approx(ranx_means["mrr"], abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.integers(0, 5), min_size=1, max_size=15),
    rel_mask=st.lists(st.booleans(), min_size=15, max_size=15),
)
def test_properties(scores: list[int], rel_mask: list[bool]) -> None:
    docs = {f"d{i:02d}": float(s) for i, s in enumerate(scores)}
    evidence = {d: 1 for i, d in enumerate(docs) if rel_mask[i]} or {"missing": 1}
    rows = per_question({"q": docs}, {"q": evidence}, ks=(1, 3, 5, 20))["q"]
    for name in ("recall", "hit", "ndcg"):
        assert all(0.0 <= rows[f"{name}@{k}"] <= 1.0 for k in (1, 3, 5, 20))
    assert rows["recall@1"] <= rows["recall@3"] <= rows["recall@5"] <= rows["recall@20"]
    assert rows["hit@1"] <= rows["hit@3"] <= rows["hit@5"] <= rows["hit@20"]
    assert (rows["mrr"] > 0) == (rows["hit@20"] > 0)  # every run here is shorter than 20
    assert rows["mrr"] >= rows["hit@1"]
    if rows["recall@20"] == 1.0 and len(evidence) == 1:  # one evidence at rank r = 1 / mrr
        assert rows["ndcg@20"] == pytest.approx(1 / math.log2(1 / rows["mrr"] + 1))
