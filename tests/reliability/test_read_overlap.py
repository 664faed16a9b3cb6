"""Reads of one handle run at the same time; a write waits for every read in progress and then
runs alone (issue 39: "reads run concurrently with each other").

Each ordering is forced: a read is held inside a patched hook (it holds the handle's lock
shared there), other reads must complete meanwhile — a barrier passable only with both held
reads inside proves the overlap —, and a write must queue behind them (seen in the lock's own
state, never by timing)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spector_gpu import RecallOptions, SpectorMemory
from spector_gpu.memory import engine_of

WAIT = 30.0  # seconds an expected event may take on a loaded machine
OBSERVE = RecallOptions(k=5, mode="observe")


def _text(k: int) -> str:
    return f"note {k} on topic{k % 5} with word{k}"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[SpectorMemory]:
    cfg = {"store": {"durability": "none"}}
    with SpectorMemory.open(tmp_path / "s", config=cfg, embedder="hashing") as m:
        m.remember_batch([_text(k) for k in range(30)])
        yield m


class Gate:
    """Holds every call of a patched function inside until :meth:`open` (each arrival is
    counted first), and passes through once open."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.inside = threading.Semaphore(0)
        self.release = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.release.is_set():
            self.inside.release()
            assert self.release.wait(WAIT)
        return self.fn(*args, **kwargs)

    def wait_inside(self, n: int) -> None:
        for _ in range(n):
            assert self.inside.acquire(timeout=WAIT), "a held read never arrived"


def _start(fn: Callable[[], Any], out: list[Any]) -> threading.Thread:
    def body() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def _until(cond: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(int(WAIT * 1000)):
        if cond():
            return
        done.wait(0.001)
    raise AssertionError("condition never held")


def test_two_reads_hold_at_once_and_a_write_waits_for_both(
    mem: SpectorMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_of(mem)
    listing = engine.lifecycle.listing
    gate = Gate(listing.list)
    monkeypatch.setattr(listing, "list", gate)
    held: list[Any] = []
    readers = [_start(lambda: mem.list(limit=50), held) for _ in range(2)]
    gate.wait_inside(2)  # both lists are inside their shared hold at once
    assert len(engine.lock._readers) == 2

    # a third and fourth read complete while both are held
    some = mem.recall("topic3 word8", OBSERVE)
    assert some and all(r.text == _text(int(r.text.split()[1])) for r in some)
    got = mem.get(some[0].id)
    assert got is not None and got.text == some[0].text
    assert mem.count() == 30

    written: list[Any] = []
    writer = _start(lambda: mem.remember("a note written while two reads are held"), written)
    _until(lambda: engine.lock._waiting_writers == 1)  # queued behind the two reads
    assert written == [] and len(engine.lock._readers) == 2
    gate.release.set()
    for t in (*readers, writer):
        t.join(WAIT)
    assert [len(r) for r in held] == [30, 30]  # the reads saw the store before the write
    assert len(written) == 1 and isinstance(written[0], str)
    assert mem.get(written[0]) is not None and mem.count() == 31


def test_a_learning_recall_scores_beside_reads_and_strengthens_after_them(
    mem: SpectorMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``learn`` recall scores under the shared hold, beside a held read, then waits for
    the exclusive hold to apply onRecall (it rewrites strength rows): the held read's
    result is from before, the strengthening lands after."""
    engine = engine_of(mem)
    observed = {r.id for r in mem.recall("topic1", OBSERVE)}  # the same hits, unstrengthened
    everyone = np.arange(engine.cortex.n)
    recalls = engine.strength.rows(everyone)["passive_recall_count"].copy()
    gate = Gate(engine.recall.reader.hydrated)
    monkeypatch.setattr(engine.recall.reader, "hydrated", gate)
    target = mem.list(limit=1)[0]
    strengthen = engine.recall.pathway.learn
    owed: list[Any] = []

    def learn(o: Any) -> None:
        owed.append(o)
        strengthen(o)

    monkeypatch.setattr(engine.recall.pathway, "learn", learn)
    held: list[Any] = []
    reader = _start(lambda: mem.get(target.id), held)
    gate.wait_inside(1)
    assert mem.recall("topic1", OBSERVE)  # observe: beside the held read
    learned: list[Any] = []
    learner = _start(lambda: mem.recall("topic1", RecallOptions(k=5)), learned)
    _until(lambda: engine.lock._waiting_writers == 1)  # scored; onRecall waits
    assert learned == [] and owed == []
    gate.release.set()
    reader.join(WAIT)
    learner.join(WAIT)
    assert held[0] is not None and held[0].text == target.text
    assert len(learned) == 1 and isinstance(learned[0], list) and learned[0]
    assert len(owed) == 1 and {r.id for r in learned[0]} == observed
    after = engine.strength.rows(everyone)["passive_recall_count"]
    hit = np.zeros(len(everyone), bool)
    hit[owed[0].ordinals] = True
    assert len(owed[0].ordinals) == len(observed)
    assert (after[hit] == recalls[hit] + 1).all() and (after[~hit] == recalls[~hit]).all()


def test_a_batch_hydrates_beside_a_held_read(
    mem: SpectorMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``RecallBatch`` hydrated later takes the shared hold, not the exclusive one."""
    engine = engine_of(mem)
    batch = mem.recall_batch(["topic2", "word7"], OBSERVE)
    listing = engine.lifecycle.listing
    gate = Gate(listing.count)
    monkeypatch.setattr(listing, "count", gate)
    counted: list[Any] = []
    reader = _start(lambda: mem.count(where={"k": "v"}), counted)
    gate.wait_inside(1)
    hits = [r for i in range(len(batch)) for r in batch.results(i)]
    assert hits and all(r.text == _text(int(r.text.split()[1])) for r in hits)
    gate.release.set()
    reader.join(WAIT)
    assert counted == [0]
