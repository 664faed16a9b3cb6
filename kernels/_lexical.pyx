# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The lexical kernels (``csrc/bm25.c``, ``csrc/token.c``), bound by Cython.

BM25 over the postings in place: ``bm25_dense`` (score rows), ``bm25_select`` (each query's
best scores and the scores of given slots, one scratch row per calling thread, kept between
calls and freed with the thread), ``bm25_row`` / ``bm25_row_release`` (one query whose row
stays written until its slots are read). ``token_rescore``: the token relay's MaxSim and
order. Every shape and range is checked here (``ValueError`` naming the argument) before the
C code runs without the GIL, on the calling thread.
"""

import threading

import numpy as np

from .flags import byte_flags
from .sharing import RowsAhead, share_rows

from libc.stdint cimport int16_t, int32_t, int64_t, int8_t, uint8_t, uint64_t


cdef extern from "csrc/bm25.c" nogil:
    ctypedef struct Bm25:
        const int64_t *qptr
        const int64_t *qcol
        const int64_t *mlo
        const int64_t *mhi
        const int64_t *tptr
        const int64_t *woff
        const float *qcnt
        const double *idf
        const int32_t *mdoc
        const int32_t *mtf
        const int32_t *tdoc
        const int32_t *ttf
        const int32_t *len
        const uint8_t *allowed
        const uint8_t *cached
        float *wmain
        float *wbuf
        Py_ssize_t n_docs
        double k1, b, avgdl
        int okapi

    void bm25_term_weights(const Bm25 *z, int64_t j)
    Py_ssize_t bm25_accumulate(const Bm25 *z, Py_ssize_t i, float *acc, uint64_t *mark,
                               int32_t *list)
    int bm25_query(const Bm25 *z, Py_ssize_t i, float *acc, uint64_t *mark, int32_t *list,
                   void *buf,
                   Py_ssize_t depth, float *keys, int64_t *slots, const int64_t *cand,
                   float *cout, Py_ssize_t width, int keep)
    int ctz "__builtin_ctzll"(unsigned long long x)
    int64_t claim_row(int64_t *n)


cdef extern from "csrc/token.c" nogil:
    ctypedef struct TokJob:
        const float *fused
        const int8_t *codes
        const int32_t *counts
        const int32_t *ids
        const int32_t *qids
        const int64_t *ordinals
        const int64_t *offsets
        const int64_t *qoff
        const double *norm
        const double *weight
        Py_ssize_t width, vocab, dim
        double token_weight
        int64_t *out_order
        float *out_fused
        double *out_token

    ctypedef struct TokScratch:
        int32_t *slot
        int32_t *uniq
        int32_t *pslot
        int32_t *idots
        int16_t *qcodes
        double *sims
        void *rank
        double *tmp

    int token_query(const TokJob *j, const TokScratch *s, Py_ssize_t i)


def _flat(fn, name, obj, dtype, Py_ssize_t n=-1, writable=False):
    """``obj`` as a flat C-contiguous ``dtype`` array of n items (any n when n < 0)."""
    a = np.asarray(obj)
    if (
        a.dtype != dtype
        or not a.flags.c_contiguous
        or (n >= 0 and a.size != n)
        or (writable and not a.flags.writeable)
    ):
        need = f"{n} " if n >= 0 else ""
        raise ValueError(
            f"{fn}: {name} must be {need}{'writable ' if writable else ''}C-contiguous "
            f"{np.dtype(dtype).name}, got {a.dtype.name} of shape {a.shape}"
        )
    return a.reshape(-1)


def _size(fn, name, want, got):
    raise ValueError(f"{fn}: {name} must hold {want} items, not {got}")


cdef class _Postings:
    """A batch's postings checked and their weights computed (the Bm25 of csrc/bm25.c); it
    holds every array the struct points into."""

    cdef Bm25 z
    cdef public Py_ssize_t m
    cdef object keep

    def __init__(self, fn, const int64_t[::1] qp not None, const int64_t[::1] qc not None,
                 const float[::1] qn not None, const double[::1] ip not None,
                 const int64_t[::1] lo not None, const int64_t[::1] hi not None,
                 const int32_t[::1] md not None, const int32_t[::1] mt not None,
                 const int64_t[::1] tp not None, const int32_t[::1] td not None,
                 const int32_t[::1] tt not None, const int32_t[::1] dl not None, allowed,
                 double k1, double b, double avgdl, okapi, weight_cache=None, cached=None):
        cdef Py_ssize_t nnz = qc.shape[0], m = qp.shape[0] - 1, u = ip.shape[0]
        if qn.shape[0] != nnz:
            _size(fn, "q_counts", nnz, qn.shape[0])
        if lo.shape[0] != u or hi.shape[0] != u:
            _size(fn, "main_lo and main_hi", u, lo.shape[0])
        if tp.shape[0] != u + 1:
            _size(fn, "tail_indptr", u + 1, tp.shape[0])
        if mt.shape[0] != md.shape[0] or tt.shape[0] != td.shape[0]:
            raise ValueError(f"{fn}: main_tf and tail_tf must be as long as main_doc and tail_doc")
        cdef const uint8_t[::1] ap = None
        cdef float[::1] wm = None
        cdef const uint8_t[::1] cf = None
        cdef Py_ssize_t i, e, j
        cdef int64_t mlen = md.shape[0], tlen = td.shape[0]
        if allowed is not None:
            flags = byte_flags(allowed, f"{fn}: allowed")
            allowed = ap = _flat(fn, "allowed", flags, np.uint8, dl.shape[0])
        if (weight_cache is None) != (cached is None):
            raise ValueError(f"{fn}: weight cache and its flags go together")
        if weight_cache is not None:
            weight_cache = wm = _flat(fn, "weight_cache", weight_cache, np.float32, mlen, True)
            cached = cf = _flat(fn, "cached", byte_flags(cached, f"{fn}: cached"), np.uint8, u)
        if m < 0 or qp[0] != 0 or qp[m] != nnz:
            raise ValueError(f"{fn}: q_indptr must run from 0 to nnz")
        for i in range(m):
            if qp[i] > qp[i + 1]:
                raise ValueError(f"{fn}: q_indptr must not decrease")
        for e in range(nnz):
            j = qc[e]
            if (j < 0 or j >= u or lo[j] < 0 or lo[j] > hi[j] or hi[j] > mlen or tp[j] < 0
                    or tp[j] > tp[j + 1] or tp[j + 1] > tlen):
                raise ValueError(f"{fn}: a posting range is out of bounds")
        # each distinct term's weights, once: main (unless cached) then tail, at woff[j]
        woff_a = np.zeros(u + 1, dtype=np.int64)
        cdef int64_t[::1] woff = woff_a
        for j in range(u):
            woff[j + 1] = woff[j] + (0 if wm is not None else hi[j] - lo[j]) + tp[j + 1] - tp[j]
        wbuf_a = np.empty(max(woff[u], 1), dtype=np.float32)
        cdef float[::1] wb = wbuf_a
        # (the caller holds the arrays passed in for the call; these are made here)
        self.keep = (allowed, weight_cache, cached, woff_a, wbuf_a)
        self.m = m
        cdef Bm25 *z = &self.z
        z.qptr = &qp[0]
        z.qcol = &qc[0] if nnz else NULL
        z.qcnt = &qn[0] if nnz else NULL
        z.idf = &ip[0] if u else NULL
        z.mlo = &lo[0] if u else NULL
        z.mhi = &hi[0] if u else NULL
        z.tptr = &tp[0]
        z.woff = &woff[0]
        z.mdoc = &md[0] if mlen else NULL
        z.mtf = &mt[0] if mlen else NULL
        z.tdoc = &td[0] if tlen else NULL
        z.ttf = &tt[0] if tlen else NULL
        z.len = &dl[0] if dl.shape[0] else NULL
        z.allowed = &ap[0] if ap is not None and dl.shape[0] else NULL
        z.wmain = &wm[0] if wm is not None and mlen else NULL
        z.cached = &cf[0] if cf is not None and u else NULL
        z.wbuf = &wb[0]
        z.n_docs = dl.shape[0]
        z.k1 = k1
        z.b = b
        z.avgdl = avgdl
        z.okapi = bool(okapi)
        seen = np.zeros(max(u, 1), dtype=np.uint8)
        cdef uint8_t[::1] sn = seen
        with nogil:
            for e in range(nnz):
                j = qc[e]
                if not sn[j]:
                    sn[j] = 1
                    bm25_term_weights(&self.z, j)


_BM25 = ("q_indptr, q_terms, q_counts, idf, main_lo, main_hi, main_doc, main_tf, tail_indptr, "
         "tail_doc, tail_tf, doc_len, allowed, k1, b, avgdl, okapi")


def bm25_dense(q_indptr, q_terms, q_counts, idf, main_lo, main_hi, main_doc, main_tf,
               tail_indptr, tail_doc, tail_tf, doc_len, allowed, double k1, double b,
               double avgdl, okapi, out) -> None:
    """BM25 scores of m queries over N documents added into ``out`` float32 (m, N) (zero on
    entry): out[i, d] = the float32 sums of scipy's csr product ``Q @ W``
    (cortex/bm25_scoring.py), read from the postings in place."""
    cdef _Postings z = _Postings("bm25_dense", q_indptr, q_terms, q_counts, idf, main_lo,
                                 main_hi, main_doc, main_tf, tail_indptr, tail_doc, tail_tf,
                                 doc_len, allowed, k1, b, avgdl, okapi)
    cdef Py_ssize_t n = z.z.n_docs, i
    cdef float[::1] o = _flat("bm25_dense", "out", out, np.float32, z.m * n, True)
    if z.m and n:
        with nogil:
            for i in range(z.m):
                bm25_accumulate(&z.z, i, &o[i * n], NULL, NULL)


cdef class _Scratch:
    """One thread's selection row: acc float32 (N,) (its values between queries do not
    matter: csrc/bm25.c starts each document from 0 where the query first reaches it, or
    clears a whole row first), the bitset mark uint64 (N / 64 + 1,), zero between queries,
    and a list of N int32 (the documents a query reached)."""

    cdef public object acc, mark, list

    def __init__(self, Py_ssize_t n):
        self.acc = np.zeros(n, dtype=np.float32)
        self.mark = np.zeros(n // 64 + 1, dtype=np.uint64)
        self.list = np.empty(n, dtype=np.int32)


cdef _Scratch _kept(Py_ssize_t n):
    """The calling thread's scratch for n documents."""
    sc = getattr(_local, "scratch", None)
    if sc is None or len(sc.acc) < n:
        sc = _local.scratch = _Scratch(max(n, 1))
    return sc


_local = threading.local()  # each thread's _Scratch, kept between calls, freed with it


def _cands(Py_ssize_t depth):
    """The selection's candidate buffer: 2 * depth (value, slot) pairs of 16 bytes."""
    return np.empty((2 * max(depth, 1), 2), dtype=np.int64)


cdef _row_sizes(fn, Py_ssize_t n, Py_ssize_t acc, Py_ssize_t mark):
    if acc != n or mark != n // 64 + 1:
        raise ValueError(f"{fn}: acc and mark must hold N and N / 64 + 1 items")


def bm25_select(q_indptr, q_terms, q_counts, idf, main_lo, main_hi, main_doc, main_tf,
                tail_indptr, tail_doc, tail_tf, doc_len, allowed, double k1, double b,
                double avgdl, okapi, Py_ssize_t depth, out_keys, out_slots, candidates,
                out_candidates, weight_cache=None, cached=None, ahead=False):
    """Each query's ``depth`` best positive scores (value descending, slot ascending) into
    ``out_keys`` float32 / ``out_slots`` int64 (m, depth) (``-inf`` / ``-1`` padding), and
    the scores of ``candidates`` int64 (m, W) slots (or None) into ``out_candidates``
    float32 (m, W): the values of ``bm25_dense`` without the (m, N) block, each query summed
    into the calling thread's scratch row (see ``csrc/bm25.c``). ``weight_cache`` float32
    (one per main posting) and ``cached`` (one flag per term) come together or not at all.
    Returns None once written, or with ``ahead`` at once a ``sharing.RowsAhead`` whose
    helpers have started the queries (its ``wait`` writes the rest)."""
    fn = "bm25_select"
    if depth < 0:
        raise ValueError(f"{fn}: depth must be >= 0")
    cdef _Postings z = _Postings(fn, q_indptr, q_terms, q_counts, idf, main_lo, main_hi,
                                 main_doc, main_tf, tail_indptr, tail_doc, tail_tf, doc_len,
                                 allowed, k1, b, avgdl, okapi, weight_cache, cached)
    cdef Py_ssize_t m = z.m, n = z.z.n_docs, width = 0, i
    cdef float[::1] ko = None
    cdef int64_t[::1] so = None
    cdef const int64_t[::1] cp = None
    cdef float[::1] co = None
    if depth:
        ko = _flat(fn, "out_keys", out_keys, np.float32, m * depth, True)
        so = _flat(fn, "out_slots", out_slots, np.int64, m * depth, True)
    if candidates is not None:
        cp = _flat(fn, "candidates", candidates, np.int64)
        if (cp.shape[0] != 0) if m == 0 else (cp.shape[0] % m != 0):
            raise ValueError(f"{fn}: candidates must be (m, W)")
        width = cp.shape[0] // m if m else 0
        co = _flat(fn, "out_candidates", out_candidates, np.float32, m * width, True)
    if m == 0:
        return RowsAhead(0, 1, None) if ahead else None
    cdef _Selection job = _Selection()
    job.z, job.depth, job.width = z, depth, width
    job.kp = &ko[0] if depth else NULL
    job.sp = &so[0] if depth else NULL
    job.cq = &cp[0] if width else NULL
    job.cw = &co[0] if width else NULL
    job.keep = (ko, so, cp, co)
    rows = max(1, 200_000 // max(n, 1))  # rows of ~0.1 ms or more
    if ahead:  # the job outlives the call: it holds the arrays passed in
        job.keep += (q_indptr, q_terms, q_counts, idf, main_lo, main_hi, main_doc, main_tf,
                     tail_indptr, tail_doc, tail_tf, doc_len)
        return RowsAhead(m, rows, job.claim)
    share_rows(m, rows, job.claim)


cdef class _Selection:
    """``bm25_select``'s checked batch: ``claim(next_row)`` selects the queries it claims
    into the outputs with the calling thread's scratch (``sharing.share_rows`` calls it from
    any thread)."""

    cdef _Postings z
    cdef Py_ssize_t depth, width
    cdef float *kp
    cdef int64_t *sp
    cdef const int64_t *cq
    cdef float *cw
    cdef object keep

    def claim(self, int64_t[::1] next_row not None):
        if next_row.shape[0] != 1:
            raise ValueError("bm25_select: next_row must be one int64 counter")
        sc = _kept(self.z.z.n_docs)
        cdef float[::1] acc = sc.acc
        cdef uint64_t[::1] mark = sc.mark
        cdef int32_t[::1] lst = sc.list
        cdef int64_t[:, ::1] buf = _cands(self.depth)
        cdef Py_ssize_t i, d = self.depth, w = self.width, m = self.z.m
        with nogil:
            while True:
                i = claim_row(&next_row[0])
                if i >= m:
                    break
                bm25_query(&self.z.z, i, &acc[0], &mark[0], &lst[0], &buf[0, 0], d,
                           self.kp + i * d if d else NULL, self.sp + i * d if d else NULL,
                           self.cq + i * w if w else NULL, self.cw + i * w if w else NULL, w, 0)


def bm25_row(q_indptr, q_terms, q_counts, idf, main_lo, main_hi, main_doc, main_tf,
             tail_indptr, tail_doc, tail_tf, doc_len, allowed, double k1, double b,
             double avgdl, okapi, Py_ssize_t depth, out_keys, out_slots,
             float[::1] acc not None, uint64_t[::1] mark not None, weight_cache=None,
             cached=None) -> bool:
    """``bm25_select`` of one query into caller-owned scratch (``acc`` float32 (N,) and
    ``mark`` uint64 (N / 64 + 1,), zero on entry), left as the query wrote it so that any
    slots can be read afterwards without a second pass over the postings. Returns what
    ``bm25_row_release`` needs: whether the whole row was written (else ``mark`` lists the
    documents written)."""
    fn = "bm25_row"
    cdef _Postings z = _Postings(fn, q_indptr, q_terms, q_counts, idf, main_lo, main_hi,
                                 main_doc, main_tf, tail_indptr, tail_doc, tail_tf, doc_len,
                                 allowed, k1, b, avgdl, okapi, weight_cache, cached)
    if z.m != 1 or depth < 1:
        raise ValueError(f"{fn}: one query and depth >= 1")
    cdef float[::1] ko = _flat(fn, "out_keys", out_keys, np.float32, depth, True)
    cdef int64_t[::1] so = _flat(fn, "out_slots", out_slots, np.int64, depth, True)
    _row_sizes(fn, z.z.n_docs, acc.shape[0], mark.shape[0])
    cdef int64_t[:, ::1] buf = _cands(depth)
    cdef int32_t[::1] lst = _kept(z.z.n_docs).list
    cdef int whole
    with nogil:
        whole = bm25_query(&z.z, 0, &acc[0] if acc.shape[0] else NULL, &mark[0], &lst[0],
                           &buf[0, 0], depth, &ko[0], &so[0], NULL, NULL, 0, 1)
    return bool(whole)


def bm25_row_release(float[::1] acc not None, uint64_t[::1] mark not None, whole, candidates,
                     out) -> None:
    """Score ``candidates`` int64 slots (or None) from a row ``bm25_row`` kept into ``out``
    float32 (0 for a slot out of range), then clear the row (``whole``: what ``bm25_row``
    returned)."""
    fn = "bm25_row_release"
    cdef Py_ssize_t n = acc.shape[0], c
    _row_sizes(fn, n, n, mark.shape[0])
    cdef const int64_t[::1] cp
    cdef float[::1] op
    if candidates is not None:
        cp = _flat(fn, "candidates", candidates, np.int64)
        op = _flat(fn, "out", out, np.float32, cp.shape[0], True)
        for c in range(cp.shape[0]):
            op[c] = acc[cp[c]] if 0 <= cp[c] < n else 0.0
    cdef Py_ssize_t w, d
    cdef uint64_t bits
    if whole:
        acc[:] = 0
        return
    with nogil:  # the marked documents
        for w in range(mark.shape[0]):
            bits = mark[w]
            while bits:
                d = w * 64 + ctz(bits)
                if d < n:
                    acc[d] = 0
                bits &= bits - 1
            mark[w] = 0


def token_rescore(const float[:, ::1] fused, const int32_t[::1] counts,
                  const int64_t[:, ::1] ordinals, const int64_t[::1] offsets,
                  const int32_t[::1] ids, const int8_t[:, ::1] codes, const double[::1] norm,
                  const double[::1] weight, const int64_t[::1] query_offsets,
                  const int32_t[::1] query_ids, double token_weight,
                  int64_t[:, ::1] out_order not None, float[:, ::1] out_fused not None,
                  double[:, ::1] out_token not None) -> None:
    """The token relay (pathways/recall/token_relay.py) over each of n queries' first
    ``counts[i]`` members (rows of width W): MaxSim of its query tokens
    ``query_ids[query_offsets[i]:query_offsets[i+1]]`` against each member's token row
    ``ids[offsets[o]:offsets[o+1]]`` (each distinct token's cosines computed once per query),
    then the members ordered by minmax(fused) + token_weight * minmax(token), ties to the
    lower ordinal. ``out_order`` int64 holds positions into the row (the identity past the
    count), ``out_fused`` float32 the mixed scores in that order (the input past the count),
    ``out_token`` float64 the token scores in the input order."""
    fn = "token_rescore"
    cdef Py_ssize_t n = fused.shape[0], w = fused.shape[1], vocab = weight.shape[0]
    cdef Py_ssize_t n_rows = offsets.shape[0] - 1, n_ids = ids.shape[0], i, m, t, most_t = 0
    cdef int64_t lo, hi, post, most = 0, o
    for name, a in (("ordinals", ordinals), ("out_order", out_order),
                    ("out_fused", out_fused), ("out_token", out_token)):
        if a.shape[0] != n or a.shape[1] != w:
            raise ValueError(f"{fn}: {name} must be (n, W) like fused")
    if counts.shape[0] != n or query_offsets.shape[0] != n + 1:
        raise ValueError(f"{fn}: counts must be (n,) and query_offsets (n + 1,)")
    if codes.shape[0] != vocab or norm.shape[0] != vocab or n_rows < 0 or not np.isfinite(token_weight):
        raise ValueError(f"{fn}: codes must be (V, dim) beside norm and weight (V,), offsets "
                         "non-empty, token_weight finite")
    what = None
    if query_offsets[0] != 0 or query_offsets[n] != query_ids.shape[0]:
        what = "query token offsets"
    for i in range(n):
        if what is not None:
            break
        if query_offsets[i + 1] < query_offsets[i]:
            what = "query token offsets"
        elif counts[i] < 0 or counts[i] > w:
            what = "a member count"
        else:
            post = 0
            for m in range(counts[i]):
                o = ordinals[i, m]
                if o < 0 or o >= n_rows:
                    what = "a member ordinal"
                    break
                lo, hi = offsets[o], offsets[o + 1]
                if lo < 0 or hi < lo or hi > n_ids:
                    what = "token rows"
                    break
                post += hi - lo
            most = max(most, post)
            most_t = max(most_t, query_offsets[i + 1] - query_offsets[i])
    for i in range(query_ids.shape[0]):
        if what is None and (query_ids[i] < 0 or query_ids[i] >= vocab):
            what = "a query token"
    if what is not None:
        raise ValueError(f"{fn}: {what} out of range")
    if n == 0 or w == 0:
        return
    cdef _Rescore job = _Rescore()
    job.n, job.most, job.most_t = n, most, most_t
    job.keep = (fused, counts, ordinals, offsets, ids, codes, norm, weight, query_offsets,
                query_ids, out_order, out_fused, out_token)
    cdef Py_ssize_t dim = codes.shape[1]
    cdef TokJob *j = &job.job
    j.fused, j.codes, j.counts = &fused[0, 0], &codes[0, 0] if vocab and dim else NULL, &counts[0]
    j.ids = &ids[0] if n_ids else NULL
    j.qids = &query_ids[0] if query_ids.shape[0] else NULL
    j.ordinals, j.offsets, j.qoff = &ordinals[0, 0], &offsets[0], &query_offsets[0]
    j.norm = &norm[0] if vocab else NULL
    j.weight = &weight[0] if vocab else NULL
    j.width, j.vocab, j.dim = w, vocab, dim
    j.token_weight = token_weight
    j.out_order, j.out_fused, j.out_token = &out_order[0, 0], &out_fused[0, 0], &out_token[0, 0]
    share_rows(n, 4, job.claim)  # ~30 us a query


cdef class _Rescore:
    """``token_rescore``'s checked batch: ``claim(next_row)`` re-scores the queries it
    claims with scratch of its own, sized for the largest query (``sharing.share_rows`` calls
    it from any thread)."""

    cdef TokJob job
    cdef Py_ssize_t n, most, most_t
    cdef object keep

    def claim(self, int64_t[::1] next_row not None):
        if next_row.shape[0] != 1:
            raise ValueError("token_rescore: next_row must be one int64 counter")
        cdef Py_ssize_t stride = (self.most_t + 3) & ~3, dim = self.job.dim
        cdef Py_ssize_t w = self.job.width, most = self.most, i
        cdef int32_t[::1] slot = np.full(self.job.vocab + 1, -1, dtype=np.int32)
        cdef int32_t[::1] uniq = np.empty(most + 1, dtype=np.int32)
        cdef int32_t[::1] pslot = np.empty(most + 1, dtype=np.int32)
        cdef int32_t[::1] idots = np.empty(stride + 1, dtype=np.int32)
        cdef int16_t[::1] qcodes = np.empty(stride * dim + 1, dtype=np.int16)
        cdef double[::1] sims = np.empty(most * stride + 1, dtype=np.float64)
        cdef int64_t[::1] rank = np.empty(3 * w, dtype=np.int64)
        cdef double[::1] tmp = np.empty(2 * w, dtype=np.float64)
        cdef TokScratch s
        s.slot, s.uniq, s.pslot = &slot[0], &uniq[0], &pslot[0]
        s.idots, s.qcodes, s.sims = &idots[0], &qcodes[0], &sims[0]
        s.rank, s.tmp = <void *>&rank[0], &tmp[0]
        cdef int rc = 0
        with nogil:
            while True:
                i = claim_row(&next_row[0])
                if i >= self.n:
                    break
                rc = token_query(&self.job, &s, i)
                if rc:
                    break
        if rc:
            raise ValueError("token_rescore: token rows out of range")

