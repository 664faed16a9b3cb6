"""Dated questions are recalled as of their date (``evaluate(as_of=...)``), on generated
LongMemEval slices: the multi-session question has one evidence session stamped 30 minutes
after the question, on its own day, so the end-of-day gate keeps it, the exact-moment gate
drops it, and a session dated the next day is gated out by both."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import RecallOptions, ValidationError
from spector_gpu.eval.as_of import DAY_MS, question_chunks, question_options
from spector_gpu.eval.longmemeval import parse_longmemeval, parse_longmemeval_date
from spector_gpu.eval.records import Question
from spector_gpu.eval.runner import evaluate
from spector_gpu.eval.synthetic_longmemeval import generate_longmemeval_like

FAST = {"store": {"durability": "none"}}
ASKED = parse_longmemeval_date("2023/05/04 (Thu) 15:20")


def _q(asked_ms: int, qid: str = "q") -> Question:
    return Question(qid, "c", "what?", ("S1:1",), 0, None, asked_ms=asked_ms)


def test_day_gate_reaches_the_end_of_the_question_day() -> None:
    opts = question_options(RecallOptions(k=5), _q(ASKED), "day")
    assert opts.now_ms == ASKED
    end = parse_longmemeval_date("2023/05/04 (Thu) 23:59") + 59_999
    assert ASKED + opts.now_slack_ms == end
    assert (ASKED + opts.now_slack_ms + 1) % DAY_MS == 0  # the next day starts right after
    assert opts.k == 5


def test_moment_wall_undated_and_explicit_clocks() -> None:
    base = RecallOptions(k=5)
    moment = question_options(base, _q(ASKED), "moment")
    assert (moment.now_ms, moment.now_slack_ms) == (ASKED, 0)
    assert question_options(base, _q(ASKED), "wall") is base
    assert question_options(base, _q(0), "day") is base  # LoCoMo: no date, wall clock
    fixed = RecallOptions(k=5, now_ms=7)
    assert question_options(fixed, _q(ASKED), "day") is fixed


def test_chunks_split_where_the_clock_changes() -> None:
    qs = [_q(ASKED, "a"), _q(ASKED, "b"), _q(ASKED + DAY_MS, "c"), _q(0, "d"), _q(0, "e")]
    chunks = question_chunks(qs, RecallOptions(k=5), 64, "day")
    assert [[q.qid for q in c] for c, _ in chunks] == [["a", "b"], ["c"], ["d", "e"]]
    assert [o.now_ms for _, o in chunks] == [ASKED, ASKED + DAY_MS, None]
    small = question_chunks(qs, RecallOptions(k=5), 1, "day")
    assert [len(c) for c, _ in small] == [1] * 5


def _multi_session(next_day_copy: bool) -> list[dict[str, Any]]:
    (record,) = generate_longmemeval_like(("multi-session",), sessions=8, seed=4)
    if next_day_copy:  # the same evidence again, told the day after the question
        i = record["haystack_session_ids"].index(record["answer_session_ids"][0])
        asked = parse_longmemeval_date(record["question_date"])
        day = datetime.fromtimestamp((asked + DAY_MS) / 1000, UTC)
        record["haystack_session_ids"].append(f"answer_late_{i}")
        record["haystack_dates"].append(day.strftime("%Y/%m/%d (%a) %H:%M"))
        record["haystack_sessions"].append([dict(t) for t in record["haystack_sessions"][i]])
    return [record]


def _all_at_50(data: list[dict[str, Any]], tmp_path: Path, as_of: Any) -> dict[str, Any]:
    ds = parse_longmemeval(data)
    result = evaluate(ds, as_of=as_of, config=FAST, progress=False, temp_dir=str(tmp_path))
    return dict(result.metrics["configs"]["default"])


@pytest.mark.parametrize(("as_of", "want"), [("day", 1.0), ("wall", 1.0), ("moment", 0.0)])
def test_evidence_later_on_the_question_day(tmp_path: Path, as_of: Any, want: float) -> None:
    m = _all_at_50(_multi_session(False), tmp_path, as_of)
    assert m["session/recall_all@50"] == want  # both evidence sessions, or one gated out
    assert m["session/recall_any@50"] == 1.0


def test_a_session_on_a_later_day_is_gated_out(tmp_path: Path) -> None:
    data = _multi_session(True)
    n = len(data[0]["haystack_session_ids"])
    ds = parse_longmemeval(data)
    seen: dict[str, list[str]] = {}
    for as_of in ("day", "wall"):
        result = evaluate(ds, as_of=as_of, config=FAST, progress=False, temp_dir=str(tmp_path))
        assert result.metrics["as_of"] == as_of
        (row,) = result.per_question
        seen[as_of] = [d for d in row["retrieved"] if d.startswith(f"S{n}:")]
    assert seen["day"] == []  # formed after the end of the question's day
    assert seen["wall"] != []


def test_bad_as_of_is_a_validation_error(tmp_path: Path) -> None:
    ds = parse_longmemeval(_multi_session(False))
    with pytest.raises(ValidationError, match="as_of"):
        evaluate(ds, as_of="tomorrow", progress=False)  # type: ignore[arg-type]
