"""Quarantine on its own: reporting, strict mode, placeholders for damaged entries, values."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu.cortex import Columns, Quarantine
from spector_gpu.cortex.layouts import (
    FLAG_TOMBSTONE,
    HEADER_DTYPE,
    INDEX_DTYPE,
    STRENGTH_DTYPE,
)
from spector_gpu.errors import CorruptionError
from spector_gpu.types import MemoryType


def _quarantine(*, strict: bool = False) -> tuple[Quarantine, dict[str, Any], list[Exception]]:
    recovery: dict[str, Any] = {}
    failed: list[Exception] = []
    q = Quarantine(
        Path("/store"),
        "/store/index.midx",
        strict=strict,
        max_storage=5.0,
        recovery=recovery,
        fail=failed.append,
    )
    return q, recovery, failed


def test_report_lists_damage_warns_and_fails_the_writer_only_when_structural(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q, recovery, failed = _quarantine()
    with caplog.at_level(logging.WARNING):
        q.report(CorruptionError("bad record"))
        q.report(CorruptionError("short region"), structural=True)
    assert recovery["corruption"] == ["bad record", "short region"]
    assert [str(e) for e in failed] == ["short region"]
    assert "bad record" in caplog.text


def test_strict_mode_raises_the_first_damage() -> None:
    q, recovery, failed = _quarantine(strict=True)
    with pytest.raises(CorruptionError, match="bad"):
        q.report(CorruptionError("bad"), structural=True)
    assert recovery == {} and failed == []


def test_repeated_ids_mark_the_later_entry_and_ids_already_loaded() -> None:
    ids = np.array([5, 6, 5, 7, 8], dtype=np.int64)
    bad = np.array([False, False, False, False, True])
    Quarantine.repeated_ids(ids, bad, {7: 0})
    assert bad.tolist() == [False, False, True, True, True]
    bad = np.zeros(2, dtype=bool)
    Quarantine.repeated_ids(np.array([1, 2]), bad, {})
    assert not bad.any()


def test_seal_off_turns_damaged_entries_into_placeholders_named_only_by_evidence() -> None:
    q, recovery, _ = _quarantine()
    entries = np.zeros(4, dtype=INDEX_DTYPE)
    entries["id"] = [10, 11, 12, 13]
    entries["type"] = int(MemoryType.EPISODIC)
    entries["record_offset"] = 64
    bad = np.array([False, True, True, True])
    owners = np.array([0, 11, 10, 0])  # 10 is taken by a good entry; the last row is damaged
    named = {10}
    unnamed = q.seal_off(entries, bad, owners, named, start=20)
    assert unnamed.tolist() == [False, False, True, True]
    assert entries["id"].tolist() == [10, 11, 0, 0]
    assert (entries["type"][1:] == int(MemoryType.WORKING)).all()
    assert entries["graph_slot"][1:].tolist() == [21, 22, 23]
    assert (entries["record_offset"][1:] == -1).all() and entries["record_offset"][0] == 64
    assert q.damaged_entries == q.quarantined == {21, 22, 23}
    assert "3 index entries are damaged" in recovery["corruption"][0]
    err = q.error(22, "ABC")
    assert err.region == "index" and err.slot == 22 and err.file == "/store/index.midx"
    with pytest.raises(CorruptionError, match="index entry 21"):
        q.check_entry(21)
    q.check_entry(20)  # a good entry


def test_contain_keeps_values_no_writer_produces_out_of_recall() -> None:
    q, recovery, _ = _quarantine()
    cols = Columns.empty()
    entries = np.zeros(4, dtype=INDEX_DTYPE)
    headers = np.zeros(4, dtype=HEADER_DTYPE)
    headers["importance"] = [1.0, np.nan, 20.0, 1.0]
    srows = np.zeros(4, dtype=STRENGTH_DTYPE)
    srows["retrieval_strength"] = [1.0, 1.0, 1.0, 1.5]
    srows["storage_strength"] = [1.0, 1.0, 1.0, 1.0]
    cols.extend(0, entries, headers, srows)
    q.contain(cols, np.arange(4))
    assert q.quarantined == {1, 2, 3} and 1 in q and 0 not in q
    flags = cols.headers["flags"]
    assert (flags[[1, 2, 3]] & FLAG_TOMBSTONE).all() and not flags[0] & FLAG_TOMBSTONE
    assert cols.headers["importance"].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert cols.d_event.tolist() == [1.0, 0.0, 0.0, 0.0] and (cols.storage == 1.0).all()
    q.contain(cols, np.arange(4))  # found again (a reader's refresh): reported once
    assert len(recovery["corruption"]) == 1
    assert "damaged header or strength" in str(q.error(2))
    q.clear()
    assert not q.quarantined and not q.damaged_entries
