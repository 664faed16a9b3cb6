"""The permutations behind ``benchmarks/longmemeval_flag_order.py``, checked by hand.

The benchmark's claims (an oracle that moves no session meets the offline goals) rest on these
functions keeping every haystack session at exactly the positions its turns held; the ids here
follow the protocol's naming (``answer_…`` a flagged turn of an evidence session, ``noans_…``
an unflagged one, anything else another session's turn; the last ``_n`` the turn's place).
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "longmemeval_flag_order.py"

RANKED = ["s1_1", "noans_a_3", "answer_a_5", "noans_b_1", "s2_1", "answer_b_3", "noans_a_1"]


@pytest.fixture(scope="module")
def fo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("longmemeval_flag_order", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _positions(fo: ModuleType, turns: Sequence[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(turns):
        out[fo.haystack_session(t)].append(i)
    return dict(out)


def test_session_names(fo: ModuleType) -> None:
    assert fo.haystack_session("noans_a_3") == "answer_a"
    assert fo.haystack_session("answer_a_5") == "answer_a"
    assert fo.haystack_session("sharegpt_x_1_7") == "sharegpt_x_1"
    assert fo.is_flagged("answer_a_5") and not fo.is_flagged("noans_a_3")
    assert not fo.is_flagged("s1_1")


def test_flagged_first_moves_no_session(fo: ModuleType) -> None:
    out = fo.flagged_first(RANKED)
    assert out == [
        "s1_1",
        "answer_a_5",
        "noans_a_3",
        "answer_b_3",
        "s2_1",
        "noans_b_1",
        "noans_a_1",
    ]
    assert _positions(fo, out) == _positions(fo, RANKED)
    assert sorted(out) == sorted(RANKED)


def test_earliest_first_orders_by_turn_place(fo: ModuleType) -> None:
    out = fo.earliest_first(RANKED)
    assert out == [
        "s1_1",
        "noans_a_1",
        "noans_a_3",
        "noans_b_1",
        "s2_1",
        "answer_b_3",
        "answer_a_5",
    ]
    assert _positions(fo, out) == _positions(fo, RANKED)


def test_best_turn_first_puts_each_session_once_before_seconds(fo: ModuleType) -> None:
    out = fo.best_turn_first(RANKED)
    assert out == [
        "s1_1",
        "noans_a_3",
        "noans_b_1",
        "s2_1",
        "answer_a_5",
        "answer_b_3",
        "noans_a_1",
    ]
    both = fo.best_turn_first(fo.flagged_first(RANKED))
    assert both[:4] == ["s1_1", "answer_a_5", "answer_b_3", "s2_1"]
