"""Partition: journaled commits, recovery, locking, read-only readers."""

from __future__ import annotations

import os

import pytest

from spector_gpu.errors import ReadOnlyStoreError, StoreClosedError, StoreLockedError
from spector_gpu.storage.partition import Partition
from spector_gpu.storage.preamble import SHAPE_APPEND, SHAPE_RECORD
from spector_gpu.storage.region import RegionSpec

SPECS = [
    RegionSpec(1, "a.rec", SHAPE_RECORD, 4, "STRN", stride=16),
    RegionSpec(2, "b.log", SHAPE_APPEND, 1, "EPIL"),
]


def test_commit_is_visible_to_a_reader_and_survives_reopen(tmp_path):
    p = Partition.open(tmp_path, SPECS, writable=True)
    tx = p.transaction()
    assert tx.append(p.region("a.rec"), b"r" * 32) == 0
    off = tx.append(p.region("b.log"), b"hello")
    p.commit(tx)
    reader = Partition.open(tmp_path, SPECS, writable=False)
    assert reader.region("a.rec").count == 2
    assert bytes(reader.region("b.log").view(off, 5)) == b"hello"
    tx = p.transaction()
    tx.append(p.region("b.log"), b"world")
    p.commit(tx)
    reader.refresh()
    assert reader.region("b.log").count == 10
    with pytest.raises(ReadOnlyStoreError):
        reader.transaction()
    p.close()
    reader.close()
    again = Partition.open(tmp_path, SPECS, writable=True)
    assert again.region("b.log").count == 10
    again.close()


def test_second_writer_is_refused(tmp_path):
    p = Partition.open(tmp_path, SPECS, writable=True)
    with pytest.raises(StoreLockedError):
        Partition.open(tmp_path, SPECS, writable=True)
    p.close()
    Partition.open(tmp_path, SPECS, writable=True).close()


def test_closed_handle_raises(tmp_path):
    p = Partition.open(tmp_path, SPECS, writable=True)
    p.close()
    with pytest.raises(StoreClosedError):
        p.transaction()


def test_unapplied_journal_record_is_replayed(tmp_path):
    p = Partition.open(tmp_path, SPECS, writable=True)
    tx = p.transaction()
    tx.append(p.region("b.log"), b"durable")
    # Simulate a writer that died after the journal append but before applying: write the
    # journal record only, exactly as commit() does, then drop the handle.
    from spector_gpu.storage.journal import encode_record

    writes = list(tx.writes)
    region = p.region("b.log")
    writes.append((2, 0, region.preamble.with_count(7).pack()))
    rec = encode_record(p._next_seq, writes)
    p.regions[0].ensure_bytes(p._journal_end + len(rec))
    p.regions[0].file.pwrite(rec, p._journal_end)
    os.close(p.lock_fd)  # the process "died": its lock goes with it
    p.lock_fd = None
    p._closed = True
    q = Partition.open(tmp_path, SPECS, writable=True)
    assert q.replayed_records == 1
    assert q.region("b.log").count == 7
    assert bytes(q.region("b.log").view(64, 7)) == b"durable"
    q.close()
