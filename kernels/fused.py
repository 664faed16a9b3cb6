"""Fused INT8 similarity + exact block-max top-k in Triton: the CUDA fast path of DenseIndex.

The torch CUDA path (:func:`~.dense_cuda.blockmax_loop`) writes every int32 dot product of a
tile to memory and reads it back twice (scale, block max): on an H200, 1M × 384 rows and 4,096
queries, that traffic (16 GiB of scores, several passes) costs ~50 ms, while the int8 matrix
work itself needs ~3 ms. Here two Triton kernels keep the dot products on chip:

1. :func:`~._triton_src.blockmax_kernel` computes ``float32(dot) * cs + bias`` for a
   ``BLOCK_M × BLOCK_N`` (rows × queries) tile in registers and writes only each row block's
   maximum per query — ``N / BLOCK_M`` floats per query instead of ``N``;
2. per query, the ``k`` blocks first in the order (block max descending, block index ascending)
   are selected with one ``torch.topk`` over packed int64 keys
   (:func:`~.topk.pack_keys_torch`), and :func:`~._triton_src.candidates_kernel` recomputes
   the exact keys of those ``k · BLOCK_M`` rows; one more ``topk`` merges them into the
   running list.

Exactness (the order is key descending, then slot ascending): the argument of
:func:`~.topk.merge_blocks_torch` holds unchanged — an element of the true top-k in an
unselected block would be preceded by one element of each of the ``k`` selected blocks. Keys
are computed with the same float32 arithmetic as the CPU path (``float32(dot)`` is exact for
``d ≤ 1040``; one rounding of the product; adding a bias of 0 or ``-inf``), so CPU and CUDA
return identical ids and scores (tested on a GPU; on the CPU, CI runs these kernels through
Triton's interpreter).

Needs Triton (the ``triton`` extra; bundled with CUDA builds of torch). :func:`available`
says whether it is importable; :class:`~.dense.DenseIndex` falls back to the torch path when
it is not, or when a kernel fails to compile on the device at hand.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import torch

from spector_gpu.errors import ValidationError

from .topk import pack_keys_torch

__all__ = ["DEFAULT_CONFIG", "TritonConfig", "available", "kernels", "search_packed"]

TritonConfig = tuple[int, int, int, int]  # (BLOCK_N, BLOCK_K, num_warps, num_stages)
DEFAULT_CONFIG: TritonConfig = (128, 64, 4, 3)
_BLOCK = 64  # rows per block (BLOCK_M): one Hopper warpgroup's MMA height
_MAX_BLOCK_MAXIMA = 1 << 26  # block maxima held per tile (n_blocks × queries), 256 MiB


def available() -> bool:
    """True when Triton can be imported (it is never imported by this check)."""
    return importlib.util.find_spec("triton") is not None


@functools.lru_cache(maxsize=1)
def kernels() -> tuple[Any, Any]:
    """The ``(blockmax, candidates)`` kernels, ``triton.jit``-wrapped: compiled for the GPU, or
    run by Triton's interpreter on CPU tensors when ``TRITON_INTERPRET=1`` was set before
    Triton was first imported (how the CPU tests run them)."""
    import triton

    from . import _triton_src as src

    return triton.jit(src.blockmax_kernel), triton.jit(src.candidates_kernel)


def _interpreting() -> bool:
    import triton

    return bool(triton.knobs.runtime.interpret) if hasattr(triton, "knobs") else False


def search_packed(
    codes: torch.Tensor,
    cscale: torch.Tensor,
    bias: torch.Tensor,
    slots: torch.Tensor,
    xq: torch.Tensor,
    k: int,
    *,
    config: TritonConfig = DEFAULT_CONFIG,
    block: int = _BLOCK,
    max_block_maxima: int = _MAX_BLOCK_MAXIMA,
) -> torch.Tensor:
    """Exact top-k of ``float32(codes · xq) * cscale + bias`` per query, as packed int64 keys.

    Args:
        codes: int8 (R, w) rows to scan (row-major; zero columns past ``d`` are harmless).
        cscale: float32 (R,) row scales; bias: float32 (R,) 0 for a live row, ``-inf`` for a
            gated or padding row.
        slots: int64 (R,) each row's id, ascending over the live rows, in ``[0, 2**32 - 1)``.
        xq: int8 (n, w) query codes, row-major, same device.
        k: results per query (≥ 1).
        config: ``(BLOCK_N, BLOCK_K, num_warps, num_stages)`` of the block-max kernel.
        block: rows per block (a power of two ≥ 16).
        max_block_maxima: bound on ``n_blocks × n`` per tile (the only large buffer).

    Returns:
        int64 (n, k) :func:`~.topk.pack_keys_torch` keys, best first; entries whose value is
        ``-inf`` are padding.
    """
    if block < 16 or block & (block - 1):
        raise ValidationError(
            f"block must be a power of two >= 16 (the int8 MMA height), got {block}"
        )
    interpret = codes.device.type != "cuda"
    if interpret and not _interpreting():
        raise ValidationError(
            "the Triton kernels run on CUDA tensors, or on CPU tensors under Triton's interpreter "
            "(set TRITON_INTERPRET=1 before importing triton)"
        )
    _, _, warps, stages = config
    launch: dict[str, Any] = {} if interpret else {"num_warps": warps, "num_stages": stages}
    n = xq.shape[0]
    rows_total = codes.shape[0]
    dev = codes.device
    best: torch.Tensor = pack_keys_torch(
        torch.full((n, k), float("-inf"), dtype=torch.float32, device=dev),
        torch.zeros((n, k), dtype=torch.int64, device=dev),
    )
    if rows_total == 0 or n == 0:
        return best
    tile = max(block, (max_block_maxima // max(n, 1)) * block)
    for lo in range(0, rows_total, tile):
        rows = min(tile, rows_total - lo)
        part = (codes[lo : lo + rows], cscale[lo : lo + rows], bias[lo : lo + rows])
        best = _merge_tile(best, part, slots[lo : lo + rows], xq, k, block, config, launch)
    return best


def _merge_tile(
    best: torch.Tensor,
    part: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    slots: torch.Tensor,
    xq: torch.Tensor,
    k: int,
    block: int,
    config: TritonConfig,
    launch: dict[str, Any],
) -> torch.Tensor:
    """Merge one tile of rows (codes, scales, bias) into the running packed top-k lists: the
    block maxima, each query's k best blocks, their rows rescored exactly, one topk."""
    codes = part[0]
    n, rows, dev = xq.shape[0], codes.shape[0], codes.device
    n_blocks = -(-rows // block)
    maxima = _block_maxima(part, xq, n_blocks, block, config, launch)
    take = min(k, n_blocks)
    order = pack_keys_torch(maxima.t(), torch.arange(n_blocks, device=dev))
    chosen = torch.topk(order, take, dim=1, sorted=False).indices.contiguous()  # (n, take)
    keys = _rescore(part, xq, chosen, block, config, launch)
    offsets = torch.arange(block, device=dev)
    local = (chosen[:, :, None] * block + offsets).reshape(n, take * block)
    ids = slots[local.clamp(max=rows - 1)]  # rows past the end carry -inf keys
    merged = torch.cat([best, pack_keys_torch(keys.view(n, take * block), ids)], dim=1)
    packed: torch.Tensor = torch.topk(merged, k, dim=1).values
    return packed


def _block_maxima(
    part: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    xq: torch.Tensor,
    n_blocks: int,
    block: int,
    config: TritonConfig,
    launch: dict[str, Any],
) -> torch.Tensor:
    """float32 (n_blocks, n): each block's max key per query (the block-max kernel)."""
    codes, cscale, bias = part
    blockmax, _ = kernels()
    block_n, block_k, _, _ = config
    n, width = xq.shape
    maxima = torch.empty((n_blocks, n), dtype=torch.float32, device=codes.device)
    blockmax[(n_blocks * -(-n // block_n),)](
        codes, xq, cscale, bias, maxima, codes.shape[0], n, width,
        codes.stride(0), xq.stride(0), maxima.stride(0),
        BLOCK_M=block, BLOCK_N=block_n, BLOCK_K=block_k, **launch,
    )  # fmt: skip
    return maxima


def _rescore(
    part: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    xq: torch.Tensor,
    chosen: torch.Tensor,
    block: int,
    config: TritonConfig,
    launch: dict[str, Any],
) -> torch.Tensor:
    """float32 (n · take · block,): exact keys of the rows of each query's chosen blocks."""
    codes, cscale, bias = part
    _, candidates = kernels()
    n, take = chosen.shape
    keys = torch.empty((n * take * block,), dtype=torch.float32, device=codes.device)
    candidates[(n * take,)](
        codes, xq, cscale, bias, chosen, keys, codes.shape[0], xq.shape[1],
        codes.stride(0), xq.stride(0), take,
        BLOCK=block, BLOCK_K=config[1], **launch,
    )  # fmt: skip
    return keys
