"""The fused Triton dense kernels (kernels/fused.py) return exactly the reference top-k.

On the CPU they run through Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET=1
when no GPU is visible); on a GPU the ``cuda`` tests compare them with the torch paths.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from spector_gpu.kernels.dense import DenseIndex, search_reference
from spector_gpu.kernels.fused import search_packed
from spector_gpu.kernels.quant import l2_normalize, quantize_int8
from spector_gpu.kernels.topk import pack_keys_torch, unpack_keys_torch

from spector_gpu.errors import ValidationError

pytest.importorskip("triton", reason="the triton extra is not installed")
on_cpu = pytest.mark.skipif(
    torch.cuda.is_available(), reason="interpreter checks run where no GPU is"
)
has_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
SMALL = (16, 32, 4, 2)  # BLOCK_N, BLOCK_K, warps, stages: quick under the interpreter


def _corpus(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = l2_normalize(rng.standard_normal((n, d), dtype=np.float32))
    x[n // 5 : n // 2] = x[3]  # a long run of identical rows: ties across blocks and tiles
    x[n // 2 : n // 2 + 7] = 0.0  # zero vectors (scale 0)
    q, s = quantize_int8(x)
    return x, q, s


def _index(q: np.ndarray, s: np.ndarray, *, tile_maxima: int | None) -> DenseIndex:
    index = DenseIndex(q.shape[1], device="cpu")
    index._init_layout(cuda_layout=True)
    index._fused, index._fused_config, index._block_rows = True, SMALL, 16
    index._fused_tile_maxima = tile_maxima
    index.add(q, s)
    return index


@on_cpu
@pytest.mark.parametrize("gate", ["none", "dense", "sparse"])
@pytest.mark.parametrize("k", [1, 10, 40])
def test_fused_search_equals_reference(gate: str, k: int) -> None:
    x, q, s = _corpus(420, 40, seed=k)
    rng = np.random.default_rng(7)
    queries = l2_normalize(rng.standard_normal((11, 40), dtype=np.float32))
    queries[2] = x[3]  # a query whose best rows are all tied
    allowed = {"none": None, "dense": rng.random(420) < 0.6, "sparse": rng.random(420) < 0.05}[gate]
    index = _index(q, s, tile_maxima=11 * 9)  # 9 blocks of 16 rows per tile: several tiles
    got_s, got_i = index.search(queries, k, allowed=allowed)
    ref_s, ref_i = search_reference(q, s, queries, k, allowed)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(got_s, ref_s)


@on_cpu
def test_fused_search_pads_when_fewer_rows_than_k() -> None:
    _, q, s = _corpus(20, 24, seed=3)
    queries = l2_normalize(np.random.default_rng(2).standard_normal((3, 24), dtype=np.float32))
    index = _index(q, s, tile_maxima=None)
    got_s, got_i = index.search(queries, 25)
    ref_s, ref_i = search_reference(q, s, queries, 25)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(got_s, ref_s)
    assert (got_i[:, 20:] == -1).all() and np.isneginf(got_s[:, 20:]).all()


def test_block_must_suit_the_int8_mma() -> None:
    codes = torch.zeros((4, 16), dtype=torch.int8)
    for block in (8, 48):
        with pytest.raises(ValidationError, match="power of two >= 16"):
            search_packed(
                codes, torch.ones(4), torch.zeros(4), torch.arange(4), codes[:2], 1, block=block
            )


@pytest.mark.cuda
@has_cuda
@pytest.mark.parametrize("gate", ["none", "dense", "sparse"])
def test_cuda_fused_equals_torch_path_and_reference(gate: str) -> None:
    x, q, s = _corpus(40_000, 384, seed=1)
    rng = np.random.default_rng(5)
    queries = l2_normalize(rng.standard_normal((300, 384), dtype=np.float32))
    queries[:5] = x[3]
    allowed = {
        "none": None,
        "dense": rng.random(40_000) < 0.6,
        "sparse": rng.random(40_000) < 0.05,
    }[gate]
    fast = DenseIndex(384, device="cuda")
    fast.add(q, s)
    slow = DenseIndex(384, device="cuda")
    slow._fused = False
    slow.add(q, s)
    ref_s, ref_i = search_reference(q, s, queries, 10, allowed)
    for index in (fast, slow):
        got_s, got_i = index.search(queries, 10, allowed=allowed)
        np.testing.assert_array_equal(got_i, ref_i)
        np.testing.assert_array_equal(got_s, ref_s)
    assert fast._fused is True  # the Triton path ran (it falls back with a warning otherwise)


def test_packed_keys_order_matches_reference_on_ties() -> None:
    values = torch.tensor([[1.0, 2.0, 2.0, float("-inf"), -0.0, 0.0]])
    ids = torch.arange(6)[None, :]
    top = torch.topk(pack_keys_torch(values, ids), 4, dim=1).values
    keys, slots = unpack_keys_torch(top)
    assert slots.tolist() == [[1, 2, 0, 4]] and keys.tolist() == [[2.0, 2.0, 1.0, 0.0]]
