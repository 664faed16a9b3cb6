"""Incremental BM25 index: dense integer document slots, batched sparse scoring.

Documents are slots ``0..N-1`` in insertion order; the caller maps slots to memories. Postings
live in two segments (:mod:`.bm25_postings`): a term-major *main* segment (CSC-like) and a
doc-major *tail* of recently added documents. ``add`` only appends to the tail; a query folds
the tail into main when it outgrows ``max(_TAIL_MIN, main/_TAIL_RATIO)`` postings (O(1)
amortised per posting). IDF and avgdl come from the current N, n(t) and total length at query
time, so scores always equal those of a fresh build over the same live documents.

Scores are Lucene's BM25 or Okapi's (formulas in :mod:`.bm25_scoring`); a batch is one sparse
product over its distinct query terms, dense native rows, or each query's best scores without
a block (:mod:`.bm25_select`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
import scipy.sparse as sp

from spector_gpu.errors import ConfigError, ValidationError

from ..kernels.native import native
from .bm25_postings import Postings, flatten_documents
from .bm25_scoring import (
    KernelInputs,
    QueryTerms,
    TermsMemo,
    WeightCache,
    check_allowed,
    check_slots,
    dense_scores,
    query_matrix,
    slot_scores,
    topk_rows,
)
from .bm25_select import RowScratch, ScoredRow, check_select, index_row, index_select
from .bm25_state import (
    BM25_STATE_VERSION,
    check_params,
    encode_state,
    same_analyzer,
    validated_state,
)
from .growable import Growable

__all__ = ["BM25_STATE_VERSION", "BM25Index"]

_TAIL_MIN = 1 << 14  # tail postings always tolerated before a merge
_TAIL_RATIO = 32  # ... or main postings / this, whichever is larger
_MAX_DOCS = 2**31 - 1  # slots and term ids are int32
_TOPK_CHUNK_NNZ = 1 << 23  # bound on score entries materialised at once by topk


class BM25Index:
    """BM25 over token lists, with O(new postings) adds and batched sparse scoring.

    Args:
        k1: term-frequency saturation (≥ 0).
        b: length normalisation in [0, 1].
        method: ``"lucene"`` (equals ``bm25s.BM25(method="lucene")``) or ``"okapi"`` (equals
            ``rank_bm25.BM25Okapi``); see the module docstring for the formulas.
        epsilon: okapi only: negative IDFs become ``epsilon × mean IDF``.
        analyzer: name of the analyzer that produced the tokens (``Analyzer.name``); stored in
            :meth:`state` so :meth:`from_state` can refuse a mismatched one.

    Threads: writes run alone (the store's exclusive hold); queries may run at once between
    writes once the tail is folded (:meth:`fold_due`, called by the recall plan under its lock).
    """

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        method: Literal["lucene", "okapi"] = "lucene",
        epsilon: float = 0.25,
        analyzer: str = "",
    ) -> None:
        check_params(k1, b, method, epsilon, ConfigError)
        if not isinstance(analyzer, str):
            raise ConfigError("BM25 analyzer must be a str (Analyzer.name)")
        self._k1, self._b, self._eps = float(k1), float(b), float(epsilon)
        self._method: Literal["lucene", "okapi"] = method
        self._analyzer = analyzer
        self._vocab: dict[str, int] = {}
        self._terms: list[str] = []
        self._df = Growable(np.int64)
        self._doc_len = Growable(np.int32)
        self._total_len = 0
        self._post = Postings()
        self._retired = Growable(np.bool_)  # slots whose document left the statistics
        self._n_retired = 0
        self._generation = 0
        self._avg_idf: tuple[int, float] = (-1, 0.0)
        self._rows = threading.local()  # each thread's RowScratch (score_row)
        self._fold = threading.Lock()
        self._memo = TermsMemo()
        self._weights = WeightCache()

    # ------------------------------------------------------------------ introspection
    def __len__(self) -> int:
        return self._doc_len.n

    vocab_size = property(lambda self: len(self._terms), doc="Distinct terms indexed.")

    method = property(lambda self: self._method, doc="``'lucene'`` or ``'okapi'``.")
    k1 = property(lambda self: self._k1, doc="Term-frequency saturation.")
    b = property(lambda self: self._b, doc="Length normalisation.")
    epsilon = property(lambda self: self._eps, doc="Okapi's negative-IDF floor factor.")
    analyzer = property(lambda self: self._analyzer, doc="Name of the tokens' analyzer.")

    @property
    def live(self) -> int:
        """Documents in the statistics: slots not :meth:`retire`\\ d (N of the IDF)."""
        return len(self) - self._n_retired

    @property
    def avgdl(self) -> float:
        """Mean length in tokens of the live documents (0.0 when none)."""
        return self._total_len / self.live if self.live else 0.0

    def doc_freq(self, term: str) -> int:
        """Number of documents containing ``term`` (0 if unknown)."""
        return int(self._df.buf[self._vocab[term]]) if term in self._vocab else 0

    def __repr__(self) -> str:
        return f"BM25Index(method={self._method!r}, k1={self._k1}, b={self._b}, docs={len(self)})"

    # ------------------------------------------------------------------ writes
    def add(self, tokens_batch: Sequence[Sequence[str]]) -> int:
        """Append documents (one token list each, e.g. ``Analyzer.tokens_batch``).

        Cost ∝ the new documents' tokens. A document may be empty (it never matches).
        Returns the first new slot (int); the i-th document gets slot ``first + i``.

        ``ValidationError``: the batch or a document is a string, or a token is not a str.
        """
        flat, lengths = flatten_documents(tokens_batch)
        first = len(self)
        if first + len(lengths) > _MAX_DOCS:
            raise ValidationError(f"BM25 index is limited to {_MAX_DOCS} documents")
        vocab = self._vocab
        try:
            new_terms = [t for t in dict.fromkeys(flat) if t not in vocab]
        except TypeError:
            new_terms = [next(t for t in flat if not isinstance(t, str))]
        for t in new_terms:
            if not isinstance(t, str):
                raise ValidationError(f"tokens must be str, got {type(t).__name__} ({t!r})")
        for t in new_terms:
            vocab[t] = len(self._terms)
            self._terms.append(t)
        self._df.extend(np.zeros(len(new_terms), dtype=np.int64))
        self._doc_len.extend(np.asarray(lengths, dtype=np.int32))
        self._retired.extend(np.zeros(len(lengths), dtype=np.bool_))
        self._total_len += len(flat)
        self._generation += 1
        if flat:
            ids = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
            n_terms = len(self._terms)
            local = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
            keys, tf = np.unique(local * n_terms + ids, return_counts=True)
            terms = keys % n_terms
            np.add.at(self._df.buf, terms, 1)
            self._post.append(keys // n_terms + first, terms, tf)
        return first

    def retire(self, slot: int, tokens: Sequence[str]) -> None:
        """Take document ``slot`` (added with ``tokens``) out of N, avgdl and the document
        frequencies (idempotent): the other documents then score as in a fresh build without
        it. Its postings stay until a rebuild; callers never allow the slot."""
        if not 0 <= slot < len(self) or self._retired.buf[slot]:
            return
        tids = [t for t in dict.fromkeys(tokens) if t in self._vocab]
        self._df.buf[np.fromiter(map(self._vocab.__getitem__, tids), np.int64, len(tids))] -= 1
        self._total_len -= int(self._doc_len.buf[slot])
        self._retired.buf[slot] = True
        self._n_retired += 1
        self._generation += 1

    def ceiling(self, query_tokens: Sequence[Sequence[str]]) -> np.ndarray:
        """float64 (n,): each query's supremum score, Σ q(t)·idf(t)·sup tfc (1 lucene, k1+1
        okapi; tfc approaches it as tf grows), so ``score / ceiling`` lies in [0, 1)."""
        q, uterms, idf = self._query_terms(query_tokens)
        if not len(uterms) or not self.live:
            return np.zeros(q.shape[0])
        top = self._k1 + 1.0 if self._method == "okapi" else 1.0
        idf = np.where(self._df.buf[uterms] > 0, np.maximum(idf, 0.0), 0.0)
        return q.dot(idf * top)

    def retired(self) -> np.ndarray:
        """bool (N,): the slots :meth:`retire` took out (a copy)."""
        return self._retired.view().copy()

    def compact(self) -> None:
        """Fold the tail into the main segment now (queries and :meth:`state` do when due)."""
        self._post.compact(self.vocab_size, len(self))

    def fold_due(self) -> None:
        """Fold the tail into the main segment if it outgrew its bound. Folding rewrites the
        postings in place: concurrent queries call this first, alone (the recall plan does)."""
        with self._fold:
            if self._post.tail_size > max(_TAIL_MIN, len(self._post.doc) // _TAIL_RATIO):
                self.compact()

    # ------------------------------------------------------------------ scoring internals
    def _idf(self, uterms: np.ndarray) -> np.ndarray:
        """IDF float64 (m,) of the given term ids at the current N."""
        n_docs = float(self.live)
        df = self._df.buf[uterms].astype(np.float64)
        if self._method == "lucene":
            return np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))  # type: ignore[no-any-return]
        if self._avg_idf[0] != self._generation:
            all_df = self._df.view()[self._df.view() > 0].astype(np.float64)  # live terms
            raw = np.log(n_docs - all_df + 0.5) - np.log(all_df + 0.5)
            self._avg_idf = (self._generation, float(raw.sum()) / max(len(raw), 1))
        idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
        return np.where(idf < 0, self._eps * self._avg_idf[1], idf)

    def _tfc(self, tf: np.ndarray, doc: np.ndarray) -> np.ndarray:
        """Term-frequency component float64 for postings (tf, doc)."""
        tf64 = tf.astype(np.float64)
        dl = self._doc_len.buf[doc].astype(np.float64)
        norm = self._k1 * (1.0 - self._b + self._b * dl / self.avgdl)
        num = tf64 * (self._k1 + 1.0) if self._method == "okapi" else tf64
        return num / (tf64 + norm)  # type: ignore[no-any-return]

    def kernel_inputs(self, query_tokens: Sequence[Sequence[str]]) -> KernelInputs:
        """What the native kernels read for a batch (the tail folded first when due)."""
        self.fold_due()
        q, uterms, idf = self._query_terms(query_tokens)
        params = (self._k1, self._b, self.avgdl, self._method == "okapi")
        post, doc_len = self._post, self._doc_len.view()
        return KernelInputs(q, idf, post, uterms, doc_len, params, self._weights, self._generation)

    def _query_terms(
        self, query_tokens: Sequence[Sequence[str]]
    ) -> tuple[QueryTerms, np.ndarray, np.ndarray]:
        """``(Q, uterms, idf)`` of a batch at the current statistics (:class:`TermsMemo`)."""
        return self._memo.terms(self._vocab, query_tokens, self._generation, self._idf)

    # ------------------------------------------------------------------ scoring API
    def weights(
        self, query_tokens: Sequence[Sequence[str]], *, allowed: np.ndarray | None = None
    ) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """The two factors of :meth:`score_batch` (``== Q @ W``): ``Q`` float32 csr (n, m),
        each query's multiplicity of the batch's m distinct known terms, and ``W`` float32 csr
        (m, N), ``float32(idf · tfc)`` over the allowed documents; a score accumulates
        ``float32(Q[i, j] · W[j, d])`` in float32 in ascending ``j`` (scipy's order)."""
        allowed = check_allowed(allowed, len(self))
        self.fold_due()
        q, uterms = query_matrix(self._vocab, query_tokens)
        if len(uterms) == 0 or len(self) == 0:
            return q, sp.csr_matrix((len(uterms), len(self)), dtype=np.float32)
        indptr, doc, tf = self._post.gather(uterms, allowed)
        w = self._tfc(tf, doc) * np.repeat(self._idf(uterms), np.diff(indptr))
        return q, sp.csr_matrix((w.astype(np.float32), doc, indptr), shape=(len(uterms), len(self)))

    def score_dense(
        self, query_tokens: Sequence[Sequence[str]], *, allowed: np.ndarray | None = None
    ) -> np.ndarray:
        """float32 (n, N) BM25 scores of every (query, slot): ``score_batch(...).toarray()``,
        bit for bit, computed by one native pass over the postings in place when the native
        kernels are built (no posting is copied and no sparse matrix is formed)."""
        allowed = check_allowed(allowed, len(self))
        if native is None:
            return np.asarray(self.score_batch(query_tokens, allowed=allowed).toarray())
        inputs = self.kernel_inputs(query_tokens)
        if len(inputs.uterms) == 0 or len(self) == 0:
            return np.zeros((inputs.q.shape[0], len(self)), dtype=np.float32)
        return dense_scores(inputs, allowed)

    def select(
        self,
        query_tokens: Sequence[Sequence[str]],
        depth: int,
        *,
        allowed: np.ndarray | None = None,
        candidates: np.ndarray | None = None,
        threads: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Each query's ``depth`` best scores and the scores of ``candidates`` int (n, W)
        slots (``-1``: padding), without an (n, N) block: ``(scores float32 (n, depth),
        slots int64 (n, depth), candidate scores float32 (n, W) or None)`` — positive scores
        best first, ties to the lower slot, ``-inf`` / ``-1`` padding; a candidate scores 0
        where it matches no term, is not ``allowed`` or is padding. Every value equals
        :meth:`score_dense`'s bit for bit, natively one scratch row per thread, each document
        started from 0 where reached. ``threads`` is deprecated and ignored (leave it out)."""
        return index_select(self, query_tokens, depth, allowed, candidates, threads)

    def score_row(
        self, tokens: Sequence[str], depth: int, *, allowed: np.ndarray | None = None
    ) -> ScoredRow:
        """One query's best ``depth`` scores and, until released, the score of any slot
        (:class:`.ScoredRow`; its values are :meth:`select`'s) from one pass over the postings:
        the index keeps the query's row (one per thread: the thread's next row releases it)."""
        scratch: RowScratch | None = getattr(self._rows, "scratch", None)
        if scratch is None:
            scratch = self._rows.scratch = RowScratch()
        return index_row(self, tokens, depth, allowed, scratch)

    def score_batch(
        self, query_tokens: Sequence[Sequence[str]], *, allowed: np.ndarray | None = None
    ) -> sp.csr_matrix:
        """BM25 scores of every (query, slot) pair as a sparse matrix.

        Args:
            query_tokens: n token lists (one per query).
            allowed: optional bool (N,); slots with ``False`` get no entry.

        Returns:
            ``csr_matrix`` float32 (n, N); absent entries score 0. In okapi mode entries may be
            ≤ 0 (negative-IDF terms with a negative floor).
        """
        q, weights = self.weights(query_tokens, allowed=allowed)
        return sp.csr_matrix(q @ weights)

    def topk(
        self,
        query_tokens: Sequence[Sequence[str]],
        k: int,
        *,
        allowed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(scores float32 (n, k), slots int64 (n, k))``: the k best allowed slots per query,
        best first, padded with ``-inf`` / ``-1``. Only positive scores are hits; ties go to
        the lower slot; queries are scored in chunks (memory ∝ the index, not n × N)."""
        k = check_select(query_tokens, k, None, 1, len(self), name="k")
        q, weights = self.weights(query_tokens, allowed=allowed)
        return topk_rows(q, weights, k, _TOPK_CHUNK_NNZ)

    def score_slots(self, query_tokens: Sequence[Sequence[str]], slots: np.ndarray) -> np.ndarray:
        """Scores of given candidate slots per query (e.g. the dense relay's candidates).

        Args:
            query_tokens: n token lists.
            slots: int (n, c) slot numbers in [0, N); ``-1`` marks padding.

        Returns:
            float32 (n, c): the score of ``slots[i, j]`` for query i (0 when it matches no
            term), ``-inf`` at padding. Equal to :meth:`score_batch` up to float32 rounding.
        """
        self.fold_due()
        q, uterms = query_matrix(self._vocab, query_tokens)
        check_slots(slots, len(self), queries=q.shape[0])
        return slot_scores(q, uterms, slots, self._post.lookup_tf, self._tfc, self._idf)

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict[str, np.ndarray]:
        """Everything needed to rebuild the index, as little-endian arrays (compacts first;
        the layout is documented in :mod:`.bm25_state`; arrays are read-only views)."""
        post = self._post
        if post.tail_size or post.main_terms != self.vocab_size:
            self.compact()
        return encode_state(
            k1=self._k1,
            b=self._b,
            epsilon=self._eps,
            method=self._method,
            analyzer=self._analyzer,
            terms=self._terms,
            indptr=post.indptr,
            doc=post.doc,
            tf=post.tf,
            doc_len=self._doc_len.view(),
        )

    @classmethod
    def from_state(
        cls, state: Mapping[str, np.ndarray], *, analyzer: str | None = None
    ) -> BM25Index:
        """Rebuild an index from :meth:`state`, validating every array (copies the data).

        Args:
            analyzer: if given, the analyzer name the caller will query with; a different
                stored name raises :class:`ConfigError` (an index stored without a name
                adopts this one).

        Raises:
            CorruptionError: a missing key, wrong dtype/shape, out-of-range offset, slot or
                count, bad UTF-8, duplicate term, or inconsistent lengths.
        """
        arrays, params, terms, stored = validated_state(state)
        k1, b, eps, code = params
        method: Literal["lucene", "okapi"] = "lucene" if code == 0 else "okapi"
        index = cls(
            k1=k1, b=b, method=method, epsilon=eps, analyzer=same_analyzer(stored, analyzer)
        )
        index._terms = terms
        index._vocab = {t: i for i, t in enumerate(terms)}
        index._post.set_main(arrays["indptr"], arrays["doc"], arrays["tf"], len(arrays["doc_len"]))
        index._df.extend(np.diff(arrays["indptr"]))
        index._doc_len.extend(arrays["doc_len"])
        index._retired.extend(np.zeros(len(arrays["doc_len"]), dtype=np.bool_))
        index._total_len = int(arrays["doc_len"].sum(dtype=np.int64))
        return index
