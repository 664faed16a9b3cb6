"""DenseIndex (torch CPU/CUDA, FAISS) and deterministic top-k against numpy references."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spector_gpu.kernels import dense_cuda
from spector_gpu.kernels.dense import DenseIndex, score_slots_reference, search_reference
from spector_gpu.kernels.quant import l2_normalize, quantize_int8
from spector_gpu.kernels.topk import (
    merge_blocks_torch,
    merge_topk,
    pack_keys_torch,
    topk_stable,
    topk_stable_torch,
    unpack_keys_torch,
    update_topk_torch,
)

from spector_gpu.errors import ValidationError

NEG = float("-inf")
has_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def corpus(
    n: int, d: int, seed: int = 0, dup: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = l2_normalize(rng.standard_normal((n, d)))
    if dup and n > 40:
        x[20:30] = x[7]  # exact duplicates: ties that must go to the lower slot
        x[35] = 0.0  # an all-zero vector (scale 0)
    q, s = quantize_int8(x)
    return x, q, s


def queries(n: int, d: int, x: np.ndarray, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = l2_normalize(rng.standard_normal((n, d)))
    out[0] = x[7]  # hits the duplicate block
    if n > 1:
        out[1] = 0.0  # zero query: every score ties at 0
    return out


def build(q: np.ndarray, s: np.ndarray, pieces: int = 3, **kw: object) -> DenseIndex:
    idx = DenseIndex(q.shape[1], **kw)  # type: ignore[arg-type]
    for part_q, part_s in zip(np.array_split(q, pieces), np.array_split(s, pieces)):
        idx.add(part_q, part_s)  # incremental growth
    return idx


# ---------------------------------------------------------------- torch vs reference
@pytest.mark.parametrize("tile_rows", [None, 32, 777])
@pytest.mark.parametrize("gate", ["none", "dense", "sparse", "few"])
def test_torch_cpu_equals_reference(tile_rows: int | None, gate: str) -> None:
    x, q, s = corpus(3000, 40)
    qs = queries(23, 40, x)
    rng = np.random.default_rng(5)
    allowed = {
        "none": None,
        "dense": rng.random(3000) < 0.6,
        "sparse": rng.random(3000) < 0.03,  # takes the gather path
        "few": np.isin(np.arange(3000), [3, 20, 2999]),
    }[gate]
    idx = build(q, s, device="cpu", tile_rows=tile_rows)
    got_s, got_i = idx.search(qs, 15, allowed=allowed)
    ref_s, ref_i = search_reference(q, s, qs, 15, allowed)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(got_s, ref_s)
    assert got_s.dtype == np.float32 and got_i.dtype == np.int64
    assert (got_s[:, :-1] >= got_s[:, 1:]).all()
    if allowed is not None:
        hits = got_i[got_i >= 0]
        assert allowed[hits].all()
        expect = min(15, int(allowed.sum()))
        assert ((got_i >= 0).sum(axis=1) == expect).all()  # gates before top-k: never fewer


def test_ties_go_to_lower_slot() -> None:
    x, q, s = corpus(200, 16)
    idx = build(q, s, device="cpu", tile_rows=32)
    _, ids = idx.search(x[7:8], 11)
    np.testing.assert_array_equal(ids[0], [7, *range(20, 30)])
    _, zero = idx.search(np.zeros((1, 16), np.float32), 5)  # all scores 0: lowest slots
    np.testing.assert_array_equal(zero[0], [0, 1, 2, 3, 4])


def test_padding_and_small_corpus() -> None:
    _, q, s = corpus(5, 8, dup=False)
    idx = DenseIndex(8, device="cpu")
    empty_s, empty_i = idx.search(np.ones((2, 8), np.float32), 3)
    assert (empty_i == -1).all() and np.isneginf(empty_s).all()
    idx.add(q, s)
    sc, ids = idx.search(np.ones((2, 8), np.float32), 9)
    assert sorted(ids[0, :5]) == [0, 1, 2, 3, 4] and (ids[:, 5:] == -1).all()
    assert np.isneginf(sc[:, 5:]).all() and np.isfinite(sc[:, :5]).all()
    none_allowed = np.zeros(5, bool)
    assert (idx.search(np.ones((1, 8), np.float32), 2, allowed=none_allowed)[1] == -1).all()


def test_score_slots_matches_search_and_reference() -> None:
    x, q, s = corpus(1000, 24)
    qs = queries(9, 24, x)
    idx = build(q, s, device="cpu")
    sc, ids = idx.search(qs, 10)
    np.testing.assert_array_equal(idx.score_slots(qs, ids), sc)
    slots = np.random.default_rng(3).integers(-1, 1000, size=(9, 50))
    got = idx.score_slots(qs, slots)
    np.testing.assert_array_equal(got, score_slots_reference(q, s, qs, slots))
    assert np.isneginf(got[slots == -1]).all()
    with pytest.raises(ValidationError, match="slots"):
        idx.score_slots(qs, np.full((9, 2), 1000))


def test_recall_against_exact_fp32() -> None:
    x, q, s = corpus(20000, 128, dup=False)
    qs = queries(64, 128, x)[2:]
    exact = np.argsort(-(qs @ x.T), axis=1, kind="stable")[:, :10]
    for backend in ("torch", "faiss"):
        idx = build(q, s, backend=backend)
        _, ids = idx.search(qs, 10)
        recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact)])
        assert recall >= 0.97, (backend, recall)


def test_faiss_backend_agrees_and_gates() -> None:
    x, q, s = corpus(3000, 32)
    qs = queries(20, 32, x)[2:]
    allowed = np.random.default_rng(2).random(3000) < 0.5
    fa = build(q, s, backend="faiss")
    assert fa.device == torch.device("cpu") and fa.backend == "faiss" and len(fa) == 3000
    f_s, f_i = fa.search(qs, 10, allowed=allowed)
    r_s, r_i = search_reference(q, s, qs, 10, allowed)
    assert allowed[f_i[f_i >= 0]].all()
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(f_i, r_i)])
    assert overlap >= 0.97
    np.testing.assert_allclose(f_s, r_s, atol=1e-5)
    np.testing.assert_allclose(fa.score_slots(qs, r_i), r_s, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs", [{"backend": "annoy"}, {"backend": "faiss", "device": "cuda"}, {"tile_rows": 0}]
)
def test_constructor_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DenseIndex(8, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        DenseIndex(0)


def test_input_validation() -> None:
    _, q, s = corpus(50, 8, dup=False)
    idx = build(q, s, device="cpu")
    with pytest.raises(ValidationError, match="int8"):
        idx.add(q.astype(np.int16), s)
    with pytest.raises(ValidationError, match="int8"):
        idx.add(q[:, :4], s)
    with pytest.raises(ValidationError, match="scale"):
        idx.add(q, -s)
    bad = np.ones((3, 8), np.float32)
    bad[1, 0] = np.nan
    with pytest.raises(ValidationError, match="row 1"):
        idx.search(bad, 3)
    with pytest.raises(ValidationError, match="k must"):
        idx.search(bad[:1], 0)
    with pytest.raises(ValidationError, match="allowed"):
        idx.search(bad[:1], 3, allowed=np.ones(49, bool))
    with pytest.raises(ValidationError, match="columns"):
        idx.search(np.ones((1, 9), np.float32), 3)


# ---------------------------------------------------------------- CPU vs CUDA
@pytest.mark.cuda
@has_cuda
@pytest.mark.parametrize("gate", ["none", "dense", "sparse"])
def test_cpu_and_cuda_give_identical_results(gate: str) -> None:
    x, q, s = corpus(5000, 100)  # d not a multiple of 8: exercises the CUDA padding
    qs = queries(37, 100, x)
    rng = np.random.default_rng(9)
    allowed = {"none": None, "dense": rng.random(5000) < 0.7, "sparse": rng.random(5000) < 0.02}[
        gate
    ]
    cpu = build(q, s, device="cpu")
    gpu = build(q, s, device="cuda")
    assert gpu.device.type == "cuda"
    c_s, c_i = cpu.search(qs, 20, allowed=allowed)
    g_s, g_i = gpu.search(qs, 20, allowed=allowed)
    np.testing.assert_array_equal(g_i, c_i)
    np.testing.assert_array_equal(g_s, c_s)
    np.testing.assert_array_equal(gpu.score_slots(qs, c_i), cpu.score_slots(qs, c_i))


@pytest.mark.cuda
@has_cuda
def test_cuda_tile_loop_never_syncs() -> None:
    x, q, s = corpus(3000, 64)
    qs = queries(19, 64, x)
    allowed = np.random.default_rng(1).random(3000) < 0.5
    gpu = build(q, s, device="cuda", tile_rows=512)
    xq, _ = quantize_int8(qs)
    for gate in (None, allowed, allowed & (np.arange(3000) < 200)):  # none, dense, sparse
        sparse = gate is not None and gate.sum() * 8 <= 3000
        tile, block = gpu._block_layout(19, 10, 3000)
        plan = dense_cuda.index_plan(gpu, tile, max(block, 32), gate if sparse else None, gate)
        xt = gpu._queries_t(xq)
        torch.cuda.synchronize()
        with warnings.catch_warnings():  # "prototype feature" warning on each mode change
            warnings.simplefilter("ignore", UserWarning)
            torch.cuda.set_sync_debug_mode("error")
            try:
                best = dense_cuda.blockmax_loop(gpu._codes, gpu._scales, xt, 19, 10, block, *plan)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        _, ids = unpack_keys_torch(best)
        np.testing.assert_array_equal(ids.cpu().numpy(), search_reference(q, s, qs, 10, gate)[1])


@pytest.mark.parametrize("gate", ["none", "dense", "sparse"])
def test_cuda_layout_emulated_on_cpu(gate: str) -> None:
    """The CUDA path's padding (d to a multiple of 8, rows to 32, queries to 8, column-major
    query operand) runs on the CPU too; it must not change a single id or score."""
    x, q, s = corpus(2000, 100)
    qs = queries(13, 100, x)
    rng = np.random.default_rng(4)
    allowed = {"none": None, "dense": rng.random(2000) < 0.7, "sparse": rng.random(2000) < 0.02}[
        gate
    ]
    padded = DenseIndex(100, device="cpu", tile_rows=300)
    padded._init_layout(cuda_layout=True)
    for part_q, part_s in zip(np.array_split(q, 3), np.array_split(s, 3)):
        padded.add(part_q, part_s)
    got_s, got_i = padded.search(qs, 12, allowed=allowed)
    ref_s, ref_i = search_reference(q, s, qs, 12, allowed)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(got_s, ref_s)
    np.testing.assert_array_equal(padded.score_slots(qs, ref_i), ref_s)


# ---------------------------------------------------------------- CUDA block-max path, on CPU
def blockmax_index(
    q: np.ndarray, s: np.ndarray, *, block: int | None, tile_rows: int | None, pieces: int = 3
) -> DenseIndex:
    """An index running the CUDA algorithm (padded layout + block-max top-k) on the CPU."""
    idx = DenseIndex(q.shape[1], device="cpu", tile_rows=tile_rows)
    idx._init_layout(cuda_layout=True)
    idx._block_rows = block
    for part_q, part_s in zip(np.array_split(q, pieces), np.array_split(s, pieces)):
        idx.add(part_q, part_s)
    return idx


def check_blockmax(
    idx: DenseIndex,
    q: np.ndarray,
    s: np.ndarray,
    qs: np.ndarray,
    k: int,
    allowed: np.ndarray | None,
) -> np.ndarray:
    got_s, got_i = idx.search(qs, k, allowed=allowed)
    ref_s, ref_i = search_reference(q, s, qs, k, allowed)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(got_s, ref_s)
    return got_i


def gate_of(kind: str, n: int, seed: int = 5) -> np.ndarray | None:
    rng = np.random.default_rng(seed)
    return {
        "none": None,
        "dense": rng.random(n) < 0.6,
        "sparse": rng.random(n) < 0.03,  # gathered rows, padded to the block unit
        "few": np.isin(np.arange(n), [3, 20, n - 1]),  # k > allowed rows: (-inf, -1) padding
        "head": np.arange(n) < n // 3,  # dense gate whose later tiles are skipped entirely
    }[kind]


@pytest.mark.parametrize("block", [None, 1, 4, 32, 128])
@pytest.mark.parametrize("tile_rows", [None, 32, 160])
@pytest.mark.parametrize("gate", ["none", "dense", "sparse", "few", "head"])
def test_blockmax_equals_reference(block: int | None, tile_rows: int | None, gate: str) -> None:
    x, q, s = corpus(1500, 36)
    qs = queries(13, 36, x)  # 13 queries: not a multiple of 8
    allowed = gate_of(gate, 1500)
    idx = blockmax_index(q, s, block=block, tile_rows=tile_rows)
    for k in (1, 10, 45):  # 45 > a block of 32, and > the rows in the 1500 % 160 last tile
        ids = check_blockmax(idx, q, s, qs, k, allowed)
        if allowed is not None:
            assert ((ids >= 0).sum(axis=1) == min(k, int(allowed.sum()))).all()


@pytest.mark.parametrize("block", [2, 8, 64])
def test_blockmax_heavy_ties(block: int) -> None:
    """Three distinct vectors (one of them zero) repeated over 700 rows, so keys tie across
    blocks and tiles; every tie must go to the lower slot, as in the reference."""
    rng = np.random.default_rng(3)
    base = l2_normalize(rng.standard_normal((3, 24)))
    base[2] = 0.0
    x = base[rng.integers(0, 3, 700)]
    x[100:400] = base[0]  # a long run of identical rows spanning many blocks
    q, s = quantize_int8(x)
    qs = np.concatenate([base, l2_normalize(rng.standard_normal((6, 24)))])
    qs[1] = -qs[1]  # a query whose best rows are the zero vectors (key 0, ties everywhere)
    idx = blockmax_index(q, s, block=block, tile_rows=96, pieces=5)
    for gate in (None, rng.random(700) < 0.5, rng.random(700) < 0.1):
        for k in (1, 7, 33, 300):
            check_blockmax(idx, q, s, qs, k, gate)


def test_blockmax_tiny_and_negative_zero() -> None:
    # Fewer rows than k, one row, and scale -0.0 (a key of -0.0 must tie with +0.0 by slot).
    q = np.array([[3, -4], [0, 0], [-3, 4], [3, -4]], np.int8)
    s = np.array([0.1, 0.0, -0.0, 0.0], np.float32)
    qs = np.array([[0.6, -0.8], [-0.6, 0.8], [0.0, 0.0]], np.float32)
    for block in (None, 1, 2):
        idx = blockmax_index(q, s, block=block, tile_rows=None, pieces=2)
        check_blockmax(idx, q, s, qs, 6, None)
        check_blockmax(idx, q, s, qs, 2, np.array([False, True, True, False]))
        one = blockmax_index(q[:1], s[:1], block=block, tile_rows=None, pieces=1)
        check_blockmax(one, q[:1], s[:1], qs, 3, None)


def test_blockmax_auto_block_size() -> None:
    idx = DenseIndex(8, device="cpu")
    idx._init_layout(cuda_layout=True)
    tile, block = idx._block_layout(4096, 10, 1_000_000)
    assert block == 64 and tile % 64 == 0
    assert idx._block_layout(4096, 100, 1_000_000)[1] == 32
    assert idx._block_layout(1, 1, 1_000_000)[1] == 256
    idx._block_rows = 3
    with pytest.raises(ValidationError, match="power of two"):
        idx._block_layout(16, 10, 1000)


def test_blockmax_tile_loop_has_no_host_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU stand-in for the CUDA sync check: the tile loop may not read a tensor's value back."""
    x, q, s = corpus(900, 20)
    qs = queries(9, 20, x)
    idx = blockmax_index(q, s, block=8, tile_rows=64)
    xq, _ = quantize_int8(qs)
    allowed = np.random.default_rng(2).random(900) < 0.5
    for gate in (None, allowed, allowed & (np.arange(900) < 60)):
        sparse = gate is not None and gate.sum() * 8 <= 900
        tile, block = idx._block_layout(9, 10, 900)
        plan = dense_cuda.index_plan(idx, tile, 32, gate if sparse else None, gate)
        xt = idx._queries_t(xq)

        def refuse(*_a: object, **_k: object) -> None:
            raise AssertionError("host read inside the tile loop")

        with monkeypatch.context() as m:
            reads = (
                "item",
                "tolist",
                "__bool__",
                "nonzero",
                "numpy",
                "cpu",
                "__index__",
                "__int__",
            )
            for name in reads:
                m.setattr(torch.Tensor, name, refuse)
            m.setattr(torch, "nonzero", refuse)
            best = dense_cuda.blockmax_loop(idx._codes, idx._scales, xt, 9, 10, block, *plan)
        _, ids = unpack_keys_torch(best)
        np.testing.assert_array_equal(ids.numpy(), search_reference(q, s, qs, 10, gate)[1])


small_corpus = st.tuples(st.integers(1, 300), st.integers(1, 12), st.integers(0, 2**31 - 1))


@settings(max_examples=40, deadline=None)
@given(
    small_corpus,
    st.integers(1, 11),
    st.integers(1, 40),
    st.sampled_from([1, 2, 4, 16, 64]),
    st.sampled_from([32, 64, 200]),
    st.sampled_from(["none", "dense", "sparse"]),
)
def test_blockmax_property(
    shape: tuple[int, int, int], nq: int, k: int, block: int, tile: int, gate: str
) -> None:
    n, d, seed = shape
    rng = np.random.default_rng(seed)
    q = rng.integers(-2, 3, size=(n, d)).astype(np.int8)  # few distinct rows: many exact ties
    s = rng.choice(np.array([0.0, 0.5, 1.0], np.float32), size=n)
    qs = rng.integers(-2, 3, size=(nq, d)).astype(np.float32)
    allowed = {"none": None, "dense": rng.random(n) < 0.7, "sparse": rng.random(n) < 0.1}[gate]
    idx = blockmax_index(q, s, block=block, tile_rows=tile, pieces=2)
    check_blockmax(idx, q, s, qs, k, allowed)


# ---------------------------------------------------------------- top-k helpers
tied_scores = st.integers(1, 6).flatmap(
    lambda n: st.integers(1, 60).flatmap(
        lambda m: st.lists(
            st.sampled_from([NEG, -1.0, 0.0, 0.5, 1.0, 2.0]), min_size=n * m, max_size=n * m
        ).map(lambda v: np.array(v, np.float32).reshape(n, m))
    )
)


@settings(max_examples=80, deadline=None)
@given(tied_scores, st.integers(1, 70))
def test_topk_torch_equals_numpy_reference(scores: np.ndarray, k: int) -> None:
    ref_v, ref_i = topk_stable(scores, k)
    # reference semantics by brute force: sort pairs (score desc, index asc)
    for row, (_vals, ids) in enumerate(zip(ref_v, ref_i)):
        pairs = sorted(((-v, j) for j, v in enumerate(scores[row]) if v != NEG))[:k]
        assert [j for _, j in pairs] == [j for j in ids if j >= 0]
    for dim in (-1, 0):
        t = torch.from_numpy(scores if dim == -1 else np.ascontiguousarray(scores.T))
        v, i = topk_stable_torch(t, k, dim=dim)
        np.testing.assert_array_equal(i.numpy(), ref_i)
        np.testing.assert_array_equal(v.numpy(), ref_v)


@settings(max_examples=60, deadline=None)
@given(tied_scores, st.integers(1, 12), st.integers(1, 4))
def test_merge_topk_equals_global_topk(scores: np.ndarray, k: int, shards: int) -> None:
    ref_v, ref_i = topk_stable(scores, k)
    cuts = np.array_split(np.arange(scores.shape[1]), shards)
    parts = [topk_stable(scores[:, c], k) for c in cuts if c.size]
    offsets = [c[0] for c in cuts if c.size]
    ids = [np.where(i >= 0, i + off, -1) for (_, i), off in zip(parts, offsets)]
    got_v, got_i = merge_topk([v for v, _ in parts], ids, k)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(got_v, ref_v)


@settings(max_examples=60, deadline=None)
@given(tied_scores, st.integers(1, 8))
def test_update_topk_with_threshold_survivors(scores: np.ndarray, k: int) -> None:
    half = scores.shape[1] // 2
    best_v, best_i = (
        topk_stable_torch(torch.from_numpy(scores[:, :half]), k)
        if half
        else (torch.full((scores.shape[0], k), NEG), torch.full((scores.shape[0], k), -1))
    )
    rest = torch.from_numpy(scores[:, half:])
    keep = (rest >= best_v[:, k - 1 : k]) & (rest > NEG)
    rows, cols = torch.nonzero(keep, as_tuple=True)
    v, i = update_topk_torch(best_v, best_i, rows, rest[rows, cols], cols + half)
    ref_v, ref_i = topk_stable(scores, k)
    np.testing.assert_array_equal(i.numpy(), ref_i)
    np.testing.assert_array_equal(v.numpy(), ref_v)


def test_topk_stable_dispatches_on_torch() -> None:
    scores = np.array([[1.0, 3.0, 3.0, NEG], [0.0, 0.0, 0.0, 0.0]], np.float32)
    _, i = topk_stable(torch.from_numpy(scores), 3)
    assert isinstance(i, torch.Tensor)
    np.testing.assert_array_equal(i.numpy(), [[1, 2, 0], [0, 1, 2]])
    _, i1 = topk_stable(torch.tensor([2.0, NEG, 5.0]), 3)
    np.testing.assert_array_equal(i1.numpy(), [2, 0, -1])
    np.testing.assert_array_equal(topk_stable(np.array([2.0, NEG, 5.0]), 3)[1], [2, 0, -1])


def test_topk_validation() -> None:
    with pytest.raises(ValidationError):
        topk_stable(np.zeros((2, 3)), 0)
    with pytest.raises(ValidationError):
        topk_stable(np.array([[np.nan]]), 1)
    with pytest.raises(ValidationError):
        merge_topk([np.zeros((2, 3))], [np.zeros((2, 2), np.int64)], 2)


@settings(max_examples=60, deadline=None)
@given(tied_scores, st.integers(1, 70))
def test_packed_keys_topk_equals_reference(scores: np.ndarray, k: int) -> None:
    t = torch.from_numpy(scores)
    ids = torch.arange(scores.shape[1])
    packed = pack_keys_torch(t, ids)
    v, i = unpack_keys_torch(packed)
    np.testing.assert_array_equal(v.numpy(), scores)
    np.testing.assert_array_equal(i.numpy(), np.where(np.isneginf(scores), -1, ids.numpy()))
    take = min(k, scores.shape[1])
    top_v, top_i = unpack_keys_torch(torch.topk(packed, take, dim=1).values)
    ref_v, ref_i = topk_stable(scores, k)
    np.testing.assert_array_equal(top_i.numpy(), ref_i[:, :take])
    np.testing.assert_array_equal(top_v.numpy(), ref_v[:, :take])


def test_packed_keys_order_signed_zero_and_extremes() -> None:
    vals = torch.tensor([float("inf"), 3.4e38, 1e-45, 0.0, -0.0, -1e-45, -3.4e38, NEG])
    packed = pack_keys_torch(vals, torch.zeros(8, dtype=torch.int64))
    assert (packed[:3] > packed[1:4]).all() and packed[3] == packed[4]
    assert (packed[4:-1] > packed[5:]).all()
    tie = pack_keys_torch(torch.tensor([0.0, -0.0]), torch.tensor([5, 2]))
    assert tie[1] > tie[0]  # equal values: the lower id ranks first
    assert unpack_keys_torch(tie)[1].tolist() == [5, 2]


@settings(max_examples=60, deadline=None)
@given(tied_scores, st.integers(1, 12), st.sampled_from([1, 2, 3, 8]), st.integers(1, 4))
def test_merge_blocks_equals_global_topk(
    scores: np.ndarray, k: int, block: int, tiles: int
) -> None:
    n, m = scores.shape
    ref_v, ref_i = topk_stable(scores, k)
    best = pack_keys_torch(torch.full((n, k), NEG), torch.zeros((n, k), dtype=torch.int64))
    for cut in np.array_split(np.arange(m), tiles):
        if not cut.size:
            continue
        rows = -(-cut.size // block) * block  # pad the tile with -inf rows to whole blocks
        keys = torch.full((rows, n), NEG)
        keys[: cut.size] = torch.from_numpy(np.ascontiguousarray(scores[:, cut].T))
        slots = torch.zeros(rows, dtype=torch.int64)
        slots[: cut.size] = torch.from_numpy(cut)
        best = merge_blocks_torch(best, keys, slots, block)
    v, i = unpack_keys_torch(best)
    np.testing.assert_array_equal(i.numpy(), ref_i)
    np.testing.assert_array_equal(v.numpy(), ref_v)


def test_native_exact_topk_leaves_nan_and_infinity_to_torch() -> None:
    """Rows with NaN or +inf (which torch's topk orders its own way) take the torch selection."""
    from spector_gpu.kernels.selection import topk_exact, topk_exact_torch

    for odd in (np.nan, np.inf):
        x = torch.tensor([[1.0, odd, 3.0, -np.inf, 3.0], [0.5, 0.5, 2.0, 1.0, -1.0]])
        for k in (1, 3, 6):
            want = topk_exact_torch(x, k)
            got = topk_exact(x, k, use_native=True)
            np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
            np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 4),
    st.integers(1, 400),
    st.integers(1, 150),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_native_exact_topk_of_wide_rows_equals_torch(
    seed: int, n: int, width: int, k: int, dtype: torch.dtype
) -> None:
    """k of 32 and more takes the native buffered selection (float32 and float64 rows): the
    same values and indices as the torch selection, ties to the lower column, -inf and
    invalid entries left out."""
    from spector_gpu.kernels.selection import topk_exact, topk_exact_torch

    rng = np.random.default_rng(seed)
    x = rng.choice([0.0, 0.5, 2.0, -np.inf], (n, width)) + rng.random((n, width)) * (
        rng.random((n, width)) < 0.5
    )
    valid = torch.from_numpy(rng.random((n, width)) < 0.85)
    t = torch.from_numpy(x).to(dtype)
    want = topk_exact_torch(t, k, valid=valid)
    got = topk_exact(t, k, valid=valid, use_native=True)
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 4),
    st.integers(0, 70),
    st.integers(1, 30),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_exact_topk_and_its_mask_equal_the_stable_reference(
    seed: int, n: int, width: int, k: int, dtype: torch.dtype
) -> None:
    from spector_gpu.kernels.selection import topk_exact, topk_exact_torch, topk_mask

    rng = np.random.default_rng(seed)
    x = rng.choice([0.0, 1.0, 2.5, -1.0, -np.inf], (n, width)) + (rng.random((n, width)) < 0.2)
    valid = rng.random((n, width)) < 0.8
    want_v, want_i = topk_stable(np.where(valid, x, -np.inf), k)
    got_v, got_i = topk_exact_torch(torch.from_numpy(x).to(dtype), k, valid=torch.from_numpy(valid))
    np.testing.assert_array_equal(got_i.numpy(), want_i)
    np.testing.assert_array_equal(got_v.numpy().astype(np.float32), want_v)
    for use_native in (True, False):  # the native row selection: the same values and indices
        v, i = topk_exact(
            torch.from_numpy(x).to(dtype), k, valid=torch.from_numpy(valid), use_native=use_native
        )
        assert v.dtype == dtype
        np.testing.assert_array_equal(i.numpy(), got_i.numpy())
        np.testing.assert_array_equal(v.numpy(), got_v.numpy())
    chosen = np.zeros((n, width), dtype=bool)
    for row, cols in enumerate(want_i):
        chosen[row, cols[cols >= 0]] = True
    for host_reads, use_native in itertools.product((False, True), (False, True)):
        mask = topk_mask(
            torch.from_numpy(x).to(dtype),
            k,
            valid=torch.from_numpy(valid),
            host_reads=host_reads,
            use_native=use_native,
        )
        np.testing.assert_array_equal(mask.numpy(), chosen)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_top_mask_native_declines_nan_and_keeps_inf_and_broadcast_valid(dtype: torch.dtype) -> None:
    from spector_gpu.kernels.native import native
    from spector_gpu.kernels.selection import topk_mask

    if native is None:
        pytest.skip("native kernels not built")
    x = torch.tensor([[1.0, np.inf, 3.0, 3.0, -np.inf, 2.0], [5.0, 4.0, 4.0, 4.0, 0.5, 9.0]])
    x = x.to(dtype)
    valid = torch.tensor([True, True, True, True, True, False]).expand_as(x)  # a broadcast view
    got = topk_mask(x, 3, valid=valid, host_reads=True)
    want = [[False, True, True, True, False, False], [True, True, True, False, False, False]]
    np.testing.assert_array_equal(got.numpy(), want)
    out = np.zeros(x.shape, dtype=bool)
    flags = np.ascontiguousarray(valid.numpy())
    assert native.top_mask_rows(x.numpy(), flags, 3, out)
    np.testing.assert_array_equal(out, want)
    with_nan = x.clone()
    with_nan[1, 1] = float("nan")
    assert not native.top_mask_rows(with_nan.numpy(), flags, 3, out)  # declined: torch's order
    torch_mask = topk_mask(with_nan, 3, valid=valid, host_reads=True, use_native=False)
    assert torch.equal(topk_mask(with_nan, 3, valid=valid, host_reads=True), torch_mask)
    with pytest.raises(ValueError, match="valid must be bool"):
        native.top_mask_rows(x.numpy(), flags.astype(np.int8), 3, out)
    with pytest.raises(ValueError, match="take >= 1"):
        native.top_mask_rows(x.numpy(), flags, 0, out)


def test_rows_top_sorted_pads_declines_nan_and_checks_its_outputs() -> None:
    from spector_gpu.kernels.native import native

    if native is None:
        pytest.skip("native kernels not built")
    x = np.array([[2.0, -np.inf, 7.0, 2.0, np.inf], [-np.inf] * 5])
    keys, slots = np.empty((2, 4)), np.empty((2, 4), dtype=np.int64)
    assert native.rows_top_sorted(x, 4, keys, slots)
    np.testing.assert_array_equal(keys, [[np.inf, 7.0, 2.0, 2.0], [-np.inf] * 4])
    np.testing.assert_array_equal(slots, [[4, 2, 0, 3], [-1] * 4])  # ties: the lower column
    assert native.rows_top_sorted(x.astype(np.float32), 4, keys, slots)
    np.testing.assert_array_equal(slots, [[4, 2, 0, 3], [-1] * 4])
    x[1, 3] = np.nan
    assert not native.rows_top_sorted(x, 4, keys, slots)  # declined: torch's order
    with pytest.raises(ValueError, match="must be \\(n, k\\)"):
        native.rows_top_sorted(x, 3, keys, slots)
    with pytest.raises(ValueError, match="k >= 1"):
        native.rows_top_sorted(x, 0, keys[:, :0], slots[:, :0])
