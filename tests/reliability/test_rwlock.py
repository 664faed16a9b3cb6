"""The handle's reader/writer lock (spector_gpu/rwlock.py): exclusion, shared holds that really
overlap, writer preference, reentrancy, no upgrade, and holds released by exceptions.

Every ordering is forced with events and barriers; nothing is timed. A wait that must not
finish is checked with a short ``Event.wait`` timeout that is expected to expire (the thread
is provably blocked in the lock, which the state checks below confirm)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from spector_gpu import LockUpgradeError, SpectorError
from spector_gpu.rwlock import RWLock

WAIT = 10.0  # seconds an expected event may take (generous: a loaded CI machine)
BLOCKED = 0.2  # seconds a blocked thread is given to (wrongly) get through


def start(fn: Callable[[], None]) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_readers_hold_at_once() -> None:
    lock = RWLock()
    inside = threading.Barrier(3, timeout=WAIT)  # only passable with all three inside

    def reader() -> None:
        with lock.read():
            inside.wait()

    threads = [start(reader) for _ in range(2)]
    with lock.read():
        inside.wait()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()


def test_writer_excludes_readers_and_writers() -> None:
    lock = RWLock()
    entered, got = threading.Event(), []

    def other(hold: str) -> None:
        with lock.read() if hold == "read" else lock.write():
            got.append(hold)
        entered.set()

    with lock.write():
        threads = [start(lambda h=h: other(h)) for h in ("read", "write")]
        assert not entered.wait(BLOCKED)
        assert got == []
    for t in threads:
        t.join(WAIT)
    assert sorted(got) == ["read", "write"]


def test_reader_excludes_writer() -> None:
    lock = RWLock()
    wrote = threading.Event()

    def writer() -> None:
        with lock:  # plain ``with`` is the exclusive hold
            wrote.set()

    with lock.read():
        t = start(writer)
        assert not wrote.wait(BLOCKED)
    t.join(WAIT)
    assert wrote.is_set()


def test_waiting_writer_blocks_new_readers() -> None:
    lock = RWLock()
    order: list[str] = []
    first_in, release_first = threading.Event(), threading.Event()

    def first_reader() -> None:
        with lock.read():
            first_in.set()
            release_first.wait(WAIT)

    def writer() -> None:
        with lock.write():
            order.append("writer")

    def late_reader() -> None:
        with lock.read():
            order.append("late reader")

    r1 = start(first_reader)
    assert first_in.wait(WAIT)
    w = start(writer)
    while not lock._waiting_writers:  # the writer is queued behind the first reader
        threading.Event().wait(0.001)
    r2 = start(late_reader)
    assert not threading.Event().wait(BLOCKED) and order == []  # both wait
    release_first.set()
    for t in (r1, w, r2):
        t.join(WAIT)
    assert order == ["writer", "late reader"]


def test_reentrant_writer_and_read_inside_write() -> None:
    lock = RWLock()
    with lock.write():
        with lock.write(), lock.read(), lock.read():
            assert lock.held_exclusive()
        assert lock.held_exclusive()
    assert not lock.held()
    done = threading.Event()
    t = start(lambda: (lock.acquire_write(), lock.release_write(), done.set()))
    t.join(WAIT)
    assert done.is_set()  # fully released


def test_reader_reenters_past_a_waiting_writer() -> None:
    lock = RWLock()
    inner = threading.Event()
    outer_in = threading.Event()

    def reader() -> None:
        with lock.read():
            outer_in.set()
            while not lock._waiting_writers:
                threading.Event().wait(0.001)
            with lock.read():  # would deadlock if a waiting writer blocked it
                inner.set()

    r = start(reader)
    assert outer_in.wait(WAIT)
    w = start(lambda: lock.acquire_write() or lock.release_write())
    assert inner.wait(WAIT)
    r.join(WAIT)
    w.join(WAIT)
    assert not lock.held() and lock._writer is None


def test_upgrade_is_refused_at_once() -> None:
    lock = RWLock()
    with lock.read():
        with pytest.raises(LockUpgradeError, match="finish the read first") as err:
            lock.acquire_write()
        assert isinstance(err.value, SpectorError) and isinstance(err.value, RuntimeError)
    with lock.write():  # nothing was left held by the refusal
        pass


@pytest.mark.parametrize("hold", ["read", "write"])
def test_exception_releases_the_hold(hold: str) -> None:
    lock = RWLock()
    held = lock.read() if hold == "read" else lock.write()
    with pytest.raises(ValueError, match="boom"), held:
        raise ValueError("boom")
    assert not lock.held()
    done = threading.Event()
    t = start(lambda: (lock.acquire_write(), lock.release_write(), done.set()))
    t.join(WAIT)
    assert done.is_set()


def test_release_without_hold_is_an_error() -> None:
    lock = RWLock()
    with pytest.raises(RuntimeError):
        lock.release_read()
    with pytest.raises(RuntimeError):
        lock.release_write()


def test_many_threads_mutual_exclusion() -> None:
    """Writers see no reader and no other writer inside; readers see no writer."""
    lock = RWLock()
    state = {"readers": 0, "writers": 0}
    guard = threading.Lock()
    bad: list[str] = []
    go = threading.Barrier(8, timeout=WAIT)

    def reader() -> None:
        go.wait()
        for _ in range(300):
            with lock.read():
                with guard:
                    state["readers"] += 1
                    if state["writers"]:
                        bad.append("reader beside a writer")
                with guard:
                    state["readers"] -= 1

    def writer() -> None:
        go.wait()
        for _ in range(100):
            with lock.write():
                with guard:
                    state["writers"] += 1
                    if state["writers"] > 1 or state["readers"]:
                        bad.append("writer not alone")
                with guard:
                    state["writers"] -= 1

    threads = [start(reader) for _ in range(6)] + [start(writer) for _ in range(2)]
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    assert bad == []


def test_readers_waiting_through_a_write_go_before_the_next_writer() -> None:
    """Phase fairness: a stream of writers never starves a reader."""
    lock = RWLock()
    order: list[str] = []
    first_in, release_first = threading.Event(), threading.Event()

    def first_writer() -> None:
        with lock.write():
            first_in.set()
            release_first.wait(WAIT)
            order.append("writer 1")

    def second_writer() -> None:
        with lock.write():
            order.append("writer 2")

    def reader() -> None:
        with lock.read():
            order.append("reader")

    w1 = start(first_writer)
    assert first_in.wait(WAIT)
    w2 = start(second_writer)
    while not lock._waiting_writers:
        threading.Event().wait(0.001)
    r = start(reader)
    while not lock._waiting_readers:
        threading.Event().wait(0.001)
    release_first.set()
    for t in (w1, w2, r):
        t.join(WAIT)
    assert order == ["writer 1", "reader", "writer 2"]
