"""Golden bytes for every record layout (DESIGN §3-§4, seed 000), and payload codec properties.

Each test builds a record field by field through the project's one codec and compares it with
a byte string written out by hand from the layout tables. CRCs are computed with the
``crc32c`` package directly (not the project's helper) over the hand-written bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import crc32c as crc_lib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu import Citation, CorruptionError, SpectorMemory
from spector_gpu.cortex.episodic import EpisodicMemory
from spector_gpu.cortex.layouts import (
    EPIS_MAGIC,
    HEADER_DTYPE,
    INDEX_DTYPE,
    PROVENANCE_DTYPE,
    STRENGTH_DTYPE,
    WALK_PREFIX_DTYPE,
    seal,
)
from spector_gpu.cortex.payload import Payload, decode_payload, encode_payload
from spector_gpu.cortex.slots import SlotMemory, slot_stride
from spector_gpu.storage.crc import verify_rows
from spector_gpu.storage.preamble import PREAMBLE_SIZE, SHAPE_RECORD, Preamble, RegionId, fourcc


def h(text: str) -> bytes:
    """Hex with spaces and comments allowed: ``'02 2C  # flags'`` lines."""
    out = []
    for line in text.splitlines():
        out.append(line.split("#", 1)[0])
    return bytes.fromhex("".join(out))


def crc(data: bytes) -> bytes:
    return (crc_lib.crc32c(data) & 0xFFFFFFFF).to_bytes(4, "little")


def fields(dtype: np.dtype) -> dict[str, tuple[np.dtype, int]]:
    assert dtype.fields is not None
    return {name: (f[0], int(f[1])) for name, f in dtype.fields.items()}


def offsets(dtype: np.dtype) -> dict[str, int]:
    return {name: off for name, (_, off) in fields(dtype).items()}


# ---- EncodingHeader, 64 B ------------------------------------------------------------------
HEADER_GOLDEN = h("""
    02                        # 0  version 2
    2C                        # 1  flags: type SEMANTIC (2<<1) | consolidated 0x08 | resolved 0x20
    FB                        # 2  valence -5
    C8                        # 3  arousal 200
    00 00 20 40               # 4  importance 2.5f
    08 07 06 05 04 03 02 01   # 8  timestamp_ms 0x0102030405060708
    00 00 80 3F               # 16 exact_norm 1.0f
    FE FF                     # 20 centroid -2
    00 00                     # 22 pad
    88 77 66 55 44 33 22 11   # 24 tags_lo
    01 00 00 00 00 00 00 80   # 32 tags_hi
    22                        # 40 consolidation_flags: retracted 0x02 | simulated 0x20
    03 04 05                  # 41 encoding_profile, 42 alpha, 43 beta
    02 01                     # 44 soul_version 0x0102
    01                        # 46 source DISTILLED
    03                        # 47 provenance extracted
    00 00 00 3F               # 48 surprise 0.5f
    11 10 0F 0E 0D 0C 0B 0A   # 52 owner TSID
    00 00 00 00               # 60 reserved
""")


def _header() -> np.ndarray:
    r = np.zeros(1, dtype=HEADER_DTYPE)
    r["version"] = 2
    r["flags"] = (2 << 1) | 0x08 | 0x20
    r["valence"] = -5
    r["arousal"] = 200
    r["importance"] = 2.5
    r["timestamp_ms"] = 0x0102030405060708
    r["exact_norm"] = 1.0
    r["centroid"] = -2
    r["tags_lo"] = 0x1122334455667788
    r["tags_hi"] = 0x8000000000000001
    r["consolidation_flags"] = 0x22
    r["encoding_profile"], r["alpha"], r["beta"] = 3, 4, 5
    r["soul_version"] = 0x0102
    r["source"] = 1
    r["provenance"] = 3
    r["surprise"] = 0.5
    r["owner"] = 0x0A0B0C0D0E0F1011
    return r


def test_encoding_header_golden_bytes() -> None:
    assert HEADER_DTYPE.itemsize == len(HEADER_GOLDEN) == 64
    assert _header().tobytes() == HEADER_GOLDEN
    back = np.frombuffer(HEADER_GOLDEN, dtype=HEADER_DTYPE)[0]
    assert int(back["valence"]) == -5 and float(back["importance"]) == 2.5


def test_encoding_header_offsets_match_design() -> None:
    assert offsets(HEADER_DTYPE) == {
        "version": 0,
        "flags": 1,
        "valence": 2,
        "arousal": 3,
        "importance": 4,
        "timestamp_ms": 8,
        "exact_norm": 16,
        "centroid": 20,
        "pad": 22,
        "tags_lo": 24,
        "tags_hi": 32,
        "consolidation_flags": 40,
        "encoding_profile": 41,
        "alpha": 42,
        "beta": 43,
        "soul_version": 44,
        "source": 46,
        "provenance": 47,
        "surprise": 48,
        "owner": 52,
        "reserved": 60,
    }


# ---- Episode record: WalkPrefix 32 B | header 64 B | payload ---------------------------------
PAYLOAD_GOLDEN = h("""
    01                        # 0  payload version 1
    01                        # 1  role ASSISTANT
    02 00                     # 2  n_fields 2
    00 00 00 00               # 4  reserved
    07 00 00 00 00 00 00 00   # 8  session_id 7
    01 02 00 00 00 42 6F      # field: tag 1 speaker, length 2, "Bo"
    02 02 00 00 00 68 69      # field: tag 2 text, length 2, "hi"
""")


def test_payload_codec_golden_bytes() -> None:
    p = Payload(text="hi", session_id=7, role=1, speaker="Bo")
    assert encode_payload(p) == PAYLOAD_GOLDEN
    assert decode_payload(PAYLOAD_GOLDEN) == p


def test_walk_prefix_and_episode_record_golden_bytes() -> None:
    header = _header()
    body = b"abc"
    data, rel = EpisodicMemory.encode([0x0102030405060708], header, [body], [9])
    prefix_28 = h("""
        53 49 50 45               # 0  magic 0x45504953 'EPIS' (u32 LE)
        08 00 00 00               # 4  payload_bytes 8 (3 padded to 8)
        08 07 06 05 04 03 02 01   # 8  memory_id
        08 07 06 05 04 03 02 01   # 16 timestamp_ms (the header's)
        09 00 00 00               # 24 sequence 9
    """)
    padded = b"abc" + b"\0" * 5
    expected = prefix_28 + crc(prefix_28 + HEADER_GOLDEN + padded) + HEADER_GOLDEN + padded
    assert data == expected
    assert rel == [0] and len(data) == 96 + 8  # next record at +96+N
    assert WALK_PREFIX_DTYPE.itemsize == 32
    assert offsets(WALK_PREFIX_DTYPE) == {
        "magic": 0,
        "payload_bytes": 4,
        "memory_id": 8,
        "timestamp_ms": 16,
        "sequence": 24,
        "crc32c": 28,
    }
    assert EPIS_MAGIC == 0x45504953


def test_two_episodes_are_back_to_back() -> None:
    headers = np.concatenate([_header(), _header()])
    data, rel = EpisodicMemory.encode([1, 2], headers, [b"x" * 8, b"y" * 9], [0, 1])
    assert rel == [0, 96 + 8]
    assert len(data) == 96 + 8 + 96 + 16


# ---- Fixed engram slot: header 64 B | INT8 vector dim B | crc32c -----------------------------
def test_engram_slot_golden_bytes() -> None:
    dim = 4
    region = SimpleNamespace(spec=SimpleNamespace(stride=slot_stride(dim)))
    slots = SlotMemory(region, dim)  # type: ignore[arg-type]
    q = np.array([[1, -1, 127, -128]], dtype=np.int8)
    body = HEADER_GOLDEN + h("01 FF 7F 80")
    assert slot_stride(dim) == 64 + 4 + 4
    assert slots.encode(slots.slot_records(_header(), q)) == body + crc(body)


# ---- Strength record, 96 B -------------------------------------------------------------------
def test_strength_record_golden_bytes() -> None:
    r = np.zeros(1, dtype=STRENGTH_DTYPE)
    r["flags"], r["recall_profile"], r["valence"] = 0x81, 2, -3
    r["agent_recall_count"] = 5
    r["passive_recall_count"] = 0x01020304
    r["effective_importance"] = 2.0
    r["storage_strength"] = 1.5
    r["last_agent_hash"] = 0xDEADBEEF
    r["last_auto_ltp_ms"] = 0x1112131415161718
    r["last_recall_ms"] = 0x2122232425262728
    r["actr_ring"] = np.arange(1, 9)
    r["expires_ms"] = -2
    r["retrieval_strength"] = 0.25
    r["owner"] = 0x0A0B0C0D0E0F1011
    seal(r)
    body = h("""
        81 02 FD 00               # 0 flags, 1 recall_profile, 2 valence -3, 3 reserved
        05 00 00 00               # 4  agent_recall_count 5
        04 03 02 01               # 8  passive_recall_count
        00 00 00 40               # 12 effective_importance 2.0f
        00 00 C0 3F               # 16 storage strength S 1.5f
        EF BE AD DE               # 20 last_agent_hash
        18 17 16 15 14 13 12 11   # 24 last_auto_ltp ms
        28 27 26 25 24 23 22 21   # 32 last_recall ms
        01 00 00 00 02 00 00 00 03 00 00 00 04 00 00 00   # 40 ACT-R ring i32[8]
        05 00 00 00 06 00 00 00 07 00 00 00 08 00 00 00
        FE FF FF FF FF FF FF FF   # 72 expires_ms (was reconsolidation_delta) -2
        00 00 80 3E               # 80 D at last event 0.25f
        11 10 0F 0E 0D 0C 0B 0A   # 84 owner TSID (our addition in the reserved tail)
    """)
    assert len(body) == 92
    assert r.tobytes() == body + crc(body)
    assert STRENGTH_DTYPE.itemsize == 96


# ---- Provenance record, 72 B (seed 000 table) ------------------------------------------------
SEED_000_TABLE = {  # field: (offset, size) exactly as seeds/000_d85f8d4fd85dc1a8.txt
    "flags": (0, 1),
    "source_kind": (1, 1),
    "target_kind": (2, 1),
    "prefix_kind": (3, 1),
    "pass_number": (4, 2),
    "turn_count": (6, 2),
    "session_id": (8, 8),
    "target_tsid": (16, 8),
    "consolidated_at": (24, 8),
    "partition_seq": (32, 4),
    "first_seq": (36, 4),
    "last_seq": (40, 4),
    "first_offset": (44, 4),
    "last_offset": (48, 4),
    "fact_index": (52, 1),
    "batch_count": (53, 1),
    "content_hash_hi": (54, 2),
    "source_tsid": (56, 8),
    "source_partition": (64, 4),
    "crc32c": (68, 4),
}


def test_provenance_layout_is_the_seed_table() -> None:
    got = {n: (off, dt.itemsize) for n, (dt, off) in fields(PROVENANCE_DTYPE).items()}
    assert got == SEED_000_TABLE
    assert PROVENANCE_DTYPE.itemsize == 72
    assert all(dt.str[0] in "<|" for dt, _ in fields(PROVENANCE_DTYPE).values())  # little-endian


def test_provenance_record_golden_bytes() -> None:
    r = np.zeros(1, dtype=PROVENANCE_DTYPE)
    r["flags"] = 2  # partial run
    r["source_kind"], r["target_kind"], r["prefix_kind"] = 1, 2, 0
    r["pass_number"], r["turn_count"] = 3, 12
    r["session_id"] = 0x0102030405060708
    r["target_tsid"] = 0x1112131415161718
    r["consolidated_at"] = 0x2122232425262728
    r["partition_seq"], r["first_seq"], r["last_seq"] = 5, 10, 21
    r["first_offset"], r["last_offset"] = 0, 0x1234
    r["fact_index"], r["batch_count"] = 1, 4
    r["content_hash_hi"] = 0xBEEF
    r["source_tsid"], r["source_partition"] = 0, 0
    seal(r)
    body = h("""
        02 01 02 00               # 0 state partial, 1 source episodic, 2 target semantic, 3 prefix
        03 00                     # 4  pass_number 3
        0C 00                     # 6  turn_count 12
        08 07 06 05 04 03 02 01   # 8  session_id
        18 17 16 15 14 13 12 11   # 16 target_tsid
        28 27 26 25 24 23 22 21   # 24 consolidated_at
        05 00 00 00               # 32 partition_seq
        0A 00 00 00               # 36 first_seq 10
        15 00 00 00               # 40 last_seq 21
        00 00 00 00               # 44 first_offset
        34 12 00 00               # 48 last_offset
        01 04                     # 52 fact_index, 53 batch_count
        EF BE                     # 54 content_hash_hi
        00 00 00 00 00 00 00 00   # 56 source_tsid
        00 00 00 00               # 64 source_partition
    """)
    assert len(body) == 68
    assert r.tobytes() == body + crc(body)


# ---- Index entry, 48 B -----------------------------------------------------------------------
def test_index_entry_golden_bytes() -> None:
    e = np.zeros(1, dtype=INDEX_DTYPE)
    e["id"] = 0x0102030405060708
    e["id_len"] = 13
    e["type"] = 1
    e["record_offset"] = 0x1000
    e["graph_slot"] = 7
    e["text_offset"] = 0x2000
    e["text_length"] = 300
    e["partition"] = 0
    seal(e)
    body = h("""
        08 07 06 05 04 03 02 01   # 0  id (the TSID)
        0D 00 00 00               # 8  id length 13
        01 00 00 00               # 12 type EPISODIC
        00 10 00 00 00 00 00 00   # 16 record offset
        07 00 00 00               # 24 graph slot
        00 20 00 00 00 00 00 00   # 28 text offset
        2C 01 00 00               # 36 text length 300
        00 00 00 00               # 40 partition
    """)
    assert INDEX_DTYPE.itemsize == 48
    assert e.tobytes() == body + crc(body)


# ---- Region preamble, 64 B -------------------------------------------------------------------
def test_fourcc_values_are_spectors() -> None:
    assert fourcc("PROV") == 0x50524F56
    assert fourcc("EPIL") == 0x4550494C
    assert fourcc("AUDT") == 0x41554454
    assert fourcc("MIDX") == 0x4D494458
    assert fourcc("COG") == 0x434F4700  # 'COG\0'


def test_preamble_golden_bytes() -> None:
    pre = Preamble(
        shape=SHAPE_RECORD,
        region_id=RegionId.PROVENANCE,
        layout_id=fourcc("PROV"),
        stride=72,
        capacity=8192,
        count=3,
        store_id=0x0102030405060708,
        generation=0x1112131415161718,
    )
    body = h("""
        4D 4B 4D 53               # 0  magic 0x534D4B4D 'SMKM' (u32 LE)
        02 00 00 00               # 4  schema_version 2
        01 00 00 00               # 8  shape RECORD
        01 1A 00 00               # 12 flags: CRC on | region id 26 (PROVENANCE) << 8
        00 20 00 00 00 00 00 00   # 16 capacity 8192
        03 00 00 00 00 00 00 00   # 24 count 3
        48 00 00 00               # 32 stride 72
        56 4F 52 50               # 36 layout_id 0x50524F56 'PROV' (u32 LE)
        08 07 06 05 04 03 02 01   # 40 store_id
        18 17 16 15 14 13 12 11   # 48 generation
    """)
    raw = pre.pack()
    assert raw == body + crc(body) + b"\0" * 4
    assert len(raw) == PREAMBLE_SIZE == 64
    assert Preamble.unpack(raw, file="x") == pre


def test_schema_1_preamble_parses_without_identity() -> None:
    body = h("""
        4D 4B 4D 53  01 00 00 00  01 00 00 00  01 1A 00 00
        00 20 00 00 00 00 00 00   03 00 00 00 00 00 00 00
        48 00 00 00  56 4F 52 50
        08 07 06 05 04 03 02 01   # 40 created_ms (schema 1; never read)
        18 17 16 15 14 13 12 11   # 48 last_flush_ms (schema 1; never read)
    """)
    pre = Preamble.unpack(body + crc(body) + b"\0" * 4, file="x")
    assert (pre.schema_version, pre.store_id, pre.generation, pre.count) == (1, 0, 0, 3)


def test_store_files_carry_their_preambles(tmp_path: Path) -> None:
    with SpectorMemory.open(tmp_path / "s", config={"store": {"durability": "none"}}) as mem:
        mem.remember("one turn")
    expected = {
        "provenance.rec": ("PROV", 26, 72),
        "episodic.log": ("EPIL", 1, 0),
        "index.midx": ("MIDX", 20, 48),
        "strength.rec": ("STRN", 4, 96),
        "events.log": ("AUDT", 7, 0),
        "semantic.slots": ("COG", 0, None),
    }
    for name, (code, region_id, stride) in expected.items():
        raw = (tmp_path / "s" / name).read_bytes()[:64]
        magic, _, _, flags, _, _, got_stride, layout = struct.unpack_from("<IIIIqqII", raw)
        assert magic == 0x534D4B4D, name
        assert layout == fourcc(code), name
        assert (flags >> 8) & 0xFF == region_id, name
        assert stride is None or got_stride == stride, name
    assert (tmp_path / "s" / "provenance.rec").read_bytes()[36:40] == b"VORP"


# ---- CRC coverage: every single-bit flip is caught -------------------------------------------
@pytest.mark.parametrize(
    "dtype",
    [PROVENANCE_DTYPE, STRENGTH_DTYPE, INDEX_DTYPE],
    ids=["provenance", "strength", "index"],
)
def test_every_single_bit_flip_is_detected(dtype: np.dtype) -> None:
    rec = np.zeros(1, dtype=dtype)
    raw = np.frombuffer(rec.tobytes(), dtype=np.uint8).copy()
    raw[:] = np.arange(len(raw), dtype=np.uint8) * 37 + 11
    good = seal(raw.view(dtype).copy()).view(np.uint8).reshape(1, -1)
    assert verify_rows(good).all()
    nbits = good.shape[1] * 8
    flipped = np.repeat(good, nbits, axis=0)
    idx = np.arange(nbits)
    flipped[idx, idx // 8] ^= (1 << (idx % 8)).astype(np.uint8)
    assert not verify_rows(flipped).any()


# ---- Payload codec properties ----------------------------------------------------------------
_SAFE = st.characters(exclude_categories=["Cs"], exclude_characters="\x1f")
_WORD = st.text(_SAFE, min_size=1, max_size=12)
_CITATION = st.builds(
    Citation,
    uri=st.sampled_from(["uri:https://example.org/a", "doc:0000000000001", "file:/tmp/x.txt"]),
    accessed_at=st.sampled_from(["2026-11-29T10:00:00Z", "2024-02-29T23:59:60+01:00"]),
    hash=st.none() | st.just("a" * 64),
    span=st.none() | st.tuples(st.integers(0, 100), st.integers(101, 200)),
)
_PAYLOAD = st.builds(
    Payload,
    text=st.text(_SAFE, max_size=200),
    session_id=st.integers(-(1 << 63), (1 << 63) - 1),
    role=st.none() | st.integers(0, 5),
    speaker=st.text(_SAFE, max_size=20),
    external_id=st.none() | st.text(_SAFE, max_size=20),
    tags=st.lists(_WORD, max_size=4).map(tuple),
    citations=st.lists(_CITATION, max_size=3).map(tuple),
    source_uri=st.none() | st.just("doc:0ABCDEFGH1234"),
    source_span=st.none()
    | st.tuples(st.integers(0, 1 << 40), st.integers((1 << 40) + 1, (1 << 64) - 1)),
    skill_name=st.none() | _WORD,
    steps=st.lists(_WORD, max_size=4).map(tuple),
)


@given(_PAYLOAD)
@settings(max_examples=150, deadline=None)
def test_payload_round_trip(p: Payload) -> None:
    raw = encode_payload(p)
    assert decode_payload(raw) == p
    assert encode_payload(decode_payload(raw)) == raw  # one canonical encoding


@given(_PAYLOAD, st.data())
@settings(max_examples=100, deadline=None)
def test_truncated_payload_is_corruption_never_a_crash(p: Payload, data: st.DataObject) -> None:
    raw = encode_payload(p)
    cut = data.draw(st.integers(0, len(raw) - 1))
    # every byte of an encoding belongs to the head or to one of its n_fields fields
    with pytest.raises(CorruptionError):
        decode_payload(raw[:cut])


@given(st.binary(max_size=64))
@settings(max_examples=200, deadline=None)
def test_random_bytes_decode_or_raise_corruption(data: bytes) -> None:
    try:
        p = decode_payload(data)
    except CorruptionError:
        return
    assert isinstance(p, Payload)
