"""Scoring pieces of the BM25 index (:mod:`.bm25`): the query matrix and native dense scores.

Scoring (``k1`` and ``b`` as given; ``dl`` a document's token count, ``avgdl`` the mean)::

    tfc    = tf / (tf + k1 * (1 - b + b * dl / avgdl))                  # method="lucene"
    idf    = ln(1 + (N - n + 0.5) / (n + 0.5))                          #  (== bm25s "lucene")
    tfc    = tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))       # method="okapi"
    idf    = ln(N - n + 0.5) - ln(n + 0.5), floored to epsilon * mean   #  (== rank_bm25
             idf over the vocabulary where negative                      #   BM25Okapi)
    score(q, d) = Σ_{t in q} idf(t) · tfc(t, d)

A query is a bag (a repeated term counts per occurrence, as in bm25s and rank_bm25); unknown
terms contribute 0.

:func:`query_matrix` turns a batch of token lists into ``Q`` (each query's multiplicity of the
batch's distinct known terms); :func:`topk_rows` takes each query's best slots from ``Q @ W``
in chunks of bounded size; :func:`dense_scores` forms ``Q @ W`` as a dense float32 block
in one native pass over the postings in place (``bm25_dense`` in ``kernels/csrc/bm25.c``,
the same float32 sums, in the same order, as scipy's product over the gathered ``W``;
:mod:`.bm25_select` takes each query's best scores from the same sums without the block).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from spector_gpu.errors import ValidationError

from ..kernels.native import native
from .bm25_postings import Postings

__all__ = [
    "KernelInputs",
    "QueryTerms",
    "WeightCache",
    "check_allowed",
    "check_slots",
    "dense_scores",
    "native_args",
    "query_matrix",
    "query_terms",
    "slot_scores",
    "topk_rows",
]


_SMALL = 64  # query terms below which the matrix is formed in Python (numpy's calls cost more)


@dataclass(frozen=True)
class QueryTerms:
    """``Q`` of :func:`query_matrix` as plain CSR arrays — what the native scoring reads,
    without the cost of a scipy matrix (tens of microseconds per recall): float32 multiplicities
    ``data`` at columns ``indices`` (ascending in each row) of rows ``indptr``, shape (n, m)."""

    indptr: np.ndarray  # int64 (n + 1,)
    indices: np.ndarray  # int64 (nnz,)
    data: np.ndarray  # float32 (nnz,)
    m: int

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.indptr) - 1, self.m

    def csr(self) -> sp.csr_matrix:
        """The scipy matrix (for the sparse-product paths)."""
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def dot(self, vec: np.ndarray) -> np.ndarray:
        """float64 (n,) ``Q @ vec`` for a float64 (m,) ``vec``: each row's products summed in
        column order, as scipy's product sums them."""
        n = self.shape[0]
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.indptr))
        prod = self.data.astype(np.float64) * vec[self.indices]
        out: np.ndarray = np.bincount(rows, weights=prod, minlength=n)
        return out


class WeightCache:
    """The main segment's posting weights ``float32(idf · tfc)``, one per posting, each term's
    kept while the statistics stand: a term's weights are current when its stamp is the
    index's generation (every add or retire moves it) and the main segment is the one they
    were computed over (a compaction or a load replaces its arrays). The selection kernels
    read a current term's weights from here and write the others' (the same float32 values
    they would compute: tests compare the cached and uncached routes with scipy's product).

    Queries share it (they hold the store's lock shared): the main segment and generation
    cannot change under them (only writes, under the exclusive hold, move them), so two
    kernels filling one term write the same values, and a term is marked only once its
    weights are written. Replacing the arrays for a new main segment is done once, under
    ``_swap``, so every query of a segment uses one set of arrays."""

    def __init__(self) -> None:
        self._swap = threading.Lock()
        self._doc: np.ndarray | None = None
        self.weights = np.zeros(0, dtype=np.float32)
        self._stamp = np.zeros(0, dtype=np.int64)  # generation per main term, -1: never

    def args(
        self, post: Postings, uterms: np.ndarray, generation: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(weights, cached)``: the cache over ``post``'s main segment and uint8 (u,) flags,
        1 where term ``uterms[j]``'s main weights there are current."""
        with self._swap:
            if post.doc is not self._doc:
                self.weights = np.zeros(len(post.doc), dtype=np.float32)
                self._stamp = np.full(post.main_terms, -1, dtype=np.int64)
                self._doc = post.doc
            weights, stamp = self.weights, self._stamp
        in_main = uterms < len(stamp)
        cached = np.zeros(len(uterms), dtype=np.uint8)
        cached[in_main] = stamp[uterms[in_main]] == generation
        return weights, cached

    def mark(self, uterms: np.ndarray, generation: int) -> None:
        """A kernel call over ``uterms`` returned: their main weights are now current."""
        with self._swap:
            stamp = self._stamp
        stamp[uterms[uterms < len(stamp)]] = generation


class KernelInputs(NamedTuple):
    """A batch as the native kernels read it: ``q`` and ``uterms`` (:func:`query_terms`),
    float64 IDF of ``uterms``, the postings, int32 document lengths and (k1, b, avgdl, okapi);
    the index's weight cache and the generation of its statistics, when the caller keeps one."""

    q: QueryTerms
    idf: np.ndarray
    post: Postings
    uterms: np.ndarray
    doc_len: np.ndarray
    params: tuple[float, float, float, bool]
    cache: WeightCache | None = None
    generation: int = 0

    def cache_args(self) -> tuple[np.ndarray, np.ndarray] | tuple[()]:
        """The selection kernels' trailing ``(weight_cache, cached)``, or nothing."""
        if self.cache is None:
            return ()
        return self.cache.args(self.post, self.uterms, self.generation)

    def cached(self) -> None:
        """The kernel returned: mark the batch's terms' main weights current."""
        if self.cache is not None:
            self.cache.mark(self.uterms, self.generation)


def check_allowed(allowed: np.ndarray | None, n_docs: int) -> np.ndarray | None:
    """``allowed`` once checked to be None or a bool (n_docs,) array, one flag per slot."""
    if allowed is None:
        return None
    if (
        not isinstance(allowed, np.ndarray)
        or allowed.dtype != np.bool_
        or allowed.shape != (n_docs,)
    ):
        raise ValidationError(
            f"allowed must be a numpy bool array of shape ({n_docs},) — one flag per slot"
        )
    return allowed


def check_slots(
    slots: object, n_docs: int, *, queries: int | None = None, name: str = "slots"
) -> None:
    """Refuse ``slots`` (called ``name``) unless a 2-D integer array of slots in [0, n_docs)
    or -1 (with one row per query when the number of ``queries`` is given)."""
    if not isinstance(slots, np.ndarray) or slots.ndim != 2 or slots.dtype.kind not in "iu":
        raise ValidationError(f"{name} must be a 2-D integer numpy array (n_queries, c)")
    if slots.size and (slots.min() < -1 or slots.max() >= n_docs):
        raise ValidationError(f"{name} must lie in [0, {n_docs}) or be -1 (padding)")
    if queries is not None and queries != slots.shape[0]:
        raise ValidationError(f"{name} has {slots.shape[0]} rows but {queries} queries were given")


def query_terms(
    vocab: Mapping[str, int], query_tokens: Sequence[Sequence[str]]
) -> tuple[QueryTerms, np.ndarray]:
    """``(Q, uterms int64 (m,))``: query-term multiplicities over the m distinct known terms
    of the batch (sorted ids; columns ascending in each row)."""
    if isinstance(query_tokens, (str, bytes)):
        raise ValidationError("query_tokens must be a sequence of token lists, not a string")
    get = vocab.get
    rows: list[int] = []
    cols: list[int] = []
    n = 0
    for i, query in enumerate(query_tokens):
        if isinstance(query, (str, bytes)):
            raise ValidationError(
                f"query_tokens[{i}] is a string; pass its tokens (Analyzer.tokens(text))"
            )
        try:
            for t in query:
                tid = get(t)
                if tid is not None:
                    rows.append(i)
                    cols.append(tid)
        except TypeError:
            raise ValidationError(f"query_tokens[{i}] must be a sequence of str") from None
        n = i + 1
    if len(cols) <= _SMALL:
        return _small_terms(rows, cols, n)
    uterms, inv = np.unique(np.asarray(cols, dtype=np.int64), return_inverse=True)
    m = len(uterms)
    keys, counts = np.unique(np.asarray(rows, dtype=np.int64) * m + inv, return_counts=True)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // max(m, 1), minlength=n), out=indptr[1:])
    q = QueryTerms(indptr, keys % max(m, 1), counts.astype(np.float32), m)
    return q, uterms


class TermsMemo:
    """:func:`query_terms` and the IDF of the batch's terms, remembered for the last few
    batches at one state of the statistics: a recall asks for them up to three times (its
    relevance ceiling, its selection, its pool's scores). A batch is known by its tokens
    (tuples of its token lists), so equal batches share an entry; any other input is left to
    :func:`query_terms` to accept or refuse."""

    SIZE = 4

    def __init__(self) -> None:
        self._entries: dict[
            tuple[tuple[str, ...], ...], tuple[int, QueryTerms, np.ndarray, np.ndarray]
        ] = {}

    def terms(
        self,
        vocab: Mapping[str, int],
        query_tokens: Sequence[Sequence[str]],
        generation: int,
        idf: Callable[[np.ndarray], np.ndarray],
    ) -> tuple[QueryTerms, np.ndarray, np.ndarray]:
        """``(Q, uterms, idf(uterms))``; ``generation`` names the statistics' state."""
        # a key equal to a valid batch's is that batch (no str equals a non-str); a query
        # passed as one string must still reach query_terms' refusal, not a memo entry
        plain = not isinstance(query_tokens, (str, bytes)) and all(
            type(q) in (list, tuple) for q in query_tokens
        )
        key = tuple(map(tuple, query_tokens)) if plain else None
        got = self._entries.get(key) if key is not None else None
        if got is not None and got[0] == generation:
            return got[1], got[2], got[3]
        q, uterms = query_terms(vocab, query_tokens)
        weights = idf(uterms)
        if key is not None:
            for shared in (q.indptr, q.indices, q.data, uterms, weights):
                shared.flags.writeable = False  # every later caller gets these very arrays
            if len(self._entries) >= self.SIZE:
                self._entries.clear()
            self._entries[key] = (generation, q, uterms, weights)
        return q, uterms, weights


def _small_terms(rows: list[int], cols: list[int], n: int) -> tuple[QueryTerms, np.ndarray]:
    """:func:`query_terms`' arrays for a few terms, formed in Python (the same values)."""
    uterms = sorted(set(cols))
    m = len(uterms)
    at = {t: j for j, t in enumerate(uterms)}
    counts = Counter(r * m + at[c] for r, c in zip(rows, cols, strict=True))
    keys = sorted(counts)
    per_row = [0] * (n + 1)
    for key in keys:
        per_row[key // m + 1] += 1
    indptr = np.cumsum(np.asarray(per_row, dtype=np.int64))
    indices = np.asarray([key % m for key in keys], dtype=np.int64)
    data = np.asarray([counts[key] for key in keys], dtype=np.float32)
    return QueryTerms(indptr, indices, data, m), np.asarray(uterms, dtype=np.int64)


def query_matrix(
    vocab: Mapping[str, int], query_tokens: Sequence[Sequence[str]]
) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(Q float32 csr (n, m), uterms int64 (m,))``: :func:`query_terms` as a scipy matrix."""
    q, uterms = query_terms(vocab, query_tokens)
    return q.csr(), uterms


def dense_scores(
    inputs: KernelInputs,
    allowed: np.ndarray | None,
) -> np.ndarray:
    """float32 (n, N) scores ``Q @ W`` of a batch over the ``allowed`` bool (N,) slots (or
    all) (native; the caller checked it is built)."""
    out = np.zeros((inputs.q.shape[0], len(inputs.doc_len)), dtype=np.float32)
    native.bm25_dense(*native_args(inputs, allowed), out)
    return out


def native_args(
    inputs: KernelInputs,
    allowed: np.ndarray | None,
) -> tuple[object, ...]:
    """The leading arguments of the native BM25 kernels (queries, postings, parameters)."""
    q, idf, post, uterms, doc_len = inputs.q, inputs.idf, inputs.post, inputs.uterms, inputs.doc_len
    k1, b, avgdl, okapi = inputs.params
    lo, hi, tptr, tdoc, ttf = post.ranges(uterms)
    return (
        q.indptr.astype(np.int64),
        q.indices.astype(np.int64),
        np.ascontiguousarray(q.data, dtype=np.float32),
        np.ascontiguousarray(idf, dtype=np.float64),
        lo,
        hi,
        post.doc,
        post.tf,
        tptr,
        np.ascontiguousarray(tdoc),
        np.ascontiguousarray(ttf),
        doc_len,
        allowed,
        k1,
        b,
        avgdl,
        okapi,
    )


def topk_rows(
    q: sp.csr_matrix, weights: sp.csr_matrix, k: int, chunk_nnz: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(scores float32 (n, k), slots int64 (n, k))``: each query's k best positive slots of
    ``q @ weights`` (ties: lower slot), products formed for chunks of queries whose score
    entries stay below ``chunk_nnz``; ``-inf`` / ``-1`` padding."""
    n = q.shape[0]
    scores = np.full((n, k), -np.inf, dtype=np.float32)
    slots = np.full((n, k), -1, dtype=np.int64)
    if k == 0 or weights.nnz == 0:
        return scores, slots
    # upper bound on each query's score entries: Σ postings of its distinct terms
    per_term = np.diff(weights.indptr)[q.indices]
    bound = np.bincount(np.repeat(np.arange(n), np.diff(q.indptr)), per_term, minlength=n)
    chunk_of = np.cumsum(bound) // chunk_nnz
    start = 0
    while start < n:
        stop = max(int(np.searchsorted(chunk_of, chunk_of[start], side="right")), start + 1)
        mat = (q if stop - start == n else q[start:stop]) @ weights
        for i in range(stop - start):
            _row_topk(mat, i, k, scores[start + i], slots[start + i])
        start = stop
    return scores, slots


def _row_topk(mat: sp.csr_matrix, i: int, k: int, scores: np.ndarray, slots: np.ndarray) -> None:
    lo, hi = mat.indptr[i], mat.indptr[i + 1]
    data, idx = mat.data[lo:hi], mat.indices[lo:hi]
    positive = data > 0
    if not positive.all():
        data, idx = data[positive], idx[positive]
    if len(data) > k:
        threshold = np.partition(data, len(data) - k)[len(data) - k]
        keep = data >= threshold  # every tie at the threshold stays in the running
        data, idx = data[keep], idx[keep]
    order = np.lexsort((idx, -data))[:k]
    scores[: len(order)] = data[order]
    slots[: len(order)] = idx[order]


def slot_scores(
    q: sp.csr_matrix,
    uterms: np.ndarray,
    slots: np.ndarray,
    lookup_tf: Callable[[np.ndarray, np.ndarray], np.ndarray],
    tfc: Callable[[np.ndarray, np.ndarray], np.ndarray],
    idf: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """float32 (n, c) scores of candidate ``slots`` int (n, c) (``-1``: padding → ``-inf``):
    one binary search per (query term, candidate) in the term's postings."""
    n, c = slots.shape
    out = np.zeros(n * c, dtype=np.float64)
    coo = q.tocoo()
    if coo.nnz and c:
        pair_entry = np.repeat(np.arange(coo.nnz), c)
        pair_col = np.tile(np.arange(c), coo.nnz)
        pair_out = coo.row[pair_entry].astype(np.int64) * c + pair_col
        doc = slots.reshape(-1)[pair_out].astype(np.int64)
        keep = doc >= 0
        pair_entry, pair_out, doc = pair_entry[keep], pair_out[keep], doc[keep]
        tf = lookup_tf(uterms[coo.col[pair_entry]], doc)
        hit = tf > 0
        entry = pair_entry[hit]
        w = tfc(tf[hit], doc[hit]) * idf(uterms)[coo.col[entry]] * coo.data[entry]
        out += np.bincount(pair_out[hit], weights=w, minlength=n * c)
    result = out.astype(np.float32).reshape(n, c)
    result[slots < 0] = -np.inf
    return result
