"""Hash-chained event log: codec, tamper detection and Ed25519 signatures (seed 004)."""

from __future__ import annotations

import hashlib
import itertools
import struct
import sys
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spector_gpu.errors import (
    CorruptionError,
    MissingExtraError,
    StoreFormatError,
    ValidationError,
)
from spector_gpu.provenance.chain import (
    GENESIS_HASH,
    Event,
    EventChain,
    MemoryRecordLog,
    canonical_bytes,
    decode_event,
    encode_event,
    event_hash,
    verify_chain,
)


def _build(n: int = 5, signer: object = None) -> tuple[MemoryRecordLog, list[Event]]:
    log = MemoryRecordLog()
    chain = EventChain(log, signer=signer)  # type: ignore[arg-type]
    events = [
        chain.append(
            "remember",
            f"MEM{i:010d}",
            {"type": "semantic", "n": i, "neg": -i},
            ts_ms=1_700_000_000_000 + i,
        )
        for i in range(n)
    ]
    return log, events


def test_canonical_bytes_golden() -> None:
    ev = Event(1, -2, "k", "m", {"b": 7, "a": "é"}, b"\x11" * 32)
    expected = (
        struct.pack("<IHHQq", 0x544E5645, 1, 0, 1, -2)
        + struct.pack("<I", 1)
        + b"k"
        + struct.pack("<I", 1)
        + b"m"
        + struct.pack("<I", 2)
        + struct.pack("<I", 1)
        + b"a"
        + struct.pack("<BI", 2, 2)
        + "é".encode()
        + struct.pack("<I", 1)
        + b"b"
        + struct.pack("<Bq", 1, 7)
        + struct.pack("<I", 32)
        + b"\x11" * 32
    )
    assert canonical_bytes(ev) == expected
    assert encode_event(ev) == expected + struct.pack("<I", 0)
    assert event_hash(ev) == hashlib.sha256(expected).digest()


def test_chain_links_and_contiguous_seq() -> None:
    log, events = _build(4)
    assert [e.seq for e in events] == [0, 1, 2, 3]
    assert events[0].prev_hash == GENESIS_HASH
    for prev, cur in itertools.pairwise(events):
        assert cur.prev_hash == hashlib.sha256(canonical_bytes(prev)).digest()
    report = verify_chain(log)
    assert report.ok and report.events == 4 and report.breaks == [] and report.bad_signatures == []
    assert report.head_hash == event_hash(events[-1])
    assert [decode_event(r) for r in log.records()] == events


def test_reopen_scans_tail_and_resume_skips_the_scan() -> None:
    log, events = _build(3)
    chain = EventChain(log)
    assert chain.next_seq == 3 and chain.head_hash == event_hash(events[-1])
    resumed = EventChain.resume(log, 2, event_hash(events[-1]))
    ev = resumed.append("forget", "MEM", {}, ts_ms=5)
    assert ev.seq == 3 and verify_chain(log).ok
    assert EventChain(MemoryRecordLog()).next_seq == 0
    with pytest.raises(ValidationError, match="last_hash"):
        EventChain.resume(log, -1, b"\x01" * 32)
    with pytest.raises(ValidationError, match="last_hash"):
        EventChain.resume(log, 3, b"short")


def test_reopen_on_undecodable_tail_raises_corruption() -> None:
    log, _ = _build(2)
    log.items[-1] = log.items[-1][:-3]
    with pytest.raises(CorruptionError, match="verify_chain"):
        EventChain(log)


def test_append_validates_input_and_leaves_state_on_error() -> None:
    log = MemoryRecordLog()
    chain = EventChain(log)
    for kind, mid, payload, pattern in [
        ("", "m", {}, "event.kind"),
        ("k" * 65, "m", {}, "event.kind"),
        ("k", "m" * 257, {}, "event.memory_id"),
        ("k", "m", {"flag": True}, "payload"),
        ("k", "m", {"x": 2**63}, "payload"),
        ("k", "m", {"x": 1.5}, "payload"),
        ("k", "m", {"": 1}, "payload key"),
        ("k", "m", {f"k{i}": i for i in range(257)}, "payload"),
        ("k", "m\ud800", {}, "UTF-8"),
    ]:
        with pytest.raises(ValidationError, match=pattern):
            chain.append(kind, mid, payload, ts_ms=1)  # type: ignore[arg-type]
    assert log.items == [] and chain.next_seq == 0


@given(
    seq=st.integers(0, 2**64 - 1),
    ts=st.integers(-(2**63), 2**63 - 1),
    kind=st.text(min_size=1, max_size=16),
    payload=st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
        max_size=6,
    ),
    sig=st.none() | st.binary(min_size=64, max_size=64),
)
def test_codec_round_trip(
    seq: int, ts: int, kind: str, payload: dict[str, str | int], sig: bytes | None
) -> None:
    ev = Event(seq, ts, kind, "MEM", payload, bytes(range(32)), sig)
    data = encode_event(ev)
    assert decode_event(data) == ev
    assert encode_event(decode_event(data)) == data


def test_decode_rejects_bad_bytes() -> None:
    good = encode_event(Event(0, 0, "k", "m", {"a": 1, "b": "x"}, GENESIS_HASH))
    with pytest.raises(StoreFormatError, match="magic"):
        decode_event(b"XXXX" + good[4:])
    with pytest.raises(StoreFormatError, match="version"):
        decode_event(good[:4] + b"\x02\x00" + good[6:])
    for cut in range(len(good)):
        with pytest.raises(CorruptionError):
            decode_event(good[:cut])
    with pytest.raises(CorruptionError, match="trailing"):
        decode_event(good + b"\x00")
    huge = good[:24] + struct.pack("<I", 2**31) + good[28:]
    with pytest.raises(CorruptionError, match="kind length"):
        decode_event(huge)
    swapped = Event(0, 0, "k", "m", {"a": 1, "b": "x"}, GENESIS_HASH)
    raw = encode_event(swapped)
    a_pair = struct.pack("<I", 1) + b"a" + struct.pack("<Bq", 1, 1)
    b_pair = struct.pack("<I", 1) + b"b" + struct.pack("<BI", 2, 1) + b"x"
    with pytest.raises(CorruptionError, match="out of order"):
        decode_event(raw.replace(a_pair + b_pair, b_pair + a_pair))
    with pytest.raises(CorruptionError, match="tag"):
        decode_event(raw.replace(a_pair, a_pair[:5] + b"\x09" + a_pair[6:]))
    with pytest.raises(CorruptionError, match="UTF-8"):
        decode_event(raw.replace(b"\x01\x00\x00\x00k", b"\x01\x00\x00\x00\xff"))


def _breaks(log: MemoryRecordLog, **kw: object) -> list[tuple[int, str]]:
    report = verify_chain(log, **kw)  # type: ignore[arg-type]
    assert report.ok is (not report.breaks and not report.bad_signatures)
    return [(b.seq, b.reason) for b in report.breaks]


def test_modified_payload_byte_breaks_at_next_event() -> None:
    log, _ = _build(5)
    raw = bytearray(log.items[2])
    raw[raw.index(b"semantic")] ^= 0x01  # 's' -> 'r'
    log.items[2] = bytes(raw)
    assert decode_event(log.items[2]).payload["type"] == "remantic"
    breaks = _breaks(log)
    assert [s for s, _ in breaks] == [3] and "prev_hash" in breaks[0][1]


def test_dropped_event_is_reported() -> None:
    log, _ = _build(5)
    del log.items[2]
    breaks = _breaks(log)
    assert any("non-contiguous" in r and s == 2 for s, r in breaks)
    assert any("prev_hash" in r for _, r in breaks)


def test_reordered_events_are_reported() -> None:
    log, _ = _build(5)
    log.items[1], log.items[2] = log.items[2], log.items[1]
    breaks = _breaks(log)
    assert {s for s, _ in breaks} >= {1, 2} and not verify_chain(log).ok


def test_validly_hashed_fork_is_reported() -> None:
    log, events = _build(5)
    forged = Event(
        2, events[2].ts_ms, "remember", events[2].memory_id, {"type": "forged"}, events[2].prev_hash
    )  # correctly chained to event 1
    log.items[2] = encode_event(forged)
    breaks = _breaks(log)
    assert [s for s, _ in breaks] == [3] and "prev_hash" in breaks[0][1]


def test_rewritten_or_truncated_tail_needs_an_anchor() -> None:
    log, events = _build(4)
    head = verify_chain(log).head_hash
    forged = Event(3, 0, "remember", "X", {}, events[3].prev_hash)
    log.items[3] = encode_event(forged)
    assert verify_chain(log).ok  # the chain alone cannot see a rewritten tail ...
    assert _breaks(log, expected_head=head)[0][0] == 3  # ... the anchor can
    del log.items[3]
    assert "head hash" in _breaks(log, expected_head=head)[0][1]


def test_undecodable_record_is_a_break_and_verification_continues() -> None:
    log, _ = _build(4)
    log.items[1] = b"garbage"
    report = verify_chain(log)
    assert not report.ok and report.events == 4
    assert report.breaks[0].seq == 1 and "undecodable" in report.breaks[0].reason
    assert [b.seq for b in report.breaks] == [1]  # seq 2 resyncs; its hash cannot be checked


def test_signatures_verify_with_right_key_only() -> None:
    pytest.importorskip("cryptography")
    from spector_gpu.provenance.chain import Ed25519Signer

    signer = Ed25519Signer.generate()
    other = Ed25519Signer.generate()
    log, events = _build(3, signer)
    assert all(e.signature is not None and len(e.signature) == 64 for e in events)
    assert verify_chain(log, public_key=signer.public_key_bytes).ok
    wrong = verify_chain(log, public_key=other.public_key_bytes)
    assert wrong.bad_signatures == [0, 1, 2] and wrong.breaks == [] and not wrong.ok
    again = Ed25519Signer(signer.private_key_bytes)
    assert again.public_key_bytes == signer.public_key_bytes
    assert signer.private_key_bytes.hex() not in repr(signer)


def test_forged_tail_fails_signature_but_not_hash() -> None:
    pytest.importorskip("cryptography")
    from spector_gpu.provenance.chain import Ed25519Signer

    signer, attacker = Ed25519Signer.generate(), Ed25519Signer.generate()
    log, events = _build(3, signer)
    forged = Event(2, 0, "remember", "X", {}, events[2].prev_hash)
    log.items[2] = encode_event(replace(forged, signature=attacker.sign(canonical_bytes(forged))))
    log.items[1] = encode_event(replace(events[1], signature=None))  # stripped; hashes hold
    report = verify_chain(log, public_key=signer.public_key_bytes)
    assert report.breaks == [] and report.bad_signatures == [1, 2] and not report.ok
    assert verify_chain(log).ok  # without the key, nothing is checked


def test_bad_keys_are_validation_errors() -> None:
    pytest.importorskip("cryptography")
    from spector_gpu.provenance.chain import Ed25519Signer

    with pytest.raises(ValidationError, match="private key"):
        Ed25519Signer(b"short")
    with pytest.raises(ValidationError, match="public_key"):
        verify_chain(MemoryRecordLog(), public_key=b"short")


def test_missing_extra_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from spector_gpu.provenance.chain import Ed25519Signer

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric", None)
    with pytest.raises(MissingExtraError, match=r"spector-gpu\[sign\]"):
        Ed25519Signer(bytes(32))
    with pytest.raises(MissingExtraError):
        verify_chain(MemoryRecordLog(), public_key=bytes(32))
    assert verify_chain(MemoryRecordLog()).ok  # hash-only verification needs no extra
