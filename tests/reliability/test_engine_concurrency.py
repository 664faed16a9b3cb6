"""Engine concurrency: 4 reader processes (``SpectorMemory.open(path, read_only=True)``) and one
writer for 60 s in CI (20 min under ``--soak``).

The writer remembers batches, recalls in learn mode and flushes (strength rows rewritten in
place), reinforces, and consolidates (episode headers and provenance records rewritten in
place). Readers repeatedly ``count()``, ``recall``, ``get`` ids they saw before and ``check()``.
Zero torn reads are allowed: no ``CorruptionError`` or other exception, every id once seen stays
visible with the same text, counts never go back, storage strength never goes down or out of
range, a consolidated turn never turns unconsolidated, ``check()`` finds nothing. Halfway
through, the writer is SIGKILLed while the readers run and the next writer recovers the store
under them; a second writer is refused.
"""

from __future__ import annotations

import math
import os
import random
import struct
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import MemoryType, RecallOptions, SpectorError
from spector_gpu.storage.tsid import decode_tsid, encode_tsid
from spector_gpu.testing import cortex_of

from .engine_workload import QUERIES, items, m_of_text, memory_problem, open_memory, prefill
from .harness import child_init, read_until_stopped, run_readers_under_writer
from .workload import base_seed, record_figure, scale

pytestmark = pytest.mark.crash

READERS = 4
SECONDS = 60.0  # the CI size: 4 readers + 1 writer for 60 s (x20 under --soak)
BATCH = 4
_LEARN = RecallOptions(k=4)


def _writer(directory: str, fd: int) -> None:
    child_init()
    mem = open_memory(directory)
    k = mem.count(MemoryType.EPISODIC) // BATCH
    while True:
        ids = mem.remember_batch(items(k, BATCH))
        os.write(fd, b"".join(struct.pack("<q", decode_tsid(i)) for i in ids))
        k += 1
        if k % 3 == 0:
            hits = mem.recall_batch([QUERIES[k % len(QUERIES)]], _LEARN).id_lists()[0]
            if hits and k % 6 == 0:
                mem.reinforce(hits[-1])
            mem.flush()
        if k % 5 == 0:
            mem.consolidate()


class ReaderCheck:
    """What one reader has seen, and the checks every step must pass."""

    def __init__(self, directory: str, seed: int) -> None:
        self.mem = open_memory(directory, read_only=True)
        self.rng = random.Random(seed)
        self.count = 0
        self.seen: dict[str, tuple[str, float, bool]] = {}  # id -> (text, S, consolidated)
        self.reads = 0
        self.problems: list[str] = []

    def observe(self, r: Any) -> None:
        old = self.seen.get(r.id)
        s = float(r.storage_strength)
        if not (math.isfinite(s) and 1.0 <= s <= 5.0) or not 0.0 <= r.retrieval_strength <= 1.0:
            self.problems.append(f"{r.id}: torn strength S={s} D={r.retrieval_strength}")
        if old is not None:
            text, s_old, cons_old = old
            if r.text != text:
                self.problems.append(f"{r.id}: text changed")
            if s < s_old:
                self.problems.append(f"{r.id}: storage strength went back {s_old} -> {s}")
            if cons_old and not r.consolidated:
                self.problems.append(f"{r.id}: consolidated flag went back")
        self.seen[r.id] = (r.text, s, bool(r.consolidated))

    def step(self) -> None:
        mem = self.mem
        n = mem.count()
        if n < self.count:
            self.problems.append(f"count went back {self.count} -> {n}")
        self.count = max(n, self.count)
        for r in mem.recall(QUERIES[self.reads % len(QUERIES)]):
            self.observe(r)
        for mid in self.rng.sample(sorted(self.seen), min(8, len(self.seen))):
            got = mem.get(mid)
            if got is None:
                self.problems.append(f"{mid}: seen before, now missing")
            else:
                self.observe(got)
        if self.reads % 5 == 0:  # a reader's check() must not mistake a rewrite for damage
            report = mem.check()
            if not report.ok:
                self.problems.append(str(report))
        self.reads += 1

    def report(self) -> dict[str, Any]:
        return {
            "reads": self.reads,
            "problems": self.problems,
            "count": self.count,
            "seen": len(self.seen),
        }


def _failed(exc: Exception) -> str:
    if isinstance(exc, SpectorError):
        return f"torn or failed read: {type(exc).__name__}: {exc}"
    return traceback.format_exc(limit=4)


def _reader(directory: str, stop: Any, fd: int, index: int) -> None:
    child_init()
    read_until_stopped(ReaderCheck(directory, base_seed() + index), stop, fd, _failed)


def test_engine_readers_never_see_torn_or_backward_state(workdir: Path, soak: int) -> None:
    seconds = SECONDS * scale(soak)
    store = workdir / "store"
    prefill(store, range(8 * BATCH), batch=BATCH)
    acks, reports = run_readers_under_writer(
        store,
        readers=READERS,
        reader=_reader,
        writer=_writer,
        open_writer=open_memory,
        seconds=seconds,
        settle_s=0.2,  # let the readers see the recovered store
    )
    with open_memory(store) as mem:
        report = mem.check()
        assert report.ok, str(report)
        lost = []
        for mid in map(encode_tsid, acks):
            hit = mem.get(mid)
            why = (
                memory_problem(mem, mid, m_of_text(hit.text)) if hit is not None else f"{mid} lost"
            )
            if why:
                lost.append(why)
        assert not lost, lost[:3]
        total = mem.count()
    reads = sum(r["reads"] for r in reports)
    problems = [q for r in reports for q in r["problems"]]
    record_figure(
        "engine_concurrency",
        readers=READERS,
        seconds=seconds,
        reads=reads,
        memories=total,
        acked=len(acks),
        violations=len(problems),
        seed=base_seed(),
    )
    print(
        f"{READERS} readers + 1 writer (killed and recovered) for {seconds:.0f} s: {reads} reader "
        f"steps, {len(acks)} acknowledged memories ({total} with facts), {len(problems)} violations"
    )
    assert not problems, problems[:5]
    assert all(r["reads"] > 3 and r["seen"] > 0 for r in reports), reports


# ---- a reader's copy caught mid-rewrite (deterministic) -------------------------------------
class TornOnce:
    """Make the next copy a reader takes of ``filename`` look caught mid-rewrite: the second
    half of one row (or of an episode's header) differs from what is on disk, once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, filename: str, *, at: int = 0) -> None:
        from spector_gpu.storage.region import Region

        self.armed, self.hits, self.filename, self.at = False, 0, filename, at
        real_rows, real_view = Region.rows, Region.view
        torn = self

        def rows(region: Region, start: int, stop: int) -> Any:
            block = real_rows(region, start, stop)
            if torn.armed and region.spec.filename == filename and start <= torn.at < stop:
                torn.armed, torn.hits = False, torn.hits + 1
                block = block.copy()
                block[torn.at - start, 4:-4] ^= 0x5A  # fields mixed, CRC stale
            return block

        def view(region: Region, offset: int, length: int) -> Any:
            data = real_view(region, offset, length)
            if (  # a view of the record's prefix and header: one record's, or many records'
                torn.armed
                and region.spec.filename == filename
                and offset <= torn.at
                and offset + length >= torn.at + 96
            ):
                torn.armed, torn.hits = False, torn.hits + 1
                raw = bytearray(data)
                raw[torn.at - offset + 32 + 4] ^= 0x08  # the consolidated bit, CRC stale
                return memoryview(bytes(raw))
            return data

        monkeypatch.setattr(Region, "rows", rows)
        monkeypatch.setattr(Region, "view", view)


def _busy_store(store: Path) -> tuple[list[str], str]:
    """Turns recalled, reinforced and consolidated (rows rewritten in place); a fact id."""
    prefill(store, range(12), batch=BATCH)
    with open_memory(store) as w:
        w.recall("Lisbon cello")
        ids = [r.id for r in w.recall("Marco Sunday")]
        w.reinforce(ids[0])
        fact = w.consolidate().fact_ids[0]
        w.flush()
    return ids, fact


@pytest.mark.parametrize("region", ["strength.rec", "provenance.rec", "episodic.log"])
def test_reader_rereads_a_copy_caught_mid_rewrite(
    region: str, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that copies a row while the writer rewrites it in place sees a CRC mismatch
    that is not damage: it must re-read (never raise, never adopt the torn values)."""
    store = workdir / "store"
    ids, fact = _busy_store(store)
    with open_memory(store, read_only=True) as mem:
        c = cortex_of(mem)
        o = c.id_map[decode_tsid(ids[0])]
        at = {
            "strength.rec": o,
            "provenance.rec": 0,
            "episodic.log": int(c.cols.index["record_offset"][o]),
        }[region]

        def summary() -> Any:
            r = mem.get(ids[0])
            return None if r is None else (r.text, r.storage_strength, r.consolidated, r.valence)

        ops: dict[str, Callable[[], Any]] = {
            "get": summary,
            "recall": lambda: mem.recall_batch(
                ["Marco Sunday"], RecallOptions(k=4, mode="observe")
            ).id_lists(),
            "explain": lambda: mem.explain(fact),
            "session_provenance": lambda: mem.session_provenance(0),
            "check": lambda: str(mem.check()),
            "count": mem.count,
        }
        torn = TornOnce(monkeypatch, region, at=at)
        for name, op in ops.items():
            want = op()
            torn.armed = True
            got = op()
            torn.armed = False
            assert got == want, f"{name} after a torn copy of {region}"
        # strength rows are re-read only when a commit moved the store (and by check()): with
        # no writer here, one read meets the torn copy; the others are read by several ops
        least = 1 if region == "strength.rec" else 2
        assert torn.hits >= least, f"only {torn.hits} reads met the torn copy"
