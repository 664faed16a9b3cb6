"""Spreading activation over an association graph, batched as sparse matrix products.

Given a weighted directed graph as a CSR adjacency ``A`` (N × N; ``A[u, v]`` is the weight of the
edge u → v, so activation flows from u to v) and seed activations ``S`` (n queries × N), the
activation after up to ``hops`` steps is::

    R = [S if include_seed] + Σ_{h=1..hops} decay**h · (S · A**h)

computed hop by hop (``X_h = X_{h-1} · A``), never forming ``A**h``. All arithmetic is float32.
``prune_below > 0`` drops entries of ``X_h`` whose magnitude is below it after each hop, which
keeps frontiers sparse on large graphs (at the cost of exactness); the default 0 prunes nothing.
This is the classic spreading-activation model (Collins & Loftus 1975; Anderson's ACT-R) with a
geometric decay per hop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from spector_gpu.errors import ValidationError

__all__ = ["csr_adjacency", "seed_matrix", "spread_activation", "spread_activation_reference"]


def csr_adjacency(
    indptr: npt.ArrayLike, indices: npt.ArrayLike, weights: npt.ArrayLike, n_nodes: int
) -> sp.csr_array:
    """Validate CSR arrays and wrap them as a float32 ``scipy.sparse.csr_array`` (N × N).

    Args:
        indptr: int64 (N+1,), non-decreasing, ``indptr[0] == 0``.
        indices: int32/int64 (E,) destination nodes in ``[0, N)``.
        weights: float32 (E,) finite edge weights.
        n_nodes: N.

    Raises:
        ValidationError: naming the array and rule that failed.
    """
    ptr = np.asarray(indptr, dtype=np.int64)
    idx = np.asarray(indices)
    w = np.asarray(weights, dtype=np.float32)
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, (int, np.integer)) or n_nodes < 0:
        raise ValidationError(f"n_nodes must be a non-negative int, got {n_nodes!r}")
    if ptr.shape != (n_nodes + 1,) or ptr[0] != 0 or np.any(np.diff(ptr) < 0):
        raise ValidationError(
            f"indptr must be non-decreasing int (n_nodes+1={n_nodes + 1},) from 0"
        )
    edges = int(ptr[-1])
    if idx.shape != (edges,) or w.shape != (edges,) or not np.issubdtype(idx.dtype, np.integer):
        raise ValidationError(
            f"indices (int) and weights must both have indptr[-1]={edges} entries; "
            f"got {idx.dtype} {idx.shape} and {w.shape}"
        )
    if edges and (idx.min() < 0 or idx.max() >= n_nodes):
        raise ValidationError(f"indices must lie in [0, {n_nodes})")
    if not np.isfinite(w).all():
        raise ValidationError("weights contain NaN or inf")
    return sp.csr_array((w, idx.astype(np.int64), ptr), shape=(n_nodes, n_nodes))


def seed_matrix(
    query_idx: npt.ArrayLike,
    node: npt.ArrayLike,
    value: npt.ArrayLike,
    *,
    n_queries: int,
    n_nodes: int,
) -> sp.csr_array:
    """Seed activations from (query, node, value) triples; duplicates are summed. float32 (n, N)."""
    qi = np.asarray(query_idx, dtype=np.int64)
    nd = np.asarray(node, dtype=np.int64)
    val = np.asarray(value, dtype=np.float32)
    if not (qi.shape == nd.shape == val.shape) or qi.ndim != 1:
        raise ValidationError(
            f"seed triples must be 1-D of one length; got {qi.shape}, {nd.shape}, {val.shape}"
        )
    if qi.size and (qi.min() < 0 or qi.max() >= n_queries):
        raise ValidationError(f"seed query_idx must lie in [0, n_queries={n_queries})")
    if nd.size and (nd.min() < 0 or nd.max() >= n_nodes):
        raise ValidationError(f"seed node must lie in [0, n_nodes={n_nodes})")
    if not np.isfinite(val).all():
        raise ValidationError("seed values contain NaN or inf")
    out = sp.coo_array((val, (qi, nd)), shape=(n_queries, n_nodes)).tocsr()
    out.sum_duplicates()
    return out


def _as_csr(matrix: Any, *, name: str) -> sp.csr_array:
    if not sp.issparse(matrix):
        raise ValidationError(
            f"{name} must be a scipy sparse matrix or array, got {type(matrix).__name__}"
        )
    out = sp.csr_array(matrix, dtype=np.float32)
    if not np.isfinite(out.data).all():
        raise ValidationError(f"{name} contains NaN or inf")
    return out


def spread_activation(
    adjacency: Any,
    seeds: Any,
    *,
    hops: int = 2,
    decay: float = 0.5,
    include_seed: bool = False,
    prune_below: float = 0.0,
    dense: bool = False,
) -> sp.csr_array | np.ndarray:
    """Spread seed activation over the graph (see the module docstring for the formula).

    Args:
        adjacency: scipy sparse (N × N), or the tuple ``(indptr, indices, weights, n_nodes)``
            (see :func:`csr_adjacency`).
        seeds: scipy sparse (n × N), or triples ``(query_idx, node, value[, n_queries])``
            (see :func:`seed_matrix`; without ``n_queries``, n = max(query_idx) + 1).
        hops: number of hops (≥ 0).
        decay: per-hop factor, finite and ≥ 0 (hop h is weighted ``decay**h``).
        include_seed: add ``S`` itself (weight 1) to the result.
        prune_below: drop frontier entries with ``|x| < prune_below`` after each hop (0 = exact).
        dense: return a float32 ``ndarray`` (n, N) instead of a ``csr_array``.

    Returns:
        float32 (n, N) activations, sparse (``csr_array``) or dense.
    """
    if isinstance(adjacency, tuple) and len(adjacency) == 4:
        adjacency = csr_adjacency(*adjacency)
    adj = _as_csr(adjacency, name="adjacency")
    if isinstance(seeds, tuple) and len(seeds) in (3, 4):
        qi = np.asarray(seeds[0], dtype=np.int64)
        n_queries = int(seeds[3]) if len(seeds) == 4 else int(qi.max(initial=-1)) + 1
        seeds = seed_matrix(qi, seeds[1], seeds[2], n_queries=n_queries, n_nodes=adj.shape[0])
    seed = _as_csr(seeds, name="seeds")
    if adj.shape[0] != adj.shape[1] or seed.shape[1] != adj.shape[0]:
        raise ValidationError(
            f"adjacency must be (N, N) and seeds (n, N); got {adj.shape} and {seed.shape}"
        )
    if isinstance(hops, bool) or not isinstance(hops, (int, np.integer)) or hops < 0:
        raise ValidationError(f"hops must be a non-negative int, got {hops!r}")
    if not np.isfinite(decay) or decay < 0 or not np.isfinite(prune_below) or prune_below < 0:
        raise ValidationError(
            f"decay and prune_below must be finite and ≥ 0; got {decay!r}, {prune_below!r}"
        )
    total = seed.copy() if include_seed else sp.csr_array(seed.shape, dtype=np.float32)
    frontier = seed
    weight = np.float32(1.0)
    for _ in range(int(hops)):
        frontier = sp.csr_array(frontier @ adj, dtype=np.float32)
        if prune_below > 0:
            frontier.data[np.abs(frontier.data) < prune_below] = 0
            frontier.eliminate_zeros()
        weight = np.float32(weight * np.float32(decay))
        total = sp.csr_array(total + frontier * weight, dtype=np.float32)
        if frontier.nnz == 0:
            break
    total.sum_duplicates()
    return total.toarray() if dense else total


def spread_activation_reference(
    adjacency: npt.ArrayLike,
    seeds: npt.ArrayLike,
    *,
    hops: int = 2,
    decay: float = 0.5,
    include_seed: bool = False,
) -> np.ndarray:
    """Dense numpy twin of :func:`spread_activation` (float64 internally): float32 (n, N)."""
    adj = np.asarray(adjacency, dtype=np.float64)
    seed = np.asarray(seeds, dtype=np.float64)
    total = seed.copy() if include_seed else np.zeros_like(seed)
    frontier = seed
    for hop in range(1, hops + 1):
        frontier = frontier @ adj
        total += decay**hop * frontier
    return total.astype(np.float32)
