"""The association relay: graph neighbours of the pool and max-product spreading over it.

Neighbours of a memory are its same-session turns within ``association.temporal_window``
steps along the ``prev`` / ``next`` chain (weight ``temporal_weight``) and its extra edges
(tags, lineage; their stored weights, held as float32 like the graph keeps them), gathered
for the whole padded pool at once from :class:`~..tables.LinkTables`. The pool grows by the
allowed neighbours of its members; then the fused lexical + dense base spreads between
members (:func:`~spector_gpu.kernels.spread.spread_max`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ....config import AssociationConfig
from ....kernels.native import native
from ....kernels.selection import take_rows
from ....kernels.spread import spread_dense, spread_links, spread_max, spread_pool
from ..pool import PAD, Pool
from ..tables import LinkTables

__all__ = [
    "DenseGraph",
    "association_score",
    "dense_graph",
    "expanded_host",
    "neighbours",
    "spread_gathered",
    "spread_host",
]


def expanded_host(
    tables: LinkTables, parts: list[torch.Tensor], allowed: np.ndarray | None, n_store: int
) -> Pool | None:
    """The sparse pool of CPU queries — the union of ``parts`` (each int64 (n, c_i)
    proposals, ``-1`` padding) and every allowed neighbour of its members — by one native
    pass per query (one bit per memory; the members come out in ascending order), or None
    where the tensor route is taken: no native kernels, or a pool that route would hold in
    the dense layout (a store not much larger than the pool). The same pool as
    :func:`~..pool.union` then :func:`~..pool.expand` over :func:`neighbours` (``allowed``:
    bool (N,), None when every memory passes); a batch of 200 all-relay queries over 100k
    memories formed its pools in 5 ms this way, 17 ms by the tensor route's sorts."""
    m = parts[0].shape[0]
    if native is None or n_store <= sum(p.shape[1] for p in parts):
        return None
    chain, row_of, extra, _, extra_width = tables.host_arrays()
    seeds = (
        np.concatenate([p.numpy() for p in parts], axis=1) if len(parts) > 1 else parts[0].numpy()
    )
    per_member = 1 + chain.shape[1] + (0 if extra is None else extra.shape[1])
    rows, widest = [], 0
    for i in range(m):
        row = np.ascontiguousarray(seeds[i], dtype=np.int64)
        out = np.empty(len(row) * per_member, dtype=np.int64)
        distinct, count = native.pool_expand(row, chain, row_of, extra, allowed, out)
        widest = max(widest, distinct)
        rows.append(out[:count])
    if n_store <= widest * (1 + chain.shape[1] + extra_width):
        return None  # :func:`~..pool.expand` would form this pool in the dense layout
    ordinals = np.full((m, max((len(r) for r in rows), default=0)), PAD, dtype=np.int64)
    for i, r in enumerate(rows):
        ordinals[i, : len(r)] = r
    t = torch.from_numpy(ordinals)
    return Pool(t, t < PAD, False, True)


def neighbours(
    tables: LinkTables, pool: Pool, cfg: AssociationConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(nbr int64 (m, W, E), weight float64 (m, W, E))`` of every pool member, -1 for none."""
    nodes = torch.where(pool.valid, pool.ordinals, torch.full_like(pool.ordinals, -1))
    none = torch.full_like(nodes, -1)
    chain = tables.chain
    nbr = take_rows(chain, nodes.clamp(min=0))  # (m, W, 2·window)
    nbr = torch.where((nodes >= 0)[..., None], nbr, torch.full_like(nbr, -1))
    weight = torch.full(
        nbr.shape, float(cfg.temporal_weight), dtype=torch.float64, device=nbr.device
    )
    extra = tables.extra()
    if extra is not None:
        row_of, e_nbr, e_w = extra
        row = torch.where(nodes >= 0, take_rows(row_of, nodes.clamp(min=0)), none)
        has = (row >= 0)[..., None]
        picked = take_rows(e_nbr, row.clamp(min=0))
        nbr = torch.cat([nbr, torch.where(has, picked, torch.full_like(picked, -1))], dim=-1)
        weight = torch.cat([weight, take_rows(e_w, row.clamp(min=0))], dim=-1)
    return nbr, weight


def spread_host(
    tables: LinkTables, pool: Pool, base: torch.Tensor, cfg: AssociationConfig
) -> torch.Tensor | None:
    """:func:`association_score` of a sparse CPU pool with each member's neighbours read from
    the link tables in one native pass (no (n, W, E) neighbour arrays), or None where the
    native pass declines (no native kernels; a value it leaves to the tensors:
    :func:`~spector_gpu.kernels.spread.spread_pool`)."""
    if native is None or pool.dense or not pool.host_reads or base.device.type != "cpu":
        return None
    host = tables.host_arrays()
    got: torch.Tensor | None = spread_links(
        pool.ordinals, host, float(cfg.temporal_weight), base, hops=cfg.hops, decay=cfg.decay
    )
    return got


def association_score(
    pool: Pool,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    base: torch.Tensor,
    cfg: AssociationConfig,
) -> torch.Tensor:
    """float64 (m, W) activation of every member from the base of its neighbours in the pool
    (:func:`~spector_gpu.kernels.spread.spread_pool`; the CPU code path reads the neighbours
    from the link tables natively first: :func:`spread_host`)."""
    if pool.host_reads and not pool.dense:
        got: torch.Tensor = spread_pool(
            pool.ordinals, nbr, weight, base, hops=cfg.hops, decay=cfg.decay
        )
        return got
    act: torch.Tensor = spread_max(
        base, pool.positions(nbr), weight, hops=cfg.hops, decay=cfg.decay
    )
    return act


class DenseGraph:
    """Every memory's neighbours as one (N, E) table, for pools that cover the store (the
    dense layout, a few thousand memories at most): expansion works neighbour slot by slot
    over (n_queries, N) blocks; spreading gathers the (n_queries, N, E) block once per hop."""

    def __init__(self, nbr: torch.Tensor, weight: torch.Tensor) -> None:
        self.nbr = nbr  # int64 (N, E), -1 for none
        self.weight = weight  # float64 (N, E)

    def expand(self, valid: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """bool (m, N): the members plus every allowed neighbour of a member."""
        m, n = valid.shape
        reached = torch.zeros((m, n + 1), dtype=torch.int32, device=valid.device)
        members = valid.to(torch.int32)
        for e in range(self.nbr.shape[1]):
            j = self.nbr[:, e]
            ok = (j >= 0) & allowed[j.clamp(min=0)]
            reached.index_add_(1, torch.where(ok, j, n), members)  # column n: no neighbour
        return valid | (reached[:, :n] > 0)

    def spread(
        self, valid: torch.Tensor, base: torch.Tensor, cfg: AssociationConfig, native: bool
    ) -> torch.Tensor:
        """float64 (m, N) max-product activation (:func:`~spector_gpu.kernels.spread.spread_max`
        with the same products in the same order): with ``native`` (the plan's CPU kernels)
        one native pass per row (``spread_dense``), else by :func:`spread_gathered`."""
        if native:
            got: torch.Tensor | None = spread_dense(
                self.nbr, self.weight, valid, base, hops=cfg.hops, decay=cfg.decay
            )
            if got is not None:
                return got
        m, n = base.shape
        e = self.nbr.shape[1]
        jj = self.nbr.clamp(min=0).reshape(-1)  # (N·E): neighbour e of memory i at i·E + e

        def take(x: torch.Tensor) -> torch.Tensor:
            return x.index_select(1, jj).view(m, n, e)

        return spread_gathered(valid, base, self.nbr >= 0, self.weight, take, cfg.hops, cfg.decay)


def spread_gathered(
    valid: torch.Tensor,
    base: torch.Tensor,
    has: torch.Tensor,
    weight: torch.Tensor,
    take: Callable[[torch.Tensor], torch.Tensor],
    hops: int,
    decay: float,
) -> torch.Tensor:
    """float64 (m, N) max-product spreading over pools that cover their stores: ``take(x)``
    gives (m, N, E) — each member's neighbours' values of the (m, N) ``x`` — ``has`` (bool) and
    ``weight`` (float64) broadcast to (m, N, E): which neighbour slots exist and their weights.
    One gather per hop; the max over the slots is exact in any order."""
    act = torch.zeros_like(base)
    if has.shape[-1] == 0:
        return act
    live = (valid[:, :, None] & has) & take(valid)
    zero = torch.zeros((), dtype=base.dtype, device=base.device)
    src = base
    for hop in range(max(int(hops), 1)):
        prod = (weight * take(src)) * (decay**hop)
        # the max over the neighbour slots, floored at 0: the running maximum from 0
        step = torch.maximum(torch.where(live, prod, zero).amax(dim=2), zero)
        act = torch.maximum(act, step)
        src = step
    return act


def dense_graph(
    tables: LinkTables, n: int, device: torch.device, cfg: AssociationConfig
) -> DenseGraph:
    """The :class:`DenseGraph` of the ``n`` memories (every row of the link tables)."""
    everyone = torch.arange(n, device=device)[None, :]
    full = Pool(everyone, torch.ones_like(everyone, dtype=torch.bool), True)
    nbr, weight = neighbours(tables, full, cfg)
    return DenseGraph(nbr[0].contiguous(), weight[0].contiguous())
