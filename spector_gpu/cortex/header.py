"""The EncodingHeader codec: a memory's 64-byte identity at encoding (layout in :mod:`.layouts`).

Every store that holds headers (the episodic log, the semantic and procedural slots) takes
them from :func:`encode_headers`; updates in place go through :func:`with_consolidated` and
:func:`with_provenance`, and readers ask :func:`is_consolidated` / :func:`is_tombstoned`
rather than testing bits. Nothing outside the cortex needs a flag constant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..storage.crc import crc32c
from .layouts import FLAG_CONSOLIDATED, FLAG_PINNED, FLAG_RESOLVED, FLAG_TOMBSTONE, HEADER_DTYPE

__all__ = [
    "encode_headers",
    "is_consolidated",
    "is_tombstoned",
    "tag_bloom",
    "with_consolidated",
    "with_provenance",
]

_HEADER_VERSION = 2
_BLOOM_SEEDS = (0x9E3779B9, 0x85EBCA6B, 0xC2B2AE35)


def tag_bloom(tags: Sequence[str]) -> tuple[int, int]:
    """128-bit Bloom filter of ``tags`` (k = 3 CRC32C-derived bits each) as (lo, hi) u64."""
    bits = 0
    for tag in tags:
        raw = tag.encode("utf-8", "surrogatepass")
        for seed in _BLOOM_SEEDS:
            bits |= 1 << (crc32c(raw, seed) & 127)
    return bits & ((1 << 64) - 1), bits >> 64


def encode_headers(
    *,
    types: np.ndarray,
    owners: np.ndarray,
    timestamp_ms: np.ndarray,
    importance: np.ndarray,
    valence: np.ndarray,
    arousal: np.ndarray,
    pinned: np.ndarray,
    exact_norm: np.ndarray,
    tags: Sequence[tuple[str, ...]],
    source: int,
    provenance: np.ndarray,
    consolidation_flags: int = 0,
) -> np.ndarray:
    """HEADER_DTYPE (m,) headers of ``m`` new memories, every one resolved (it decays).

    Args:
        types: int (m,) ``MemoryType`` values (flags bits 1-2).
        owners: int64 (m,) the memories' TSIDs (the owner field, bytes 52..59).
        timestamp_ms: int64 (m,) formation time, epoch ms.
        importance: float (m,) in [0.05, 10]; valence: int (m,) in [-127, 127];
            arousal: int (m,) in [0, 255]; pinned: bool (m,) (pinned memories never decay).
        exact_norm: float32 (m,) L2 norm of each float vector before quantisation.
        tags: each memory's tags (their 128-bit Bloom filter goes into tags_lo/tags_hi).
        source: ``Source`` value of the whole batch (EXPERIENCED, DISTILLED, ...).
        provenance: int (m,) ``RecordProvenance`` values.
        consolidation_flags: the batch's ``consolidation_flags`` byte (0..255).
    """
    m = len(types)
    headers = np.zeros(m, dtype=HEADER_DTYPE)
    headers["version"] = _HEADER_VERSION
    flags = (np.asarray(types, dtype=np.int32) << 1) | FLAG_RESOLVED
    headers["flags"] = flags | np.where(np.asarray(pinned, dtype=bool), FLAG_PINNED, 0)
    headers["valence"] = valence
    headers["arousal"] = arousal
    headers["importance"] = importance
    headers["timestamp_ms"] = timestamp_ms
    headers["exact_norm"] = exact_norm
    blooms = [tag_bloom(t) if t else (0, 0) for t in tags]
    headers["tags_lo"] = [b[0] for b in blooms]
    headers["tags_hi"] = [b[1] for b in blooms]
    headers["source"] = int(source)
    headers["consolidation_flags"] = int(consolidation_flags)
    headers["provenance"] = provenance
    headers["owner"] = owners
    return headers


def is_consolidated(flags: np.ndarray) -> np.ndarray:
    """bool mask of header ``flags`` (uint8 (m,)) whose memory was consolidated."""
    return np.asarray((np.asarray(flags) & FLAG_CONSOLIDATED) != 0)


def is_tombstoned(flags: np.ndarray) -> np.ndarray:
    """bool mask of header ``flags`` (uint8 (m,)) whose memory is a tombstone."""
    return np.asarray((np.asarray(flags) & FLAG_TOMBSTONE) != 0)


def with_consolidated(headers: np.ndarray) -> np.ndarray:
    """A copy of HEADER_DTYPE ``headers`` with the consolidated bit set."""
    out = np.array(headers, dtype=HEADER_DTYPE, copy=True)
    out["flags"] |= FLAG_CONSOLIDATED
    return out


def with_provenance(headers: np.ndarray, provenance: np.ndarray) -> np.ndarray:
    """A copy of HEADER_DTYPE ``headers`` with record provenance ``provenance`` (int (m,))."""
    out = np.array(headers, dtype=HEADER_DTYPE, copy=True)
    out["provenance"] = provenance
    return out
