"""Memory ids as the cortex hands them to pathways: the TSID codec and the id digest.

A memory's id is its TSID (64 bits: ms since 2024-06-01 | node | sequence; 13 Crockford
base32 characters, string order = time order — :mod:`spector_gpu.storage.tsid`). The index
maps it to an ordinal; events record a batch's ids by :func:`ids_digest`.
"""

from __future__ import annotations

import numpy as np

from ..storage.crc import crc32c
from ..storage.tsid import TsidGenerator, decode_tsid, encode_tsid, encode_tsids

__all__ = ["TsidGenerator", "decode_tsid", "encode_tsid", "encode_tsids", "ids_digest"]


def ids_digest(ids: np.ndarray) -> int:
    """CRC32C of ``ids`` (TSIDs, int64 (m,)) as little-endian int64 bytes: the ``ids_crc32c``
    an event records for the memories it names."""
    return crc32c(np.asarray(ids).astype("<i8").tobytes())
