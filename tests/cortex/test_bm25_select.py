"""``BM25Index.select``: each query's best scores and the scores of given slots without an
(n, N) block must equal what the block (``score_dense``) gives, bit for bit — in both of the
native kernel's modes (a query of few postings selects from the documents it touched, one of
many scans the whole row), with one thread and with a helper, over main and tail postings,
gates, both BM25 variants and ties; and bad arguments are refused by name."""

from __future__ import annotations

import random

import numpy as np
import pytest
from spector_gpu.kernels.native import native
from spector_gpu.kernels.sharing import helpers_for

from spector_gpu.cortex.bm25 import BM25Index
from spector_gpu.cortex.bm25_select import select_reference
from spector_gpu.errors import ValidationError


def _index(rng: random.Random, n_docs: int, vocab: int, method: str) -> BM25Index:
    words = [f"t{i}" for i in range(vocab)]
    weights = [1.0 / (i + 1) for i in range(vocab)]  # a few common terms, many rare ones
    docs = [rng.choices(words, weights, k=rng.randint(0, 14)) for _ in range(n_docs)]
    index = BM25Index(method=method)  # type: ignore[arg-type]
    half = rng.randint(0, n_docs)
    index.add(docs[:half])
    index.compact()  # main segment, then a tail of newer documents
    index.add(docs[half:])
    return index


def _queries(rng: random.Random, vocab: int, n: int) -> list[list[str]]:
    words = [f"t{i}" for i in range(vocab)] + ["unknown"]
    return [rng.choices(words, k=rng.randint(0, 6)) for _ in range(n)]


@pytest.mark.parametrize("seed", range(24))
def test_select_equals_the_score_block(seed: int, request: pytest.FixtureRequest) -> None:
    helpers = 0
    if native is not None and seed % 2:  # the batch shared with a helper from two rows on
        request.getfixturevalue("rows_shared_finely")
        helpers = 1
    with helpers_for(helpers):
        _select_equals_the_score_block(seed)


def _select_equals_the_score_block(seed: int) -> None:
    rng = random.Random(seed)
    n_docs = rng.choice([1, 40, 500, 4000])
    vocab = rng.choice([4, 60, 2000])
    index = _index(rng, n_docs, vocab, rng.choice(["lucene", "okapi"]))
    queries = _queries(rng, vocab, rng.randint(0, 40))
    allowed = None if rng.random() < 0.5 else np.array([rng.random() < 0.7 for _ in range(n_docs)])
    width = rng.randint(0, 30)
    cand = np.array(
        [[rng.randint(-1, n_docs - 1) for _ in range(width)] for _ in queries], dtype=np.int64
    ).reshape(len(queries), width)
    block = index.score_dense(queries, allowed=allowed)
    for depth in (0, 1, 7, 31, 32, 200, 5000):
        want = select_reference(block, depth, cand)
        got = index.select(queries, depth, allowed=allowed, candidates=cand)
        for g, w in zip(got, want, strict=True):
            assert g is not None and w is not None
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("method", ["lucene", "okapi"])
def test_a_large_batch_is_the_blocks_bit_for_bit(method: str) -> None:
    # A batch whose distinct terms hold 65,536 postings or more, queries sharing terms (each
    # term's weights computed once per call): the scores must stay the block's, bit for bit.
    rng = random.Random(7)
    index = _index(rng, 30_000, 300, method)
    queries = _queries(rng, 300, 128)
    assert sum(index.doc_freq(t) for t in {t for q in queries for t in q}) >= 1 << 16
    block = index.score_dense(queries)
    cand = np.array([rng.sample(range(30_000), 20) for _ in queries], dtype=np.int64)
    want = select_reference(block, 200, cand)
    for helpers in (0, 1):  # the caller alone; shared with a helper thread (kernels/sharing)
        with helpers_for(helpers):
            got = index.select(queries, 200, candidates=cand)
        for g, w in zip(got, want, strict=True):
            assert g is not None and w is not None
            assert g.view(np.uint8).tobytes() == w.view(np.uint8).tobytes()


@pytest.mark.parametrize("listed", [False, True])
@pytest.mark.parametrize("high", [0, 40, 200, 3000])
def test_long_rows_select_exactly_whatever_a_sample_of_them_shows(high: int, listed: bool) -> None:
    # 20,000 documents that the query reaches: the whole row of a 20,000-document index, or
    # (listed) every other document of 40,000, which the kernel lists and selects from. The
    # selection starts from a bound read off a sample of them (csrc/select.h sampled_bound:
    # every s-th reached document) and must start again from 0 when fewer than `depth` pass
    # it. Here the first `high` sampled documents score higher than the rest (all tied): with
    # 200 the sample's bound lets too few through (the case that starts again), with 3,000
    # enough (every sampled one), with 40 too few for a bound above the tie, with 0 it is one
    # tie. The result is the score block's every time, and ties keep the lower slots.
    reached, depth = 20_000, 300
    stride = 2 if listed else 1  # slot of the p-th reached document: stride * p
    sampled = [stride * p for p in range(0, reached, reached // 2048)][:high]
    docs = [["a", "b", "c"] if d % stride == 0 else ["x", "y"] for d in range(stride * reached)]
    for d in sampled:
        docs[d] = ["a", "a", "a"]
    index = BM25Index()
    index.add(docs)
    block = index.score_dense([["a"]])
    assert int((block > 0).sum()) == reached
    want = select_reference(block, depth, None)
    got = index.select([["a"]], depth)
    for g, w in zip(got[:2], want[:2], strict=True):
        np.testing.assert_array_equal(g, w)
    row = index.score_row(["a"], depth)
    np.testing.assert_array_equal(row.scores, want[0])
    np.testing.assert_array_equal(row.slots, want[1])
    row.release()
    rest = [d for d in range(0, stride * reached, stride) if d not in set(sampled)]
    assert got[1][0].tolist() == (sorted(sampled) + rest)[:depth]


def test_ties_go_to_the_lower_slot() -> None:
    """Documents of equal length and content score alike: the lowest slots are kept."""
    index = BM25Index()
    index.add([["apple", "pie"]] * 300 + [["apple", "apple"]] + [["pear"]] * 5000)
    scores, slots, _ = index.select([["apple"]], 50)
    assert slots[0, 0] == 300  # the higher score first
    assert slots[0, 1:].tolist() == list(range(49))
    assert len(set(scores[0, 1:].tolist())) == 1


@pytest.mark.parametrize("depth", [5, 50])
def test_ties_across_terms_go_to_the_lower_slot(depth: int) -> None:
    """A query's documents are reached term by term, so an equal score of a lower slot can
    come after a higher one (here the term "b" is older than "a" but its documents are
    newer): the lower slots are still the ones kept."""
    index = BM25Index()
    docs = [["b", "a"]] + [["a"]] * 99 + [["b"]] * 99 + [["filler"]] * 3000
    index.add(docs)
    _, slots, _ = index.select([["a", "b"]], depth)
    assert slots[0].tolist() == list(range(depth))


def test_a_query_without_known_terms_and_an_empty_index() -> None:
    index = BM25Index()
    index.add([["a", "b"], ["b"]])
    scores, slots, cand = index.select([["zzz"], []], 3, candidates=np.array([[0, -1], [1, 0]]))
    assert (slots == -1).all() and np.isneginf(scores).all()
    assert cand is not None and not cand.any()
    empty = BM25Index()
    scores, slots, cand = empty.select([["a"]], 2)
    assert scores.shape == (1, 2) and (slots == -1).all() and cand is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"depth": -1}, "depth"),
        ({"depth": True}, "depth"),
        ({"depth": 2, "threads": 3}, "threads"),
        ({"depth": 2, "threads": True}, "threads"),
        ({"depth": 2, "candidates": np.array([0, 1])}, "candidates"),
        ({"depth": 2, "candidates": np.array([[0.5]])}, "candidates"),
        ({"depth": 2, "candidates": np.array([[0], [1]])}, "candidates"),
        ({"depth": 2, "candidates": np.array([[7]])}, "candidates"),
        ({"depth": 2, "allowed": np.ones(5, dtype=bool)}, "allowed"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict, message: str) -> None:
    index = BM25Index()
    index.add([["a"], ["b"]])
    with pytest.raises(ValidationError, match=message):
        index.select([["a"]], **kwargs)


def test_threads_is_deprecated_and_ignored() -> None:
    """``select(threads=...)`` warns, naming what to do, and returns what it returns without."""
    index = BM25Index()
    index.add([["a", "b"], ["b"], ["a", "a"]])
    want = index.select([["a"], ["b"]], 2, candidates=np.array([[0, 1], [2, -1]]))
    for threads in (1, 2):
        with pytest.warns(DeprecationWarning, match="leave the argument out"):
            got = index.select(
                [["a"], ["b"]], 2, candidates=np.array([[0, 1], [2, -1]]), threads=threads
            )
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


@pytest.mark.skipif(native is None, reason="the native kernels are not built")
def test_the_native_kernel_checks_its_inputs() -> None:
    """The raw kernel refuses inconsistent arrays instead of reading out of bounds."""
    index = BM25Index()
    index.add([["a", "b"], ["b"]])
    with pytest.raises(ValueError, match="q_indptr"):
        native.bm25_select(
            np.array([0, 5]), np.array([0]), np.ones(1, np.float32), np.ones(1),
            np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int32),
            np.zeros(0, np.int32), np.zeros(2, np.int64), np.zeros(0, np.int32),
            np.zeros(0, np.int32), np.ones(2, np.int32), None, 1.2, 0.75, 1.0, False,
            1, np.zeros(1, np.float32), np.zeros(1, np.int64), None, None,
        )  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_a_scored_row_equals_the_score_block(seed: int) -> None:
    """``score_row`` keeps one query's row: its proposals are ``select``'s and any slots
    read from it are the block's, until released; the next row releases an earlier one."""
    rng = random.Random(100 + seed)
    n_docs = rng.choice([1, 300, 5000])
    vocab = rng.choice([4, 60, 2000])
    index = _index(rng, n_docs, vocab, rng.choice(["lucene", "okapi"]))
    allowed = None if rng.random() < 0.5 else np.array([rng.random() < 0.7 for _ in range(n_docs)])
    for query in _queries(rng, vocab, 6):
        depth = rng.choice([1, 10, 200])
        block = index.score_dense([query], allowed=allowed)
        want = select_reference(block, depth, None)
        row = index.score_row(query, depth, allowed=allowed)
        np.testing.assert_array_equal(row.scores, want[0])
        np.testing.assert_array_equal(row.slots, want[1])
        slots = np.array([rng.randint(-1, n_docs - 1) for _ in range(rng.randint(0, 50))])
        got = row.at(slots)
        np.testing.assert_array_equal(got, np.where(slots >= 0, block[0, np.maximum(slots, 0)], 0))
        assert row.released
        with pytest.raises(ValidationError, match="released"):
            row.at(slots)
    kept = index.score_row(["t0"], 3)
    index.score_row(["t1"], 3).release()  # releases the kept row first: the scratch is clean
    assert kept.released
    again = index.score_row(["t0"], 3)
    np.testing.assert_array_equal(again.scores, kept.scores)
    again.release()
    again.release()  # idempotent
    np.testing.assert_array_equal(index.select([["t0"]], 3)[0][0], kept.scores[0])


@pytest.mark.skipif(native is None, reason="the native kernels are not built")
def test_threads_that_exit_do_not_keep_their_scratch_rows() -> None:
    """Each thread's scratch rows (about 8 bytes per document) are freed when it exits: a
    server starting a thread per request must not leak them."""
    import threading
    from pathlib import Path

    index = BM25Index()
    index.add([["a", f"w{i % 50}"] for i in range(400_000)])

    def rss_mb() -> float:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * 4096 / 2**20

    def one() -> None:
        index.select([["a", "w3"]], 10)

    def in_threads(count: int) -> None:
        for _ in range(count):
            t = threading.Thread(target=one)
            t.start()
            t.join()

    if not Path("/proc/self/statm").exists():
        pytest.skip("needs /proc")
    in_threads(3)  # allocator warm-up
    before = rss_mb()
    in_threads(30)  # ~3.3 MB of scratch each if it were kept
    assert rss_mb() - before < 30
