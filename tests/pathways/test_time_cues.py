"""Time cues in a query ("two weeks ago", "last Friday", "in March"): the parser's windows,
the kernel, and what recall does with them — twin memories equal in text, formed at different
times, ordered by the time the query names, as of the recall's clock; nothing gated, nothing
lifted without a cue or with the cue switched off."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu import ConfigError, RecallOptions, SpectorMemory, ValidationError
from spector_gpu.cli.output import explain_line, result_dict
from spector_gpu.pathways.recall.time_cues import (
    DAY_MS,
    MAX_CUES,
    TimeCue,
    _parse,
    cue_kernel,
    time_cues,
)

FAST = {"store": {"durability": "none"}}
TEXT = "planted tomato saplings in the raised garden bed"


def _ms(*ymd_h: int) -> int:
    return int(datetime(*ymd_h, tzinfo=UTC).timestamp() * 1000)


NOW = _ms(2023, 5, 5, 15)  # a Friday, 15:00 UTC


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


@pytest.mark.parametrize(
    ("query", "phrase", "lo", "hi"),
    [
        ("what did I plant two weeks ago?", "two weeks ago", "2023-04-19", "2023-04-23"),
        ("a couple of days ago", "a couple of days ago", "2023-05-02", "2023-05-04"),
        ("an event 3 months ago", "3 months ago", "2023-01-22", "2023-02-18"),
        ("A week ago", "A week ago", "2023-04-27", "2023-04-29"),
        ("in the last 3 months", "the last 3 months", "2023-02-04", "2023-05-05"),
        ("last month", "last month", "2023-03-06", "2023-05-05"),
        ("the past few weeks", "the past few weeks", "2023-04-14", "2023-05-05"),
        ("last Friday", "last Friday", "2023-04-27", "2023-04-30"),  # today is a Friday
        ("last Monday", "last Monday", "2023-04-30", "2023-05-03"),
        ("last weekend", "last weekend", "2023-04-29", "2023-05-01"),
        ("this year", "this year", "2022-05-05", "2023-05-05"),
        ("visits in March", "in March", "2023-03-01", "2023-03-31"),
        ("during December", "during December", "2022-12-01", "2022-12-31"),  # the last one
        ("yesterday", "yesterday", "2023-05-03", "2023-05-05"),
        ("today", "today", "2023-05-05", "2023-05-05"),
    ],
)
def test_each_phrase_points_at_its_window(query: str, phrase: str, lo: str, hi: str) -> None:
    (cue,) = time_cues(query, NOW)
    assert (cue.phrase, _day(cue.lo_ms), _day(cue.hi_ms)) == (phrase, lo, hi)


@pytest.mark.parametrize(
    "query",
    [
        "How many days ago did I meet Emma?",  # a question about time, not a time
        "may I ask about the garden",
        "the weekly market",
        "",
        "ago ago ago",
    ],
)
def test_queries_without_a_time_have_no_cue(query: str) -> None:
    assert time_cues(query, NOW) == ()


_PIECES = (
    *("two", "3", "a couple of", "few", "days", "weeks", "month", "years", "ago", "the"),
    *("past", "last", "this", "in", "during", "of", "March", "may", "Friday", "weekend"),
    *("yesterday", "Today", "LAST", "agony", "thistle", "pastry", "todays", "garden", "?", ","),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12), st.sampled_from([" ", "  ", "\n", "-"]))
def test_the_trigger_word_check_never_changes_the_cues(words: list[str], sep: str) -> None:
    """The one-search check that a query names no time gives exactly what every rule gives."""
    text = sep.join(words)
    assert time_cues(text, NOW) == _parse(text, NOW)


def test_several_cues_are_all_found_once() -> None:
    cues = time_cues("the last two weeks, or in March, or yesterday", NOW)
    assert [c.phrase for c in cues] == ["the last two weeks", "in March", "yesterday"]


def test_kernel_is_one_inside_and_falls_to_zero_a_width_outside() -> None:
    cue = TimeCue("x", 10 * DAY_MS, 14 * DAY_MS)  # four days wide
    at = torch.tensor([[12 * DAY_MS, 10 * DAY_MS, 16 * DAY_MS, 18 * DAY_MS, 30 * DAY_MS]])
    k = cue_kernel(at, [[cue]], torch.device("cpu"))
    assert k.tolist() == [[1.0, 1.0, 0.5, 0.0, 0.0]]
    narrow = TimeCue("y", 10 * DAY_MS, 10 * DAY_MS)  # a point: a day's width
    k2 = cue_kernel(torch.tensor([[10 * DAY_MS + DAY_MS // 2]]), [[narrow]], torch.device("cpu"))
    assert k2.tolist() == [[0.5]]
    assert cue_kernel(at, [[]], torch.device("cpu")).tolist() == [[0.0] * 5]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    with SpectorMemory.open(tmp_path / "s", config=FAST) as m:
        yield m


def _twins(mem: SpectorMemory) -> tuple[str, str]:
    """The same text formed two weeks and one day before NOW: recency favours the newer."""
    old, new = mem.remember_batch(
        [
            {"text": TEXT, "timestamp_ms": NOW - 14 * DAY_MS},
            {"text": TEXT, "timestamp_ms": NOW - DAY_MS},
        ]
    )
    return old, new


def _order(mem: SpectorMemory, query: str, **kw: object) -> list[str]:
    hits = mem.recall(query, RecallOptions(k=2, mode="observe", now_ms=NOW, **kw))  # type: ignore[arg-type]
    return [h.id for h in hits]


def test_the_named_time_orders_twins(mem: SpectorMemory) -> None:
    old, new = _twins(mem)
    assert _order(mem, "tomato saplings") == [new, old]  # no cue: recency
    assert _order(mem, "tomato saplings two weeks ago") == [old, new]
    assert _order(mem, "tomato saplings yesterday") == [new, old]
    assert _order(mem, "tomato saplings two weeks ago", time_cues=False) == [new, old]


def test_the_cue_is_read_on_the_recall_clock(mem: SpectorMemory) -> None:
    old, new = _twins(mem)
    # as of 13 days later, "two weeks ago" points at the newer twin
    hits = mem.recall(
        "tomato saplings two weeks ago",
        RecallOptions(k=2, mode="observe", now_ms=NOW + 13 * DAY_MS),
    )
    assert [h.id for h in hits] == [new, old]


def test_the_lift_is_explained_and_gates_nothing(mem: SpectorMemory) -> None:
    old, new = _twins(mem)
    mem.remember("an unrelated note about the harbour", timestamp_ms=NOW - 14 * DAY_MS)
    hits = mem.recall(
        "tomato saplings two weeks ago",
        RecallOptions(k=5, mode="observe", now_ms=NOW, explain=True),
    )
    by_id = {h.id: h for h in hits}
    assert set(by_id) >= {old, new}  # the newer twin is still recalled
    lift_old = by_id[old].breakdown.time_cue  # type: ignore[union-attr]
    lift_new = by_id[new].breakdown.time_cue  # type: ignore[union-attr]
    assert lift_old > 0 and lift_new == 0.0
    b = by_id[old].breakdown
    assert b is not None
    assert b.fused == pytest.approx(b.base * b.cognitive_factor + b.time_cue)
    assert f"+ time cue {b.time_cue:.4f}" in explain_line(by_id[old])  # the CLI's --explain line
    assert result_dict(by_id[old])["explain"]["time_cue"] == b.time_cue  # and its --json
    assert "time cue" not in explain_line(by_id[new])


def test_a_zero_weight_switches_the_lift_off(tmp_path: Path) -> None:
    config = {**FAST, "recall": {"time_cue_weight": 0.0}}
    with SpectorMemory.open(tmp_path / "s", config=config) as m:
        old, new = _twins(m)
        assert _order(m, "tomato saplings two weeks ago") == [new, old]


def test_bad_settings_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="time_cues"):
        RecallOptions(time_cues="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="time_cue_weight"):
        SpectorMemory.open(tmp_path / "s", config={"recall": {"time_cue_weight": -1.0}})


def test_hostile_queries_and_extreme_clocks_give_bounded_cues_never_an_error() -> None:
    many = " ".join(["a day ago"] * 5000)
    assert len(time_cues(many, NOW)) == MAX_CUES
    for now in (2**62, -(2**62), 0):
        for query in ("last Friday", "in March", "yesterday", "9999 years ago", "this year"):
            for cue in time_cues(query, now):
                assert cue.lo_ms <= cue.hi_ms  # a window, or no cue at all


def test_recall_at_an_extreme_clock_with_a_calendar_cue_answers(mem: SpectorMemory) -> None:
    old, new = _twins(mem)
    for now in (2**62, -(2**62)):
        opts = RecallOptions(k=2, mode="observe", now_ms=now)
        got = {h.id for h in mem.recall("tomato saplings last Friday in March", opts)}
        assert got <= {old, new}
