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

**Kernels.** :class:`DenseIndex` picks a path, each in its module: the CPU (:mod:`.dense_cpu`:
a native scan for fewer than 8 queries, which :meth:`~DenseIndex.topk_ahead` starts on a
thread of its own (:mod:`.ahead`), else GEMM tiles on one torch thread — int8 on CPUs with
INT8 matrix units, else exact float32, by a rule — in query chunks shared with the helper
threads, :func:`.sharing.shared_queries`), CUDA (:mod:`.dense_cuda`: block-max loop, Triton
glue, :mod:`.fused`; the CPU runs it under an emulated CUDA layout in the tests), FAISS
(:mod:`.dense_faiss`), numpy twins (:mod:`.dense_reference`). ``topk`` and ``score`` keep
results on the device; ``search`` and ``score_slots`` return numpy.
"""

from __future__ import annotations

import threading
from typing import Literal

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from spector_gpu.device import DeviceLike, resolve_device
from spector_gpu.errors import ValidationError

from . import dense_cpu, dense_cuda, fused
from .ahead import Pending, scan_ahead
from .dense_cpu import check_cpu_options, score_rows, scratch_buffers, topk_tiles
from .dense_faiss import FaissRows
from .dense_ivf import FirstPass
from .dense_reference import score_slots_reference, search_reference
from .native import native
from .quant import (
    DenseQueries,
    check_codes,
    check_gate,
    check_matrix,
    quantize_int8,
    quantize_rows_torch,
)
from .sharing import shared_queries

__all__ = ["DenseIndex", "DenseQueries", "score_slots_reference", "search_reference"]

_NEG_INF = float("-inf")
_CPU_BLOCK = 1 << 21  # score elements per CPU tile (8 MiB of int32: stays in L2/L3)
_CUDA_BLOCK = 1 << 28  # score elements per CUDA tile (1 GiB of int32)
_DEVICE_QUANTISE_MIN = 64  # queries per batch from which CUDA quantises them on the device
_SPARSE_GATE = 8  # gather allowed rows when at most 1/8 of the corpus is allowed
# Queries per batch up to which the CPU runs the native fused scan instead of GEMM tiles (one
# thread): the measured rule of dense_cpu's docstring (the GEMM wins from 5 to 10 queries).
NATIVE_SCAN_MAX = 7
_NATIVE_ROWS_PER_K = 8  # native heaps pay off from 8 k rows (else half the rows enter them)


class DenseIndex:
    """INT8 corpus vectors on a device (torch) or in FAISS, searched by batched top-k.

    Rows are *slots* ``0..N-1`` in insertion order. See the module docstring for the similarity.

    Args:
        dim: vector dimension d (> 0).
        device: ``None``/``"auto"``, ``"cpu"``, ``"cuda[:N]"`` (torch backend); FAISS is CPU only.
        backend: ``"torch"`` (default) or ``"faiss"``.
        tile_rows: corpus rows per tile; ``None`` picks by batch size and device.
        cpu_kernel: on the CPU, ``"auto"`` uses the native kernels (:mod:`.dense_cpu`) when
            they are built, ``"torch"`` never does (the twin the tests compare against),
            ``"native"`` insists on them.
        scan_threads: deprecated and ignored (a DeprecationWarning): the native scan runs
            on the calling thread; leave it out.
        first_pass: a :class:`~.dense_ivf.FirstPass` (IVF) that answers :meth:`topk` on the
            CPU from its ``min_rows`` on, or None (always the exact scan).
    """

    def __init__(
        self,
        dim: int,
        *,
        device: DeviceLike = None,
        backend: Literal["torch", "faiss"] = "torch",
        tile_rows: int | None = None,
        cpu_kernel: Literal["auto", "native", "torch"] = "auto",
        first_pass: FirstPass | None = None,
        scan_threads: int | None = None,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValidationError(f"dim must be a positive int, got {dim!r}")
        if backend not in ("torch", "faiss"):
            raise ValidationError(f'backend must be "torch" or "faiss", got {backend!r}')
        check_cpu_options(tile_rows, cpu_kernel, scan_threads)
        self._native, self.first_pass = cpu_kernel != "torch" and native is not None, first_pass
        self._dim = dim
        self._backend: Literal["torch", "faiss"] = backend
        self._tile_rows, self._n = tile_rows, 0
        self._block_rows: int | None = None  # tests force a block size (power of two ≤ 256)
        self._fused: bool | None = None  # Triton on CUDA (None: decide at first search)
        self._fused_config: fused.TritonConfig = fused.DEFAULT_CONFIG
        self._fused_tile_maxima: int | None = None
        if backend == "faiss":
            if device is not None and str(device) not in ("auto", "cpu"):
                raise ValidationError(
                    f'backend="faiss" runs on the CPU; got device={device!r}. Use backend="torch" '
                    "for CUDA (GPU FAISS is bring-your-own)"
                )
            self._device = torch.device("cpu")
            self._faiss = FaissRows(dim)
        else:
            self._device = resolve_device(device)
        self._scratch = threading.local()  # each thread's tile buffers
        # (query codes, keys of every row) of the last native scan, for score() of a pool
        self._scanned: tuple[np.ndarray, torch.Tensor] | None = None
        self._init_layout(cuda_layout=self._device.type == "cuda")

    def _init_layout(self, *, cuda_layout: bool) -> None:
        # CUDA int8 GEMM wants K and N multiples of 8 and M > 16: pad with zero columns/rows
        # (tests call this with cuda_layout=True on the CPU to exercise the padding logic).
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
        return (
            f"DenseIndex(dim={self._dim}, n={self._n}, backend={self._backend!r}, "
            f"device={str(self._device)!r})"
        )

    # ------------------------------------------------------------------ writes
    def add(self, q: npt.ArrayLike, scale: npt.ArrayLike) -> None:
        """Append rows; they take slots ``len(self) .. len(self)+m-1``.

        Args:
            q: int8 (m, d) codes (see :func:`~spector_gpu.kernels.quant.quantize_int8`).
            scale: float32 (m,) finite, non-negative scales.

        Storage grows by doubling on the device; only the new rows are copied from the host.
        """
        codes, scales = check_codes(q, scale, dim=self._dim)
        m = codes.shape[0]
        if m == 0:
            return
        if self._backend == "faiss":
            self._faiss.add(codes, scales)
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
        new_cap = -(-new_cap // dense_cuda.MAX_BLOCK) * dense_cuda.MAX_BLOCK  # CUDA tiles read here
        codes = torch.zeros((new_cap, self._dpad), dtype=torch.int8, device=self._device)
        scales = torch.zeros(new_cap, dtype=torch.float32, device=self._device)
        codes[: self._n] = self._codes[: self._n]
        scales[: self._n] = self._scales[: self._n]
        self._codes, self._scales = codes, scales

    # ------------------------------------------------------------------ reads
    def queries(self, queries: npt.ArrayLike) -> DenseQueries:
        """Validate and quantise float32 (n, d) queries once, for :meth:`topk` and
        :meth:`score` (raises ``ValidationError`` naming a non-finite row)."""
        x = check_matrix(queries, name="queries", dim=self._dim)
        xq, qs = quantize_int8(x)
        return DenseQueries(x, xq, qs, torch.from_numpy(qs).to(self._device))

    def topk(
        self, dq: DenseQueries, k: int, *, allowed: np.ndarray | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k slots per query as tensors on the index's device (no copy to the host).

        Args:
            dq: :meth:`queries` of this index; k: results per query (>= 1);
            allowed: optional bool (N,) host mask; ``False`` rows are excluded before top-k.

        Returns:
            ``(scores, slots)``: float32 (n, k) descending and int64 (n, k); ties to the lower
            slot; ``(-inf, -1)`` padding when fewer than k rows are allowed.
        """
        return self.topk_ahead(dq, k, allowed=allowed, thread=False).result()

    def topk_ahead(
        self, dq: DenseQueries, k: int, *, allowed: np.ndarray | None = None, thread: bool = True
    ) -> Pending[tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`topk`, taken later: where the batch takes the native scan on the CPU (fewer
        than 8 queries), the scans start now on a thread of their own when ``thread``
        (:func:`.ahead.scan_ahead`: no GIL while the caller goes on); otherwise computed now.
        Arguments are checked now. A caller that leaves without the result settles it."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValidationError(f"k must be a positive int, got {k!r}")
        k = int(k)
        gate = check_gate(allowed, self._n)
        n = len(dq)
        self._scanned = None
        if n == 0 or self._n == 0 or (gate is not None and not gate.any()):
            none = torch.full((n, k), -1, dtype=torch.int64, device=self._device)
            return Pending.done((none.to(torch.float32).fill_(_NEG_INF), none))
        if self._backend == "faiss":
            f_scores, f_slots = self._faiss.search(dq.x, k, gate)
            return Pending.done((torch.from_numpy(f_scores), torch.from_numpy(f_slots)))
        fp = self.first_pass
        if self._cuda:  # the index keeps whether the fused kernels still serve it
            xq: np.ndarray | Tensor = dq.xq
            if self._device.type == "cuda" and n >= _DEVICE_QUANTISE_MIN:
                # large batches: quantise on the device (the bit-identical twin), saving an
                # int8 upload; a few queries are cheaper on the host (no extra sync).
                # check_matrix already refused non-finite rows: no second check there.
                xq = quantize_rows_torch(torch.from_numpy(dq.x).to(self._device))[0]
            keys, slots, self._fused = dense_cuda.topk_blockmax(self, xq, k, gate, self._fused)
        elif fp is not None and fp.applies(self._n):
            keys, slots = fp.topk(self._codes, self._scales, self._n, self._dim, dq.xq, k, gate)
        elif self._native and n <= NATIVE_SCAN_MAX:
            scan = scan_ahead(
                self._codes, self._scales, self._n, self._dim, dq.xq, k, gate, thread=thread
            )

            def taken(out: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor]:
                self._scanned = (dq.xq, out[2])  # every row's key, for score() of the pool
                return self._scores(dq, out[0]), out[1]

            return scan.then(taken)
        else:
            keys, slots = shared_queries(dq.xq, k, lambda part: self._tiles(part, k, gate))
        return Pending.done((self._scores(dq, keys), slots))

    def _scores(self, dq: DenseQueries, keys: Tensor) -> Tensor:
        """Scores ``key * qs`` of keys (n, c) (``-inf`` stays)."""
        return torch.where(keys == _NEG_INF, keys, keys * dq.qs_t[:, None])

    def score(self, dq: DenseQueries, slots: torch.Tensor) -> torch.Tensor:
        """Exact scores of given candidate slots, as a tensor on the index's device.

        Args:
            dq: :meth:`queries` of this index; slots: int64 (n, c) tensor on the index's
                device, values in ``[-1, N)`` (the caller guarantees the range).

        Returns:
            float32 (n, c): the value :meth:`topk` reports for that slot; ``-inf`` at -1.
        """
        if self._backend == "faiss":
            return torch.from_numpy(self._faiss.score_slots(dq.x, slots.cpu().numpy()))
        scanned = self._scanned
        if scanned is not None and scanned[0] is dq.xq and slots.shape[0] == len(dq):
            # the last native scan kept every row's key for these very queries
            keys = torch.gather(scanned[1], 1, slots.clamp(min=0))
            return self._scores(dq, torch.where(slots < 0, _NEG_INF, keys))
        if self._device.type == "cpu" and self._native and not self._cuda:
            keys = score_rows(self._codes, self._scales, self._n, self._dim, dq.xq, slots.numpy())
            return self._scores(dq, keys)
        return dense_cuda.score_gathered(
            self._codes, self._scales, self._dim, self._dpad, dq.xq, dq.qs_t, slots
        )

    def keys_all(self, dq: DenseQueries) -> torch.Tensor:
        """float32 (n, N) ranking keys ``float32(dot) * cs`` of every row for every query, on
        the device — the values :meth:`topk` ranks by, for corpora small enough that the
        whole matrix is cheaper than a search. Torch backend only."""
        if self._backend != "torch":
            raise ValidationError("keys_all() needs the torch backend")
        if self._n == 0 or len(dq) == 0:
            return torch.zeros((len(dq), self._n), dtype=torch.float32, device=self._device)
        if not self._cuda:
            return dense_cpu.keys_all_cpu(
                self._codes, self._scales, self._n, dq.xq, native=self._native
            )
        dots = torch._int_mm(self._codes[: self._n], self._queries_t(dq.xq))[:, : len(dq)]
        return torch.mul(dots, self._scales[: self._n, None]).t()

    def search(
        self, queries: npt.ArrayLike, k: int, *, allowed: npt.ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k slots per query, on the host (:meth:`topk` of :meth:`queries`).

        Args:
            queries: float32 (n, d), finite (L2-normalised for cosine scores).
            k: results per query (≥ 1).
            allowed: optional bool (N,); ``False`` rows are excluded before top-k.

        Returns:
            ``(scores, slots)``: float32 (n, k) descending and int64 (n, k); ties to the lower
            slot; ``(-inf, -1)`` padding when fewer than k rows are allowed.
        """
        dq = self.queries(queries)
        gate = None if allowed is None else np.asarray(allowed)
        scores, slots = self.topk(dq, k, allowed=gate)
        return scores.cpu().numpy(), slots.cpu().numpy()

    def score_slots(self, queries: npt.ArrayLike, slots: npt.ArrayLike) -> np.ndarray:
        """Exact scores of given candidate slots (for fusion over a union candidate set).

        Args:
            queries: float32 (n, d); slots: int64 (n, c) in ``[-1, N)``.

        Returns:
            float32 (n, c): the same value :meth:`search` would report; ``-inf`` where slot is -1.
        """
        dq = self.queries(queries)
        sl = np.asarray(slots)
        if sl.ndim != 2 or sl.shape[0] != len(dq) or not np.issubdtype(sl.dtype, np.integer):
            raise ValidationError(f"slots must be int (n={len(dq)}, c); got {sl.dtype} {sl.shape}")
        if sl.size and (sl.min() < -1 or sl.max() >= self._n):
            raise ValidationError(
                f"slots must lie in [-1, {self._n}); got range [{sl.min()}, {sl.max()}]"
            )
        slots_t = torch.from_numpy(sl.astype(np.int64)).to(self._device)
        return self.score(dq, slots_t).cpu().numpy()

    # ------------------------------------------------------------------ torch internals
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

    def _tiles(self, xq: np.ndarray, k: int, gate: np.ndarray | None) -> tuple[Tensor, Tensor]:
        """The GEMM tile loop over every row for queries ``xq`` int8 (n, d)."""
        xt = self._queries_t(xq)
        tile = self._tile_rows_for(xq.shape[0])
        bufs = scratch_buffers(self._scratch, min(tile, max(self._n, 1)), xt.shape[1], self._dim)
        return topk_tiles(
            self._codes,
            self._scales,
            self._n,
            xt,
            k,
            tile,
            gate,
            sparse=self._sparse(gate),
            bufs=bufs,
            use_native=self._native and self._n > _NATIVE_ROWS_PER_K * k,
        )

    def _sparse(self, gate: np.ndarray | None) -> bool:
        """Whether to gather the allowed rows (at most 1/8 of the corpus) instead of masking."""
        return gate is not None and gate.sum() * _SPARSE_GATE <= self._n

    def _block_layout(self, n: int, k: int, rows: int) -> tuple[int, int]:
        """(tile rows, block rows) for the block-max path; ``rows`` = rows to scan."""
        return dense_cuda.block_layout(self._tile_rows_for(n), k, rows, self._block_rows)
