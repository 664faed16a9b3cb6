"""The writer lock of a store directory, and what happens to it across ``fork``.

One writer per directory: ``fcntl.flock`` on ``LOCK`` (never ``lockf``: an flock belongs to the
open file description, so a forked child cannot silently release it). A forked child does
inherit the descriptor, though, and would keep the lock held after the parent closes; so every
writer handle is tracked and its lock descriptor closed in the child right after ``fork``.

``LOCK`` is opened without following a symbolic link and must be a regular file with one
link: opening truncates it and writes the owner's pid, which must never land in a file outside
the store (a link planted under the name, or a hard link to somebody else's file).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
import weakref
from pathlib import Path
from typing import Any

from ..errors import StoreFailedError, StoreFormatError, StoreLockedError
from .io import open_nofollow

__all__ = ["acquire_writer_lock", "lost_lock", "track_writer"]

_WRITERS: weakref.WeakSet[Any] = weakref.WeakSet()
_ATTEMPTS = 5  # locks of a LOCK that was replaced meanwhile, before giving up
_at_fork_registered = False


def acquire_writer_lock(directory: Path) -> int:
    """Take ``directory/LOCK`` exclusively (non-blocking); returns the descriptor holding it.

    The lock is held only if the name still names the locked file once the lock is taken: a
    ``LOCK`` unlinked or renamed over between the open and the ``flock`` (by a writer closing,
    or by anything replacing the file) would otherwise leave two processes each holding a lock
    on a different file. Such a race is retried a few times, then reported as locked."""
    for _ in range(_ATTEMPTS):
        fd = _lock_once(directory)
        if _names_same_file(directory / "LOCK", fd):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {int(time.time())}\n".encode())
            return fd
        os.close(fd)
    raise StoreLockedError(
        f"{directory}: the LOCK file was replaced while it was being locked, {_ATTEMPTS} times; "
        "another process is replacing it — stop it, then open the store again"
    )


def lost_lock(directory: Path, fd: int) -> StoreFailedError | None:
    """The error of a writer whose ``directory/LOCK`` no longer names the file it locked
    through ``fd`` (removed, or replaced by another file, which a second writer could lock
    too), or None while it does. One ``stat``: checked before every write."""
    if _names_same_file(directory / "LOCK", fd):
        return None
    return StoreFailedError(
        f"{directory}/LOCK was removed or replaced while this writer held it, so another "
        "writer may open the store; this handle writes nothing more — close it, then reopen"
    )


def _names_same_file(path: Path, fd: int) -> bool:
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _lock_once(directory: Path) -> int:
    path = directory / "LOCK"
    fd = open_nofollow(str(path), os.O_RDWR | os.O_CREAT)
    try:
        if os.fstat(fd).st_nlink > 1:
            raise StoreFormatError(
                f"{path}: the lock file has other hard links; writing it would change another "
                "file — remove it (the store recreates it)",
                file=str(path),
            )
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except StoreFormatError:
        os.close(fd)
        raise
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise StoreLockedError(
                f"{directory}: another process holds the writer lock; open with read_only=True "
                "or close the other writer"
            ) from exc
        raise
    return fd


def track_writer(handle: Any) -> None:
    """Remember a writer handle (its public ``lock_fd``: the writer lock's descriptor, None
    when not held) for the after-fork cleanup."""
    global _at_fork_registered
    if not _at_fork_registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_drop_inherited_locks)
        _at_fork_registered = True
    _WRITERS.add(handle)


def _drop_inherited_locks() -> None:
    """In a forked child: close inherited lock descriptors. The parent keeps its lock (same
    open file description); the child's handle is unusable anyway (``StoreClosedError``)."""
    for handle in list(_WRITERS):
        if handle.lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(handle.lock_fd)
            handle.lock_fd = None
