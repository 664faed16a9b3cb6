"""The compaction swap: a rewritten store built beside the old one, then installed atomically.

A compacted store is written into ``.compact/`` inside the store directory and takes the old
files' place in four steps, each durable before the next starts:

1. **stage** — ``.compact/`` is created empty (a leftover of an interrupted build is removed
   first) and every new file is written there (``O_EXCL``, ``O_NOFOLLOW``), fsynced, then the
   staging directory and the store directory are fsynced;
2. **commit** — ``.compact/COMMIT`` (the store id, the new generation and the names to install,
   CRC-sealed) is written atomically (``COMMIT.partial`` → fsync → rename → directory fsync).
   Its presence is the commit point: from then on the store *is* the new one;
3. **install** — each staged file is renamed over its name in the store directory, in file
   order (the id index last), then both directories are fsynced;
4. **finish** — the marker and the staging directory are removed, the store directory fsynced.

A writer's open (under the lock, before it opens a file) repeats steps 3-4 when a marker is
present — idempotent, since a name no longer in ``.compact/`` was installed — and otherwise
removes ``.compact/`` as an interrupted build: a kill at any point leaves the old store or the
new one, never a mix. Readers take no lock and never wait: while a marker is present they open
each listed file from ``.compact/`` if it is still there, else from its place (both are the new
store), and they check after opening that every file they hold is the one now current
(:func:`current_paths`), retrying otherwise. The old files' inodes stay whole while a reader
maps them (a rename never truncates), so a reader never sees SIGBUS and notices the swap at its
next refresh (the index file's inode changed).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from ..errors import CorruptionError, StoreError
from .crc import crc32c
from .io import File, atomic_write, create_new, fsync_dir, read_regular, remove_file, replace_file
from .killpoints import killpoint
from .region import Region

__all__ = [
    "MARKER",
    "READER_PATIENCE_S",
    "STAGING",
    "SwapMarker",
    "begin",
    "commit",
    "current_paths",
    "discard",
    "finish",
    "holds_current",
    "install",
    "open_current",
    "read_marker",
    "recover",
    "replaced",
    "stage_file",
]

log = logging.getLogger(__name__)

STAGING = ".compact"
MARKER = "COMMIT"
_FORMAT = "spector-compact"
_VERSION = 1


@dataclass(frozen=True)
class SwapMarker:
    """The commit marker of a staged store: its store id, the generation every staged file
    carries, and the file names to install, in install order (the id index last)."""

    store_id: int
    generation: int
    files: tuple[str, ...]

    def encode(self) -> bytes:
        """Canonical JSON (sorted keys) with a CRC32C of the same JSON without the CRC."""
        body = {
            "format": _FORMAT,
            "version": _VERSION,
            "store_id": f"{self.store_id:016x}",
            "generation": self.generation,
            "files": list(self.files),
        }
        raw = json.dumps(body, sort_keys=True).encode()
        return json.dumps({**body, "crc32c": crc32c(raw)}, sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, *, path: str, names: Collection[str]) -> SwapMarker:
        """Parse a marker; ``CorruptionError`` for anything but a whole, sealed marker that
        names only files of ``names`` (never a path: a marker cannot move other files)."""

        def bad(why: str) -> CorruptionError:
            return CorruptionError(
                f"{path}: compaction commit marker is damaged ({why}); the store's files may be "
                "half-installed — restore the store directory from a backup",
                file=path,
            )

        try:
            body = json.loads(raw.decode("utf-8"))
            crc = body.pop("crc32c")
            sealed = json.dumps(body, sort_keys=True).encode()
            files = tuple(str(f) for f in body["files"])
            marker = cls(int(body["store_id"], 16), int(body["generation"]), files)
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            raise bad("not a marker") from None
        if crc != crc32c(sealed) or body.get("format") != _FORMAT:
            raise bad("CRC mismatch")
        if body.get("version") != _VERSION:
            raise bad(f"version {body.get('version')}")
        plain = all(f and "/" not in f and f not in (".", "..") for f in files)
        if not plain or not all(f in names for f in files) or len(set(files)) != len(files):
            raise bad("it names files that are not this store's")
        return marker


def _staging(directory: Path) -> Path:
    return directory / STAGING


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def read_marker(directory: Path, names: Collection[str]) -> SwapMarker | None:
    """The commit marker in ``directory/.compact/``, or None when there is none (never read
    through a symbolic link: a ``.compact`` that is not a directory holds no marker)."""
    staging = _staging(directory)
    if not _is_real_dir(staging) or not os.path.lexists(staging / MARKER):
        return None
    try:
        raw = read_regular(staging / MARKER)
    except FileNotFoundError:  # a writer finished the swap between the two looks
        return None
    return SwapMarker.decode(raw, path=str(staging / MARKER), names=names)


def _owned(names: Collection[str]) -> set[str]:
    owned = {*names, MARKER, "LOCK"}  # the staged store's own writer lock, while it is built
    return owned | {n + ".partial" for n in owned}


def discard(directory: Path, names: Collection[str]) -> None:
    """Remove ``.compact/`` and the files of ours in it (an interrupted build, or what a
    finished swap left). A link under the name is removed itself; files that are not ours are
    left, and so is the directory then (logged)."""
    staging = _staging(directory)
    if not os.path.lexists(staging):
        return
    if not _is_real_dir(staging):
        remove_file(staging)
        fsync_dir(directory)
        return
    for name in sorted(set(os.listdir(staging)) & _owned(names)):
        remove_file(staging / name)
    try:
        os.rmdir(staging)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        log.warning("%s holds files that are not the store's; it is left in place", staging)
    fsync_dir(directory)


def begin(directory: Path, names: Collection[str]) -> Path:
    """Step 1 starts: an empty ``.compact/`` (leftovers removed first), durable in the store
    directory; returns its path."""
    discard(directory, names)
    staging = _staging(directory)
    try:
        os.mkdir(staging, 0o700)
    except FileExistsError:
        raise StoreError(
            f"{staging}: holds files that are not the store's; move them away to compact"
        ) from None
    fsync_dir(directory)
    return staging


def stage_file(staging: Path, name: str) -> File:
    """A new, empty file ``name`` in the staging directory (``O_EXCL``, ``O_NOFOLLOW``)."""
    return create_new(staging / name)


def commit(directory: Path, marker: SwapMarker) -> None:
    """Step 2: make every staged file's name durable, then write the commit marker
    atomically. Once this returns, opening the store yields the staged one."""
    staging = _staging(directory)
    fsync_dir(staging)
    killpoint("compact.after_stage")
    atomic_write(
        staging / MARKER, marker.encode(), before_replace=lambda: killpoint("compact.before_marker")
    )
    killpoint("compact.after_marker")


def install(directory: Path, marker: SwapMarker) -> None:
    """Step 3: rename each staged file of ``marker`` over its place (those already installed
    are skipped), then fsync both directories."""
    staging = _staging(directory)
    half = len(marker.files) // 2
    for i, name in enumerate(marker.files):
        src = staging / name
        if os.path.lexists(src):
            replace_file(src, directory / name)
        if i == half:
            killpoint("compact.mid_install")
    fsync_dir(staging)
    fsync_dir(directory)
    killpoint("compact.after_install")


def finish(directory: Path, names: Collection[str]) -> None:
    """Step 4: remove the marker, then the staging directory; durable when this returns."""
    remove_file(_staging(directory) / MARKER)
    discard(directory, names)
    killpoint("compact.after_finish")


def recover(directory: Path, names: Collection[str]) -> bool:
    """A writer's open, before it opens a file: finish a committed swap (True) or remove an
    interrupted build (False). ``names``: the store's region file names."""
    marker = read_marker(directory, names)
    if marker is None:
        discard(directory, names)
        return False
    log.info("%s: finishing a compaction swap (generation %d)", directory, marker.generation)
    install(directory, marker)
    finish(directory, names)
    return True


class _Opened(Protocol):
    regions: dict[int, Region]

    def close(self) -> None: ...


_O = TypeVar("_O", bound=_Opened)
# How long a reader's open keeps retrying while a swap moves files under it (seconds): a swap's
# install is a few renames and two directory fsyncs, so this bounds a writer stalled mid-way.
READER_PATIENCE_S = 10.0


def open_current(
    open_once: Callable[[], _O], directory: Path, *, patience_s: float = READER_PATIENCE_S
) -> _O:
    """A reader's open: ``open_once()`` until every file it opened is the one now current
    and every file it found missing is still missing (:func:`holds_current`) — a swap
    installing files one by one while the reader opened them one by one could otherwise hand
    it a mix, or files it looked for in ``.compact/`` just after they left it. A staged file
    installed between the look and the open (``StoreError`` from ``FileNotFoundError``) is
    retried too. ``StoreError`` (naming the fix: open again) if the files still move after
    ``patience_s``; never a mix."""
    deadline = time.monotonic() + patience_s
    attempt = 0
    while True:
        attempt += 1
        try:
            opened = open_once()
        except StoreError as exc:
            if not isinstance(exc.__cause__, FileNotFoundError):
                raise
        else:
            if holds_current(directory, opened.regions.values()):
                return opened
            opened.close()
        if time.monotonic() >= deadline:
            raise StoreError(
                f"{directory}: the store's files kept changing for {patience_s:.0f} s while "
                f"this read-only open looked at them ({attempt} attempts: a compaction swap "
                "under way); nothing was read from a mix — open it again"
            )
        time.sleep(min(0.001 * attempt, 0.02))


def _same_file(region: Region, path: str) -> bool:
    """Whether ``path`` names the very file ``region`` has open (False if nothing is there)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(region.file.fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def holds_current(directory: Path, regions: Iterable[Region]) -> bool:
    """Whether every region is the file now current under its name, and every stand-in for a
    missing file (a placeholder) still has no file under its name: a name that was missing
    only while a swap moved its file out of ``.compact/`` is not missing."""
    regions = list(regions)
    paths = current_paths(directory, [r.spec.filename for r in regions])
    return all(
        not os.path.lexists(paths[r.spec.filename])
        if r.placeholder
        else _same_file(r, paths[r.spec.filename])
        for r in regions
    )


def replaced(directory: Path, last: Region) -> bool:
    """A reader's refresh: whether ``last`` (the region a swap installs last, the id index) is
    no longer the current file under its name — then every file was replaced. A stand-in for
    a missing index is replaced once a file is there again."""
    path = current_paths(directory, [last.spec.filename])[last.spec.filename]
    if last.placeholder:
        return os.path.lexists(path)
    return os.path.lexists(path) and not _same_file(last, path)


class _AnyName(Collection[str]):
    """Every file name (a reader's view of a marker's list; the writer checks it)."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def current_paths(directory: Path, names: Sequence[str]) -> dict[str, str]:
    """Where each of ``names`` is now, for a reader (no lock): a file a committed swap has not
    installed yet is still in ``.compact/`` (both places hold the new store)."""
    try:  # a reader knows only the names it asks for: any plain name may be listed
        marker = read_marker(directory, _AnyName())
    except CorruptionError:
        marker = None  # a writer's open reports it; a reader keeps to the files in place
    staged = set(marker.files) if marker is not None else set()
    out = {}
    for name in names:
        src = _staging(directory) / name
        out[name] = str(src if name in staged and os.path.lexists(src) else directory / name)
    return out
