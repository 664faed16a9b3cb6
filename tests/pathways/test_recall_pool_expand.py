"""The native pool expansion of a few CPU queries (``relays.association.expanded_host``) must
be the pool the tensor route forms — the union of the relays' proposals, then every allowed
neighbour of a member (same-session chain and tag edges) — member for member, with or without
a gate; and it must step aside where that route would form the dense layout. Spreading read
from the link tables (``spread_host``) must give the gathered route's activations, bit for
bit."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
import torch
from rig import Rig
from spector_gpu.kernels.native import native
from spector_gpu.kernels.spread import spread_max

from spector_gpu import RecallOptions
from spector_gpu.pathways.recall import RecallPathway
from spector_gpu.pathways.recall.pool import PAD, expand, union
from spector_gpu.pathways.recall.relays.association import (
    association_score,
    expanded_host,
    neighbours,
    spread_host,
)

pytestmark = pytest.mark.skipif(native is None, reason="the native kernels are not built")

CONFIG = {"store": {"durability": "none"}, "association": {"tag_weight": 0.5}}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rig, RecallPathway]]:
    rng = random.Random(11)
    rig = Rig.open(tmp_path_factory.mktemp("expand") / "s", CONFIG)
    items = [
        {
            "text": f"note {i} about {rng.choice(['kites', 'boats', 'maps'])}",
            "session_id": rng.randint(0, 60),  # sessions interleave: chains jump around
            "speaker": ("Ann", "Bo")[i % 2],
            "tags": rng.sample(["red", "blue", "green", "gold"], rng.randint(0, 2)),
        }
        for i in range(2500)
    ]
    ids = rig.remember_batch(items)
    for mid in rng.sample(ids, 40):
        rig.remember.forget(mid)
    pathway = RecallPathway(rig.cortex, None)
    pathway.recall_batch(["kites"], RecallOptions(mode="observe"))  # tables synced
    yield rig, pathway
    rig.close()


def _parts(rng: np.random.Generator, m: int, n: int) -> list[torch.Tensor]:
    parts = []
    for width in (0, 7, 40, 25):  # an empty relay, then proposals with padding
        x = np.full((m, width), -1, dtype=np.int64)
        for row in x:
            k = int(rng.integers(0, width + 1))
            row[:k] = rng.choice(n, k, replace=False)
        parts.append(torch.from_numpy(x))
    return parts


@pytest.mark.parametrize("seed", range(12))
def test_the_native_expansion_is_the_tensor_routes_pool(
    store: tuple[Rig, RecallPathway], seed: int
) -> None:
    rig, pathway = store
    c, tables = rig.cortex, pathway._links
    assert tables.host_arrays()[1] is not None  # tag edges exist
    rng = np.random.default_rng(seed)
    allowed = np.ones(c.n, dtype=bool)
    allowed[rng.choice(c.n, 300, replace=False)] = False
    for gate in (None, allowed):
        for m in (1, 2, 4, 33):
            parts = _parts(rng, m, c.n)
            if gate is not None:  # relays only propose allowed memories
                parts = [torch.where(torch.from_numpy(gate)[p.clamp(min=0)], p, -1) for p in parts]
            got = expanded_host(tables, parts, gate, c.n)
            assert got is not None and got.host_reads and not got.dense
            base = union(parts, n_store=c.n, trim=True)
            gate_t = torch.ones(c.n, dtype=torch.bool) if gate is None else torch.from_numpy(gate)
            nbr, _ = neighbours(tables, base, c.config.association)
            want = expand(base, nbr, gate_t, n_store=c.n, trim=True)
            assert not want.dense
            assert torch.equal(got.ordinals, want.ordinals)
            assert torch.equal(got.valid, want.valid)
            assert bool((got.ordinals[got.valid] < c.n).all()) and not (got.ordinals == -1).any()
            assert bool((got.ordinals[~got.valid] == PAD).all())


def test_a_pool_near_the_store_size_takes_the_tensor_route(
    store: tuple[Rig, RecallPathway],
) -> None:
    rig, pathway = store
    rng = np.random.default_rng(0)
    wide = [torch.from_numpy(rng.choice(rig.cortex.n, (1, 600), replace=False))]
    assert expanded_host(pathway._links, wide, None, rig.cortex.n) is None  # 600 x 7 > 2,500


@pytest.mark.parametrize("seed", range(8))
def test_spreading_from_the_tables_equals_spreading_over_gathered_neighbours(
    store: tuple[Rig, RecallPathway], seed: int
) -> None:
    # The association relay on a sparse CPU pool reads each member's neighbours from the
    # link tables natively; the tensor route gathers (n, W, E) neighbour arrays first. The
    # activations must be the same bits, over several hops, with zeros and ties in the base.
    rig, pathway = store
    c, tables = rig.cortex, pathway._links
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 4))
    pool = expanded_host(tables, _parts(rng, m, c.n), None, c.n)
    assert pool is not None
    base = torch.from_numpy(rng.choice([0.0, 0.25, 1.0, 1.7, 2.0], pool.ordinals.shape))
    base = torch.where(pool.valid, base, 0.0).to(torch.float64)
    for hops, decay in ((1, 0.5), (2, 0.5), (3, 0.9)):
        cfg = replace(c.config.association, hops=hops, decay=decay)
        got = spread_host(tables, pool, base, cfg)
        assert got is not None
        nbr, weight = neighbours(tables, pool, cfg)
        want = association_score(pool, nbr, weight, base, cfg)
        torch_only = spread_max(base, pool.positions(nbr), weight, hops=hops, decay=decay)
        assert got.numpy().view(np.uint64).tolist() == want.numpy().view(np.uint64).tolist()
        assert got.numpy().view(np.uint64).tolist() == torch_only.numpy().view(np.uint64).tolist()
    negative = replace(c.config.association, temporal_weight=-1.0)
    assert spread_host(tables, pool, base, negative) is None  # left to the tensors
