"""The CUDA paths of :class:`~.dense.DenseIndex`: torch block-max tile loop and Triton glue.

**Torch block-max loop.** CUDA tiles never read back to the host inside the tile loop (each
sync stalls the GPU; on an H200, 1M × 384 rows, 4,096 queries, the CPU path's threshold step
spent 82 ms in syncs, nonzero scans and full-tile top-k). Per tile: the GEMM writes int32 dots
into a reused buffer; one ``addcmul`` turns them in place into float32 keys (``bias +
float32(dot) * cs``, bias 0 for an allowed row and ``-inf`` for a gated or padding row: one
read and one write of the tile, and no separate mask pass); then
:func:`~.topk.merge_blocks_torch` takes the max of each block of B rows (one read of the
tile), selects each query's top-k blocks, and merges those k·B rows exactly into the running
lists, all as int64 keys (:func:`~.topk.pack_keys_torch`) so a plain ``torch.topk`` is exact.
HBM traffic is thus ~4 × 4 bytes per (row, query): GEMM write, addcmul read + write, amax
read; everything else is O(T/B + k·B) per query. B is the power of two nearest ``sqrt(T/k)``
within [32, 256] (64 for 65,536-row tiles and k = 10), which balances the block stage (T/B
maxima per query, packed to int64 and top-k'd) against the candidate stage (k·B gathered keys
per query). The CPU runs the same path when the layout is emulated
(``DenseIndex._init_layout(cuda_layout=True)``), which is how the tests check it.

**Triton** (:func:`fused_search`): the same exact block-max selection with the dot products
kept on chip (:mod:`.fused`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from spector_gpu.errors import ValidationError

from . import fused
from .topk import merge_blocks_torch, pack_keys_torch, unpack_keys_torch

__all__ = [
    "FUSED_MAX_K",
    "MAX_BLOCK",
    "MAX_SLOT",
    "block_layout",
    "block_plan",
    "blockmax_loop",
    "fused_search",
    "index_plan",
    "score_gathered",
    "topk_blockmax",
]

logger = logging.getLogger(__name__)

_NEG_INF = float("-inf")
MAX_BLOCK = 256  # largest block-max block (rows); the index's capacity is a multiple of it
MAX_SLOT = (1 << 32) - 1  # packed top-k keys hold a slot in 32 bits
# Larger k: the torch block-max path. The fused candidate stage grows as k · block, and on an
# H200 single recalls (depth-200 candidate searches, 100k memories) measured slower once the
# fused path and on-device query quantisation were both on (end-to-end p50 8.5 ms against
# 6.0 ms); both are kept to what they were measured faster for: batches, small k.
FUSED_MAX_K = 64

Plan = tuple["torch.Tensor | None", torch.Tensor, torch.Tensor, list[tuple[int, int]]]


def block_layout(tile: int, k: int, rows: int, block_rows: int | None) -> tuple[int, int]:
    """(tile rows, block rows) for the block-max path.

    Args:
        tile: rows per tile wanted; k: results per query; rows: rows to scan;
        block_rows: a forced block size (power of two ≤ :data:`MAX_BLOCK`) or ``None`` (auto).
    """
    block = block_rows
    if block is None:
        ideal = max(1.0, min(tile, rows) / k) ** 0.5
        block = min(max(1 << round(np.log2(ideal)), 32), MAX_BLOCK)
    if block < 1 or block > MAX_BLOCK or block & (block - 1):
        raise ValidationError(f"block rows must be a power of two in [1, {MAX_BLOCK}], got {block}")
    unit = max(block, 32)  # a multiple of block and of the 32 rows the int8 GEMM wants
    return -(-tile // unit) * unit, block


def block_plan(
    n_rows: int,
    capacity: int,
    device: torch.device,
    tile: int,
    unit: int,
    sparse_gate: np.ndarray | None,
    gate: np.ndarray | None,
) -> Plan:
    """Host-side plan and one-off host→device copies, before the sync-free tile loop.

    Args:
        n_rows: live rows N; capacity: rows allocated (a multiple of :data:`MAX_BLOCK`);
        tile, unit: rows per tile and the multiple every tile is padded to;
        sparse_gate: bool (N,) to gather the allowed rows, or ``None``; gate: bool (N,) or ``None``.

    Returns ``(rows, bias, slots, ranges)``: ``rows`` int64 (M,) corpus rows to gather (sparse
    gate; padded with row 0) or ``None`` (scan the codes in place); ``bias`` float32
    (M,) 0 for a live row, ``-inf`` for a gated or padding row; ``slots`` int64 (M,) each
    row's slot (ascending over live rows); ``ranges`` the ``[lo, hi)`` tiles, each a multiple
    of ``unit`` rows.
    """
    if sparse_gate is not None:  # gather the allowed rows (np.flatnonzero: ascending slots)
        live = np.flatnonzero(sparse_gate)
        total = -(-live.size // unit) * unit
        slots_np = np.zeros(total, dtype=np.int64)
        slots_np[: live.size] = live
        bias_np = np.full(total, _NEG_INF, dtype=np.float32)
        bias_np[: live.size] = 0.0
        slots = torch.from_numpy(slots_np).to(device)
        ranges = [(lo, min(lo + tile, total)) for lo in range(0, total, tile)]
        return slots, torch.from_numpy(bias_np).to(device), slots, ranges
    bias_np = np.full(capacity, _NEG_INF, dtype=np.float32)  # rounding up to unit fits
    if gate is None:
        bias_np[:n_rows] = 0.0
    else:
        bias_np[:n_rows] = np.where(gate, np.float32(0.0), np.float32(_NEG_INF))
    end = -(-n_rows // unit) * unit
    ranges = [
        (lo, min(lo + tile, end))
        for lo in range(0, n_rows, tile)
        if gate is None or gate[lo : lo + tile].any()  # a host check: skip all-gated tiles
    ]
    return None, torch.from_numpy(bias_np).to(device), torch.arange(capacity, device=device), ranges


def blockmax_loop(
    codes: torch.Tensor,
    scales: torch.Tensor,
    xt: torch.Tensor,
    n: int,
    k: int,
    block: int,
    rows: torch.Tensor | None,
    bias: torch.Tensor,
    slots: torch.Tensor,
    ranges: list[tuple[int, int]],
) -> torch.Tensor:
    """The tile loop: packed int64 (n, k) top-k keys; no host sync (tested on CUDA).

    Args:
        codes: int8 (capacity, dpad) corpus codes; scales: float32 (capacity,);
        xt: int8 (dpad, n_pad) column-major query codes; n: queries; block: block rows;
        rows, bias, slots, ranges: the :func:`block_plan`.
    """
    dev = codes.device
    best: torch.Tensor = pack_keys_torch(
        torch.full((n, k), _NEG_INF, dtype=torch.float32, device=dev),
        torch.zeros((n, k), dtype=torch.int64, device=dev),
    )
    if not ranges:
        return best
    height = max(hi - lo for lo, hi in ranges)
    buf = torch.empty((height, xt.shape[1]), dtype=torch.int32, device=dev)
    for lo, hi in ranges:
        if rows is None:
            part, cscale = codes[lo:hi], scales[lo:hi]
        else:
            part = codes.index_select(0, rows[lo:hi])
            cscale = scales.index_select(0, rows[lo:hi])
        dots = torch._int_mm(part, xt, out=buf[: hi - lo])  # (T, n_pad) exact int32
        keys = dots.view(torch.float32)  # keys overwrite the dots in place
        torch.addcmul(bias[lo:hi, None], dots, cscale[:, None], out=keys)
        best = merge_blocks_torch(best, keys[:, :n], slots[lo:hi], block)
    return best


def fused_search(
    codes: torch.Tensor,
    scales: torch.Tensor,
    n_rows: int,
    dim: int,
    xq: np.ndarray | torch.Tensor,
    k: int,
    gate: np.ndarray | None,
    *,
    sparse: bool,
    config: fused.TritonConfig,
    block_rows: int | None,
    tile_maxima: int | None,
) -> torch.Tensor:
    """The Triton path (:mod:`.fused`): packed int64 (n, k) top-k keys.

    Args:
        codes: int8 (capacity, dpad), the first ``n_rows`` live; scales: float32 (capacity,);
        dim: d; xq: int8 (n, d) query codes; gate: bool (n_rows,) or ``None``; sparse: gather
        the allowed rows; config, block_rows, tile_maxima: tuning (``None``: the default).
    """
    dev = codes.device
    if n_rows >= MAX_SLOT:
        raise ValidationError(f"the CUDA path ranks at most {MAX_SLOT} rows; shard the index")
    if sparse and gate is not None:  # gather the allowed rows
        rows = torch.from_numpy(np.flatnonzero(gate)).to(dev)
        live, cscale = codes.index_select(0, rows), scales.index_select(0, rows)
        bias = torch.zeros(rows.numel(), dtype=torch.float32, device=dev)
        slots = rows
    else:
        live, cscale = codes[:n_rows], scales[:n_rows]
        slots = torch.arange(n_rows, device=dev)
        if gate is None:
            bias = torch.zeros(n_rows, dtype=torch.float32, device=dev)
        else:
            gate_t = torch.from_numpy(gate).to(dev)
            bias = torch.where(gate_t, 0.0, _NEG_INF).to(torch.float32)
    queries = torch.zeros((xq.shape[0], codes.shape[1]), dtype=torch.int8, device=dev)
    queries[:, :dim] = xq if isinstance(xq, torch.Tensor) else torch.from_numpy(xq).to(dev)
    extra = {} if tile_maxima is None else {"max_block_maxima": tile_maxima}
    # Rows per block: 128 measured fastest for k = 10 on an H200 (1M x 384, 4,096 queries:
    # 14.0 ms against 16.2 ms at 64); smaller for larger k, so that the k·block candidate
    # rows per query stay near 2,048.
    block = block_rows or max(16, min(128, 1 << max(0, (2048 // k).bit_length() - 1)))
    packed: torch.Tensor = fused.search_packed(
        live, cscale, bias, slots, queries, k, config=config, block=block, **extra
    )
    return packed


def index_plan(
    index: Any, tile: int, unit: int, sparse_gate: np.ndarray | None, gate: np.ndarray | None
) -> Plan:
    """:func:`block_plan` over the rows of a :class:`~.dense.DenseIndex`."""
    return block_plan(index._n, index._codes.shape[0], index._device, tile, unit, sparse_gate, gate)


def topk_blockmax(
    index: Any,
    xq: np.ndarray | torch.Tensor,
    k: int,
    gate: np.ndarray | None,
    use_fused: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """The CUDA search of ``index`` (a :class:`~.dense.DenseIndex` in the CUDA layout, or one
    emulating it on the CPU): Triton when ``use_fused`` (None: when CUDA and Triton are
    available) and ``k <= FUSED_MAX_K``, else the torch block-max loop. float32 keys (n, k),
    int64 slots (n, k), and whether the Triton path stays usable for the next search (False
    after it failed to compile here: the caller keeps that, this function changes nothing of
    the index)."""
    if use_fused is None:
        use_fused = index._device.type == "cuda" and fused.available()
    if use_fused and k <= FUSED_MAX_K:
        try:
            keys, slots = unpack_keys_torch(
                fused_search(
                    index._codes,
                    index._scales,
                    index._n,
                    index._dim,
                    xq,
                    k,
                    gate,
                    sparse=index._sparse(gate),
                    config=index._fused_config,
                    block_rows=index._block_rows,
                    tile_maxima=index._fused_tile_maxima,
                )
            )
            return keys, slots, True
        except ValidationError:
            raise
        except Exception as exc:  # a GPU or Triton build the kernels do not compile for
            if index._device.type != "cuda":
                raise
            logger.warning(
                "Triton dense kernels failed on %s (%s); using the torch path", index._device, exc
            )
            use_fused = False
    if isinstance(xq, torch.Tensor):
        xq = xq.cpu().numpy()
    n = xq.shape[0]
    if index._codes.shape[0] >= MAX_SLOT:
        raise ValidationError(f"the CUDA path ranks at most {MAX_SLOT} rows; shard the index")
    sparse = index._sparse(gate)
    total = int(gate.sum()) if sparse and gate is not None else index._n
    tile, block = index._block_layout(n, k, total)
    plan = index_plan(index, tile, max(block, 32), gate if sparse else None, gate)
    best = blockmax_loop(index._codes, index._scales, index._queries_t(xq), n, k, block, *plan)
    keys, slots = unpack_keys_torch(best)
    return keys, slots, use_fused


def score_gathered(
    codes: torch.Tensor,
    scales: torch.Tensor,
    dim: int,
    width: int,
    xq: np.ndarray,
    qs_t: torch.Tensor,
    sl: torch.Tensor,
) -> torch.Tensor:
    """Exact scores float32 (n, c) of slots ``sl`` int64 (n, c) (``-1``: ``-inf``), on the
    codes' device, in chunks of queries that bound the gathered rows to 16 MiB.

    Gathered INT8 rows and INT8 queries as float32, multiplied by a batched GEMM: every
    product is an integer below 127² and every partial sum below 2^24 for d <= 1040, so float32
    accumulation is exact and equals the int32 dot the searches report."""
    if sl.shape[0] == 0:
        return torch.zeros(sl.shape, dtype=torch.float32, device=codes.device)
    chunk = max(1, (1 << 24) // max(1, sl.shape[1] * width))
    ftype = torch.float32 if dim <= 1040 else torch.float64
    out = []
    for lo in range(0, sl.shape[0], chunk):
        part = sl[lo : lo + chunk]
        idx = part.clamp(min=0)
        rows = codes[idx.reshape(-1), :dim].to(ftype).reshape(*part.shape, dim)
        x = torch.from_numpy(xq[lo : lo + chunk]).to(codes.device).to(ftype)
        dots = torch.bmm(rows, x[:, :, None])[:, :, 0]
        keys = dots.to(torch.float32) * scales[idx]
        scores = keys * qs_t[lo : lo + chunk, None]
        out.append(torch.where(part < 0, float("-inf"), scores))
    return torch.cat(out)
