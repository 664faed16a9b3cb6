"""The query matrix without scipy (cortex/bm25_scoring.py ``query_terms``): the same CSR
arrays on its Python path (a few terms) and its numpy path, equal to the scipy matrix built
from the token lists directly, and ``QueryTerms.dot`` equal to scipy's ``Q @ v`` bit for bit
(the ceiling of every recall)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spector_gpu.cortex import bm25_scoring
from spector_gpu.cortex.bm25_scoring import query_matrix, query_terms

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
