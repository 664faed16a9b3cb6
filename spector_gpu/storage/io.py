"""The one I/O layer: every byte the store writes goes through here.

Every open refuses to follow a symbolic link (``O_NOFOLLOW``) and anything that is not a
regular file, and temporary files are created with ``O_EXCL``: a link planted under a store
file's name can never redirect a write (or a truncation) outside the store.

Writes use ``os.pwrite`` into space reserved with ``posix_fallocate`` (a full disk is a clean
``OSError`` at reservation time, never SIGBUS on a mapped page). Barriers are ``fdatasync`` /
``fsync`` and a directory ``fsync``. Tests install an :class:`IOObserver` to inject faults
(EIO, ENOSPC) or to record every write and barrier for power-loss simulation; with no observer
installed the hooks cost one ``is None`` test.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from ..errors import StoreFormatError

__all__ = [
    "File",
    "IOObserver",
    "atomic_write",
    "create_new",
    "fsync_dir",
    "get_observer",
    "open_nofollow",
    "read_regular",
    "remove_file",
    "replace_file",
    "set_observer",
]


class IOObserver(Protocol):
    """Test hook: sees each operation before it happens and may raise ``OSError`` to fail it."""

    def on_write(self, path: str, offset: int, data: bytes) -> None: ...
    def on_reserve(self, path: str, size: int) -> None: ...
    def on_truncate(self, path: str, size: int) -> None: ...
    def on_sync(self, path: str, kind: str) -> None: ...
    def on_dir_sync(self, path: str) -> None: ...
    def on_create(self, path: str) -> None: ...
    def on_replace(self, src: str, dst: str) -> None: ...
    def on_unlink(self, path: str) -> None: ...


_observer: IOObserver | None = None
_IOV_MAX = 1024  # the usual limit on buffers per pwritev (Linux UIO_MAXIOV)


def set_observer(observer: IOObserver | None) -> IOObserver | None:
    """Install (or remove, with None) the process-wide I/O observer; returns the previous one."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def get_observer() -> IOObserver | None:
    return _observer


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _refuse_special(path: str, mode: int) -> None:
    """``StoreFormatError`` unless ``mode`` is a regular file's: a FIFO, socket, device node or
    directory under a store file's name is never opened for reading or writing."""
    if stat.S_ISREG(mode):
        return
    kind = (
        "a symbolic link"
        if stat.S_ISLNK(mode)
        else "a directory"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device node"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a special file"
    )
    raise StoreFormatError(
        f"{path}: not a regular file ({kind}); a store file must be a regular "
        "file inside the store directory — move it away and restore the store's file",
        file=path,
    )


class File:
    """A file opened for positioned writes (or read-only), with explicit barriers."""

    __slots__ = ("fd", "path", "writable")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        writable: bool,
        create: bool = False,
        exclusive: bool = False,
    ) -> None:
        """Open ``path`` (never through a symbolic link); ``create`` makes it if missing,
        ``exclusive`` (implies ``create``) insists on making a new file (``O_EXCL``)."""
        self.path = str(path)
        self.writable = writable
        flags = (os.O_RDWR if writable else os.O_RDONLY) | _CLOEXEC | _NOFOLLOW
        if create or exclusive:
            flags |= os.O_CREAT
        if exclusive:
            flags |= os.O_EXCL
        existed = os.path.lexists(self.path)
        if (create or exclusive) and not existed and _observer is not None:
            _observer.on_create(self.path)
        if existed and not exclusive:
            _refuse_special(
                self.path, os.lstat(self.path).st_mode
            )  # before any open (a FIFO blocks)
        self.fd = open_nofollow(self.path, flags)

    @classmethod
    def adopt(cls, fd: int, path: str) -> File:
        """A read-only ``File`` over an already open descriptor (which it now owns)."""
        f = cls.__new__(cls)
        f.fd, f.path, f.writable = fd, path, False
        return f

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        """Write all of ``data`` at ``offset`` (loops on short writes)."""
        view = memoryview(data).cast("B")
        if _observer is not None:
            _observer.on_write(self.path, offset, bytes(view))
        written = 0
        while written < len(view):
            n = os.pwrite(self.fd, view[written:], offset + written)
            if n <= 0:
                raise OSError(errno.EIO, f"short write to {self.path}")
            written += n

    def pwritev(self, buffers: Sequence[bytes | bytearray | memoryview], offset: int) -> None:
        """Write the concatenation of ``buffers`` at ``offset`` with one ``pwritev`` (no join).

        An observer sees one write of the joined bytes, exactly as :meth:`pwrite` would report.
        """
        views = [memoryview(b).cast("B") for b in buffers]
        total = sum(len(v) for v in views)
        if _observer is not None or len(views) > _IOV_MAX:
            self.pwrite(b"".join(views), offset)
            return
        n = os.pwritev(self.fd, views, offset)
        if n != total:  # short write: finish the rest from a joined copy
            if n <= 0:
                raise OSError(errno.EIO, f"short write to {self.path}")
            self.pwrite(b"".join(views)[n:], offset + n)

    def pread(self, length: int, offset: int) -> bytes:
        return os.pread(self.fd, length, offset)

    def reserve(self, size: int) -> None:
        """Make the file at least ``size`` bytes with real blocks behind them (never shrinks)."""
        current = self.size()
        if size <= current:
            return
        if _observer is not None:
            _observer.on_reserve(self.path, size)
        try:
            os.posix_fallocate(self.fd, current, size - current)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.ftruncate(self.fd, size)  # filesystems without fallocate (tmpfs on old kernels)

    def truncate(self, size: int) -> None:
        if _observer is not None:
            _observer.on_truncate(self.path, size)
        os.ftruncate(self.fd, size)

    def sync(self, kind: str = "data") -> None:
        """Barrier: ``"data"`` = fdatasync, ``"full"`` = fsync."""
        if _observer is not None:
            _observer.on_sync(self.path, kind)
        if kind == "full":
            os.fsync(self.fd)
        else:
            os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_nofollow(path: str, flags: int) -> int:
    """``os.open(path, flags)`` that refuses a symbolic link and any non-regular file with
    ``StoreFormatError`` (``O_NONBLOCK`` while opening, so a FIFO swapped in never blocks)."""
    try:
        fd = os.open(path, flags | _NONBLOCK | _NOFOLLOW | _CLOEXEC, 0o644)
    except IsADirectoryError:
        _refuse_special(path, stat.S_IFDIR)
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            _refuse_special(path, stat.S_IFLNK)
        raise
    try:
        _refuse_special(path, os.fstat(fd).st_mode)
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> bytes:
    """The whole content of the regular file ``path``, never read through a symbolic link;
    ``StoreFormatError`` for a link or special file, or for a file over ``max_bytes`` (refused
    by its size before a byte is read, and if it grows while read); ``FileNotFoundError`` if
    absent."""
    fd = open_nofollow(str(path), os.O_RDONLY)
    try:
        if max_bytes is not None and os.fstat(fd).st_size > max_bytes:
            raise _too_large(path, max_bytes)
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise _too_large(path, max_bytes)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _too_large(path: str | os.PathLike[str], max_bytes: int) -> StoreFormatError:
    return StoreFormatError(
        f"{path}: larger than the {max_bytes:,} bytes such a file ever holds; it is not the "
        "store's own file — restore it from a backup or remove it",
        file=str(path),
    )


def create_new(path: str | os.PathLike[str]) -> File:
    """A new, empty file at ``path`` for a temporary name (``*.partial``): ``O_EXCL`` and
    ``O_NOFOLLOW``, so whatever sits under the name (a leftover of an interrupted write, or a
    planted link) is unlinked — the link itself, never its target — and never written."""
    for _ in range(3):
        try:
            return File(path, writable=True, exclusive=True)
        except FileExistsError:
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    _refuse_special(str(path), stat.S_IFDIR)
                os.unlink(path)
            except FileNotFoundError:
                pass
    return File(path, writable=True, exclusive=True)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so that creations and renames inside it are durable."""
    if _observer is not None:
        _observer.on_dir_sync(str(path))
    fd = os.open(str(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename ``src`` over ``dst`` (atomic); durable only after :func:`fsync_dir`."""
    if _observer is not None:
        _observer.on_replace(str(src), str(dst))
    os.replace(src, dst)


def remove_file(path: str | os.PathLike[str]) -> bool:
    """Unlink ``path`` (a symbolic link is removed itself, never followed); False if nothing
    was there. A directory is refused (``StoreFormatError``). Durable after :func:`fsync_dir`."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        _refuse_special(str(path), mode)
    if _observer is not None:
        _observer.on_unlink(str(path))
    os.unlink(path)
    return True


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    durable: bool = True,
    before_replace: Callable[[], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically: ``path.partial`` -> fsync -> rename -> dir fsync.

    ``before_replace`` runs once the partial file is complete, just before the rename (crash
    tests put a kill point there)."""
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    f = create_new(partial)
    try:
        f.pwrite(data, 0)
        if durable:
            f.sync("full")
    finally:
        f.close()
    if before_replace is not None:
        before_replace()
    replace_file(partial, target)
    if durable:
        fsync_dir(target.parent)
