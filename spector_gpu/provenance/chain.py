"""Hash-chained, optionally Ed25519-signed event log of every write (DESIGN §7, seed 004).

Each :class:`Event` carries ``prev_hash`` = SHA-256 of the previous event's *canonical bytes*
(the genesis event uses 32 zero bytes) and a sequence number contiguous from 0, so editing,
dropping, reordering or forking an event breaks the chain at the next event.
:func:`verify_chain` reports those breaks, and bad or missing signatures separately.

The event's canonical byte layout and codec live in :mod:`.event`, signing in
:mod:`.signing`, record logs in :mod:`.record_log` and verification in
:mod:`.verification`; this module appends to a chain and re-exports them all.

Limits: the chain alone cannot notice a rewritten or truncated *tail* (nothing follows it).
Anchor it by keeping :attr:`ChainReport.head_hash` elsewhere and passing it back as
``expected_head``, or sign events and verify with the public key.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping
from dataclasses import replace

from spector_gpu.errors import CorruptionError, ValidationError

from .event import (
    GENESIS_HASH,
    Event,
    canonical_bytes,
    check_int,
    decode_event,
    encode_event,
    event_hash,
)
from .record_log import MemoryRecordLog, RecordLog
from .signing import Ed25519Signer, verify_signature
from .verification import ChainBreak, ChainReport, verify_chain

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
        check_int(last_seq, "last_seq", -1, 2**64 - 2)
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

    def reattach(self, log: RecordLog) -> None:
        """Continue on ``log``, this chain rewritten elsewhere (a store's compaction): the
        head is read again from its last record; every holder of this object follows."""
        fresh = EventChain(log, signer=self._signer)
        with self._lock:
            self._log, self._last_seq, self._head = log, fresh._last_seq, fresh._head

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
