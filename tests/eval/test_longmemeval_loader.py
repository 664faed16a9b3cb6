"""The LongMemEval loader on generated slices and on tiny hand-written records (no real data)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spector_gpu.errors import DatasetError
from spector_gpu.eval.loaders import detect_format, load_dataset
from spector_gpu.eval.longmemeval import load_longmemeval, parse_longmemeval, parse_longmemeval_date
from spector_gpu.eval.longmemeval_protocol import LongMemEvalScorer
from spector_gpu.eval.synthetic import generate_locomo_like
from spector_gpu.eval.synthetic_longmemeval import KINDS, generate_longmemeval_like


def _turn(role: str, content: str, has_answer: bool | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": role, "content": content}
    if has_answer is not None:
        turn["has_answer"] = has_answer
    return turn


def record() -> dict[str, Any]:
    """Three sessions: filler, an evidence session (gold user turn 3), and a session named
    ``answer_…`` whose only evidence is an assistant turn (renamed noans)."""
    return {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What did I name my dog?",
        "answer": 7,
        "question_date": "2023/05/02 (Tue) 12:00",
        "haystack_session_ids": ["filler_1", "answer_ab_1", "answer_ab_2"],
        "haystack_dates": [
            "2023/05/01 (Mon) 09:00",
            "2023/04/30 (Sun) 10:30",
            "2023/05/01 (Mon) 11:15",
        ],
        "haystack_sessions": [
            [_turn("user", "hello there"), _turn("assistant", "hi!")],
            [
                _turn("user", "I got a dog", False),
                _turn("assistant", "Nice!", False),
                _turn("user", "I named him Rex", True),
                _turn("assistant", " ", False),
            ],
            [_turn("user", "any book tips?", False), _turn("assistant", "Read Dune.", True)],
        ],
        "answer_session_ids": ["answer_ab_1", "answer_ab_2"],
    }


def test_a_hand_written_record_maps_turn_by_turn() -> None:
    ds = parse_longmemeval([record()], name="tiny")
    (conv,) = ds.conversations
    (q,) = ds.questions
    assert (conv.conv_id, q.qid, q.conv_id, q.text, q.answer) == (
        "q1",
        "q1",
        "q1",
        "What did I name my dog?",
        "7",
    )
    assert [t.dia_id for t in conv.turns] == [
        "S1:1",
        "S1:2",
        "S2:1",
        "S2:2",
        "S2:3",
        "S3:1",
        "S3:2",
    ]
    assert [t.role for t in conv.turns] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "user",
        "assistant",
    ]
    assert [t.session for t in conv.turns] == [1, 1, 2, 2, 2, 3, 3]
    assert all(t.speaker == "" and t.index_text == t.text for t in conv.turns)
    assert q.evidence == ("S2:3", "S3:2")  # has_answer turns of either role
    base = int(datetime(2023, 4, 30, 10, 30, tzinfo=UTC).timestamp() * 1000)
    assert [t.timestamp_ms for t in conv.turns if t.session == 2] == [
        base,
        base + 1000,
        base + 2000,
    ]
    assert isinstance(ds.scorer, LongMemEvalScorer)
    j = ds.scorer.judgement("q1")
    assert j.scored and not j.abstention
    assert j.session_ids == ("filler_1", "answer_ab_1", "answer_ab_2")
    assert j.session_corpus == ("filler_1", "answer_ab_1", "noans_ab_2")
    assert j.turn_corpus == ("filler_1_1", "noans_ab_1_1", "answer_ab_1_3", "noans_ab_2_1")
    assert j.turn_ids == {
        "S1:1": "filler_1_1",
        "S2:1": "noans_ab_1_1",
        "S2:3": "answer_ab_1_3",
        "S3:1": "noans_ab_2_1",
    }
    assert j.turn_gold == {"answer_ab_1_3"} and j.session_gold == {"answer_ab_1"}
    assert j.answer_session_ids == ("answer_ab_1", "answer_ab_2")
    counts = ds.scorer.describe()["protocol"]
    assert counts["n_skipped_empty_turns"] == 1 and counts["n_skipped_empty_user_turns"] == 0
    assert counts["n_turns"] == 8 and counts["n_remembered_turns"] == 7


def test_user_roles_only() -> None:
    ds = parse_longmemeval([record()], roles=("user",))
    (conv,) = ds.conversations
    assert [t.dia_id for t in conv.turns] == ["S1:1", "S2:1", "S2:3", "S3:1"]
    assert ds.questions[0].evidence == ("S2:3",)
    assert isinstance(ds.scorer, LongMemEvalScorer)
    counts = ds.scorer.describe()["protocol"]
    assert counts["n_skipped_role_turns"] == 3 and counts["roles"] == ["user"]


def test_generated_slice_exercises_every_edge() -> None:
    data = generate_longmemeval_like(KINDS, seed=3)
    ds = parse_longmemeval(data)
    scorer = ds.scorer
    assert isinstance(scorer, LongMemEvalScorer)
    ssu, multi, assistant_only, abstention = ds.questions  # in the order of KINDS
    assert scorer.judgement(assistant_only.qid).question_type == "single-session-assistant"
    assert multi.answer == "2" and isinstance(data[1]["answer"], int)
    # the repeated session id stays two sessions: two positions, their own dia_ids
    ids = data[0]["haystack_session_ids"]
    repeated = [p for p, s in enumerate(ids, 1) if ids.count(s) > 1]
    assert len(repeated) == 2
    sessions = {t.session for t in ds.conversation(ssu.conv_id).turns}
    assert set(repeated) <= sessions
    # a whitespace user turn is skipped, but the next user turn is still number 3
    j = scorer.judgement(ssu.qid)
    blank = next(
        p for p, s in enumerate(data[0]["haystack_sessions"], 1) if not s[0]["content"].strip()
    )
    assert f"S{blank}:1" not in j.turn_ids and j.turn_ids[f"S{blank}:3"].endswith("_3")
    assert f"{ids[blank - 1]}_1" in j.turn_corpus  # ... and stays in the code's corpus
    assert abstention.qid.endswith("_abs") and scorer.judgement(abstention.qid).abstention
    scored = {q.qid for q in ds.questions if scorer.judgement(q.qid).scored}
    assert scored == {ssu.qid, multi.qid}
    assert scorer.judgement(abstention.qid).turn_gold  # excluded as abstention only
    assert not scorer.judgement(assistant_only.qid).turn_gold  # excluded: no user evidence
    assert any(c.startswith("noans_") for c in scorer.judgement(assistant_only.qid).session_corpus)
    counts = scorer.describe()["protocol"]
    assert counts["n_skipped_empty_turns"] == 2 and counts["n_skipped_empty_user_turns"] == 1
    assert counts["n_repeated_session_ids"] == 1 and counts["n_questions"] == 4


def test_generator_is_deterministic_and_checks_arguments() -> None:
    assert generate_longmemeval_like(seed=5) == generate_longmemeval_like(seed=5)
    assert generate_longmemeval_like(seed=5) != generate_longmemeval_like(seed=6)
    assert len(generate_longmemeval_like()) == 3
    with pytest.raises(ValueError, match="kinds"):
        generate_longmemeval_like(("nope",))
    with pytest.raises(ValueError, match="sessions must be an int >= 5"):
        generate_longmemeval_like(sessions=4)


@pytest.mark.parametrize("sort_keys", [False, True])
def test_format_is_detected(tmp_path: Path, sort_keys: bool) -> None:
    path = tmp_path / "slice.json"
    path.write_text(json.dumps(generate_longmemeval_like(), sort_keys=sort_keys))
    assert detect_format(path) == "longmemeval"
    ds = load_dataset(path)
    assert isinstance(ds.scorer, LongMemEvalScorer) and ds.name == "slice"
    assert load_longmemeval(path, roles=("user",)).n_turns < ds.n_turns
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps(generate_locomo_like(n_conversations=1)))
    assert detect_format(locomo) == "locomo" and load_dataset(locomo).scorer is None
    with pytest.raises(DatasetError, match="is a directory"):
        load_dataset(tmp_path, format="longmemeval")


def test_filter_keeps_the_scorer() -> None:
    ds = parse_longmemeval(generate_longmemeval_like())
    kept = ds.filter(conversations=[ds.conversations[0].conv_id])
    assert kept.scorer is ds.scorer and len(kept.questions) == 1


def test_dates() -> None:
    expected = int(datetime(2023, 3, 27, 23, 35, tzinfo=UTC).timestamp() * 1000)
    assert parse_longmemeval_date("2023/03/27 (Mon) 23:35") == expected
    assert parse_longmemeval_date("2023/3/27 23:35") == expected
    for bad in ("2023/02/30 (Thu) 10:00", "2023-03-27 10:00", "2023/03/27 (Mon) 24:00", ""):
        with pytest.raises(DatasetError, match="unparseable date"):
            parse_longmemeval_date(bad)


def _broken(path: tuple[Any, ...], value: Any) -> list[dict[str, Any]]:
    rec = copy.deepcopy(record())
    target: Any = rec
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return [rec]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("question_id",), KeyError, r"question 0: missing 'question_id'"),
        (("answer",), True, r"question 0 \(q1\): 'answer' must be str or int, got bool"),
        (("question_type",), 3, r"\(q1\): 'question_type' must be str"),
        (("question_date",), "soon", r"\(q1\) 'question_date': unparseable date"),
        (("haystack_dates", 1), "2023/13/01 10:00", r"\(q1\) haystack_dates\[1\]: unparseable"),
        (
            ("haystack_dates",),
            ["2023/05/01 (Mon) 09:00"],
            r"must be parallel lists, got lengths 3, 1",
        ),
        (
            ("haystack_session_ids", 0),
            5,
            r"'haystack_session_ids'|haystack_session_ids\[0\] must be str",
        ),
        (
            ("haystack_sessions", 1),
            "oops",
            r"haystack_sessions\[1\] \(answer_ab_1\): a session must be",
        ),
        (
            ("haystack_sessions", 1, 2, "role"),
            "system",
            r"haystack_sessions\[1\] \(answer_ab_1\) turn 3: 'role' must be 'user' or 'assistant'",
        ),
        (
            ("haystack_sessions", 0, 0, "content"),
            None,
            r"turn 1: 'content' must be str, got NoneType",
        ),
        (
            ("haystack_sessions", 1, 0, "has_answer"),
            "yes",
            r"turn 1: 'has_answer' must be true or false",
        ),
        (("answer_session_ids",), "answer_ab_1", r"'answer_session_ids' must be list"),
    ],
)
def test_malformed_records_name_the_record_and_field(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    with pytest.raises(DatasetError, match=message):
        parse_longmemeval(_broken(path, value), source="f.json")


def test_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="holds a JSON list of questions, got dict"):
        parse_longmemeval({"question_id": "q"})
    with pytest.raises(DatasetError, match="question 1: expected an object, got list"):
        parse_longmemeval([record(), []])
    with pytest.raises(DatasetError, match="duplicate conversation 'q1'"):
        parse_longmemeval([record(), record()])
    with pytest.raises(DatasetError, match="roles must be a non-empty collection"):
        parse_longmemeval([record()], roles=("system",))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"question_id": ')
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_longmemeval(bad)
