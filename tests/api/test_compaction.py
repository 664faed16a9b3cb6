"""compact(): dead rows leave every file; the kept rows, their indexes, lineage and events
stay consistent under new ordinals; readers follow the swap; the automatic threshold."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from spector_gpu import MemoryType, SpectorMemory
from spector_gpu.config import ConfigError, load_config
from spector_gpu.cortex.ids import decode_tsid, encode_tsid
from spector_gpu.cortex.lifecycle import with_replaced, with_tombstone
from spector_gpu.errors import StoreError
from spector_gpu.pathways.compact import dead_share
from spector_gpu.testing import cortex_of

FAST = {"store": {"durability": "none"}}


def kill_rows(mem: SpectorMemory, ids: list[str], *, how: str = "tombstone") -> None:
    """Mark rows dead the way the lifecycle's write paths do, in one commit: the TOMBSTONE
    or REPLACED header bit, or an expiry in the past (strength row bytes 72..79)."""
    c = cortex_of(mem)
    ords = [c.id_map[decode_tsid(i)] for i in ids]
    tx = c.transaction()
    if how == "expire":
        rows = c.strength.read(np.array(ords))
        rows["expires_ms"] = 1
        c.stores.stage_strength(tx, np.array(ords), rows)
        c.commit(tx)
        c.cols.expires_ms[ords] = 1  # what the expiry write path adopts with its commit
        return
    mark = with_tombstone if how == "tombstone" else with_replaced
    headers = {o: mark(c.cols.headers[o : o + 1]) for o in ords}
    for o, h in headers.items():
        c.rewrite_header(tx, o, h)
    c.commit(tx)
    for o, h in headers.items():
        c.cols.headers[o] = h[0]


def files_with(directory: Path, token: bytes) -> list[str]:
    return [str(p) for p in directory.rglob("*") if p.is_file() and token in p.read_bytes()]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "mem"


@pytest.mark.parametrize("how", ["tombstone", "expire"])
def test_dead_rows_bytes_leave_every_file(store: Path, how: str) -> None:
    token = b"qzvxwkjyplorbitune"
    with SpectorMemory.open(store, config=FAST) as mem:
        mem.remember_batch([f"turn {i} on gardening and tomatoes" for i in range(40)])
        secret = mem.remember(f"the vault code is {token.decode()}", session_id=3)
        fact = mem.remember(f"fact {token.decode()} restated", type=MemoryType.SEMANTIC)
        mem.flush()  # the token is now in the snapshot, the journal, the logs and the pool
        assert files_with(store, token)
        kill_rows(mem, [secret, fact], how=how)
        report = mem.compact()
        assert (report.rows_before, report.rows_after, report.dropped) == (42, 40, 2)
        assert mem.get(secret) is None and mem.get(fact) is None
        assert mem.check().ok and mem.verify_chain().ok
    assert files_with(store, token) == []
    assert not (store / ".compact").exists()


def test_kept_rows_keep_everything_under_new_ordinals(store: Path) -> None:
    with SpectorMemory.open(store, config=FAST) as mem:
        turns = mem.remember_batch(
            [
                {
                    "text": f"Ann: day {i} we talked about topic{i} and sailing",
                    "session_id": 1,
                    "speaker": "Ann",
                }
                for i in range(12)
            ]
        )
        skill = mem.remember("brew tea", type=MemoryType.PROCEDURAL, steps=["boil", "steep"])
        facts = mem.consolidate().fact_ids
        assert facts
        kill_rows(mem, turns[:5])  # the first parents of the facts
        keep = [*turns[5:], skill, *facts]
        before = {i: mem.get(i) for i in keep}
        lineage = {f: mem.explain(f) for f in facts}
        hits = {f"topic{i}": [h.id for h in mem.recall(f"topic{i}")][:1] for i in range(5, 12)}
        mem.compact()
        for i in keep:
            got, was = mem.get(i), before[i]
            assert got is not None and was is not None
            assert (got.text, got.memory_type, got.importance) == (
                was.text,
                was.memory_type,
                was.importance,
            )
        for f in facts:
            now, was = mem.explain(f), lineage[f]
            assert now is not None and was is not None
            assert (now.session_id, now.first_seq, now.last_seq, now.pass_number) == (
                was.session_id,
                was.first_seq,
                was.last_seq,
                was.pass_number,
            )
            assert now.first_offset == -1  # the first parent was erased
        assert {q: [h.id for h in mem.recall(q)][:1] for q in hits} == hits
        assert mem.count() == len(keep)
        assert mem.check().ok and mem.verify_chain().ok
        mem.remember("written after the compaction")  # ordinals continue
    with SpectorMemory.open(store, config=FAST) as mem:
        assert mem.count() == len(keep) + 1 and mem.check().ok
        assert mem.recovery["snapshot_covered"] == len(keep) + 1


def test_erased_fact_text_leaves_its_consolidation_plan(store: Path) -> None:
    with SpectorMemory.open(store, config=FAST) as mem:
        mem.remember_batch(
            [
                {
                    "text": "Bo: my locker combination is grimblefrotz",
                    "session_id": 2,
                    "speaker": "Bo",
                }
            ]
            + [
                {"text": f"Bo: unrelated line {i}", "session_id": 2, "speaker": "Bo"}
                for i in range(3)
            ]
        )
        facts = mem.consolidate().fact_ids
        c = cortex_of(mem)
        quoting = [encode_tsid(int(c.cols.ids[o])) for o in range(c.n) if "grim" in c.text_of(o)]
        assert len(quoting) >= 2 and set(quoting) & set(facts)  # a fact quotes the turn
        kill_rows(mem, quoting)
        report = mem.compact()
        assert report.events_redacted >= 1
        assert mem.verify_chain().ok
    assert files_with(store, b"grimblefrotz") == []


def test_replaced_row_without_a_live_version_goes(store: Path) -> None:
    with SpectorMemory.open(store, config=FAST) as mem:
        old, live = mem.remember_batch(["a first wording", "a second memory"])
        kill_rows(mem, [old], how="replaced")  # REPLACED, and no newer row of its memory
        assert mem.compact().rows_after == 1
        assert mem.count() == 1 and mem.get(old) is None and mem.get(live) is not None


def test_reader_follows_the_swap(store: Path) -> None:
    with SpectorMemory.open(store, config=FAST) as mem:
        ids = mem.remember_batch([f"note {i} about kites" for i in range(20)])
        with SpectorMemory.open(store, read_only=True) as reader:
            assert reader.count() == 20
            kill_rows(mem, ids[:10])
            mem.compact()
            assert reader.count() == 10  # the refresh saw the swap and reopened
            assert reader.get(ids[0]) is None
            got = reader.get(ids[15])
            assert got is not None and got.text == "note 15 about kites"
            assert {h.id for h in reader.recall("kites", None)} <= set(ids[10:])
            mem.remember("one more about kites")
            assert reader.count() == 11


def test_automatic_compaction_past_the_dead_share(store: Path) -> None:
    cfg = {"store": {"durability": "none", "compact_dead_share": 0.3}}
    with SpectorMemory.open(store, config=cfg) as mem:
        ids = mem.remember_batch([f"row {i}" for i in range(10)])
        kill_rows(mem, ids[:3])
        assert dead_share(cortex_of(mem)) == pytest.approx(0.3)
        mem.flush()  # at the threshold, not past it
        assert cortex_of(mem).n == 10
        kill_rows(mem, ids[3:4])
        mem.flush()
        assert cortex_of(mem).n == 6 and mem.count() == 6


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, "half"])
def test_compact_dead_share_is_validated(bad: object) -> None:
    with pytest.raises(ConfigError, match="compact_dead_share"):
        load_config(overrides={"store": {"compact_dead_share": bad}}, environ={})


def test_leftover_build_is_discarded_on_open(store: Path) -> None:
    with SpectorMemory.open(store, config=FAST) as mem:
        mem.remember("kept")
    (store / ".compact").mkdir()
    (store / ".compact" / "episodic.log").write_bytes(b"half a build")
    with SpectorMemory.open(store, config=FAST) as mem:
        assert mem.count() == 1 and mem.check().ok
    assert not os.path.lexists(store / ".compact")


_READER = """
import sys
from spector_gpu import SpectorMemory
with SpectorMemory.open(sys.argv[1], read_only=True, device="cpu") as mem:
    live, dead = sys.argv[2], sys.argv[3]
    print(mem.count(), mem.get(dead) is not None, flush=True)
    for line in sys.stdin:  # one probe per line the writer sends, after each of its steps
        got = mem.get(live)
        print(mem.count(), mem.get(dead) is not None, got.text if got else None, flush=True)
"""


def test_reader_in_another_process_reloads_after_the_swap(store: Path) -> None:
    import subprocess
    import sys

    with SpectorMemory.open(store, config=FAST) as mem:
        ids = mem.remember_batch([f"line {i} about owls" for i in range(30)])
        proc = subprocess.Popen(
            [sys.executable, "-c", _READER, str(store), ids[20], ids[0]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            assert proc.stdout.readline().split() == ["30", "True"]
            kill_rows(mem, ids[:10])
            mem.compact()
            proc.stdin.write("probe\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "20 False line 20 about owls"
            mem.remember("a new line about owls")
            proc.stdin.write("probe\n")
            proc.stdin.flush()
            assert proc.stdout.readline().split()[:2] == ["21", "False"]
        finally:
            proc.stdin.close()
            code = proc.wait(60)
            proc.stdout.close()
        assert code == 0


def test_failed_build_leaves_the_old_store_and_a_usable_handle(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spector_gpu.cortex import compaction

    def no_space(*_: object) -> None:
        raise OSError(28, "No space left on device")

    with SpectorMemory.open(store, config=FAST) as mem:
        ids = mem.remember_batch([f"entry {i} on maps" for i in range(8)])
        kill_rows(mem, ids[:2])
        monkeypatch.setattr(compaction, "_copy_lineage", no_space)
        with pytest.raises(StoreError, match="the store is unchanged"):
            mem.compact()
        monkeypatch.undo()
        assert cortex_of(mem).n == 8 and mem.check().ok
        mem.remember("still writable")
    with SpectorMemory.open(store, config=FAST) as mem:
        assert cortex_of(mem).n == 9 and mem.recovery["snapshot_covered"] == 9
        assert not (store / ".compact").exists()
        assert mem.compact().rows_after == 7


# ---- through the lifecycle API -------------------------------------------------------------


def test_delete_then_compact_erases_the_token_everywhere(store: Path) -> None:
    token = "wyxqnobblestrand"
    with SpectorMemory.open(store, config=FAST) as mem:
        mem.remember_batch([f"Cy: line {i} about rivers" for i in range(30)])
        gone = mem.remember(f"Cy: my passphrase is {token}", session_id=4)
        kept = mem.remember("Cy: something else entirely", session_id=4)
        mem.flush()
        mem.delete(gone)
        assert files_with(store, token.encode())  # a delete hides; compaction erases
        assert mem.compact().dropped == 1
        assert mem.get(gone) is None and mem.get(kept) is not None
        assert mem.check().ok and mem.verify_chain().ok
    assert files_with(store, token.encode()) == []


def test_update_history_is_kept_unless_dropped(store: Path) -> None:
    with SpectorMemory.open(store, config=FAST) as mem:
        mid = mem.remember("Dee lives in Oporto, flat quillmarsh")
        mem.remember("an unrelated memory")
        mem.update(mid, text="Dee lives in Braga now")
        assert mem.compact().rows_after == 3  # the older version is history
        assert [e.event for e in mem.history(mid)] == ["ADD", "UPDATE"]
        got = mem.get(mid)
        assert got is not None and got.text == "Dee lives in Braga now"
        assert mem.compact(keep_history=False).rows_after == 2
        got = mem.get(mid)
        assert got is not None and got.text == "Dee lives in Braga now"
        assert mem.check().ok
    assert files_with(store, b"quillmarsh") == []


def test_expired_memories_are_purged(store: Path) -> None:
    import time

    with SpectorMemory.open(store, config=FAST) as mem:
        short = mem.remember("a fleeting note zorbulant", ttl_s=0.05)
        mem.remember("a lasting note")
        time.sleep(0.1)
        assert mem.get(short) is None  # gated at once
        assert mem.compact().dropped == 1
    assert files_with(store, b"zorbulant") == []


def test_deletes_past_the_dead_share_compact_automatically(store: Path) -> None:
    cfg = {"store": {"durability": "none", "compact_dead_share": 0.25}}
    with SpectorMemory.open(store, config=cfg) as mem:
        ids = mem.remember_batch([f"item {i} flurbish" for i in range(8)])
        mem.delete_batch(ids[:2])  # 2 of 8 dead: at the share, not past it
        assert cortex_of(mem).n == 8
        mem.delete(ids[2])  # 3 of 8: compacted
        assert cortex_of(mem).n == 5 and mem.count() == 5
        mem.delete_batch(ids[3:])
        assert cortex_of(mem).n == 0 and mem.count() == 0
    assert files_with(store, b"flurbish") == []


def test_history_of_an_erased_memory_survives_compaction(store: Path) -> None:
    with SpectorMemory.open(store, config=FAST) as mem:
        gone = mem.remember("first wording of a plan")
        mem.remember("a memory that stays")
        mem.update(gone, text="second wording of a plan")
        before = mem.history(gone)
        mem.delete(gone)
        mem.compact()
        after = mem.history(gone)
    assert [e.event for e in after] == ["ADD", "UPDATE", "DELETE"]
    assert [e.content_hash for e in after[:2]] == [e.content_hash for e in before]
    assert all(e.new_text is None and e.previous_text is None and e.is_deleted for e in after)
    assert after[-1].at_ms >= after[1].at_ms >= after[0].at_ms > 0
    assert files_with(store, b"wording of a plan") == []
