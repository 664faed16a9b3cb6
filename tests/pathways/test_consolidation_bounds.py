"""Consolidation of sessions of any length (issue 15 §11): a long session is consolidated in
passes of ``[reflect] max_turns_per_pass`` turns, and a plan of any size is recorded in
pieces that a resumed run puts back together."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import MemoryType, SpectorMemory
from spector_gpu.pathways import reflect as reflect_module
from spector_gpu.pathways.plan import PIECE_CHARS, PLAN_EVENT, find_plans, plan_payloads
from spector_gpu.provenance.chain import decode_event
from spector_gpu.testing import cortex_of

FAST = {"store": {"durability": "none"}}


def _turns(n: int, session: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "text": f"Turn {i}: the heron number {i} flew over Lake Tana at dawn.",
            "session_id": session,
        }
        for i in range(n)
    ]


def _plan_events(mem: SpectorMemory) -> list[dict[str, Any]]:
    out = []
    for data in cortex_of(mem).events.records():
        ev = decode_event(data)
        if ev.kind == PLAN_EVENT:
            out.append(dict(ev.payload))
    return out


def test_a_session_past_the_old_event_limit_consolidates(tmp_path: Path) -> None:
    """5,000 turns in one session (its turn list alone is ~75 KB, over one event's 64 KiB)."""
    n = 5_000
    with SpectorMemory.open(tmp_path / "s", config=FAST, embedder="hashing") as mem:
        turns = mem.remember_batch(_turns(n))
        report = mem.consolidate()
        assert report.turns_consolidated == n and report.sessions == [0]
        assert report.passes == {0: math.ceil(n / 256)}
        assert all(mem.get(t).consolidated for t in turns[:: n // 50])  # type: ignore[union-attr]
        assert mem.consolidate().turns_consolidated == 0
        # each fact's lineage is its own pass's turns, within 256 consecutive turns
        for fid in report.fact_ids[:: max(1, len(report.fact_ids) // 20)]:
            p = mem.explain(fid)
            assert p is not None and p.last_seq - p.first_seq < 256
        assert mem.check().ok and mem.verify_chain().ok


def test_passes_follow_the_configured_size(tmp_path: Path) -> None:
    cfg = {**FAST, "reflect": {"max_turns_per_pass": 10}}
    seen: list[tuple[int, int, int]] = []

    def distiller(session_id: int, turns: Any, prior: Any) -> list[str]:
        seen.append((len(turns), len(prior), turns[0].sequence))
        return [f"fact of turns {turns[0].sequence}..{turns[-1].sequence}"]

    with SpectorMemory.open(tmp_path / "s", config=cfg, embedder="hashing") as mem:
        mem.remember_batch(_turns(25, session=3))
        report = mem.consolidate(distiller=distiller)
        # in order; each pass sees the latest consolidated turns (one pass's worth) as context
        assert seen == [(10, 0, 0), (10, 10, 10), (5, 10, 20)]
        assert report.passes == {3: 3} and len(report.fact_ids) == 3
        ranges = [(p.first_seq, p.last_seq, p.pass_number) for p in mem.session_provenance(3)]
        assert ranges == [(0, 9, 1), (10, 19, 2), (20, 24, 3)]


def test_plan_pieces_round_trip() -> None:
    facts = [{"id": f"f{i}", "text": "é" * 40_000 + str(i)} for i in range(5)]
    turns = [f"t{i}" for i in range(3)]
    payloads = plan_payloads(4, 2, facts, turns)
    assert len(payloads) > 1 and all(len(str(p["plan"])) <= PIECE_CHARS for p in payloads)
    assert all(str(p["plan"]).isascii() for p in payloads)  # chars are bytes: under 64 KiB

    from spector_gpu.provenance.event import Event, encode_event

    records = [
        encode_event(Event(k, 0, PLAN_EVENT, "f0", p, bytes(32))) for k, p in enumerate(payloads)
    ]
    assert find_plans(records, {(4, 2)}, "events.log") == {(4, 2): (facts, turns)}
    # a plan missing a piece is not taken for a whole one
    from spector_gpu import CorruptionError

    with pytest.raises(CorruptionError, match="session 4 pass 2"):
        find_plans(records[:-1], {(4, 2)}, "events.log")


class _Injected(Exception):
    pass


@pytest.mark.parametrize("reopen", [False, True], ids=["same-handle", "reopened"])
def test_a_plan_of_many_pieces_is_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reopen: bool
) -> None:
    """Facts totalling ~300 KB: the plan takes several events; a run stopped after writing it
    resumes from it (never re-running the distiller) and writes each fact once."""
    texts = [f"fact {i}: " + "long remark about herons " * 2_400 for i in range(5)]
    calls = []

    def distiller(session_id: int, turns: Any, prior: Any) -> list[str]:
        calls.append(session_id)
        return texts

    def fail_at(name: str) -> None:
        if name == "consolidate.after_partial":
            raise _Injected(name)

    path = tmp_path / "s"
    mem = SpectorMemory.open(path, config=FAST, embedder="hashing")
    try:
        mem.remember_batch(_turns(6, session=1))
        monkeypatch.setattr(reflect_module, "killpoint", fail_at)
        with pytest.raises(_Injected):
            mem.consolidate(distiller=distiller)
        monkeypatch.undo()
        assert len(_plan_events(mem)) > sum(map(len, texts)) // PIECE_CHARS  # several pieces
        if reopen:
            mem.close()
            mem = SpectorMemory.open(path, config=FAST, embedder="hashing")
        report = mem.consolidate(distiller=distiller)
        assert report.resumed_runs == 1 and calls == [1]
        assert sorted(mem.get(f).text for f in report.fact_ids) == sorted(texts)  # type: ignore[union-attr]
        assert mem.count(MemoryType.SEMANTIC) == len(texts)
        assert mem.consolidate(distiller=distiller).fact_ids == []
        assert mem.check().ok and mem.verify_chain().ok
    finally:
        mem.close()
