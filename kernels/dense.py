"""Batched INT8 dense similarity with gated, deterministic top-k (DESIGN §6).

**Similarity.** Corpus rows are stored as symmetric INT8 codes ``c`` with a float32 scale
``cs`` per row (:mod:`.quant`). Each query is quantised the same way (codes ``x``, scale
``qs``). For query i and slot j::

    dot[i, j]  = Σ_d x[i, d] · c[j, d]           exact, in int32
    key[i, j]  = float32(dot[i, j]) * cs[j]       float32; the ranking key
    score[i,j] = key[i, j] * qs[i]                float32; what is returned

On L2-normalised vectors ``score`` approximates the cosine (error ≈ 1e-3). Every step is an
exact integer operation or one IEEE float32 multiply, so the torch CPU path, the CUDA path and
the numpy twin :func:`search_reference` give bit-identical scores and ids. Results are ordered
by ``(key descending, slot ascending)``; since ``qs > 0`` this is also descending ``score``.

**Gates** (``allowed``, bool (N,)) are applied before top-k: gated rows never appear, and fewer
than ``k`` results come back only when fewer than ``k`` rows are allowed. Padding is
``(-inf, -1)``.

**Kernels.** The corpus is scanned in tiles of rows; each tile is one ``torch._int_mm`` with the
corpus tile as the left operand (``(T, d) @ (d, n)``), which on CPU lets oneDNN use VNNI over the
row-major codes without repacking them (measured on the 2-core AVX-512 dev box, 65,536 × 384
tile: 3× faster than the queries-first order for 256 queries and 10× for one query, and 10×
faster than dequantise + fp32 GEMM), and on CUDA runs on the int8 tensor cores. Once every
query holds k candidates, only the keys at or above its current k-th key leave a tile
(a compare + nonzero instead of a top-k); per-tile results are merged exactly (:mod:`.topk`).

**CUDA tiles** never read back to the host inside the tile loop (each sync stalls the GPU; on
an H200, 1M × 384 rows, 4,096 queries, the threshold path above spent 82 ms in syncs, nonzero
scans and full-tile top-k). Per tile: the GEMM writes int32 dots into a reused buffer; one
``addcmul`` turns them in place into float32 keys (``bias + float32(dot) * cs``, bias 0 for an
allowed row and ``-inf`` for a gated or padding row: one read and one write of the tile, and no
separate mask pass); then :func:`~.topk.merge_blocks_torch` takes the max of each block of B
rows (one read of the tile), selects each query's top-k blocks, and merges those k·B rows
exactly into the running lists, all as int64 keys (:func:`~.topk.pack_keys_torch`) so a plain
``torch.topk`` is exact. HBM traffic is thus ~4 × 4 bytes per (row, query): GEMM write,
addcmul read + write, amax read; everything else is O(T/B + k·B) per query. B is the power of
two nearest ``sqrt(T/k)`` within [32, 256] (64 for 65,536-row tiles and k = 10), which balances
the block stage (T/B maxima per query, packed to int64 and top-k'd) against the candidate stage
(k·B gathered keys per query). The CPU runs the same path when the layout is emulated
(``_init_layout(cuda_layout=True)``), which is how the tests check it.

**FAISS backend** (``backend="faiss"``, CPU only): an ``IndexFlatIP`` over the dequantised rows
``c * cs`` searched with the integer-valued query codes and rescaled by ``qs``; same similarity up
to float rounding, 4 bytes per dimension instead of 1. (A FAISS scalar quantizer cannot hold a
per-row scale: ``QT_8bit_direct_signed`` would store ``c`` exactly but rank by ``x·c`` without
``cs``.) Ties at the k-th place are FAISS's choice on this backend.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch
from spector_gpu.kernels import fused
from spector_gpu.kernels.quant import check_matrix, quantize_int8, quantize_int8_torch
from spector_gpu.kernels.topk import (
    merge_blocks_torch,
    pack_keys_torch,
    sort_pairs_torch,
    topk_stable,
    topk_stable_torch,
    unpack_keys_torch,
    update_topk_torch,
)

from spector_gpu.device import DeviceLike, resolve_device
from spector_gpu.errors import MissingExtraError, ValidationError

__all__ = ["DenseIndex", "score_slots_reference", "search_reference"]

logger = logging.getLogger(__name__)

_NEG_INF = float("-inf")
_CPU_BLOCK = 1 << 21  # score elements per CPU tile (8 MiB of int32: stays in L2/L3)
_CUDA_BLOCK = 1 << 28  # score elements per CUDA tile (1 GiB of int32)
_SPARSE_GATE = 8  # gather allowed rows when at most 1/8 of the corpus is allowed
_PRUNE_RATIO = 16  # take the threshold path when at most 1/16 of a tile's keys survive
_MAX_BLOCK = 256  # largest block-max block (rows); capacity is a multiple of it
_MAX_SLOT = (1 << 32) - 1  # packed top-k keys hold a slot in 32 bits
_FUSED_MAX_K = 256  # larger k: the torch path (the fused candidate stage grows as k · block)


def _exact_dot_keys(codes: np.ndarray, cscale: np.ndarray, xq: np.ndarray) -> np.ndarray:
    dot = xq.astype(np.float64) @ codes.astype(np.float64).T  # exact: |dot| < 2**53
    return dot.astype(np.float32) * cscale[None, :].astype(np.float32)


def _rescale(keys: np.ndarray, qscale: np.ndarray) -> np.ndarray:
    out = np.full(keys.shape, _NEG_INF, dtype=np.float32)
    qs = np.broadcast_to(qscale.astype(np.float32)[:, None], keys.shape)
    np.multiply(keys, qs, out=out, where=~np.isneginf(keys))  # -inf * 0 would be NaN
    return out


def search_reference(
    corpus_q: npt.ArrayLike,
    scale: npt.ArrayLike,
    queries: npt.ArrayLike,
    k: int,
    allowed: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """numpy twin of :meth:`DenseIndex.search` (exact, slow; for tests).

    Args:
        corpus_q: int8 (N, d) codes; scale: float32 (N,); queries: float32 (n, d);
        k: results per query; allowed: optional bool (N,) gate.

    Returns:
        float32 (n, k) scores and int64 (n, k) slots, as :meth:`DenseIndex.search` defines them.
    """
    codes = np.asarray(corpus_q, dtype=np.int8)
    xq, qs = quantize_int8(queries)
    keys = _exact_dot_keys(codes, np.asarray(scale, np.float32), xq)
    if allowed is not None:
        keys[:, ~np.asarray(allowed, dtype=bool)] = _NEG_INF
    vals, slots = topk_stable(keys, k)
    return _rescale(vals, qs), slots


def score_slots_reference(
    corpus_q: npt.ArrayLike, scale: npt.ArrayLike, queries: npt.ArrayLike, slots: npt.ArrayLike
) -> np.ndarray:
    """numpy twin of :meth:`DenseIndex.score_slots`: float32 (n, c), ``-inf`` where slot = -1."""
    codes = np.asarray(corpus_q, dtype=np.int8)
    xq, qs = quantize_int8(queries)
    keys = _exact_dot_keys(codes, np.asarray(scale, np.float32), xq)
    sl = np.asarray(slots, dtype=np.int64)
    out = np.take_along_axis(keys, np.maximum(sl, 0), axis=1)
    return _rescale(np.where(sl < 0, np.float32(_NEG_INF), out), qs)


class DenseIndex:
    """INT8 corpus vectors on a device (torch) or in FAISS, searched by batched top-k.

    Rows are *slots* ``0..N-1`` in insertion order. See the module docstring for the similarity.

    Args:
        dim: vector dimension d (> 0).
        device: ``None``/``"auto"``, ``"cpu"``, ``"cuda[:N]"`` (torch backend); FAISS is CPU only.
        backend: ``"torch"`` (default) or ``"faiss"``.
        tile_rows: corpus rows per tile; ``None`` picks by batch size and device.
    """

    def __init__(
        self,
        dim: int,
        *,
        device: DeviceLike = None,
        backend: Literal["torch", "faiss"] = "torch",
        tile_rows: int | None = None,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValidationError(f"dim must be a positive int, got {dim!r}")
        if backend not in ("torch", "faiss"):
            raise ValidationError(f'backend must be "torch" or "faiss", got {backend!r}')
        if tile_rows is not None and (isinstance(tile_rows, bool) or not isinstance(tile_rows, int) or tile_rows < 1):
            raise ValidationError(f"tile_rows must be a positive int or None, got {tile_rows!r}")
        self._dim = dim
        self._backend: Literal["torch", "faiss"] = backend
        self._tile_rows = tile_rows
        self._n = 0
        self._block_rows: int | None = None  # tests force a block size (power of two ≤ 256)
        # Fused Triton kernels on CUDA (None: decide at the first search); tests set True on
        # the CPU under TRITON_INTERPRET=1, with a small config and tile.
        self._fused: bool | None = None
        self._fused_config: fused.TritonConfig = fused.DEFAULT_CONFIG
        self._fused_tile_maxima: int | None = None
        if backend == "faiss":
            if device is not None and str(device) not in ("auto", "cpu"):
                raise ValidationError(
                    f'backend="faiss" runs on the CPU; got device={device!r}. Use backend="torch" '
                    "for CUDA (GPU FAISS is bring-your-own)"
                )
            self._device = torch.device("cpu")
            self._faiss = _new_faiss_index(dim)
            self._host_codes = np.zeros((0, dim), dtype=np.int8)
            self._host_scales = np.zeros(0, dtype=np.float32)
        else:
            self._device = resolve_device(device)
        self._scratch = threading.local()
        self._init_layout(cuda_layout=self._device.type == "cuda")

    def _init_layout(self, *, cuda_layout: bool) -> None:
        # CUDA int8 GEMM wants K and N multiples of 8 and M > 16: pad with zero columns/rows.
        # (Tests call this with cuda_layout=True on the CPU to exercise the padding logic.)
        self._cuda = cuda_layout
        self._dpad = -(-self._dim // 8) * 8 if cuda_layout else self._dim
        self._codes = torch.zeros((0, self._dpad), dtype=torch.int8, device=self._device)
        self._scales = torch.zeros(0, dtype=torch.float32, device=self._device)

    # ------------------------------------------------------------------ properties
    @property
    def dim(self) -> int:
        """Vector dimension d."""
        return self._dim

    @property
    def device(self) -> torch.device:
        """Where the codes live and the similarity runs."""
        return self._device

    @property
    def backend(self) -> Literal["torch", "faiss"]:
        """``"torch"`` or ``"faiss"``."""
        return self._backend

    @property
    def nbytes(self) -> int:
        """Bytes held for the N rows (codes + scales, or FAISS floats + host codes)."""
        if self._backend == "faiss":
            return self._n * (4 * self._dim + self._dim + 4)
        return self._n * (self._dpad + 4)

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"DenseIndex(dim={self._dim}, n={self._n}, backend={self._backend!r}, device={str(self._device)!r})"

    # ------------------------------------------------------------------ writes
    def add(self, q: npt.ArrayLike, scale: npt.ArrayLike) -> None:
        """Append rows; they take slots ``len(self) .. len(self)+m-1``.

        Args:
            q: int8 (m, d) codes (see :func:`~spector_gpu.kernels.quant.quantize_int8`).
            scale: float32 (m,) finite, non-negative scales.

        Storage grows by doubling on the device; only the new rows are copied from the host.
        """
        codes = np.asarray(q)
        scales = np.asarray(scale)
        if codes.dtype != np.int8 or codes.ndim != 2 or codes.shape[1] != self._dim:
            raise ValidationError(
                f"q must be int8 (m, {self._dim}); got {codes.dtype} {codes.shape}"
            )
        if scales.shape != (codes.shape[0],) or not np.issubdtype(scales.dtype, np.floating):
            raise ValidationError(f"scale must be float32 ({codes.shape[0]},); got {scales.dtype} {scales.shape}")
        scales = scales.astype(np.float32)
        bad = ~np.isfinite(scales) | (scales < 0)
        if bad.any():
            raise ValidationError(f"scale row {int(np.flatnonzero(bad)[0])} is negative, NaN or inf")
        m = codes.shape[0]
        if m == 0:
            return
        if self._backend == "faiss":
            self._faiss.add(codes.astype(np.float32) * scales[:, None])
            self._host_codes = np.concatenate([self._host_codes, codes])
            self._host_scales = np.concatenate([self._host_scales, scales])
            self._n += m
            return
        self._reserve(self._n + m)
        rows = torch.from_numpy(np.ascontiguousarray(codes)).to(self._device)
        self._codes[self._n : self._n + m, : self._dim] = rows
        self._scales[self._n : self._n + m] = torch.from_numpy(scales).to(self._device)
        self._n += m

    def _reserve(self, need: int) -> None:
        cap = self._codes.shape[0]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap, 1024)
        new_cap = -(-new_cap // _MAX_BLOCK) * _MAX_BLOCK  # CUDA tiles may read up to here
        codes = torch.zeros((new_cap, self._dpad), dtype=torch.int8, device=self._device)
        scales = torch.zeros(new_cap, dtype=torch.float32, device=self._device)
        codes[: self._n] = self._codes[: self._n]
        scales[: self._n] = self._scales[: self._n]
        self._codes, self._scales = codes, scales

    # ------------------------------------------------------------------ reads
    def search(
        self, queries: npt.ArrayLike, k: int, *, allowed: npt.ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k slots per query.

        Args:
            queries: float32 (n, d), finite (L2-normalised for cosine scores).
            k: results per query (≥ 1).
            allowed: optional bool (N,); ``False`` rows are excluded before top-k.

        Returns:
            ``(scores, slots)``: float32 (n, k) descending and int64 (n, k); ties to the lower
            slot; ``(-inf, -1)`` padding when fewer than k rows are allowed.
        """
        x = check_matrix(queries, name="queries", dim=self._dim)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValidationError(f"k must be a positive int, got {k!r}")
        k = int(k)
        gate = self._check_allowed(allowed)
        n = x.shape[0]
        empty = (np.full((n, k), _NEG_INF, np.float32), np.full((n, k), -1, np.int64))
        if n == 0 or self._n == 0 or (gate is not None and not gate.any()):
            return empty
        if self._backend == "faiss":
            return self._search_faiss(x, k, gate)
        if self._device.type == "cuda":  # quantise on the device (bit-identical twin)
            xq_t, qs_t = quantize_int8_torch(torch.from_numpy(x).to(self._device))
            keys, slots = self._topk_keys(xq_t, k, gate)
        else:
            xq, qs = quantize_int8(x)
            keys, slots = self._topk_keys(xq, k, gate)
            qs_t = torch.from_numpy(qs)
        scores = torch.where(keys == _NEG_INF, keys, keys * qs_t[:, None])
        return scores.cpu().numpy(), slots.cpu().numpy()

    def score_slots(self, queries: npt.ArrayLike, slots: npt.ArrayLike) -> np.ndarray:
        """Exact scores of given candidate slots (for fusion over a union candidate set).

        Args:
            queries: float32 (n, d); slots: int64 (n, c) in ``[-1, N)``.

        Returns:
            float32 (n, c): the same value :meth:`search` would report; ``-inf`` where slot is -1.
        """
        x = check_matrix(queries, name="queries", dim=self._dim)
        sl = np.asarray(slots)
        if sl.ndim != 2 or sl.shape[0] != x.shape[0] or not np.issubdtype(sl.dtype, np.integer):
            raise ValidationError(f"slots must be int (n={x.shape[0]}, c); got {sl.dtype} {sl.shape}")
        if sl.size and (sl.min() < -1 or sl.max() >= self._n):
            raise ValidationError(f"slots must lie in [-1, {self._n}); got range [{sl.min()}, {sl.max()}]")
        if self._backend == "faiss":
            return self._score_slots_faiss(x, sl.astype(np.int64))
        xq, qs = quantize_int8(x)
        out = np.empty(sl.shape, dtype=np.float32)
        chunk = max(1, (1 << 24) // max(1, sl.shape[1] * self._dpad))
        for lo in range(0, sl.shape[0], chunk):
            out[lo : lo + chunk] = self._score_chunk(xq[lo : lo + chunk], qs[lo : lo + chunk], sl[lo : lo + chunk])
        return out

    # ------------------------------------------------------------------ torch internals
    def _check_allowed(self, allowed: npt.ArrayLike | None) -> np.ndarray | None:
        if allowed is None:
            return None
        gate = np.asarray(allowed)
        if gate.dtype != np.bool_ or gate.shape != (self._n,):
            raise ValidationError(f"allowed must be bool ({self._n},); got {gate.dtype} {gate.shape}")
        return None if gate.all() else gate

    def _queries_t(self, xq: np.ndarray) -> torch.Tensor:
        n = xq.shape[0]
        if not self._cuda:
            return torch.from_numpy(xq).t().contiguous()  # (d, n); measured fastest on CPU
        n_pad = max(-(-n // 8) * 8, 8)
        padded = torch.zeros((n_pad, self._dpad), dtype=torch.int8, device=self._device)
        padded[:n, : self._dim] = torch.from_numpy(xq).to(self._device)
        return padded.t()  # column-major (d, n_pad), as cuBLASLt wants

    def _tile_rows_for(self, n: int) -> int:
        if self._tile_rows is not None:
            rows = self._tile_rows
        else:
            rows = (_CUDA_BLOCK if self._cuda else _CPU_BLOCK) // max(n, 1)
            rows = min(max(rows, 1024), 1 << 20)
        return max(32, -(-rows // 32) * 32)

    def _buffers(self, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """CPU scratch (int32 dots, float32 keys, bool hits), reused across tiles and calls.

        Fresh multi-MiB tensors are page-faulted in on every touch (costly in VMs: measured
        10 ms per 4 MiB on the dev box); CUDA's caching allocator already avoids this.
        """
        if self._cuda:
            return None
        bufs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = getattr(self._scratch, "bufs", None)
        if bufs is None or bufs[0].shape[0] < rows or bufs[0].shape[1] != cols:
            bufs = (
                torch.empty((rows, cols), dtype=torch.int32),
                torch.empty((rows, cols), dtype=torch.float32),
                torch.empty((rows, cols), dtype=torch.bool),
            )
            self._scratch.bufs = bufs
        return bufs

    def _topk_keys(self, xq: np.ndarray | torch.Tensor, k: int,
                   gate: np.ndarray | None) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 (n, k) keys and int64 (n, k) slots; ``xq`` int8 (n, d), numpy or on the device."""
        if self._cuda:
            return self._topk_blockmax(xq, k, gate)
        if isinstance(xq, torch.Tensor):
            xq = xq.cpu().numpy()
        n = xq.shape[0]
        xt = self._queries_t(xq)
        best_v = torch.full((n, k), _NEG_INF, dtype=torch.float32, device=self._device)
        best_i = torch.full((n, k), -1, dtype=torch.int64, device=self._device)
        tile = self._tile_rows_for(n)
        bufs = self._buffers(min(tile, max(self._n, 1)), xt.shape[1])
        for codes, cscale, slot_of, valid, mask in self._tiles(tile, gate):
            if bufs is None:
                dots = torch._int_mm(codes, xt)[:valid, :n]  # (T, n) exact int32
                keys = torch.mul(dots, cscale[:valid, None])  # float32(dot) * cs, one pass
            else:
                dots = torch._int_mm(codes, xt, out=bufs[0][: codes.shape[0]])[:valid, :n]
                keys = torch.mul(dots, cscale[:valid, None], out=bufs[1][:valid])
            if mask is not None:
                keys.masked_fill_(~mask[:, None], _NEG_INF)
            cut = best_v[:, k - 1]
            if bool((cut > _NEG_INF).all()):
                # Most rows of a later tile fall below every query's current k-th key: keep
                # only those at or above it (ties included, so the merge stays exact).
                hits = keys >= cut[None, :] if bufs is None else torch.ge(keys, cut[None, :], out=bufs[2][:valid])
                rows, cols = torch.nonzero(hits, as_tuple=True)
                if rows.numel() * _PRUNE_RATIO <= keys.numel():
                    best_v, best_i = update_topk_torch(best_v, best_i, cols, keys[rows, cols], slot_of(rows))
                    continue
            v, local = topk_stable_torch(keys, k, dim=0)
            glob = torch.where(local < 0, local, slot_of(local.clamp(min=0)))
            v, glob = sort_pairs_torch(torch.cat([best_v, v], 1), torch.cat([best_i, glob], 1))
            best_v, best_i = v[:, :k].contiguous(), glob[:, :k].contiguous()
        return best_v, best_i

    def _block_layout(self, n: int, k: int, rows: int) -> tuple[int, int]:
        """(tile rows, block rows) for the block-max path; ``rows`` = rows to scan."""
        tile = self._tile_rows_for(n)
        block = self._block_rows
        if block is None:
            ideal = max(1.0, min(tile, rows) / k) ** 0.5
            block = min(max(1 << round(np.log2(ideal)), 32), _MAX_BLOCK)
        if block < 1 or block > _MAX_BLOCK or block & (block - 1):
            raise ValidationError(
                f"block rows must be a power of two in [1, {_MAX_BLOCK}], got {block}"
            )
        unit = max(block, 32)  # a multiple of block and of the 32 rows the int8 GEMM wants
        return -(-tile // unit) * unit, block

    def _topk_blockmax(
        self, xq: np.ndarray | torch.Tensor, k: int, gate: np.ndarray | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """CUDA path (see the module docstring): float32 keys (n, k) and int64 slots (n, k)."""
        if self._fused is None:
            self._fused = self._device.type == "cuda" and fused.available()
        if self._fused and k <= _FUSED_MAX_K:
            try:
                return unpack_keys_torch(self._fused_search(xq, k, gate))
            except ValidationError:
                raise
            except Exception as exc:  # a GPU or Triton build the kernels do not compile for
                if self._device.type != "cuda":
                    raise
                logger.warning("Triton dense kernels failed on %s (%s); using the torch path",
                               self._device, exc)
                self._fused = False
        if isinstance(xq, torch.Tensor):
            xq = xq.cpu().numpy()
        n = xq.shape[0]
        if self._codes.shape[0] >= _MAX_SLOT:
            raise ValidationError(f"the CUDA path ranks at most {_MAX_SLOT} rows; shard the index")
        sparse = gate is not None and gate.sum() * _SPARSE_GATE <= self._n
        total = int(gate.sum()) if sparse and gate is not None else self._n
        tile, block = self._block_layout(n, k, total)
        plan = self._block_plan(tile, max(block, 32), gate if sparse else None, gate)
        xt = self._queries_t(xq)
        best = self._blockmax_loop(xt, n, k, block, *plan)
        keys, slots = unpack_keys_torch(best)
        return keys, slots

    def _fused_search(self, xq: np.ndarray | torch.Tensor, k: int, gate: np.ndarray | None) -> torch.Tensor:
        """The Triton path (:mod:`.fused`): packed int64 (n, k) top-k keys."""
        dev = self._device
        if self._n >= _MAX_SLOT:
            raise ValidationError(f"the CUDA path ranks at most {_MAX_SLOT} rows; shard the index")
        if gate is not None and gate.sum() * _SPARSE_GATE <= self._n:  # gather the allowed rows
            rows = torch.from_numpy(np.flatnonzero(gate)).to(dev)
            codes = self._codes.index_select(0, rows)
            cscale = self._scales.index_select(0, rows)
            bias = torch.zeros(rows.numel(), dtype=torch.float32, device=dev)
            slots = rows
        else:
            codes, cscale = self._codes[: self._n], self._scales[: self._n]
            slots = torch.arange(self._n, device=dev)
            if gate is None:
                bias = torch.zeros(self._n, dtype=torch.float32, device=dev)
            else:
                gate_t = torch.from_numpy(gate).to(dev)
                bias = torch.where(gate_t, 0.0, _NEG_INF).to(torch.float32)
        queries = torch.zeros((xq.shape[0], self._dpad), dtype=torch.int8, device=dev)
        queries[:, : self._dim] = xq if isinstance(xq, torch.Tensor) else torch.from_numpy(xq).to(dev)
        extra = {} if self._fused_tile_maxima is None else {"max_block_maxima": self._fused_tile_maxima}
        # Rows per block: 128 measured fastest for k = 10 on an H200 (1M x 384, 4,096 queries:
        # 14.0 ms against 16.2 ms at 64); smaller for larger k, so that the k·block candidate
        # rows per query stay near 2,048.
        block = self._block_rows or max(16, min(128, 1 << max(0, (2048 // k).bit_length() - 1)))
        return fused.search_packed(codes, cscale, bias, slots, queries, k, config=self._fused_config,
                                   block=block, **extra)

    def _block_plan(
        self, tile: int, unit: int, sparse_gate: np.ndarray | None, gate: np.ndarray | None
    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
        """Host-side plan and one-off host→device copies, before the sync-free tile loop.

        Returns ``(rows, bias, slots, ranges)``: ``rows`` int64 (M,) corpus rows to gather (sparse
        gate; padded with row 0) or ``None`` (scan ``self._codes`` in place); ``bias`` float32
        (M,) 0 for a live row, ``-inf`` for a gated or padding row; ``slots`` int64 (M,) each
        row's slot (ascending over live rows); ``ranges`` the ``[lo, hi)`` tiles, each a multiple
        of ``unit`` rows.
        """
        dev = self._device
        if sparse_gate is not None:  # gather the allowed rows (np.flatnonzero: ascending slots)
            live = np.flatnonzero(sparse_gate)
            total = -(-live.size // unit) * unit
            slots_np = np.zeros(total, dtype=np.int64)
            slots_np[: live.size] = live
            bias_np = np.full(total, _NEG_INF, dtype=np.float32)
            bias_np[: live.size] = 0.0
            slots = torch.from_numpy(slots_np).to(dev)
            ranges = [(lo, min(lo + tile, total)) for lo in range(0, total, tile)]
            return slots, torch.from_numpy(bias_np).to(dev), slots, ranges
        cap = self._codes.shape[0]  # a multiple of _MAX_BLOCK, so rounding up to unit fits
        bias_np = np.full(cap, _NEG_INF, dtype=np.float32)
        if gate is None:
            bias_np[: self._n] = 0.0
        else:
            bias_np[: self._n] = np.where(gate, np.float32(0.0), np.float32(_NEG_INF))
        end = -(-self._n // unit) * unit
        ranges = [
            (lo, min(lo + tile, end))
            for lo in range(0, self._n, tile)
            if gate is None or gate[lo : lo + tile].any()  # a host check: skip all-gated tiles
        ]
        return None, torch.from_numpy(bias_np).to(dev), torch.arange(cap, device=dev), ranges

    def _blockmax_loop(
        self,
        xt: torch.Tensor,
        n: int,
        k: int,
        block: int,
        rows: torch.Tensor | None,
        bias: torch.Tensor,
        slots: torch.Tensor,
        ranges: list[tuple[int, int]],
    ) -> torch.Tensor:
        """The tile loop: packed int64 (n, k) top-k keys; no host sync (tested on CUDA)."""
        dev = self._device
        best = pack_keys_torch(
            torch.full((n, k), _NEG_INF, dtype=torch.float32, device=dev),
            torch.zeros((n, k), dtype=torch.int64, device=dev),
        )
        if not ranges:
            return best
        height = max(hi - lo for lo, hi in ranges)
        buf = torch.empty((height, xt.shape[1]), dtype=torch.int32, device=dev)
        for lo, hi in ranges:
            if rows is None:
                codes, cscale = self._codes[lo:hi], self._scales[lo:hi]
            else:
                codes = self._codes.index_select(0, rows[lo:hi])
                cscale = self._scales.index_select(0, rows[lo:hi])
            dots = torch._int_mm(codes, xt, out=buf[: hi - lo])  # (T, n_pad) exact int32
            keys = dots.view(torch.float32)  # keys overwrite the dots in place
            torch.addcmul(bias[lo:hi, None], dots, cscale[:, None], out=keys)
            best = merge_blocks_torch(best, keys[:, :n], slots[lo:hi], block)
        return best

    def _tiles(self, tile: int, gate: np.ndarray | None) -> Any:
        """Yield (codes (T', dpad), scales, local→slot map, valid rows, mask or None) per tile."""
        if gate is not None and gate.sum() * _SPARSE_GATE <= self._n:
            slots = torch.from_numpy(np.flatnonzero(gate)).to(self._device)
            for lo in range(0, slots.numel(), tile):
                chunk = slots[lo : lo + tile]
                valid = chunk.numel()
                rows = chunk
                if self._cuda and valid % 32:  # pad with slot 0 rows, cut off after the GEMM
                    rows = torch.cat([chunk, chunk.new_zeros(32 - valid % 32)])
                yield (self._codes.index_select(0, rows), self._scales.index_select(0, rows),
                       (lambda loc, c=chunk: c[loc]), valid, None)
            return
        gate_t = None if gate is None else torch.from_numpy(gate).to(self._device)
        for lo in range(0, self._n, tile):
            valid = min(tile, self._n - lo)
            hi = lo + (-(-valid // 32) * 32 if self._cuda else valid)  # capacity is a multiple of 32
            mask = None if gate_t is None else gate_t[lo : lo + valid]
            if mask is not None and not bool(mask.any()):
                continue
            yield (self._codes[lo:hi], self._scales[lo:hi], (lambda loc, base=lo: loc + base), valid, mask)

    def _score_chunk(self, xq: np.ndarray, qs: np.ndarray, sl: np.ndarray) -> np.ndarray:
        # Gathered INT8 rows and INT8 queries as float32, multiplied by a batched GEMM: every
        # product is an integer below 127² and every partial sum below 2^24 for d <= 1040, so
        # float32 accumulation is exact and equals the int32 dot that search() reports.
        idx = torch.from_numpy(np.maximum(sl, 0).astype(np.int64)).to(self._device)
        exact = self._dim <= 1040
        ftype = torch.float32 if exact else torch.float64
        rows = self._codes[idx.reshape(-1), : self._dim].to(ftype).reshape(*sl.shape, self._dim)
        x = torch.from_numpy(xq).to(self._device).to(ftype)
        dots = torch.bmm(rows, x[:, :, None])[:, :, 0]
        keys = dots.to(torch.float32) * self._scales[idx]
        qs_t = torch.from_numpy(qs).to(self._device)
        scores = keys * qs_t[:, None]
        scores = torch.where(torch.from_numpy(sl < 0).to(self._device), _NEG_INF, scores)
        return scores.cpu().numpy()

    # ------------------------------------------------------------------ faiss internals
    def _search_faiss(self, x: np.ndarray, k: int, gate: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        xq, qs = quantize_int8(x)
        params = None
        if gate is not None:
            bitmap = np.packbits(gate, bitorder="little")
            selector = faiss.IDSelectorBitmap(self._n, faiss.swig_ptr(bitmap))  # keep both alive
            params = faiss.SearchParameters()
            params.sel = selector
        dist, ids = self._faiss.search(xq.astype(np.float32), k, params=params)
        dist = np.where(ids < 0, np.float32(_NEG_INF), dist).astype(np.float32)
        ids = np.where(ids < 0, -1, ids).astype(np.int64)
        v, i = sort_pairs_torch(torch.from_numpy(dist), torch.from_numpy(ids))
        return _rescale(v.numpy(), qs), i.numpy()

    def _score_slots_faiss(self, x: np.ndarray, sl: np.ndarray) -> np.ndarray:
        xq, qs = quantize_int8(x)
        rows = self._host_codes[np.maximum(sl, 0)].astype(np.float32) * self._host_scales[np.maximum(sl, 0)][..., None]
        keys = np.einsum("ncd,nd->nc", rows, xq.astype(np.float32)).astype(np.float32)
        return _rescale(np.where(sl < 0, np.float32(_NEG_INF), keys), qs)


def _new_faiss_index(dim: int) -> Any:
    try:
        import faiss
    except ImportError as exc:  # faiss-cpu is a core dependency, but be explicit if it is missing
        raise MissingExtraError('backend="faiss" needs faiss; pip install faiss-cpu') from exc
    return faiss.IndexFlatIP(dim)
