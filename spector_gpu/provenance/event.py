"""One event of the provenance chain and its canonical byte codec (DESIGN §7, seed 004).

Canonical bytes (all integers little-endian; ``str`` fields UTF-8)::

    0   magic      u32  0x544E5645 ("EVNT")
    4   version    u16  1
    6   flags      u16  0
    8   seq        u64
    16  ts_ms      i64  Unix epoch milliseconds
    24  kind       u32 length + bytes   (1..64 B)
    ..  memory_id  u32 length + bytes   (0..256 B)
    ..  n_pairs    u32                  (0..256), then per pair, keys strictly ascending by
                                        their UTF-8 bytes:
          key      u32 length + bytes   (1..256 B)
          tag      u8   1 = int, 2 = str
          value    i64 | u32 length + bytes (0..65536 B)
    ..  prev_hash  u32 length (=32) + 32 bytes

An encoded event record is the canonical bytes followed by ``sig_len u32`` (0 or 64) and the
Ed25519 signature over the canonical bytes. :func:`decode_event` accepts only this canonical
form, so ``encode_event(decode_event(b)) == b`` for every accepted ``b``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spector_gpu.errors import CorruptionError, StoreFormatError, ValidationError

__all__ = [
    "EVENT_MAGIC",
    "EVENT_VERSION",
    "GENESIS_HASH",
    "MAX_ID_BYTES",
    "MAX_KEY_BYTES",
    "MAX_KIND_BYTES",
    "MAX_PAIRS",
    "MAX_VALUE_BYTES",
    "Event",
    "canonical_bytes",
    "check_int",
    "check_utf8",
    "decode_event",
    "encode_event",
    "event_hash",
]

GENESIS_HASH = bytes(32)
EVENT_MAGIC = 0x544E5645  # b"EVNT" little-endian
EVENT_VERSION = 1
MAX_KIND_BYTES = 64
MAX_ID_BYTES = 256
MAX_PAIRS = 256
MAX_KEY_BYTES = 256
MAX_VALUE_BYTES = 65536
_TAG_INT, _TAG_STR = 1, 2
_SIG_BYTES = 64
_I64 = (-(2**63), 2**63 - 1)
_HEAD = struct.Struct("<IHHQq")


@dataclass(frozen=True)
class Event:
    """One write, as recorded in the chain.

    Attributes:
        seq: position in the chain, contiguous from 0.
        ts_ms: wall-clock time of the write, Unix epoch milliseconds.
        kind: what happened (``"remember"``, ``"consolidate"``, …), 1–64 UTF-8 bytes.
        memory_id: the memory written (TSID string), may be empty for store-level events.
        payload: small typed facts about the write; values are ``str`` or ``int`` (i64).
        prev_hash: SHA-256 of the previous event's canonical bytes (32 zero bytes at seq 0).
        signature: Ed25519 signature (64 B) over this event's canonical bytes, or ``None``.
    """

    seq: int
    ts_ms: int
    kind: str
    memory_id: str
    payload: Mapping[str, str | int]
    prev_hash: bytes
    signature: bytes | None = None


def check_utf8(value: object, name: str, lo: int, hi: int) -> bytes:
    """``value`` as UTF-8 bytes, ``lo``..``hi`` of them; ``ValidationError`` naming
    ``event.<name>`` otherwise."""
    if not isinstance(value, str):
        raise ValidationError(f"event.{name}: expected str, got {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"event.{name}: not encodable as UTF-8 (lone surrogate)") from None
    if not lo <= len(raw) <= hi:
        raise ValidationError(f"event.{name}: {len(raw)} UTF-8 bytes; allowed {lo}..{hi}")
    return raw


def check_int(value: object, name: str, lo: int, hi: int) -> int:
    """``value`` when it is an int (not a bool) in ``lo``..``hi``; ``ValidationError`` naming
    ``event.<name>`` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(f"event.{name}: expected int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValidationError(f"event.{name}: {value} is outside {lo}..{hi}")
    return value


def canonical_bytes(event: Event) -> bytes:
    """The bytes that are hashed and signed (layout in the module docstring).

    Raises:
        ValidationError: a field has the wrong type or breaks a size cap.
    """
    seq = check_int(event.seq, "seq", 0, 2**64 - 1)
    parts = [_HEAD.pack(EVENT_MAGIC, EVENT_VERSION, 0, seq, check_int(event.ts_ms, "ts_ms", *_I64))]
    for raw in (
        check_utf8(event.kind, "kind", 1, MAX_KIND_BYTES),
        check_utf8(event.memory_id, "memory_id", 0, MAX_ID_BYTES),
    ):
        parts += [struct.pack("<I", len(raw)), raw]
    if not isinstance(event.payload, Mapping):
        raise ValidationError(f"event.payload: expected a mapping, got {type(event.payload)}")
    if len(event.payload) > MAX_PAIRS:
        raise ValidationError(f"event.payload: {len(event.payload)} keys; at most {MAX_PAIRS}")
    pairs = sorted(
        (check_utf8(k, "payload key", 1, MAX_KEY_BYTES), v) for k, v in event.payload.items()
    )
    parts.append(struct.pack("<I", len(pairs)))
    for key, value in pairs:
        label = f"payload[{key.decode()!r}]"
        parts += [struct.pack("<I", len(key)), key]
        if isinstance(value, str):
            raw = check_utf8(value, label, 0, MAX_VALUE_BYTES)
            parts += [struct.pack("<BI", _TAG_STR, len(raw)), raw]
        else:
            parts.append(struct.pack("<Bq", _TAG_INT, check_int(value, label, *_I64)))
    prev = event.prev_hash
    if not isinstance(prev, bytes) or len(prev) != 32:
        raise ValidationError("event.prev_hash: expected 32 bytes (SHA-256)")
    parts += [struct.pack("<I", 32), prev]
    return b"".join(parts)


def event_hash(event: Event) -> bytes:
    """SHA-256 of the event's canonical bytes: the next event's ``prev_hash``."""
    return hashlib.sha256(canonical_bytes(event)).digest()


def encode_event(event: Event) -> bytes:
    """Record bytes of an event: canonical bytes, ``sig_len u32``, signature."""
    sig = event.signature
    if sig is not None and (not isinstance(sig, bytes) or len(sig) != _SIG_BYTES):
        raise ValidationError(f"event.signature: expected {_SIG_BYTES} bytes or None")
    sig = sig or b""
    return canonical_bytes(event) + struct.pack("<I", len(sig)) + sig


class _Reader:
    """Bounds-checked cursor over one record; every overrun is a CorruptionError."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise CorruptionError(f"event record: truncated in {what} at byte {self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def text(self, what: str, lo: int, hi: int) -> str:
        (n,) = self.unpack("<I", f"{what} length")
        if not lo <= n <= hi:
            raise CorruptionError(f"event record: {what} length {n} outside {lo}..{hi}")
        try:
            return self.take(n, what).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptionError(f"event record: {what} is not valid UTF-8") from None


def decode_event(data: bytes) -> Event:
    """Decode one event record written by :func:`encode_event`.

    Raises:
        StoreFormatError: wrong magic or unsupported version.
        CorruptionError: truncation, a length over its cap, bad UTF-8, unsorted or duplicate
            payload keys, an unknown value tag, nonzero flags, or trailing bytes.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CorruptionError(f"event record: expected bytes, got {type(data).__name__}")
    r = _Reader(bytes(data))
    magic, version, flags, seq, ts_ms = r.unpack(_HEAD.format, "header")
    if magic != EVENT_MAGIC:
        raise StoreFormatError(f"event record: magic 0x{magic:08X}, expected 0x{EVENT_MAGIC:08X}")
    if version != EVENT_VERSION:
        raise StoreFormatError(f"event record: version {version} unsupported (this reads 1)")
    if flags != 0:
        raise CorruptionError(f"event record: flags 0x{flags:04X} must be 0")
    kind = r.text("kind", 1, MAX_KIND_BYTES)
    memory_id = r.text("memory_id", 0, MAX_ID_BYTES)
    (n_pairs,) = r.unpack("<I", "payload count")
    if n_pairs > MAX_PAIRS:
        raise CorruptionError(f"event record: {n_pairs} payload keys; at most {MAX_PAIRS}")
    payload: dict[str, str | int] = {}
    last_key = b""
    for _ in range(n_pairs):
        key = r.text("payload key", 1, MAX_KEY_BYTES)
        if key.encode("utf-8") <= last_key:
            raise CorruptionError(f"event record: payload key {key!r} out of order or repeated")
        last_key = key.encode("utf-8")
        (tag,) = r.unpack("<B", "payload tag")
        if tag == _TAG_INT:
            payload[key] = r.unpack("<q", "payload int")[0]
        elif tag == _TAG_STR:
            payload[key] = r.text("payload value", 0, MAX_VALUE_BYTES)
        else:
            raise CorruptionError(f"event record: unknown payload tag {tag} for key {key!r}")
    (hash_len,) = r.unpack("<I", "prev_hash length")
    if hash_len != 32:
        raise CorruptionError(f"event record: prev_hash length {hash_len}, expected 32")
    prev_hash = r.take(32, "prev_hash")
    (sig_len,) = r.unpack("<I", "signature length")
    if sig_len not in (0, _SIG_BYTES):
        raise CorruptionError(f"event record: signature length {sig_len}, expected 0 or 64")
    signature = r.take(sig_len, "signature") if sig_len else None
    if r.pos != len(r.data):
        raise CorruptionError(f"event record: {len(r.data) - r.pos} trailing bytes")
    return Event(seq, ts_ms, kind, memory_id, payload, prev_hash, signature)
