"""The candidate pool: each query's union of relay proposals, as a padded (n, W) tensor.

Rows hold ordinals in ascending order (so a stable order by score keeps ties in ordinal
order) with a ``valid`` mask. Two layouts, chosen by size:

* **sparse** — sorted unique ordinals padded with :data:`PAD`; the union is one sort plus a
  compaction (no second sort), membership a ``searchsorted``. On the CPU the width is trimmed
  to the widest row, and a few rows are sorted by numpy, row by row (2,000 ordinals: 9 µs
  against 60 µs for torch's sort and compaction); on a GPU it stays at its bound (reading the
  widest row back would be a host sync).
* **dense** — for stores no larger than the candidate lists (a conversation of a few hundred
  turns): W = N, column j *is* ordinal j and ``valid`` is the membership bitmap; the union
  and expansion are scatters, membership a gather — no sort at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...kernels.selection import take_rows
from ...kernels.spread import member_positions

__all__ = ["PAD", "Pool", "expand", "union"]

PAD = 1 << 62  # padding ordinal of the sparse layout: above any real one
_HOST_ROWS = 4  # rows up to which a trimmed union is formed by numpy, one row at a time


@dataclass(frozen=True)
class Pool:
    """``ordinals`` int64 (n, W) ascending per row, ``valid`` bool (n, W); ``dense`` when
    column j is ordinal j for every row; ``host_reads`` when lookups may read values back."""

    ordinals: torch.Tensor
    valid: torch.Tensor
    dense: bool
    host_reads: bool = False  # the caller may read values back (the CPU path)
    # a pool of one relay's proposals alone: the column of that relay's row each member
    # came from (int64 (n, W)), so its scores are a gather, not a second sort
    order: torch.Tensor | None = None

    @property
    def width(self) -> int:
        return int(self.ordinals.shape[1])

    def index(self) -> torch.Tensor:
        """Ordinals safe to gather with (padding mapped to 0)."""
        return torch.where(self.valid, self.ordinals, torch.zeros_like(self.ordinals))

    def positions(self, nbr: torch.Tensor) -> torch.Tensor:
        """Position in its row of each ordinal of ``nbr`` int64 (n, W, E) (-1: none), or -1
        where it is not a member."""
        n = nbr.shape[0]
        flat = nbr.reshape(n, -1)
        if self.dense:
            hit = (flat >= 0) & torch.gather(self.valid, 1, flat.clamp(min=0))
            return torch.where(hit, flat, torch.full_like(flat, -1)).reshape(nbr.shape)
        pos: torch.Tensor = member_positions(self.ordinals, nbr, host_reads=self.host_reads)
        return pos


def _dense(
    parts: list[torch.Tensor],
    n_rows: int,
    n_store: int,
    base: Pool | None,
    masks: list[torch.Tensor] = (),  # type: ignore[assignment]
) -> Pool:
    device = parts[0].device
    valid = torch.zeros((n_rows, n_store + 1), dtype=torch.bool, device=device)
    if base is not None:
        valid[:, :n_store] = base.valid
    for mask in masks:
        valid[:, :n_store] |= mask
    for part in parts:
        valid.scatter_(1, torch.where(part < 0, n_store, part), True)  # -1 lands in a spare column
    valid = valid[:, :n_store]
    ordinals = torch.arange(n_store, device=device).expand(n_rows, n_store)
    return Pool(ordinals, valid, True)


def _sparse(x: torch.Tensor, *, trim: bool) -> Pool:
    if trim and x.shape[0] <= _HOST_ROWS and x.device.type == "cpu":
        return _sparse_host(x.numpy())
    x = torch.where(x < 0, torch.full_like(x, PAD), x)
    x = torch.sort(x, dim=1).values
    keep = x < PAD
    if x.shape[1] > 1:
        keep[:, 1:] &= x[:, 1:] != x[:, :-1]
    width = x.shape[1]
    if trim and width:
        width = int(keep.sum(dim=1).max())
    slot = torch.where(keep, torch.cumsum(keep, dim=1) - 1, torch.full_like(x, width))
    out = torch.full((x.shape[0], width + 1), PAD, dtype=x.dtype, device=x.device)
    out.scatter_(1, slot, x)  # kept entries keep their (ascending) order
    ordinals = out[:, :width].contiguous()
    return Pool(ordinals, ordinals < PAD, False, trim)


def _proposals(x: torch.Tensor, *, trim: bool) -> Pool:
    """:func:`_sparse` of rows whose ordinals are distinct (one relay's proposals): one sort,
    nothing to merge, and the order it applied kept (:attr:`Pool.order`). On the CPU, trimmed,
    numpy's argsort takes a third of torch's sort time; the order it gives the padding (the
    only equal keys) differs, and nothing reads the order there."""
    if trim and x.device.type == "cpu":
        rows = x.numpy()
        keyed = np.where(rows < 0, PAD, rows)
        at = np.argsort(keyed, axis=1)
        ordinals, order = torch.from_numpy(np.take_along_axis(keyed, at, 1)), torch.from_numpy(at)
    else:
        ordinals, order = torch.sort(torch.where(x < 0, torch.full_like(x, PAD), x), dim=1)
    width = x.shape[1]
    if trim and width:
        width = int((x >= 0).sum(dim=1).max())
    ordinals = ordinals[:, :width].contiguous()
    return Pool(ordinals, ordinals < PAD, False, trim, order[:, :width].contiguous())


def _sparse_host(x: np.ndarray) -> Pool:
    """:func:`_sparse` of a few rows on the CPU (trimmed): each row's ordinals by numpy."""
    rows = []
    for row in x:
        s = np.sort(row[row >= 0])
        keep = np.ones(len(s), dtype=bool)
        np.not_equal(s[1:], s[:-1], out=keep[1:])
        rows.append(s[keep])
    out = np.full((len(rows), max((len(r) for r in rows), default=0)), PAD, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    ordinals = torch.from_numpy(out)
    return Pool(ordinals, ordinals < PAD, False, True)


def union(
    parts: list[torch.Tensor],
    *,
    n_store: int,
    trim: bool,
    dense: bool = False,
    masks: list[torch.Tensor] | None = None,
) -> Pool:
    """The row-wise union of ``parts`` (each int64 (n, c_i) ordinals, ``-1`` padding, distinct
    within a row: each is one relay's proposals) and, in the dense layout (``dense``, or a
    store no larger than the parts), of ``masks`` (bool (n, N) memberships). In the sparse
    layout a single part with columns is its own union (:attr:`Pool.order` kept)."""
    width = sum(p.shape[1] for p in parts)
    if dense or masks or n_store <= width:
        return _dense(parts, parts[0].shape[0], n_store, None, masks or [])
    filled = [p for p in parts if p.shape[1]]
    if len(filled) == 1:
        return _proposals(filled[0], trim=trim)
    return _sparse(torch.cat(parts, dim=1), trim=trim)


def expand(
    pool: Pool, nbr: torch.Tensor, allowed: torch.Tensor, *, n_store: int, trim: bool
) -> Pool:
    """The pool plus every allowed neighbour of its members (``nbr`` int64 (n, W, E), -1 for
    none; ``allowed`` bool (N,) on the device)."""
    flat = nbr.reshape(nbr.shape[0], -1)
    ok = (flat >= 0) & take_rows(allowed, flat.clamp(min=0))
    more = torch.where(ok, flat, torch.full_like(flat, -1))
    if pool.dense:
        return _dense([more], flat.shape[0], n_store, pool)
    if n_store <= pool.width + more.shape[1]:
        seeds = torch.where(pool.valid, pool.ordinals, torch.full_like(pool.ordinals, -1))
        return _dense([seeds, more], flat.shape[0], n_store, None)
    base = torch.where(pool.valid, pool.ordinals, torch.full_like(pool.ordinals, -1))
    return _sparse(torch.cat([base, more], dim=1), trim=trim)
