"""The candidate pool: each query's union of relay proposals, as a padded (n, W) tensor.

Rows are sorted ascending by ordinal (so a stable sort by score keeps ties in ordinal order,
and membership is a ``searchsorted``) and padded with :data:`PAD`, which sorts after every
ordinal. :func:`union` merges proposal blocks; :func:`expand` adds the allowed graph
neighbours of the members (the association relay's candidates). On the CPU the width is
trimmed to the widest row; on a GPU it stays at its bound, since reading the widest row back
would be a host sync.
"""

from __future__ import annotations

import torch

__all__ = ["PAD", "expand", "union"]

PAD = 1 << 62  # padding ordinal: above any real one


def union(parts: list[torch.Tensor], *, trim: bool) -> torch.Tensor:
    """int64 (n, W) sorted unique ordinals of the row-wise union of ``parts`` (each int64
    (n, c_i), ``-1`` padding), padded with :data:`PAD`."""
    x = torch.cat(parts, dim=1)
    x = torch.where(x < 0, torch.full_like(x, PAD), x)
    x = torch.sort(x, dim=1).values
    if x.shape[1] > 1:
        dup = torch.zeros_like(x, dtype=torch.bool)
        dup[:, 1:] = x[:, 1:] == x[:, :-1]
        x = torch.sort(torch.where(dup, torch.full_like(x, PAD), x), dim=1).values
    if trim and x.shape[1]:
        width = int((x < PAD).sum(dim=1).max())
        x = x[:, :width].contiguous()
    return x


def expand(
    pool: torch.Tensor, nbr: torch.Tensor, allowed: torch.Tensor, *, trim: bool
) -> torch.Tensor:
    """The pool plus every allowed neighbour of its members (``nbr`` int64 (n, W, E), -1 for
    none; ``allowed`` bool (N,) on the device)."""
    flat = nbr.reshape(nbr.shape[0], -1)
    ok = (flat >= 0) & allowed[flat.clamp(min=0)]
    more = torch.where(ok, flat, torch.full_like(flat, -1))
    base = torch.where(pool < PAD, pool, torch.full_like(pool, -1))
    return union([base, more], trim=trim)
