"""VectorSlab: the INT8 vector of every memory, one row per ordinal (region VECTOR).

Row, ``dim + 12`` bytes (:func:`.layouts.vector_dtype`)::

    0 q int8[dim]   dim scale f32   dim+4 ordinal u32 (owner: the memory's ordinal)
    dim+8 crc32c over [0, dim+8)

Vectors are quantised symmetrically per row, ``q = round(v / scale)`` with
``scale = max|v| / 127`` (DESIGN §6; :func:`spector_gpu.kernels.quant.quantize_int8`); the
exact float norm goes into the memory's header. The slab on disk is the truth the dense index
is loaded from.
"""

from __future__ import annotations

import numpy as np

from ..kernels.quant import quantize_int8
from ..storage.partition import Transaction
from ..storage.region import Region
from .fixed import FixedStrideStore
from .layouts import seal, vector_dtype

__all__ = ["QuantisedVectors", "VectorSlab"]

_GROUP_ROWS = 4096  # rows quantised at once


class QuantisedVectors:
    """INT8 rows of a batch: ``q`` int8 (m, dim), ``scale`` float32 (m,), and the exact L2
    ``norm`` float32 (m,) of the float vectors they came from."""

    __slots__ = ("norm", "q", "scale")

    def __init__(self, q: np.ndarray, scale: np.ndarray, norm: np.ndarray) -> None:
        self.q = q
        self.scale = scale
        self.norm = norm

    def __len__(self) -> int:
        return len(self.q)


class VectorSlab(FixedStrideStore):
    """Typed view of the vector slab region (see the module docstring)."""

    owner_field = "ordinal"

    def __init__(self, region: Region, dim: int) -> None:
        super().__init__(region, vector_dtype(dim))
        self.dim = dim

    @staticmethod
    def quantise(vectors: np.ndarray) -> QuantisedVectors:
        """INT8 rows of float32 ``vectors`` (m, dim), each finite (the caller checks)."""
        v = np.asarray(vectors, dtype=np.float32)
        q = np.empty(v.shape, dtype=np.int8)
        scale = np.empty(len(v), dtype=np.float32)
        norm = np.empty(len(v), dtype=np.float32)
        for lo in range(0, len(v), _GROUP_ROWS):  # row-wise: float temporaries of one group
            hi = lo + _GROUP_ROWS
            q[lo:hi], scale[lo:hi] = quantize_int8(v[lo:hi])
            norm[lo:hi] = np.linalg.norm(v[lo:hi], axis=1)
        return QuantisedVectors(q, scale, norm)

    def rows(self, q: np.ndarray, scale: np.ndarray, first: int) -> np.ndarray:
        """Sealed rows (m,) for ordinals ``first .. first+m-1``."""
        rows = np.zeros(len(q), dtype=self.dtype)
        rows["q"] = q
        rows["scale"] = scale
        rows["ordinal"] = np.arange(first, first + len(q))
        return seal(rows)

    def append_rows(self, tx: Transaction, q: np.ndarray, scale: np.ndarray, first: int) -> int:
        """Append the rows of ordinals ``first ..`` in ``tx``; returns the first slot."""
        return tx.append(self.region, self.rows(q, scale, first).tobytes())

    def codes(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """``(q int8 (m, dim), scale float32 (m,))`` of ordinals ``[start, stop)``, copied
        without CRC checks (open and refresh load the dense index; ``check()`` verifies)."""
        rows = self.decode(self.region.rows(start, stop).copy())
        return np.ascontiguousarray(rows["q"]), np.ascontiguousarray(rows["scale"])
