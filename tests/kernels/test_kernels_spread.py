"""Spreading activation: hand-checked tiny graphs and the dense numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from spector_gpu.kernels.spread import (
    csr_adjacency,
    seed_matrix,
    spread_activation,
    spread_activation_reference,
)

from spector_gpu.errors import ValidationError


def chain() -> sp.csr_array:
    # 0 -0.5-> 1 -2.0-> 2 ; 2 -1.0-> 0 (a cycle)
    return csr_adjacency([0, 1, 2, 3], [1, 2, 0], [0.5, 2.0, 1.0], 3)


def test_chain_by_hand() -> None:
    seeds = seed_matrix([0], [0], [1.0], n_queries=1, n_nodes=3)
    # hop1: node1 = 0.5 (x decay 0.5 = 0.25); hop2: node2 = 1.0 (x 0.25 = 0.25);
    # hop3: node0 = 1.0 (x 0.125)
    out = spread_activation(chain(), seeds, hops=3, decay=0.5, dense=True)
    np.testing.assert_allclose(out, [[0.125, 0.25, 0.25]])
    with_seed = spread_activation(chain(), seeds, hops=3, decay=0.5, include_seed=True, dense=True)
    np.testing.assert_allclose(with_seed, [[1.125, 0.25, 0.25]])
    assert out.dtype == np.float32


def test_hops_zero_and_sparse_output() -> None:
    seeds = seed_matrix([0, 1], [1, 2], [2.0, 3.0], n_queries=2, n_nodes=3)
    assert spread_activation(chain(), seeds, hops=0, dense=True).sum() == 0
    np.testing.assert_array_equal(
        spread_activation(chain(), seeds, hops=0, include_seed=True, dense=True),
        [[0, 2, 0], [0, 0, 3]],
    )
    out = spread_activation(chain(), seeds, hops=1, decay=1.0)
    assert isinstance(out, sp.csr_array) and out.dtype == np.float32
    np.testing.assert_allclose(out.toarray(), [[0, 0, 4.0], [3.0, 0, 0]])


def test_tuple_inputs_equal_matrix_inputs() -> None:
    raw = ([0, 1, 2, 3], [1, 2, 0], [0.5, 2.0, 1.0], 3)
    seeds = seed_matrix([0, 1], [0, 2], [1.0, 4.0], n_queries=3, n_nodes=3)
    want = spread_activation(chain(), seeds, hops=2, dense=True)
    got = spread_activation(raw, ([0, 1], [0, 2], [1.0, 4.0], 3), hops=2, dense=True)
    np.testing.assert_array_equal(got, want)
    assert spread_activation(raw, ([0, 1], [0, 2], [1.0, 4.0]), hops=2, dense=True).shape == (2, 3)


def test_duplicate_seed_triples_are_summed() -> None:
    seeds = seed_matrix([0, 0], [0, 0], [0.25, 0.75], n_queries=1, n_nodes=3)
    np.testing.assert_allclose(seeds.toarray(), [[1.0, 0, 0]])


def test_random_graph_matches_reference() -> None:
    rng = np.random.default_rng(0)
    adj = sp.random_array((60, 60), density=0.08, rng=rng, dtype=np.float32, format="csr")
    seeds = sp.random_array((7, 60), density=0.05, rng=rng, dtype=np.float32, format="csr")
    for include in (False, True):
        got = spread_activation(adj, seeds, hops=3, decay=0.7, include_seed=include, dense=True)
        ref = spread_activation_reference(
            adj.toarray(), seeds.toarray(), hops=3, decay=0.7, include_seed=include
        )
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_pruning_drops_small_entries_only() -> None:
    seeds = seed_matrix([0], [0], [1.0], n_queries=1, n_nodes=3)
    out = spread_activation(chain(), seeds, hops=2, decay=1.0, prune_below=0.6, dense=True)
    np.testing.assert_allclose(out, [[0, 0, 0]])  # hop-1 value 0.5 < 0.6 pruned, so hop 2 is empty
    kept = spread_activation(chain(), seeds, hops=2, decay=1.0, prune_below=0.4, dense=True)
    np.testing.assert_allclose(kept, [[0, 0.5, 1.0]])


@pytest.mark.parametrize(
    "args",
    [
        ([0, 1, 1], [1], [1.0], 3),  # indptr too short
        ([0, 2, 1, 2], [1, 2], [1.0, 1.0], 3),  # decreasing indptr
        ([0, 1, 1, 1], [3], [1.0], 3),  # index out of range
        ([0, 1, 1, 1], [1], [np.nan], 3),  # NaN weight
        ([0, 1, 1, 1], [1, 2], [1.0], 3),  # length mismatch
    ],
)
def test_adjacency_validation(args: tuple) -> None:
    with pytest.raises(ValidationError):
        csr_adjacency(*args)


def test_argument_validation() -> None:
    seeds = seed_matrix([0], [0], [1.0], n_queries=1, n_nodes=3)
    with pytest.raises(ValidationError, match="hops"):
        spread_activation(chain(), seeds, hops=-1)
    with pytest.raises(ValidationError, match="decay"):
        spread_activation(chain(), seeds, decay=-0.1)
    with pytest.raises(ValidationError, match="seeds"):
        spread_activation(chain(), np.zeros((1, 3)))
    with pytest.raises(ValidationError):
        spread_activation(chain(), seed_matrix([0], [0], [1.0], n_queries=1, n_nodes=4))
    with pytest.raises(ValidationError, match="node"):
        seed_matrix([0], [5], [1.0], n_queries=1, n_nodes=3)
    with pytest.raises(ValidationError, match="query_idx"):
        seed_matrix([1], [0], [1.0], n_queries=1, n_nodes=3)
