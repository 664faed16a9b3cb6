"""Dense shards: per-shard top-k merged with merge_topk equals the exact top-k of the whole
corpus; the UDF pickles without its rows; one slow run on a local Ray instance."""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import numpy as np
import pytest
from spector_gpu.kernels.dense import search_reference
from spector_gpu.kernels.quant import l2_normalize, quantize_int8

from spector_gpu.errors import ValidationError
from spector_gpu.integrations.ray import merge_topk
from spector_gpu.integrations.ray_shards import DenseShard, save_shard, shard_ids

N, DIM, SHARDS = 900, 24, 3
Corpus = tuple[np.ndarray, np.ndarray, list[Path]]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    rng = np.random.default_rng(4)
    codes, scales = quantize_int8(l2_normalize(rng.standard_normal((N, DIM), np.float32)))
    codes[600:650] = codes[100:150]  # duplicate rows across shards: ties by lower ordinal
    scales[600:650] = scales[100:150]
    root = tmp_path_factory.mktemp("shards")
    bounds = np.linspace(0, N, SHARDS + 1).astype(int)
    paths = [
        save_shard(root / f"s{i}", codes[lo:hi], scales[lo:hi], offset=int(lo))
        for i, (lo, hi) in enumerate(itertools.pairwise(bounds))
    ]
    return codes, scales, paths


def _queries(n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(9)
    return np.asarray(l2_normalize(rng.standard_normal((n, DIM), np.float32)), np.float32)


def test_merged_exact_shards_are_the_exact_top_k(corpus: Corpus) -> None:
    codes, scales, paths = corpus
    queries = _queries()
    parts = [DenseShard(p, k=8).search(queries) for p in paths]
    ids, scores = merge_topk(parts, 8)
    ref_scores, ref_slots = search_reference(codes, scales, queries, 8)
    assert ids.tolist() == shard_ids(ref_slots).tolist()
    np.testing.assert_array_equal(scores, ref_scores)


def test_ivf_shards_with_every_list_probed_are_exact(corpus: Corpus) -> None:
    codes, scales, paths = corpus
    queries = _queries()
    parts = [DenseShard(p, k=5, nprobe=8, n_lists=8).search(queries) for p in paths]
    ids, _ = merge_topk(parts, 5)
    _, ref_slots = search_reference(codes, scales, queries, 5)
    assert ids.tolist() == shard_ids(ref_slots).tolist()


def test_udf_batches_pickling_and_errors(corpus: Corpus, tmp_path: Path) -> None:
    _, _, paths = corpus
    shard = DenseShard(paths[1], k=3, prefix="s1_")
    out = shard({"qid": np.arange(2), "vector": list(_queries(2))})
    assert out["s1_ids"].shape == (2, 3) and out["s1_scores"].dtype == np.float32
    assert all(300 <= int(i) < 600 for i in out["s1_ids"].ravel())  # this shard's ordinals
    clone = pickle.loads(pickle.dumps(shard))
    assert clone._index is None  # the rows are not pickled; the worker loads them
    np.testing.assert_array_equal(clone.search(_queries(2))[0], out["s1_ids"])
    with pytest.raises(ValidationError, match="no 'vector' column"):
        shard({"query": ["text"]})
    with pytest.raises(ValidationError, match="k must be an int >= 1"):
        DenseShard(paths[0], k=0)
    with pytest.raises(ValidationError, match=r"holds no shard\.json"):
        DenseShard(tmp_path, k=2).search(_queries(1))
    with pytest.raises(ValidationError, match="already holds a shard"):
        save_shard(paths[0], np.zeros((1, DIM), np.int8), np.ones(1, np.float32), offset=0)
    with pytest.raises(ValidationError, match="offset must be an int >= 0"):
        save_shard(tmp_path / "x", np.zeros((1, DIM), np.int8), np.ones(1, np.float32), offset=-1)
    assert shard_ids(np.array([[7, -1]])).tolist() == [["000000000007", ""]]


@pytest.mark.slow
def test_shards_on_local_ray_workers(corpus: Corpus) -> None:
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    codes, scales, paths = corpus
    queries = _queries(5)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ds = ray.data.from_items([{"qid": i, "vector": v} for i, v in enumerate(queries)])
        for s, path in enumerate(paths):
            ds = ds.map_batches(
                DenseShard,
                fn_constructor_kwargs={"shard": str(path), "k": 6, "prefix": f"s{s}_"},
                batch_size=2,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=1),
                num_cpus=1,
            )
        rows = sorted(ds.take_all(), key=lambda r: r["qid"])
    finally:
        ray.shutdown()
    pairs = [
        ([list(r[f"s{s}_ids"]) for r in rows], [list(r[f"s{s}_scores"]) for r in rows])
        for s in range(SHARDS)
    ]
    ids, _ = merge_topk(pairs, 6)
    _, ref_slots = search_reference(codes, scales, queries, 6)
    assert ids.tolist() == shard_ids(ref_slots).tolist()
