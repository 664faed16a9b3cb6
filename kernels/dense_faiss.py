"""The FAISS backend of :class:`~.dense.DenseIndex` (``backend="faiss"``, CPU only).

An ``IndexFlatIP`` over the dequantised rows ``c * cs`` searched with the integer-valued query
codes and rescaled by ``qs``: the same similarity as the torch backend up to float rounding, 4
bytes per dimension instead of 1. (A FAISS scalar quantizer cannot hold a per-row scale:
``QT_8bit_direct_signed`` would store ``c`` exactly but rank by ``x·c`` without ``cs``.) Ties at
the k-th place are FAISS's choice on this backend. Host copies of the codes and scales serve
:meth:`FaissRows.score_slots`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from spector_gpu.errors import MissingExtraError

from .dense_reference import rescale
from .quant import quantize_int8
from .topk import sort_pairs_torch

__all__ = ["FaissRows"]

_NEG_INF = float("-inf")


def _new_faiss_index(dim: int) -> Any:
    try:
        import faiss
    except ImportError as exc:  # faiss-cpu is a core dependency, but be explicit if it is missing
        raise MissingExtraError('backend="faiss" needs faiss; pip install faiss-cpu') from exc
    return faiss.IndexFlatIP(dim)


class FaissRows:
    """The rows of a FAISS-backed index: ``IndexFlatIP`` of ``c * cs`` plus host codes/scales.

    Args:
        dim: vector dimension d.
    """

    def __init__(self, dim: int) -> None:
        self._faiss = _new_faiss_index(dim)
        self._host_codes = np.zeros((0, dim), dtype=np.int8)
        self._host_scales = np.zeros(0, dtype=np.float32)

    def add(self, codes: np.ndarray, scales: np.ndarray) -> None:
        """Append int8 (m, d) codes with float32 (m,) scales (validated by the caller)."""
        self._faiss.add(codes.astype(np.float32) * scales[:, None])
        self._host_codes = np.concatenate([self._host_codes, codes])
        self._host_scales = np.concatenate([self._host_scales, scales])

    def search(
        self, x: np.ndarray, k: int, gate: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """float32 (n, k) scores and int64 (n, k) slots of float32 (n, d) queries ``x``;
        ``gate`` bool (N,) or ``None``; ``(-inf, -1)`` padding."""
        import faiss

        xq, qs = quantize_int8(x)
        params = None
        if gate is not None:
            bitmap = np.packbits(gate, bitorder="little")
            selector = faiss.IDSelectorBitmap(
                len(self._host_scales), faiss.swig_ptr(bitmap)
            )  # keep both alive
            params = faiss.SearchParameters()
            params.sel = selector
        dist, ids = self._faiss.search(xq.astype(np.float32), k, params=params)
        dist = np.where(ids < 0, np.float32(_NEG_INF), dist).astype(np.float32)
        ids = np.where(ids < 0, -1, ids).astype(np.int64)
        v, i = sort_pairs_torch(torch.from_numpy(dist), torch.from_numpy(ids))
        return rescale(v.numpy(), qs), i.numpy()

    def score_slots(self, x: np.ndarray, sl: np.ndarray) -> np.ndarray:
        """float32 (n, c) scores of int64 (n, c) slots ``sl`` (``-inf`` where -1)."""
        xq, qs = quantize_int8(x)
        rows = (
            self._host_codes[np.maximum(sl, 0)].astype(np.float32)
            * self._host_scales[np.maximum(sl, 0)][..., None]
        )
        keys = np.einsum("ncd,nd->nc", rows, xq.astype(np.float32)).astype(np.float32)
        out: np.ndarray = rescale(np.where(sl < 0, np.float32(_NEG_INF), keys), qs)
        return out
