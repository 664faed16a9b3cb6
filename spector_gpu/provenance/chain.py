"""Hash-chained, optionally Ed25519-signed event log of every write (DESIGN §7, seed 004).

Each :class:`Event` carries ``prev_hash`` = SHA-256 of the previous event's *canonical bytes*
(the genesis event uses 32 zero bytes) and a sequence number contiguous from 0, so editing,
dropping, reordering or forking an event breaks the chain at the next event.
:func:`verify_chain` reports those breaks, and bad or missing signatures separately.

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

Limits: the chain alone cannot notice a rewritten or truncated *tail* (nothing follows it).
Anchor it by keeping :attr:`ChainReport.head_hash` elsewhere and passing it back as
``expected_head``, or sign events and verify with the public key.
"""

from __future__ import annotations

import hashlib
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from spector_gpu.errors import CorruptionError, MissingExtraError, StoreFormatError, ValidationError

__all__ = [
    "GENESIS_HASH",
    "ChainBreak",
    "ChainReport",
    "Ed25519Signer",
    "Event",
    "EventChain",
    "MemoryRecordLog",
    "RecordLog",
    "canonical_bytes",
    "decode_event",
    "encode_event",
    "event_hash",
    "verify_chain",
    "verify_signature",
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


def _utf8(value: object, name: str, lo: int, hi: int) -> bytes:
    if not isinstance(value, str):
        raise ValidationError(f"event.{name}: expected str, got {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"event.{name}: not encodable as UTF-8 (lone surrogate)") from None
    if not lo <= len(raw) <= hi:
        raise ValidationError(f"event.{name}: {len(raw)} UTF-8 bytes; allowed {lo}..{hi}")
    return raw


def _int(value: object, name: str, lo: int, hi: int) -> int:
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
    seq = _int(event.seq, "seq", 0, 2**64 - 1)
    parts = [_HEAD.pack(EVENT_MAGIC, EVENT_VERSION, 0, seq, _int(event.ts_ms, "ts_ms", *_I64))]
    for raw in (
        _utf8(event.kind, "kind", 1, MAX_KIND_BYTES),
        _utf8(event.memory_id, "memory_id", 0, MAX_ID_BYTES),
    ):
        parts += [struct.pack("<I", len(raw)), raw]
    if not isinstance(event.payload, Mapping):
        raise ValidationError(f"event.payload: expected a mapping, got {type(event.payload)}")
    if len(event.payload) > MAX_PAIRS:
        raise ValidationError(f"event.payload: {len(event.payload)} keys; at most {MAX_PAIRS}")
    pairs = sorted((_utf8(k, "payload key", 1, MAX_KEY_BYTES), v) for k, v in event.payload.items())
    parts.append(struct.pack("<I", len(pairs)))
    for key, value in pairs:
        label = f"payload[{key.decode()!r}]"
        parts += [struct.pack("<I", len(key)), key]
        if isinstance(value, str):
            raw = _utf8(value, label, 0, MAX_VALUE_BYTES)
            parts += [struct.pack("<BI", _TAG_STR, len(raw)), raw]
        else:
            parts.append(struct.pack("<Bq", _TAG_INT, _int(value, label, *_I64)))
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


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise MissingExtraError(
            "Ed25519 signing needs the 'cryptography' package; "
            "install it with: pip install 'spector-gpu[sign]'"
        ) from None
    return ed25519


def _raw(key: Any, private: bool) -> bytes:
    from cryptography.hazmat.primitives import serialization as ser

    if private:
        return bytes(key.private_bytes(ser.Encoding.Raw, ser.PrivateFormat.Raw, ser.NoEncryption()))
    return bytes(key.public_key().public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw))


class Ed25519Signer:
    """Signs events with an Ed25519 private key (optional extra ``sign``: ``cryptography``)."""

    def __init__(self, private_key_bytes: bytes) -> None:
        """Wrap a raw 32-byte Ed25519 private key (ValidationError on any other length)."""
        if not isinstance(private_key_bytes, bytes) or len(private_key_bytes) != 32:
            raise ValidationError("signer: private key must be 32 raw bytes (Ed25519 seed)")
        self._key = _crypto().Ed25519PrivateKey.from_private_bytes(private_key_bytes)

    @classmethod
    def generate(cls) -> Ed25519Signer:
        """A signer with a fresh random key; persist :attr:`private_key_bytes` to reuse it."""
        return cls(_raw(_crypto().Ed25519PrivateKey.generate(), private=True))

    @property
    def private_key_bytes(self) -> bytes:
        """Raw 32-byte private key. Secret: store it as you would a password."""
        return _raw(self._key, private=True)

    @property
    def public_key_bytes(self) -> bytes:
        """Raw 32-byte public key, for :func:`verify_chain`."""
        return _raw(self._key, private=False)

    def sign(self, data: bytes) -> bytes:
        """64-byte Ed25519 signature of ``data``."""
        return bytes(self._key.sign(data))

    def __repr__(self) -> str:  # never show the private key
        return f"Ed25519Signer(public_key={self.public_key_bytes.hex()})"


def _public_key(public_key: bytes) -> Any:
    if not isinstance(public_key, bytes) or len(public_key) != 32:
        raise ValidationError("public_key: must be 32 raw bytes (Ed25519)")
    return _crypto().Ed25519PublicKey.from_public_bytes(public_key)


def _verify(key: Any, signature: bytes, data: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(signature, data)
    except InvalidSignature:
        return False
    return True


def verify_signature(public_key: bytes, signature: bytes, data: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``data`` under ``public_key``.

    Raises:
        ValidationError: ``public_key`` is not 32 raw bytes.
        MissingExtraError: ``cryptography`` is not installed (extra ``sign``).
    """
    return _verify(_public_key(public_key), signature, data)


class RecordLog(Protocol):
    """Append-only storage of opaque records (backed by a CRC-protected region in a store)."""

    def append(self, data: bytes) -> None:
        """Durably append one record."""

    def records(self) -> Iterator[bytes]:
        """Every record, oldest first."""


class MemoryRecordLog:
    """A :class:`RecordLog` held in a Python list (tests, scratch chains)."""

    def __init__(self, items: list[bytes] | None = None) -> None:
        self.items: list[bytes] = list(items or [])

    def append(self, data: bytes) -> None:
        self.items.append(bytes(data))

    def records(self) -> Iterator[bytes]:
        return iter(list(self.items))


class EventChain:
    """Appends hash-chained (and, with a signer, signed) events to a :class:`RecordLog`.

    On construction the log is scanned to its last record, which alone is decoded to find the
    next ``seq`` and ``prev_hash`` (full verification is :func:`verify_chain`'s job). Use
    :meth:`resume` when the head is already known. Appends are serialised by a lock.
    """

    def __init__(self, log: RecordLog, *, signer: Ed25519Signer | None = None) -> None:
        last: bytes | None = None
        count = 0
        for record in log.records():
            last = record
            count += 1
        if last is None:
            self._setup(log, signer, -1, GENESIS_HASH)
            return
        try:
            event = decode_event(last)
        except CorruptionError as exc:
            raise CorruptionError(
                f"event chain: last record (#{count - 1}) is undecodable ({exc}); "
                "run verify_chain to locate the damage"
            ) from exc
        self._setup(log, signer, event.seq, event_hash(event))

    @classmethod
    def resume(
        cls, log: RecordLog, last_seq: int, last_hash: bytes, *, signer: Ed25519Signer | None = None
    ) -> EventChain:
        """Continue a chain whose head is known, without scanning the log.

        ``last_seq`` is the head event's seq (``-1`` for an empty chain, with ``last_hash`` the
        32 zero bytes); ``last_hash`` is its :func:`event_hash`.
        """
        _int(last_seq, "last_seq", -1, 2**64 - 2)
        if not isinstance(last_hash, bytes) or len(last_hash) != 32:
            raise ValidationError("last_hash: expected 32 bytes (SHA-256 of the head event)")
        if last_seq == -1 and last_hash != GENESIS_HASH:
            raise ValidationError("last_hash: an empty chain (last_seq -1) has the zero hash")
        chain = cls.__new__(cls)
        chain._setup(log, signer, last_seq, last_hash)
        return chain

    def _setup(self, log: RecordLog, signer: Ed25519Signer | None, seq: int, head: bytes) -> None:
        self._log, self._signer = log, signer
        self._last_seq, self._head = seq, head
        self._lock = threading.Lock()

    @property
    def next_seq(self) -> int:
        """Sequence number the next appended event will get."""
        return self._last_seq + 1

    @property
    def head_hash(self) -> bytes:
        """SHA-256 of the last event's canonical bytes (zero hash when empty)."""
        return self._head

    def append(
        self, kind: str, memory_id: str, payload: Mapping[str, str | int], ts_ms: int | None = None
    ) -> Event:
        """Build, sign (with a signer), encode and append the next event; returns it.

        ``ts_ms`` defaults to the current wall-clock time in epoch milliseconds. State
        advances only after the log accepted the record.
        """
        if ts_ms is None:
            ts_ms = time.time_ns() // 1_000_000
        with self._lock:
            event = Event(self.next_seq, ts_ms, kind, memory_id, dict(payload), self._head)
            canon = canonical_bytes(event)
            if self._signer is not None:
                event = replace(event, signature=self._signer.sign(canon))
            self._log.append(encode_event(event))
            self._last_seq, self._head = event.seq, hashlib.sha256(canon).digest()
            return event


@dataclass(frozen=True)
class ChainBreak:
    """A place where the chain does not hold: ``seq`` expected there, and why."""

    seq: int
    reason: str


@dataclass(frozen=True)
class ChainReport:
    """Result of :func:`verify_chain`.

    Attributes:
        ok: True only when there are no breaks and no bad signatures.
        events: number of records read (decodable or not).
        breaks: hash mismatches, non-contiguous seqs, undecodable records, head mismatch.
        bad_signatures: seqs whose signature is missing or invalid (only with a public key).
        head_hash: SHA-256 of the last decodable event (zero hash for an empty log).
    """

    ok: bool
    events: int
    breaks: list[ChainBreak] = field(default_factory=list)
    bad_signatures: list[int] = field(default_factory=list)
    head_hash: bytes = GENESIS_HASH


def verify_chain(
    log: RecordLog, *, public_key: bytes | None = None, expected_head: bytes | None = None
) -> ChainReport:
    """Walk the whole log and check seq contiguity, every ``prev_hash`` and signatures.

    With ``public_key`` (32 raw bytes), every event must carry a valid signature; unsigned or
    wrongly signed events are listed in ``bad_signatures``. With ``expected_head`` (a head
    hash kept elsewhere), a rewritten or truncated tail is reported as a break too.
    """
    key = None if public_key is None else _public_key(public_key)
    if expected_head is not None and (
        not isinstance(expected_head, bytes) or len(expected_head) != 32
    ):
        raise ValidationError("expected_head: must be 32 bytes (a ChainReport.head_hash)")
    breaks: list[ChainBreak] = []
    bad: list[int] = []
    want_prev: bytes | None = GENESIS_HASH
    want_seq, head, count = 0, GENESIS_HASH, 0
    for index, data in enumerate(log.records()):
        count += 1
        try:
            event = decode_event(data)
        except CorruptionError as exc:
            breaks.append(ChainBreak(want_seq, f"record {index} is undecodable: {exc}"))
            want_seq, want_prev = want_seq + 1, None
            continue
        where = f"record {index}"
        if event.seq != want_seq:
            why = f"{where}: seq {event.seq}, expected {want_seq} (non-contiguous)"
            breaks.append(ChainBreak(want_seq, why))
        if want_prev is not None and event.prev_hash != want_prev:
            why = f"{where}: prev_hash mismatch (previous event altered, dropped or forked)"
            breaks.append(ChainBreak(event.seq, why))
        canon = canonical_bytes(event)
        if key is not None:
            sig = event.signature
            if sig is None or not _verify(key, sig, canon):
                bad.append(event.seq)
        head = hashlib.sha256(canon).digest()
        want_seq, want_prev = event.seq + 1, head
    if expected_head is not None and expected_head != head:
        why = "head hash differs from expected_head (tail rewritten or truncated)"
        breaks.append(ChainBreak(want_seq - 1, why))
    return ChainReport(not breaks and not bad, count, breaks, bad, head)
