"""Consolidation (the Reflect pathway) through the public API.

Also seed 000's six bug regressions.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import crc32c as crc_lib
import numpy as np
import pytest
from rig import Rig

from spector_gpu import (
    FactDraft,
    MemoryType,
    RecallOptions,
    RecordProvenance,
    Source,
    SpectorMemory,
    TurnView,
    ValidationError,
)
from spector_gpu.cortex.layouts import PROVENANCE_DTYPE
from spector_gpu.pathways import reflect as reflect_module
from spector_gpu.storage.tsid import decode_tsid

# one fact per salient turn: these tests are about what a consolidation writes, not how many
FAST = {"store": {"durability": "none"}, "reflect": {"max_facts_per_turn": 1.0}}
TURNS = [
    {
        "text": "I moved to Lisbon in May with my partner Rui.",
        "speaker": "Ann",
        "role": "user",
        "timestamp_ms": 1_750_000_000_000,
        "importance": 2.0,
        "valence": 40,
        "arousal": 30,
    },
    {
        "text": "How is the new flat?",
        "speaker": "Bo",
        "role": "assistant",
        "timestamp_ms": 1_750_000_060_000,
        "importance": 1.0,
        "valence": 0,
        "arousal": 10,
    },
    {
        "text": "The flat is small but has a lovely view of the river Tagus.",
        "speaker": "Ann",
        "timestamp_ms": 1_750_000_120_000,
        "importance": 3.0,
        "valence": 60,
        "arousal": 50,
    },
]


def _session(session_id: int, turns: Sequence[dict[str, Any]] = TURNS) -> list[dict[str, Any]]:
    return [{**t, "session_id": session_id} for t in turns]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    m = SpectorMemory.open(tmp_path / "s", config=FAST)
    yield m
    m.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    """A cortex built directly, with the delegates the facade would hold."""
    with Rig.open(tmp_path / "r", FAST) as r:
        yield r


def _raw_provenance(m: SpectorMemory | Rig) -> np.ndarray:
    """The provenance region's committed records, read from the file."""
    raw = (m.path / "provenance.rec").read_bytes()
    count = struct.unpack_from("<q", raw, 24)[0]
    return np.frombuffer(raw[64 : 64 + 72 * count], dtype=PROVENANCE_DTYPE)


# ---- what a consolidation writes -------------------------------------------------------------
def test_consolidate_writes_extracted_semantic_facts(mem: SpectorMemory) -> None:
    turns = mem.remember_batch(_session(7))
    report = mem.consolidate()
    assert report.sessions == [7] and report.turns_consolidated == 3 and report.passes == {7: 1}
    assert len(report.fact_ids) >= 2  # the default distiller keeps sentences, not one blob
    for fid in report.fact_ids:
        f = mem.get(fid)
        assert f is not None
        assert f.memory_type == MemoryType.SEMANTIC
        assert f.source == Source.DISTILLED
        assert f.provenance == RecordProvenance.EXTRACTED
        assert "session:7" in f.tags
        assert f.session_id == 7
        assert f.timestamp_ms == TURNS[-1]["timestamp_ms"]  # the session's latest turn
        assert f.text not in {t["text"] for t in TURNS}  # not the whole turn as one blob
    assert mem.count(MemoryType.SEMANTIC) == len(report.fact_ids)
    for tid in turns:  # parents are marked and stay recallable
        t = mem.get(tid)
        assert t is not None and t.consolidated and t.memory_type == MemoryType.EPISODIC
    hits = mem.recall("lovely view of the river Tagus", RecallOptions(k=10, mode="observe"))
    assert turns[2] in [h.id for h in hits]
    assert mem.check().ok and mem.verify_chain().ok


def test_one_provenance_record_per_fact(rig: Rig) -> None:
    turns = rig.remember_batch(_session(7))
    report = rig.reflection.consolidate()
    recs = _raw_provenance(rig)
    assert len(recs) == len(report.fact_ids)
    n = len(report.fact_ids)
    first = rig.cortex.location(rig.ordinal(turns[0]))
    for k, fid in enumerate(report.fact_ids):
        r = recs[k]
        text = rig.recall.get(fid).text  # type: ignore[union-attr]
        assert int(r["flags"]) == 0  # live
        assert (int(r["source_kind"]), int(r["target_kind"])) == (1, 2)
        assert int(r["target_tsid"]) == decode_tsid(fid)
        assert int(r["session_id"]) == 7
        assert int(r["pass_number"]) == 1
        assert (int(r["first_seq"]), int(r["last_seq"]), int(r["turn_count"])) == (0, 2, 3)
        assert (int(r["fact_index"]), int(r["batch_count"])) == (k, n)
        assert (
            int(r["content_hash_hi"]) == (crc_lib.crc32c(text.encode("utf-8")) & 0xFFFFFFFF) >> 16
        )
        assert int(r["partition_seq"]) == first.partition
        assert int(r["consolidated_at"]) > 0
        p = rig.reflection.explain(fid)
        assert p is not None
        assert (p.session_id, p.pass_number, p.first_seq, p.last_seq, p.turn_count) == (
            7,
            1,
            0,
            2,
            3,
        )
        assert (p.fact_index, p.batch_count, p.content_hash_hi) == (k, n, int(r["content_hash_hi"]))
        assert p.parent_ids == tuple(turns)


def test_multi_pass_gets_its_own_lineage_and_keeps_earlier_records(mem: SpectorMemory) -> None:
    first = mem.remember_batch(_session(7))
    r1 = mem.consolidate()
    before = _raw_provenance(mem).tobytes()
    later = mem.remember_batch(
        _session(
            7,
            [
                {"text": "Rui found a job at the aquarium in Lisbon last week.", "speaker": "Ann"},
                {"text": "Congratulations to him on the aquarium job!", "speaker": "Bo"},
            ],
        )
    )
    r2 = mem.consolidate()
    assert r2.passes == {7: 2} and r2.turns_consolidated == 2
    assert not set(r1.fact_ids) & set(r2.fact_ids)
    after = _raw_provenance(mem)
    assert after[: len(r1.fact_ids)].tobytes() == before  # pass-1 records untouched
    for k, fid in enumerate(r2.fact_ids):
        p = mem.explain(fid)
        assert p is not None
        assert (p.pass_number, p.first_seq, p.last_seq, p.turn_count) == (2, 3, 4, 2)
        assert (p.fact_index, p.batch_count) == (k, len(r2.fact_ids))
        assert p.parent_ids == tuple(later)
    for fid in r1.fact_ids:
        p = mem.explain(fid)
        assert p is not None and p.pass_number == 1 and p.parent_ids == tuple(first)
    # explain and session_provenance agree, ordered by pass then fact index
    listed = mem.session_provenance(7)
    assert [p.memory_id for p in listed] == r1.fact_ids + r2.fact_ids
    assert [(p.pass_number, p.fact_index) for p in listed] == sorted(
        (p.pass_number, p.fact_index) for p in listed
    )
    assert all(mem.explain(p.memory_id) == p for p in listed)


def test_explain_with_parents_returns_the_turns(mem: SpectorMemory) -> None:
    turns = mem.remember_batch(_session(3))
    fid = mem.consolidate().fact_ids[0]
    p = mem.explain(fid, include_parents=True)
    assert p is not None and p.parents is not None
    assert [t.id for t in p.parents] == turns
    assert [t.text for t in p.parents] == [t["text"] for t in TURNS]
    assert mem.explain(fid).parents is None  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", ["0000000000000", "not a tsid", "", 12345, None, b"0000000000000"])
def test_explain_unknown_or_malformed_is_none(mem: SpectorMemory, bad: Any) -> None:
    mem.remember_batch(_session(1))
    mem.consolidate()
    assert mem.explain(bad) is None


def test_explain_of_a_non_consolidated_memory_is_none(mem: SpectorMemory) -> None:
    turns = mem.remember_batch(_session(1))
    fact = mem.remember("a fact stated by the agent", type="semantic")
    mem.consolidate()
    assert mem.explain(turns[0]) is None  # a parent, not a derived memory
    assert mem.explain(fact) is None
    assert mem.session_provenance(999) == []
    assert mem.session_provenance("1") == []  # type: ignore[arg-type]
    assert mem.session_provenance(True) == []  # type: ignore[arg-type]


def test_sessions_and_max_sessions_select_work(mem: SpectorMemory) -> None:
    mem.remember_batch(_session(1) + _session(2) + _session(3))
    r = mem.consolidate(sessions=[2])
    assert r.sessions == [2]
    r = mem.consolidate(max_sessions=1)
    assert r.sessions == [1]
    r = mem.reflect()
    assert r.sessions == [3]
    assert mem.consolidate().fact_ids == []
    for bad in (
        {"sessions": "1"},
        {"sessions": [1.5]},
        {"max_sessions": 0},
        {"max_sessions": True},
    ):
        with pytest.raises(ValidationError):
            mem.consolidate(**bad)


# ---- custom distillers -----------------------------------------------------------------------
def test_custom_distiller_gets_new_turns_and_prior_context(mem: SpectorMemory) -> None:
    calls: list[tuple[int, list[str], list[str]]] = []

    def distiller(session: int, turns: Sequence[TurnView], prior: Sequence[TurnView]) -> list[Any]:
        calls.append((session, [t.text for t in turns], [t.text for t in prior]))
        return [
            f"{len(turns)} new turn(s) after {len(prior)}",
            {"text": "a dict fact", "importance": 7.5, "valence": -9, "arousal": 44, "tags": ["x"]},
        ]

    mem.remember_batch(_session(5))
    r1 = mem.consolidate(distiller=distiller)
    mem.remember_batch(_session(5, [{"text": "one more thing"}]))
    r2 = mem.consolidate(distiller=distiller)
    assert calls == [
        (5, [t["text"] for t in TURNS], []),
        (5, ["one more thing"], [t["text"] for t in TURNS]),
    ]
    texts = [mem.get(f).text for f in r1.fact_ids + r2.fact_ids]  # type: ignore[union-attr]
    assert texts == ["3 new turn(s) after 0", "a dict fact", "1 new turn(s) after 3", "a dict fact"]
    d = mem.get(r1.fact_ids[1])
    assert d is not None and (d.importance, d.valence, d.arousal) == (7.5, -9, 44)
    assert set(d.tags) == {"session:5", "x"}


def test_distiller_object_with_a_distill_method_and_fact_drafts(mem: SpectorMemory) -> None:
    turns = mem.remember_batch(_session(2))

    class Picky:
        def distill(
            self, session: int, new: Sequence[TurnView], prior: Sequence[TurnView]
        ) -> list[FactDraft]:
            return [FactDraft("Ann lives in Lisbon.", parents=(new[0].id,), importance=4.0)]

    fid = mem.consolidate(distiller=Picky()).fact_ids[0]
    f = mem.get(fid)
    assert f is not None and f.text == "Ann lives in Lisbon." and f.importance == 4.0
    assert f.source_uri == f"doc:{turns[0]}"


def test_distiller_may_not_name_prior_turns_as_parents(mem: SpectorMemory) -> None:
    old = mem.remember_batch(_session(4))
    mem.consolidate()
    n = mem.count()
    mem.remember_batch(_session(4, [{"text": "brand new turn here"}]))

    def cheat(session: int, turns: Sequence[TurnView], prior: Sequence[TurnView]) -> list[Any]:
        return [{"text": "stolen", "parents": [old[0]]}]

    with pytest.raises(ValidationError, match="parents"):
        mem.consolidate(distiller=cheat)
    assert mem.count() == n + 1  # nothing written, the new turn still pending
    assert mem.consolidate().turns_consolidated == 1


@pytest.mark.parametrize("bad", ["a string", [""], [42], [{"text": "x", "colour": 1}], None])
def test_distiller_output_is_validated(mem: SpectorMemory, bad: Any) -> None:
    mem.remember_batch(_session(1))
    with pytest.raises(ValidationError):
        mem.consolidate(distiller=lambda s, t, p: bad)
    assert mem.count(MemoryType.SEMANTIC) == 0 and mem.check().ok


def test_a_distiller_returning_nothing_still_marks_the_turns(mem: SpectorMemory) -> None:
    turns = mem.remember_batch(_session(1))
    r = mem.consolidate(distiller=lambda s, t, p: [])
    assert r.fact_ids == [] and r.turns_consolidated == 3
    assert all(mem.get(t).consolidated for t in turns)  # type: ignore[union-attr]
    assert mem.consolidate().turns_consolidated == 0


# ---- seed 000: the six bugs, one regression each ---------------------------------------------
def test_bug_offset_corruption_offsets_are_region_relative(mem: SpectorMemory) -> None:
    mem.remember("an unrelated earlier turn in another session", session_id=99)
    turns = mem.remember_batch(_session(7))
    fid = mem.consolidate(sessions=[7]).fact_ids[0]
    p = mem.explain(fid)
    assert p is not None
    log = (mem.path / "episodic.log").read_bytes()
    for hint, want in ((p.first_offset, turns[0]), (p.last_offset, turns[-1])):
        magic, _, memory_id = struct.unpack_from("<IIq", log, hint + 64)
        assert magic == 0x45504953 and memory_id == decode_tsid(want)
    assert p.first_offset > 0  # region-relative, past the first (other-session) record


def test_bug_value_type_key_collision_identical_turns_are_two_turns(mem: SpectorMemory) -> None:
    same = {
        "text": "Yes, I agree with that completely.",
        "speaker": "Ann",
        "session_id": 8,
        "timestamp_ms": 1_750_000_000_000,
    }
    ids = mem.remember_batch([same, same])
    seen: list[list[str]] = []

    def distiller(session: int, turns: Sequence[TurnView], prior: Sequence[TurnView]) -> list[str]:
        seen.append([t.id for t in turns])
        return ["Ann agreed."]

    r = mem.consolidate(distiller=distiller)
    assert seen == [ids] and r.turns_consolidated == 2
    p = mem.explain(r.fact_ids[0])
    assert p is not None and p.turn_count == 2 and p.parent_ids == tuple(ids)
    assert all(mem.get(i).consolidated for i in ids)  # type: ignore[union-attr]


def test_bug_discarded_affect_metadata(mem: SpectorMemory) -> None:
    mem.remember_batch(_session(7))

    def distiller(session: int, turns: Sequence[TurnView], prior: Sequence[TurnView]) -> list[Any]:
        return [
            FactDraft("from the distiller", importance=6.5, valence=-30, arousal=120),
            FactDraft("from the parents", parents=(turns[0].id, turns[2].id)),
        ]

    given, inherited = (mem.get(f) for f in mem.consolidate(distiller=distiller).fact_ids)
    assert given is not None and inherited is not None
    assert (given.importance, given.valence, given.arousal) == (6.5, -30, 120)
    # from parents 0 and 2: max importance, mean valence, max arousal — never zero
    assert (inherited.importance, inherited.valence, inherited.arousal) == (3.0, 50, 50)


def test_bug_missing_session_tag(mem: SpectorMemory) -> None:
    mem.remember_batch(_session(123456789))
    r = mem.consolidate(distiller=lambda s, t, p: [{"text": "tagged fact", "tags": ["mine"]}])
    f = mem.get(r.fact_ids[0])
    assert f is not None and f.tags[0] == "session:123456789" and "mine" in f.tags
    hits = mem.recall(
        "tagged fact", RecallOptions(k=5, tags=frozenset({"session:123456789"}), mode="observe")
    )
    assert [h.id for h in hits] == r.fact_ids


def test_bug_duplicates_on_retry_consolidating_twice(mem: SpectorMemory) -> None:
    mem.remember_batch(_session(7))
    first = mem.consolidate()
    again = mem.consolidate()
    assert again.fact_ids == [] and again.turns_consolidated == 0 and again.resumed_runs == 0
    assert mem.count(MemoryType.SEMANTIC) == len(first.fact_ids)
    assert len(_raw_provenance(mem)) == len(first.fact_ids)


class _Injected(Exception):
    pass


STEPS = [
    "consolidate.after_partial",
    "consolidate.after_facts",
    "consolidate.after_mark",
    "consolidate.after_live",
]


@pytest.mark.parametrize("reopen", [False, True], ids=["same-handle", "reopened"])
@pytest.mark.parametrize("step", STEPS)
def test_bug_duplicates_on_retry_partial_run_is_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, reopen: bool
) -> None:
    # reference: an uninterrupted run over the same turns
    with SpectorMemory.open(tmp_path / "ref", config=FAST) as ref:
        ref.remember_batch(_session(7) + _session(8))
        want = sorted(ref.get(f).text for f in ref.consolidate().fact_ids)  # type: ignore[union-attr]

    def fail_at(name: str) -> None:
        if name == step:
            raise _Injected(name)

    path = tmp_path / "s"
    m = SpectorMemory.open(path, config=FAST)
    turns = m.remember_batch(_session(7) + _session(8))
    monkeypatch.setattr(reflect_module, "killpoint", fail_at)
    with pytest.raises(_Injected):
        m.consolidate()
    monkeypatch.undo()
    if reopen:
        m.close()
        m = SpectorMemory.open(path, config=FAST)
    try:
        r = m.consolidate()
        assert r.resumed_runs == (0 if step == "consolidate.after_live" else 1)
        facts = [p.memory_id for s in (7, 8) for p in m.session_provenance(s)]
        assert sorted(m.get(f).text for f in facts) == want  # type: ignore[union-attr]
        assert m.count(MemoryType.SEMANTIC) == len(want)  # none lost, none twice
        recs = _raw_provenance(m)
        assert len(recs) == len(want) and (recs["flags"] == 0).all()
        assert all(m.get(t).consolidated for t in turns)  # type: ignore[union-attr]
        assert m.consolidate().fact_ids == []
        assert m.check().ok and m.verify_chain().ok
    finally:
        m.close()


@pytest.mark.parametrize("reopen", [False, True])
def test_a_fact_has_lineage_as_soon_as_it_can_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reopen: bool
) -> None:
    """Issue 39: facts written before a crash left their run PARTIAL had no explain()."""

    def fail_after_facts(name: str) -> None:
        if name == "consolidate.after_facts":
            raise _Injected(name)

    path = tmp_path / "s"
    m = SpectorMemory.open(path, config=FAST)
    m.remember_batch(_session(7))
    monkeypatch.setattr(reflect_module, "killpoint", fail_after_facts)
    with pytest.raises(_Injected):
        m.consolidate()
    monkeypatch.undo()
    if reopen:
        m.close()
        m = SpectorMemory.open(path, config=FAST, read_only=True)
    try:
        facts = m.list(memory_type=MemoryType.SEMANTIC)
        assert facts  # written, readable, their run still PARTIAL
        assert (_raw_provenance(m)["flags"] != 0).all()
        for f in facts:
            lineage = m.explain(f.id, include_parents=True)
            assert lineage is not None and lineage.session_id == 7 and lineage.parents
        assert {p.memory_id for p in m.session_provenance(7)} == {f.id for f in facts}
        assert m.explain("0000000000000") is None
    finally:
        m.close()


def test_bug_stale_partition_record_uses_the_parents_partition(rig: Rig) -> None:
    turns = rig.remember_batch(_session(7))
    fid = rig.reflection.consolidate().fact_ids[0]
    c = rig.cortex
    parts = {c.location(rig.ordinal(t)).partition for t in turns}
    p = rig.reflection.explain(fid)
    assert p is not None and parts == {p.partition}
    r = _raw_provenance(rig)[0]
    assert int(r["partition_seq"]) == p.partition and int(r["source_partition"]) == p.partition


# ---- fact spans and citations from parents ---------------------------------------------------
def test_facts_quote_their_parent_with_a_moving_cursor(mem: SpectorMemory) -> None:
    text = "I like tea. I like tea. Ünïcode café is nice."
    tid = mem.remember(text, session_id=9)
    r = mem.consolidate(
        distiller=lambda s, t, p: [
            "I like tea.",
            "I like tea.",
            "café is nice.",
            "not in the parent",
        ]
    )
    facts = [mem.get(f) for f in r.fact_ids]
    raw = text.encode("utf-8")
    spans = [f.source_span for f in facts if f]
    assert spans[0] == (0, 11) and spans[1] == (12, 23)  # the second quote is the next occurrence
    assert spans[2] is not None and raw[spans[2][0] : spans[2][1]] == "café is nice.".encode()
    assert spans[3] is None
    assert all(f is not None and f.source_uri == f"doc:{tid}" for f in facts)


def test_default_distiller_spans_point_at_the_sentence(mem: SpectorMemory) -> None:
    turns = mem.remember_batch(_session(7))
    for fid in mem.consolidate().fact_ids:
        f = mem.get(fid)
        assert f is not None and f.source_uri is not None and f.source_span is not None
        parent = mem.get(f.source_uri.removeprefix("doc:"))
        assert parent is not None and parent.id in turns
        start, end = f.source_span
        quoted = parent.text.encode("utf-8")[start:end].decode("utf-8")
        # the span quotes the sentence the fact restates, in the third person, about its speaker
        assert quoted and quoted in parent.text and parent.speaker in f.text
        assert f.text != parent.text and not re.search(r"\b(?:I|my|me)\b", f.text)
