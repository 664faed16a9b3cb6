"""A cortex built directly (no facade): Cortex.write of each batch part, reopen, readers.

Every test opens :class:`Cortex` itself over a temporary directory with the hashing embedder
and writes typed :class:`WriteBatch` values — the way the pathways do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from spector_gpu.config import Config
from spector_gpu.cortex import (
    Cortex,
    LineageRun,
    NewMemories,
    Payload,
    WriteBatch,
    is_consolidated,
)
from spector_gpu.cortex.layouts import FLAG_PINNED, FLAG_RESOLVED, type_of_flags
from spector_gpu.embedders import HashingEmbedder
from spector_gpu.errors import CorruptionError, RegionFullError, ValidationError
from spector_gpu.provenance.record import RecordProvenance
from spector_gpu.types import MemoryType, Source

EMB = HashingEmbedder(dim=32)
NOW = 1_800_000_000_000


def _open(path: Path, *, read_only: bool = False, **store: object) -> Cortex:
    cfg = Config().replace({"store": {"durability": "none", **store}})
    return Cortex.open(path, cfg, EMB, device=torch.device("cpu"), read_only=read_only)


@pytest.fixture
def cortex(tmp_path: Path) -> Iterator[Cortex]:
    c = _open(tmp_path)
    yield c
    c.close()


def _memories(
    c: Cortex,
    texts: Sequence[str],
    *,
    mtype: MemoryType = MemoryType.EPISODIC,
    session: int = 1,
    tags: tuple[str, ...] = (),
    pinned: bool = False,
) -> NewMemories:
    m = len(texts)
    base = (c.n + 1) << 22  # distinct positive TSIDs
    episodic = mtype == MemoryType.EPISODIC
    first_seq = c.cues.next_sequence(session)
    return NewMemories(
        ids=np.arange(base, base + m, dtype=np.int64),
        types=np.full(m, int(mtype), dtype=np.int32),
        payloads=[Payload(text=t, session_id=session, speaker="Ann", tags=tags) for t in texts],
        sequences=np.arange(first_seq, first_seq + m) if episodic else np.full(m, -1),
        vectors=EMB.embed(list(texts)),
        timestamp_ms=np.full(m, NOW, dtype=np.int64),
        importance=np.linspace(1.0, 2.0, m).astype(np.float32),
        valence=np.full(m, -3, dtype=np.int8),
        arousal=np.full(m, 40, dtype=np.uint8),
        pinned=np.full(m, pinned),
        provenance=np.full(m, int(RecordProvenance.VERBATIM), dtype=np.uint8),
        source=Source.EXPERIENCED,
        now_ms=NOW,
    )


def test_write_adopts_new_memories_into_every_structure(cortex: Cortex) -> None:
    batch = _memories(cortex, ["Ann moved to Lisbon", "Bo asked about the flat"], pinned=True)
    v0 = cortex.version
    cortex.write(WriteBatch(memories=batch))
    assert cortex.n == 2 and cortex.version == v0 + 1
    assert [cortex.id_map[int(t)] for t in batch.ids] == [0, 1]
    h = cortex.cols.headers
    assert h["owner"].tolist() == batch.ids.tolist()
    assert [int(type_of_flags(int(f))) for f in h["flags"]] == [int(MemoryType.EPISODIC)] * 2
    assert (h["flags"] & (FLAG_PINNED | FLAG_RESOLVED) == FLAG_PINNED | FLAG_RESOLVED).all()
    assert h["valence"].tolist() == [-3, -3] and h["importance"].tolist() == [1.0, 2.0]
    assert np.allclose(h["exact_norm"], np.linalg.norm(batch.vectors, axis=1))
    assert cortex.payload(1) == batch.payloads[1] and cortex.text_of(0) == "Ann moved to Lisbon"
    assert cortex.location(1).type == MemoryType.EPISODIC
    assert cortex.cues.sequence[:2].tolist() == [0, 1] and cortex.cues.next_sequence(1) == 2
    assert int(cortex.links.prev[1]) == 0 and int(cortex.links.next[0]) == 1
    assert len(cortex.bm25) == len(cortex.dense) == 2
    assert cortex.cols.d_event.tolist() == [1.0, 1.0] and cortex.cols.last_event_ms[0] == NOW
    assert cortex.strength.read(np.arange(2))["owner"].tolist() == batch.ids.tolist()


def test_a_reopened_cortex_holds_what_was_written(tmp_path: Path) -> None:
    c = _open(tmp_path)
    c.write(WriteBatch(memories=_memories(c, ["one turn", "two turns"], session=4)))
    c.write(WriteBatch(memories=_memories(c, ["a fact"], mtype=MemoryType.SEMANTIC, tags=("t",))))
    ids, headers = c.cols.ids.copy(), c.cols.headers.copy()
    payloads = [c.payload(i) for i in range(c.n)]
    c.close()  # saves the derived snapshot
    c = _open(tmp_path)
    try:
        assert c.recovery["snapshot_covered"] == 3 and c.recovery["replayed_memories"] == 0
        assert np.array_equal(c.cols.ids, ids) and c.cols.headers.tobytes() == headers.tobytes()
        assert [c.payload(i) for i in range(c.n)] == payloads
        assert c.location(2).type == MemoryType.SEMANTIC and c.cues.tags[2] == ("t",)
        assert c.session_turns(4, 0, 10) == [0, 1]
        assert [r.payload.text for r in c.session_cursor(4, after_seq=0)] == ["two turns"]
    finally:
        c.close()


def test_header_updates_are_written_in_place_and_adopted(tmp_path: Path) -> None:
    c = _open(tmp_path)
    c.write(WriteBatch(memories=_memories(c, ["first", "second"])))
    c.write(WriteBatch(memories=_memories(c, ["a fact"], mtype=MemoryType.SEMANTIC)))
    extracted = int(RecordProvenance.EXTRACTED)
    c.write(WriteBatch(consolidate=[1, 0], record_provenance={2: extracted}))
    assert is_consolidated(c.cols.headers["flags"]).tolist() == [True, True, False]
    assert int(c.cols.headers["provenance"][2]) == extracted
    c.close()
    c = _open(tmp_path)
    try:
        assert is_consolidated(c.cols.headers["flags"]).tolist() == [True, True, False]
        assert int(c.semantic.read_header(0)["provenance"]) == extracted
        assert c.payload(0).text == "first"  # the record still verifies after the rewrite
    finally:
        c.close()


def test_lineage_run_is_partial_then_live_and_links_fact_to_turns(cortex: Cortex) -> None:
    cortex.write(WriteBatch(memories=_memories(cortex, ["Ann moved", "to Lisbon"], session=9)))
    fact = _memories(cortex, ["Ann lives in Lisbon"], mtype=MemoryType.SEMANTIC, session=9)
    first, last = cortex.location(0), cortex.location(1)
    run = LineageRun(
        session_id=9,
        pass_number=1,
        facts=[(int(fact.ids[0]), "Ann lives in Lisbon")],
        first_seq=0,
        last_seq=1,
        turn_count=2,
        first_record_offset=first.record_offset,
        last_record_offset=last.record_offset,
        partition=first.partition,
        consolidated_at_ms=NOW,
    )
    cortex.write(WriteBatch(lineage=run))
    assert cortex.provenance.partial_runs() == [(9, 1)]
    cortex.write(WriteBatch(memories=fact))
    assert 2 not in cortex.links.extra  # no lineage edge while the record is partial
    cortex.write(WriteBatch(lineage_live=(9, 1)))
    assert cortex.provenance.partial_runs() == []
    assert cortex.provenance.live_targets() == {int(fact.ids[0])}
    assert sorted(nbr for nbr, _ in cortex.links.extra[2]) == [0, 1]


def test_audit_runs_before_the_commit_and_never_for_a_part_that_cannot_be_written(
    tmp_path: Path,
) -> None:
    c = _open(tmp_path, provenance_capacity=1)
    try:
        c.write(WriteBatch(memories=_memories(c, ["turn"])))
        calls: list[int] = []
        facts = [(1, "a"), (2, "b")]  # two records: more than the region holds
        run = LineageRun(9, 1, facts, 0, 0, 1, 64, 64, 0, NOW)
        v = c.version
        with pytest.raises(RegionFullError):
            c.write(WriteBatch(lineage=run), audit=lambda: calls.append(c.version))
        assert calls == [] and c.version == v and c.provenance.count == 0
        c.write(WriteBatch(consolidate=[0]), audit=lambda: calls.append(c.version))
        assert calls == [v]  # called once, before the commit bumped the version
    finally:
        c.close()


def test_a_malformed_batch_is_refused_and_nothing_is_written(cortex: Cortex) -> None:
    good = _memories(cortex, ["x", "y"])
    counts = {name: r.count for name, r in cortex.part.by_name.items()}
    bad_vectors = NewMemories(**{**good.__dict__, "vectors": good.vectors[:, :5]})
    with pytest.raises(ValidationError, match="vectors"):
        cortex.write(WriteBatch(memories=bad_vectors))
    bad_types = NewMemories(**{**good.__dict__, "types": np.zeros(2, dtype=np.int32)})
    with pytest.raises(ValidationError, match="EPISODIC, SEMANTIC or PROCEDURAL"):
        cortex.write(WriteBatch(memories=bad_types))
    assert cortex.n == 0 and {n: r.count for n, r in cortex.part.by_name.items()} == counts
    with pytest.raises(ValidationError, match="ordinal 0: no such memory"):
        cortex.write(WriteBatch(consolidate=[0]))


def test_a_quarantined_memory_header_is_never_written_back(cortex: Cortex) -> None:
    cortex.write(WriteBatch(memories=_memories(cortex, ["a", "b"])))
    cortex.quarantine.quarantined.add(1)
    with pytest.raises(CorruptionError, match="damaged header or strength"):
        cortex.write(WriteBatch(consolidate=[0, 1]))
    assert not is_consolidated(cortex.cols.headers["flags"]).any()
    assert cortex.quarantined is cortex.quarantine.quarantined


def test_deferred_strength_rows_are_written_with_the_next_commit(cortex: Cortex) -> None:
    cortex.write(WriteBatch(memories=_memories(cortex, ["a", "b", "c"])))
    rows = cortex.strength.read(np.array([2]))
    rows["passive_recall_count"] = 5
    pending: list[tuple[np.ndarray, np.ndarray]] = [(np.array([2]), rows)]
    asked: list[bool] = []

    def take() -> tuple[np.ndarray, np.ndarray] | None:
        asked.append(bool(pending))
        return pending.pop() if pending else None

    cortex.defer_strength(take)
    cortex.write(WriteBatch())
    cortex.write(WriteBatch())
    assert asked == [True, False]
    assert cortex.strength.read(np.arange(3))["passive_recall_count"].tolist() == [0, 0, 5]


def test_a_reader_refresh_picks_up_new_memories_and_header_changes(tmp_path: Path) -> None:
    w = _open(tmp_path)
    try:
        w.write(WriteBatch(memories=_memories(w, ["one"])))
        r = _open(tmp_path, read_only=True)
        try:
            assert r.n == 1
            w.write(WriteBatch(memories=_memories(w, ["two", "three"])))
            w.write(WriteBatch(consolidate=[0]))
            v = r.version
            r.refresh()
            assert r.n == 3 and r.version == v + 1
            assert [r.text_of(i) for i in range(3)] == ["one", "two", "three"]
            assert is_consolidated(r.cols.headers["flags"]).tolist() == [True, False, False]
            with pytest.raises(Exception, match="read-only"):
                r.write(WriteBatch())
        finally:
            r.close()
    finally:
        w.close()


def test_a_reader_refresh_with_nothing_committed_keeps_its_state_and_sees_the_next_commit(
    tmp_path: Path,
) -> None:
    """Every commit stamps its generation into every preamble: a refresh that finds none moved
    keeps what is loaded (no reload, no version bump — a reader's recall stays O(query), not
    O(store)), and the next commit, even one that only rewrites a header in place, is seen."""
    w = _open(tmp_path)
    try:
        w.write(WriteBatch(memories=_memories(w, ["one", "two"])))
        r = _open(tmp_path, read_only=True)
        try:
            v = r.version
            for _ in range(3):
                r.refresh()
            assert r.version == v and r.n == 2
            w.write(WriteBatch(consolidate=[1]))  # in place: no new memory, no count moved
            r.refresh()
            assert r.version == v + 1
            assert is_consolidated(r.cols.headers["flags"]).tolist() == [False, True]
        finally:
            r.close()
    finally:
        w.close()
