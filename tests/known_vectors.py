"""A caller's embedder whose vectors the test chose (shared by the dense first-pass tests)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np


class KnownEmbedder:
    """Text → the row ``table`` gives it; any other text → a CRC-seeded vector; unit rows."""

    fusion_weight = 1.0

    def __init__(self, table: Mapping[str, np.ndarray], dim: int, name: str) -> None:
        self.table, self.dim, self.name = dict(table), dim, name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = self.table.get(t)
            if v is None:
                v = np.random.default_rng(zlib.crc32(t.encode())).normal(size=self.dim)
            out[i] = v / np.linalg.norm(v)
        return out
