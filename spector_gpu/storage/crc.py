"""CRC32C (Castagnoli), the one checksum helper of the store.

Single buffers go through the ``crc32c`` package (hardware accelerated). Many fixed-length
rows are checked column-wise in numpy — one table lookup per byte position across all rows at
once — so a batch read verifies its CRCs without a Python loop per record.
"""

from __future__ import annotations

import crc32c as _crc32c
import numpy as np

from .native import native as _native

__all__ = ["crc32c", "crc32c_rows", "verify_rows"]

_POLY = 0x82F63B78


def _make_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table[i] = c
    return table


_TABLE = _make_table()

_VECTOR_MIN_ROWS = 48  # below this, a per-row call into the C library is faster


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC32C of ``data`` (continuing from ``value``), as an unsigned 32-bit int."""
    return _crc32c.crc32c(data, value) & 0xFFFFFFFF


def crc32c_rows(rows: np.ndarray) -> np.ndarray:
    """CRC32C of each row of a C-contiguous ``uint8 (n, length)`` array -> ``uint32 (n,)``."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    if rows.ndim != 2:
        raise ValueError("crc32c_rows expects a 2-D uint8 array")
    n = rows.shape[0]
    if _native is not None and rows.shape[1]:
        return np.frombuffer(
            _native.crc32c_rows(rows.tobytes(), rows.shape[1]), dtype="<u4"
        ).astype(np.uint32)
    if n < _VECTOR_MIN_ROWS:
        return np.array([crc32c(r.tobytes()) for r in rows], dtype=np.uint32)
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    for j in range(rows.shape[1]):
        crc = _TABLE[(crc ^ rows[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def verify_rows(records: np.ndarray) -> np.ndarray:
    """For ``uint8 (n, stride)`` records whose last 4 bytes hold the little-endian CRC32C of
    ``[0, stride-4)``, return a ``bool (n,)`` mask of rows whose CRC matches."""
    records = np.ascontiguousarray(records, dtype=np.uint8)
    stored = records[:, -4:].copy().view("<u4").reshape(-1)
    ok: np.ndarray = crc32c_rows(records[:, :-4]) == stored
    return ok
