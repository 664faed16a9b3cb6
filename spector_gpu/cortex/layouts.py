"""Byte layouts of every fixed-size record, as numpy structured dtypes (one codec each).

All fields are explicitly little-endian and packed. Golden-byte tests pin each layout.

EncodingHeader, 64 B (Spector's V2 header; identity of an engram at encoding)::

    0  version u8 (=2)          1  flags u8: bit0 tombstone, bits1-2 type (WORKING 0, EPISODIC 1,
                                   SEMANTIC 2, PROCEDURAL 3), bit3 consolidated, bit4 pinned,
                                   bit5 resolved, bits6-7 modality
    2  valence i8               3  arousal u8
    4  importance f32 (0.05-10) 8  timestamp_ms i64
    16 exact_norm f32           20 centroid i16          22 pad u16
    24 tags_lo u64              32 tags_hi u64 (128-bit Bloom filter of tags, k=3)
    40 consolidation_flags u8: bit0 contradicted, bit1 retracted, bit2 unverified,
       bit3 restricted, bit4 crystallized, bit5 simulated, bit6 replaced (our addition: an
       older version of an updated memory, see :mod:`.lifecycle`), bit7 dreamed
    41 encoding_profile u8      42 alpha u8   43 beta u8   44 soul_version u16
    46 source u8 (EXPERIENCED 0, DISTILLED 1, SIMULATED 2, REHEARSED 3)
    47 provenance u8 (record provenance, see provenance.record)
    48 surprise f32
    52 owner i64 — our addition in the reserved tail: the memory's TSID, so a header copied
       into another memory's slot is caught by a cross-check
    60 reserved u32 (0)

WalkPrefix, 32 B (head of every episode record; CRC covers prefix[0:28] ‖ header ‖ payload)::

    0 magic u32 0x45504953 ('EPIS')  4 payload_bytes u32  8 memory_id i64 (TSID)
    16 timestamp_ms i64              24 sequence u32 (per session)  28 crc32c u32

Strength record, 96 B (region STRENGTH, Spector's layout plus our tail)::

    0 flags u8  1 recall_profile u8  2 valence i8  3 reserved u8
    4 agent_recall_count i32   8 passive_recall_count i32   12 effective_importance f32
    16 storage_strength S f32 (1.0-5.0)  20 last_agent_hash u32  24 last_auto_ltp_ms i64
    32 last_recall_ms i64      40 actr_ring i32[8] (seconds since creation)
    72 expires_ms i64 (epoch ms after which the memory is gone from every read; 0 = never.
       Spector's reconsolidation_delta, which was written truncated to 0 and never read)
    80 D at last event f32     84 owner i64 (the memory's TSID; our addition)
    92 crc32c over [0, 92)

Provenance record, 72 B — exactly seed 000's table (state byte exclusive: 0 live,
1 tombstone, 2 partial run; crc32c @68 over [0, 68)).

Index entry, 48 B (MIDX; entry i describes memory ordinal i)::

    0 id i64 (the TSID itself: ids are fixed 64-bit TSIDs, so no id pool is needed)
    8 id_len i32 (13)  12 type i32  16 record_offset i64 (log byte offset or slot)
    24 graph_slot i32 (= ordinal)   28 text_offset i64   36 text_length i32
    40 partition i32   44 crc32c over [0, 44)

Vector row, dim+12 B (region VECTOR): int8[dim] · scale f32 · ordinal u32 · crc32c.

Engram slot, 64+dim+4 B (regions SEMANTIC, PROCEDURAL): EncodingHeader · int8[dim] · crc32c.
"""

from __future__ import annotations

import numpy as np

from ..storage.crc import crc32c_rows

__all__ = [
    "CF_DREAMED",
    "CF_REPLACED",
    "CF_RETRACTED",
    "CF_SIMULATED",
    "EPIS_MAGIC",
    "FLAG_CONSOLIDATED",
    "FLAG_PINNED",
    "FLAG_RESOLVED",
    "FLAG_TOMBSTONE",
    "HEADER_DTYPE",
    "HEADER_SIZE",
    "INDEX_DTYPE",
    "PROVENANCE_DTYPE",
    "PROV_LIVE",
    "PROV_PARTIAL",
    "PROV_TOMBSTONE",
    "STRENGTH_DTYPE",
    "WALK_PREFIX_DTYPE",
    "WALK_PREFIX_SIZE",
    "seal",
    "slot_dtype",
    "type_of_flags",
    "vector_dtype",
]

HEADER_DTYPE = np.dtype(
    [
        ("version", "u1"),
        ("flags", "u1"),
        ("valence", "i1"),
        ("arousal", "u1"),
        ("importance", "<f4"),
        ("timestamp_ms", "<i8"),
        ("exact_norm", "<f4"),
        ("centroid", "<i2"),
        ("pad", "<u2"),
        ("tags_lo", "<u8"),
        ("tags_hi", "<u8"),
        ("consolidation_flags", "u1"),
        ("encoding_profile", "u1"),
        ("alpha", "u1"),
        ("beta", "u1"),
        ("soul_version", "<u2"),
        ("source", "u1"),
        ("provenance", "u1"),
        ("surprise", "<f4"),
        ("owner", "<i8"),
        ("reserved", "<u4"),
    ]
)
HEADER_SIZE = 64

EPIS_MAGIC = 0x45504953
WALK_PREFIX_DTYPE = np.dtype(
    [
        ("magic", "<u4"),
        ("payload_bytes", "<u4"),
        ("memory_id", "<i8"),
        ("timestamp_ms", "<i8"),
        ("sequence", "<u4"),
        ("crc32c", "<u4"),
    ]
)
WALK_PREFIX_SIZE = 32

STRENGTH_DTYPE = np.dtype(
    [
        ("flags", "u1"),
        ("recall_profile", "u1"),
        ("valence", "i1"),
        ("reserved0", "u1"),
        ("agent_recall_count", "<i4"),
        ("passive_recall_count", "<i4"),
        ("effective_importance", "<f4"),
        ("storage_strength", "<f4"),
        ("last_agent_hash", "<u4"),
        ("last_auto_ltp_ms", "<i8"),
        ("last_recall_ms", "<i8"),
        ("actr_ring", "<i4", (8,)),
        ("expires_ms", "<i8"),
        ("retrieval_strength", "<f4"),
        ("owner", "<i8"),
        ("crc32c", "<u4"),
    ]
)

PROVENANCE_DTYPE = np.dtype(
    [
        ("flags", "u1"),
        ("source_kind", "u1"),
        ("target_kind", "u1"),
        ("prefix_kind", "u1"),
        ("pass_number", "<i2"),
        ("turn_count", "<i2"),
        ("session_id", "<i8"),
        ("target_tsid", "<i8"),
        ("consolidated_at", "<i8"),
        ("partition_seq", "<i4"),
        ("first_seq", "<i4"),
        ("last_seq", "<i4"),
        ("first_offset", "<i4"),
        ("last_offset", "<i4"),
        ("fact_index", "u1"),
        ("batch_count", "u1"),
        ("content_hash_hi", "<u2"),
        ("source_tsid", "<i8"),
        ("source_partition", "<i4"),
        ("crc32c", "<u4"),
    ]
)

INDEX_DTYPE = np.dtype(
    [
        ("id", "<i8"),
        ("id_len", "<i4"),
        ("type", "<i4"),
        ("record_offset", "<i8"),
        ("graph_slot", "<i4"),
        ("text_offset", "<i8"),
        ("text_length", "<i4"),
        ("partition", "<i4"),
        ("crc32c", "<u4"),
    ]
)


def vector_dtype(dim: int) -> np.dtype:
    """Vector row of a ``dim``-dimensional slab (``dim + 12`` bytes)."""
    return np.dtype([("q", "i1", (dim,)), ("scale", "<f4"), ("ordinal", "<u4"), ("crc32c", "<u4")])


def slot_dtype(dim: int) -> np.dtype:
    """Engram slot of ``dim``-dimensional vectors (``64 + dim + 4`` bytes)."""
    return np.dtype([("header", HEADER_DTYPE), ("q", "i1", (dim,)), ("crc32c", "<u4")])


for _dt, _size in (
    (HEADER_DTYPE, 64),
    (WALK_PREFIX_DTYPE, 32),
    (STRENGTH_DTYPE, 96),
    (PROVENANCE_DTYPE, 72),
    (INDEX_DTYPE, 48),
):
    assert _dt.itemsize == _size, (_dt, _size)  # layout invariants, checked at import

FLAG_TOMBSTONE = 0x01
FLAG_CONSOLIDATED = 0x08
FLAG_PINNED = 0x10
FLAG_RESOLVED = 0x20
CF_RETRACTED = 0x02
CF_SIMULATED = 0x20
CF_REPLACED = 0x40
CF_DREAMED = 0x80

PROV_LIVE, PROV_TOMBSTONE, PROV_PARTIAL = 0, 1, 2


def type_of_flags(flags: np.ndarray | int) -> np.ndarray | int:
    """Memory type stored in header flags bits 1-2."""
    return (flags >> 1) & 0x3


def seal(records: np.ndarray) -> np.ndarray:
    """Write the CRC32C of ``[0, stride-4)`` into the last 4 bytes of each record (in place).

    ``records`` is a structured array whose last field is ``crc32c``; returns it.
    """
    raw = records.view(np.uint8).reshape(len(records), records.dtype.itemsize)
    records["crc32c"] = crc32c_rows(raw[:, :-4])
    return records
