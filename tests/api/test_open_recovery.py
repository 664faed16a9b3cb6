"""Opening a damaged store: point-in-time by default, refused under store.strict."""

from __future__ import annotations

import pytest

from spector_gpu import CorruptionError, SpectorMemory
from spector_gpu.testing import cortex_of


def _store(path):
    with SpectorMemory.open(path) as mem:
        ids = mem.remember_batch(
            [{"text": f"turn number {i} about apples", "session_id": 1} for i in range(20)]
        )
    return ids


def _flip(path, offset_from_end: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset_from_end] ^= 0x40
    path.write_bytes(bytes(data))


def _last_episode_offset(store) -> int:
    with SpectorMemory.open(store, read_only=True) as mem:
        c = cortex_of(mem)
        return int(c.cols.index["record_offset"][c.n - 1])


def test_damaged_last_episode_opens_and_is_reported(tmp_path):
    ids = _store(tmp_path)
    off = _last_episode_offset(tmp_path)
    _flip(tmp_path / "episodic.log", off + 100)  # inside the payload of the last record
    with SpectorMemory.open(tmp_path) as mem:
        assert mem.recovery.get("corruption"), "damage found at open must be reported"
        assert mem.get(ids[0]) is not None
        with pytest.raises(CorruptionError):
            mem.get(ids[-1])
        report = mem.check()
        assert not report.ok
        assert any(p.region == "episodic" for p in report.problems)
        # writes still work: the damage is one record, not the structure
        mem.remember("a new turn about pears", session_id=2)


def test_strict_refuses_to_open_a_damaged_store(tmp_path):
    _store(tmp_path)
    off = _last_episode_offset(tmp_path)
    _flip(tmp_path / "episodic.log", off + 100)
    with pytest.raises(CorruptionError):
        SpectorMemory.open(tmp_path, config={"store": {"strict": True}})


def test_damaged_index_entry_quarantines_its_memory_only(tmp_path):
    ids = _store(tmp_path)
    _flip(tmp_path / "index.midx", 64 + 48 * 19 + 24)  # graph_slot field of the last entry
    with SpectorMemory.open(tmp_path) as mem:
        assert mem.recovery.get("corruption")
        assert mem.count() == 20
        assert mem.get(ids[18]) is not None
        with pytest.raises(CorruptionError, match=ids[19]):
            mem.get(ids[19])
        assert ids[19] not in [h.id for h in mem.recall("turn number 19 apples")]
        # the damage is one entry, not the structure: writes go on
        new = mem.remember("a new turn about pears", session_id=2)
    with SpectorMemory.open(tmp_path, read_only=True) as mem:
        assert mem.get(new) is not None and mem.count() == 21


def test_damaged_event_log_opens_and_verify_chain_reports_it(tmp_path):
    _store(tmp_path)
    _flip(tmp_path / "events.log", 64 + 20)
    with SpectorMemory.open(tmp_path) as mem:
        assert mem.recovery.get("corruption")
        assert not mem.verify_chain().ok
