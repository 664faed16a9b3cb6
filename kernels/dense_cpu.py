"""The CPU paths of :class:`~.dense.DenseIndex` (torch backend, row-major layout).

**Native scan** (:func:`scan_topk`, a few queries): one pass over the rows in :mod:`._native`
— the INT8 dot product (AVX-512 VNNI / AVX2), the row scale and the gate — writing every row's
key, with an exact top-k heap fused in. A single query over 100k × 384 rows measured 1.6 ms
against 7.7 ms for ``torch._int_mm`` + top-k (which packs the corpus before a matrix-vector
product) on the shared 2-core dev box; rows are read once for every query. With
``threads=2`` the keys come first and each query's top-k is selected from them after (same
results, bit for bit), and a persistent native helper thread, at idle priority, computes
keys of row chunks beside the caller: 1.27 → 0.70 ms for that scan on an idle 2-core box.
The caller never waits for the helper (it computes an unfinished chunk of the helper's
itself), and the helper takes only an idle core, so beside busy processes the scan costs
what one thread's does.

**Tile loop** (:func:`topk_tiles`, batches): the corpus is scanned in tiles of rows; each tile
is one ``torch._int_mm`` with the corpus tile as the left operand (``(T, d) @ (d, n)``), which
lets oneDNN use VNNI over the row-major codes without repacking them. The tile's int32 dots
then go to the native selection (:func:`_native.topk_update`: scale, gate, exact running
heaps per query, one read of the tile) or, without the native module, to the torch threshold
path: once every query holds k candidates only keys at or above its k-th key leave a tile
(ties included), merged exactly (:mod:`.topk`). Scratch buffers are reused across tiles.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import torch

from spector_gpu.errors import ValidationError

from .native import native
from .topk import sort_pairs_torch, topk_stable_torch, update_topk_torch

__all__ = ["check_cpu_options", "scan_topk", "score_rows", "scratch_buffers", "topk_tiles"]

_NEG_INF = float("-inf")
_PRUNE_RATIO = 16  # take the threshold path when at most 1/16 of a tile's keys survive

Tile = tuple[torch.Tensor, torch.Tensor, "torch.Tensor | int", int, "torch.Tensor | None"]


def check_cpu_options(tile_rows: int | None, cpu_kernel: str, scan_threads: int) -> None:
    """Raise ``ValidationError`` for a bad CPU setting of :class:`~.dense.DenseIndex`."""
    if tile_rows is not None and (
        isinstance(tile_rows, bool) or not isinstance(tile_rows, int) or tile_rows < 1
    ):
        raise ValidationError(f"tile_rows must be a positive int or None, got {tile_rows!r}")
    if cpu_kernel not in ("auto", "native", "torch"):
        raise ValidationError(f'cpu_kernel must be "auto", "native" or "torch": {cpu_kernel!r}')
    if cpu_kernel == "native" and native is None:
        raise ValidationError('cpu_kernel="native": the native kernels are not built here')
    if scan_threads not in (1, 2) or isinstance(scan_threads, bool):
        raise ValidationError(f"scan_threads must be 1 or 2, got {scan_threads!r}")


def scratch_buffers(
    scratch: threading.local, rows: int, cols: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-thread scratch (int32 dots, float32 keys, bool hits), reused across tiles and calls.

    Fresh multi-MiB tensors are page-faulted in on every touch (costly in VMs: measured
    10 ms per 4 MiB on the dev box); CUDA's caching allocator already avoids this.
    """
    bufs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = getattr(scratch, "bufs", None)
    if bufs is None or bufs[0].shape[0] < rows or bufs[0].shape[1] != cols:
        with torch.inference_mode(False):  # normal tensors: written in and out of that mode
            bufs = (
                torch.empty((rows, cols), dtype=torch.int32),
                torch.empty((rows, cols), dtype=torch.float32),
                torch.empty((rows, cols), dtype=torch.bool),
            )
        scratch.bufs = bufs
    return bufs


def scan_topk(
    codes: torch.Tensor,
    scales: torch.Tensor,
    n_rows: int,
    dim: int,
    xq: np.ndarray,
    k: int,
    gate: np.ndarray | None,
    threads: int = 1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Native scan: float32 (n, k) keys and int64 (n, k) slots, ``(-inf, -1)`` padding,
    and the key of every row, float32 (n, n_rows) (``-inf`` for gated rows): written as the
    scan goes (a sequential 4 bytes per row beside the 384 it reads), it lets the pool be
    scored by a gather instead of a second pass over the rows.

    Args:
        codes: int8 (capacity, stride) CPU corpus codes, the first ``n_rows`` live; scales:
            float32 (capacity,); xq: int8 (n, dim) query codes; gate: bool (n_rows,) or None;
        threads: 2 lets the native helper thread share a large scan (module docstring).
    """
    n = xq.shape[0]
    keys = np.empty((n, k), dtype=np.float32)
    slots = np.empty((n, k), dtype=np.int64)
    every = np.empty((n, n_rows), dtype=np.float32)  # every row written, gated ones -inf
    native.int8_topk(
        codes.numpy(),
        n_rows,
        dim,
        codes.shape[1],
        scales.numpy(),
        np.ascontiguousarray(xq),
        gate,
        keys,
        slots,
        every,
        threads,
    )
    return torch.from_numpy(keys), torch.from_numpy(slots), torch.from_numpy(every)


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
    bufs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
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
    if use_native:
        return _tiles_native(codes, scales, n_rows, xt, k, tile, gate, sparse, bufs[0])
    n = xt.shape[1]
    best_v = torch.full((n, k), _NEG_INF, dtype=torch.float32, device=codes.device)
    best_i = torch.full((n, k), -1, dtype=torch.int64, device=codes.device)
    first = True
    for part, cscale, where, valid, mask in _tiles(codes, scales, n_rows, tile, gate, sparse):
        dots = torch._int_mm(part, xt, out=bufs[0][:valid])  # (T, n) exact int32
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
    xt: torch.Tensor,
    k: int,
    tile: int,
    gate: np.ndarray | None,
    sparse: bool,
    buf: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tile loop with native selection: one heap of k per query across all tiles."""
    n = xt.shape[1]
    heap_keys = np.empty((n, k), dtype=np.float64)
    heap_slots = np.empty((n, k), dtype=np.int64)
    heap_size = np.zeros(n, dtype=np.int64)
    for part, cscale, where, valid, mask in _tiles(codes, scales, n_rows, tile, gate, sparse):
        dots = torch._int_mm(part, xt, out=buf[:valid])  # (T, n) exact int32, row-major
        native.topk_update(
            dots.numpy(),
            cscale.contiguous().numpy(),
            where if isinstance(where, int) else 0,
            where.numpy() if isinstance(where, torch.Tensor) else None,
            None if mask is None else mask.numpy(),
            heap_keys,
            heap_slots,
            heap_size,
        )
    native.topk_finish(heap_keys, heap_slots, heap_size)
    return torch.from_numpy(heap_keys.astype(np.float32)), torch.from_numpy(heap_slots)
