"""Time in recall: strength decays from a memory's own time, and recall as of a moment.

Twin memories — the same text, so every relevance relay scores them alike — differ in one
thing each: formation time, importance, arousal, a ``forget`` or a ``reinforce``. DESIGN §5
says how each orders them; the one DESIGN favours is always written *second*, so a tie (what
the first release produced for recency, arousal and reinforce: D = 1 at write time) would put
it second and fail. Then ``RecallOptions.now_ms``: decay evaluated at that moment, the gate on
formation time (with its slack), and onRecall stamped with it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu import RecallOptions, SpectorMemory, ValidationError
from spector_gpu.config import StrengthConfig
from spector_gpu.cortex.strength import BUCKET_EDGES_S

FAST = {"store": {"durability": "none"}}
TEXT = "the lighthouse keeper painted the harbour door blue"
QUERY = "lighthouse door"
HOUR, DAY = 3_600_000, 86_400_000


def _factor(age_ms: float, arousal: int = 0) -> float:
    """The decay law's factor after ``age_ms`` (DESIGN §5), computed independently."""
    cfg = StrengthConfig()
    t = age_ms / 1000.0 / (1.0 + arousal / 255.0)
    edge = BUCKET_EDGES_S[np.less_equal(BUCKET_EDGES_S, t)].max()
    return max(cfg.decay_floor, (1.0 + edge / cfg.decay_unit_s) ** -cfg.decay_exponent)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    with SpectorMemory.open(tmp_path / "s", config=FAST) as m:
        yield m


def _twins(mem: SpectorMemory, first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    return mem.remember_batch([{"text": TEXT, **first}, {"text": TEXT, **second}])


def _order(mem: SpectorMemory, **kw: Any) -> list[str]:
    hits = mem.recall(QUERY, RecallOptions(k=2, mode="observe", **kw))
    return [h.id for h in hits]


def _now() -> int:
    return int(time.time() * 1000)


def test_recency_the_recent_twin_ranks_first(mem: SpectorMemory) -> None:
    now = _now()
    old, recent = _twins(mem, {"timestamp_ms": now - 365 * DAY}, {"timestamp_ms": now - HOUR})
    assert _order(mem) == [recent, old]
    hits = {h.id: h for h in mem.recall(QUERY, RecallOptions(k=2, mode="observe"))}
    assert hits[old].retrieval_strength == pytest.approx(_factor(365 * DAY), rel=1e-6)
    assert hits[recent].retrieval_strength == pytest.approx(_factor(HOUR), rel=1e-6)
    assert hits[old].retrieval_strength < hits[recent].retrieval_strength


def test_importance_the_important_twin_ranks_first(mem: SpectorMemory) -> None:
    now = _now()
    plain, important = _twins(
        mem, {"timestamp_ms": now, "importance": 1.0}, {"timestamp_ms": now, "importance": 8.0}
    )
    assert _order(mem) == [important, plain]


def test_arousal_slows_decay(mem: SpectorMemory) -> None:
    month_ago = _now() - 30 * DAY
    calm, aroused = _twins(
        mem, {"timestamp_ms": month_ago, "arousal": 0}, {"timestamp_ms": month_ago, "arousal": 255}
    )
    assert _order(mem) == [aroused, calm]
    hits = {h.id: h for h in mem.recall(QUERY, RecallOptions(k=2, mode="observe"))}
    assert hits[aroused].retrieval_strength == pytest.approx(
        _factor(30 * DAY, arousal=255), rel=1e-3
    )
    assert hits[calm].retrieval_strength < hits[aroused].retrieval_strength


@pytest.mark.parametrize("forget_first", [True, False])
def test_forget_sends_its_twin_down(mem: SpectorMemory, forget_first: bool) -> None:
    now = _now()
    a, b = _twins(mem, {"timestamp_ms": now}, {"timestamp_ms": now})
    forgotten, kept = (a, b) if forget_first else (b, a)
    mem.forget(forgotten)
    assert _order(mem) == [kept, forgotten]
    s = {h.id: h.storage_strength for h in mem.recall(QUERY, RecallOptions(k=2, mode="observe"))}
    assert s[forgotten] == s[kept] == 1.0  # forget lowers D, never S


def test_reinforce_of_an_old_memory_raises_s_and_d(mem: SpectorMemory) -> None:
    year_ago = _now() - 365 * DAY
    other, reinforced = _twins(mem, {"timestamp_ms": year_ago}, {"timestamp_ms": year_ago})
    mem.reinforce(reinforced)
    assert _order(mem) == [reinforced, other]
    hits = {h.id: h for h in mem.recall(QUERY, RecallOptions(k=2, mode="observe"))}
    want_s = 1.0 + 0.1 * (1.0 - _factor(365 * DAY))
    assert hits[reinforced].storage_strength == pytest.approx(want_s, rel=1e-6)
    assert hits[reinforced].retrieval_strength == pytest.approx(1.0)
    assert hits[other].storage_strength == 1.0


def test_decay_is_evaluated_at_now_ms(mem: SpectorMemory) -> None:
    t0 = 1_700_000_000_000
    (mid,) = mem.remember_batch([{"text": TEXT, "timestamp_ms": t0}])
    for age in (0, 2 * HOUR, 5 * DAY, 200 * DAY):
        (hit,) = mem.recall(QUERY, RecallOptions(k=1, mode="observe", now_ms=t0 + age))
        assert hit.id == mid
        assert hit.retrieval_strength == pytest.approx(_factor(age), rel=1e-6)
    # an explicit clock also switches the formation gate on (next test)
    (hit,) = mem.recall(QUERY, RecallOptions(k=1, mode="observe", now_ms=t0, explain=True))
    assert hit.breakdown is not None and "formed_by" in hit.breakdown.gates


def test_now_ms_gates_memories_formed_after_it(mem: SpectorMemory) -> None:
    t0 = 1_700_000_000_000
    early, late = mem.remember_batch(
        [{"text": TEXT, "timestamp_ms": t0}, {"text": TEXT, "timestamp_ms": t0 + 3 * HOUR}]
    )
    assert set(_order(mem)) == {early, late}  # wall clock: no formation gate
    assert _order(mem, now_ms=t0 + HOUR) == [early]
    assert _order(mem, now_ms=t0 + 3 * HOUR) == [late, early]  # formed at now_ms: admitted
    assert set(_order(mem, now_ms=t0 + HOUR, now_slack_ms=2 * HOUR)) == {early, late}
    assert _order(mem, now_ms=t0 - 1) == []


def test_learn_mode_stamps_on_recall_with_now_ms(mem: SpectorMemory) -> None:
    t0 = 1_700_000_000_000
    (mid,) = mem.remember_batch([{"text": TEXT, "timestamp_ms": t0}])
    mem.recall(QUERY, RecallOptions(k=1, now_ms=t0 + 10 * DAY))  # learn: D back to 1 then
    (hit,) = mem.recall(QUERY, RecallOptions(k=1, mode="observe", now_ms=t0 + 10 * DAY + HOUR))
    assert hit.id == mid and hit.retrieval_strength == pytest.approx(_factor(HOUR), rel=1e-6)
    # a recall as of an earlier moment never moves the event time back
    mem.recall(QUERY, RecallOptions(k=1, now_ms=t0 + DAY))
    (hit,) = mem.recall(QUERY, RecallOptions(k=1, mode="observe", now_ms=t0 + 10 * DAY + HOUR))
    assert hit.retrieval_strength == pytest.approx(_factor(HOUR), rel=1e-6)


def test_batch_decay_equals_the_law_at_now_ms(mem: SpectorMemory) -> None:
    t0 = 1_700_000_000_000
    ages = np.array([0, 30_000, 10 * 60_000, 2 * HOUR, 20 * HOUR, 4 * DAY, 40 * DAY, 400 * DAY])
    now = t0 + int(ages.max())
    ids = mem.remember_batch(
        [{"text": f"{TEXT} {i}", "timestamp_ms": now - int(a)} for i, a in enumerate(ages)]
    )
    hits = mem.recall(QUERY, RecallOptions(k=len(ids), mode="observe", now_ms=now))
    d = {h.id: h.retrieval_strength for h in hits}
    assert [d[i] for i in ids] == pytest.approx([_factor(float(a)) for a in ages], rel=1e-6)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"now_slack_ms": HOUR}, "now_slack_ms needs now_ms"),
        ({"now_ms": 0, "now_slack_ms": -1}, "now_slack_ms must be in"),
        ({"now_ms": True}, "now_ms must be an int"),
        ({"now_ms": 1.5}, "now_ms must be an int"),
        ({"now_ms": 1 << 63}, "now_ms must be in"),
    ],
)
def test_bad_clock_options_are_validation_errors(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        RecallOptions(**kw)


def test_a_memory_stamped_in_the_future_waits_at_full_strength(mem: SpectorMemory) -> None:
    now = _now()
    (plan,) = mem.remember_batch([{"text": TEXT, "timestamp_ms": now + 7 * DAY}])
    (hit,) = mem.recall(QUERY, RecallOptions(k=1))  # wall clock: no gate; learn mode
    assert hit.id == plan and hit.retrieval_strength == 1.0
    # the recall before its time did not move its event back: it decays from formation
    (hit,) = mem.recall(QUERY, RecallOptions(k=1, mode="observe", now_ms=now + 8 * DAY))
    assert hit.retrieval_strength == pytest.approx(_factor(DAY), rel=1e-6)
