"""The EncodingHeader codec: encode_headers field by field, the tag Bloom filter, flag updates."""

from __future__ import annotations

import struct

import crc32c as crc_lib
import numpy as np

from spector_gpu.cortex import encode_headers, is_consolidated, is_tombstoned, tag_bloom
from spector_gpu.cortex.header import with_consolidated, with_provenance
from spector_gpu.cortex.layouts import HEADER_DTYPE


def _bloom(tags: list[str]) -> int:
    """The filter written out from the layout's definition: k = 3 CRC32C-seeded bits of 128."""
    bits = 0
    for t in tags:
        for seed in (0x9E3779B9, 0x85EBCA6B, 0xC2B2AE35):
            bits |= 1 << (crc_lib.crc32c(t.encode(), seed) & 127)
    return bits


def test_encode_headers_writes_every_field_where_the_layout_puts_it() -> None:
    h = encode_headers(
        types=np.array([2, 1]),
        owners=np.array([0x0A0B0C0D0E0F1011, 7]),
        timestamp_ms=np.array([0x0102030405060708, 9]),
        importance=np.array([2.5, 1.0], dtype=np.float32),
        valence=np.array([-5, 0]),
        arousal=np.array([200, 0]),
        pinned=np.array([True, False]),
        exact_norm=np.array([1.0, 0.5], dtype=np.float32),
        tags=[("music", "cello"), ()],
        source=1,
        provenance=np.array([3, 1]),
    )
    assert h.dtype == HEADER_DTYPE
    bloom = _bloom(["music", "cello"])
    flags = (2 << 1) | 0x20 | 0x10  # SEMANTIC, resolved, pinned
    expected = (
        struct.pack("<BBbBfqfhH", 2, flags, -5, 200, 2.5, 0x0102030405060708, 1.0, 0, 0)
        + struct.pack("<QQ", bloom & ((1 << 64) - 1), bloom >> 64)
        + bytes([0, 0, 0, 0]) + struct.pack("<H", 0) + bytes([1, 3])
        + struct.pack("<fqI", 0.0, 0x0A0B0C0D0E0F1011, 0)
    )  # fmt: skip
    assert len(expected) == 64 and h[0].tobytes() == expected
    assert int(h["flags"][1]) == (1 << 1) | 0x20  # resolved, not pinned
    assert int(h["tags_lo"][1]) == int(h["tags_hi"][1]) == 0


def test_tag_bloom_sets_up_to_three_bits_per_tag() -> None:
    assert tag_bloom([]) == (0, 0)
    lo, hi = tag_bloom(["music"])
    assert 1 <= bin(lo | (hi << 64)).count("1") <= 3
    both = tag_bloom(["music", "cello"])
    assert (both[0] | (both[1] << 64)) == _bloom(["music", "cello"])
    assert (lo | (hi << 64)) & ~(both[0] | (both[1] << 64)) == 0  # a subset of the union


def test_flag_updates_copy_and_queries_read_them() -> None:
    h = np.zeros(3, dtype=HEADER_DTYPE)
    h["flags"] = [0x00, 0x01, 0x08]
    assert is_consolidated(h["flags"]).tolist() == [False, False, True]
    assert is_tombstoned(h["flags"]).tolist() == [False, True, False]
    c = with_consolidated(h[:2])
    assert is_consolidated(c["flags"]).all() and not is_consolidated(h["flags"][:2]).any()
    assert int(c["flags"][1]) == 0x09  # other bits kept
    p = with_provenance(h[:1], np.array([4]))
    assert int(p["provenance"][0]) == 4 and int(h["provenance"][0]) == 0
