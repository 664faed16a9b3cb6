"""The CPU paths of :class:`~.dense.DenseIndex` (torch backend, row-major layout).

**Route per call shape** (:data:`.dense.NATIVE_SCAN_MAX`): fewer than 8 queries take the
native scan, 8 or more the GEMM tiles on one thread. The GEMM's cost per query is
``rows * d * (c / n + g)`` (``c``: converting a tile to float32, paid once for every query;
``g``: the multiply-add), the scan's ``rows * d * s``; fitted on the measurements in
docs/architecture.md ("a batch's dense GEMM"), the GEMM wins from 5 to 10 queries at d = 128
and 384, hence 8. One thread: beside busy processes torch's two-thread GEMM waited at its
barriers (wall 5.3 against 0.37 ms per query), which made a batch no faster than a loop.

**Native scan** (:func:`.ahead.scan_ahead`, a few queries): one pass over the rows per query
(``native.int8_topk``, ``kernels/csrc/scan.c``: INT8 dot, row scale, gate, an exact top-k heap
fused in), on a thread of its own started while the caller goes on, or on the caller.

**Tile loop** (:func:`topk_tiles`, batches): the corpus is scanned in tiles of rows; each
tile's exact dots ``(T, d) @ (d, n)`` come from ``torch._int_mm`` on CPUs with INT8 matrix
units (AVX-512 VNNI, AMX) or float32 BLAS over the tile converted in chunks elsewhere — exact,
since every partial sum of int8 products is an integer below 2**24 when ``d`` ≤ 1040 (past
that width always ``_int_mm``; :func:`gemm_kind`). The dots go to the native selection
(``native.topk_update``: an exact buffer of 2k candidates per query) or, without the
native module, the exact torch threshold path (:mod:`.topk`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from collections.abc import Iterator

import numpy as np
import torch

from spector_gpu.device import single_threaded
from spector_gpu.errors import ValidationError

from .native import native
from .topk import sort_pairs_torch, topk_stable_torch, update_topk_torch

__all__ = [
    "check_cpu_options",
    "forced_gemm",
    "gemm_kind",
    "int8_units",
    "keys_all_cpu",
    "score_rows",
    "scratch_buffers",
    "tile_dots",
    "topk_tiles",
]

_NEG_INF = float("-inf")
_PRUNE_RATIO = 16  # take the threshold path when at most 1/16 of a tile's keys survive
F32_EXACT_DIM = 1040  # d * 127**2 < 2**24: float32 sums of int8 products stay exact integers
_F32_CHUNK = 2048  # tile rows converted to float32 at a time (3 MiB at d = 384)
_GEMM_KINDS = ("int8", "float32")
_forced: list[str] = []  # forced_gemm's stack (tests and benchmarks)

Tile = tuple[torch.Tensor, torch.Tensor, "torch.Tensor | int", int, "torch.Tensor | None"]


def check_cpu_options(tile_rows: int | None, cpu_kernel: str, scan_threads: object = None) -> None:
    """Refuse a bad CPU setting of :class:`~.dense.DenseIndex`; warn of ``scan_threads``."""
    if scan_threads is not None:
        msg = "DenseIndex(scan_threads=...) is deprecated and ignored (the scan's helper thread"
        warnings.warn(f"{msg} was removed): leave it out", DeprecationWarning, stacklevel=3)
    if tile_rows is not None and (
        isinstance(tile_rows, bool) or not isinstance(tile_rows, int) or tile_rows < 1
    ):
        raise ValidationError(f"tile_rows must be a positive int or None, got {tile_rows!r}")
    if cpu_kernel not in ("auto", "native", "torch"):
        raise ValidationError(f'cpu_kernel must be "auto", "native" or "torch": {cpu_kernel!r}')
    if cpu_kernel == "native" and native is None:
        raise ValidationError('cpu_kernel="native": the native kernels are not built here')


Scratch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def scratch_buffers(scratch: threading.local, rows: int, cols: int, dim: int) -> Scratch:
    """Per-thread scratch (int32 dots, float32 keys, bool hits, all (rows, cols); float32
    (min(rows, 2048), dim) codes for :func:`tile_dots`), reused across tiles and calls.

    Fresh multi-MiB tensors are page-faulted in on every touch (costly in VMs: measured
    10 ms per 4 MiB on the dev box); CUDA's caching allocator already avoids this.
    """
    bufs: Scratch | None = getattr(scratch, "bufs", None)
    if (
        bufs is None
        or bufs[0].shape[0] < rows
        or bufs[0].shape[1] != cols
        or bufs[3].shape[1] != dim
    ):
        with torch.inference_mode(False):  # normal tensors: written in and out of that mode
            bufs = (
                torch.empty((rows, cols), dtype=torch.int32),
                torch.empty((rows, cols), dtype=torch.float32),
                torch.empty((rows, cols), dtype=torch.bool),
                torch.empty((min(rows, _F32_CHUNK), dim), dtype=torch.float32),
            )
        scratch.bufs = bufs
    return bufs


def gemm_kind(dim: int) -> str:
    """The tile GEMM for ``dim``-wide codes, by a fixed rule (no timing): ``"int8"``
    (``torch._int_mm``) on a CPU with INT8 matrix units (:func:`int8_units`: AVX-512 VNNI or
    AMX, which oneDNN's int8 GEMM uses) or past :data:`F32_EXACT_DIM`, else ``"float32"``
    (BLAS over converted chunks, exact up to that width). Without those units the int8 GEMM
    ran 23x slower than BLAS (module docstring); :func:`forced_gemm` overrides the rule for
    tests and benchmarks."""
    if dim > F32_EXACT_DIM:
        return "int8"
    if _forced:
        return _forced[-1]
    return "int8" if int8_units() else "float32"


@functools.cache
def int8_units() -> bool:
    """Whether this CPU has AVX-512 VNNI or AMX-INT8 (``/proc/cpuinfo`` flags; False where
    they cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_vnni", "amx_int8"})
    except OSError:
        pass
    return False


@contextlib.contextmanager
def forced_gemm(kind: str) -> Iterator[None]:
    """Within the block, :func:`gemm_kind` answers ``kind`` (where ``d`` allows it)."""
    if kind not in _GEMM_KINDS:
        raise ValidationError(f"gemm kind must be one of {_GEMM_KINDS}, got {kind!r}")
    _forced.append(kind)
    try:
        yield
    finally:
        _forced.pop()


def tile_dots(
    part: torch.Tensor,
    xt: torch.Tensor,
    xf: torch.Tensor | None,
    out: torch.Tensor,
    conv: torch.Tensor,
    fbuf: torch.Tensor,
) -> torch.Tensor:
    """Exact (T, n) dots of a codes tile ``part`` int8 (T, d) with ``xt`` int8 (d, n): int32
    in ``out`` by ``torch._int_mm``, or (``xf`` = ``xt`` as float32) float32 integers in
    ``fbuf`` by BLAS over chunks converted into ``conv`` (≥ min(T, 2048) rows x d). Either
    way ``float32(dot)`` is the same value."""
    if xf is None:
        return torch._int_mm(part, xt, out=out)
    for lo in range(0, part.shape[0], _F32_CHUNK):
        chunk = part[lo : lo + _F32_CHUNK]
        c = conv[: chunk.shape[0]]
        c.copy_(chunk)
        torch.mm(c, xf, out=fbuf[lo : lo + chunk.shape[0]])
    return fbuf


def keys_all_cpu(
    codes: torch.Tensor, scales: torch.Tensor, n_rows: int, xq: np.ndarray, *, native: bool
) -> torch.Tensor:
    """float32 (n, n_rows) keys ``float32(dot) * s`` of every row for every query (for small
    corpora): the native scan writes them as it goes (~10x ``torch._int_mm`` at 128 queries x
    600 rows on a 2-core AVX2 host), else the GEMM of :func:`gemm_kind`."""
    dim = xq.shape[1]
    if native:
        return _every_key(codes, scales, n_rows, np.ascontiguousarray(xq))
    xt = torch.from_numpy(xq).t()
    if gemm_kind(dim) == "float32":
        dots = torch.mm(codes[:n_rows].float(), xt.float())
    else:
        dots = torch._int_mm(codes[:n_rows], xt.contiguous())
    return torch.mul(dots, scales[:n_rows, None]).t()


def _every_key(
    codes: torch.Tensor, scales: torch.Tensor, n_rows: int, xq: np.ndarray
) -> torch.Tensor:
    """The native scan's key of every row, all queries in one pass (its top-1 unused)."""
    n, dim = xq.shape
    every = np.empty((n, n_rows), dtype=np.float32)
    top = np.empty((n, 1), dtype=np.float32), np.empty((n, 1), dtype=np.int64)
    native.int8_topk(
        codes.numpy(), n_rows, dim, codes.shape[1], scales.numpy(), xq, None, *top, every
    )
    return torch.from_numpy(every)


def score_rows(
    codes: torch.Tensor,
    scales: torch.Tensor,
    n_rows: int,
    dim: int,
    xq: np.ndarray,
    rows: np.ndarray,
) -> torch.Tensor:
    """Native exact keys float32 (n, c) of ``rows`` int64 (n, c) (``-1``: ``-inf``)."""
    out = np.empty(rows.shape, dtype=np.float32)
    native.int8_score_rows(
        codes.numpy(),
        n_rows,
        dim,
        codes.shape[1],
        scales.numpy(),
        np.ascontiguousarray(xq),
        np.ascontiguousarray(rows, dtype=np.int64),
        out,
    )
    return torch.from_numpy(out)


def _slot_of(where: torch.Tensor | int, local: torch.Tensor) -> torch.Tensor:
    """Slots of tile-local rows; ``where`` is the tile's gathered slots or its first slot."""
    return where[local] if isinstance(where, torch.Tensor) else local + where


def _tiles(
    codes: torch.Tensor,
    scales: torch.Tensor,
    n_rows: int,
    tile: int,
    gate: np.ndarray | None,
    sparse: bool,
) -> Iterator[Tile]:
    """Yield (codes (T, d), scales, slots or first slot (:func:`_slot_of`), valid rows, mask
    or None) per tile."""
    if sparse and gate is not None:
        slots = torch.from_numpy(np.flatnonzero(gate)).to(codes.device)
        for lo in range(0, slots.numel(), tile):
            chunk = slots[lo : lo + tile]
            yield (
                codes.index_select(0, chunk),
                scales.index_select(0, chunk),
                chunk,
                chunk.numel(),
                None,
            )
        return
    gate_t = None if gate is None else torch.from_numpy(gate).to(codes.device)
    for lo in range(0, n_rows, tile):
        valid = min(tile, n_rows - lo)
        mask = None if gate_t is None else gate_t[lo : lo + valid]
        if mask is not None and not bool(mask.any()):
            continue
        yield codes[lo : lo + valid], scales[lo : lo + valid], lo, valid, mask


def topk_tiles(
    codes: torch.Tensor,
    scales: torch.Tensor,
    n_rows: int,
    xt: torch.Tensor,
    k: int,
    tile: int,
    gate: np.ndarray | None,
    *,
    sparse: bool,
    bufs: Scratch,
    use_native: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 (n, k) keys and int64 (n, k) slots, ``(-inf, -1)`` padding.

    Args:
        codes: int8 (capacity, d) corpus codes, the first ``n_rows`` live; scales: float32
            (capacity,); xt: int8 (d, n) query codes, transposed; tile: rows per tile;
        gate: bool (n_rows,) or ``None``; sparse: gather the allowed rows instead of masking;
        bufs: :func:`scratch_buffers` of at least ``min(tile, n_rows)`` rows and n columns;
        use_native: select with the native heaps (needs the native module).
    """
    with single_threaded(codes.device.type == "cpu"):
        xf = xt.float() if gemm_kind(xt.shape[0]) == "float32" else None
        if use_native:
            return _tiles_native(codes, scales, n_rows, (xt, xf), k, tile, gate, sparse, bufs)
        return _tiles_torch(codes, scales, n_rows, (xt, xf), k, tile, gate, sparse, bufs)


def _tiles_torch(
    codes: torch.Tensor,
    scales: torch.Tensor,
    n_rows: int,
    queries: tuple[torch.Tensor, torch.Tensor | None],
    k: int,
    tile: int,
    gate: np.ndarray | None,
    sparse: bool,
    bufs: Scratch,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tile loop with the torch threshold selection (:func:`topk_tiles`)."""
    xt, xf = queries
    n = xt.shape[1]
    best_v = torch.full((n, k), _NEG_INF, dtype=torch.float32, device=codes.device)
    best_i = torch.full((n, k), -1, dtype=torch.int64, device=codes.device)
    first = True
    for part, cscale, where, valid, mask in _tiles(codes, scales, n_rows, tile, gate, sparse):
        dots = tile_dots(part, xt, xf, bufs[0][:valid], bufs[3], bufs[1][:valid])
        keys = torch.mul(dots, cscale[:, None], out=bufs[1][:valid])  # float32(dot) * cs, one pass
        if mask is not None:
            keys.masked_fill_(~mask[:, None], _NEG_INF)
        cut = best_v[:, k - 1]
        if bool((cut > _NEG_INF).all()):
            # Most rows of a later tile fall below every query's current k-th key: keep
            # only those at or above it (ties included, so the merge stays exact).
            hits = torch.ge(keys, cut[None, :], out=bufs[2][:valid])
            rows, cols = torch.nonzero(hits, as_tuple=True)
            if rows.numel() * _PRUNE_RATIO <= keys.numel():
                best_v, best_i = update_topk_torch(
                    best_v, best_i, cols, keys[rows, cols], _slot_of(where, rows)
                )
                continue
        v, local = topk_stable_torch(keys, k, dim=0)
        glob = torch.where(local < 0, local, _slot_of(where, local.clamp(min=0)))
        if first:  # nothing to merge with; slot_of is increasing, so the order stands as it is
            best_v, best_i, first = v, glob, False
            continue
        v, glob = sort_pairs_torch(torch.cat([best_v, v], 1), torch.cat([best_i, glob], 1))
        best_v, best_i = v[:, :k].contiguous(), glob[:, :k].contiguous()
    return best_v, best_i


def _tiles_native(
    codes: torch.Tensor,
    scales: torch.Tensor,
    n_rows: int,
    queries: tuple[torch.Tensor, torch.Tensor | None],
    k: int,
    tile: int,
    gate: np.ndarray | None,
    sparse: bool,
    bufs: Scratch,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tile loop with native selection: each query's candidates (a buffer of 2k and a
    threshold, ``native.topk_update``) carried across all tiles; ``queries`` = (xt, xt as
    float32 or None: :func:`tile_dots`)."""
    xt, xf = queries
    n = xt.shape[1]
    cands = np.empty((n, 4 * k), dtype=np.int64)  # 2k (key, slot) pairs of 16 bytes
    sizes = np.zeros(n, dtype=np.int64)
    thresholds = np.full(n, -np.inf)
    for part, cscale, where, valid, mask in _tiles(codes, scales, n_rows, tile, gate, sparse):
        dots = tile_dots(part, xt, xf, bufs[0][:valid], bufs[3], bufs[1][:valid])  # row-major
        native.topk_update(
            dots.numpy(),
            cscale.contiguous().numpy(),
            where if isinstance(where, int) else 0,
            where.numpy() if isinstance(where, torch.Tensor) else None,
            None if mask is None else mask.numpy(),
            cands,
            sizes,
            thresholds,
        )
    keys = np.empty((n, k), dtype=np.float32)
    slots = np.empty((n, k), dtype=np.int64)
    native.topk_finish(cands, sizes, thresholds, keys, slots)
    return torch.from_numpy(keys), torch.from_numpy(slots)
