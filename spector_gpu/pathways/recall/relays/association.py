"""The association relay: graph neighbours of the pool and max-product spreading over it.

Neighbours of a memory are its same-session turns within ``association.temporal_window``
steps along the ``prev`` / ``next`` chain (weight ``temporal_weight``) and its extra edges
(tags, lineage; their stored weights, held as float32 like the graph keeps them), gathered
for the whole padded pool at once from :class:`~..tables.LinkTables`. The pool grows by the
allowed neighbours of its members; then the fused lexical + dense base spreads between
members (:func:`~spector_gpu.kernels.spread.spread_max`).
"""

from __future__ import annotations

import torch

from ....config import AssociationConfig
from ....kernels.spread import spread_max
from ..pool import Pool
from ..tables import LinkTables

__all__ = ["association_score", "neighbours"]


def neighbours(
    tables: LinkTables, pool: Pool, cfg: AssociationConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(nbr int64 (m, W, E), weight float64 (m, W, E))`` of every pool member, -1 for none."""
    nodes = torch.where(pool.valid, pool.ordinals, torch.full_like(pool.ordinals, -1))
    none = torch.full_like(nodes, -1)
    chain = tables.chain
    nbr = chain[nodes.clamp(min=0)]  # (m, W, 2·window)
    nbr = torch.where((nodes >= 0)[..., None], nbr, torch.full_like(nbr, -1))
    weight = torch.full(
        nbr.shape, float(cfg.temporal_weight), dtype=torch.float64, device=nbr.device
    )
    extra = tables.extra()
    if extra is not None:
        row_of, e_nbr, e_w = extra
        row = torch.where(nodes >= 0, row_of[nodes.clamp(min=0)], none)
        has = (row >= 0)[..., None]
        picked = e_nbr[row.clamp(min=0)]
        nbr = torch.cat([nbr, torch.where(has, picked, torch.full_like(picked, -1))], dim=-1)
        weight = torch.cat([weight, e_w[row.clamp(min=0)]], dim=-1)
    return nbr, weight


def association_score(
    pool: Pool,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    base: torch.Tensor,
    cfg: AssociationConfig,
) -> torch.Tensor:
    """float64 (m, W) activation of every member from the base of its neighbours in the pool."""
    act: torch.Tensor = spread_max(
        base, pool.positions(nbr), weight, hops=cfg.hops, decay=cfg.decay
    )
    return act
