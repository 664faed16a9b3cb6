"""How a delegate holds the handle's :class:`~spector_gpu.rwlock.RWLock` around a call.

A pure read holds it shared (:func:`reading`), so reads run beside each other; a write holds it
exclusive (``with lock:``). A read-only handle catches up with the writer process before it
reads: when the files moved (a commit or a compaction swap, seen by a probe that changes
nothing), it refreshes under the exclusive hold — a refresh remaps files and rebuilds what
other readers are reading — and then reads under the shared hold. Nothing refreshes under a
shared hold, so every read sees one state of the store from start to end.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..cortex.cortex import Cortex
from ..rwlock import RWLock

__all__ = ["catch_up", "exclusive", "reading"]


def catch_up(lock: RWLock, cortex: Cortex) -> None:
    """A read-only handle: pick up what the writer process committed since the last call.
    Skipped inside a shared hold the thread already has (its outer call caught up)."""
    if not cortex.read_only:
        return
    if lock.held_exclusive():
        cortex.part.check_usable()
        cortex.refresh()
        return
    if lock.held():
        return
    with lock.read():
        moved = cortex.stores.moved()
    if moved:
        with lock.write():
            cortex.part.check_usable()
            cortex.refresh()  # a second thread that queued for this finds little left to do


@contextmanager
def reading(lock: RWLock, cortex: Cortex) -> Iterator[None]:
    """The shared hold of a pure read (after :func:`catch_up`)."""
    catch_up(lock, cortex)
    with lock.read():
        yield


@contextmanager
def exclusive(lock: RWLock, cortex: Cortex) -> Iterator[None]:
    """The exclusive hold of a call that writes or keeps no snapshot apart (a read-only
    handle refreshes inside it)."""
    with lock.write():
        if cortex.read_only:
            cortex.part.check_usable()
            cortex.refresh()
        yield
