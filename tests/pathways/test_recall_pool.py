"""The sparse pool's union: a few rows on the CPU are formed by numpy, row by row; more rows,
and the GPU code path, by torch's sort and compaction. Both give the same pool."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.pathways.recall import pool
from spector_gpu.pathways.recall.pool import PAD, _sparse_host, union


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 6), st.integers(0, 60), st.integers(1, 400))
def test_the_host_union_equals_the_torch_union(seed: int, n: int, width: int, n_store: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(-1, n_store, (n, width))  # -1: padding; repeats within and across rows
    saved = pool._HOST_ROWS
    pool._HOST_ROWS = 0  # torch's sort and compaction for any number of rows
    try:
        torch_pool = pool._sparse(torch.from_numpy(x), trim=True)
    finally:
        pool._HOST_ROWS = saved
    host = _sparse_host(x)
    np.testing.assert_array_equal(host.ordinals.numpy(), torch_pool.ordinals.numpy())
    np.testing.assert_array_equal(host.valid.numpy(), torch_pool.valid.numpy())
    assert not host.dense and host.host_reads
    for row, got in zip(x, host.ordinals.numpy()):
        want = np.unique(row[row >= 0])
        np.testing.assert_array_equal(got[got < PAD], want)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 6), st.integers(0, 60), st.booleans())
def test_one_relays_proposals_are_their_own_union(
    seed: int, n: int, width: int, trim: bool
) -> None:
    # One part with columns (distinct ordinals per row, as every relay proposes them) is
    # sorted, not merged: the same pool as the general union, plus the order that maps each
    # member back to its column in the relay's row.
    rng = np.random.default_rng(seed)
    x = np.full((n, width), -1, dtype=np.int64)
    for row in x:
        k = int(rng.integers(0, width + 1))
        row[rng.permutation(width)[:k]] = rng.choice(10_000, k, replace=False)
    empty = torch.zeros((n, 0), dtype=torch.int64)
    got = union([empty, torch.from_numpy(x)], n_store=10**9, trim=trim)
    want = pool._sparse(torch.from_numpy(x), trim=trim)
    assert (got.order is not None or width == 0) and want.order is None
    assert torch.equal(got.ordinals, want.ordinals) and torch.equal(got.valid, want.valid)
    if got.order is not None:
        back = torch.gather(torch.from_numpy(x), 1, got.order)
        assert torch.equal(torch.where(got.valid, back, PAD), got.ordinals)
    two = union([torch.from_numpy(x), torch.from_numpy(x)], n_store=10**9, trim=True)
    assert two.order is None  # two parts are merged (and deduplicated) as before
