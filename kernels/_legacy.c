/* spector_gpu.kernels._legacy (being split into kernels/csrc/ files bound by Cython, see
 * kernels/native.py): CPU kernels of the recall pathway (optional: every function has
 * a numpy/torch twin in spector_gpu.kernels, used when this is not built). The INT8 scan and
 * the top-k selections moved to csrc/scan.c, the shared selection helpers to csrc/select.h.
 *
 * decay_topk       exact top-k of w_r / div * float32(d_r * f(bucket(t_r))) (piecewise decay)
 * bm25_dense       BM25 scores of a few queries as dense rows, from the postings in place
 * bm25_select      each query's best BM25 scores and the scores of given slots, from one
 *                  scratch row per thread (no (m, N) block)
 * bm25_row         bm25_select of one query into a caller's row, left written until
 *                  bm25_row_release has scored any slots from it
 * pool_columns     the columns recall reads for pool members and their D now, one pass
 * minmax_rows, fuse_rows   fusion's normalisation and the fused score of pool rows, one pass
 *                  per row (relevance_rows moved to csrc/fusion.c)
 * spread_pool, spread_dense, spread_tables   max-product spreading over pool rows
 * pool_expand      one query's seeds and their allowed neighbours (the association pool)
 * token_rescore    the token relay's MaxSim and order over each query's fused top list
 *
 * Order everywhere: key descending, then row (slot) ascending; padding is (-inf, -1). Integer
 * dots are exact (int32); each key is one IEEE float32 multiply, each decayed value the float64
 * operations of cortex.strength.decayed in its order (build with -ffp-contract=off), so the
 * results equal the torch and numpy paths bit for bit. There are no hand-written intrinsics:
 * the dot product is a plain loop the compiler vectorises ("dot products" below). The GIL is
 * released while computing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#include "csrc/select.h" /* dots, VECTOR_CLONES, the top-k heaps and selections */
#define scan_f32(x, n, bound, hk, hs, k) select_f32(x, n, bound, hk, hs, k, NULL)

/* ------------------------------------------------------------------ buffer helpers */

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static void release(Buf *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

/* A C-contiguous buffer of `itemsize` bytes per element and format letter `fmt` (or any of
 * the letters in `fmt`); `count` elements, or any count when count < 0. */
static int get_buf(PyObject *obj, Buf *b, const char *fmt, Py_ssize_t itemsize,
                   Py_ssize_t count, int writable, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0) return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '|') f++;
    if (b->view.itemsize != itemsize || strchr(fmt, *f) == NULL || f[1] != '\0') {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd-byte items of type '%s', got '%s'",
                     name, itemsize, fmt, b->view.format ? b->view.format : "B");
        release(b);
        return -1;
    }
    if (count >= 0 && b->view.len != count * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd elements, got %zd", name, count,
                     b->view.len / itemsize);
        release(b);
        return -1;
    }
    return 0;
}

/* A 1-D strided buffer (e.g. a field of a structured array) of `count` elements. */
static int get_strided(PyObject *obj, Buf *b, const char *fmt, Py_ssize_t itemsize,
                       Py_ssize_t count, const char *name) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '|') f++;
    if (b->view.ndim != 1 || b->view.itemsize != itemsize || strchr(fmt, *f) == NULL ||
        f[1] != '\0' || b->view.shape[0] != count || b->view.strides[0] <= 0) {
        PyErr_Format(PyExc_ValueError, "%s: expected a 1-D array of %zd '%s' items", name, count,
                     fmt);
        release(b);
        return -1;
    }
    return 0;
}

#define STRIDED(b, type, i) (*(const type *)((const char *)(b).view.buf + (i) * (b).view.strides[0]))

/* ------------------------------------------------------------------ decay_topk */

/* The decay law's pieces shared by decay_topk and pool_columns, in decayed_numpy's float64
 * order: the arousal divisors 1 + a / 255, and the bucket of a row last touched at `last`
 * (the last of the nb ascending edges, edges[0] == 0, that its age in seconds reaches). */
static void decay_denoms(double denom[256]) {
    for (int a = 0; a < 256; a++) denom[a] = 1.0 + (double)a / 255.0;
}

static inline Py_ssize_t decay_bucket(long long now, int64_t last, double denom,
                                      const double *edges, Py_ssize_t nb) {
    int64_t dt = (int64_t)now - last;
    double t = (double)(dt > 0 ? dt : 0) / 1000.0;
    t = t / denom;
    Py_ssize_t b = 0;
    for (Py_ssize_t e = 1; e < nb; e++) b += edges[e] <= t;
    return b;
}

static PyObject *py_decay_topk(PyObject *self, PyObject *args) {
    PyObject *o_w, *o_flags, *o_arousal, *o_d, *o_last, *o_allowed, *o_edges, *o_factors;
    PyObject *o_keys, *o_slots;
    Py_ssize_t n;
    long long now;
    double w_div;
    int freeze_set, need_set;
    int horizon = 0;
    if (!PyArg_ParseTuple(args, "nLdOOOOOOiiOOOO|p", &n, &now, &w_div, &o_w, &o_flags,
                          &o_arousal, &o_d, &o_last, &o_allowed, &freeze_set, &need_set, &o_edges,
                          &o_factors, &o_keys, &o_slots, &horizon))
        return NULL;
    long long next_change = LLONG_MAX; /* earliest ms at which some row may change bucket */
    Buf w = {0}, flags = {0}, arousal = {0}, d = {0}, last = {0}, allowed = {0};
    Buf edges = {0}, factors = {0}, keys = {0}, slots = {0};
    PyObject *result = NULL;
    if (get_strided(o_w, &w, "f", 4, n, "weight") < 0) goto done;
    if (get_strided(o_flags, &flags, "B", 1, n, "flags") < 0) goto done;
    if (get_strided(o_arousal, &arousal, "B", 1, n, "arousal") < 0) goto done;
    if (get_strided(o_d, &d, "f", 4, n, "d_event") < 0) goto done;
    if (get_strided(o_last, &last, "lq", 8, n, "last_event_ms") < 0) goto done;
    if (o_allowed != Py_None && get_buf(o_allowed, &allowed, "?bB", 1, n, 0, "allowed") < 0)
        goto done;
    if (get_buf(o_edges, &edges, "d", 8, -1, 0, "edges") < 0) goto done;
    Py_ssize_t nb = edges.view.len / 8;
    if (nb < 1 || get_buf(o_factors, &factors, "d", 8, nb, 0, "factors") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "decay_topk: no bucket edges");
        goto done;
    }
    if (get_buf(o_keys, &keys, "d", 8, -1, 1, "out_keys") < 0) goto done;
    Py_ssize_t k = keys.view.len / 8;
    if (k < 1 || get_buf(o_slots, &slots, "lq", 8, k, 1, "out_slots") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "decay_topk: k must be >= 1");
        goto done;
    }
    Py_ssize_t size = 0;
    {
        const double *ep = edges.view.buf;
        const double *fp = factors.view.buf;
        const uint8_t *ap = allowed.held ? allowed.view.buf : NULL;
        double *hk = keys.view.buf;
        int64_t *hs = slots.view.buf;
        /* v <= (w / div) * d when no factor exceeds 1: once the heap is full, a row whose
         * bound does not beat the root cannot enter (rows rise, so a tie never does) */
        int bounded = 1;
        for (Py_ssize_t e = 0; e < nb; e++) bounded &= fp[e] <= 1.0;
        double denom[256];
        decay_denoms(denom);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            if (ap && !ap[i]) continue;
            double scaled = (double)STRIDED(w, float, i) / w_div;
            float d0 = STRIDED(d, float, i);
            uint8_t fl = STRIDED(flags, uint8_t, i);
            int frozen = (fl & freeze_set) || !(fl & need_set);
            if (!horizon && bounded && scaled >= 0.0 && size == k && !(scaled * (double)d0 > hk[0]))
                continue;
            Py_ssize_t b = decay_bucket(now, STRIDED(last, int64_t, i),
                                        denom[STRIDED(arousal, uint8_t, i)], ep, nb);
            if (horizon && !frozen && b + 1 < nb) {
                /* t reaches the next edge near last + edge * 1000 * denom ms; 2 ms early covers
                 * the rounding of the exact test above */
                double at = (double)STRIDED(last, int64_t, i) + ep[b + 1] * 1000.0 *
                            denom[STRIDED(arousal, uint8_t, i)] - 2.0;
                if (at < (double)next_change) next_change = at < -9e18 ? LLONG_MIN : (long long)at;
            }
            double f = frozen ? 1.0 : fp[b];
            float dnow = (float)((double)d0 * f);
            double v = scaled * (double)dnow;
            if (size == k && !(v > hk[0])) continue;
            offer(hk, hs, k, &size, v, (int64_t)i);
        }
        heap_sort(hk, hs, size);
        for (Py_ssize_t i = size; i < k; i++) {
            hk[i] = -INFINITY;
            hs[i] = -1;
        }
        Py_END_ALLOW_THREADS
    }
    result = horizon ? Py_BuildValue("nL", size, next_change) : PyLong_FromSsize_t(size);
done:
    release(&w); release(&flags); release(&arousal); release(&d); release(&last);
    release(&allowed); release(&edges); release(&factors); release(&keys); release(&slots);
    return result;
}

/* ------------------------------------------------------------------ pool_columns */
/* The columns recall reads for M pool members (int64 ordinals in [0, n)), in one pass: each
 * member's header (importance, flags, arousal, formation time: strided fields of one record)
 * and its D at the last event, that event's time and S, read once where a numpy gather per
 * field reads every member's record once per field; and D now by decay_topk's law (the
 * float64 operations of kernels/decay.py decayed_numpy in its order, so the same bits),
 * widened to float64. */
#define POOL_AHEAD 16 /* members ahead whose lines pool_columns fetches */

static PyObject *py_pool_columns(PyObject *self, PyObject *args) {
    PyObject *o_idx, *o_imp, *o_flags, *o_arousal, *o_formed, *o_d, *o_last, *o_storage;
    PyObject *o_edges, *o_factors, *o_out[8];
    Py_ssize_t n;
    long long now;
    int freeze_set, need_set;
    if (!PyArg_ParseTuple(args, "nLOOOOOOOOiiOOOOOOOOOO", &n, &now, &o_idx, &o_imp, &o_flags,
                          &o_arousal, &o_formed, &o_d, &o_last, &o_storage, &freeze_set,
                          &need_set, &o_edges, &o_factors, &o_out[0], &o_out[1], &o_out[2],
                          &o_out[3], &o_out[4], &o_out[5], &o_out[6], &o_out[7]))
        return NULL;
    Buf idx = {0}, imp = {0}, flags = {0}, arousal = {0}, formed = {0}, d = {0}, last = {0};
    Buf storage = {0}, edges = {0}, factors = {0}, out[8];
    memset(out, 0, sizeof(out));
    PyObject *result = NULL;
    if (get_buf(o_idx, &idx, "lq", 8, -1, 0, "ordinals") < 0) goto done;
    Py_ssize_t m = idx.view.len / 8;
    if (get_strided(o_imp, &imp, "f", 4, n, "importance") < 0) goto done;
    if (get_strided(o_flags, &flags, "B", 1, n, "flags") < 0) goto done;
    if (get_strided(o_arousal, &arousal, "B", 1, n, "arousal") < 0) goto done;
    if (get_strided(o_formed, &formed, "lq", 8, n, "formed_ms") < 0) goto done;
    if (get_strided(o_d, &d, "f", 4, n, "d_event") < 0) goto done;
    if (get_strided(o_last, &last, "lq", 8, n, "last_event_ms") < 0) goto done;
    if (get_strided(o_storage, &storage, "f", 4, n, "storage") < 0) goto done;
    if (get_buf(o_edges, &edges, "d", 8, -1, 0, "edges") < 0) goto done;
    Py_ssize_t nb = edges.view.len / 8;
    if (nb < 1 || get_buf(o_factors, &factors, "d", 8, nb, 0, "factors") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "pool_columns: no bucket edges");
        goto done;
    }
    {
        static const char *fmt[8] = {"f", "B", "B", "f", "lq", "f", "lq", "d"};
        static const Py_ssize_t size[8] = {4, 1, 1, 4, 8, 4, 8, 8};
        static const char *name[8] = {"out_importance", "out_flags", "out_arousal", "out_d_event",
                                      "out_last_ms", "out_storage", "out_formed_ms", "out_d_now"};
        for (int f = 0; f < 8; f++)
            if (get_buf(o_out[f], &out[f], fmt[f], size[f], m, 1, name[f]) < 0) goto done;
    }
    const int64_t *ip = idx.view.buf;
    for (Py_ssize_t r = 0; r < m; r++) {
        if (ip[r] < 0 || ip[r] >= n) {
            PyErr_SetString(PyExc_ValueError, "pool_columns: an ordinal is outside [0, n)");
            goto done;
        }
    }
    {
        const double *ep = edges.view.buf, *fp = factors.view.buf;
        float *o_i = out[0].view.buf, *o_de = out[3].view.buf, *o_s = out[5].view.buf;
        uint8_t *o_f = out[1].view.buf, *o_a = out[2].view.buf;
        int64_t *o_l = out[4].view.buf, *o_t = out[6].view.buf;
        double *o_now = out[7].view.buf;
        double denom[256];
        decay_denoms(denom);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < m; r++) {
            if (r + POOL_AHEAD < m) { /* the loop is long: fetch the lines of a later member */
                Py_ssize_t a = (Py_ssize_t)ip[r + POOL_AHEAD];
                __builtin_prefetch(&STRIDED(imp, float, a));
                __builtin_prefetch(&STRIDED(formed, int64_t, a));
                __builtin_prefetch(&STRIDED(d, float, a));
                __builtin_prefetch(&STRIDED(last, int64_t, a));
                __builtin_prefetch(&STRIDED(storage, float, a));
            }
            Py_ssize_t i = (Py_ssize_t)ip[r];
            uint8_t fl = STRIDED(flags, uint8_t, i), ar = STRIDED(arousal, uint8_t, i);
            float d0 = STRIDED(d, float, i);
            int64_t at = STRIDED(last, int64_t, i);
            o_i[r] = STRIDED(imp, float, i);
            o_f[r] = fl;
            o_a[r] = ar;
            o_de[r] = d0;
            o_l[r] = at;
            o_s[r] = STRIDED(storage, float, i);
            o_t[r] = STRIDED(formed, int64_t, i);
            Py_ssize_t b = decay_bucket(now, at, denom[ar], ep, nb);
            int frozen = (fl & freeze_set) || !(fl & need_set);
            o_now[r] = (double)(float)((double)d0 * (frozen ? 1.0 : fp[b]));
        }
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&idx); release(&imp); release(&flags); release(&arousal); release(&formed);
    release(&d); release(&last); release(&storage); release(&edges); release(&factors);
    for (int f = 0; f < 8; f++) release(&out[f]);
    return result;
}

/* ------------------------------------------------------------------ bm25_dense */
/* Dense BM25 scores out[i, d] = sum over query i's terms j (ascending) of
 * float32(count_ij * float32(tfc(tf_jd, dl_d) * idf_j)), accumulated in float32 in that order
 * -- the sums scipy's csr product Q @ W forms (cortex/bm25.py), read from the postings in place:
 * term j's main postings main[mlo[j]:mhi[j]) then its tail postings tail[tptr[j]:tptr[j+1]). */

/* The postings of a batch of queries, as bm25_dense and bm25_select read them: the query
 * terms (CSR, columns ascending in each row), each term's main range and tail postings, the
 * documents' lengths and the gate; then each distinct term's posting weights, once per call
 * (queries of a batch share terms): woff[j] is where term j's main then tail weights start in
 * wbuf. With a weight cache (wmain: float32, one weight per main posting, kept by the caller
 * while the statistics stand; cached: uint8 per term, 1 where its main weights there are
 * current), a term's main weights are read from, or first written into, wmain[mlo[j]:mhi[j])
 * and wbuf holds tail weights only. */
typedef struct {
    Buf qptr, qcol, qcnt, idf, mlo, mhi, mdoc, mtf, tptr, tdoc, ttf, len, allowed;
    Buf wmain, cached;
    Py_ssize_t m, nnz, u, n_docs;
    double k1, b, avgdl;
    int okapi;
    int64_t *woff;
    float *wbuf;
} Bm25;

/* Term j's main weights (the cache's, or wbuf's) and tail weights. */
static inline float *bm25_main_w(const Bm25 *z, int64_t j) {
    if (z->wmain.held) return (float *)z->wmain.view.buf + ((const int64_t *)z->mlo.view.buf)[j];
    return z->wbuf + z->woff[j];
}

static inline float *bm25_tail_w(const Bm25 *z, int64_t j) {
    const int64_t *lo = z->mlo.view.buf, *hi = z->mhi.view.buf;
    return z->wbuf + z->woff[j] + (z->wmain.held ? 0 : hi[j] - lo[j]);
}

/* Whether term j's main weights must be computed in this call. */
static inline int bm25_main_due(const Bm25 *z, int64_t j) {
    return !z->wmain.held || !((const uint8_t *)z->cached.view.buf)[j];
}

static void bm25_close(Bm25 *z) {
    release(&z->qptr); release(&z->qcol); release(&z->qcnt); release(&z->idf);
    release(&z->mlo); release(&z->mhi); release(&z->mdoc); release(&z->mtf);
    release(&z->tptr); release(&z->tdoc); release(&z->ttf); release(&z->len);
    release(&z->allowed); release(&z->wmain); release(&z->cached);
    free(z->woff); free(z->wbuf);
    z->woff = NULL;
    z->wbuf = NULL;
}

/* Term j's posting weights: its main ones where bm25_main_due, then its tail ones. */
static void term_weights(const Bm25 *z, int64_t j) {
    const int64_t *lo = z->mlo.view.buf, *hi = z->mhi.view.buf, *tp = z->tptr.view.buf;
    const double *ip = z->idf.view.buf;
    const int32_t *md = z->mdoc.view.buf, *mt = z->mtf.view.buf, *td = z->tdoc.view.buf;
    const int32_t *tt = z->ttf.view.buf, *dl = z->len.view.buf;
    double k1 = z->k1, b = z->b, avgdl = z->avgdl, base = 1.0 - b;
    Py_ssize_t n_docs = z->n_docs;
    int okapi = z->okapi;
    for (int pass = bm25_main_due(z, j) ? 0 : 1; pass < 2; pass++) {
        const int32_t *docs = pass ? td : md, *tfs = pass ? tt : mt;
        int64_t a0 = pass ? tp[j] : lo[j], end = pass ? tp[j + 1] : hi[j];
        float *w = pass ? bm25_tail_w(z, j) : bm25_main_w(z, j);
        for (int64_t p = a0; p < end; p++, w++) {
            int32_t d = docs[p];
            if ((uint64_t)(uint32_t)d >= (uint64_t)n_docs) { *w = 0.0f; continue; }
            double tf = (double)tfs[p];
            double norm = k1 * (base + b * (double)dl[d] / avgdl);
            double num = okapi ? tf * (k1 + 1.0) : tf;
            *w = (float)(num / (tf + norm) * ip[j]);
        }
    }
}

/* The distinct terms of a call, shared out one at a time between the caller and a helper. */
typedef struct {
    const Bm25 *z;
    const int64_t *terms;
    Py_ssize_t n, next;
} WeightJob;

static void weights_run(WeightJob *job) {
    for (;;) {
        Py_ssize_t i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
        if (i >= job->n) return;
        term_weights(job->z, job->terms[i]);
    }
}

static void *weights_helper(void *arg) {
    weights_run(arg);
    return NULL;
}

#define WEIGHTS_SHARED (1 << 16) /* posting weights from which a second thread computes half */

/* Read and check the 13 arrays (o[0..12]) and compute the weights (with `threads` == 2 and
 * enough of them, a helper thread takes every other distinct term; each term's weights are
 * the same whoever computes them); -1 with an exception set (the caller still calls
 * bm25_close). */
static int bm25_open(Bm25 *z, PyObject *o[13], const char *name, int threads, PyObject *o_wmain,
                     PyObject *o_cached) {
    if (get_buf(o[0], &z->qptr, "lq", 8, -1, 0, "q_indptr") < 0) return -1;
    z->m = z->qptr.view.len / 8 - 1;
    if (get_buf(o[1], &z->qcol, "lq", 8, -1, 0, "q_terms") < 0) return -1;
    z->nnz = z->qcol.view.len / 8;
    if (get_buf(o[2], &z->qcnt, "f", 4, z->nnz, 0, "q_counts") < 0) return -1;
    if (get_buf(o[3], &z->idf, "d", 8, -1, 0, "idf") < 0) return -1;
    Py_ssize_t u = z->u = z->idf.view.len / 8;
    if (get_buf(o[4], &z->mlo, "lq", 8, u, 0, "main_lo") < 0) return -1;
    if (get_buf(o[5], &z->mhi, "lq", 8, u, 0, "main_hi") < 0) return -1;
    if (get_buf(o[8], &z->tptr, "lq", 8, u + 1, 0, "tail_indptr") < 0) return -1;
    if (get_buf(o[6], &z->mdoc, "i", 4, -1, 0, "main_doc") < 0) return -1;
    if (get_buf(o[7], &z->mtf, "i", 4, z->mdoc.view.len / 4, 0, "main_tf") < 0) return -1;
    if (get_buf(o[9], &z->tdoc, "i", 4, -1, 0, "tail_doc") < 0) return -1;
    if (get_buf(o[10], &z->ttf, "i", 4, z->tdoc.view.len / 4, 0, "tail_tf") < 0) return -1;
    if (get_buf(o[11], &z->len, "i", 4, -1, 0, "doc_len") < 0) return -1;
    z->n_docs = z->len.view.len / 4;
    if (o[12] != Py_None &&
        get_buf(o[12], &z->allowed, "?bB", 1, z->n_docs, 0, "allowed") < 0)
        return -1;
    if (z->m < 0) {
        PyErr_Format(PyExc_ValueError, "%s: bad q_indptr", name);
        return -1;
    }
    if ((o_wmain && o_wmain != Py_None) != (o_cached && o_cached != Py_None)) {
        PyErr_Format(PyExc_ValueError, "%s: weight cache and its flags go together", name);
        return -1;
    }
    if (o_wmain && o_wmain != Py_None &&
        (get_buf(o_wmain, &z->wmain, "f", 4, z->mdoc.view.len / 4, 1, "weight_cache") < 0 ||
         get_buf(o_cached, &z->cached, "?bB", 1, u, 0, "cached") < 0))
        return -1;
    const int64_t *qp = z->qptr.view.buf, *qc = z->qcol.view.buf, *lo = z->mlo.view.buf;
    const int64_t *hi = z->mhi.view.buf, *tp = z->tptr.view.buf;
    int64_t mlen = z->mdoc.view.len / 4, tlen = z->tdoc.view.len / 4;
    if (qp[0] != 0 || qp[z->m] != z->nnz) {
        PyErr_Format(PyExc_ValueError, "%s: q_indptr must run from 0 to nnz", name);
        return -1;
    }
    for (Py_ssize_t i = 0; i < z->m; i++) {
        if (qp[i] > qp[i + 1]) {
            PyErr_Format(PyExc_ValueError, "%s: q_indptr must not decrease", name);
            return -1;
        }
    }
    for (Py_ssize_t e = 0; e < z->nnz; e++) {
        int64_t j = qc[e];
        if (j < 0 || j >= u || lo[j] < 0 || lo[j] > hi[j] || hi[j] > mlen || tp[j] < 0 ||
            tp[j] > tp[j + 1] || tp[j + 1] > tlen) {
            PyErr_Format(PyExc_ValueError, "%s: a posting range is out of bounds", name);
            return -1;
        }
    }
    z->woff = malloc(sizeof(int64_t) * (u + 1));
    char *seen = calloc((size_t)(u > 0 ? u : 1), 1);
    int64_t *terms = malloc(sizeof(int64_t) * (size_t)(z->nnz > 0 ? z->nnz : 1));
    if (!z->woff || !seen || !terms) {
        free(seen); free(terms);
        PyErr_NoMemory();
        return -1;
    }
    z->woff[0] = 0;
    for (Py_ssize_t j = 0; j < u; j++)
        z->woff[j + 1] = z->woff[j] + (z->wmain.held ? 0 : hi[j] - lo[j]) + (tp[j + 1] - tp[j]);
    z->wbuf = malloc(sizeof(float) * (size_t)(z->woff[u] > 0 ? z->woff[u] : 1));
    if (!z->wbuf) {
        free(seen); free(terms);
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t n_terms = 0;
    int64_t total = 0;
    for (Py_ssize_t e = 0; e < z->nnz; e++) {
        int64_t j = qc[e];
        if (seen[j]) continue;
        seen[j] = 1;
        int64_t work = (tp[j + 1] - tp[j]) + (bm25_main_due(z, j) ? hi[j] - lo[j] : 0);
        if (!work) continue;
        terms[n_terms++] = j;
        total += work;
    }
    free(seen);
    WeightJob job = {z, terms, n_terms, 0};
    Py_BEGIN_ALLOW_THREADS
    pthread_t helper;
    int helped = threads == 2 && total >= WEIGHTS_SHARED && n_terms > 1 &&
                 pthread_create(&helper, NULL, weights_helper, &job) == 0;
    weights_run(&job);
    if (helped) pthread_join(helper, NULL);
    Py_END_ALLOW_THREADS
    free(terms);
    return 0;
}

/* Postings of query i's terms (ascending), each allowed one's count * weight added to acc[d]
 * in float32 (the order of scipy's product); with `touched`, each document reached for the
 * first time is marked and listed (returns how many). */
static Py_ssize_t bm25_accumulate(const Bm25 *z, Py_ssize_t i, float *acc, uint64_t *mark,
                                  int32_t *touched) {
    const int64_t *qp = z->qptr.view.buf, *qc = z->qcol.view.buf, *lo = z->mlo.view.buf;
    const int64_t *hi = z->mhi.view.buf, *tp = z->tptr.view.buf;
    const float *qn = z->qcnt.view.buf;
    const int32_t *md = z->mdoc.view.buf, *td = z->tdoc.view.buf;
    const uint8_t *ap = z->allowed.held ? z->allowed.view.buf : NULL;
    uint64_t n_docs = (uint64_t)z->n_docs;
    Py_ssize_t t = 0;
    for (int64_t e = qp[i]; e < qp[i + 1]; e++) {
        int64_t j = qc[e];
        float cnt = qn[e];
        for (int pass = 0; pass < 2; pass++) {
            const int32_t *docs = pass ? td : md;
            int64_t a0 = pass ? tp[j] : lo[j], end = pass ? tp[j + 1] : hi[j];
            const float *w = pass ? bm25_tail_w(z, j) : bm25_main_w(z, j);
            for (int64_t p = a0; p < end; p++, w++) {
                int32_t d = docs[p];
                if ((uint64_t)(uint32_t)d >= n_docs || (ap && !ap[d])) continue;
                if (touched) { /* branch-free: a first touch is as likely as not */
                    uint64_t bit = (uint64_t)1 << (d & 63), *word = mark + (d >> 6);
                    touched[t] = d;
                    t += !(*word & bit);
                    *word |= bit;
                }
                float add = cnt * *w;
                acc[d] = acc[d] + add;
            }
        }
    }
    return t;
}

/* Postings query i reads (an upper bound on the documents it touches). */
static int64_t bm25_postings(const Bm25 *z, Py_ssize_t i) {
    const int64_t *qp = z->qptr.view.buf, *qc = z->qcol.view.buf;
    const int64_t *lo = z->mlo.view.buf, *hi = z->mhi.view.buf, *tp = z->tptr.view.buf;
    int64_t total = 0;
    for (int64_t e = qp[i]; e < qp[i + 1]; e++) {
        int64_t j = qc[e];
        total += (hi[j] - lo[j]) + (tp[j + 1] - tp[j]);
    }
    return total;
}

static PyObject *py_bm25_dense(PyObject *self, PyObject *args) {
    PyObject *o[13], *o_out;
    Bm25 z = {0};
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOdddpO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &z.k1, &z.b,
                          &z.avgdl, &z.okapi, &o_out))
        return NULL;
    Buf out = {0};
    PyObject *result = NULL;
    if (bm25_open(&z, o, "bm25_dense", 1, NULL, NULL) < 0) goto done;
    if (get_buf(o_out, &out, "f", 4, z.m * z.n_docs, 1, "out") < 0) goto done;
    {
        float *op = out.view.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < z.m; i++) bm25_accumulate(&z, i, op + i * z.n_docs, NULL, NULL);
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    bm25_close(&z);
    release(&out);
    return result;
}

/* bm25_select: each query's BM25 scores accumulated into one scratch row (N float32, zero
 * between queries), then its `depth` best positive scores selected (ties: lower slot) and
 * the scores of given candidate slots read, nothing of size (m, N) formed. A query reading
 * fewer postings than N / 2 lists the documents it touches (a bitset marks them) and selects
 * from and clears only those; one reading more scans and clears the whole row. The calling
 * thread's scratch rows are kept between calls (about 8.2 bytes per document of the largest
 * store scored, and 16 per selected candidate of the largest query) and freed when it exits. With threads = 2 a
 * helper thread, started for the call, takes queries from the same counter as the caller
 * (one at a time, so the caller never waits for more than the query the helper holds) with
 * scratch of its own, freed when it is done. */

typedef struct {
    float *acc;        /* (cap,) zero between queries */
    uint64_t *mark;    /* (cap / 64 + 1,) zero between queries */
    int32_t *touched;  /* (cap + 1,) */
    Py_ssize_t cap;
    Cand *cand;        /* candidates of the radix selection */
    Py_ssize_t cand_cap;
    double *hk;        /* (depth,) heap */
    int64_t *hs;
    Cand *buf;         /* (2 depth,) buffered whole-row selection */
    uint32_t *hist;    /* (SEL_WAYS * SEL_BUCKETS,) */
} SelScratch;

/* The rows kept for a thread's next call, freed when the thread exits (a server that starts a
 * thread per request must not leak them): a pthread key with a destructor. */
static pthread_key_t sel_key;
static pthread_once_t sel_key_once = PTHREAD_ONCE_INIT;
static int sel_key_ok = 0;

static void sel_free_rows(SelScratch *sc) {
    free(sc->acc); free(sc->mark); free(sc->touched); free(sc->cand);
    sc->acc = NULL;
    sc->mark = NULL;
    sc->touched = NULL;
    sc->cand = NULL;
    sc->cap = sc->cand_cap = 0;
}

static void sel_free_call(SelScratch *sc) {
    free(sc->hk); free(sc->hs); free(sc->buf); free(sc->hist);
    sc->hk = NULL;
    sc->hs = NULL;
    sc->buf = NULL;
    sc->hist = NULL;
}

static void sel_destroy(void *p) {
    SelScratch *sc = p;
    sel_free_call(sc);
    sel_free_rows(sc);
    free(sc);
}

static void sel_key_make(void) { sel_key_ok = pthread_key_create(&sel_key, sel_destroy) == 0; }

/* The calling thread's kept scratch, made on first use; NULL when out of memory. */
static SelScratch *sel_kept(void) {
    pthread_once(&sel_key_once, sel_key_make);
    if (!sel_key_ok) return NULL;
    SelScratch *sc = pthread_getspecific(sel_key);
    if (sc) return sc;
    sc = calloc(1, sizeof(SelScratch));
    if (sc && pthread_setspecific(sel_key, sc) != 0) {
        free(sc);
        sc = NULL;
    }
    return sc;
}

#define SEL_BUCKETS 4096 /* positive float32 bits >> 19: exponent and 4 mantissa bits */
#define SEL_WAYS 4        /* histograms counted side by side (equal values in a row do not
                           * wait on each other's increment) */

/* Rows for n documents and the per-call buffers for `depth`; -1 when out of memory. */
static int sel_reserve(SelScratch *sc, Py_ssize_t n, Py_ssize_t depth) {
    if (n > sc->cap) {
        float *acc = calloc((size_t)n, sizeof(float));
        uint64_t *mark = calloc((size_t)n / 64 + 1, sizeof(uint64_t));
        int32_t *touched = malloc(sizeof(int32_t) * (size_t)(n + 1)); /* +1: branch-free append */
        if (!acc || !mark || !touched) {
            free(acc); free(mark); free(touched);
            return -1;
        }
        free(sc->acc); free(sc->mark); free(sc->touched);
        sc->acc = acc;
        sc->mark = mark;
        sc->touched = touched;
        sc->cap = n;
    }
    size_t k = (size_t)(depth > 0 ? depth : 1);
    sc->hk = malloc(sizeof(double) * k);
    sc->hs = malloc(sizeof(int64_t) * k);
    sc->buf = depth >= 32 ? malloc(sizeof(Cand) * 2 * k) : NULL;
    sc->hist = depth >= 32 ? malloc(sizeof(uint32_t) * SEL_BUCKETS * SEL_WAYS) : NULL;
    if (!sc->hk || !sc->hs || (depth >= 32 && (!sc->buf || !sc->hist))) return -1;
    return 0;
}

static Cand *sel_cands(SelScratch *sc, Py_ssize_t n) {
    if (n > sc->cand_cap) {
        Cand *c = malloc(sizeof(Cand) * (size_t)n);
        if (!c) return NULL;
        free(sc->cand);
        sc->cand = c;
        sc->cand_cap = n;
    }
    return sc->cand;
}

static inline uint32_t f32_bits(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

/* The k best positive acc[idx[r]] (r < n) by (value descending, slot ascending) into
 * (hk, hs), best first, with `clear` clearing acc and mark at every idx[r] on the way;
 * returns the count, or -1 when out of memory (acc and mark cleared all the same). A histogram of the values'
 * leading bits (positive float32 bits order as the values do) finds the bucket holding the
 * k-th best; the values from that bucket up are then selected and sorted. */
static Py_ssize_t select_touched(SelScratch *sc, const int32_t *idx, Py_ssize_t n,
                                 Py_ssize_t k, int clear) {
    float *acc = sc->acc;
    uint32_t *hist = sc->hist;
    memset(hist, 0, sizeof(uint32_t) * SEL_BUCKETS * SEL_WAYS);
    Py_ssize_t r = 0;
    for (; r + SEL_WAYS <= n; r += SEL_WAYS) {
        for (int w = 0; w < SEL_WAYS; w++) {
            float v = acc[idx[r + w]];
            if (v > 0.0f) hist[w * SEL_BUCKETS + (f32_bits(v) >> 19)]++;
        }
    }
    for (; r < n; r++) {
        float v = acc[idx[r]];
        if (v > 0.0f) hist[f32_bits(v) >> 19]++;
    }
    Py_ssize_t above = 0, floor = SEL_BUCKETS;
    while (floor > 0 && above < k) {
        floor--;
        for (int w = 0; w < SEL_WAYS; w++) above += hist[w * SEL_BUCKETS + floor];
    }
    Cand *c = above ? sel_cands(sc, above) : NULL;
    uint32_t lowest = (uint32_t)floor << 19;
    Py_ssize_t size = 0;
    for (r = 0; r < n; r++) {
        int32_t d = idx[r];
        float v = acc[d];
        if (c && v > 0.0f && f32_bits(v) >= lowest) {
            c[size].v = v;
            c[size].i = d;
            size++;
        }
        if (clear) {
            acc[d] = 0.0f;
            sc->mark[d >> 6] = 0;
        }
    }
    if (above && !c) return -1;
    return cand_finish(c, size, k, sc->hk, sc->hs);
}

typedef struct {
    const Bm25 *z;
    Py_ssize_t depth, width;
    float *ko;        /* (m, depth) */
    int64_t *so;      /* (m, depth) */
    const int64_t *cp; /* (m, width) */
    float *co;        /* (m, width) */
    Py_ssize_t next;  /* the next query to take (atomic) */
    int failed;       /* out of memory (atomic) */
    int keep;         /* leave the (one) query's row as it is (bm25_row) */
    Py_ssize_t kept;  /* ... and the documents it lists (-1: the whole row is dirty) */
} SelJob;

/* Zero a scratch row again: the `kept` documents listed in `touched` (and their bitset
 * words), or the whole row when kept < 0. */
static void row_clear(float *acc, uint64_t *mark, const int32_t *touched, Py_ssize_t kept,
                      Py_ssize_t n_docs) {
    if (kept < 0) {
        memset(acc, 0, sizeof(float) * (size_t)n_docs);
        return;
    }
    for (Py_ssize_t r = 0; r < kept; r++) {
        int32_t d = touched[r];
        if ((uint64_t)(uint32_t)d >= (uint64_t)n_docs) continue;
        acc[d] = 0.0f;
        mark[d >> 6] = 0;
    }
}

/* Query i into the job's outputs, with the scratch sc (left zero); -1: out of memory. */
static int sel_query(SelJob *job, SelScratch *sc, Py_ssize_t i) {
    const Bm25 *z = job->z;
    Py_ssize_t depth = job->depth, width = job->width, n_docs = z->n_docs;
    float *acc = sc->acc;
    int whole = bm25_postings(z, i) * 2 > (int64_t)n_docs;
    Py_ssize_t t = bm25_accumulate(z, i, acc, sc->mark, whole ? NULL : sc->touched);
    for (Py_ssize_t c = 0; c < width; c++) {
        int64_t d = job->cp[i * width + c];
        job->co[i * width + c] = d >= 0 && d < (int64_t)n_docs ? acc[d] : 0.0f;
    }
    Py_ssize_t size = 0;
    int cleared = 0;
    double *hk = sc->hk;
    int64_t *hs = sc->hs;
    if (depth > 0 && whole) {
        size = sc->buf ? select_f32(acc, n_docs, 0.0, hk, hs, depth, sc->buf)
                       : scan_f32(acc, n_docs, 0.0, hk, hs, depth);
        if (!sc->buf) heap_sort(hk, hs, size);
    } else if (depth >= 32) {
        size = select_touched(sc, sc->touched, t, depth, !job->keep);
        cleared = 1;
    } else if (depth > 0) {
        for (Py_ssize_t r = 0; r < t; r++) {
            int32_t d = sc->touched[r];
            double v = (double)acc[d];
            if (!(v > 0.0)) continue; /* positive scores only; NaN never enters */
            if (size == depth && v < hk[0]) continue;
            offer(hk, hs, depth, &size, v, (int64_t)d);
        }
        heap_sort(hk, hs, size);
    }
    if (job->keep) {
        job->kept = whole ? -1 : t;
    } else if (!cleared) {
        row_clear(acc, sc->mark, sc->touched, whole ? -1 : t, n_docs);
    }
    if (size < 0) return -1;
    for (Py_ssize_t r = 0; r < depth; r++) {
        job->ko[i * depth + r] = r < size ? (float)hk[r] : -INFINITY;
        job->so[i * depth + r] = r < size ? hs[r] : -1;
    }
    return 0;
}

/* Take queries from the job's counter until none is left. */
static void sel_run(SelJob *job, SelScratch *sc) {
    for (;;) {
        if (__atomic_load_n(&job->failed, __ATOMIC_RELAXED)) return;
        Py_ssize_t i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
        if (i >= job->z->m) return;
        if (sel_query(job, sc, i) < 0) __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);
    }
}

static void *sel_helper(void *arg) {
    SelJob *job = arg;
    SelScratch sc = {0};
    if (sel_reserve(&sc, job->z->n_docs > 0 ? job->z->n_docs : 1, job->depth) == 0)
        sel_run(job, &sc); /* out of memory: the caller takes every query */
    sel_free_call(&sc);
    sel_free_rows(&sc);
    return NULL;
}

static PyObject *py_bm25_select(PyObject *self, PyObject *args) {
    PyObject *o[13], *o_keys, *o_slots, *o_cand, *o_cout, *o_wmain = NULL, *o_cached = NULL;
    Py_ssize_t depth;
    int threads = 1;
    Bm25 z = {0};
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOdddpnOOOO|iOO", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &z.k1,
                          &z.b, &z.avgdl, &z.okapi, &depth, &o_keys, &o_slots, &o_cand, &o_cout,
                          &threads, &o_wmain, &o_cached))
        return NULL;
    Buf keys = {0}, slots = {0}, cand = {0}, cout = {0};
    PyObject *result = NULL;
    SelScratch *sc = sel_kept();
    if (depth < 0 || threads < 1 || threads > 2) {
        PyErr_SetString(PyExc_ValueError, "bm25_select: depth must be >= 0, threads 1 or 2");
        goto done;
    }
    if (bm25_open(&z, o, "bm25_select", threads, o_wmain, o_cached) < 0) goto done;
    Py_ssize_t m = z.m, n_docs = z.n_docs, width = 0;
    if (depth > 0) {
        if (get_buf(o_keys, &keys, "f", 4, m * depth, 1, "out_keys") < 0) goto done;
        if (get_buf(o_slots, &slots, "lq", 8, m * depth, 1, "out_slots") < 0) goto done;
    }
    if (o_cand != Py_None) {
        if (get_buf(o_cand, &cand, "lq", 8, -1, 0, "candidates") < 0) goto done;
        if (m == 0 ? cand.view.len != 0 : cand.view.len % (8 * m) != 0) {
            PyErr_SetString(PyExc_ValueError, "bm25_select: candidates must be (m, W)");
            goto done;
        }
        width = m ? cand.view.len / (8 * m) : 0;
        if (get_buf(o_cout, &cout, "f", 4, m * width, 1, "out_candidates") < 0) goto done;
    }
    if (!sc || sel_reserve(sc, n_docs > 0 ? n_docs : 1, depth) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    {
        SelJob job = {&z, depth, width, depth ? keys.view.buf : NULL,
                      depth ? slots.view.buf : NULL, cand.view.buf, cout.view.buf, 0, 0, 0, 0};
        Py_BEGIN_ALLOW_THREADS
        pthread_t helper;
        int helped = threads == 2 && m > 1 && pthread_create(&helper, NULL, sel_helper, &job) == 0;
        sel_run(&job, sc);
        if (helped) pthread_join(helper, NULL);
        Py_END_ALLOW_THREADS
        if (job.failed) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    bm25_close(&z);
    if (sc) sel_free_call(sc);
    release(&keys); release(&slots); release(&cand); release(&cout);
    return result;
}

/* bm25_row: bm25_select of one query into caller-owned scratch (acc float32 (N,), mark
 * uint64 (N / 64 + 1,), touched int32 (N + 1,), all zero on entry) that is left as the
 * query wrote it, so that any slots can be scored afterwards without a second pass over
 * the postings: bm25_row_release reads them and clears the scratch. Returns what
 * bm25_row_release needs: the number of listed documents, or -1 when the whole row was
 * written. */

static int row_scratch(PyObject *o_acc, PyObject *o_mark, PyObject *o_touched, Buf *acc,
                       Buf *mark, Buf *touched, Py_ssize_t n_docs) {
    if (get_buf(o_acc, acc, "f", 4, n_docs, 1, "acc") < 0) return -1;
    if (get_buf(o_mark, mark, "LQ", 8, n_docs / 64 + 1, 1, "mark") < 0) return -1;
    if (get_buf(o_touched, touched, "i", 4, n_docs + 1, 1, "touched") < 0) return -1;
    return 0;
}

static PyObject *py_bm25_row(PyObject *self, PyObject *args) {
    PyObject *o[13], *o_keys, *o_slots, *o_acc, *o_mark, *o_touched;
    PyObject *o_wmain = NULL, *o_cached = NULL;
    Py_ssize_t depth;
    Bm25 z = {0};
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOdddpnOOOOO|OO", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &z.k1,
                          &z.b, &z.avgdl, &z.okapi, &depth, &o_keys, &o_slots, &o_acc, &o_mark,
                          &o_touched, &o_wmain, &o_cached))
        return NULL;
    Buf keys = {0}, slots = {0}, acc = {0}, mark = {0}, touched = {0};
    SelScratch sc = {0};
    PyObject *result = NULL;
    if (bm25_open(&z, o, "bm25_row", 1, o_wmain, o_cached) < 0) goto done;
    if (z.m != 1 || depth < 1) {
        PyErr_SetString(PyExc_ValueError, "bm25_row: one query and depth >= 1");
        goto done;
    }
    if (get_buf(o_keys, &keys, "f", 4, depth, 1, "out_keys") < 0) goto done;
    if (get_buf(o_slots, &slots, "lq", 8, depth, 1, "out_slots") < 0) goto done;
    if (row_scratch(o_acc, o_mark, o_touched, &acc, &mark, &touched, z.n_docs) < 0) goto done;
    sc.acc = acc.view.buf;
    sc.mark = mark.view.buf;
    sc.touched = touched.view.buf;
    sc.cap = z.n_docs;
    if (sel_reserve(&sc, 0, depth) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    SelJob job = {&z, depth, 0, keys.view.buf, slots.view.buf, NULL, NULL, 0, 0, 1, 0};
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = sel_query(&job, &sc, 0) < 0;
    Py_END_ALLOW_THREADS
    free(sc.cand);
    if (failed) {
        /* the row is dirty all the same: the caller still releases it */
        PyErr_NoMemory();
        goto done;
    }
    result = PyLong_FromSsize_t(job.kept);
done:
    bm25_close(&z);
    sel_free_call(&sc);
    release(&keys); release(&slots); release(&acc); release(&mark); release(&touched);
    return result;
}

static PyObject *py_bm25_row_release(PyObject *self, PyObject *args) {
    PyObject *o_acc, *o_mark, *o_touched, *o_cand, *o_out;
    Py_ssize_t kept;
    if (!PyArg_ParseTuple(args, "OOOnOO", &o_acc, &o_mark, &o_touched, &kept, &o_cand, &o_out))
        return NULL;
    Buf acc = {0}, mark = {0}, touched = {0}, cand = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buf(o_acc, &acc, "f", 4, -1, 1, "acc") < 0) goto done;
    Py_ssize_t n_docs = acc.view.len / 4;
    if (get_buf(o_mark, &mark, "LQ", 8, n_docs / 64 + 1, 1, "mark") < 0) goto done;
    if (get_buf(o_touched, &touched, "i", 4, n_docs + 1, 1, "touched") < 0) goto done;
    if (kept < -1 || kept > n_docs) {
        PyErr_SetString(PyExc_ValueError, "bm25_row_release: bad count of listed documents");
        goto done;
    }
    Py_ssize_t width = 0;
    if (o_cand != Py_None) {
        if (get_buf(o_cand, &cand, "lq", 8, -1, 0, "candidates") < 0) goto done;
        width = cand.view.len / 8;
        if (get_buf(o_out, &out, "f", 4, width, 1, "out") < 0) goto done;
    }
    {
        float *a = acc.view.buf, *op = out.view.buf;
        uint64_t *mk = mark.view.buf;
        const int32_t *tp = touched.view.buf;
        const int64_t *cp = cand.view.buf;
        for (Py_ssize_t c = 0; c < width; c++)
            op[c] = cp[c] >= 0 && cp[c] < (int64_t)n_docs ? a[cp[c]] : 0.0f;
        row_clear(a, mk, tp, kept, n_docs);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&acc); release(&mark); release(&touched); release(&cand); release(&out);
    return result;
}

/* ------------------------------------------------------------------ spread_pool */
/* Max-product spreading over sparse pool rows (kernels/spread.py: member_positions, then
 * spread_max), one row at a time: each row's members are set in a position table indexed by
 * ordinal (int32, -1 everywhere between calls; entries reset before returning), every
 * neighbour is looked up in it, and each hop takes, per member, the largest live
 * (w * src[j]) * decay^h, floored at 0 -- the float64 operations of spread_max in its order.
 * Only for a base and weights all finite and without a sign bit (every product is then +0 or
 * positive, and the maxima have one answer): otherwise it returns False, computing nothing,
 * and the caller takes the torch steps. */

static int unsigned_finite(const double *x, Py_ssize_t n) {
    int ok = 1;
    for (Py_ssize_t i = 0; i < n; i++) ok &= isfinite(x[i]) && !signbit(x[i]);
    return ok;
}

/* One pool row's max-product spreading: member c's neighbour slots k (positions pos[c·e + k]
 * in the row, -1 for none, weights w[c·e + k]), `steps` hops from `base`, the running maximum
 * from 0 into act; src holds 2·width doubles of scratch. Every product (w · src) · decay^h. */
static void spread_row(const int32_t *pos, const double *w, const double *base, Py_ssize_t width,
                       Py_ssize_t e, int steps, double decay, double *src, double *act) {
    double *step = src + width;
    memcpy(src, base, sizeof(double) * width);
    for (Py_ssize_t c = 0; c < width; c++) act[c] = 0.0;
    for (int h = 0; h < steps; h++) {
        double dec = pow(decay, (double)h);
        for (Py_ssize_t c = 0; c < width; c++) {
            double best = 0.0;
            for (Py_ssize_t k = 0; k < e; k++) {
                int32_t j = pos[c * e + k];
                if (j < 0) continue;
                double v = (w[c * e + k] * src[j]) * dec;
                if (v > best) best = v;
            }
            step[c] = best;
            if (best > act[c]) act[c] = best;
        }
        memcpy(src, step, sizeof(double) * width);
    }
}

/* spread_row's scratch for rows of `width` members with `e` neighbour slots: positions
 * (width * e) and 2 * width doubles; -1 with MemoryError set. */
static int spread_scratch(Py_ssize_t width, Py_ssize_t e, int32_t **pos, double **src) {
    *pos = malloc(sizeof(int32_t) * (size_t)(width * e > 0 ? width * e : 1));
    *src = malloc(sizeof(double) * (size_t)(width > 0 ? 2 * width : 1));
    if (*pos && *src) return 0;
    free(*pos); free(*src);
    PyErr_NoMemory();
    return -1;
}

static PyObject *py_spread_pool(PyObject *self, PyObject *args) {
    PyObject *o_pool, *o_nbr, *o_w, *o_base, *o_table, *o_out;
    int hops;
    double decay;
    if (!PyArg_ParseTuple(args, "OOOOidOO", &o_pool, &o_nbr, &o_w, &o_base, &hops, &decay,
                          &o_table, &o_out))
        return NULL;
    Buf pool = {0}, nbr = {0}, w = {0}, base = {0}, table = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buf(o_base, &base, "d", 8, -1, 0, "base") < 0) goto done;
    if (base.view.ndim != 2) {
        PyErr_SetString(PyExc_ValueError, "spread_pool: base must be (n, W) float64");
        goto done;
    }
    Py_ssize_t n = base.view.shape[0], width = base.view.shape[1];
    if (get_buf(o_pool, &pool, "lq", 8, n * width, 0, "pool") < 0) goto done;
    if (get_buf(o_nbr, &nbr, "lq", 8, -1, 0, "nbr") < 0) goto done;
    Py_ssize_t e = n * width > 0 ? nbr.view.len / (8 * n * width) : 0;
    if (e * 8 * n * width != nbr.view.len) {
        PyErr_SetString(PyExc_ValueError, "spread_pool: nbr must be (n, W, E) int64");
        goto done;
    }
    if (get_buf(o_w, &w, "d", 8, n * width * e, 0, "weight") < 0) goto done;
    if (get_buf(o_table, &table, "i", 4, -1, 1, "table") < 0) goto done;
    if (get_buf(o_out, &out, "d", 8, n * width, 1, "out") < 0) goto done;
    {
        const int64_t *pp = pool.view.buf, *np_ = nbr.view.buf;
        const double *wp = w.view.buf, *bp = base.view.buf;
        int32_t *tp = table.view.buf;
        double *op = out.view.buf;
        int64_t size = table.view.len / 4;
        int steps = hops > 1 ? hops : 1;
        if (!unsigned_finite(bp, n * width) || !unsigned_finite(wp, n * width * e) ||
            !isfinite(decay) || signbit(decay)) {
            result = Py_False;
            Py_INCREF(result);
            goto done;
        }
        int32_t *pos;
        double *src;
        if (spread_scratch(width, e, &pos, &src) < 0) goto done;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            const int64_t *row = pp + i * width, *nb = np_ + i * width * e;
            for (Py_ssize_t c = 0; c < width; c++)
                if (row[c] >= 0 && row[c] < size) tp[row[c]] = (int32_t)c;
            for (Py_ssize_t t = 0; t < width * e; t++)
                pos[t] = nb[t] >= 0 && nb[t] < size ? tp[nb[t]] : -1;
            for (Py_ssize_t c = 0; c < width; c++)
                if (row[c] >= 0 && row[c] < size) tp[row[c]] = -1;
            spread_row(pos, wp + i * width * e, bp + i * width, width, e, steps, decay, src,
                       op + i * width);
        }
        Py_END_ALLOW_THREADS
        free(pos); free(src);
    }
    result = Py_True;
    Py_INCREF(result);
done:
    release(&pool); release(&nbr); release(&w); release(&base); release(&table); release(&out);
    return result;
}

/* spread_dense(nbr int64 (N, E), weight float64 (N, E), valid bool (m, N), base float64
 * (m, N), hops, decay, out float64 (m, N)) -> False when it declines: the dense pool layout's
 * spreading (association.spread_gathered: every row holds the whole store, `valid` its
 * members), one native pass per row -- member r's neighbour slot k counts when r and its
 * neighbour nbr[r, k] are both members -- with spread_row's products and order, so the same
 * bits, without the (m, N, E) gathers. Declines, like spread_pool, when decay or a member's
 * base or a present slot's weight is not finite or carries a sign bit. */
static PyObject *py_spread_dense(PyObject *self, PyObject *args) {
    PyObject *o_nbr, *o_w, *o_valid, *o_base, *o_out;
    int hops;
    double decay;
    if (!PyArg_ParseTuple(args, "OOOOidO", &o_nbr, &o_w, &o_valid, &o_base, &hops, &decay,
                          &o_out))
        return NULL;
    Buf nbr = {0}, w = {0}, valid = {0}, base = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buf(o_base, &base, "d", 8, -1, 0, "base") < 0) goto done;
    if (base.view.ndim != 2) {
        PyErr_SetString(PyExc_ValueError, "spread_dense: base must be (m, N) float64");
        goto done;
    }
    Py_ssize_t m = base.view.shape[0], n = base.view.shape[1];
    if (get_buf(o_nbr, &nbr, "lq", 8, -1, 0, "nbr") < 0) goto done;
    Py_ssize_t e = n > 0 ? nbr.view.len / (8 * n) : 0;
    if (e * 8 * n != nbr.view.len) {
        PyErr_SetString(PyExc_ValueError, "spread_dense: nbr must be (N, E) int64");
        goto done;
    }
    if (get_buf(o_w, &w, "d", 8, n * e, 0, "weight") < 0) goto done;
    if (get_buf(o_valid, &valid, "?bB", 1, m * n, 0, "valid") < 0) goto done;
    if (get_buf(o_out, &out, "d", 8, m * n, 1, "out") < 0) goto done;
    {
        const int64_t *np_ = nbr.view.buf;
        const double *wp = w.view.buf, *bp = base.view.buf;
        const uint8_t *vp = valid.view.buf;
        double *op = out.view.buf;
        int ok = isfinite(decay) && !signbit(decay);
        for (Py_ssize_t t = 0; t < n * e; t++) {
            if (np_[t] < -1 || np_[t] >= n) {
                PyErr_SetString(PyExc_ValueError, "spread_dense: a neighbour outside [-1, N)");
                goto done;
            }
            if (np_[t] >= 0 && (!isfinite(wp[t]) || signbit(wp[t]))) ok = 0;
        }
        for (Py_ssize_t t = 0; t < m * n; t++)
            if (vp[t] && (!isfinite(bp[t]) || signbit(bp[t]))) ok = 0;
        if (!ok) {
            result = Py_False;
            Py_INCREF(result);
            goto done;
        }
        int32_t *pos;
        double *src;
        if (spread_scratch(n, e, &pos, &src) < 0) goto done;
        int steps = hops > 1 ? hops : 1;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < m; i++) {
            const uint8_t *member = vp + i * n;
            for (Py_ssize_t r = 0; r < n; r++) {
                for (Py_ssize_t k = 0; k < e; k++) {
                    int64_t j = np_[r * e + k];
                    pos[r * e + k] = member[r] && j >= 0 && member[j] ? (int32_t)j : -1;
                }
            }
            spread_row(pos, wp, bp + i * n, n, e, steps, decay, src, op + i * n);
        }
        Py_END_ALLOW_THREADS
        free(pos); free(src);
    }
    result = Py_True;
    Py_INCREF(result);
done:
    release(&nbr); release(&w); release(&valid); release(&base); release(&out);
    return result;
}

/* ------------------------------------------------------------------ recall pool: link tables */

/* The link tables as pool_expand and spread_tables read them: each memory's chain row
 * (N, C) and, when there are extra edges, its row of them (row_of (N,) into extra (R, D),
 * with weights extra_w (R, D) for spreading); -1 past a row's edges. */
typedef struct {
    Buf chain, row, extra, ew;
    Py_ssize_t n, cw, rows, dw;
} Links;

static void links_close(Links *l) {
    release(&l->chain); release(&l->row); release(&l->extra); release(&l->ew);
}

/* Read the tables (o_row None: no extra edges; o_ew NULL: weights not needed); -1 with an
 * exception set (the caller still calls links_close). */
static int links_open(Links *l, PyObject *o_chain, PyObject *o_row, PyObject *o_extra,
                      PyObject *o_ew, const char *name) {
    if (get_buf(o_chain, &l->chain, "lq", 8, -1, 0, "chain") < 0) return -1;
    if (l->chain.view.ndim != 2) {
        PyErr_Format(PyExc_ValueError, "%s: chain must be (N, C) int64", name);
        return -1;
    }
    l->n = l->chain.view.shape[0];
    l->cw = l->chain.view.shape[1];
    l->rows = l->dw = 0;
    if (o_row == Py_None) return 0;
    if (get_buf(o_row, &l->row, "lq", 8, l->n, 0, "row_of") < 0) return -1;
    if (get_buf(o_extra, &l->extra, "lq", 8, -1, 0, "extra") < 0) return -1;
    if (l->extra.view.ndim != 2) {
        PyErr_Format(PyExc_ValueError, "%s: extra must be (R, D) int64", name);
        return -1;
    }
    l->rows = l->extra.view.shape[0];
    l->dw = l->extra.view.shape[1];
    if (o_ew && get_buf(o_ew, &l->ew, "d", 8, l->rows * l->dw, 0, "extra_w") < 0) return -1;
    return 0;
}

/* Neighbour slot k (< cw + dw) of memory d (in [0, n)): its chain slots, then its extra-edge
 * row's; -1 for none. *w is the slot's weight: tw for a chain slot (and for none), the edge's
 * for an extra one (when the weights were read). */
static inline int64_t link_at(const Links *l, int64_t d, Py_ssize_t k, double tw, double *w) {
    *w = tw;
    if (k < l->cw) return ((const int64_t *)l->chain.view.buf)[d * l->cw + k];
    int64_t r = l->row.held ? ((const int64_t *)l->row.view.buf)[d] : -1;
    if (r < 0 || r >= l->rows) return -1;
    Py_ssize_t at = r * l->dw + (k - l->cw);
    if (l->ew.held) *w = ((const double *)l->ew.view.buf)[at];
    return ((const int64_t *)l->extra.view.buf)[at];
}

/* ------------------------------------------------------------------ recall pool: expansion */

/* pool_expand(seeds int64 (c,), chain int64 (N, C), row_of int64 (N,) | None,
 * extra int64 (R, D) | None, allowed bool (N,) | None, out int64 (cap,)) -> (seeds, count):
 * one query's pool -- its seeds (the relays' proposals, -1 padding) and every allowed
 * neighbour of a seed (chain row, then its extra-edge row; -1 for none) -- written to out in
 * ascending order without repeats; `seeds` counts the distinct seeds. One bit per memory
 * marks what is in, so the order comes from reading the bits, not from a sort. */
static PyObject *py_pool_expand(PyObject *self, PyObject *args) {
    PyObject *o_seeds, *o_chain, *o_row, *o_extra, *o_allowed, *o_out;
    if (!PyArg_ParseTuple(args, "OOOOOO", &o_seeds, &o_chain, &o_row, &o_extra, &o_allowed,
                          &o_out))
        return NULL;
    Buf seeds = {0}, allowed = {0}, out = {0};
    Links links = {0};
    PyObject *result = NULL;
    uint64_t *bits = NULL;
    if (get_buf(o_seeds, &seeds, "lq", 8, -1, 0, "seeds") < 0) goto done;
    if (links_open(&links, o_chain, o_row, o_extra, NULL, "pool_expand") < 0) goto done;
    Py_ssize_t n = links.n, e = links.cw + links.dw;
    if (o_allowed != Py_None && get_buf(o_allowed, &allowed, "?", 1, n, 0, "allowed") < 0)
        goto done;
    if (get_buf(o_out, &out, "lq", 8, -1, 1, "out") < 0) goto done;
    bits = calloc((size_t)(n / 64 + 1), sizeof(uint64_t));
    if (!bits) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n_seeds = 0, count = 0, cap = out.view.len / 8;
    {
        const int64_t *sp = seeds.view.buf;
        const uint8_t *ap = allowed.held ? allowed.view.buf : NULL;
        int64_t *op = out.view.buf;
        Py_ssize_t c = seeds.view.len / 8;
        for (Py_ssize_t i = 0; i < c; i++) {
            int64_t d = sp[i];
            if (d < 0 || d >= n) continue;
            uint64_t bit = (uint64_t)1 << (d & 63);
            n_seeds += !(bits[d >> 6] & bit);
            bits[d >> 6] |= bit;
        }
        for (Py_ssize_t i = 0; i < c; i++) {
            int64_t d = sp[i];
            if (d < 0 || d >= n) continue;
            for (Py_ssize_t k = 0; k < e; k++) {
                double w;
                int64_t j = link_at(&links, d, k, 0.0, &w);
                if (j < 0 || j >= n || (ap && !ap[j])) continue;
                bits[j >> 6] |= (uint64_t)1 << (j & 63);
            }
        }
        for (Py_ssize_t w = 0; w <= n / 64; w++) {
            uint64_t word = bits[w];
            while (word) {
                if (count == cap) {
                    PyErr_SetString(PyExc_ValueError, "pool_expand: out is too small");
                    goto done;
                }
                op[count++] = (int64_t)w * 64 + __builtin_ctzll(word);
                word &= word - 1;
            }
        }
    }
    result = Py_BuildValue("nn", n_seeds, count);
done:
    free(bits);
    release(&seeds); release(&allowed); release(&out);
    links_close(&links);
    return result;
}

/* ------------------------------------------------------------------ fusion: min-max rows */

/* minmax_rows(x float64 (n, W), valid bool (n, W), out float32 (n, W)): each row min-max
 * normalised over its valid finite entries, (x - lo) / (hi - lo) in float64 rounded to
 * float32 (torch's arithmetic, so the same bits); 0 for the rest, and for every entry of a
 * row without two different finite members. */
static PyObject *py_minmax_rows(PyObject *self, PyObject *args) {
    PyObject *o_x, *o_valid, *o_out;
    if (!PyArg_ParseTuple(args, "OOO", &o_x, &o_valid, &o_out)) return NULL;
    Buf x = {0}, valid = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buf(o_x, &x, "d", 8, -1, 0, "x") < 0) goto done;
    if (x.view.ndim != 2) {
        PyErr_SetString(PyExc_ValueError, "minmax_rows: x must be (n, W) float64");
        goto done;
    }
    Py_ssize_t n = x.view.shape[0], width = x.view.shape[1];
    if (get_buf(o_valid, &valid, "?", 1, n * width, 0, "valid") < 0) goto done;
    if (get_buf(o_out, &out, "f", 4, n * width, 1, "out") < 0) goto done;
    {
        const double *xp = x.view.buf;
        const uint8_t *vp = valid.view.buf;
        float *op = out.view.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            const double *row = xp + i * width;
            const uint8_t *ok = vp + i * width;
            float *dst = op + i * width;
            double lo = INFINITY, hi = -INFINITY;
            for (Py_ssize_t c = 0; c < width; c++) {
                double v = row[c];
                if (!ok[c] || !isfinite(v)) continue;
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
            if (!(hi > lo)) {
                memset(dst, 0, sizeof(float) * (size_t)width);
                continue;
            }
            double span = hi - lo;
            for (Py_ssize_t c = 0; c < width; c++) {
                double v = row[c];
                dst[c] = ok[c] && isfinite(v) ? (float)((v - lo) / span) : 0.0f;
            }
        }
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&x); release(&valid); release(&out);
    return result;
}

/* ------------------------------------------------------------------ fusion: one pass per row */

/* fuse_rows(base float64 (n, W), assoc float64 (n, W) | None, w_assoc, sal float32 (n, W) |
 * None, w_sal, valid bool (n, W), cognitive, importance float64 (n, W), d float64 (n, W),
 * s_term float64 (n, W), beta, tau, match bool (n, W) | None, k, out_rel float64, out_factor
 * float32, out_fused float64 (n, W)) -> bool: fusion.fuse after the base and the association,
 * each row in one pass with the tensor operations' arithmetic in their order (so the same
 * bits): relevance = base + w_assoc * assoc + float32(sal * float32(w_sal)); in cognitive mode
 * the MF-001 factor float32(1 + beta * I / 10 * D * S^0.3), the tag term where a cue matches
 * and relevance * factor * (1 + tau) reaches the row's k-th relevance * factor over its
 * members; fused = relevance * factor (-inf at padding). beta and tau come clipped. False
 * (outputs unspecified) for a NaN relevance * factor of a member in a row that needs its k-th
 * value: the caller takes the tensors. */
static PyObject *py_fuse_rows(PyObject *self, PyObject *args) {
    PyObject *o_base, *o_assoc, *o_sal, *o_valid, *o_imp, *o_d, *o_s, *o_match, *o_rel, *o_fac,
        *o_fused;
    double w_assoc, w_sal, beta, tau;
    int cognitive;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "OOdOdOiOOOddOnOOO", &o_base, &o_assoc, &w_assoc, &o_sal, &w_sal,
                          &o_valid, &cognitive, &o_imp, &o_d, &o_s, &beta, &tau, &o_match, &k,
                          &o_rel, &o_fac, &o_fused))
        return NULL;
    Buf base = {0}, assoc = {0}, sal = {0}, valid = {0}, imp = {0}, dd = {0}, st = {0},
        match = {0}, rel = {0}, fac = {0}, fused = {0};
    PyObject *result = NULL;
    Cand *scratch = NULL; /* a row's members' relevance * factor, for its k-th value */
    if (get_buf(o_base, &base, "d", 8, -1, 0, "base") < 0) goto done;
    if (base.view.ndim != 2) {
        PyErr_SetString(PyExc_ValueError, "fuse_rows: base must be (n, W) float64");
        goto done;
    }
    Py_ssize_t n = base.view.shape[0], width = base.view.shape[1], nw = n * width;
    if (o_assoc != Py_None && get_buf(o_assoc, &assoc, "d", 8, nw, 0, "assoc") < 0) goto done;
    if (o_sal != Py_None && get_buf(o_sal, &sal, "f", 4, nw, 0, "sal") < 0) goto done;
    if (get_buf(o_valid, &valid, "?", 1, nw, 0, "valid") < 0) goto done;
    if (cognitive && (get_buf(o_imp, &imp, "d", 8, nw, 0, "importance") < 0 ||
                      get_buf(o_d, &dd, "d", 8, nw, 0, "d") < 0 ||
                      get_buf(o_s, &st, "d", 8, nw, 0, "s_term") < 0))
        goto done;
    if (o_match != Py_None && get_buf(o_match, &match, "?", 1, nw, 0, "match") < 0) goto done;
    if (get_buf(o_rel, &rel, "d", 8, nw, 1, "out_rel") < 0) goto done;
    if (get_buf(o_fac, &fac, "f", 4, nw, 1, "out_factor") < 0) goto done;
    if (get_buf(o_fused, &fused, "d", 8, nw, 1, "out_fused") < 0) goto done;
    if (k < 1) {
        PyErr_SetString(PyExc_ValueError, "fuse_rows: k must be >= 1");
        goto done;
    }
    scratch = malloc(sizeof(Cand) * (size_t)(width ? width : 1));
    if (!scratch) {
        PyErr_NoMemory();
        goto done;
    }
    int ok = 1;
    {
        const double *bp = base.view.buf, *ap = assoc.held ? assoc.view.buf : NULL;
        const float *sp = sal.held ? sal.view.buf : NULL;
        const uint8_t *vp = valid.view.buf, *mp = match.held ? match.view.buf : NULL;
        const double *ip = imp.held ? imp.view.buf : NULL, *dp = dd.held ? dd.view.buf : NULL;
        const double *tp = st.held ? st.view.buf : NULL;
        double *rp = rel.view.buf, *fp = fused.view.buf;
        float *cp = fac.view.buf;
        float ws = (float)w_sal;
        double lift = 1.0 + tau;
        Py_ssize_t top = k < width ? k : width;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            Py_ssize_t o = i * width, members = 0;
            for (Py_ssize_t c = o; c < o + width; c++) {
                double r = bp[c];
                if (ap) r = r + w_assoc * ap[c];
                if (sp) r = r + (double)(sp[c] * ws);
                rp[c] = r;
                if (!cognitive) {
                    cp[c] = 1.0f;
                    fp[c] = vp[c] ? r : -INFINITY;
                    continue;
                }
                double im = ip[c], dc = dp[c];
                im = im < 0.0 ? 0.0 : (im > 10.0 ? 10.0 : im);
                dc = dc < 0.0 ? 0.0 : (dc > 1.0 ? 1.0 : dc);
                cp[c] = (float)(1.0 + beta * im / 10.0 * dc * tp[c]);
                if (mp && vp[c]) {
                    scratch[members].v = r * (double)cp[c];
                    scratch[members].i = members;
                    members++;
                }
            }
            if (!cognitive) continue;
            double kth = -INFINITY;
            if (mp && members) {
                for (Py_ssize_t j = 0; j < members; j++)
                    if (isnan(scratch[j].v)) ok = 0;
                if (!ok) break;
                Py_ssize_t kk = top < members ? top : members;
                cand_select(scratch, members, kk); /* c[kk - 1] is then the kk-th best */
                kth = scratch[kk - 1].v;
            }
            for (Py_ssize_t c = o; c < o + width; c++) {
                double bf = (double)cp[c], ov = 0.0;
                if (mp && mp[c] && vp[c] && rp[c] * bf * lift >= kth) ov = 1.0;
                float f = (float)(bf * (1.0 + tau * ov));
                cp[c] = f;
                fp[c] = vp[c] ? rp[c] * (double)f : -INFINITY;
            }
        }
        Py_END_ALLOW_THREADS
    }
    result = PyBool_FromLong(ok);
done:
    free(scratch);
    release(&base); release(&assoc); release(&sal); release(&valid); release(&imp);
    release(&dd); release(&st); release(&match); release(&rel); release(&fac); release(&fused);
    return result;
}

/* spread_tables(pool int64 (n, W), chain int64 (N, C), row_of int64 (N,) | None,
 * extra int64 (R, D) | None, extra_w float64 (R, D) | None, temporal_weight, base float64
 * (n, W), hops, decay, table int32 (size,), out float64 (n, W)) -> bool: spread_pool with each
 * member's neighbours read from the link tables (its chain row at temporal_weight, then its
 * extra-edge row at the edges' weights) instead of gathered (n, W, E) arrays -- the same
 * neighbour slots in the same order, the same products. False (nothing written) for a base,
 * weight or decay that is not finite or carries a sign bit: the caller takes the tensors. */
static PyObject *py_spread_tables(PyObject *self, PyObject *args) {
    PyObject *o_pool, *o_chain, *o_row, *o_extra, *o_ew, *o_base, *o_table, *o_out;
    double tw, decay;
    int hops;
    if (!PyArg_ParseTuple(args, "OOOOOdOidOO", &o_pool, &o_chain, &o_row, &o_extra, &o_ew, &tw,
                          &o_base, &hops, &decay, &o_table, &o_out))
        return NULL;
    Buf pool = {0}, base = {0}, table = {0}, out = {0};
    Links links = {0};
    PyObject *result = NULL;
    int32_t *pos = NULL;
    double *wts = NULL, *src = NULL;
    if (get_buf(o_base, &base, "d", 8, -1, 0, "base") < 0) goto done;
    if (base.view.ndim != 2) {
        PyErr_SetString(PyExc_ValueError, "spread_tables: base must be (n, W) float64");
        goto done;
    }
    Py_ssize_t n = base.view.shape[0], width = base.view.shape[1];
    if (get_buf(o_pool, &pool, "lq", 8, n * width, 0, "pool") < 0) goto done;
    if (links_open(&links, o_chain, o_row, o_extra, o_ew, "spread_tables") < 0) goto done;
    Py_ssize_t nn = links.n;
    if (get_buf(o_table, &table, "i", 4, -1, 1, "table") < 0) goto done;
    if (get_buf(o_out, &out, "d", 8, n * width, 1, "out") < 0) goto done;
    const double *bp = base.view.buf;
    if (!unsigned_finite(bp, n * width) || !isfinite(tw) || signbit(tw) || !isfinite(decay) ||
        signbit(decay)) {
        result = Py_False;
        Py_INCREF(result);
        goto done;
    }
    Py_ssize_t e = links.cw + links.dw;
    pos = malloc(sizeof(int32_t) * (size_t)(width * e > 0 ? width * e : 1));
    wts = malloc(sizeof(double) * (size_t)(width * e > 0 ? width * e : 1));
    src = malloc(sizeof(double) * (size_t)(width > 0 ? 2 * width : 1));
    if (!pos || !wts || !src) {
        PyErr_NoMemory();
        goto done;
    }
    {
        const int64_t *pp = pool.view.buf;
        int32_t *tp = table.view.buf;
        int64_t size = table.view.len / 4;
        double *op = out.view.buf;
        int steps = hops > 1 ? hops : 1, ok = 1;
        for (Py_ssize_t i = 0; i < n && ok; i++) {
            const int64_t *prow = pp + i * width;
            for (Py_ssize_t c = 0; c < width; c++)
                if (prow[c] >= 0 && prow[c] < size) tp[prow[c]] = (int32_t)c;
            for (Py_ssize_t c = 0; c < width; c++) {
                int64_t d = prow[c];
                int32_t *pc = pos + c * e;
                double *wc = wts + c * e;
                for (Py_ssize_t k = 0; k < e; k++) {
                    double w = tw;
                    int64_t j = d >= 0 && d < nn ? link_at(&links, d, k, tw, &w) : -1;
                    pc[k] = j >= 0 && j < size ? tp[j] : -1;
                    wc[k] = w;
                    if (pc[k] >= 0 && (!isfinite(w) || signbit(w))) ok = 0;
                }
            }
            for (Py_ssize_t c = 0; c < width; c++)
                if (prow[c] >= 0 && prow[c] < size) tp[prow[c]] = -1;
            if (!ok) break;
            spread_row(pos, wts, bp + i * width, width, e, steps, decay, src, op + i * width);
        }
        result = ok ? Py_True : Py_False;
        Py_INCREF(result);
    }
done:
    free(pos); free(wts); free(src);
    release(&pool); release(&base); release(&table); release(&out);
    links_close(&links);
    return result;
}

/* ------------------------------------------------------------------ token relay: MaxSim */

/* The token relay's cosines are exact up to one rounding: two tokens' int8 rows' integer dot
 * product (dots) over the product of their
 * lengths, in float64 -- what TokenVocab.cosines computes in numpy, bit for bit. The int8
 * rows are a quarter of float32 rows' memory traffic (the dense scan has just evicted the
 * table from the caches). Query tokens are meaningful ones (TokenVocab.ids: a length above 0). */

typedef struct {
    int32_t *keys;   /* open addressing: token id, -1 empty */
    int32_t *slot;   /* its row in sims */
    double *sims;    /* (distinct, t rounded up to 4): the token's cosine with each query token */
    int8_t *qcodes;  /* (t, dim): the query tokens' rows, contiguous for dots */
    int32_t *idots;  /* (t,) */
    int32_t *uniq;   /* (postings,): the distinct token ids in order of first sight */
    int32_t *pslot;  /* (postings,): each posting's row in sims */
    size_t cap, sims_len, t_len, post_len;
} TokScratch;

static void tok_free(TokScratch *s) {
    free(s->keys); free(s->slot); free(s->sims); free(s->qcodes);
    free(s->idots); free(s->uniq); free(s->pslot);
}

/* Room for `postings` distinct tokens against `t` query tokens of `dim` codes, the table
 * emptied; -1 when out of memory. */
static int tok_reserve(TokScratch *s, size_t postings, size_t t, size_t dim) {
    size_t cap = 64;
    while (cap < 2 * postings) cap *= 2;
    if (cap > s->cap) {
        free(s->keys); free(s->slot);
        s->keys = malloc(sizeof(int32_t) * cap);
        s->slot = malloc(sizeof(int32_t) * cap);
        s->cap = s->keys && s->slot ? cap : 0;
        if (!s->cap) return -1;
    }
    if (postings > s->post_len) {
        free(s->uniq); free(s->pslot);
        s->uniq = malloc(sizeof(int32_t) * postings);
        s->pslot = malloc(sizeof(int32_t) * postings);
        s->post_len = s->uniq && s->pslot ? postings : 0;
        if (!s->post_len) return -1;
    }
    size_t stride = (t + 3) & ~(size_t)3;
    if (postings * stride > s->sims_len) {
        free(s->sims);
        s->sims = malloc(sizeof(double) * postings * stride);
        s->sims_len = s->sims ? postings * stride : 0;
        if (!s->sims) return -1;
    }
    if (t > s->t_len) {
        free(s->qcodes); free(s->idots);
        s->qcodes = malloc(dim * t + 1);
        s->idots = malloc(sizeof(int32_t) * t);
        s->t_len = s->qcodes && s->idots ? t : 0;
        if (!s->t_len) return -1;
    }
    memset(s->keys, 0xff, sizeof(int32_t) * s->cap);
    return 0;
}

typedef struct {
    double score;
    int64_t ordinal;
    int64_t at;
} TokRank;

static int tok_rank_cmp(const void *pa, const void *pb) {
    const TokRank *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->ordinal > b->ordinal) - (a->ordinal < b->ordinal);
}

/* min-max over x[0..n) into out (0 everywhere unless two different values) */
static void tok_minmax(const double *x, Py_ssize_t n, double *out) {
    double lo = INFINITY, hi = -INFINITY;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    for (Py_ssize_t j = 0; j < n; j++) out[j] = hi > lo ? (x[j] - lo) / (hi - lo) : 0.0;
}

typedef struct {
    const float *fused;
    const int8_t *codes;
    const int32_t *counts, *ids, *qids;
    const int64_t *ordinals, *offsets, *qoff;
    const double *norm, *weight;
    Py_ssize_t width, n_rows, n_ids, vocab, dim;
    double token_weight;
    int64_t *out_order;
    float *out_fused;
    double *out_token;
} TokJob;

/* The token scores of one query's c members (token[m]; 0 for a member without tokens), in
 * three passes so the cold table rows load together: each posting's distinct-token slot (a
 * distinct token's row prefetched on first sight), each distinct token's cosines with the
 * query tokens, then each member's best per query token, weighted. -1 for a token id out of
 * the table. */
static int tok_maxsim(const TokJob *j, TokScratch *s, const int64_t *ord, Py_ssize_t c,
                      const int32_t *q, size_t t, double *token) {
    Py_ssize_t dim = j->dim;
    double wsum = 0.0;
    for (size_t a = 0; a < t; a++) {
        wsum += j->weight[q[a]];
        memcpy(s->qcodes + a * (size_t)dim, j->codes + (Py_ssize_t)q[a] * dim, (size_t)dim);
    }
    size_t distinct = 0, n_post = 0, mask = s->cap - 1;
    for (Py_ssize_t m = 0; m < c; m++) {
        for (int64_t p = j->offsets[ord[m]]; p < j->offsets[ord[m] + 1]; p++) {
            int32_t u = j->ids[p];
            if (u < 0 || u >= j->vocab) return -1;
            size_t h = (((uint32_t)u * 2654435761u) >> 7) & mask;
            while (s->keys[h] != -1 && s->keys[h] != u) h = (h + 1) & mask;
            if (s->keys[h] == -1) {
                s->keys[h] = u, s->slot[h] = (int32_t)distinct, s->uniq[distinct++] = u;
                const int8_t *row = j->codes + (Py_ssize_t)u * dim;
                for (Py_ssize_t d = 0; d < dim; d += 64) __builtin_prefetch(row + d);
            }
            s->pslot[n_post++] = s->slot[h];
        }
    }
    size_t stride = (t + 3) & ~(size_t)3;
    for (size_t d = 0; d < distinct; d++) {
        int32_t u = s->uniq[d];
        dots(j->codes + (Py_ssize_t)u * dim, s->qcodes, (Py_ssize_t)t, dim, s->idots);
        double *row = s->sims + d * stride;
        for (size_t a = 0; a < t; a++)
            row[a] = (double)s->idots[a] / (j->norm[q[a]] * j->norm[u]);
        for (size_t a = t; a < stride; a++) row[a] = -INFINITY;
    }
    /* each member's best per query token, four query tokens at a time in registers (rows of
     * sims padded to a multiple of four with -inf; a maximum is exact, so the order of the
     * postings does not change it) */
    n_post = 0;
    for (Py_ssize_t m = 0; m < c; m++) {
        int64_t lo = j->offsets[ord[m]], hi = j->offsets[ord[m] + 1];
        if (lo == hi) continue;
        const int32_t *slots = s->pslot + n_post;
        n_post += (size_t)(hi - lo);
        double acc = 0.0;
        for (size_t a = 0; a < t; a += 4) {
            double b0 = -INFINITY, b1 = -INFINITY, b2 = -INFINITY, b3 = -INFINITY;
            for (int64_t p = 0; p < hi - lo; p++) {
                const double *row = s->sims + (size_t)slots[p] * stride + a;
                b0 = row[0] > b0 ? row[0] : b0;
                b1 = row[1] > b1 ? row[1] : b1;
                b2 = row[2] > b2 ? row[2] : b2;
                b3 = row[3] > b3 ? row[3] : b3;
            }
            double b[4] = {b0, b1, b2, b3};
            for (size_t l = 0; l < 4 && a + l < t; l++) acc += j->weight[q[a + l]] * b[l];
        }
        token[m] = wsum > 0 ? acc / wsum : 0.0;
    }
    return 0;
}

/* One query's token scores (out_token row), then its order and mixed scores; -1 out of
 * memory, -2 for a token row out of range. */
static int tok_query(const TokJob *j, TokScratch *s, Py_ssize_t i, TokRank *rank, double *tmp) {
    Py_ssize_t c = j->counts[i], w = j->width;
    const int64_t *ord = j->ordinals + i * w;
    const int32_t *q = j->qids + j->qoff[i];
    size_t t = (size_t)(j->qoff[i + 1] - j->qoff[i]), postings = 0;
    double *token = j->out_token + i * w;
    for (Py_ssize_t m = 0; m < w; m++) token[m] = 0.0;
    for (Py_ssize_t m = 0; m < c; m++) {
        int64_t lo = j->offsets[ord[m]], hi = j->offsets[ord[m] + 1];
        if (lo < 0 || hi < lo || hi > j->n_ids) return -2;
        for (int64_t p = lo; p < hi; p += 16) __builtin_prefetch(j->ids + p); /* for pass one */
        postings += (size_t)(hi - lo);
    }
    if (t > 0 && postings > 0) {
        if (tok_reserve(s, postings, t, (size_t)j->dim) < 0) return -1;
        if (tok_maxsim(j, s, ord, c, q, t, token) < 0) return -2;
    }
    const float *fused = j->fused + i * w;
    int64_t *order = j->out_order + i * w;
    float *out = j->out_fused + i * w;
    for (Py_ssize_t m = 0; m < w; m++) order[m] = m, out[m] = fused[m];
    if (c == 0) return 0;
    double *fm = tmp, *tm = tmp + w;
    for (Py_ssize_t m = 0; m < c; m++) fm[m] = (double)fused[m];
    tok_minmax(fm, c, fm);
    tok_minmax(token, c, tm);
    for (Py_ssize_t m = 0; m < c; m++) {
        rank[m].score = fm[m] + j->token_weight * tm[m];
        rank[m].ordinal = ord[m], rank[m].at = m;
    }
    qsort(rank, (size_t)c, sizeof(TokRank), tok_rank_cmp);
    for (Py_ssize_t m = 0; m < c; m++) order[m] = rank[m].at, out[m] = (float)rank[m].score;
    return 0;
}

/* A batch shared with a helper thread: each takes the next query from one counter (so the
 * caller never waits for more than the query the helper holds) with scratch of its own; the
 * first error (-1 out of memory, -2 a token row out of range) stops both. Every query's rows
 * are its own, so the outputs are those of one thread, bit for bit. */
typedef struct {
    const TokJob *job;
    Py_ssize_t n;
    Py_ssize_t next; /* atomic */
    int rc;          /* atomic: 0, or the first error */
} TokShared;

static void tok_run(TokShared *sh, TokScratch *s, TokRank *rank, double *tmp) {
    for (;;) {
        if (__atomic_load_n(&sh->rc, __ATOMIC_RELAXED)) return;
        Py_ssize_t i = __atomic_fetch_add(&sh->next, 1, __ATOMIC_RELAXED);
        if (i >= sh->n) return;
        int rc = tok_query(sh->job, s, i, rank, tmp);
        int zero = 0;
        if (rc) __atomic_compare_exchange_n(&sh->rc, &zero, rc, 0, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED);
    }
}

static void *tok_helper(void *arg) {
    TokShared *sh = arg;
    Py_ssize_t w = sh->job->width ? sh->job->width : 1;
    TokScratch s = {0};
    TokRank *rank = malloc(sizeof(TokRank) * (size_t)w);
    double *tmp = malloc(sizeof(double) * 2 * (size_t)w);
    if (rank && tmp) tok_run(sh, &s, rank, tmp); /* out of memory: the caller takes them all */
    tok_free(&s);
    free(rank);
    free(tmp);
    return NULL;
}

/* Every count, member ordinal and query token in range (the token rows are checked as read);
 * else a ValueError names the culprit. */
static int tok_check(const TokJob *j, Py_ssize_t n, Py_ssize_t n_q) {
    const char *what = NULL;
    if (j->qoff[0] != 0 || j->qoff[n] != n_q) what = "query token offsets";
    for (Py_ssize_t i = 0; i < n && !what; i++) {
        if (j->qoff[i + 1] < j->qoff[i]) what = "query token offsets";
        else if (j->counts[i] < 0 || j->counts[i] > j->width) what = "a member count";
        for (Py_ssize_t m = 0; m < j->counts[i] && !what; m++) {
            int64_t o = j->ordinals[i * j->width + m];
            if (o < 0 || o >= j->n_rows) what = "a member ordinal";
        }
    }
    for (Py_ssize_t a = 0; a < n_q && !what; a++)
        if (j->qids[a] < 0 || j->qids[a] >= j->vocab) what = "a query token";
    if (!what) return 0;
    PyErr_Format(PyExc_ValueError, "token_rescore: %s out of range", what);
    return -1;
}

/* token_rescore(fused float32 (n, W), counts int32 (n,), ordinals int64 (n, W), offsets int64
 * (N + 1), ids int32, codes int8 (V, dim), norm float64 (V,), weight float64 (V,),
 * query_offsets int64 (n + 1), query_ids int32, token_weight, out_order int64 (n, W),
 * out_fused float32 (n, W), out_token float64 (n, W)): the token relay (token_relay.py) over
 * each query's first counts[i] members: MaxSim of its query tokens against each member's token
 * row (each distinct token's cosines computed once per query), then the members ordered by
 * minmax(fused) + token_weight * minmax(token), ties to the lower ordinal; out_order holds
 * positions into the row (the identity past the count), out_fused the mixed scores in that
 * order (the input past the count), out_token the token scores in the input order. With
 * threads = 2 (optional, default 1) a helper thread shares the queries (TokShared). */
static PyObject *py_token_rescore(PyObject *self, PyObject *args) {
    PyObject *o[13];
    double tw;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOdOOO|i", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &o[8], &o[9], &tw, &o[10], &o[11], &o[12], &threads))
        return NULL;
    if (threads < 1 || threads > 2) {
        PyErr_SetString(PyExc_ValueError, "token_rescore: threads must be 1 or 2");
        return NULL;
    }
    Buf b[13];
    memset(b, 0, sizeof b);
    PyObject *result = NULL;
    TokScratch scratch = {0};
    TokRank *rank = NULL;
    double *tmp = NULL;
    if (get_buf(o[0], &b[0], "f", 4, -1, 0, "fused") < 0) goto done;
    if (b[0].view.ndim != 2) {
        PyErr_SetString(PyExc_ValueError, "token_rescore: fused must be (n, W) float32");
        goto done;
    }
    Py_ssize_t n = b[0].view.shape[0], w = b[0].view.shape[1];
    if (get_buf(o[1], &b[1], "i", 4, n, 0, "counts") < 0 ||
        get_buf(o[2], &b[2], "lq", 8, n * w, 0, "ordinals") < 0 ||
        get_buf(o[3], &b[3], "lq", 8, -1, 0, "offsets") < 0 ||
        get_buf(o[4], &b[4], "i", 4, -1, 0, "ids") < 0 ||
        get_buf(o[5], &b[5], "b", 1, -1, 0, "codes") < 0 ||
        get_buf(o[6], &b[6], "d", 8, -1, 0, "norm") < 0 ||
        get_buf(o[7], &b[7], "d", 8, -1, 0, "weight") < 0 ||
        get_buf(o[8], &b[8], "lq", 8, n + 1, 0, "query_offsets") < 0 ||
        get_buf(o[9], &b[9], "i", 4, -1, 0, "query_ids") < 0 ||
        get_buf(o[10], &b[10], "lq", 8, n * w, 1, "out_order") < 0 ||
        get_buf(o[11], &b[11], "f", 4, n * w, 1, "out_fused") < 0 ||
        get_buf(o[12], &b[12], "d", 8, n * w, 1, "out_token") < 0)
        goto done;
    Py_ssize_t vocab = b[7].view.len / 8;
    if (b[5].view.ndim != 2 || b[5].view.shape[0] != vocab || b[6].view.len / 8 != vocab ||
        b[3].view.len < 8 || !isfinite(tw)) {
        PyErr_SetString(PyExc_ValueError,
                        "token_rescore: codes must be (V, dim) beside norm and weight (V,), "
                        "offsets non-empty, token_weight finite");
        goto done;
    }
    TokJob job = {
        .fused = b[0].view.buf,
        .codes = b[5].view.buf,
        .counts = b[1].view.buf,
        .ids = b[4].view.buf,
        .qids = b[9].view.buf,
        .ordinals = b[2].view.buf,
        .offsets = b[3].view.buf,
        .qoff = b[8].view.buf,
        .norm = b[6].view.buf,
        .weight = b[7].view.buf,
        .width = w,
        .n_rows = b[3].view.len / 8 - 1,
        .n_ids = b[4].view.len / 4,
        .vocab = vocab,
        .dim = b[5].view.shape[1],
        .token_weight = tw,
        .out_order = b[10].view.buf,
        .out_fused = b[11].view.buf,
        .out_token = b[12].view.buf,
    };
    if (tok_check(&job, n, b[9].view.len / 4) < 0) goto done;
    rank = malloc(sizeof(TokRank) * (w ? w : 1));
    tmp = malloc(sizeof(double) * 2 * (w ? w : 1));
    if (!rank || !tmp) {
        PyErr_NoMemory();
        goto done;
    }
    TokShared shared = {&job, n, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    pthread_t helper;
    int helped = threads == 2 && n > 1 && pthread_create(&helper, NULL, tok_helper, &shared) == 0;
    tok_run(&shared, &scratch, rank, tmp);
    if (helped) pthread_join(helper, NULL);
    Py_END_ALLOW_THREADS
    int rc = shared.rc;
    if (rc == -1) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == -2) {
        PyErr_SetString(PyExc_ValueError, "token_rescore: token rows out of range");
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < 13; k++) release(&b[k]);
    tok_free(&scratch);
    free(rank);
    free(tmp);
    return result;
}

/* ------------------------------------------------------------------ scan helper: tests */

static PyMethodDef methods[] = {
    {"decay_topk", py_decay_topk, METH_VARARGS,
     "decay_topk(n, now, w_div, weight, flags, arousal, d_event, last_ms, allowed, freeze_set, "
     "need_set, edges, factors, out_keys, out_slots[, horizon]) -> count, or (count, next "
     "change ms) with horizon"},
    {"bm25_dense", py_bm25_dense, METH_VARARGS,
     "bm25_dense(q_indptr, q_terms, q_counts, idf, main_lo, main_hi, main_doc, main_tf, "
     "tail_indptr, tail_doc, tail_tf, doc_len, allowed, k1, b, avgdl, okapi, out)"},
    {"bm25_select", py_bm25_select, METH_VARARGS,
     "bm25_select(q_indptr, q_terms, q_counts, idf, main_lo, main_hi, main_doc, main_tf, "
     "tail_indptr, tail_doc, tail_tf, doc_len, allowed, k1, b, avgdl, okapi, depth, out_keys, "
     "out_slots, candidates, out_candidates[, threads[, weight_cache, cached]])"},
    {"bm25_row", py_bm25_row, METH_VARARGS,
     "bm25_row(<the 17 leading arguments of bm25_select>, depth, out_keys, out_slots, acc, "
     "mark, touched[, weight_cache, cached]) -> kept: one query, its scratch row left written"},
    {"bm25_row_release", py_bm25_row_release, METH_VARARGS,
     "bm25_row_release(acc, mark, touched, kept, candidates, out): score slots from a kept "
     "row, then clear it"},
    {"pool_expand", py_pool_expand, METH_VARARGS,
     "pool_expand(seeds, chain, row_of, extra, allowed, out) -> (distinct seeds, count): one "
     "query's seeds and their allowed neighbours, ascending"},
    {"pool_columns", py_pool_columns, METH_VARARGS,
     "pool_columns(n, now, ordinals, importance, flags, arousal, formed_ms, d_event, last_ms, "
     "storage, freeze_set, need_set, edges, factors, <8 outputs: importance, flags, arousal, "
     "d_event, last_ms, storage, formed_ms, D now (float64)>)"},
    {"minmax_rows", py_minmax_rows, METH_VARARGS,
     "minmax_rows(x float64 (n, W), valid bool (n, W), out float32 (n, W)): rows min-max "
     "normalised over valid finite entries"},
    {"fuse_rows", py_fuse_rows, METH_VARARGS,
     "fuse_rows(base, assoc, w_assoc, sal, w_sal, valid, cognitive, importance, d, s_term, "
     "beta, tau, match, k, out_rel, out_factor, out_fused) -> False when it declines: fusion "
     "after the base and the association, one native pass per row"},
    {"spread_tables", py_spread_tables, METH_VARARGS,
     "spread_tables(pool, chain, row_of, extra, extra_w, temporal_weight, base, hops, decay, "
     "table, out) -> bool: spread_pool reading each member's neighbours from the link tables"},
    {"spread_dense", py_spread_dense, METH_VARARGS,
     "spread_dense(nbr, weight, valid, base, hops, decay, out) -> False when it declines: the "
     "dense pool layout's spreading, one native pass per row"},
    {"spread_pool", py_spread_pool, METH_VARARGS,
     "spread_pool(pool, nbr, weight, base, hops, decay, table, out) -> False when it declines "
     "(a non-finite or sign-bit base, weight or decay)"},
    {"token_rescore", py_token_rescore, METH_VARARGS,
     "token_rescore(fused, counts, ordinals, offsets, ids, codes, norm, weight, query_offsets, "
     "query_ids, token_weight, out_order, out_fused, out_token[, threads]): the token relay's "
     "MaxSim and order over each query's fused top list (threads 2: a helper shares them)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_legacy", NULL, -1, methods};

PyMODINIT_FUNC PyInit__legacy(void) {
    return PyModule_Create(&module);
}
