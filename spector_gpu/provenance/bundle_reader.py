"""Reading a forensic bundle back (:mod:`.bundle`): verification against its manifest without
extracting anything to disk, and the verified files.

Links, devices, directories, sparse members, unsafe names, duplicates and oversized input are
refused; a truncated or non-tar file is reported, never raised.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from dataclasses import dataclass, field
from typing import BinaryIO

from spector_gpu.errors import CorruptionError

from .manifest import (
    MANIFEST_NAME,
    MAX_BUNDLE_BYTES,
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    name_problem,
    parse_manifest,
    sha256_hex,
)

__all__ = ["BundleReport", "read_bundle", "verify_bundle"]

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


_CHUNK = 1 << 20  # bytes hashed per read: a bundle is streamed, never held whole


def _open(path: str, max_bytes: int) -> tuple[BinaryIO | None, str | None]:
    """The regular file at ``path`` opened for reading, or the problem that kept it closed: a
    file over ``max_bytes`` is refused by its size before a byte is read."""
    too_large = f"{path}: larger than the {max_bytes}-byte cap"
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read forever
            return None, f"{path!r}: not a regular file"
        if st.st_size > max_bytes:
            return None, too_large
        fh = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except (OSError, ValueError) as exc:  # ValueError: a path with NUL in it
        return None, f"{path!r}: cannot read ({exc})"
    held = os.fstat(fh.fileno())  # the file opened, not the name stat'ed above
    problem = None
    if not stat.S_ISREG(held.st_mode):
        problem = f"{path!r}: not a regular file"
    elif held.st_size > max_bytes:
        problem = too_large
    if problem is not None:
        fh.close()
        return None, problem
    return fh, None


def _digest(fh: BinaryIO, max_bytes: int) -> tuple[str, int]:
    """SHA-256 hex and length of the file from its start, read in chunks; length -1 when it
    grew past ``max_bytes`` while read."""
    sha, n = hashlib.sha256(), 0
    while chunk := fh.read(_CHUNK):
        n += len(chunk)
        if n > max_bytes:
            return "", -1
        sha.update(chunk)
    return sha.hexdigest(), n


def _members(
    fh: BinaryIO, max_member_bytes: int, errors: list[str]
) -> tuple[dict[str, bytes], int]:
    """Regular, safely named members of the tar open in ``fh``, and where the archive ended."""
    members: dict[str, bytes] = {}
    fh.seek(0)
    with tarfile.open(fileobj=fh, mode="r:", encoding="utf-8") as tf:
        while (info := tf.next()) is not None:
            if len(members) + len(errors) >= MAX_MEMBERS:
                errors.append(f"more than {MAX_MEMBERS} members; stopped reading")
                break
            problem = name_problem(info.name)
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
        return members, tf.offset


def _zeros_from(fh: BinaryIO, offset: int) -> bool:
    """Whether every byte of the file from ``offset`` on is NUL (a tar's end padding)."""
    fh.seek(offset)
    while chunk := fh.read(_CHUNK):
        if chunk.strip(b"\0"):
            return False
    return True


def _scan(
    path: str, max_bytes: int, max_member_bytes: int
) -> tuple[dict[str, bytes], list[str], str]:
    """Regular, safely named members of the tar at ``path``, the problems found, and the
    SHA-256 hex of its bytes. The file is streamed twice (hash, then members): a file whose
    size or modification time moved in between is reported, as its members and its hash
    might not agree."""
    fh, problem = _open(path, max_bytes)
    if fh is None:
        return {}, [str(problem)], ""
    errors: list[str] = []
    members: dict[str, bytes] = {}
    with fh:
        before = os.fstat(fh.fileno())
        digest, n = _digest(fh, max_bytes)
        if n < 0:
            return {}, [f"{path}: larger than the {max_bytes}-byte cap"], ""
        try:
            members, end = _members(fh, max_member_bytes, errors)
            if not _zeros_from(fh, end):
                errors.append(
                    f"unreadable data at byte {end} (damaged header or trailing "
                    "bytes after the end of the archive)"
                )
        except (tarfile.TarError, OSError, EOFError, ValueError, UnicodeError) as exc:
            errors.append(f"{path}: not a readable tar ({type(exc).__name__}: {exc})")
        after = os.fstat(fh.fileno())
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        errors.append(f"{path}: changed while it was read; verify it again")
    return members, errors, digest


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
    entries, manifest_errors = parse_manifest(manifest)
    errors += manifest_errors
    tampered, missing = [], []
    for entry in entries:
        data = members.get(entry.name)
        if data is None:
            missing.append(entry.name)
        elif len(data) != entry.size or sha256_hex(data) != entry.sha256:
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
