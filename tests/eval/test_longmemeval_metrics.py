"""LongMemEval metrics: a hand-checked fixture, the DCG quirk, and an independent port of the
paper's formulas (numpy, corpus indices, as ``eval_utils.py`` and ``run_retrieval.py`` do)
checked against the package on random haystacks and rankings."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.errors import ValidationError
from spector_gpu.eval.longmemeval import parse_longmemeval
from spector_gpu.eval.longmemeval_metrics import (
    dcg,
    ndcg_any,
    recall_all,
    recall_any,
    strip_turn_id,
    turn_to_session_metrics,
    widened_depth,
)
from spector_gpu.eval.longmemeval_protocol import (
    OFFICIAL_KS,
    Judgement,
    LongMemEvalScorer,
    score_question,
)
from spector_gpu.eval.synthetic_longmemeval import KINDS, generate_longmemeval_like


def _t(role: str, has_answer: bool | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": role, "content": f"{role} says something"}
    if has_answer is not None:
        turn["has_answer"] = has_answer
    return turn


def _record(ids: list[str], sessions: list[list[dict[str, Any]]], qid: str = "q") -> dict[str, Any]:
    return {
        "question_id": qid,
        "question_type": "multi-session",
        "question": "?",
        "answer": "a",
        "question_date": "2023/05/09 (Tue) 10:00",
        "haystack_session_ids": ids,
        "haystack_dates": ["2023/05/01 (Mon) 10:00"] * len(ids),
        "haystack_sessions": sessions,
        "answer_session_ids": [i for i in ids if "answer" in i],
    }


# s_a: two user turns; answer_x_1: gold user turn 1, plain user turn 3; answer_x_2: plain user
# turn 1, an assistant evidence turn 2, gold user turn 3; s_b: one user turn.
HAND = _record(
    ["s_a", "answer_x_1", "answer_x_2", "s_b"],
    [
        [_t("user"), _t("assistant"), _t("user"), _t("assistant")],
        [_t("user", True), _t("assistant", False), _t("user", False)],
        [_t("user", False), _t("assistant", True), _t("user", True)],
        [_t("user"), _t("assistant")],
    ],
)
RANKING = ["S3:2", "S1:1", "S1:3", "S2:3", "S2:1", "S4:1", "S3:3", "S3:1", "S1:2", "S2:2", "S4:2"]


@pytest.fixture(scope="module")
def hand() -> Judgement:
    scorer = parse_longmemeval([HAND]).scorer
    assert isinstance(scorer, LongMemEvalScorer)
    return scorer.judgement("q")


def test_hand_checked_rankings(hand: Judgement) -> None:
    assert hand.turn_ranking(RANKING) == [
        "s_a_1",
        "s_a_3",
        "noans_x_1_3",
        "answer_x_1_1",
        "s_b_1",
        "answer_x_2_3",
        "noans_x_2_1",
    ]
    assert hand.memory_session_ranking(RANKING) == ["answer_x_2", "s_a", "answer_x_1", "s_b"]
    assert hand.raw_session_ranking(RANKING) == ["answer_x_2", "s_a", "answer_x_1", "s_b"]
    assert hand.turn_gold == {"answer_x_1_1", "answer_x_2_3"}
    assert hand.session_gold == {"answer_x_1", "answer_x_2"}


def test_hand_checked_values(hand: Judgement) -> None:
    row = score_question(hand, RANKING, (1, 3, 5, 10))
    log2 = math.log2
    expected = {
        # turn ranking relevances 0 0 0 1 0 1 0; ideal: two gold turns -> DCG 1 + 1 = 2
        "turn/recall_any@3": 0.0,
        "turn/recall_any@5": 1.0,
        "turn/recall_all@5": 0.0,
        "turn/recall_all@10": 1.0,
        "turn/ndcg_any@1": 0.0,
        "turn/ndcg_any@5": (1 / log2(4)) / 2,
        "turn/ndcg_any@10": (1 / log2(4) + 1 / log2(6)) / 2,
        # turn -> session: s_a s_a noans_x_1 answer_x_1 s_b answer_x_2 noans_x_2 (the plain
        # turns of an evidence session name its noans twin); k=3 widens to 4 turns, k=5 to 6
        "session/recall_any@1": 0.0,
        "session/recall_any@3": 1.0,
        "session/recall_all@3": 0.0,
        "session/ndcg_any@3": (1 / log2(4)) / 2,
        "session/recall_all@5": 1.0,
        "session/ndcg_any@5": (1 / log2(4) + 1 / log2(6)) / 2,
        # memory sessions: answer_x_2 (its assistant turn ranked first) s_a answer_x_1 s_b
        "memory_session/recall_any@1": 1.0,
        "memory_session/recall_all@1": 0.0,
        "memory_session/recall_all@3": 1.0,
        "memory_session/ndcg_any@1": 1.0,
        "memory_session/ndcg_any@3": (1 + 1 / log2(3)) / 2,
        "vendor/session_hit@5": 1.0,
        "vendor/session_hit@10": 1.0,
    }
    for key, value in expected.items():
        assert row[key] == pytest.approx(value, abs=1e-12), key


def test_dcg_leaves_ranks_one_and_two_undiscounted() -> None:
    assert dcg([0.0, 1.0], 2) == 1.0
    assert dcg([1.0, 1.0, 1.0], 3) == pytest.approx(2 + 1 / math.log2(3))
    assert dcg([1.0, 1.0, 1.0], 2) == 2.0 and dcg([], 5) == 0.0
    assert ndcg_any(["x", "g"], {"g"}, 2) == 1.0  # gold at rank 2 scores as at rank 1
    assert ndcg_any(["x", "y", "g"], {"g"}, 3) == pytest.approx(1 / math.log2(3))
    assert ndcg_any(["g"], set(), 5) == 0.0
    assert ndcg_any(["g", "x"], {"g"}, 2, corpus=["g", "g", "x"]) == pytest.approx(0.5)


def test_recall_and_widening_edges() -> None:
    assert recall_all(["a"], set(), 1) == 1.0 and recall_any(["a"], set(), 1) == 0.0
    assert recall_all(["a", "b", "c"], {"a", "c"}, 2) == 0.0
    assert recall_all(["a", "b", "c"], {"a", "c"}, 3) == 1.0
    assert widened_depth(["a", "a", "b", "a", "c"], 3) == 5
    assert widened_depth(["a", "a"], 3) == 2 and widened_depth(["a", "a"], 3, short=9) == 9
    assert strip_turn_id("answer_4be1b6b4_2_3") == "answer_4be1b6b4_2"


def test_a_ranking_with_fewer_sessions_than_k_is_scored_against_the_whole_ideal() -> None:
    corpus = ["answer_x_1_1", "answer_y_1_3", "answer_y_1_5", "s_1_1", "s_2_1"]
    gold = {"answer_x_1_1", "answer_y_1_3", "answer_y_1_5"}
    row = turn_to_session_metrics("session", ["answer_x_1_1"], gold, corpus, (1, 3))
    assert row["session/recall_any@3"] == 1.0 and row["session/recall_all@3"] == 0.0
    # as the code on a full ranking: the widened depth passes the corpus, the ideal is whole
    assert row["session/ndcg_any@3"] == pytest.approx(1 / (2 + 1 / math.log2(3)))
    assert row["session/ndcg_any@1"] == pytest.approx(1 / 1)


# ---- an independent port of the paper's code --------------------------------------------


def ref_corpus(rec: dict[str, Any]) -> tuple[list[str], dict[str, int]]:
    """Turn-granularity corpus ids (``process_item_flat_index``) and the position of each
    user turn's dia_id in that corpus."""
    ids: list[str] = []
    index: dict[str, int] = {}
    for p, (sid, session) in enumerate(
        zip(rec["haystack_session_ids"], rec["haystack_sessions"]), 1
    ):
        for i, turn in enumerate(session):
            if turn["role"] != "user":
                continue
            index[f"S{p}:{i + 1}"] = len(ids)
            if "answer" not in sid or turn["has_answer"]:
                ids.append(sid + "_" + str(i + 1))
            else:
                ids.append((sid + "_" + str(i + 1)).replace("answer", "noans"))
    return ids, index


def ref_dcg(relevances: Any, k: int) -> float:
    relevances = np.asarray(relevances, dtype=float)[:k]
    if relevances.size:
        return float(
            relevances[0] + np.sum(relevances[1:] / np.log2(np.arange(2, relevances.size + 1)))
        )
    return 0.0


def ref_ndcg(rankings: list[int], correct: list[str], corpus_ids: list[str], k: int) -> float:
    relevances = [1 if d in correct else 0 for d in corpus_ids]
    ideal = ref_dcg(sorted(relevances, reverse=True), k)
    actual = ref_dcg([relevances[i] for i in rankings[:k]], k)
    return 0.0 if ideal == 0 else actual / ideal


def ref_evaluate(
    rankings: list[int], correct: list[str], corpus_ids: list[str], k: int
) -> tuple[float, ...]:
    recalled = {corpus_ids[i] for i in rankings[:k]}
    return (
        float(any(d in recalled for d in correct)),
        float(all(d in recalled for d in correct)),
        ref_ndcg(rankings, correct, corpus_ids, k),
    )


def ref_turn2session(
    rankings: list[int], correct: list[str], corpus_ids: list[str], k: int
) -> tuple[float, ...]:
    def strip(docid: str) -> str:
        return "_".join(docid.split("_")[:-1])

    correct = list({strip(x) for x in correct})
    corpus_ids = [strip(x) for x in corpus_ids]
    effective_k = k
    unique = {corpus_ids[i] for i in rankings[:effective_k]}
    while effective_k <= len(corpus_ids) and len(unique) < k:
        effective_k += 1
        unique = {corpus_ids[i] for i in rankings[:effective_k]}
    return ref_evaluate(rankings, correct, corpus_ids, effective_k)


@st.composite
def haystacks(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    pool = ["answer_a_1", "answer_a_2", "x_answer_3", "s_1", "s_2", "s_3"]
    ids = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6))
    sessions = []
    for sid in ids:
        roles = draw(st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=5))
        flags = [draw(st.booleans()) if "answer" in sid else None for _ in roles]
        sessions.append([_t(r, f) for r, f in zip(roles, flags)])
    rec = _record(ids, sessions)
    dia_ids = [f"S{p}:{n}" for p, s in enumerate(sessions, 1) for n in range(1, len(s) + 1)]
    return rec, draw(st.permutations(dia_ids))


@settings(max_examples=300, deadline=None)
@given(haystacks())
def test_matches_an_independent_port_of_the_paper(case: tuple[dict[str, Any], list[str]]) -> None:
    rec, memories = case
    scorer = parse_longmemeval([rec]).scorer
    assert isinstance(scorer, LongMemEvalScorer)
    row = score_question(scorer.judgement("q"), memories, OFFICIAL_KS)
    corpus_ids, index = ref_corpus(rec)
    rankings = [index[m] for m in memories if m in index]
    correct = list({d for d in corpus_ids if "answer" in d})
    for k in OFFICIAL_KS:
        for level, ref in (("turn", ref_evaluate), ("session", ref_turn2session)):
            want = ref(rankings, correct, corpus_ids, k) if corpus_ids else (0.0, 1.0, 0.0)
            got = tuple(row[f"{level}/{m}@{k}"] for m in ("recall_any", "recall_all", "ndcg_any"))
            assert got == pytest.approx(want, abs=1e-12), (level, k)


# ---- aggregation ------------------------------------------------------------------------


def test_summary_averages_scored_questions_and_vendor_over_all() -> None:
    ds = parse_longmemeval(generate_longmemeval_like(KINDS, seed=2))
    scorer = ds.scorer
    assert isinstance(scorer, LongMemEvalScorer)
    best: dict[str, list[str]] = {}
    worst: dict[str, list[str]] = {}
    for q in ds.questions:
        j = scorer.judgement(q.qid)
        turns = [t.dia_id for t in ds.conversation(q.conv_id).turns]
        gold = [t for t in turns if t in q.evidence]
        best[q.qid] = gold + [t for t in turns if t not in gold]
        # every turn of an answer session last: no session hit among the first sessions
        late = {t for t in turns if j.session_ids[j.positions[t] - 1] in j.answer_session_ids}
        worst[q.qid] = [t for t in turns if t not in late] + [t for t in turns if t in late]
    top = scorer.summary(best, ds.questions, OFFICIAL_KS)
    assert (
        top["n_scored"],
        top["n_questions"],
        top["n_abstention"],
        top["n_no_user_evidence"],
    ) == (2, 4, 1, 1)
    for key in (
        "session/recall_all@5",
        "turn/recall_all@5",
        "memory_session/recall_all@5",
        "session/ndcg_any@3",
        "turn/ndcg_any@1",
    ):
        assert top[key] == 1.0, key
    assert top["vendor/session_hit@5"] == 1.0 and top["vendor/n_questions"] == 4
    assert set(top["by_type"]) == {
        "multi-session",
        "single-session-assistant",
        "single-session-user",
    }
    assert top["by_type"]["single-session-assistant"]["n_scored"] == 0
    assert top["by_type"]["single-session-assistant"]["turn/recall_all@5"] is None
    assert top["by_type"]["multi-session"]["n_scored"] == 1
    low = scorer.summary(worst, ds.questions, OFFICIAL_KS)
    assert low["turn/recall_any@1"] == 0.0 and low["session/recall_any@1"] == 0.0
    # still hit: the two-answer-session question, and the one whose repeated session id
    # leaves five distinct sessions (the fifth is its answer session)
    assert low["vendor/session_hit@5"] == 0.5 and low["vendor/session_hit@10"] == 1.0
    per = scorer.per_question(best, ds.questions, OFFICIAL_KS)
    rows = [per[q.qid] for q in ds.questions if per[q.qid]["scored"]]
    assert top["turn/ndcg_any@10"] == pytest.approx(np.mean([r["turn/ndcg_any@10"] for r in rows]))
    with pytest.raises(ValidationError, match="has no judgement"):
        scorer.judgement("not-a-question")
