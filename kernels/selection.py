"""Exact top-k selections of the recall pathway, sync-free on any device, native on the CPU.

* :func:`topk_exact_torch` — top-k of each row of any float dtype by one unsorted ``topk`` for
  the k-th value, then the entries above it and the first ties (a cumulative count) compacted
  and ordered by one stable sort of k columns; no full sort, no host read.
* :func:`topk_exact` — the same, by the native row selection on the CPU (the recall's final
  top-k of the pool rows: 100 of 600 float64 columns in about 2.5 us a row).
* :func:`topk_mask` — the same set as a membership mask (the dense pool layout unions masks).
* :func:`rows_topk` — float32 rows: the native heap scan on the CPU for rows much wider than
  k, :func:`topk_exact_torch` for narrow rows, block-max selection (:mod:`.topk`) for wide ones.

Every result is ordered by (value descending, index ascending), as :func:`.topk.topk_stable`.
"""

from __future__ import annotations

import numpy as np
import torch

from .native import native
from .topk import _check_k, merge_blocks_torch, pack_keys_torch, unpack_keys_torch

__all__ = ["rows_topk", "take_rows", "topk_exact", "topk_exact_torch", "topk_mask"]

_NEG_INF = float("-inf")
_NATIVE_WIDTH = 8  # the native heap pays off for rows wider than 8 k (else half the row enters)
_EXACT_WIDTH = 1 << 14  # rows up to this width: topk_exact_torch; wider: block-max selection


def take_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``table[idx]`` for an int64 ``idx`` of any shape (every value in range): the rows of
    ``table`` along its first axis, by one ``index_select`` (on the CPU a third of the cost of
    advanced indexing for the pool's few thousand rows)."""
    got = table.index_select(0, idx.reshape(-1))
    return got.reshape(*idx.shape, *table.shape[1:])


def topk_exact_torch(
    values: torch.Tensor, k: int, *, valid: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k along the last axis of a float tensor of any dtype: values descending,
    equal values by lower index; entries with ``valid`` False (or ``-inf``) are excluded.

    One ``torch.topk`` finds the k-th value; every entry above it and the first entries equal
    to it (by index, counted with a cumulative sum) are the top k, compacted in index order
    and ordered by one stable sort of k columns. No full sort of the axis and no host sync.

    Returns values (…, k) and int64 indices (…, k), ``(-inf, -1)`` padding; k may exceed the
    axis.
    """
    k = _check_k(k)
    neg = torch.full_like(values, _NEG_INF)
    keyed = values if valid is None else torch.where(valid, values, neg)
    shape, width = keyed.shape[:-1], keyed.shape[-1]
    flat = keyed.reshape(int(np.prod(shape, dtype=np.int64)), width)
    take = min(k, width)
    if take == 0:
        vals = torch.full((*shape, k), _NEG_INF, dtype=values.dtype, device=values.device)
        return vals, torch.full((*shape, k), -1, dtype=torch.int64, device=values.device)
    keep = _top_mask(flat, take)
    slot = torch.where(
        keep, torch.cumsum(keep, dim=1) - 1, torch.full_like(flat, take, dtype=torch.int64)
    )
    idx = torch.zeros((flat.shape[0], take + 1), dtype=torch.int64, device=values.device)
    idx.scatter_(1, slot, torch.arange(width, device=values.device).expand_as(slot))
    idx = idx[:, :take]
    vals = torch.gather(flat, 1, idx)
    vals, order = torch.sort(vals, dim=1, descending=True, stable=True)
    idx = torch.gather(idx, 1, order)
    idx = torch.where(vals == _NEG_INF, torch.full_like(idx, -1), idx)
    if take < k:
        pad = (flat.shape[0], k - take)
        vals = torch.cat([vals, torch.full(pad, _NEG_INF, dtype=vals.dtype, device=vals.device)], 1)
        idx = torch.cat([idx, torch.full(pad, -1, dtype=idx.dtype, device=idx.device)], 1)
    return vals.reshape(*shape, k), idx.reshape(*shape, k)


def topk_exact(
    values: torch.Tensor, k: int, *, valid: torch.Tensor | None = None, use_native: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`topk_exact_torch`, computed by the native row selection (``rows_top_sorted``:
    entries above -inf, value descending, index ascending: the k-th value by a quickselect,
    then a stable sort of the k) for float32 or float64 CPU rows when ``use_native``; rows
    holding NaN or +inf, which the torch order places differently, keep the torch selection.
    Same values and indices."""
    k = _check_k(k)
    if not (use_native and native is not None and _host_floats(values) and values.shape[-1]):
        return topk_exact_torch(values, k, valid=valid)
    keyed = values if valid is None else torch.where(valid, values, _NEG_INF)
    shape, width = keyed.shape[:-1], keyed.shape[-1]
    flat = np.ascontiguousarray(keyed.reshape(-1, width).numpy())
    if flat.size and not flat.max() < np.inf:  # a NaN (max propagates it) or +inf
        return topk_exact_torch(values, k, valid=valid)
    top = np.empty((flat.shape[0], k), dtype=np.float64)
    cols = np.empty((flat.shape[0], k), dtype=np.int64)
    if flat.shape[0] and not native.rows_top_sorted(flat, k, top, cols):
        return topk_exact_torch(values, k, valid=valid)  # (not reached: no NaN gets here)
    vals = torch.from_numpy(top).to(values.dtype)  # exact: every key is a value of that dtype
    return vals.reshape(*shape, k), torch.from_numpy(cols).reshape(*shape, k)


def _host_floats(values: torch.Tensor) -> bool:
    """Whether the native selections may read ``values``: float32 or float64 on the CPU,
    outside autograd."""
    return (
        values.device.type == "cpu"
        and values.dtype in (torch.float32, torch.float64)
        and not values.requires_grad
    )


def _top_mask(flat: torch.Tensor, take: int) -> torch.Tensor:
    """bool (n, W): the ``take`` best entries of each row (ties: lower column), 1 <= take <= W."""
    # the smallest of an unsorted top-k is the k-th value (sorting it measured 6x slower)
    kth = torch.topk(flat, take, dim=1, sorted=False).values.amin(dim=1, keepdim=True)
    above = flat > kth
    tied = flat == kth
    need = take - above.sum(dim=1, keepdim=True)
    return above | (tied & (torch.cumsum(tied, dim=1) <= need))


def topk_mask(
    values: torch.Tensor,
    k: int,
    *,
    valid: torch.Tensor,
    host_reads: bool = False,
    use_native: bool = True,
) -> torch.Tensor:
    """bool (n, W): membership in the exact top-k of each row (the set :func:`topk_exact_torch`
    returns), among ``valid`` entries that are not ``-inf``; no compaction, no sort.

    With ``host_reads`` (a CPU caller), rows holding at most k candidates skip the selection
    (they keep them all); without it nothing is read back (the GPU path). CPU float rows go
    to the native quickselect (``_fusion.top_mask_rows``, the same set) when ``use_native``;
    a valid NaN keeps the torch selection."""
    k = _check_k(k)
    if values.shape[1] == 0:
        return torch.zeros(values.shape, dtype=torch.bool, device=values.device)
    if use_native and native is not None and _host_floats(values) and values.dim() == 2:
        mask = np.empty(values.shape, dtype=np.bool_)
        flags = np.ascontiguousarray(valid.expand_as(values).numpy())
        x = values.numpy()
        if native.top_mask_rows(np.ascontiguousarray(x), flags, min(k, x.shape[1]), mask):
            return torch.from_numpy(mask)
    keyed = torch.where(valid, values, torch.full_like(values, _NEG_INF))
    live = keyed > _NEG_INF
    if not host_reads:
        return _top_mask(keyed, min(k, values.shape[1])) & live
    crowded = live.sum(dim=1) > k
    if not bool(crowded.any()):
        return live
    out = live.clone()
    rows = torch.nonzero(crowded).flatten()
    out[rows] = _top_mask(keyed[rows], min(k, values.shape[1])) & live[rows]
    return out


def rows_topk(
    x: torch.Tensor, k: int, *, positive: bool, use_native: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of each row of a float32 (n, N) tensor, ties to the lower column.

    Args:
        x: float32 (n, N) on any device; positive: keep only entries > 0 (else finite ones).
        use_native: on the CPU, the native heap selection (one pass, nothing of size N
            written) for rows much wider than k; otherwise :func:`topk_exact_torch` for rows
            narrower than 16k, else a sync-free block-max selection (:func:`merge_blocks_torch`,
            memory ∝ N·n / block).

    Returns:
        float32 (n, k) values and int64 (n, k) columns, ``(-inf, -1)`` padding.
    """
    k = _check_k(k)
    n, width = x.shape
    wide = width > _NATIVE_WIDTH * k
    if x.device.type == "cpu" and use_native and native is not None and n and wide:
        top = np.empty((n, k), dtype=np.float64)
        cols = np.empty((n, k), dtype=np.int64)
        count = np.empty(n, dtype=np.int64)
        bound = 0.0 if positive else _NEG_INF
        native.rows_topk(np.ascontiguousarray(x.numpy()), width, bound, True, top, cols, count)
        return torch.from_numpy(top.astype(np.float32)), torch.from_numpy(cols)
    keep = x > 0 if positive else torch.isfinite(x)
    if width <= _EXACT_WIDTH:
        vals, cols_t = topk_exact_torch(x, k, valid=keep)
        return vals.to(torch.float32), cols_t
    keys = torch.where(keep, x, torch.full_like(x, _NEG_INF))
    block = min(max(1 << round(np.log2(max(1.0, width / k) ** 0.5)), 32), 256)
    padded = -(-max(width, 1) // block) * block
    rows = torch.full((padded, n), _NEG_INF, dtype=torch.float32, device=x.device)
    rows[:width] = keys.t()
    best = pack_keys_torch(
        torch.full((n, k), _NEG_INF, dtype=torch.float32, device=x.device),
        torch.zeros((n, k), dtype=torch.int64, device=x.device),
    )
    best = merge_blocks_torch(best, rows, torch.arange(padded, device=x.device), block)
    return unpack_keys_torch(best)
