"""The format of a forensic bundle (:mod:`.bundle`): its limits, safe member names and the
``manifest.json`` codec.

The manifest is canonical JSON (sorted keys, no whitespace, UTF-8)::

    {"files":[{"name":"a.json","sha256":"<64 hex>","size":12},...],
     "format":"spector_gpu.bundle","version":1}

with one entry per file except the manifest itself, sorted by name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "MANIFEST_NAME",
    "MAX_BUNDLE_BYTES",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_NAME_BYTES",
    "ManifestEntry",
    "encode_manifest",
    "name_problem",
    "parse_manifest",
    "sha256_hex",
]

MANIFEST_NAME = "manifest.json"
BUNDLE_FORMAT = "spector_gpu.bundle"
BUNDLE_VERSION = 1
MAX_NAME_BYTES = 255
MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_BUNDLE_BYTES = 1024 * 1024 * 1024
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_HEX64 = re.compile(r"[0-9a-f]{64}", re.ASCII)


@dataclass(frozen=True)
class ManifestEntry:
    """One file of a bundle: ``name``, SHA-256 hex of its bytes, ``size`` in bytes."""

    name: str
    sha256: str
    size: int


def name_problem(name: object) -> str | None:
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


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data``, 64 lower-case hex characters."""
    return hashlib.sha256(data).hexdigest()


def _canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def encode_manifest(entries: Iterable[ManifestEntry]) -> bytes:
    """The canonical ``manifest.json`` bytes listing ``entries`` (already sorted by name)."""
    manifest = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "files": [{"name": e.name, "sha256": e.sha256, "size": e.size} for e in entries],
    }
    return _canonical_json(manifest)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def parse_manifest(data: bytes) -> tuple[list[ManifestEntry], list[str]]:
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
        problem = name_problem(name)
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
