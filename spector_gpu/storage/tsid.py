"""TSID memory ids: 64 bits = 42-bit ms since 2024-06-01T00:00:00Z | 10-bit node | 12-bit seq.

Written as 13 Crockford base32 characters (``0-9A-Z`` minus I L O U; the first character carries
the top 4 bits), so string order is time order. Decoding is case-insensitive and maps O→0,
I/L→1. Ids from one generator are strictly increasing, even within one millisecond or when the
clock steps back.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from ..errors import ValidationError

__all__ = [
    "TSID_EPOCH_MS",
    "TsidGenerator",
    "decode_tsid",
    "encode_tsid",
    "encode_tsids",
    "is_tsid",
    "tsid_time_ms",
]

TSID_EPOCH_MS = 1_717_200_000_000  # 2024-06-01T00:00:00Z
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(_ALPHABET)}
_DECODE.update({c.lower(): i for c, i in list(_DECODE.items())})
_DECODE.update({"O": 0, "o": 0, "I": 1, "i": 1, "L": 1, "l": 1})
_MAX_MS = (1 << 42) - 1


def encode_tsid(value: int) -> str:
    """13-character Crockford base32 form of a 64-bit TSID."""
    if not 0 <= value < (1 << 64):
        raise ValidationError(f"TSID value out of range: {value}")
    chars = []
    for _ in range(13):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


_ALPHABET_CODES = np.array([ord(c) for c in _ALPHABET], dtype="<u4")  # UCS-4, as <U stores
_SHIFTS = np.arange(60, -1, -5, dtype=np.uint64)  # 13 digits, most significant first


def encode_tsids(values: np.ndarray) -> np.ndarray:
    """Vectorised :func:`encode_tsid`: ``int64``/``uint64 (n,)`` → ``<U13 (n,)``."""
    v = np.asarray(values).astype(np.uint64)
    digits = (v[:, None] >> _SHIFTS[None, :]) & np.uint64(31)
    chars = _ALPHABET_CODES[digits.astype(np.intp)]  # (n, 13) code points, C order
    return chars.view("<U13").reshape(-1)


def decode_tsid(text: str) -> int:
    """Parse a TSID string (case-insensitive, O→0, I/L→1); ``ValidationError`` if malformed."""
    if not isinstance(text, str) or len(text) != 13:
        raise ValidationError(f"memory id must be a 13-character TSID string, got {text!r}")
    value = 0
    for ch in text:
        digit = _DECODE.get(ch)
        if digit is None:
            raise ValidationError(
                f"memory id {text!r} has a character outside Crockford base32: {ch!r}"
            )
        value = (value << 5) | digit
    if value >= (1 << 64):
        raise ValidationError(f"memory id {text!r} exceeds 64 bits (first character must be 0-F)")
    return value


def is_tsid(text: object) -> bool:
    try:
        decode_tsid(text)  # type: ignore[arg-type]
    except ValidationError:
        return False
    return True


def tsid_time_ms(value: int) -> int:
    """Unix epoch milliseconds encoded in a TSID."""
    return (value >> 22) + TSID_EPOCH_MS


class TsidGenerator:
    """Monotonic TSID source for one process (thread-safe).

    ``node`` (0..1023) defaults to a value derived from the pid so that concurrent processes
    rarely collide; the store additionally refuses duplicate ids.
    """

    def __init__(self, node: int | None = None) -> None:
        if node is None:
            node = (os.getpid() ^ int.from_bytes(os.urandom(2), "little")) & 0x3FF
        if not 0 <= node < 1024:
            raise ValidationError(f"TSID node must be in [0, 1023], got {node}")
        self.node = node
        self._last = 0
        self._lock = threading.Lock()

    def next_int(self, now_ms: int | None = None) -> int:
        ms = (int(time.time() * 1000) if now_ms is None else now_ms) - TSID_EPOCH_MS
        ms = min(max(ms, 0), _MAX_MS)
        with self._lock:
            candidate = (ms << 22) | (self.node << 12)
            if candidate <= self._last:
                candidate = self._last + 1  # same ms (or clock stepped back): bump the sequence
            self._last = candidate
            return candidate

    def next_ints(self, n: int) -> list[int]:
        """``n`` strictly increasing TSIDs."""
        if n <= 0:
            return []
        first = self.next_int()
        with self._lock:
            values = list(range(first, first + n))
            self._last = max(self._last, values[-1])
        return values

    def next(self) -> str:
        return encode_tsid(self.next_int())
