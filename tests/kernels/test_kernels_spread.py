"""Max-product spreading over pool rows: hand-checked cases and the per-pool numpy twin."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spector_gpu.kernels.native import native
from spector_gpu.kernels.spread import (
    member_positions,
    spread_dense,
    spread_links,
    spread_max,
    spread_max_reference,
)

from spector_gpu.errors import ValidationError

PAD = 1 << 62


def test_chain_by_hand() -> None:
    # pool [3, 5, 9]: 3 -> 5 (w 0.5), 5 -> 9 (w 2.0), 9 -> 3 (w 1.0); base [1, 0, 0]
    pool = torch.tensor([[3, 5, 9]])
    nbr = torch.tensor([[[5], [9], [3]]])
    w = torch.tensor([[[0.5], [2.0], [1.0]]], dtype=torch.float64)
    base = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    pos = member_positions(pool, nbr)
    assert pos.tolist() == [[[1], [2], [0]]]
    # one hop: a member takes max_j w_ij * base_j of its neighbours: only 9 (via 9 -> 3)
    one = spread_max(base, pos, w, hops=1, decay=0.5)
    assert one.tolist() == [[0.0, 0.0, 1.0]]
    # two hops: 5 reaches 9's activation 1.0 at weight 2.0 and decay 0.5
    two = spread_max(base, pos, w, hops=2, decay=0.5)
    assert two.tolist() == [[0.0, 1.0, 1.0]]


def test_neighbours_outside_the_pool_and_padding_are_ignored() -> None:
    pool = torch.tensor([[2, 4, PAD]])
    nbr = torch.tensor([[[4, 7], [-1, 2], [2, 4]]])  # 7 is no member; the PAD row is padding
    pos = member_positions(pool, nbr)
    assert pos.tolist() == [[[1, -1], [-1, 0], [0, 1]]]
    base = torch.tensor([[0.25, 0.5, 0.0]], dtype=torch.float64)
    act = spread_max(base, pos, torch.ones(1, 3, 2, dtype=torch.float64), hops=1, decay=1.0)
    assert act[0, :2].tolist() == [0.5, 0.25]


def test_negative_products_floor_at_zero_and_shapes_are_checked() -> None:
    pos = torch.tensor([[[1], [0]]])
    base = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    act = spread_max(base, pos, torch.full((1, 2, 1), -1.0, dtype=torch.float64), hops=1, decay=1)
    assert act.tolist() == [[0.0, 0.0]]
    with pytest.raises(ValidationError, match="pos must be"):
        spread_max(base, pos[:, :1], torch.ones(1), hops=1, decay=1.0)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 30),
    st.integers(0, 6),
    st.integers(1, 3),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_equals_the_numpy_twin(seed: int, size: int, degree: int, hops: int, decay: float) -> None:
    rng = np.random.default_rng(seed)
    pool_np = np.unique(rng.integers(0, 60, size))
    m = len(pool_np)
    nbr_np = rng.integers(-1, 60, (m, degree))
    w_np = rng.choice([0.25, 0.5, 1.0, 0.6], (m, degree))
    base_np = rng.random(m)
    pool = torch.from_numpy(pool_np)[None, :]
    pos = member_positions(pool, torch.from_numpy(nbr_np)[None])
    got = spread_max(
        torch.from_numpy(base_np)[None], pos, torch.from_numpy(w_np)[None], hops=hops, decay=decay
    )[0].numpy()
    src, slot = np.nonzero(pos[0].numpy() >= 0)
    want = spread_max_reference(
        m,
        base_np,
        src,
        pos[0].numpy()[src, slot],
        w_np[src, slot],
        hops=hops,
        decay=decay,
    )
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 5), st.integers(0, 40), st.integers(0, 5))
def test_member_positions_by_table_equal_a_binary_search(
    seed: int, rows: int, width: int, degree: int
) -> None:
    """The CPU position table and a per-row binary search agree, for rows of different
    lengths padded above every ordinal, neighbours outside the pool and ``-1``."""
    rng = np.random.default_rng(seed)
    pool = np.full((rows, width), PAD, np.int64)
    for i in range(rows):
        members = np.unique(rng.integers(0, 90, rng.integers(0, width + 1)))
        pool[i, : len(members)] = members
    nbr = rng.integers(-1, 100, (rows, width, degree))
    want = np.full(nbr.shape, -1, np.int64)
    for i in range(rows):
        pos = np.searchsorted(pool[i], nbr[i]).clip(max=max(width - 1, 0))
        hit = (nbr[i] >= 0) & (pool[i][pos] == nbr[i]) if width else np.zeros_like(pos, bool)
        want[i] = np.where(hit, pos, -1)
    got = member_positions(torch.from_numpy(pool), torch.from_numpy(nbr))
    np.testing.assert_array_equal(got.numpy(), want)
    searched = member_positions(torch.from_numpy(pool), torch.from_numpy(nbr), host_reads=False)
    np.testing.assert_array_equal(searched.numpy(), want)
    # the table is left clean: a second call with other rows gives its own answer
    again = member_positions(
        torch.from_numpy(pool[::-1].copy()), torch.from_numpy(nbr[::-1].copy())
    )
    np.testing.assert_array_equal(again.numpy(), want[::-1])


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 4),
    st.integers(0, 40),
    st.integers(0, 6),
    st.integers(0, 3),
    st.sampled_from([0.0, 0.5, 1.0, 0.3]),
)
def test_pool_spreading_equals_the_numpy_twin_row_by_row(
    seed: int, rows: int, width: int, degree: int, hops: int, decay: float
) -> None:
    """spread_pool (positions through the thread's table, then the torch hops) against the
    per-pool numpy twin on each row, bit for bit: rows of different lengths padded above
    every ordinal, neighbours outside the pool, -1 slots, repeated neighbours, zero weights
    (the table is left clean: each call finds its own row's members)."""
    from spector_gpu.kernels.spread import spread_pool

    rng = np.random.default_rng(seed)
    pool = np.full((rows, width), PAD, np.int64)
    for i in range(rows):
        members = np.unique(rng.integers(0, 90, rng.integers(0, width + 1)))
        pool[i, : len(members)] = members
    nbr = rng.integers(-1, 100, (rows, width, degree))
    weight = rng.choice([0.25, 0.5, 1.0, 0.6, 0.0], (rows, width, degree))
    base = rng.random((rows, width)) * (rng.random((rows, width)) < 0.8)
    p, n, w, b = (torch.from_numpy(a) for a in (pool, nbr, weight, base))
    got = spread_pool(p, n, w, b, hops=hops, decay=decay)
    pos = member_positions(p, n).numpy()
    for i in range(rows):
        src, slot = np.nonzero(pos[i] >= 0)
        want = spread_max_reference(
            width, base[i], src, pos[i][src, slot], weight[i][src, slot], hops=hops, decay=decay
        )
        np.testing.assert_array_equal(got[i].numpy().view(np.int64), want.view(np.int64))


def _gathered(
    nbr: torch.Tensor, weight: torch.Tensor, valid: torch.Tensor, base: torch.Tensor, hops: int
) -> torch.Tensor:
    """The dense layout's torch steps (association.DenseGraph without the native pass)."""
    from spector_gpu.pathways.recall.relays.association import spread_gathered

    m, n = base.shape
    e = nbr.shape[1]
    jj = nbr.clamp(min=0).reshape(-1)

    def take(x: torch.Tensor) -> torch.Tensor:
        return x.index_select(1, jj).view(m, n, e)

    return spread_gathered(valid, base, nbr >= 0, weight, take, hops, 0.5)


@pytest.mark.skipif(native is None, reason="native kernels not built")
@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 60),
    st.integers(0, 5),
    st.integers(1, 6),
    st.integers(0, 3),
)
def test_native_dense_spreading_equals_the_torch_steps(
    seed: int, n: int, e: int, m: int, hops: int
) -> None:
    """Every row the whole store, members by a mask: the native pass gives the gathered torch
    steps' bits, whatever non-members hold (-inf, NaN, large values) and absent slots weigh."""
    rng = np.random.default_rng(seed)
    nbr = torch.from_numpy(rng.integers(-1, n, (n, e)))
    weight = torch.from_numpy(rng.choice([0.0, 0.25, 0.5, 1.0, 0.7], (n, e)))
    weight = torch.where(nbr >= 0, weight, float("nan"))  # never read
    valid = torch.from_numpy(rng.random((m, n)) < 0.7)
    base = torch.from_numpy(rng.choice([0.0, 0.1, 0.5, 1.0], (m, n)))
    other = rng.choice([-np.inf, np.nan, 0.9, 2.0], (m, n))  # non-members' values must not leak
    base = torch.where(valid, base, torch.from_numpy(other))
    got = spread_dense(nbr, weight, valid, base, hops=hops, decay=0.5)
    assert got is not None
    want = _gathered(nbr, torch.where(nbr >= 0, weight, 0.0), valid, base, hops)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_native_dense_spreading_declines_what_torch_must_decide() -> None:
    nbr = torch.tensor([[1], [0]])
    weight = torch.ones(2, 1, dtype=torch.float64)
    valid = torch.ones(1, 2, dtype=torch.bool)
    ok = torch.tensor([[0.5, 1.0]], dtype=torch.float64)
    assert spread_dense(nbr, weight, valid, ok, hops=1, decay=0.5) is not None
    for base in (torch.tensor([[-0.0, 1.0]]), torch.tensor([[float("nan"), 1.0]])):
        assert spread_dense(nbr, weight, valid, base.double(), hops=1, decay=0.5) is None
    assert spread_dense(nbr, -weight, valid, ok, hops=1, decay=0.5) is None
    assert spread_dense(nbr, weight, valid, ok, hops=1, decay=float("inf")) is None
    with pytest.raises(ValueError, match="outside"):
        spread_dense(torch.tensor([[2], [0]]), weight, valid, ok, hops=1, decay=0.5)


@pytest.mark.skipif(native is None, reason="native kernels not built")
@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 4),
    st.integers(0, 30),
    st.integers(0, 4),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_native_link_table_spreading_equals_the_torch_steps(
    seed: int, rows: int, width: int, chain_w: int, extra_w: int, hops: int
) -> None:
    """spread_links (each member's slots read from the link tables: its chain row, then its
    extra-edge row) against the same slots gathered into (n, W, E) arrays and spread by torch,
    bit for bit: neighbours outside the pool, -1 slots, memories without extra edges, and
    padding whose base holds values that must not leak (NaN, -inf, negative)."""
    from spector_gpu.pathways.recall.tables import HostLinks

    rng = np.random.default_rng(seed)
    n = 90
    chain = rng.integers(-1, n, (n, chain_w))
    row_of = rng.integers(-1, 6, n)
    extra = rng.integers(-1, n, (6, extra_w))
    weights = rng.choice([0.0, 0.25, 0.5, 1.0, 0.7], (6, extra_w))
    links = HostLinks(chain, row_of, extra, weights, extra_w) if extra_w else None
    links = links or HostLinks(chain, None, None, None, 0)
    pool = np.full((rows, width), PAD, np.int64)
    for i in range(rows):
        members = np.unique(rng.integers(0, n, rng.integers(0, width + 1)))
        pool[i, : len(members)] = members
    member = pool < PAD
    base = np.where(member, rng.choice([0.0, 0.1, 0.5, 1.0], pool.shape), np.nan)
    base[~member] = rng.choice([np.nan, -np.inf, -2.0], int((~member).sum()))
    # the gathered route: chain slots at the temporal weight, then the extra row's slots
    node = np.where(member, pool, 0)
    nbr = np.where(member[..., None], chain[node], -1)
    w = np.full(nbr.shape, 0.6)
    if extra_w:
        r = row_of[node]
        has = member & (r >= 0)
        nbr = np.concatenate([nbr, np.where(has[..., None], extra[r], -1)], axis=2)
        w = np.concatenate([w, np.where(has[..., None], weights[r], 0.0)], axis=2)
    p, b = torch.from_numpy(pool), torch.from_numpy(base)
    got = spread_links(p, links, 0.6, b, hops=hops, decay=0.5)
    assert got is not None
    pos = member_positions(p, torch.from_numpy(nbr))
    want = spread_max(b, pos, torch.from_numpy(w), hops=hops, decay=0.5)
    np.testing.assert_array_equal(got.numpy().view(np.int64), want.numpy().view(np.int64))
    if extra_w and bool((pos[..., chain_w:] >= 0).any()):  # a live extra slot
        bad = HostLinks(chain, row_of, extra, -weights - 1.0, extra_w)  # negative weights
        assert spread_links(p, bad, 0.6, b, hops=hops, decay=0.5) is None  # left to torch


@pytest.mark.skipif(native is None, reason="native kernels not built")
def test_native_graph_kernels_refuse_bad_arrays_by_name() -> None:
    """Wrong dtypes, shapes and missing companions raise ValueError naming the argument, and
    an output too small for the pool is refused rather than overrun."""
    chain = np.full((5, 2), -1, np.int64)
    chain[0] = [1, 2]
    row_of = np.full(5, -1, np.int64)
    pool, base = np.array([[0, 1, 2]], np.int64), np.zeros((1, 3))
    table, out = np.full(8, -1, np.int32), np.empty((1, 3))
    with pytest.raises(ValueError, match="extra_w"):
        native.spread_tables(pool, chain, row_of, chain, None, 0.5, base, 1, 0.5, table, out)
    with pytest.raises(ValueError, match="extra"):
        native.spread_tables(pool, chain, row_of, None, base, 0.5, base, 1, 0.5, table, out)
    with pytest.raises(ValueError, match="dtype"):
        native.spread_tables(pool, chain, None, None, None, 0.5, base.astype(np.float32), 1,
                             0.5, table, out)  # fmt: skip
    with pytest.raises(ValueError, match="pool must be"):
        native.spread_tables(pool[:, :2], chain, None, None, None, 0.5, base, 1, 0.5, table, out)
    with pytest.raises(ValueError, match="valid"):
        native.spread_dense(chain, np.ones((5, 2)), np.ones((1, 5), np.float32), np.zeros((1, 5)),
                            1, 0.5, np.empty((1, 5)))  # fmt: skip
    seeds = np.array([0], np.int64)
    with pytest.raises(ValueError, match="too small"):
        native.pool_expand(seeds, chain, None, None, None, np.empty(2, np.int64))
    with pytest.raises(ValueError, match="allowed"):
        native.pool_expand(seeds, chain, None, None, np.ones(4, bool), np.empty(3, np.int64))
    assert native.pool_expand(seeds, chain, None, None, None, np.empty(3, np.int64)) == (1, 3)
    assert native.spread_tables(pool, chain, None, None, None, 0.5, base + 1, 1, 0.5, table, out)
    assert out.tolist() == [[0.5, 0.0, 0.0]]  # ordinal 0 reaches 1 and 2 at weight 0.5
    assert (table == -1).all()  # the position table is left clean
