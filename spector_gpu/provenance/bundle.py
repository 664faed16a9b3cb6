"""Forensic bundles: a deterministic tar of a memory's evidence (DESIGN §7, seed 004).

:func:`write_bundle` writes ``files`` plus a ``manifest.json`` into an uncompressed POSIX.1-2001
(PAX) tar. Every choice that could vary is fixed, so two writes of the same ``files`` are
byte-identical: members sorted by name (code-point order, which is UTF-8 byte order), regular
files only (no directory entries), ``mtime`` 0, ``uid``/``gid`` 0, empty ``uname``/``gname``,
mode ``0o644``. The manifest is canonical JSON (sorted keys, no whitespace, UTF-8)::

    {"files":[{"name":"a.json","sha256":"<64 hex>","size":12},...],
     "format":"spector_gpu.bundle","version":1}

with one entry per file except the manifest itself, sorted by name (the format, limits and
manifest codec live in :mod:`.manifest`).

:func:`verify_bundle` reads the tar without extracting anything to disk: it refuses links,
devices, directories, sparse members, unsafe names (absolute, ``..``, NUL/control characters,
backslashes, over 255 bytes), duplicates and oversized input, and it reports - never raises -
a truncated or non-tar file. The manifest detects accidental damage and naive edits; someone
who rewrites both a file and the manifest is caught only by an outside anchor, so keep
:attr:`BundleInfo.sha256` (e.g. in the event chain) and pass it as ``expected_sha256``.
Reading and verifying live in :mod:`.bundle_reader`, re-exported here.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import stat
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass

from spector_gpu.errors import SpectorError, StoreError, ValidationError
from spector_gpu.paths import output_path

from .bundle_reader import BundleReport, read_bundle, verify_bundle
from .manifest import (
    MANIFEST_NAME,
    MAX_BUNDLE_BYTES,
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    ManifestEntry,
    encode_manifest,
    name_problem,
    sha256_hex,
)

__all__ = [
    "MANIFEST_NAME",
    "MAX_BUNDLE_BYTES",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "BundleInfo",
    "BundleReport",
    "ManifestEntry",
    "read_bundle",
    "verify_bundle",
    "write_bundle",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BundleInfo:
    """What :func:`write_bundle` wrote: the path, the whole tar's SHA-256 hex and byte size,
    and the manifest entries (sorted by name)."""

    path: str
    sha256: str
    size: int
    files: tuple[ManifestEntry, ...]


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.type = size, 0, 0o644, tarfile.REGTYPE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _checked_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    if not isinstance(files, Mapping):
        raise ValidationError(f"files: expected a mapping of name to bytes, got {type(files)}")
    if len(files) >= MAX_MEMBERS:
        raise ValidationError(f"files: {len(files)} given; at most {MAX_MEMBERS - 1}")
    out: dict[str, bytes] = {}
    for name, data in files.items():
        problem = name_problem(name)
        if problem is None and name == MANIFEST_NAME:
            problem = "is reserved for the bundle's own manifest"
        if problem is not None:
            raise ValidationError(f"files[{name!r}]: name {problem}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValidationError(f"files[{name!r}]: expected bytes, got {type(data).__name__}")
        if len(data) > MAX_MEMBER_BYTES:
            raise ValidationError(f"files[{name!r}]: {len(data)} bytes; cap {MAX_MEMBER_BYTES}")
        out[name] = bytes(data)
    return out


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:  # platforms without directory fds: the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bundle(path: str | os.PathLike[str], files: Mapping[str, bytes]) -> BundleInfo:
    """Write ``files`` and their manifest as a deterministic tar at ``path``, atomically.

    The tar is written to ``<path>.partial``, fsynced, then renamed over ``path``.

    Raises:
        ValidationError: a name is unsafe or reserved, a value is not bytes, a cap is hit, or
            ``path`` is not a writable file path or resolves into a store directory
            (:func:`spector_gpu.paths.output_path`).
    """
    target = os.fspath(output_path(path))
    checked = _checked_files(files)
    entries = tuple(ManifestEntry(n, sha256_hex(d), len(d)) for n, d in sorted(checked.items()))
    members = dict(checked)
    members[MANIFEST_NAME] = encode_manifest(entries)
    if sum(map(len, members.values())) > MAX_BUNDLE_BYTES:
        raise ValidationError(f"files: more than {MAX_BUNDLE_BYTES} bytes in one bundle")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tf:
        for name in sorted(members):
            tf.addfile(_tarinfo(name, len(members[name])), io.BytesIO(members[name]))
    blob = buf.getvalue()
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise _write_failure(target, exc) from exc
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        # the rename below would replace a directory entry such as a device node or a FIFO
        raise ValidationError(
            f"path: {target!r} exists and is not a regular file; give a file path"
        )
    partial = target + ".partial"
    try:
        with open(partial, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(partial, target)
    except BaseException as exc:
        if os.path.exists(partial):
            os.unlink(partial)
        if isinstance(exc, OSError):
            raise _write_failure(target, exc) from exc
        raise
    _fsync_dir(os.path.dirname(target))
    log.debug("wrote bundle %s (%d files, %d bytes)", target, len(entries), len(blob))
    return BundleInfo(target, sha256_hex(blob), len(blob), entries)


def _write_failure(target: str, exc: OSError) -> SpectorError:
    """The library error for a bundle that could not be written: a path that cannot hold a
    file is bad input (``ValidationError``); anything else (a full disk, EIO) a ``StoreError``."""
    if exc.errno in (
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ENAMETOOLONG,
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ELOOP,
        errno.EINVAL,
    ):
        return ValidationError(
            f"path: cannot write a bundle at {target!r} ({exc}); give a file "
            "path in an existing, writable directory"
        )
    return StoreError(f"{target}: could not write the bundle ({exc})")
