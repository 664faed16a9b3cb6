"""BM25Index against bm25s (lucene) and rank_bm25 (okapi), incremental adds, gates, state."""

from __future__ import annotations

from typing import Any

import bm25s
import numpy as np
import pytest
import rank_bm25
from hypothesis import given, settings
from hypothesis import strategies as st

import spector_gpu.cortex.bm25 as bm25_module
from spector_gpu.cortex.analyzer import Analyzer
from spector_gpu.cortex.bm25 import BM25Index
from spector_gpu.errors import ConfigError, CorruptionError, ValidationError

TEXTS = [
    "Ann: I moved to Lisbon in May, the flat is near the river.",
    "Bo: How is the new flat? Is Lisbon expensive these days?",
    "Ann's sister Eva plays the cello in the Lisbon city orchestra.",
    "Eva practises the cello every morning before work.",
    "Bo adopted two dogs last spring; the dogs love running in the park.",
    "Ann: my running club meets on Sundays by the river.",
    "Caroline's birthday party is on the 12th of June at the lake house.",
    "Caroline went hiking with Melanie near the lake in 2023.",
    "Melanie paints landscapes and sold a painting of the lake.",
    "The orchestra performs Dvorak's cello concerto in June.",
    "Bo: I started learning Portuguese because Ann lives in Lisbon now.",
    "Ann recommended a bakery in Lisbon that sells pastel de nata.",
    "Running a marathon requires months of training and rest days.",
    "Melanie and Caroline talked about adopting a dog from the shelter.",
    "The shelter near the park had twelve dogs and three cats.",
    "Eva's cello teacher retired; she found a new teacher in June.",
    "",
    "Bo bought running shoes for the club's spring race.",
    "A painting class meets at the community centre on Tuesdays.",
    "Caroline is researching adoption agencies for a child.",
]
QUERIES = [
    "where does Ann live?",
    "who plays the cello",
    "dogs in the park",
    "Caroline lake hiking",
    "running club river",
    "June concert cello orchestra",
    "painting",
    "Lisbon Lisbon bakery",
    "adoption",
    "unknownword",
    "the and of",
]


def corpus_tokens() -> tuple[list[list[str]], list[list[str]]]:
    a = Analyzer()
    return a.tokens_batch(TEXTS), a.tokens_batch(QUERIES)


def zipf_corpus(seed: int, n_docs: int, vocab: int) -> tuple[list[list[str]], list[list[str]]]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    docs = [
        [f"w{i}" for i in rng.choice(vocab, size=rng.integers(0, 25), p=p)] for _ in range(n_docs)
    ]
    queries = [[f"w{i}" for i in rng.choice(vocab + 5, size=rng.integers(1, 6))] for _ in range(40)]
    return docs, queries


def bm25s_dense(docs: list[list[str]], queries: list[list[str]], k1: float, b: float) -> np.ndarray:
    ref = bm25s.BM25(k1=k1, b=b, method="lucene")
    ref.index(docs, show_progress=False)
    return np.stack(
        [ref.get_scores(q) if q else np.zeros(len(docs), dtype=np.float32) for q in queries]
    )


def rank_dense(
    docs: list[list[str]], queries: list[list[str]], k1: float, b: float, eps: float
) -> np.ndarray:
    ref = rank_bm25.BM25Okapi(docs, k1=k1, b=b, epsilon=eps)
    return np.stack([ref.get_scores(q) for q in queries])


def build(docs: list[list[str]], **kw: Any) -> BM25Index:
    index = BM25Index(**kw)
    index.add(docs)
    return index


# ---------------------------------------------------------------------- reference equality
@pytest.mark.parametrize("k1,b", [(1.2, 0.75), (0.9, 0.4), (2.0, 1.0), (1.5, 0.0)])
@pytest.mark.parametrize("corpus", ["text", "zipf"])
def test_lucene_equals_bm25s(corpus: str, k1: float, b: float) -> None:
    docs, queries = corpus_tokens() if corpus == "text" else zipf_corpus(0, 400, 150)
    got = build(docs, k1=k1, b=b).score_batch(queries).toarray()
    assert got.dtype == np.float32 and got.shape == (len(queries), len(docs))
    np.testing.assert_allclose(got, bm25s_dense(docs, queries, k1, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k1,b,eps", [(1.5, 0.75, 0.25), (1.2, 0.75, 0.25), (0.8, 0.3, 0.5)])
@pytest.mark.parametrize("corpus", ["text", "zipf", "common"])
def test_okapi_equals_rank_bm25(corpus: str, k1: float, b: float, eps: float) -> None:
    if corpus == "text":
        docs, queries = corpus_tokens()
    elif corpus == "zipf":
        docs, queries = zipf_corpus(1, 300, 80)
    else:  # terms in more than half the documents: negative IDF, epsilon floor
        docs = [["a", "b", "c"], ["a", "b"], ["a", "d"], ["a", "b", "e", "e"], ["f"]]
        queries = [["a"], ["b", "e"], ["a", "a", "f"], ["x"], []]
    got = build(docs, k1=k1, b=b, method="okapi", epsilon=eps).score_batch(queries).toarray()
    np.testing.assert_allclose(got, rank_dense(docs, queries, k1, b, eps), rtol=1e-5, atol=1e-5)


token = st.sampled_from(["a", "b", "c", "d", "e", "f", "g"])


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(token, max_size=8), min_size=1, max_size=12).filter(lambda d: any(d)),
    queries=st.lists(
        st.lists(st.sampled_from(["a", "c", "e", "g", "zz"]), max_size=4), min_size=1, max_size=4
    ),
    split=st.integers(0, 12),
)
def test_property_matches_both_references(
    docs: list[list[str]], queries: list[list[str]], split: int
) -> None:
    for method in ("lucene", "okapi"):
        index = BM25Index(k1=1.3, b=0.6, method=method)  # type: ignore[arg-type]
        index.add(docs[:split])
        index.score_batch(queries)  # interleave a query (and a possible merge) with adds
        index.add(docs[split:])
        got = index.score_batch(queries).toarray()
        if method == "lucene":
            want = bm25s_dense(docs, queries, 1.3, 0.6)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        else:
            want = rank_dense(docs, queries, 1.3, 0.6, 0.25)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["lucene", "okapi"])
def test_repeated_query_terms_count_per_occurrence(method: str) -> None:
    docs, _ = corpus_tokens()
    index = build(docs, method=method)
    once = index.score_batch([["lisbon", "cello"]]).toarray()
    twice = index.score_batch([["lisbon", "lisbon", "cello"]]).toarray()
    lisbon = index.score_batch([["lisbon"]]).toarray()
    np.testing.assert_allclose(twice, once + lisbon, rtol=1e-6)


# ---------------------------------------------------------------------- incremental
def test_incremental_adds_equal_fresh_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_module, "_TAIL_MIN", 16)  # force many tail merges
    docs, queries = zipf_corpus(2, 300, 120)
    fresh = build(docs)
    grown = BM25Index()
    rng = np.random.default_rng(3)
    pos = 0
    while pos < len(docs):
        step = int(rng.integers(1, 30))
        assert grown.add(docs[pos : pos + step]) == pos
        pos += step
        if rng.random() < 0.5:
            grown.topk(queries[:3], 5)
    assert len(grown) == len(fresh) == len(docs) and grown.vocab_size == fresh.vocab_size
    for term in ("w0", "w5", "w119", "absent"):
        assert grown.doc_freq(term) == fresh.doc_freq(term) == sum(term in d for d in docs)
    np.testing.assert_array_equal(
        grown.score_batch(queries).toarray(), fresh.score_batch(queries).toarray()
    )


def test_empty_documents_and_empty_index() -> None:
    index = BM25Index()
    assert index.score_batch([["a"], []]).shape == (2, 0)
    scores, slots = index.topk([["a"]], 3)
    assert slots.tolist() == [[-1, -1, -1]] and np.isneginf(scores).all()
    assert (
        index.add([[], ["a"], []]) == 0 and len(index) == 3 and index.avgdl == pytest.approx(1 / 3)
    )
    assert index.topk([["a"]], 3)[1].tolist() == [[1, -1, -1]]


# ---------------------------------------------------------------------- top-k and gates
def reference_topk(dense: np.ndarray, k: int, allowed: np.ndarray | None) -> list[list[int]]:
    out = []
    for row in dense:
        slots = [s for s in range(len(row)) if row[s] > 0 and (allowed is None or allowed[s])]
        slots.sort(key=lambda s: (-row[s], s))
        out.append(slots[:k] + [-1] * (k - len(slots[:k])))
    return out


@pytest.mark.parametrize("method", ["lucene", "okapi"])
def test_topk_matches_reference_with_ties_and_padding(method: str) -> None:
    docs, queries = zipf_corpus(4, 200, 40)
    docs += [["w1", "tie"], ["w1", "tie"], ["tie", "w1"]]  # exact ties: lower slot first
    index = build(docs, method=method)
    queries += [["w1", "tie"]]
    dense = index.score_batch(queries).toarray()
    for k in (1, 5, 250):
        scores, slots = index.topk(queries, k)
        assert scores.dtype == np.float32 and slots.dtype == np.int64
        assert slots.tolist() == reference_topk(dense, k, None)
        np.testing.assert_array_equal(
            scores,
            np.where(slots >= 0, np.take_along_axis(dense, np.maximum(slots, 0), 1), -np.inf),
        )
    tied_scores, tied = index.topk([["tie"]], 4)
    assert tied.tolist() == [[200, 201, 202, -1]] and len(set(tied_scores[0, :3].tolist())) == 1


def test_allowed_mask_applied_before_topk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_module, "_TOPK_CHUNK_NNZ", 64)  # many small query chunks
    docs, queries = zipf_corpus(5, 300, 60)
    index = build(docs)
    dense = index.score_batch(queries).toarray()
    rng = np.random.default_rng(6)
    allowed = rng.random(len(docs)) < 0.3
    allowed[np.argsort(-dense[0])[:20]] = False  # the best unfiltered hits are all gated out
    k = 10
    _scores, slots = index.topk(queries, k, allowed=allowed)
    assert slots.tolist() == reference_topk(dense, k, allowed)
    for row, want in zip(slots, (dense * allowed > 0).sum(axis=1)):
        assert (row >= 0).sum() == min(k, want)  # never fewer than k while k allowed hits exist
    assert np.all(allowed[slots[slots >= 0]])
    gated = index.score_batch(queries, allowed=allowed).toarray()
    np.testing.assert_array_equal(gated, dense * allowed)


def test_score_slots_equals_dense_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_module, "_TAIL_MIN", 10**9)  # keep a live tail for the lookup
    docs, queries = zipf_corpus(7, 250, 70)
    for method in ("lucene", "okapi"):
        index = build(docs[:150], method=method)
        index.compact()
        index.add(docs[150:])  # slots 150.. live in the tail
        rng = np.random.default_rng(8)
        slots = rng.integers(0, len(docs), size=(len(queries), 17))
        slots[0, :3] = -1
        got = index.score_slots(queries, slots)
        dense = index.score_batch(queries).toarray()
        want = np.where(slots >= 0, np.take_along_axis(dense, np.maximum(slots, 0), 1), -np.inf)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert index.score_slots([["w1"]], np.zeros((1, 0), dtype=np.int64)).shape == (1, 0)


# ---------------------------------------------------------------------- validation
def test_bad_arguments_raise_validation_error() -> None:
    index = build([["a", "b"], ["b"]])
    with pytest.raises(ValidationError):
        index.add("a b")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"tokens_batch\[1\]"):
        index.add([["a"], "b c"])
    with pytest.raises(ValidationError, match="str"):
        index.add([["new"], ["x", 3]])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="str"):
        index.add([["new"], [["unhashable"]]])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match=r"tokens_batch\[0\]"):
        index.add([5])  # type: ignore[list-item]
    assert len(index) == 2 and index.vocab_size == 2  # a refused batch changes nothing
    with pytest.raises(ValidationError):
        index.score_batch(["a b"])
    with pytest.raises(ValidationError):
        index.topk([[["a"]]], 1)  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="allowed"):
        index.topk([["a"]], 1, allowed=np.ones(3, dtype=bool))
    with pytest.raises(ValidationError, match="allowed"):
        index.score_batch([["a"]], allowed=np.ones(2, dtype=np.int8))
    with pytest.raises(ValidationError, match="k="):
        index.topk([["a"]], -1)
    with pytest.raises(ValidationError, match="slots"):
        index.score_slots([["a"]], np.array([[2]]))
    with pytest.raises(ValidationError, match="rows"):
        index.score_slots([["a"]], np.array([[0], [1]]))
    with pytest.raises(ConfigError):
        BM25Index(b=1.5)
    with pytest.raises(ConfigError):
        BM25Index(method="bm25+")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- persistence
@pytest.mark.parametrize("method", ["lucene", "okapi"])
def test_state_round_trip(method: str) -> None:
    docs, queries = corpus_tokens()
    docs += [["naïve", "日本語", ""]]
    index = BM25Index(
        method=method,
        k1=1.1,
        b=0.7,
        epsilon=0.3,
        analyzer=Analyzer().name,  # type: ignore[arg-type]
    )
    index.add(docs[:10])
    index.add(docs[10:])
    state = index.state()
    assert all(not a.flags.writeable for a in state.values())
    again = BM25Index.from_state(state, analyzer=Analyzer().name)
    assert again.method == method and again.analyzer == index.analyzer and len(again) == len(index)
    np.testing.assert_array_equal(
        again.score_batch(queries).toarray(), index.score_batch(queries).toarray()
    )
    for key, arr in again.state().items():
        np.testing.assert_array_equal(arr, state[key])
    again.add([["lisbon", "cello"]])
    index.add([["lisbon", "cello"]])
    np.testing.assert_array_equal(again.topk(queries, 4)[0], index.topk(queries, 4)[0])
    assert (again.k1, again.b, again.epsilon) == (1.1, 0.7, 0.3)
    with pytest.raises(ConfigError, match="analyzer"):
        BM25Index.from_state(state, analyzer=Analyzer(stemming=None).name)
    unnamed = build(docs).state()  # built without an analyzer name: adopts the caller's
    assert BM25Index.from_state(unnamed, analyzer="x").analyzer == "x"


def _mutations() -> list[tuple[str, Any]]:
    def setitem(key: str, pos: int, value: Any) -> Any:
        def f(s: dict[str, np.ndarray]) -> None:
            arr = s[key].copy()
            arr[pos] = value
            s[key] = arr

        return f

    def replace(key: str, value: Any) -> Any:
        def f(s: dict[str, np.ndarray]) -> None:
            s[key] = value(s[key]) if callable(value) else value

        return f

    return [
        ("missing key", lambda s: s.pop("tf")),
        ("not an array", replace("doc", [0, 1])),
        ("wrong dtype", replace("doc", lambda a: a.astype(np.int64))),
        ("big endian", replace("indptr", lambda a: a.astype(">i8"))),
        ("2-D", replace("doc_len", lambda a: a.reshape(1, -1))),
        ("format", replace("format", np.array([2], dtype=np.uint32))),
        ("params shape", replace("params", lambda a: a[:3])),
        ("b out of range", setitem("params", 1, 2.0)),
        ("k1 nan", setitem("params", 0, np.nan)),
        ("method code", setitem("params", 3, 7.0)),
        ("offset past blob", setitem("vocab_offsets", -1, 10**6)),
        ("offset decreasing", setitem("vocab_offsets", 1, 10**5)),
        ("indptr short", replace("indptr", lambda a: a[:-1])),
        ("indptr end", setitem("indptr", -1, 10**9)),
        ("empty term", _add_empty_term),
        ("slot out of range", setitem("doc", 0, 10**6)),
        ("negative slot", setitem("doc", 0, -1)),
        ("tf zero", setitem("tf", 0, 0)),
        ("tf short", replace("tf", lambda a: a[:-1])),
        ("doc_len mismatch", setitem("doc_len", 0, 999)),
        ("unsorted postings", replace("doc", lambda a: a[::-1].copy())),
        ("bad utf-8", setitem("vocab_blob", 0, 0xFF)),
        ("duplicate term", lambda s: _duplicate_first_term(s)),
        ("bad analyzer utf-8", replace("analyzer", np.array([0xC3], dtype=np.uint8))),
    ]


def _set_terms(s: dict[str, np.ndarray], terms: list[str]) -> None:
    encoded = [t.encode() for t in terms]
    s["vocab_blob"] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    s["vocab_offsets"] = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(
        np.int64
    )


def _terms(s: dict[str, np.ndarray]) -> list[str]:
    blob, off = s["vocab_blob"].tobytes(), s["vocab_offsets"]
    return [blob[off[i] : off[i + 1]].decode() for i in range(len(off) - 1)]


def _duplicate_first_term(s: dict[str, np.ndarray]) -> None:
    terms = _terms(s)
    _set_terms(s, [terms[0], terms[0], *terms[2:]])


def _add_empty_term(s: dict[str, np.ndarray]) -> None:
    _set_terms(s, [*_terms(s), "orphan"])  # a term with no postings
    s["indptr"] = np.r_[s["indptr"], s["indptr"][-1]].astype(np.int64)


@pytest.mark.parametrize("name,mutate", _mutations(), ids=[m[0] for m in _mutations()])
def test_corrupt_state_is_rejected(name: str, mutate: Any) -> None:
    docs, _ = corpus_tokens()
    state = dict(build(docs).state())
    mutate(state)
    with pytest.raises(CorruptionError):
        BM25Index.from_state(state)


# ---- dense scoring for the recall pathway ---------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(["lucene", "okapi"]),
    st.integers(0, 120),
    st.booleans(),
)
def test_score_dense_and_the_device_rounds_equal_scipys_product(
    seed: int, method: str, tail: int, gated: bool
) -> None:
    """``score_dense`` (native, postings read in place) and the round-based device twin give
    the float32 bits of ``score_batch(...).toarray()``, with a tail segment and a gate."""
    import random

    import torch

    from spector_gpu.pathways.recall.relays.lexical import lexical_block_rounds

    rng = random.Random(seed)
    vocab = [f"t{i}" for i in range(60)]
    weights = [1.0 / (i + 1) for i in range(60)]
    index = BM25Index(method=method)  # type: ignore[arg-type]
    index.add([rng.choices(vocab, weights=weights, k=rng.randint(0, 12)) for _ in range(150)])
    index.compact()
    index.add([rng.choices(vocab, weights=weights, k=rng.randint(0, 12)) for _ in range(tail)])
    queries = [rng.choices([*vocab, "unknown"], k=rng.randint(0, 6)) for _ in range(9)]
    allowed = np.array([rng.random() < 0.6 for _ in range(len(index))]) if gated else None
    want = index.score_batch(queries, allowed=allowed).toarray()
    np.testing.assert_array_equal(index.score_dense(queries, allowed=allowed), want)
    q, w = index.weights(queries, allowed=allowed)
    got = lexical_block_rounds(q, w, len(index), torch.device("cpu"))
    np.testing.assert_array_equal(got.numpy(), want)


def test_score_dense_refuses_a_bad_gate_and_handles_empty_input() -> None:
    index = BM25Index()
    assert index.score_dense([["a"]]).shape == (1, 0)
    index.add([["a", "b"], ["b"]])
    assert index.score_dense([]).shape == (0, 2)
    assert not index.score_dense([["zzz"], []]).any()
    with pytest.raises(ValidationError, match="allowed"):
        index.score_dense([["a"]], allowed=np.ones(3, dtype=bool))
