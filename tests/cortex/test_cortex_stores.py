"""Typed stores of the cortex: session cursor, salience walk, index map, provenance tombstone,
working memory eviction, strength decay law."""

from __future__ import annotations

import numpy as np
from rig import Rig

from spector_gpu.config import StrengthConfig
from spector_gpu.cortex.layouts import FLAG_PINNED, FLAG_RESOLVED, PROV_TOMBSTONE, STRENGTH_DTYPE
from spector_gpu.cortex.strength import decayed
from spector_gpu.cortex.working import Thought, WorkingMemory
from spector_gpu.storage.tsid import decode_tsid


def test_session_cursor_walks_one_session_in_sequence_order(tmp_path):
    with Rig.open(tmp_path) as rig:
        ids = rig.remember_batch([{"text": f"turn {i}", "session_id": i % 2} for i in range(6)])
        c = rig.cortex
        texts = [r.payload.text for r in c.session_cursor(1)]
        assert texts == ["turn 1", "turn 3", "turn 5"]
        assert [r.sequence for r in c.session_cursor(1)] == [0, 1, 2]
        assert [r.payload.text for r in c.session_cursor(1, after_seq=0)] == ["turn 3", "turn 5"]
        offsets, headers = c.episodic.walk_headers()
        assert len(offsets) == 6 and list(headers["owner"]) == [decode_tsid(i) for i in ids]


def test_index_memory_locates_every_id_and_rebuilds_on_open(tmp_path):
    with Rig.open(tmp_path) as rig:
        ids = rig.remember_batch([f"memory {i}" for i in range(10)])
    with Rig.open(tmp_path) as rig:
        index = rig.cortex.index
        assert [index.locate(decode_tsid(i)) for i in ids] == list(range(10))
        loc = rig.cortex.location(3)
        assert loc.vector_slot == loc.graph_slot == 3


def test_provenance_tombstone_hides_a_record(tmp_path):
    with Rig.open(tmp_path) as rig:
        rig.remember_batch(
            [{"text": "Ann moved to Lisbon in May with her sister.", "session_id": 4}]
        )
        fact = rig.reflection.consolidate().fact_ids[0]
        assert rig.reflection.explain(fact) is not None
        c = rig.cortex
        tx = c.transaction()
        c.provenance.tombstone(tx, np.array([0]))
        c.commit(tx)
        assert c.provenance.rows()["flags"][0] == PROV_TOMBSTONE
        assert rig.reflection.explain(fact) is None
        assert rig.reflection.session_provenance(4) == []


def test_working_memory_evicts_oldest_first():
    wm = WorkingMemory(capacity=3)
    evicted = []
    for i in range(5):
        evicted += wm.add(Thought(f"T{i}", f"thought {i}", i, 1.0, ()))
    assert evicted == ["T0", "T1"] and [t.id for t in wm.items()] == ["T2", "T3", "T4"]


def test_decay_law_power_buckets_floor_and_frozen_items():
    cfg = StrengthConfig()
    rows = np.zeros(4, dtype=STRENGTH_DTYPE)
    rows["retrieval_strength"] = 1.0
    rows["last_recall_ms"] = 0
    day = 86_400_000
    flags = np.array([FLAG_RESOLVED, FLAG_RESOLVED, FLAG_RESOLVED | FLAG_PINNED, 0], dtype=np.uint8)
    arousal = np.array([0, 255, 0, 0], dtype=np.uint8)
    d = decayed(rows, day, flags, arousal, cfg)
    expected = max(cfg.decay_floor, (1 + 86400 / cfg.decay_unit_s) ** -cfg.decay_exponent)
    assert np.isclose(d[0], expected)
    assert d[1] > d[0]  # arousal slows decay
    assert d[2] == 1.0 and d[3] == 1.0  # pinned and unresolved items do not decay
    far = decayed(rows, 10**13, flags, arousal, cfg)
    assert far[0] >= cfg.decay_floor - 1e-6
