"""The query matrix without scipy (cortex/bm25_scoring.py ``query_terms``): the same CSR
arrays on its Python path (a few terms) and its numpy path, equal to the scipy matrix built
from the token lists directly, and ``QueryTerms.dot`` equal to scipy's ``Q @ v`` bit for bit
(the ceiling of every recall)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.cortex import bm25_scoring
from spector_gpu.cortex.bm25 import BM25Index
from spector_gpu.cortex.bm25_scoring import query_matrix, query_terms
from spector_gpu.errors import ValidationError

VOCAB = {f"w{i}": (i * 7919) % 101 for i in range(101)}  # ids not in word order

queries = st.lists(
    st.lists(st.sampled_from([*VOCAB, "unknown", "other"]), max_size=12), max_size=15
)


def _reference(tokens: list[list[str]]) -> tuple[sp.csr_matrix, np.ndarray]:
    uterms = np.array(sorted({VOCAB[t] for q in tokens for t in q if t in VOCAB}), np.int64)
    col = {t: j for j, t in enumerate(uterms.tolist())}
    dense = np.zeros((len(tokens), len(uterms)), dtype=np.float32)
    for i, q in enumerate(tokens):
        for t in q:
            if t in VOCAB:
                dense[i, col[VOCAB[t]]] += 1
    return sp.csr_matrix(dense), uterms


@settings(max_examples=300, deadline=None)
@given(queries)
def test_both_paths_give_the_reference_matrix(tokens: list[list[str]]) -> None:
    want, want_terms = _reference(tokens)
    for small in (0, 10_000):  # the numpy path, then the Python one for every size
        saved = bm25_scoring._SMALL
        bm25_scoring._SMALL = small
        try:
            q, uterms = query_terms(VOCAB, tokens)
        finally:
            bm25_scoring._SMALL = saved
        np.testing.assert_array_equal(uterms, want_terms)
        assert q.shape == want.shape
        assert q.indptr.dtype == np.int64 and q.indices.dtype == np.int64
        assert q.data.dtype == np.float32
        np.testing.assert_array_equal(q.indptr, want.indptr)
        np.testing.assert_array_equal(q.indices, want.indices)
        np.testing.assert_array_equal(q.data, want.data)
        vec = np.random.default_rng(len(tokens)).random(len(uterms)) * 7.3
        np.testing.assert_array_equal(q.dot(vec), np.asarray(want @ vec, dtype=np.float64))
    scipy_q, _ = query_matrix(VOCAB, tokens)
    assert (scipy_q != want).nnz == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["add", "retire", "ask"]), queries), min_size=1, max_size=8),
    st.sampled_from(["lucene", "okapi"]),
)
def test_remembered_terms_follow_every_change_of_the_statistics(
    steps: list[tuple[str, list[list[str]]]], method: str
) -> None:
    # The index remembers a batch's terms and IDF between the ceiling, the selection and the
    # pool's scores; every add or retire must show in the next answer, the same batch asked
    # again (or an equal one) must answer as a fresh index would.
    index = BM25Index(method=method)  # type: ignore[arg-type]
    docs: list[list[str]] = []
    retired: set[int] = set()
    asked = [["w1", "w2"], ["w3"]]
    for op, tokens in steps:
        if op == "add":
            index.add(tokens)
            docs += tokens
        elif op == "retire" and len(retired) < len(docs):
            slot = next(i for i in range(len(docs)) if i not in retired)
            index.retire(slot, docs[slot])
            retired.add(slot)
        else:
            asked = tokens or asked
        fresh = BM25Index(method=method)  # type: ignore[arg-type]
        fresh.add(docs)
        for slot in sorted(retired):
            fresh.retire(slot, docs[slot])
        for batch in (asked, [list(q) for q in asked]):  # the same batch, then an equal one
            assert index.ceiling(batch).tolist() == fresh.ceiling(batch).tolist()
            if docs:
                got, want = index.score_dense(batch), fresh.score_dense(batch)
                assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_a_query_passed_as_a_string_is_refused_after_its_tokens_were_asked() -> None:
    index = BM25Index()
    index.add([["a", "b"], ["b", "c"]])
    index.ceiling([["a", "b"]])
    with pytest.raises(ValidationError, match="string"):
        index.ceiling(["ab"])
    with pytest.raises(ValidationError):
        index.ceiling("ab")  # type: ignore[arg-type]
