"""Deterministic top-k: ties go to the lower index, on numpy and on torch (CPU or CUDA).

Every top-k in spector_gpu orders candidates by the total order *(score descending, index
ascending)*, so the same scores give the same ids on every device and every tiling. A score of
``-inf`` means "not a candidate" (a gated row or padding): such entries come back with index
``-1``, and results are padded to exactly ``k`` columns with ``(-inf, -1)``.

``torch.topk`` alone does not promise which of several equal scores it returns; we ask it for
``k + 1`` values and, only for the rows where the k-th and (k+1)-th values are equal (a tie
straddling the cut), recompute that row's selection exactly. The common case costs one topk.
That fix-up reads the tied rows back to the host; on CUDA, where a host sync per tile is what
costs, :func:`pack_keys_torch` instead folds the index into a unique int64 key so that one plain
``torch.topk`` is exact, and :func:`merge_blocks_torch` uses it to merge a tile of keys into
running top-k lists with no host sync at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt
import torch

from spector_gpu.errors import ValidationError

__all__ = [
    "merge_blocks_torch",
    "merge_topk",
    "pack_keys_torch",
    "sort_pairs_torch",
    "topk_stable",
    "topk_stable_torch",
    "unpack_keys_torch",
    "update_topk_torch",
]

_NEG_INF = float("-inf")
_LOW32 = (1 << 32) - 1


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValidationError(f"k must be a positive int, got {k!r}")
    return int(k)


@overload
def topk_stable(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]: ...
@overload
def topk_stable(scores: npt.ArrayLike, k: int) -> tuple[np.ndarray, np.ndarray]: ...
def topk_stable(scores: Any, k: int) -> tuple[Any, Any]:
    """Top-k along the last axis (reference semantics for every top-k in spector_gpu).

    Args:
        scores: float (n, N) (or (N,), treated as one row); higher is better; ``-inf`` = excluded.
            A ``torch.Tensor`` is handled by :func:`topk_stable_torch` on its device.
        k: number of results per row (≥ 1); rows are padded when ``N < k``.

    Returns:
        ``(values, indices)``: float32 (n, k) sorted descending, int64 (n, k); ties go to the
        lower index; excluded/padding entries are ``(-inf, -1)``. 1-D input gives 1-D output.
        numpy in, numpy out; torch in, torch out.
    """
    if isinstance(scores, torch.Tensor):
        if scores.ndim == 1:
            v, i = topk_stable_torch(scores[None, :], k)
            return v[0], i[0]
        return topk_stable_torch(scores, k)
    k = _check_k(k)
    arr = np.asarray(scores, dtype=np.float32)
    one_row = arr.ndim == 1
    mat = arr[None, :] if one_row else arr
    if mat.ndim != 2:
        raise ValidationError(f"scores must be 1-D or 2-D, got shape {arr.shape}")
    n, total = mat.shape
    if np.isnan(mat).any():
        raise ValidationError("scores contain NaN; top-k needs a total order")
    take = min(k, total)
    # Stable sort of the negated scores: descending, and equal scores keep index order.
    order = np.argsort(-mat, axis=1, kind="stable")[:, :take]
    values = np.full((n, k), _NEG_INF, dtype=np.float32)
    indices = np.full((n, k), -1, dtype=np.int64)
    values[:, :take] = np.take_along_axis(mat, order, axis=1)
    indices[:, :take] = np.where(np.isneginf(values[:, :take]), -1, order)
    return (values[0], indices[0]) if one_row else (values, indices)


def sort_pairs_torch(
    values: torch.Tensor, indices: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Order each row of (n, m) pairs by (value descending, index ascending); ``-1`` sorts last."""
    big = torch.iinfo(torch.int64).max
    key = torch.where(indices < 0, torch.full_like(indices, big), indices)
    _, perm = torch.sort(key, dim=1, stable=True)
    vals = torch.gather(values, 1, perm)
    idx = torch.gather(indices, 1, perm)
    vals, perm2 = torch.sort(vals, dim=1, descending=True, stable=True)
    return vals, torch.gather(idx, 1, perm2)


def topk_stable_torch(
    scores: torch.Tensor, k: int, *, dim: int = -1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch twin of :func:`topk_stable`, on the tensor's device.

    Args:
        scores: float tensor; the top-k is taken along ``dim`` (any stride; no copy is made).
        k: results per row (≥ 1).
        dim: the candidate axis; the other axis indexes queries. Must be 2-D.

    Returns:
        ``(values, indices)``: float (n, k) and int64 (n, k) with queries first, whatever ``dim``
        was; ties to the lower index; ``(-inf, -1)`` for excluded and padding entries.
    """
    k = _check_k(k)
    if scores.ndim != 2:
        raise ValidationError(f"scores must be 2-D, got shape {tuple(scores.shape)}")
    view = scores.movedim(dim, -1)  # (n, N) view, no copy
    n, total = view.shape
    take_k = min(k, total)
    values = torch.full((n, k), _NEG_INF, dtype=view.dtype, device=view.device)
    indices = torch.full((n, k), -1, dtype=torch.int64, device=view.device)
    if take_k == 0 or n == 0:
        return values, indices
    probe = min(take_k + 1, total)
    vals, idx = torch.topk(view, probe, dim=1, largest=True, sorted=True)
    if probe > take_k:
        cut = vals[:, take_k - 1]
        tied = (cut == vals[:, take_k]) & (cut != _NEG_INF)
        vals, idx = vals[:, :take_k].contiguous(), idx[:, :take_k].contiguous()
        rows = torch.nonzero(tied).flatten().tolist()
        for row in rows:  # rare: a tie straddles the k-th place; settle it by index
            idx[row] = _exact_row(view[row], cut[row], take_k)
            vals[row] = view[row][idx[row]]
    idx = torch.where(vals == _NEG_INF, torch.full_like(idx, -1), idx)
    vals, idx = sort_pairs_torch(vals, idx)
    values[:, :take_k] = vals
    indices[:, :take_k] = idx
    return values, indices


def update_topk_torch(
    best_v: torch.Tensor,
    best_i: torch.Tensor,
    cols: torch.Tensor,
    vals: torch.Tensor,
    ids: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge a sparse list of new candidates into running per-query top-k lists.

    Args:
        best_v, best_i: float (n, k) and int64 (n, k) current lists (``(-inf, -1)`` = empty).
        cols: int64 (m,) query of each new candidate; vals: float (m,); ids: int64 (m,).
            The caller must pass *every* new candidate that could enter a list (for instance all
            with ``vals >= best_v[col, k-1]``), ties included, or the result is not exact.

    Returns:
        The new ``(best_v, best_i)``, ordered by (value descending, id ascending).
    """
    n, k = best_v.shape
    qcol = torch.arange(n, device=best_v.device).repeat_interleave(k)
    all_c = torch.cat([qcol, cols])
    all_v = torch.cat([best_v.reshape(-1), vals.to(best_v.dtype)])
    all_i = torch.cat([best_i.reshape(-1), ids])
    big = torch.iinfo(torch.int64).max
    _, perm = torch.sort(torch.where(all_i < 0, torch.full_like(all_i, big), all_i), stable=True)
    _, p2 = torch.sort(all_v[perm], descending=True, stable=True)
    perm = perm[p2]
    _, p3 = torch.sort(all_c[perm], stable=True)
    perm = perm[p3]
    c_sorted = all_c[perm]
    counts = torch.bincount(c_sorted, minlength=n)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(c_sorted.numel(), device=best_v.device) - starts[c_sorted]
    keep = rank < k
    out_v = torch.full_like(best_v, _NEG_INF)
    out_i = torch.full_like(best_i, -1)
    out_v[c_sorted[keep], rank[keep]] = all_v[perm][keep]
    out_i[c_sorted[keep], rank[keep]] = all_i[perm][keep]
    return out_v, out_i


def pack_keys_torch(values: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Pack (value, id) pairs into int64 keys whose order is (value descending, id ascending).

    High 32 bits: the float32 value as an order-preserving signed integer (its IEEE magnitude
    bits, negated for negative values, so ``-0.0`` and ``+0.0`` both give 0 and ``-inf`` is the
    least finite-or-not value). Low 32 bits: ``2**32 - 1 - id``. A larger key is a larger value
    or, at equal values, a lower id; keys are distinct when ids are, so a plain ``torch.topk``
    or ``torch.sort`` over them is exact and needs no tie fix-up (hence no host sync).

    Args:
        values: float32 tensor (any shape), no NaN.
        ids: int64 tensor broadcastable to ``values``, each in ``[0, 2**32 - 1)``.

    Returns:
        int64 tensor of the broadcast shape; :func:`unpack_keys_torch` inverts it.
    """
    mag = values.abs().view(torch.int32)
    signed = torch.where(values < 0, -mag, mag)
    return torch.add(_LOW32 - ids, signed, alpha=1 << 32)


def unpack_keys_torch(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Invert :func:`pack_keys_torch`: float32 values and int64 ids; ``(-inf, -1)`` where the
    value is ``-inf`` (excluded or padding, whatever id it was packed with). ``-0.0`` comes back
    as ``+0.0``."""
    ids = _LOW32 - (packed & _LOW32)
    signed = packed >> 32
    mag = signed.abs().to(torch.int32).view(torch.float32)
    values = torch.where(signed < 0, -mag, mag)
    return values, torch.where(values == _NEG_INF, torch.full_like(ids, -1), ids)


def merge_blocks_torch(
    best: torch.Tensor, keys: torch.Tensor, slots: torch.Tensor, block: int
) -> torch.Tensor:
    """Merge one tile of keys into running top-k lists by exact block-max candidate selection.

    The tile's rows are cut into blocks of ``block`` consecutive rows. Per query, the ``k``
    blocks first in the order (block max descending, block index ascending) are selected, and
    only their rows compete with the running list. No step reads anything back to the host.

    Exact, in the order (key descending, slot ascending): suppose an element ``e`` of the true
    top-k lay in an unselected block ``b``. Each of the ``k`` selected blocks precedes ``b``, so
    it holds an element preceding ``e``: its max is either larger than ``max(b) >= key(e)``, or
    equal to ``max(b)`` with a lower block index -- then that max is ``> key(e)``, or ``==
    key(e)`` at a lower slot, because blocks are ranges of consecutive rows and ``slots`` is
    ascending in the row (required of the caller). That makes ``k`` distinct elements ahead of
    ``e``, which contradicts ``e`` being in the top-k. ``-inf`` rows never precede a finite key.

    Args:
        best: int64 (n, k) running lists as :func:`pack_keys_torch` keys (start from packed
            ``(-inf, 0)``); every slot in it must differ from this tile's.
        keys: float32 (T, n), any strides; T a multiple of ``block``; ``-inf`` = excluded row.
        slots: int64 (T,) the global id of each row, ascending over the rows whose keys are
            finite, each in ``[0, 2**32 - 1)``.
        block: rows per block (≥ 1).

    Returns:
        int64 (n, k): the new lists, sorted best first.
    """
    n, k = best.shape
    rows_total = keys.shape[0]
    if block < 1 or rows_total % block:
        raise ValidationError(
            f"tile rows ({rows_total}) must be a positive multiple of block ({block})"
        )
    n_blocks = rows_total // block
    take = min(k, n_blocks)
    keys_t = keys.t()  # (n, T) view
    if take * block >= rows_total:  # every row would be a candidate: skip the block stage
        cand, ids = keys_t, slots[None, :]
    else:
        bmax = keys.view(n_blocks, block, n).amax(1).t().contiguous()  # (n, T/block)
        order = pack_keys_torch(bmax, torch.arange(n_blocks, device=keys.device))
        top = torch.topk(order, take, dim=1, sorted=False).indices  # (n, take) block numbers
        offsets = torch.arange(block, device=keys.device)
        rows = (top[:, :, None] * block + offsets).reshape(n, take * block)
        cand, ids = torch.gather(keys_t, 1, rows), slots[rows]
    merged = torch.cat([best, pack_keys_torch(cand, ids)], dim=1)
    return torch.topk(merged, k, dim=1).values


def _exact_row(row: torch.Tensor, cut: torch.Tensor, k: int) -> torch.Tensor:
    above = torch.nonzero(row > cut).flatten()
    level = torch.nonzero(row == cut).flatten()  # ascending index order
    return torch.cat([above, level[: k - above.numel()]])


def merge_topk(
    score_arrays: Sequence[npt.ArrayLike], id_arrays: Sequence[npt.ArrayLike], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-shard top-k lists into one top-k per query.

    Args:
        score_arrays: one float (n, k_i) array per shard (descending or not; order is redone).
        id_arrays: matching int64 (n, k_i) ids; ids must be disjoint across shards;
            ``-1`` = padding.
        k: results per query.

    Returns:
        float32 (n, k), int64 (n, k) ordered by (score descending, id ascending), padded with
        ``(-inf, -1)``.
    """
    k = _check_k(k)
    if len(score_arrays) != len(id_arrays) or not score_arrays:
        raise ValidationError("merge_topk needs one id array per score array, at least one shard")
    scores = [np.asarray(s, dtype=np.float32) for s in score_arrays]
    ids = [np.asarray(i, dtype=np.int64) for i in id_arrays]
    n = scores[0].shape[0]
    for pos, (s, i) in enumerate(zip(scores, ids)):
        if s.ndim != 2 or s.shape != i.shape or s.shape[0] != n:
            raise ValidationError(
                f"shard {pos}: scores {s.shape} and ids {i.shape} must both be (n={n}, k_i)"
            )
    all_s = np.concatenate(scores, axis=1)
    all_i = np.concatenate(ids, axis=1)
    invalid = (all_i < 0) | np.isneginf(all_s) | np.isnan(all_s)
    all_s = np.where(invalid, np.float32(_NEG_INF), all_s)
    id_key = np.where(invalid, np.iinfo(np.int64).max, all_i)
    order = np.lexsort((id_key, -all_s), axis=1)[:, :k]
    take = order.shape[1]
    out_s = np.full((n, k), _NEG_INF, dtype=np.float32)
    out_i = np.full((n, k), -1, dtype=np.int64)
    out_s[:, :take] = np.take_along_axis(all_s, order, axis=1)
    out_i[:, :take] = np.where(
        np.isneginf(out_s[:, :take]), -1, np.take_along_axis(all_i, order, axis=1)
    )
    return out_s, out_i
