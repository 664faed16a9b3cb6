"""A store directory: where a store may be created, and its region files opened or missing.

A writer creates a store only in a directory that does not exist, is empty, or already holds
a store; a non-empty directory without any store file is refused (it is somebody else's:
``/``, a project folder with its own ``config.json``) unless the caller explicitly asks to
create a store beside those files, and even then never over a file under a name the store
writes. Only the store's own names are touched: leftover ``<name>.partial`` files of the
store's names are removed at a writer open, nothing else.

A region file missing from a store that has committed data is damage, never a fresh start:
it is replaced by an empty read-only stand-in (:meth:`Region.placeholder_for`) and reported.
Only while a store has never committed (every file present is at generation 0 with nothing
in it: an interrupted creation) may a writer create what is missing.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorruptionError, ReadOnlyStoreError, StoreError, StoreFailedError
from . import identity, swap
from .lock import acquire_writer_lock
from .region import Region, RegionSpec

__all__ = [
    "LOCK_NAME",
    "OpenedRegions",
    "claim_directory",
    "fill_missing",
    "inspect_directory",
    "open_failure",
    "open_regions",
    "open_store_files",
    "owned_names",
    "remove_partial_files",
]

LOCK_NAME = "LOCK"
_PARTIAL = ".partial"
_SHOWN = 5  # foreign names quoted in an error


def owned_names(files: Iterable[str]) -> frozenset[str]:
    """Every name the store may write in its directory: ``files``, ``LOCK`` and the
    ``.partial`` temporary of each."""
    names = {LOCK_NAME, *files}
    return frozenset(names | {n + _PARTIAL for n in names})


def inspect_directory(
    directory: Path,
    files: Sequence[str],
    *,
    markers: Sequence[str] = (),
    create_in_nonempty: bool = False,
) -> bool:
    """True if a store lives in ``directory`` (one of ``markers`` is there: files only a store
    writes), False if a new store may be created there; ``StoreError`` for a path that is not
    a directory, or a non-empty directory that holds no store (unless ``create_in_nonempty``),
    or a file under one of the store's ``files`` names in such a directory (always)."""
    try:
        entries = set(os.listdir(directory))
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        raise StoreError(
            f"{directory}: is a file, not a directory; a store is a directory — pass the "
            "path of a new or empty directory (or of an existing store)"
        ) from None
    if entries & set(markers):
        return True
    owned = owned_names(files)
    foreign = sorted(entries - {LOCK_NAME} - {n for n in owned if n.endswith(_PARTIAL)})
    if not foreign:
        return False  # empty, or the LOCK of a creation that got no further
    clobbered = [n for n in foreign if n in owned]
    if clobbered or not create_in_nonempty:
        shown = ", ".join(repr(n) for n in foreign[:_SHOWN])
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        fix = (
            f"move {', '.join(repr(n) for n in clobbered)} away (the store writes that name)"
            if clobbered
            else "open a new or empty directory, or pass create_in_nonempty=True to create "
            "the store beside these files"
        )
        raise StoreError(
            f"{directory}: not empty and holds no spector_gpu store (found {shown}{more}); {fix}"
        )
    return False


def remove_partial_files(directory: Path, files: Iterable[str]) -> None:
    """Delete leftover ``<name>.partial`` files of the store's own names (a link is removed
    itself, never followed); any other file is left alone."""
    for name in owned_names(files):
        if name.endswith(_PARTIAL):
            path = directory / name
            if os.path.lexists(path) and not (path.is_dir() and not path.is_symlink()):
                os.unlink(path)


@dataclass
class OpenedRegions:
    """The region files of a store directory as opened: present ones, and stand-ins for
    missing ones (``damage`` names those a store with commits should have had)."""

    regions: dict[int, Region] = field(default_factory=dict)
    missing: list[RegionSpec] = field(default_factory=list)
    damage: list[CorruptionError] = field(default_factory=list)
    created: bool = False

    def close(self) -> None:
        for r in self.regions.values():
            r.close()

    @property
    def has_commits(self) -> bool:
        """Whether any present file shows a commit (a count or a generation above 0)."""
        return any(
            r.preamble.count > 0 or r.preamble.generation > 0
            for r in self.regions.values()
            if not r.placeholder
        )


def open_regions(
    directory: Path,
    specs: Sequence[RegionSpec],
    *,
    writable: bool,
    paths: Mapping[str, str] | None = None,
) -> OpenedRegions:
    """Open every region of ``specs`` present in ``directory`` (the others are listed in
    ``missing``, for :func:`fill_missing`); ``paths`` says where a file is when not under its
    name (a reader during a compaction swap: :func:`.swap.current_paths`)."""
    out = OpenedRegions()
    try:
        for spec in specs:
            path = (paths or {}).get(spec.filename) or str(directory / spec.filename)
            if os.path.lexists(path):
                out.regions[spec.file_no] = Region.open(spec, path, writable=writable)
            else:
                out.missing.append(spec)
    except BaseException:
        out.close()
        raise
    return out


def fill_missing(out: OpenedRegions, directory: Path, *, writable: bool, store_id: int) -> None:
    """Create the missing regions (a writer, while the store has no commit) bound to
    ``store_id``, or stand in for them with empty read-only placeholders (damage when the
    store holds commits)."""
    commits = out.has_commits
    try:
        for spec in out.missing:
            path = str(directory / spec.filename)
            if writable and not commits:
                out.regions[spec.file_no] = Region.create(spec, path, store_id=store_id)
                out.created = True
                continue
            out.regions[spec.file_no] = Region.placeholder_for(spec, path, store_id=store_id)
            if commits:
                out.damage.append(
                    CorruptionError(
                        f"{path}: region file is missing from a store that holds commits; it "
                        "is not recreated empty (that would serve other memories' bytes under "
                        "old ids) — restore it from a backup; until then the store opens "
                        "point-in-time and read-only",
                        file=path,
                        region=spec.filename,
                    )
                )
    except BaseException:
        out.close()
        raise


def claim_directory(
    directory: Path,
    names: Sequence[str],
    markers: Sequence[str],
    *,
    writable: bool,
    create_in_nonempty: bool,
) -> int | None:
    """Check that a store may be opened (a reader: exists) or created in ``directory``, then
    (a writer) create the directory if needed and take its writer lock; returns the lock's
    descriptor (None for a reader)."""
    exists = inspect_directory(
        directory, names, markers=markers, create_in_nonempty=create_in_nonempty
    )
    if not writable:
        if not exists:
            raise StoreError(
                f"{directory}: no spector_gpu store here (open it writable to create one)"
            )
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return acquire_writer_lock(directory)
    except StoreError:
        raise
    except OSError as exc:
        raise open_failure(directory, exc, writable=True) from exc


def open_store_files(
    directory: Path,
    specs: Sequence[RegionSpec],
    names: Sequence[str],
    *,
    writable: bool,
    paths: Mapping[str, str] | None = None,
) -> tuple[OpenedRegions, int | None, bool]:
    """Open the store's region files: finish or discard a compaction swap and remove leftover
    temporaries (a writer), open what is there (``paths``: see :func:`open_regions`), settle
    the store id (the files' own, or a new one), create or stand in for what is missing.
    Returns the regions, the store id (None: a format-1 store, whose upgrade gives it one)
    and whether the store is in format 1 (a reader refuses it)."""
    if writable:
        swap.recover(directory, names)
        remove_partial_files(directory, names)
    opened = open_regions(directory, specs, writable=writable, paths=paths)
    try:
        present = list(opened.regions.values())
        legacy = any(identity.is_legacy(r) for r in present)
        if legacy and not writable:
            raise identity.legacy_error(directory)
        ref = identity.reference_id(present)
        if ref is None and not legacy:
            ref = identity.new_store_id()
        fill_missing(opened, directory, writable=writable, store_id=ref or 0)
    except BaseException:
        opened.close()
        raise
    return opened, ref, legacy


def open_failure(directory: Path, exc: OSError, *, writable: bool) -> StoreError:
    """The library error for an ``OSError`` met while opening (or creating, or recovering)."""
    where = exc.filename or directory
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = "the filesystem is read-only" if exc.errno == errno.EROFS else "permission denied"
        if writable:
            return ReadOnlyStoreError(
                f"{where}: cannot open the store for writing: {why}; open it read-only "
                "(writable=False) or fix the permissions of the store directory and its files"
            )
        return StoreError(f"{where}: cannot read the store: {why}")
    if writable:
        return StoreFailedError(
            f"{where}: I/O error while opening or recovering the store ({exc}); nothing durable "
            "was lost — free space or check the device, then open it again"
        )
    return StoreError(f"{where}: I/O error while opening the store ({exc})")
