"""Concurrency: reader processes + one writer appending (with in-place strength updates).

Readers take no lock. Across ``refresh()`` calls they must never see a torn record (CRC), a
count that goes backwards, an in-place update that goes backwards, or an index entry whose
episode or strength row is not yet visible. Halfway through, the writer is SIGKILLed while
the readers run and a new writer recovers the store under them. A second writer is refused
with ``StoreLockedError``; a handle used in a forked child raises ``StoreClosedError`` and
the child does not pin the writer lock.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.errors import CorruptionError, StoreClosedError, StoreLockedError
from spector_gpu.storage.io import set_observer
from spector_gpu.storage.journal import coalesce
from spector_gpu.storage.partition import Partition
from spector_gpu.storage.preamble import PREAMBLE_SIZE, SHAPE_RECORD
from spector_gpu.storage.region import Region, RegionSpec

from .harness import (
    HookObserver,
    fork_process,
    pipe_ack,
    read_until_stopped,
    run_readers_under_writer,
)
from .verify import check_store
from .workload import (
    INDEX,
    LOG,
    STRENGTH,
    Model,
    Workload,
    base_seed,
    commit,
    episode,
    index_row,
    log_offset,
    open_store,
    record_figure,
    run_writer,
    scale,
    strength_row,
)

pytestmark = pytest.mark.crash

READERS = 4
SECONDS = 3.0  # CI; 60 s under --soak
W = Workload("concurrency", durability="flush", recall=True, batch=2, checkpoint_bytes=32768)


def _writer(directory: str, fd: int) -> None:
    run_writer(directory, W, pipe_ack(fd))


class ReaderCheck:
    """What one reader has seen so far, and the checks each refresh must pass."""

    def __init__(self, directory: str) -> None:
        self.p = open_store(directory, W, writable=False)
        self.counts = dict.fromkeys((LOG, STRENGTH, INDEX), 0)
        self.recalled = np.zeros(0, dtype=np.int64)
        self.reads = 0
        self.problems: list[str] = []

    def step(self) -> None:
        p = self.p
        p.refresh()
        counts = {name: p.region(name).count for name in self.counts}
        for name, n in counts.items():
            if n < self.counts[name]:
                self.problems.append(f"{name} count went back {self.counts[name]} -> {n}")
        n_mem = counts[INDEX]
        if n_mem and (counts[STRENGTH] < n_mem or log_offset(n_mem) - PREAMBLE_SIZE > counts[LOG]):
            self.problems.append(f"index shows {n_mem} memories before their records: {counts}")
        old = self.counts[INDEX]
        if n_mem > old:
            entries = p.region(INDEX).read_rows(np.arange(old, n_mem))
            for m, row in zip(range(old, n_mem), entries):
                if row.tobytes() != index_row(m):
                    self.problems.append(f"index entry {m} differs from what was written")
                raw = bytes(p.region(LOG).view(log_offset(m), len(episode(m, False))))
                if raw != episode(m, False):
                    self.problems.append(f"episode {m} is not the bytes that were committed")
        rows = p.region(STRENGTH).read_rows(np.arange(counts[STRENGTH]))
        recalled = rows[:, 4:8].copy().view("<i4").reshape(-1).astype(np.int64)
        k = min(len(self.recalled), len(recalled))
        if (recalled[:k] < self.recalled[:k]).any():
            self.problems.append("an in-place strength update went backwards")
        for m in np.flatnonzero(recalled[len(self.recalled) :] == 0)[:3] + len(self.recalled):
            if rows[m].tobytes() != strength_row(int(m), 0):
                self.problems.append(f"strength row {m} differs from what was written")
        self.recalled = recalled
        self.counts = counts
        self.reads += 1

    def report(self) -> dict[str, Any]:
        return {"reads": self.reads, "problems": self.problems, "memories": self.counts[INDEX]}


def _torn(exc: Exception) -> str | None:
    return f"torn or corrupt read: {exc}" if isinstance(exc, CorruptionError) else None


def _reader(directory: str, stop: Any, fd: int, index: int) -> None:
    read_until_stopped(ReaderCheck(directory), stop, fd, _torn)


def test_readers_never_see_torn_or_backward_state(tmp_path: Path, soak: int) -> None:
    seconds = SECONDS * scale(soak)  # 3 s in CI, 60 s under --soak (x20)
    p = open_store(tmp_path, W)
    for k in range(3):
        commit(p, W, k)
    p.close()
    acks, reports = run_readers_under_writer(
        tmp_path,
        readers=READERS,
        reader=_reader,
        writer=_writer,
        open_writer=lambda d: open_store(d, W),
        seconds=seconds,
    )
    p = open_store(tmp_path, W)
    acked = max(acks)
    try:
        j, problem = check_store(p, W, Model(W), acked=acked, started=acked + 1)
    finally:
        p.close()
    assert problem is None, problem
    reads = sum(r["reads"] for r in reports)
    problems = [q for r in reports for q in r["problems"]]
    record_figure(
        "concurrency",
        readers=READERS,
        seconds=seconds,
        reads=reads,
        commits=j,
        violations=len(problems),
        seed=base_seed(),
    )
    assert not problems, problems[:5]
    assert all(r["reads"] > 10 and r["memories"] > 0 for r in reports), reports


def _child_uses_parent_handle(p: Any, fd: int) -> None:
    outcome = []
    for op in (p.transaction, p.refresh, lambda: commit(p, W, 1)):
        try:
            op()
            outcome.append("no error")
        except StoreClosedError:
            outcome.append("StoreClosedError")
        except Exception as exc:
            outcome.append(type(exc).__name__)
    os.write(fd, ",".join(outcome).encode())
    time.sleep(1.5)  # stay alive (never closing) while the parent closes and reopens


def test_forked_child_cannot_use_the_handle_or_pin_the_lock(tmp_path: Path) -> None:
    p = open_store(tmp_path, W)
    commit(p, W, 0)
    r, w = os.pipe()
    child = fork_process(_child_uses_parent_handle, p, w, daemon=True)
    os.close(w)
    out = os.read(r, 1 << 16).decode()
    assert out == "StoreClosedError,StoreClosedError,StoreClosedError"
    with pytest.raises(StoreLockedError):  # the parent still holds the lock
        open_store(tmp_path, W)
    commit(p, W, 1)  # and can still write
    p.close()
    q = open_store(tmp_path, W)  # while the child is still alive: it must not pin the lock
    assert q.region(INDEX).count == 2 * W.batch
    q.close()
    assert child.is_alive()
    child.join(30)
    os.close(r)


# ---- replay: coalesced, never going backwards -------------------------------------------------
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(1, 3), st.integers(0, 300), st.binary(min_size=1, max_size=40)),
            max_size=6,
        ),
        max_size=8,
    )
)
@settings(max_examples=300, deadline=None)
def test_coalesced_replay_equals_applying_records_in_order(records) -> None:
    files: dict[int, bytearray] = {f: bytearray(400) for f in (1, 2, 3)}
    naive = {f: bytearray(b) for f, b in files.items()}
    for writes in records:
        for f, off, data in writes:
            naive[f][off : off + len(data)] = data
    out = coalesce(records, header_bytes=0)
    touched: dict[int, list[tuple[int, int]]] = {}
    for f, off, data in out:
        files[f][off : off + len(data)] = data
        spans = touched.setdefault(f, [])
        assert all(off + len(data) < a or b < off for a, b in spans)  # each byte written once
        spans.append((off, off + len(data)))
    assert files == naive


def test_recovery_never_shows_a_reader_an_older_value(tmp_path: Path) -> None:
    """A writer dies after applying commits whose journal records both rewrite the same rows;
    while the next writer replays them, every write it makes leaves the region files (as a
    reader sees them) at least as new as before: no count or row version goes back."""
    w = Workload("regress", durability="flush", recall=True, batch=1, checkpoint_bytes=1 << 20)
    p = open_store(tmp_path, w)
    for k in range(40):
        commit(p, w, k)
    assert p.regions[0].count == 0 and p._journal_end > 64  # everything is still in the journal
    assert p.lock_fd is not None
    os.close(p.lock_fd)  # the process "dies": lock gone, no checkpoint, nothing else written
    p.lock_fd, p._closed = None, True
    paths = {name: str(tmp_path / name) for name in (STRENGTH, INDEX)}

    def view() -> tuple[int, int, np.ndarray]:
        raw = {n: Path(path).read_bytes() for n, path in paths.items()}
        counts = [int.from_bytes(raw[n][24:32], "little") for n in (STRENGTH, INDEX)]
        rows = np.frombuffer(raw[STRENGTH][64 : 64 + counts[0] * 96], dtype=np.uint8).reshape(
            -1, 96
        )
        return counts[0], counts[1], rows[:, 4:8].copy().view("<i4").reshape(-1)

    seen = [view()]

    class Watch(HookObserver):
        def on_call(self, hook: str, path: str) -> None:
            if hook == "write":
                seen.append(view())

    set_observer(Watch())
    try:
        q = open_store(tmp_path, w)
    finally:
        set_observer(None)
    seen.append(view())
    assert q.replayed_records == 40
    q.close()
    for (s0, i0, r0), (s1, i1, r1) in itertools.pairwise(seen):
        assert s1 >= s0 and i1 >= i0
        assert (r1[: len(r0)] >= r0).all(), "an in-place update went back during replay"


def test_reader_rereads_a_row_caught_mid_rewrite_but_reports_real_damage(
    tmp_path: Path, monkeypatch
) -> None:
    spec = RegionSpec(1, "s.rec", SHAPE_RECORD, 4, "STRN", 96)
    p = Partition.open(tmp_path, [spec], writable=True)
    tx = p.transaction()
    rows = b"".join(strength_row(m, 0) for m in range(8))
    tx.append(p.region("s.rec"), rows)
    p.commit(tx)
    p.close()
    reader = Region.open(spec, str(tmp_path / "s.rec"), writable=False)
    real_rows = Region.rows
    copies = {"n": 0}

    def copy_during_rewrite(self: Region, start: int, stop: int) -> np.ndarray:
        block = real_rows(self, start, stop)
        copies["n"] += 1
        if copies["n"] == 1:  # the first copy catches row 5 half old, half new
            block = block.copy()
            block[5 - start, 40:] ^= 0x5A
        return block

    monkeypatch.setattr(Region, "rows", copy_during_rewrite)
    assert reader.read_rows(np.arange(8)).tobytes() == rows
    assert copies["n"] == 2
    fd = os.open(tmp_path / "s.rec", os.O_RDWR)
    os.pwrite(fd, b"\xff", 64 + 6 * 96 + 3)  # real damage: stays put, so it is reported
    os.close(fd)
    with pytest.raises(CorruptionError) as err:
        reader.read_rows(np.arange(8))
    assert err.value.slot == 6
    reader.close()
