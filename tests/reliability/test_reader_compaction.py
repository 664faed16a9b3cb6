"""Read-only handles in other processes while the writer compacts in a loop (issue 39, point 2).

One writer process remembers, deletes and compacts, round after round; reader processes keep a
read-only handle open across every swap — two threads each, reading through it at once — and
open fresh ones in between. A reader, whatever it
was doing when a swap happened, serves the old store whole or the new one whole: the memories
nobody deletes are always there with their text (``get``, ``count``, ``check``), every text a
read returns is the one its id was written with (checked against the writer's
acknowledgements), and a fresh open never reports a healthy store as damaged.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
from pathlib import Path
from typing import Any

import pytest

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.errors import StoreError
from spector_gpu.storage import directory, swap
from spector_gpu.storage.preamble import SHAPE_RECORD, RegionId
from spector_gpu.storage.region import Region, RegionSpec
from spector_gpu.storage.tsid import decode_tsid, encode_tsid
from spector_gpu.testing import cortex_of

from .harness import child_init, fork_process, read_to_end, run_child
from .workload import base_seed, record_figure, scale

pytestmark = pytest.mark.crash

CFG = {"store": {"durability": "flush", "compact_dead_share": 1.0, "snapshot_every": 16}}
STABLE = 120  # memories nobody deletes
ROUNDS = 24  # the writer's compactions in CI (x the --soak multiplier)
READERS = 3
THREADS = 2  # threads per reader process sharing its read-only handle (reads run at once)
_OBSERVE = RecallOptions(k=6, mode="observe")


def _text(k: int) -> str:
    return f"entry {k} about topic{k % 7} with word{k} and mark{k % 11}"


def _k_of(text: str) -> int:
    return int(text.split()[1])


def _writer(directory: str, rounds: int, fd: int, seed: int) -> None:
    """Remember six, delete four, compact; acknowledge each memory as (TSID, k) int64 pairs."""
    child_init()
    rng = random.Random(seed)
    with SpectorMemory.open(directory, config=CFG, embedder="hashing") as mem:
        live = [r.id for r in mem.list(limit=1000) if _k_of(r.text) >= STABLE]
        k = 10_000
        for _ in range(rounds):
            ids = mem.remember_batch([_text(k + j) for j in range(6)])
            os.write(fd, b"".join(struct.pack("<q", decode_tsid(i)) for i in ids))
            live += ids
            k += 6
            doomed = rng.sample(live, 4)
            mem.delete_batch(doomed)
            live = [i for i in live if i not in doomed]
            mem.compact()
    os.close(fd)


class _Reader:
    """One reader process's checks (see the module docstring)."""

    def __init__(self, directory: str, stable: dict[str, str], seed: int) -> None:
        self.directory = directory
        self.mem = SpectorMemory.open(directory, read_only=True, embedder="hashing")
        self.stable = list(stable.items())
        self.rng = random.Random(seed)
        self.seen: dict[str, str] = {}
        self.problems: list[str] = []
        self.steps = self.fresh = self.checks = 0

    def _saw(self, results: list[Any], where: str) -> None:
        for r in results:
            earlier = self.seen.setdefault(r.id, r.text)
            if earlier != r.text:
                self.problems.append(f"{where}: {r.id} read {r.text!r}, earlier {earlier!r}")

    def _whole(self, mem: SpectorMemory, where: str) -> None:
        i, text = self.rng.choice(self.stable)
        got = mem.get(i)
        if got is None or got.text != text:
            self.problems.append(f"{where}: get({i}) -> {None if got is None else got.text!r}")
        n = mem.count()
        if n < len(self.stable):
            self.problems.append(f"{where}: count {n} < {len(self.stable)}")
        if mem.recovery.get("corruption"):
            self.problems.append(f"{where}: reports damage {mem.recovery['corruption']}")

    def step(self) -> None:
        self.steps += 1
        self._whole(self.mem, "held handle")
        q = f"topic{self.rng.randrange(7)} mark{self.rng.randrange(11)}"
        hits = self.mem.recall(q, _OBSERVE)
        if not hits:
            self.problems.append(f"held handle: recall {q!r} found nothing")
        self._saw(hits, "recall")
        self._saw(self.mem.list(offset=self.rng.randrange(100), limit=30), "list")
        if self.steps % 3 == 0:
            self.fresh += 1
            with SpectorMemory.open(self.directory, read_only=True, embedder="hashing") as m:
                self._whole(m, "fresh open")
                self._saw(m.recall(q, _OBSERVE), "fresh recall")
        if self.steps % 7 == 0:
            self.checks += 1
            report = self.mem.check()
            if not report.ok:
                self.problems.append(f"check: {report}")

    def report(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "fresh": self.fresh,
            "checks": self.checks,
            "followed": cortex_of(self.mem).epoch,  # swaps this handle moved across
            "problems": self.problems[:10],
            "seen": self.seen,
        }


def _steps(check: _Reader, stop: Any) -> None:
    while not stop.is_set() and len(check.problems) < 10:
        try:
            check.step()
        except Exception as exc:  # every exception is a finding
            check.problems.append(f"{type(exc).__name__}: {exc}")


def _merged(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One process's report from its threads' (their handle is one: a second open in a
    process shares it); two threads reading one id with different texts is a problem too."""
    seen: dict[str, str] = {}
    problems = [p for r in reports for p in r["problems"]]
    for r in reports:
        for i, text in r["seen"].items():
            if seen.setdefault(i, text) != text:
                problems.append(f"threads: {i} read {text!r} and {seen[i]!r}")
    out = {k: sum(r[k] for r in reports) for k in ("steps", "fresh", "checks")}
    followed = max(r["followed"] for r in reports)
    return {**out, "followed": followed, "problems": problems[:10], "seen": seen}


def _reader(directory: str, stable: dict[str, str], stop: Any, fd: int, seed: int) -> None:
    import threading

    child_init()
    try:
        checks = [_Reader(directory, stable, seed + 1000 * t) for t in range(THREADS)]
        threads = [threading.Thread(target=_steps, args=(c, stop)) for c in checks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        report = _merged([c.report() for c in checks])
    except Exception as exc:  # the open itself, or the report
        report = {"steps": 0, "problems": [f"reader: {type(exc).__name__}: {exc}"], "seen": {}}
    os.write(fd, json.dumps(report).encode())
    os.close(fd)


def test_readers_in_other_processes_follow_a_writer_compacting_in_a_loop(
    workdir: Path, soak: int
) -> None:
    import multiprocessing

    store, rounds, seed = workdir / "s", ROUNDS * scale(soak), base_seed()
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as mem:
        texts = [_text(k) for k in range(STABLE + 60)]
        ids = mem.remember_batch(texts)
    written = dict(zip(ids, texts))
    stable = dict(list(written.items())[:STABLE])
    stop = multiprocessing.get_context("fork").Event()
    pipes, procs = [], []
    for r in range(READERS):
        rd, wr = os.pipe()
        procs.append(fork_process(_reader, str(store), stable, stop, wr, seed + r, daemon=True))
        os.close(wr)
        pipes.append(rd)
    rd, wr = os.pipe()
    writer = fork_process(_writer, str(store), rounds, wr, seed, daemon=True)
    os.close(wr)
    raw = read_to_end(rd)  # until the writer closes its end: every round done
    writer.join(60)
    acks = list(struct.unpack(f"<{len(raw) // 8}q", raw))
    stop.set()
    reports = []
    for proc, p in zip(procs, pipes):
        reports.append(json.loads(read_to_end(p)))
        proc.join(60)
    assert writer.exitcode == 0
    for k, tsid in enumerate(acks):
        written[encode_tsid(tsid)] = _text(10_000 + k)
    wrong = [
        f"{i}: {t!r}" for rep in reports for i, t in rep["seen"].items() if written.get(i) != t
    ]
    problems = [p for rep in reports for p in rep["problems"]]
    record_figure(
        "reader_compaction",
        readers=READERS,
        threads=THREADS,
        compactions=rounds,
        steps=sum(r["steps"] for r in reports),
        fresh_opens=sum(r.get("fresh", 0) for r in reports),
        checks=sum(r.get("checks", 0) for r in reports),
        followed=sum(r.get("followed", 0) for r in reports),
        texts=sum(len(r["seen"]) for r in reports),
        wrong=len(wrong),
        problems=len(problems),
        seed=seed,
    )
    assert problems == []
    assert wrong == []
    assert all(r["steps"] > 0 for r in reports)
    with SpectorMemory.open(store, read_only=True, embedder="hashing") as ro:
        assert ro.count() == STABLE + 60 + 2 * rounds
        assert ro.check().ok


def _committed_swap(store: Path) -> dict[str, str]:
    """A store whose compaction is committed (marker written) and not installed: the writer
    was killed at ``compact.after_marker``. Returns ``{live id: text}``."""
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as mem:
        ids = mem.remember_batch([_text(k) for k in range(40)])
        mem.delete_batch(ids[::4])
    code = run_child(_compact, str(store), armed="compact.after_marker")
    assert code == -signal.SIGKILL
    assert (store / ".compact" / "COMMIT").exists()
    return {i: _text(k) for k, i in enumerate(ids) if k % 4}


def _compact(store: str) -> None:
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as mem:
        mem.compact()


def _finish_swap(store: Path) -> None:
    """What a writer's open does first: install the staged files, remove ``.compact/``."""
    swap.recover(store, os.listdir(store / ".compact"))


def test_a_fresh_open_that_looked_in_staging_just_before_the_install_retries(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader computed its paths in ``.compact/`` while the marker was there; the writer
    installed every file before the reader opened them: each is missing where it looked. It
    must open again (the issue's count 0, get None, "region file is missing"), not stand in
    empty placeholders for a healthy store."""
    store = workdir / "s"
    live = _committed_swap(store)
    real = directory.open_regions
    calls = []

    def install_first(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            _finish_swap(store)
        return real(*args, **kwargs)

    monkeypatch.setattr(directory, "open_regions", install_first)
    with SpectorMemory.open(store, read_only=True, embedder="hashing") as ro:
        assert len(calls) >= 2  # the first look was retried
        assert not ro.recovery.get("corruption")
        assert ro.count() == len(live)
        assert all(ro.get(i).text == t for i, t in live.items())  # type: ignore[union-attr]
        assert ro.check().ok


def test_a_held_reader_that_cannot_open_the_new_files_yet_serves_the_old_store_whole(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A swap seen by an open reader whose reopen fails (here: the files still moving past
    its patience) keeps the generation it holds, whole, and moves at a later call."""
    store = workdir / "s"
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as mem:
        ids = mem.remember_batch([_text(k) for k in range(30)])
    # the reader first: a read-only open in a process that holds the writer shares the writer
    with SpectorMemory.open(store, read_only=True, embedder="hashing") as ro:
        assert ro.read_only and ro.count() == 30
        with SpectorMemory.open(store, config=CFG, embedder="hashing") as mem:
            mem.delete_batch(ids[:10])
            mem.compact()
        real = swap.open_current
        failing = [True]

        def still_moving(open_once: Any, where: Path, **kw: Any) -> Any:
            if failing[0]:
                raise StoreError(f"{where}: the store's files kept changing")
            return real(open_once, where, **kw)

        monkeypatch.setattr(swap, "open_current", still_moving)
        assert ro.count() == 30  # the old store, whole
        assert ro.get(ids[0]).text == _text(0)  # type: ignore[union-attr]
        assert ro.check().ok
        failing[0] = False
        assert ro.count() == 20  # the new one, whole
        assert ro.get(ids[0]) is None
        assert ro.get(ids[10]).text == _text(10)  # type: ignore[union-attr]
        assert ro.check().ok


def test_a_reader_open_gives_up_with_a_named_error_while_files_keep_moving(
    tmp_path: Path,
) -> None:
    """``open_current`` never hands back a mix: past its patience it raises ``StoreError``
    saying to open again."""
    (tmp_path / "index.midx").write_bytes(b"here")
    spec = RegionSpec(4, "index.midx", SHAPE_RECORD, RegionId.INDEX, "MIDX", 48)
    stand_in = Region.placeholder_for(spec, str(tmp_path / "index.midx"), store_id=1)
    closed = []

    class Opened:
        def __init__(self) -> None:
            self.regions = {4: stand_in}

        def close(self) -> None:
            closed.append(1)

    with pytest.raises(StoreError, match=r"kept changing.*open it again"):
        swap.open_current(Opened, tmp_path, patience_s=0.05)
    assert closed  # every attempt's files were closed


def test_a_reader_that_found_the_index_missing_follows_once_it_is_back(workdir: Path) -> None:
    """A stand-in for a missing index (reported damage, nothing served) is not where a reader
    stays: once a file is under the name again, the next call opens the store anew."""
    store = workdir / "s"
    with SpectorMemory.open(store, config=CFG, embedder="hashing") as mem:
        ids = mem.remember_batch([_text(k) for k in range(12)])
    (store / "index.midx").rename(workdir / "index.away")
    with SpectorMemory.open(store, read_only=True, embedder="hashing") as ro:
        assert ro.recovery.get("corruption") and ro.count() == 0
        (workdir / "index.away").rename(store / "index.midx")
        assert ro.count() == 12
        assert ro.get(ids[3]).text == _text(3)  # type: ignore[union-attr]
        assert not ro.recovery.get("corruption")
        assert ro.check().ok
