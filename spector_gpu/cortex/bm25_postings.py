"""Postings of the BM25 index (:mod:`.bm25`): a term-major main segment and a doc-major tail.

The *main* segment is CSC-like over terms: postings of term ``t`` are
``doc[indptr[t]:indptr[t+1]]`` (int32 slots, strictly increasing) with ``tf`` (int32 ≥ 1) beside
them, covering slots ``[0, main_docs)``. The *tail* holds the postings of documents added since
(slots ``[main_docs, N)``) in doc-major order, in growable arrays ``t_doc``, ``t_term``, ``t_tf``;
:meth:`Postings.compact` folds it into main (an O(P) merge). The index decides when.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from spector_gpu.errors import ValidationError

from .growable import Growable

__all__ = ["Postings", "flatten_documents"]

logger = logging.getLogger(__name__)


def flatten_documents(tokens_batch: Sequence[Sequence[str]]) -> tuple[list[str], list[int]]:
    """Every document's tokens, concatenated, and each document's token count; refuses a
    batch or document given as a string, or a document that is not a sequence."""
    if isinstance(tokens_batch, (str, bytes)):
        raise ValidationError("tokens_batch must be a sequence of token lists, not a string")
    flat: list[str] = []
    lengths: list[int] = []
    for i, doc in enumerate(tokens_batch):
        if isinstance(doc, (str, bytes)):
            raise ValidationError(
                f"tokens_batch[{i}] is a string; pass its tokens (Analyzer.tokens(text))"
            )
        before = len(flat)
        try:
            flat.extend(doc)
        except TypeError:
            raise ValidationError(f"tokens_batch[{i}] is not a sequence of tokens") from None
        lengths.append(len(flat) - before)
    return flat, lengths


def _columns_of(uterms: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """int64 (len(terms),): each term's position in ``uterms`` (sorted, distinct term ids), -1
    for a term not there. A search of the query's few terms, not a scratch table written per
    query, so queries beside each other share nothing they write."""
    if not len(uterms):
        return np.full(len(terms), -1, dtype=np.int64)
    pos = np.searchsorted(uterms, terms)
    found = uterms[np.minimum(pos, len(uterms) - 1)] == terms
    return np.where(found, pos, -1).astype(np.int64)


def _interleave(cnt_a: np.ndarray, cnt_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge two group-ordered arrays group by group (a's items first within each group).

    Returns ``indptr`` int64 (G+1,) of the merged groups and the merged positions of a's and
    b's items (int64), so ``out[pos_a] = a; out[pos_b] = b``.
    """
    total = cnt_a + cnt_b
    indptr = np.zeros(len(total) + 1, dtype=np.int64)
    np.cumsum(total, out=indptr[1:])
    start_a = np.cumsum(cnt_a) - cnt_a
    start_b = np.cumsum(cnt_b) - cnt_b
    pos_a = np.repeat(indptr[:-1] - start_a, cnt_a) + np.arange(int(cnt_a.sum()), dtype=np.int64)
    pos_b = np.repeat(indptr[:-1] + cnt_a - start_b, cnt_b)
    pos_b += np.arange(len(pos_b), dtype=np.int64)
    return indptr, pos_a, pos_b


class Postings:
    """The two posting segments (see the module docstring) and the queries over both.

    Threads: writes (:meth:`append`, :meth:`compact`, :meth:`set_main`) run alone; queries
    (:meth:`gather`, :meth:`ranges`, :meth:`lookup_tf`) write nothing here and run at once.
    """

    def __init__(self) -> None:
        self.indptr = np.zeros(1, dtype=np.int64)  # main segment, term-major
        self.doc = np.zeros(0, dtype=np.int32)
        self.tf = np.zeros(0, dtype=np.int32)
        self.main_docs = 0  # main covers slots [0, main_docs)
        self.t_doc = Growable(np.int32)  # tail, doc-major, slots [main_docs, N)
        self.t_term = Growable(np.int32)
        self.t_tf = Growable(np.int32)

    @property
    def tail_size(self) -> int:
        """Postings in the tail."""
        return self.t_doc.n

    @property
    def main_terms(self) -> int:
        """Terms the main segment has a posting range for."""
        return len(self.indptr) - 1

    def append(self, doc: np.ndarray, term: np.ndarray, tf: np.ndarray) -> None:
        """Add postings of new documents to the tail, in doc-major order."""
        self.t_doc.extend(doc)
        self.t_term.extend(term)
        self.t_tf.extend(tf)

    def set_main(self, indptr: np.ndarray, doc: np.ndarray, tf: np.ndarray, n_docs: int) -> None:
        """Adopt a validated main segment covering slots ``[0, n_docs)`` (empty tail)."""
        self.indptr, self.doc, self.tf, self.main_docs = indptr, doc, tf, n_docs

    def compact(self, n_terms: int, n_docs: int) -> None:
        """Fold the tail into the main segment (O(total postings)); main then covers
        ``n_terms`` terms and slots ``[0, n_docs)``."""
        m_cnt = np.zeros(n_terms, dtype=np.int64)
        m_cnt[: self.main_terms] = np.diff(self.indptr)
        t_term = self.t_term.view()
        order = np.argsort(t_term, kind="stable")
        t_cnt = np.bincount(t_term, minlength=n_terms)
        indptr, pos_m, pos_t = _interleave(m_cnt, t_cnt)
        doc = np.empty(int(indptr[-1]), dtype=np.int32)
        tf = np.empty_like(doc)
        doc[pos_m], tf[pos_m] = self.doc, self.tf
        doc[pos_t], tf[pos_t] = self.t_doc.view()[order], self.t_tf.view()[order]
        logger.debug("BM25 tail merge: %d + %d postings", len(self.doc), len(t_term))
        self.indptr, self.doc, self.tf, self.main_docs = indptr, doc, tf, n_docs
        self.t_doc.clear()
        self.t_term.clear()
        self.t_tf.clear()

    def gather(self, uterms: np.ndarray, allowed: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """Postings of ``uterms`` (sorted term ids) grouped by position in ``uterms``, slots
        with ``allowed`` False dropped: ``(indptr int64, doc int32, tf int32)``."""
        in_main = uterms[uterms < self.main_terms]
        starts, ends = self.indptr[in_main], self.indptr[in_main + 1]
        lens = ends - starts
        idx = np.repeat(starts - (np.cumsum(lens) - lens), lens)
        idx += np.arange(len(idx), dtype=np.int64)
        cnt_m = np.zeros(len(uterms), dtype=np.int64)
        cnt_m[: len(in_main)] = lens  # uterms is sorted, so the main segment's terms come first
        m_doc, m_tf = self.doc[idx], self.tf[idx]
        t_term = self.t_term.view()
        if len(t_term) and len(uterms):
            t_local = _columns_of(uterms, t_term)
            hit = np.flatnonzero(t_local >= 0)
            t_local = t_local[hit]
            order = np.argsort(t_local, kind="stable")
            t_local, hit = t_local[order], hit[order]
            t_doc, t_tf = self.t_doc.view()[hit], self.t_tf.view()[hit]
        else:
            t_local = np.zeros(0, dtype=np.int64)
            t_doc = t_tf = np.zeros(0, dtype=np.int32)
        local_m = np.repeat(np.arange(len(uterms)), cnt_m)
        if allowed is not None:
            keep_m, keep_t = allowed[m_doc], allowed[t_doc]
            local_m, m_doc, m_tf = local_m[keep_m], m_doc[keep_m], m_tf[keep_m]
            t_local, t_doc, t_tf = t_local[keep_t], t_doc[keep_t], t_tf[keep_t]
        indptr, pos_m, pos_t = _interleave(
            np.bincount(local_m, minlength=len(uterms)), np.bincount(t_local, minlength=len(uterms))
        )
        doc = np.empty(int(indptr[-1]), dtype=np.int32)
        tf = np.empty(len(doc), dtype=np.int32)
        doc[pos_m], tf[pos_m] = m_doc, m_tf
        doc[pos_t], tf[pos_t] = t_doc, t_tf
        return indptr, doc, tf

    def ranges(self, uterms: np.ndarray) -> tuple[np.ndarray, ...]:
        """Where the postings of ``uterms`` (sorted term ids) are, without copying the main
        segment: ``(main_lo, main_hi)`` int64 (u,) ranges into ``doc`` / ``tf`` (empty for a
        term newer than the main segment), and the tail postings of the terms grouped by
        position in ``uterms``: ``(tail_indptr int64 (u+1,), tail_doc int32, tail_tf int32)``."""
        u = len(uterms)
        lo = np.zeros(u, dtype=np.int64)
        hi = np.zeros(u, dtype=np.int64)
        in_main = uterms < self.main_terms
        lo[in_main] = self.indptr[uterms[in_main]]
        hi[in_main] = self.indptr[uterms[in_main] + 1]
        t_term = self.t_term.view()
        tptr = np.zeros(u + 1, dtype=np.int64)
        if not len(t_term) or not u:
            empty = np.zeros(0, dtype=np.int32)
            return lo, hi, tptr, empty, empty
        local = _columns_of(uterms, t_term)
        hit = np.flatnonzero(local >= 0)
        order = np.argsort(local[hit], kind="stable")
        hit = hit[order]
        np.cumsum(np.bincount(local[hit], minlength=u), out=tptr[1:])
        return lo, hi, tptr, self.t_doc.view()[hit], self.t_tf.view()[hit]

    def lookup_tf(self, terms: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """tf int64 of each (term, doc) pair (0 when absent); expects a compacted-or-small tail."""
        tf = np.zeros(len(terms), dtype=np.int64)
        in_main = (terms < self.main_terms) & (docs < self.main_docs)
        t, d = terms[in_main], docs[in_main]
        lo, end = self.indptr[t], self.indptr[t + 1]
        hi = end.copy()
        while True:  # vectorised lower_bound of d in doc[lo:hi]
            active = np.flatnonzero(lo < hi)
            if not len(active):
                break
            mid = (lo[active] + hi[active]) // 2
            go_right = self.doc[mid] < d[active]
            lo[active[go_right]] = mid[go_right] + 1
            hi[active[~go_right]] = mid[~go_right]
        found = lo < end
        found[found] = self.doc[lo[found]] == d[found]
        sub = np.zeros(len(t), dtype=np.int64)
        sub[found] = self.tf[lo[found]]
        tf[in_main] = sub
        if self.t_doc.n:
            t_key = self.t_doc.view().astype(np.int64) << 31 | self.t_term.view()
            query_key = docs << 31 | terms
            pos = np.minimum(np.searchsorted(t_key, query_key), len(t_key) - 1)
            match = (t_key[pos] == query_key) & ~in_main
            tf[match] = self.t_tf.view()[pos[match]]
        return tf
