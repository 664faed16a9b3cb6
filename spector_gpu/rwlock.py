"""A reader/writer lock with writer preference: the lock of one store handle.

Pure reads hold it shared (any number at once); anything that writes holds it exclusive.
Rules, all enforced here:

* **Writer preference, phase-fair.** A thread waiting for the exclusive hold blocks new
  shared holders, so a stream of reads never starves a write; and the readers that were
  waiting when a write ends go in before the next writer, so a stream of writes never starves
  a read. A thread that already holds the lock shared may take it shared again (it would
  otherwise wait for a writer that waits for it).
* **Reentrant.** The exclusive holder may take the lock again, exclusive or shared (a write
  that reads, or emits an event whose handler reads, keeps its exclusive hold throughout).
* **No upgrade.** A thread holding the lock only shared that asks for the exclusive hold gets
  :class:`~spector_gpu.errors.LockUpgradeError` at once: two readers each waiting for the other
  to leave would deadlock. The engine never does this (a read that must write — a read-only
  handle catching up with the writer process — takes the exclusive hold before its shared one).

``with lock:`` is the exclusive hold, so code written for a plain re-entrant lock keeps its
meaning; :meth:`RWLock.read` and :meth:`RWLock.write` name the hold.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from .errors import LockUpgradeError

__all__ = ["RWLock"]


class _Hold:
    """One kind of hold as a reusable context manager."""

    __slots__ = ("_enter", "_exit")

    def __init__(self, enter: Callable[[], None], exit: Callable[[], None]) -> None:
        self._enter = enter
        self._exit = exit

    def __enter__(self) -> None:
        self._enter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._exit()


class RWLock:
    """Shared / exclusive lock with writer preference, reentrant per thread (module docstring).

    Not fork-safe by itself: a handle is never used in a forked child (it refuses)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers: dict[int, int] = {}  # thread id -> shared depth (outside a write)
        self._writer: int | None = None  # thread id of the exclusive holder
        self._write_depth = 0  # exclusive and shared holds the writer has taken
        self._waiting_writers = 0
        self._waiting_readers = 0
        self._writes_done = 0  # exclusive holds released so far (a reader's "phase")
        self._reader_pass = 0  # readers that waited through the last write, not yet in
        self._shared = _Hold(self.acquire_read, self.release_read)
        self._exclusive = _Hold(self.acquire_write, self.release_write)

    # ---- holds as context managers ------------------------------------------------------
    def read(self) -> _Hold:
        """The shared hold: ``with lock.read(): ...``."""
        return self._shared

    def write(self) -> _Hold:
        """The exclusive hold: ``with lock.write(): ...`` (also plain ``with lock:``)."""
        return self._exclusive

    def __enter__(self) -> None:
        self.acquire_write()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release_write()

    # ---- state --------------------------------------------------------------------------
    def held_exclusive(self) -> bool:
        """Whether the calling thread holds the exclusive hold."""
        return self._writer == threading.get_ident()

    def shared_holders(self) -> int:
        """How many threads hold the lock shared right now (a figure for tests and reports)."""
        with self._cond:
            return len(self._readers)

    def held(self) -> bool:
        """Whether the calling thread holds the lock at all (shared or exclusive)."""
        me = threading.get_ident()
        with self._cond:
            return self._writer == me or me in self._readers

    # ---- acquire / release --------------------------------------------------------------
    def acquire_read(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._write_depth += 1
                return
            depth = self._readers.get(me, 0)
            # a thread already reading never waits (no self-deadlock)
            if not depth and (self._writer is not None or self._waiting_writers):
                self._wait_to_read()
            self._readers[me] = depth + 1

    def _wait_to_read(self) -> None:
        """Wait while a writer holds the lock, or waits for it and no write has ended since
        this reader came (then the reader goes before the next writer)."""
        phase = self._writes_done
        self._waiting_readers += 1
        try:
            while self._writer is not None or (
                self._waiting_writers and phase == self._writes_done
            ):
                self._cond.wait()
        finally:
            self._waiting_readers -= 1
        if phase != self._writes_done and self._reader_pass:
            self._reader_pass -= 1

    def release_read(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._release_writer_level()
                return
            depth = self._readers.get(me, 0)
            if not depth:
                raise RuntimeError("release_read by a thread that holds no shared hold")
            if depth == 1:
                del self._readers[me]
                if not self._readers:
                    self._cond.notify_all()
            else:
                self._readers[me] = depth - 1

    def acquire_write(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._write_depth += 1
                return
            if me in self._readers:
                raise LockUpgradeError(
                    "this thread holds the store handle's lock for a read and asked for the "
                    "write hold (an upgrade would deadlock two readers); finish the read first"
                )
            self._waiting_writers += 1
            try:
                while self._writer is not None or self._readers or self._reader_pass:
                    self._cond.wait()
            finally:
                self._waiting_writers -= 1
            self._writer, self._write_depth = me, 1

    def release_write(self) -> None:
        with self._cond:
            if self._writer != threading.get_ident():
                raise RuntimeError("release_write by a thread that does not hold the write hold")
            self._release_writer_level()

    def _release_writer_level(self) -> None:
        """One level of the writer's holds (caller holds ``_cond``)."""
        self._write_depth -= 1
        if not self._write_depth:
            self._writer = None
            self._writes_done += 1
            self._reader_pass = self._waiting_readers  # they go before the next writer
            self._cond.notify_all()
