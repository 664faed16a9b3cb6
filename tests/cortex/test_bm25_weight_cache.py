"""The BM25 index's weight cache (cortex/bm25_scoring.py ``WeightCache``): the selection
kernels read a term's main-segment posting weights from it while the statistics stand and
write them on first use. Every answer must stay scipy's product over freshly computed
weights, bit for bit — after adds (new documents in the tail, new terms), retirements, a
compaction (a new main segment) and a load — and the cache must really be read."""

from __future__ import annotations

import random

import numpy as np
import pytest
from spector_gpu.kernels.native import native

from spector_gpu.cortex.bm25 import BM25Index
from spector_gpu.cortex.bm25_select import select_reference

pytestmark = pytest.mark.skipif(native is None, reason="the native kernels are not built")


def _docs(rng: random.Random, n: int, vocab: int) -> list[list[str]]:
    return [[f"t{int(rng.paretovariate(1.1)) % vocab}" for _ in range(rng.randint(0, 12))]
            for _ in range(n)]  # fmt: skip


def _check(index: BM25Index, queries: list[list[str]], depth: int) -> None:
    """select and score_row equal the selection from scipy's product (score_batch)."""
    block = np.asarray(index.score_batch(queries).toarray(), dtype=np.float32)
    cand = np.tile(np.arange(min(len(index), 40), dtype=np.int64), (len(queries), 1))
    want = select_reference(block, depth, cand)
    keys, slots, scores = index.select(queries, depth, candidates=cand)
    np.testing.assert_array_equal(keys, want[0])
    np.testing.assert_array_equal(slots, want[1])
    np.testing.assert_array_equal(scores, want[2])
    for i, q in enumerate(queries):
        row = index.score_row(q, depth)
        np.testing.assert_array_equal(row.scores[0], want[0][i])
        np.testing.assert_array_equal(row.at(cand[i : i + 1])[0], want[2][i])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("method", ["lucene", "okapi"])
def test_answers_stay_scipys_through_every_change(seed: int, method: str) -> None:
    rng = random.Random(seed)
    index = BM25Index(method=method)  # type: ignore[arg-type]
    index.add(_docs(rng, 400, 300))
    index.compact()
    queries = _docs(rng, 8, 320) + [["t0", "t1", "t0"], ["t999"]]
    steps = [
        lambda: None,  # the first call fills the cache, the second reads it
        lambda: None,
        lambda: index.add(_docs(rng, 30, 330)),  # tail documents, new terms, new avgdl and idf
        lambda: index.retire(3, []),
        lambda: index.retire(5, ["t0", "t1"]),
        lambda: index.compact(),  # a new main segment
        lambda: index.add([["t0", "t0", "t2"]]),
    ]
    for step in steps:
        step()
        _check(index, queries, rng.choice([1, 10, 200]))
    again = BM25Index.from_state(index.state())  # a loaded index starts its own cache
    _check(again, queries, 50)


def test_the_cache_is_read_while_the_statistics_stand() -> None:
    index = BM25Index()
    index.add([["a", "b"], ["a"], ["b", "c"], ["a", "c", "c"]])
    index.compact()
    first = index.select([["a", "c"]], 4)
    index._weights.weights[:] = 0.0  # poison what the first call cached
    poisoned = index.select([["a", "c"]], 4)
    assert not np.array_equal(first[0], poisoned[0])  # read from the cache ...
    index.add([["d"]])  # ... until the statistics move
    want = select_reference(np.asarray(index.score_batch([["a", "c"]]).toarray()), 4, None)
    np.testing.assert_array_equal(index.select([["a", "c"]], 4)[0], want[0])


def test_the_kernel_refuses_a_cache_without_its_flags() -> None:
    index = BM25Index()
    index.add([["a", "b"], ["b"]])
    index.compact()
    inputs = index.kernel_inputs([["a"]])
    from spector_gpu.cortex.bm25_scoring import native_args

    args = native_args(inputs, None)
    out = (1, np.zeros(1, np.float32), np.zeros(1, np.int64), None, None)
    weights, cached = inputs.cache_args()
    with pytest.raises(ValueError, match="go together"):
        native.bm25_select(*args, *out, weights, None)
    with pytest.raises(ValueError, match="weight_cache"):
        native.bm25_select(*args, *out, np.zeros(1, np.float32), cached)
    with pytest.raises(ValueError, match="cached"):
        native.bm25_select(*args, *out, weights, np.zeros(5, np.uint8))
