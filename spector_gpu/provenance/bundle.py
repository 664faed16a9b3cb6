"""Forensic bundles: a deterministic tar of a memory's evidence (DESIGN §7, seed 004).

:func:`write_bundle` writes ``files`` plus a ``manifest.json`` into an uncompressed POSIX.1-2001
(PAX) tar. Every choice that could vary is fixed, so two writes of the same ``files`` are
byte-identical: members sorted by name (code-point order, which is UTF-8 byte order), regular
files only (no directory entries), ``mtime`` 0, ``uid``/``gid`` 0, empty ``uname``/``gname``,
mode ``0o644``. The manifest is canonical JSON (sorted keys, no whitespace, UTF-8)::

    {"files":[{"name":"a.json","sha256":"<64 hex>","size":12},...],
     "format":"spector_gpu.bundle","version":1}

with one entry per file except the manifest itself, sorted by name.

:func:`verify_bundle` reads the tar without extracting anything to disk: it refuses links,
devices, directories, sparse members, unsafe names (absolute, ``..``, NUL/control characters,
backslashes, over 255 bytes), duplicates and oversized input, and it reports - never raises -
a truncated or non-tar file. The manifest detects accidental damage and naive edits; someone
who rewrites both a file and the manifest is caught only by an outside anchor, so keep
:attr:`BundleInfo.sha256` (e.g. in the event chain) and pass it as ``expected_sha256``.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import re
import stat
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spector_gpu.errors import CorruptionError, SpectorError, StoreError, ValidationError

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

MANIFEST_NAME = "manifest.json"
BUNDLE_FORMAT = "spector_gpu.bundle"
BUNDLE_VERSION = 1
MAX_NAME_BYTES = 255
MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_BUNDLE_BYTES = 1024 * 1024 * 1024
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_HEX64 = re.compile(r"[0-9a-f]{64}", re.ASCII)
_REGULAR = (tarfile.REGTYPE, tarfile.AREGTYPE)
_TYPE_NAMES = {
    tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hard link",
    tarfile.DIRTYPE: "directory",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "fifo",
    tarfile.CONTTYPE: "contiguous file",
    tarfile.GNUTYPE_SPARSE: "sparse file",
}


@dataclass(frozen=True)
class ManifestEntry:
    """One file of a bundle: ``name``, SHA-256 hex of its bytes, ``size`` in bytes."""

    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class BundleInfo:
    """What :func:`write_bundle` wrote: the path, the whole tar's SHA-256 hex and byte size,
    and the manifest entries (sorted by name)."""

    path: str
    sha256: str
    size: int
    files: tuple[ManifestEntry, ...]


@dataclass(frozen=True)
class BundleReport:
    """Result of :func:`verify_bundle`; ``ok`` is True only when every list is empty.

    Attributes:
        tampered: files whose bytes differ from the manifest's SHA-256 or size.
        missing: files the manifest lists that the tar lacks.
        extra: regular files in the tar that the manifest does not list.
        errors: everything else (unreadable tar, unsafe or non-regular members, bad manifest).
    """

    ok: bool
    tampered: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _name_problem(name: object) -> str | None:
    """Why ``name`` is not a safe relative member name, or None when it is."""
    if not isinstance(name, str):
        return f"expected str, got {type(name).__name__}"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if not 0 < size <= MAX_NAME_BYTES:
        return f"is {size} UTF-8 bytes; allowed 1..{MAX_NAME_BYTES}"
    if _CONTROL.search(name):
        return "contains a NUL or control character"
    if "\\" in name:
        return "contains a backslash; use '/' between folders"
    if name.startswith("/"):
        return "is absolute; use a relative name"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "has an empty, '.' or '..' component"
    return None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


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
        problem = _name_problem(name)
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
        ValidationError: a name is unsafe or reserved, a value is not bytes, or a cap is hit.
    """
    checked = _checked_files(files)
    entries = tuple(ManifestEntry(n, _sha256(d), len(d)) for n, d in sorted(checked.items()))
    manifest = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "files": [{"name": e.name, "sha256": e.sha256, "size": e.size} for e in entries],
    }
    members = dict(checked)
    members[MANIFEST_NAME] = _canonical_json(manifest)
    if sum(map(len, members.values())) > MAX_BUNDLE_BYTES:
        raise ValidationError(f"files: more than {MAX_BUNDLE_BYTES} bytes in one bundle")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tf:
        for name in sorted(members):
            tf.addfile(_tarinfo(name, len(members[name])), io.BytesIO(members[name]))
    blob = buf.getvalue()
    target = os.fspath(path)
    if not isinstance(target, str) or not target or "\x00" in target:
        raise ValidationError(f"path must be a non-empty str file path without NUL, got {target!r}")
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
    return BundleInfo(target, _sha256(blob), len(blob), entries)


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


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def _parse_manifest(data: bytes) -> tuple[list[ManifestEntry], list[str]]:
    """Entries of a manifest and any problems with it (entries empty when unusable)."""
    try:
        obj = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return [], [f"{MANIFEST_NAME}: not valid UTF-8 JSON ({exc})"]
    if not isinstance(obj, dict) or set(obj) != {"format", "version", "files"}:
        return [], [f"{MANIFEST_NAME}: expected an object with format, version and files"]
    if obj["format"] != BUNDLE_FORMAT or obj["version"] != BUNDLE_VERSION:
        found = f"format {obj['format']!r} version {obj['version']!r}"
        return [], [f"{MANIFEST_NAME}: {found} is not {BUNDLE_FORMAT!r} version {BUNDLE_VERSION}"]
    if not isinstance(obj["files"], list):
        return [], [f"{MANIFEST_NAME}: files must be a list"]
    entries: list[ManifestEntry] = []
    errors: list[str] = []
    for i, item in enumerate(obj["files"]):
        where = f"{MANIFEST_NAME}: files[{i}]"
        if not isinstance(item, dict) or set(item) != {"name", "sha256", "size"}:
            errors.append(f"{where}: expected an object with name, sha256 and size")
            continue
        name, digest, size = item["name"], item["sha256"], item["size"]
        problem = _name_problem(name)
        if problem is not None or name == MANIFEST_NAME:
            errors.append(f"{where}.name {name!r}: {problem or 'lists the manifest itself'}")
        elif not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            errors.append(f"{where}.sha256: not 64 lower-case hex characters")
        elif not isinstance(size, int) or isinstance(size, bool) or size < 0:
            errors.append(f"{where}.size: not a non-negative int")
        elif entries and name <= entries[-1].name:
            errors.append(f"{where}.name {name!r}: out of order or repeated")
        else:
            entries.append(ManifestEntry(name, digest, size))
    return entries, errors


def _scan(
    path: str, max_bytes: int, max_member_bytes: int
) -> tuple[dict[str, bytes], list[str], str]:
    """Regular, safely named members of the tar at ``path``, the problems found, and the
    SHA-256 hex of the bytes read (one read, so the hash and the members agree)."""
    members: dict[str, bytes] = {}
    errors: list[str] = []
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the read forever
            return {}, [f"{path!r}: not a regular file"], ""
        with open(path, "rb") as fh:
            blob = fh.read(max_bytes + 1)
    except (OSError, ValueError) as exc:  # ValueError: a path with NUL in it
        return {}, [f"{path!r}: cannot read ({exc})"], ""
    if len(blob) > max_bytes:
        return {}, [f"{path}: larger than the {max_bytes}-byte cap"], ""
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:", encoding="utf-8") as tf:
            while (info := tf.next()) is not None:
                if len(members) + len(errors) >= MAX_MEMBERS:
                    errors.append(f"more than {MAX_MEMBERS} members; stopped reading")
                    break
                problem = _name_problem(info.name)
                if problem is not None:
                    errors.append(f"member {info.name!r}: unsafe name ({problem})")
                elif info.type not in _REGULAR:
                    kind = _TYPE_NAMES.get(info.type, f"type {info.type!r}")
                    errors.append(f"member {info.name!r}: {kind} not allowed (regular files only)")
                elif info.name in members:
                    errors.append(f"member {info.name!r}: duplicate")
                elif info.size > max_member_bytes:
                    errors.append(f"member {info.name!r}: {info.size} bytes exceeds the cap")
                else:
                    stream = tf.extractfile(info)
                    members[info.name] = stream.read() if stream is not None else b""
            if blob[tf.offset :].strip(b"\0"):
                errors.append(
                    f"unreadable data at byte {tf.offset} (damaged header or trailing "
                    "bytes after the end of the archive)"
                )
    except (tarfile.TarError, OSError, EOFError, ValueError, UnicodeError) as exc:
        errors.append(f"{path}: not a readable tar ({type(exc).__name__}: {exc})")
    return members, errors, _sha256(blob)


def _verify(
    target: str, expected_sha256: str | None, max_bytes: int, max_member_bytes: int
) -> tuple[BundleReport, dict[str, bytes]]:
    members, errors, digest = _scan(target, max_bytes, max_member_bytes)
    if expected_sha256 is not None and digest and digest != expected_sha256:
        errors.append(f"{target}: SHA-256 {digest} differs from expected_sha256")
    manifest = members.pop(MANIFEST_NAME, None)
    if manifest is None:
        if not errors or members:
            errors.append(f"{MANIFEST_NAME} is missing; no file can be checked")
        return BundleReport(False, [], [], sorted(members), errors), members
    entries, manifest_errors = _parse_manifest(manifest)
    errors += manifest_errors
    tampered, missing = [], []
    for entry in entries:
        data = members.get(entry.name)
        if data is None:
            missing.append(entry.name)
        elif len(data) != entry.size or _sha256(data) != entry.sha256:
            tampered.append(entry.name)
    listed = {e.name for e in entries}
    extra = sorted(n for n in members if n not in listed)
    ok = not (tampered or missing or extra or errors)
    return BundleReport(ok, tampered, missing, extra, errors), members


def verify_bundle(
    path: str | os.PathLike[str],
    *,
    expected_sha256: str | None = None,
    max_bytes: int = MAX_BUNDLE_BYTES,
    max_member_bytes: int = MAX_MEMBER_BYTES,
) -> BundleReport:
    """Check a bundle against its manifest without extracting it; never raises on bad bytes.

    Args:
        path: the tar file (a missing or unreadable file is reported in ``errors``).
        expected_sha256: the whole tar's SHA-256 hex as :func:`write_bundle` reported it;
            a difference is an error (the outside anchor against a rewritten manifest).
        max_bytes: refuse files larger than this (bytes).
        max_member_bytes: refuse members larger than this (bytes).
    """
    return _verify(os.fspath(path), expected_sha256, max_bytes, max_member_bytes)[0]


def read_bundle(
    path: str | os.PathLike[str], *, expected_sha256: str | None = None
) -> dict[str, bytes]:
    """The files of a verified bundle (manifest excluded), as given to :func:`write_bundle`.

    Raises:
        CorruptionError: the bundle does not verify; the message summarises the report.
    """
    target = os.fspath(path)
    report, members = _verify(target, expected_sha256, MAX_BUNDLE_BYTES, MAX_MEMBER_BYTES)
    if not report.ok:
        problems = (
            [f"tampered {n}" for n in report.tampered]
            + [f"missing {n}" for n in report.missing]
            + [f"extra {n}" for n in report.extra]
            + report.errors
        )
        raise CorruptionError(
            f"bundle {target} does not verify: {'; '.join(problems[:8])}", file=target
        )
    return members
