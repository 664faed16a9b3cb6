"""Verifying a whole event chain: seq contiguity, every ``prev_hash``, signatures, the head."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from spector_gpu.errors import CorruptionError, ValidationError

from .event import GENESIS_HASH, canonical_bytes, decode_event
from .record_log import RecordLog
from .signing import is_valid_signature, load_public_key

__all__ = ["ChainBreak", "ChainReport", "verify_chain"]


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
    key = None if public_key is None else load_public_key(public_key)
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
            if sig is None or not is_valid_signature(key, sig, canon):
                bad.append(event.seq)
        head = hashlib.sha256(canon).digest()
        want_seq, want_prev = event.seq + 1, head
    if expected_head is not None and expected_head != head:
        why = "head hash differs from expected_head (tail rewritten or truncated)"
        breaks.append(ChainBreak(want_seq - 1, why))
    return ChainReport(not breaks and not bad, count, breaks, bad, head)
