"""Snapshots of derived indexes: named numpy arrays in one CRC-protected file.

Layout: ``b"SPSNAP01"`` · header length u32 · header (JSON: ``meta`` and, per array, name,
dtype, shape, offset, nbytes) · array bytes (64-byte aligned) · crc32c u32 over everything
before it. Only plain numeric/bytes dtypes are accepted (never objects, never pickle). Written
atomically (``.partial`` → fsync → rename → directory fsync). A missing or damaged snapshot is
never an error for the store: its owner rebuilds from the primary regions.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorruptionError
from ..storage.crc import crc32c
from ..storage.io import atomic_write, read_regular
from ..storage.killpoints import killpoint

__all__ = [
    "arrays_to_strings",
    "blocked_by_directory",
    "read_snapshot",
    "strings_to_arrays",
    "write_snapshot",
]

log = logging.getLogger(__name__)

_MAGIC = b"SPSNAP01"
_ALLOWED_KINDS = set("biufS")
_MAX_HEADER = 1 << 20


def blocked_by_directory(path: Path, what: str, cost: str) -> bool:
    r"""Whether a directory (not ours, never removed) sits where snapshot ``path`` goes; if so
    it is logged once per call with what the snapshot is and what its absence ``cost``\ s."""
    if not (os.path.isdir(path) and not os.path.islink(path)):
        return False
    log.warning("%s is a directory, not the %s: %s; remove it to restore them", path, what, cost)
    return True


def write_snapshot(
    path: str | os.PathLike[str],
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any],
    *,
    durable: bool = True,
) -> None:
    descriptors = []
    offset = 0
    blobs = []
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype.kind not in _ALLOWED_KINDS:
            raise ValueError(f"snapshot array {name!r} has unsupported dtype {arr.dtype}")
        pad = (-offset) % 64
        offset += pad
        blobs.append(b"\0" * pad)
        descriptors.append(
            {
                "name": name,
                "dtype": arr.dtype.str,
                "shape": list(arr.shape),
                "offset": offset,
                "nbytes": arr.nbytes,
            }
        )
        blobs.append(arr.tobytes())
        offset += arr.nbytes
    header = json.dumps({"meta": dict(meta), "arrays": descriptors}, sort_keys=True).encode()
    body = _MAGIC + struct.pack("<I", len(header)) + header
    pad = (-len(body)) % 64
    body += b"\0" * pad + b"".join(blobs)
    data = body + struct.pack("<I", crc32c(body))
    atomic_write(
        path, data, durable=durable, before_replace=lambda: killpoint("snapshot.after_partial")
    )
    killpoint("snapshot.after_replace")


def read_snapshot(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Load and validate a snapshot; ``CorruptionError`` if anything is off."""
    p = Path(path)
    data = read_regular(p)  # never through a symbolic link
    where = str(p)
    if len(data) < len(_MAGIC) + 8 or not data.startswith(_MAGIC):
        raise CorruptionError(f"{where}: not a snapshot file", file=where)
    (stored,) = struct.unpack_from("<I", data, len(data) - 4)
    if crc32c(data[:-4]) != stored:
        raise CorruptionError(f"{where}: snapshot CRC mismatch", file=where)
    (hlen,) = struct.unpack_from("<I", data, len(_MAGIC))
    start = len(_MAGIC) + 4
    if hlen > _MAX_HEADER or start + hlen > len(data) - 4:
        raise CorruptionError(f"{where}: snapshot header length out of range", file=where)
    try:
        header = json.loads(data[start : start + hlen])
        meta = dict(header["meta"])
        descriptors = list(header["arrays"])
    except (ValueError, KeyError, TypeError):
        raise CorruptionError(f"{where}: snapshot header is not valid JSON", file=where) from None
    base = start + hlen + ((-(start + hlen)) % 64)
    end = len(data) - 4
    arrays: dict[str, np.ndarray] = {}
    for d in descriptors:
        try:
            dtype = np.dtype(d["dtype"])
            shape = tuple(int(x) for x in d["shape"])
            off, nbytes = int(d["offset"]), int(d["nbytes"])
            name = str(d["name"])
        except (TypeError, ValueError, KeyError):
            raise CorruptionError(f"{where}: bad array descriptor", file=where) from None
        if dtype.kind not in _ALLOWED_KINDS or any(s < 0 for s in shape):
            raise CorruptionError(
                f"{where}: array {name!r} has a forbidden dtype or shape", file=where
            )
        if nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise CorruptionError(
                f"{where}: array {name!r} size does not match its shape", file=where
            )
        if off < 0 or base + off + nbytes > end:
            raise CorruptionError(f"{where}: array {name!r} lies outside the file", file=where)
        arrays[name] = (
            np.frombuffer(
                data, dtype=dtype, count=nbytes // max(dtype.itemsize, 1), offset=base + off
            )
            .reshape(shape)
            .copy()
        )
    return meta, arrays


def strings_to_arrays(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Pack strings as (utf-8 blob uint8, offsets int64 of length n+1)."""
    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        offsets[1:] = np.cumsum([len(e) for e in encoded])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets


def arrays_to_strings(blob: np.ndarray, offsets: np.ndarray, *, where: str) -> list[str]:
    raw = blob.tobytes()
    if (
        offsets.ndim != 1
        or len(offsets) < 1
        or offsets[0] != 0
        or offsets[-1] != len(raw)
        or (np.diff(offsets) < 0).any()
    ):
        raise CorruptionError(f"{where}: string offsets are inconsistent", file=where)
    o = offsets.tolist()
    try:
        return [raw[o[i] : o[i + 1]].decode("utf-8", "surrogatepass") for i in range(len(o) - 1)]
    except UnicodeDecodeError:
        raise CorruptionError(f"{where}: string blob is not UTF-8", file=where) from None
