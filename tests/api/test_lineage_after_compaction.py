"""A consolidated turn that is deleted and compacted away leaves its fact's provenance naming
a turn range of its session; a turn written later must not inherit that range: it gets a
sequence past every range a record names, so ``explain`` does not report it as the fact's
parent and a fresh rebuild of the derived indexes links it to the fact no more than the live
store does (a case the model-based stateful test found)."""

from __future__ import annotations

from pathlib import Path

from reliability.engine_workload import answers, open_memory, rebuild_problem

ALL_RELAYS = ("lexical", "dense", "association")


def test_a_later_turn_never_takes_a_deleted_parents_place(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "s")
    try:
        (turn,) = mem.remember_batch([{"text": "Ann.", "session_id": 0, "speaker": "Ann"}])
        mem.update(turn, text="Ann Ann Ann.")
        mem.consolidate()
        facts = [m.id for m in mem.list() if m.id != turn]
        assert len(facts) == 1
        before = mem.explain(facts[0])
        assert before is not None and before.parent_ids == (turn,)
        mem.delete(turn)  # the store compacts its dead rows
        (later,) = mem.remember_batch([{"text": "0", "session_id": 0}])
        after = mem.explain(facts[0])
        assert after is not None and later not in after.parent_ids
        assert (after.first_seq, after.last_seq) == (before.first_seq, before.last_seq)
        why = rebuild_problem(tmp_path / "s", answers(mem, ALL_RELAYS), ALL_RELAYS)
        assert why is None, why
    finally:
        mem.close()
