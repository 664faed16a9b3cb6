"""The episodic store's audit walk and the provenance store's codec, built directly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import crc32c as crc_lib
import numpy as np
import pytest

from spector_gpu.cortex import (
    EpisodeRecord,
    EpisodicMemory,
    LineageRun,
    LineageState,
    Payload,
    ProvenanceMemory,
    encode_payload,
    region_specs,
)
from spector_gpu.cortex.layouts import HEADER_DTYPE
from spector_gpu.errors import CorruptionError
from spector_gpu.storage.partition import Partition


@pytest.fixture
def part(tmp_path: Path) -> Iterator[Partition]:
    p = Partition.open(tmp_path, region_specs(8, 64), writable=True, durability="none")
    yield p
    p.close()


def _episodes(part: Partition, texts: list[str]) -> tuple[EpisodicMemory, list[int]]:
    ep = EpisodicMemory(part.region("episodic.log"))
    headers = np.zeros(len(texts), dtype=HEADER_DTYPE)
    headers["owner"] = np.arange(len(texts)) + 100
    tx = part.transaction()
    offsets = ep.append(
        tx,
        np.arange(len(texts)) + 100,
        headers,
        [encode_payload(Payload(text=t)) for t in texts],
        np.arange(len(texts)),
    )
    part.commit(tx)
    return ep, offsets


def _flip(ep: EpisodicMemory, at: int) -> None:
    with open(ep.region.path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x01]))


def test_audit_walks_every_record_in_log_order(part: Partition) -> None:
    ep, offsets = _episodes(part, ["one", "two two", "three " * 20])
    walked = list(ep.audit())
    assert [pos for pos, _ in walked] == offsets == ep.walk_offsets().tolist()
    records = [r for _, r in walked]
    assert all(isinstance(r, EpisodeRecord) for r in records)
    assert [r.payload.text for r in records if isinstance(r, EpisodeRecord)] == [
        "one",
        "two two",
        "three " * 20,
    ]
    assert ep.sequences_at(np.array(offsets)).tolist() == [0, 1, 2]


def test_audit_stops_at_the_first_damaged_record(part: Partition) -> None:
    ep, offsets = _episodes(part, ["one", "two", "three"])
    _flip(ep, offsets[1] + 96 + 20)  # inside the second record's payload
    walked = list(ep.audit())
    assert [pos for pos, _ in walked] == offsets[:2]
    assert isinstance(walked[1][1], CorruptionError) and "CRC" in str(walked[1][1])


def test_payloads_in_one_pass_are_read_one_by_one(part: Partition) -> None:
    texts = ["one", "two two", "three " * 20, "vier", "ü" * 300]
    ep, offsets = _episodes(part, texts)
    order = [3, 0, 4, 4, 1, 2]  # any order, repeats included
    offs = np.array([offsets[i] for i in order])
    owners = np.array(order) + 100
    got = ep.payloads(offs, owners)
    assert got == [ep.read(int(o), int(w)).payload for o, w in zip(offs, owners)]
    assert [p.text for p in got] == [texts[i] for i in order]
    assert ep.payloads(np.zeros(0, np.int64), np.zeros(0, np.int64)) == []


@pytest.mark.parametrize("where", ["payload", "header", "prefix"])
def test_payloads_raise_as_read_does_on_a_damaged_record(part: Partition, where: str) -> None:
    ep, offsets = _episodes(part, ["one", "two " * 9, "three"])
    _flip(ep, offsets[1] + {"payload": 96 + 20, "header": 40, "prefix": 12}[where])
    offs, owners = np.array(offsets), np.arange(3) + 100
    with pytest.raises(CorruptionError) as one:
        ep.read(offsets[1], 101)
    with pytest.raises(CorruptionError) as batch:
        ep.payloads(offs, owners)
    assert str(batch.value) == str(one.value)
    # the undamaged records still read, alone and together
    assert [p.text for p in ep.payloads(offs[[0, 2]], owners[[0, 2]])] == ["one", "three"]


def test_payloads_refuse_another_memorys_record_and_offsets_outside(part: Partition) -> None:
    ep, offsets = _episodes(part, ["one", "two"])
    with pytest.raises(CorruptionError, match="belongs to another memory"):
        ep.payloads(np.array(offsets), np.array([100, 100]))
    end = offsets[1] + 200
    with pytest.raises(CorruptionError, match="outside the committed log"):
        ep.payloads(np.array([offsets[0], end]), np.array([100, 101]))
    with pytest.raises(CorruptionError, match="bad record prefix"):
        ep.payloads(np.array([offsets[0] + 8]), np.array([100]))


def test_a_lineage_run_encodes_as_the_seed_table_says(part: Partition) -> None:
    store = ProvenanceMemory(part.region("provenance.rec"), capacity=64)
    run = LineageRun(
        session_id=7,
        pass_number=2,
        facts=[(111, "Ann lives in Lisbon."), (222, "Eva plays the cello.")],
        first_seq=3,
        last_seq=9,
        turn_count=40000,  # past i16: clamped
        first_record_offset=64 + 960,
        last_record_offset=64 + (1 << 33),  # past i32: clamped
        partition=5,
        consolidated_at_ms=1234,
    )
    r = store.encode_run(run)
    assert r["flags"].tolist() == [int(LineageState.PARTIAL)] * 2
    assert r["source_kind"].tolist() == [1, 1] and r["target_kind"].tolist() == [2, 2]
    assert r["target_tsid"].tolist() == [111, 222] and r["fact_index"].tolist() == [0, 1]
    assert r["batch_count"].tolist() == [2, 2] and r["turn_count"].tolist() == [32767] * 2
    assert r["first_offset"].tolist() == [960] * 2  # offsets past the log's preamble
    assert r["last_offset"].tolist() == [2**31 - 1] * 2
    assert r["content_hash_hi"].tolist() == [
        crc_lib.crc32c(t.encode()) >> 16 for t in ("Ann lives in Lisbon.", "Eva plays the cello.")
    ]
    assert r["partition_seq"].tolist() == r["source_partition"].tolist() == [5, 5]
    assert r["pass_number"].tolist() == [2, 2] and r["consolidated_at"].tolist() == [1234] * 2


def test_provenance_queries_follow_the_state_byte(part: Partition) -> None:
    store = ProvenanceMemory(part.region("provenance.rec"), capacity=64)
    tx = part.transaction()
    store.append_run(tx, LineageRun(7, 1, [(111, "a"), (222, "b")], 0, 1, 2, 64, 64, 0, 1))
    store.append_run(tx, LineageRun(8, 1, [(333, "c")], 0, 0, 1, 64, 64, 0, 1))
    part.commit(tx)
    assert store.partial_runs() == [(7, 1), (8, 1)]
    assert store.run_slots(7, 1).tolist() == [0, 1] and store.live_targets() == set()
    tx = part.transaction()
    store.set_state(tx, store.run_slots(7, 1), LineageState.LIVE)
    store.tombstone(tx, np.array([2]))
    part.commit(tx)
    assert store.partial_runs() == [] and store.live_targets() == {111, 222}
    assert store.next_pass(7) == 2 and store.next_pass(8) == 1  # a tombstone frees its pass
    rows = store.rows()
    assert ProvenanceMemory.live(rows).tolist() == [True, True, False]
    assert ProvenanceMemory.valid_state(rows).all()
    rows["flags"][0] = 3
    assert ProvenanceMemory.valid_state(rows).tolist() == [False, True, True]
