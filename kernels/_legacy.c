/* spector_gpu.kernels._legacy (being split into kernels/csrc/ files bound by Cython, see
 * kernels/native.py): CPU kernels of the recall pathway (optional: every function has
 * a numpy/torch twin in spector_gpu.kernels, used when this is not built). All run on the
 * calling thread, except that int8_topk may share a large scan with one helper thread.
 *
 * int8_topk        exact top-k of float32(dot(q, c_r)) * s_r over the rows of an INT8 matrix,
 *                  for a few queries, rows read once (the single-query dense relay); with
 *                  out_all and threads=2, row chunks are shared with a persistent helper
 *                  thread (see "the scan helper thread")
 * int8_score_rows  the same keys for given (query, row) pairs (pool scoring)
 * topk_update      merge the keys of a tile of int32 or float32 dots (T rows x n queries,
 *                  from a GEMM) into per-query candidate buffers; topk_finish sorts them
 * rows_topk        exact top-k of each row of a float32 or float64 matrix above a bound
 * decay_topk       exact top-k of w_r / div * float32(d_r * f(bucket(t_r))) (piecewise decay)
 * pool_columns     the columns recall reads for pool members and their D now, one pass
 * minmax_rows, fuse_rows   fusion's normalisation and the fused score of pool rows, one pass
 *                  per row (relevance_rows moved to csrc/fusion.c)
 * spread_pool, spread_dense, spread_tables   max-product spreading over pool rows
 * pool_expand      one query's seeds and their allowed neighbours (the association pool)
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

/* ------------------------------------------------------------------ dot products */
/* The INT8 dot products of one row with m queries: a plain loop the compiler vectorises
 * (int8 widened to int16, pairwise int32 sums). On x86-64 GCC and clang build it twice
 * (target_clones): an AVX2 clone, taken where the CPU has AVX2 (every machine this project
 * tests on), and the baseline SSE2 clone; the loader picks one at import. No hand-written
 * intrinsics: every line is the same C on every CPU, and the sums are exact integers. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif

VECTOR_CLONES static void dots(const int8_t *row, const int8_t *qs, Py_ssize_t m, Py_ssize_t d,
                               int32_t *out) {
    for (Py_ssize_t j = 0; j < m; j++) {
        const int8_t *q = qs + j * d;
        int32_t acc = 0;
        for (Py_ssize_t i = 0; i < d; i++) acc += (int16_t)row[i] * (int16_t)q[i];
        out[j] = acc;
    }
}

/* The scan's forms take the query widened to int16 once per call (scan_widen), so that each
 * step reads 16 row codes, widens them and multiplies-adds them in pairs against the query
 * with no work spent on it: dots16 for m queries against one row, dots_rows for one query
 * against ROWS_BLOCK rows `stride` bytes apart (a sum per row, each query step loaded once). */
#define ROWS_BLOCK 4

VECTOR_CLONES static void dots16(const int8_t *row, const int16_t *qs, Py_ssize_t m,
                                 Py_ssize_t d, int32_t *out) {
    for (Py_ssize_t j = 0; j < m; j++) {
        const int16_t *q = qs + j * d;
        int32_t acc = 0;
        for (Py_ssize_t i = 0; i < d; i++) acc += (int16_t)row[i] * q[i];
        out[j] = acc;
    }
}

VECTOR_CLONES static void dots_rows(const int8_t *rows, Py_ssize_t stride, const int16_t *q,
                                    Py_ssize_t d, int32_t *out) {
    const int8_t *r0 = rows, *r1 = r0 + stride, *r2 = r1 + stride, *r3 = r2 + stride;
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (Py_ssize_t i = 0; i < d; i++) {
        a0 += (int16_t)r0[i] * q[i];
        a1 += (int16_t)r1[i] * q[i];
        a2 += (int16_t)r2[i] * q[i];
        a3 += (int16_t)r3[i] * q[i];
    }
    out[0] = a0, out[1] = a1, out[2] = a2, out[3] = a3;
}

/* The m queries' codes widened to int16 (m, d); NULL when out of memory. */
static int16_t *scan_widen(const int8_t *q, Py_ssize_t m, Py_ssize_t d) {
    int16_t *w = malloc(sizeof(int16_t) * (size_t)(m * d));
    for (Py_ssize_t i = 0; w && i < m * d; i++) w[i] = q[i];
    return w;
}

/* ------------------------------------------------------------------ top-k heaps */
/* A heap of k (key, slot) pairs with the *worst* pair at its root: worse = lower key, or the
 * same key and a higher slot. A candidate enters when it is better than the root. */

static inline int worse(double ka, int64_t sa, double kb, int64_t sb) {
    return ka < kb || (ka == kb && sa > sb);
}

static void sift_down(double *key, int64_t *slot, Py_ssize_t size, Py_ssize_t i) {
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < size && worse(key[l], slot[l], key[w], slot[w])) w = l;
        if (r < size && worse(key[r], slot[r], key[w], slot[w])) w = r;
        if (w == i) return;
        double tk = key[i]; key[i] = key[w]; key[w] = tk;
        int64_t ts = slot[i]; slot[i] = slot[w]; slot[w] = ts;
        i = w;
    }
}

static void sift_up(double *key, int64_t *slot, Py_ssize_t i) {
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!worse(key[i], slot[i], key[p], slot[p])) return;
        double tk = key[i]; key[i] = key[p]; key[p] = tk;
        int64_t ts = slot[i]; slot[i] = slot[p]; slot[p] = ts;
        i = p;
    }
}

/* Offer (k, s) to a heap of capacity cap holding *size pairs. */
static inline void offer(double *key, int64_t *slot, Py_ssize_t cap, Py_ssize_t *size, double k,
                         int64_t s) {
    if (*size < cap) {
        key[*size] = k;
        slot[*size] = s;
        sift_up(key, slot, (*size)++);
    } else if (worse(key[0], slot[0], k, s)) {
        key[0] = k;
        slot[0] = s;
        sift_down(key, slot, cap, 0);
    }
}

/* Sort a heap best first in place (heapsort: repeatedly move the worst to the end). */
static void heap_sort(double *key, int64_t *slot, Py_ssize_t size) {
    for (Py_ssize_t end = size - 1; end > 0; end--) {
        double tk = key[0]; key[0] = key[end]; key[end] = tk;
        int64_t ts = slot[0]; slot[0] = slot[end]; slot[end] = ts;
        sift_down(key, slot, end, 0);
    }
}

/* float32 value <= x (x a float32 value stored as double, or -inf) */
static inline float below(double x) {
    float f = (float)x;
    return (double)f > x ? nextafterf(f, -INFINITY) : f;
}

/* Offer one tile row's keys (n queries) to the heaps; thr[j] is a float32 bound below which a
 * key cannot enter heap j (a heap not yet full has -inf). */
static inline void offer_key(float key, Py_ssize_t j, Py_ssize_t k, int64_t slot, float *thr,
                             double *kp, int64_t *lp, Py_ssize_t *zp) {
    double *hk = kp + j * k;
    if (zp[j] == k && !((double)key > hk[0])) return; /* equal keys: the lower slot stays */
    offer(hk, lp + j * k, k, &zp[j], (double)key, slot);
    if (zp[j] == k) thr[j] = below(hk[0]);
}

/* ------------------------------------------------------------------ buffered selection */
/* Candidates above a running threshold are appended to a buffer of 2k; when it fills, a
 * quickselect keeps the k best and the threshold rises to the k-th. About log(P/k) selections
 * of 2k items instead of a heap update per insertion: the row top-k of large k. Order: value
 * descending, then index ascending (a total order, so ties at the threshold stay exact). */
typedef struct {
    double v; /* float32 keys exactly, float64 rows as they are (16 bytes either way) */
    int64_t i;
} Cand;

static inline int cand_better(const Cand *a, const Cand *b) {
    return a->v > b->v || (a->v == b->v && a->i < b->i);
}

/* Hoare partition of c[lo..hi] around its middle candidate: afterwards every candidate in
 * c[lo..*pb] is no worse and every one in c[*pa..hi] no better than the pivot (*pb < *pa). */
static void cand_partition(Cand *c, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *pa,
                           Py_ssize_t *pb) {
    Cand pivot = c[lo + (hi - lo) / 2];
    Py_ssize_t a = lo, b = hi;
    while (a <= b) {
        while (cand_better(&c[a], &pivot)) a++;
        while (cand_better(&pivot, &c[b])) b--;
        if (a <= b) {
            Cand t = c[a]; c[a] = c[b]; c[b] = t;
            a++;
            b--;
        }
    }
    *pa = a;
    *pb = b;
}

/* Rearrange c[0..n) so that c[0..k) are the k best (in no order). */
static void cand_select(Cand *c, Py_ssize_t n, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = n - 1, a, b;
    while (lo < hi) {
        cand_partition(c, lo, hi, &a, &b);
        if (k - 1 <= b) hi = b;
        else if (k - 1 >= a) lo = a;
        else return;
    }
}

/* Sort candidates best first (value descending, index ascending): a quicksort with the
 * comparison inlined, insertion sort below 16. */
static void cand_sort(Cand *c, Py_ssize_t n) {
    Py_ssize_t a, b;
    while (n > 16) {
        cand_partition(c, 0, n - 1, &a, &b);
        if (b + 1 < n - a) { /* recurse into the smaller side */
            cand_sort(c, b + 1);
            c += a;
            n -= a;
        } else {
            cand_sort(c + a, n - a);
            n = b + 1;
        }
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        Cand x = c[i];
        Py_ssize_t j = i;
        for (; j > 0 && cand_better(&x, &c[j - 1]); j--) c[j] = c[j - 1];
        c[j] = x;
    }
}

/* Append one candidate; a full buffer (2k) keeps its k best and raises the threshold to the
 * k-th (a later equal value has a higher index: never better). */
static inline void cand_push(Cand *buf, Py_ssize_t *size, Py_ssize_t k, double *thr, double v,
                             int64_t i) {
    buf[*size].v = v;
    buf[*size].i = i;
    if (++*size == 2 * k) {
        cand_select(buf, *size, k);
        *size = k;
        double worst = buf[0].v;
        for (Py_ssize_t t = 1; t < k; t++) worst = buf[t].v < worst ? buf[t].v : worst;
        *thr = worst;
    }
}

/* The k best of `size` candidates, best first, into (hk, hs); returns the count. */
static Py_ssize_t cand_finish(Cand *buf, Py_ssize_t size, Py_ssize_t k, double *hk,
                              int64_t *hs) {
    if (size > k) {
        cand_select(buf, size, k);
        size = k;
    }
    cand_sort(buf, size);
    for (Py_ssize_t t = 0; t < size; t++) {
        hk[t] = buf[t].v;
        hs[t] = buf[t].i;
    }
    return size;
}

/* The k best x[i] > bound of one float64 row into (hk, hs), best first; returns the count. */
static Py_ssize_t select_f64(const double *x, Py_ssize_t n, double bound, double *hk,
                             int64_t *hs, Py_ssize_t k, Cand *buf) {
    Py_ssize_t size = 0;
    double thr = bound;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!(x[i] > thr)) continue; /* NaN never enters */
        cand_push(buf, &size, k, &thr, x[i], i);
    }
    return cand_finish(buf, size, k, hk, hs);
}


/* The k best x[i] > bound of one float32 row into (hk, hs), best first; returns the count. */
/* Whether any of x[0..16) is > t (a float32 bound at or below the threshold): a loop the
 * compiler vectorises, so a block of 16 keys that cannot enter costs one vector compare. */
static inline int any_above16(const float *x, float t) {
    int any = 0;
    for (int l = 0; l < 16; l++) any |= x[l] > t;
    return any;
}

/* The k best x[i] > bound of one float32 row into (hk, hs), best first; returns the count.
 * Blocks of 16 with nothing above the threshold are skipped; the rest are tested one by one
 * as the plain loop tests them, so the same candidates enter in the same order. */
VECTOR_CLONES static Py_ssize_t select_f32(const float *x, Py_ssize_t n, double bound,
                                           double *hk, int64_t *hs, Py_ssize_t k, Cand *buf) {
    Py_ssize_t size = 0;
    double thr = bound;
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (!any_above16(x + i, below(thr))) continue;
        for (Py_ssize_t j = i; j < i + 16; j++)
            if ((double)x[j] > thr) cand_push(buf, &size, k, &thr, x[j], j);
    }
    for (; i < n; i++) {
        if (!((double)x[i] > thr)) continue; /* NaN never enters */
        cand_push(buf, &size, k, &thr, x[i], i);
    }
    return cand_finish(buf, size, k, hk, hs);
}

/* Offer every x[i] > bound (columns i ascending) to an empty heap of capacity k; returns
 * the heap size. Once the heap is full a candidate must beat its root, and since columns
 * rise an equal value never does: one compare against a running threshold, which the vector
 * variants make 8 or 16 values at a time (returning where the scalar tail starts). */
static inline void scan_offer(double v, int64_t i, double *thr, double *hk, int64_t *hs,
                              Py_ssize_t k, Py_ssize_t *size) {
    if (!(v > *thr)) return; /* NaN never enters */
    offer(hk, hs, k, size, v, i);
    if (*size == k) *thr = hk[0];
}


VECTOR_CLONES static Py_ssize_t scan_f32(const float *x, Py_ssize_t n, double bound,
                                         double *hk, int64_t *hs, Py_ssize_t k) {
    Py_ssize_t size = 0, i = 0;
    double thr = bound;
    for (; i + 16 <= n; i += 16) {
        if (!any_above16(x + i, below(thr))) continue;
        for (Py_ssize_t j = i; j < i + 16; j++)
            scan_offer((double)x[j], (int64_t)j, &thr, hk, hs, k, &size);
    }
    for (; i < n; i++) scan_offer((double)x[i], (int64_t)i, &thr, hk, hs, k, &size);
    return size;
}

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

/* A C-contiguous float32 or float64 buffer. */
static int get_float_buf(PyObject *obj, Buf *b) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (*f == '<' || *f == '=') f++;
    if (!((*f == 'f' && b->view.itemsize == 4) || (*f == 'd' && b->view.itemsize == 8)) ||
        f[1] != '\0') {
        PyErr_SetString(PyExc_ValueError, "x: expected a float32 or float64 array");
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

/* ------------------------------------------------------------------ keys, then selection */
/* The scan in two steps: every row's key into out (m, n_rows) (gated rows -inf), then each
 * query's top-k selected from its row of keys. The keys of a row range do not depend on any
 * other range, so ranges can be computed by any thread in any order; the selection orders by
 * (key descending, slot ascending) as the heap does, and adds allowed rows whose key is -inf
 * (slot ascending) when fewer than k keys are above it, as the heap takes them while not full:
 * the result equals the fused heap scan bit for bit. int8_topk takes this road when asked for
 * every row's key with threads=2 (with the helper thread below when it is free, else alone:
 * alone it costs what the fused scan does, 1.21 vs 1.26 ms for 100k x 384, k = 200). */

#define SCAN_MAX_QUERIES 8

typedef struct {
    const int8_t *codes;
    const float *scales;
    const int16_t *q;       /* (m, dim), widened (scan_widen) */
    const uint8_t *allowed; /* (n_rows,) or NULL */
    Py_ssize_t n_rows, dim, stride, m;
} Scan;

/* Keys of rows [lo, hi) for every query into out[j * n_rows + r]. */
static void scan_keys(const Scan *s, Py_ssize_t lo, Py_ssize_t hi, float *out) {
    const int8_t *cp = s->codes;
    const int16_t *qp = s->q;
    const float *sp = s->scales;
    const uint8_t *ap = s->allowed;
    Py_ssize_t n = s->n_rows, dim = s->dim, stride = s->stride, m = s->m;
    Py_ssize_t r = lo;
    int32_t d8[SCAN_MAX_QUERIES > ROWS_BLOCK ? SCAN_MAX_QUERIES : ROWS_BLOCK];
    for (; m == 1 && r + ROWS_BLOCK <= hi; r += ROWS_BLOCK) {
        dots_rows(cp + r * stride, stride, qp, dim, d8);
        for (Py_ssize_t i = 0; i < ROWS_BLOCK; i++)
            out[r + i] = ap && !ap[r + i] ? -INFINITY : (float)d8[i] * sp[r + i];
    }
    for (; r < hi; r++) {
        if (ap && !ap[r]) {
            for (Py_ssize_t j = 0; j < m; j++) out[j * n + r] = -INFINITY;
            continue;
        }
        dots16(cp + r * stride, qp, m, dim, d8);
        for (Py_ssize_t j = 0; j < m; j++) out[j * n + r] = (float)d8[j] * sp[r];
    }
}

/* The k best (key, slot) of one query's keys x (n,), best first, into (ok, os), padded with
 * (-inf, -1); buf holds 2k candidates. */
static void select_keys(const float *x, Py_ssize_t n, const uint8_t *ap, Py_ssize_t k,
                        double *hk, int64_t *hs, Cand *buf, float *ok, int64_t *os) {
    Py_ssize_t size = select_f32(x, n, -INFINITY, hk, hs, k, buf);
    for (Py_ssize_t r = 0; r < n && size < k; r++) {
        if (x[r] == -INFINITY && (!ap || ap[r])) {
            hk[size] = -INFINITY;
            hs[size++] = r;
        }
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        ok[i] = i < size ? (float)hk[i] : -INFINITY;
        os[i] = i < size ? hs[i] : -1;
    }
}

/* ------------------------------------------------------------------ the scan helper thread */
/* One persistent worker thread shares the keys of a large scan with the calling thread. The
 * rows are cut into chunks claimed from one atomic counter; the worker writes its chunks into
 * its own scratch and flags each when done. The caller never waits for it: once no chunk is
 * left to claim, it copies the worker's finished chunks and computes an unfinished one itself
 * (stopping early if the worker's copy lands meanwhile), so a worker that the scheduler left
 * waiting costs nothing but its claimed chunk. Because the worker may still be reading the
 * inputs after the caller returns, the job keeps their buffers (and so the arrays) alive until
 * a later call, holding the GIL, sees the worker idle. A job is posted only while the worker
 * is idle and no other caller owns the pool (checked under the GIL); otherwise the call scans
 * alone. The worker runs at SCHED_IDLE: it takes only a core nothing else wants, so beside a
 * busy process it never preempts its caller (measured: at normal priority the woken worker
 * took the caller's core and a recall beside two busy processes got 0.3 ms slower); there the
 * caller simply scans alone. The worker is started at the first large scan and blocks every
 * signal; after fork() the child has no worker (pthread_atfork marks it gone) and starts its
 * own when needed. */

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#define HAVE_SCAN_POOL 1

#define SCAN_CHUNKS 64
#define SCAN_CHUNK_MIN 512                /* rows */
#define SCAN_PARALLEL_MIN ((Py_ssize_t)1 << 21) /* code bytes from which the worker is asked */
#define SCAN_POLL_ROWS 256                /* rows between looks at a chunk's done flag */

typedef struct {
    Scan scan;
    Py_ssize_t chunk, n_chunks;
    atomic_long next;
    atomic_int done[SCAN_CHUNKS];
    float *scratch; /* (m, n_rows) like out; only the worker's chunks are written */
} ScanJob;

static struct {
    int alive, failed, registered, owned; /* owned: a caller is using the job (GIL held) */
    sem_t wake;
    atomic_int busy; /* set by a post, cleared by the worker when it no longer reads the job */
    ScanJob job;
    size_t scratch_cap; /* floats */
    Buf held[4];
    /* what happened, for tests and benchmarks: jobs posted, chunks the worker finished, of
     * those the ones the caller took, chunks of the worker's the caller computed itself */
    atomic_long jobs, worker_chunks, copied, recomputed;
    /* tests only: pauses (microseconds) of the worker after claiming a chunk and of the
     * caller before claiming its first, and the worker at normal priority (so that it runs
     * on a busy test machine), to drive each path on purpose */
    atomic_int worker_pause_us, caller_pause_us, normal_priority;
} pool;

static void pause_us(int us) {
    if (us <= 0) return;
    struct timespec t = {us / 1000000, (long)(us % 1000000) * 1000};
    while (nanosleep(&t, &t) != 0) {
    }
}

static void *scan_worker(void *arg) {
    (void)arg;
    /* Idle priority: the helper runs only on a core nothing else wants, so on a busy machine
     * it never preempts its own caller or a neighbour (the caller then scans alone). */
    int policy = SCHED_OTHER;
    ScanJob *j = &pool.job;
    for (;;) {
        while (sem_wait(&pool.wake) != 0) {
        }
        int want = atomic_load_explicit(&pool.normal_priority, memory_order_relaxed)
                       ? SCHED_OTHER
                       : SCHED_IDLE;
        if (want != policy) {
            struct sched_param none = {0};
            pthread_setschedparam(pthread_self(), want, &none);
            policy = want;
        }
        for (;;) {
            long c = atomic_fetch_add_explicit(&j->next, 1, memory_order_acq_rel);
            if (c >= j->n_chunks) break;
            pause_us(atomic_load_explicit(&pool.worker_pause_us, memory_order_relaxed));
            Py_ssize_t lo = c * j->chunk, hi = lo + j->chunk;
            scan_keys(&j->scan, lo, hi < j->scan.n_rows ? hi : j->scan.n_rows, j->scratch);
            atomic_store_explicit(&j->done[c], 1, memory_order_release);
            atomic_fetch_add_explicit(&pool.worker_chunks, 1, memory_order_relaxed);
        }
        atomic_store_explicit(&pool.busy, 0, memory_order_release);
    }
    return NULL;
}

static void pool_after_fork_child(void) {
    pool.alive = 0; /* the thread was not copied; its buffers are released at the next use */
    pool.owned = 0;
    atomic_store(&pool.busy, 0);
}

static void pool_release_held(void) {
    for (int i = 0; i < 4; i++) release(&pool.held[i]);
}

/* Under the GIL: whether the worker can take a job now (started here if need be). */
static int pool_ready(void) {
    if (pool.failed || pool.owned) return 0;
    if (pool.alive) {
        if (atomic_load_explicit(&pool.busy, memory_order_acquire)) return 0;
        pool_release_held();
        return 1;
    }
    pool_release_held(); /* a child after fork: no thread reads them */
    if (!pool.registered) {
        if (pthread_atfork(NULL, NULL, pool_after_fork_child) != 0) goto fail;
        pool.registered = 1;
    }
    if (sem_init(&pool.wake, 0, 0) != 0) goto fail;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, scan_worker, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) goto fail;
    pool.alive = 1;
    return 1;
fail:
    pool.failed = 1;
    return 0;
}

/* Under the GIL, with pool_ready(): set up and post the job; the pool keeps `in` (their views
 * move into pool.held). Returns 0 (nothing posted) when the scratch cannot grow. */
static int pool_post(const Scan *s, Buf *in[4]) {
    size_t need = (size_t)s->m * (size_t)s->n_rows;
    if (need > pool.scratch_cap) {
        float *grown = malloc(sizeof(float) * need);
        if (!grown) return 0;
        free(pool.job.scratch);
        pool.job.scratch = grown;
        pool.scratch_cap = need;
    }
    ScanJob *j = &pool.job;
    j->scan = *s;
    Py_ssize_t chunks = s->n_rows / SCAN_CHUNK_MIN;
    chunks = chunks < 2 ? 2 : (chunks > SCAN_CHUNKS ? SCAN_CHUNKS : chunks);
    j->chunk = ((s->n_rows + chunks - 1) / chunks + 7) & ~(Py_ssize_t)7;
    j->n_chunks = (s->n_rows + j->chunk - 1) / j->chunk;
    for (Py_ssize_t c = 0; c < j->n_chunks; c++) atomic_store_explicit(&j->done[c], 0, memory_order_relaxed);
    atomic_store_explicit(&j->next, 0, memory_order_relaxed);
    for (int i = 0; i < 4; i++) {
        pool.held[i] = *in[i];
        in[i]->held = 0;
    }
    pool.owned = 1;
    atomic_fetch_add_explicit(&pool.jobs, 1, memory_order_relaxed);
    atomic_store_explicit(&pool.busy, 1, memory_order_release);
    sem_post(&pool.wake);
    return 1;
}

/* Without the GIL: the caller's share of the posted job, then the worker's chunks. */
static void pool_scan(float *out) {
    ScanJob *j = &pool.job;
    const Scan *s = &j->scan;
    Py_ssize_t n = s->n_rows;
    uint8_t mine[SCAN_CHUNKS] = {0};
    pause_us(atomic_load_explicit(&pool.caller_pause_us, memory_order_relaxed));
    for (;;) {
        long c = atomic_fetch_add_explicit(&j->next, 1, memory_order_acq_rel);
        if (c >= j->n_chunks) break;
        Py_ssize_t lo = c * j->chunk, hi = lo + j->chunk < n ? lo + j->chunk : n;
        scan_keys(s, lo, hi, out);
        mine[c] = 1;
    }
    /* the worker's chunks: copy the finished ones first, then compute what is left (at most
     * the chunk it is on, or every chunk it claimed when it never ran), in steps between which
     * its copy is taken if it landed meanwhile */
    for (int pass = 0; pass < 2; pass++) {
        for (Py_ssize_t c = 0; c < j->n_chunks; c++) {
            if (mine[c]) continue;
            Py_ssize_t lo = c * j->chunk, hi = lo + j->chunk < n ? lo + j->chunk : n;
            Py_ssize_t at = lo;
            while (pass == 1 && at < hi &&
                   !atomic_load_explicit(&j->done[c], memory_order_acquire)) {
                Py_ssize_t to = at + SCAN_POLL_ROWS < hi ? at + SCAN_POLL_ROWS : hi;
                scan_keys(s, at, to, out);
                at = to;
            }
            if (at < hi && !atomic_load_explicit(&j->done[c], memory_order_acquire)) continue;
            for (Py_ssize_t q = 0; q < s->m && at < hi; q++)
                memcpy(out + q * n + at, j->scratch + q * n + at, sizeof(float) * (hi - at));
            atomic_fetch_add_explicit(at > lo ? &pool.recomputed : &pool.copied, 1,
                                      memory_order_relaxed);
            mine[c] = 1;
        }
    }
}

/* Under the GIL, after pool_scan: the pool is free for the next caller; the inputs are let go
 * now if the worker is done with them. */
static void pool_finish(void) {
    pool.owned = 0;
    if (!atomic_load_explicit(&pool.busy, memory_order_acquire)) pool_release_held();
}
#endif

/* Under the GIL: whether to scan with the worker (and then its job is posted). */
static int scan_shared(const Scan *s, Buf *in[4]) {
#ifdef HAVE_SCAN_POOL
    if (s->n_rows * s->dim < SCAN_PARALLEL_MIN) return 0;
    return pool_ready() && pool_post(s, in);
#else
    (void)s; (void)in;
    return 0;
#endif
}

/* ------------------------------------------------------------------ int8_topk */

/* One pass: keys and exact top-k heaps fused (the caller alone); `all`, if given, gets every
 * row's key. Returns -1 when out of memory. */
static int topk_fused(const Scan *s, Py_ssize_t k, float *kall, float *ok, int64_t *os) {
    Py_ssize_t m = s->m, n_rows = s->n_rows, dim = s->dim, stride = s->stride;
    double *hk = malloc(sizeof(double) * m * k);
    int64_t *hs = malloc(sizeof(int64_t) * m * k);
    Py_ssize_t *size = calloc(m, sizeof(Py_ssize_t));
    int32_t *dotv = malloc(sizeof(int32_t) * m);
    float *thr = malloc(sizeof(float) * m); /* float32 bound below which a key cannot enter */
    if (!hk || !hs || !size || !dotv || !thr) {
        free(hk); free(hs); free(size); free(dotv); free(thr);
        return -1;
    }
    const int8_t *cp = s->codes;
    const int16_t *qp = s->q;
    const float *sp = s->scales;
    const uint8_t *ap = s->allowed;
    for (Py_ssize_t j = 0; j < m; j++) thr[j] = -INFINITY;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t r = 0;
    int32_t blk[ROWS_BLOCK];
    for (; m == 1 && r + ROWS_BLOCK <= n_rows; r += ROWS_BLOCK) {
        dots_rows(cp + r * stride, stride, qp, dim, blk);
        for (Py_ssize_t i = 0; i < ROWS_BLOCK; i++) {
            if (ap && !ap[r + i]) {
                if (kall) kall[r + i] = -INFINITY;
                continue;
            }
            float key = (float)blk[i] * sp[r + i];
            if (kall) kall[r + i] = key;
            if (key >= thr[0]) offer_key(key, 0, k, (int64_t)(r + i), thr, hk, hs, size);
        }
    }
    for (; r < n_rows; r++) {
        if (ap && !ap[r]) {
            for (Py_ssize_t j = 0; kall && j < m; j++) kall[j * n_rows + r] = -INFINITY;
            continue;
        }
        dots16(cp + r * stride, qp, m, dim, dotv);
        for (Py_ssize_t j = 0; j < m; j++) {
            float key = (float)dotv[j] * sp[r];
            if (kall) kall[j * n_rows + r] = key;
            if (key >= thr[j]) offer_key(key, j, k, (int64_t)r, thr, hk, hs, size);
        }
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        heap_sort(hk + j * k, hs + j * k, size[j]);
        for (Py_ssize_t i = 0; i < k; i++) {
            ok[j * k + i] = i < size[j] ? (float)hk[j * k + i] : -INFINITY;
            os[j * k + i] = i < size[j] ? hs[j * k + i] : -1;
        }
    }
    Py_END_ALLOW_THREADS
    free(hk); free(hs); free(size); free(dotv); free(thr);
    return 0;
}

/* Every row's key into `all` — with the worker when `shared` (its job posted), else alone —
 * then each query's selection. Returns -1 when out of memory (a posted job is finished). */
static int topk_selected(const Scan *s, Py_ssize_t k, int shared, float *all, float *ok,
                         int64_t *os) {
    double *hk = malloc(sizeof(double) * k);
    int64_t *hs = malloc(sizeof(int64_t) * k);
    Cand *buf = malloc(sizeof(Cand) * 2 * k);
    int failed = !hk || !hs || !buf;
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_SCAN_POOL
    if (shared) pool_scan(all);
#endif
    if (!shared) scan_keys(s, 0, s->n_rows, all);
    for (Py_ssize_t j = 0; !failed && j < s->m; j++)
        select_keys(all + j * s->n_rows, s->n_rows, s->allowed, k, hk, hs, buf, ok + j * k,
                    os + j * k);
    Py_END_ALLOW_THREADS
#ifdef HAVE_SCAN_POOL
    if (shared) pool_finish();
#endif
    free(hk); free(hs); free(buf);
    return failed ? -1 : 0;
}


static PyObject *py_int8_topk(PyObject *self, PyObject *args) {
    PyObject *o_codes, *o_scales, *o_q, *o_allowed, *o_keys, *o_slots, *o_all = Py_None;
    Py_ssize_t n_rows, dim, stride;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OnnnOOOOO|Oi", &o_codes, &n_rows, &dim, &stride, &o_scales, &o_q,
                          &o_allowed, &o_keys, &o_slots, &o_all, &threads))
        return NULL;
    Buf codes = {0}, scales = {0}, q = {0}, allowed = {0}, keys = {0}, slots = {0}, all = {0};
    PyObject *result = NULL;
    if (n_rows < 0 || dim < 1 || stride < dim) {
        PyErr_SetString(PyExc_ValueError, "int8_topk: need n_rows >= 0 and 1 <= dim <= stride");
        return NULL;
    }
    if (get_buf(o_codes, &codes, "b", 1, -1, 0, "codes") < 0) goto done;
    if (codes.view.len < n_rows * stride) {
        PyErr_SetString(PyExc_ValueError, "int8_topk: codes hold fewer than n_rows rows");
        goto done;
    }
    if (get_buf(o_scales, &scales, "f", 4, -1, 0, "scales") < 0) goto done;
    if (scales.view.len < n_rows * 4) {
        PyErr_SetString(PyExc_ValueError, "int8_topk: scales hold fewer than n_rows values");
        goto done;
    }
    if (get_buf(o_q, &q, "b", 1, -1, 0, "queries") < 0) goto done;
    if (q.view.len % dim) {
        PyErr_SetString(PyExc_ValueError, "int8_topk: queries must be (m, dim) int8");
        goto done;
    }
    Py_ssize_t m = q.view.len / dim;
    if (o_allowed != Py_None && get_buf(o_allowed, &allowed, "?bB", 1, n_rows, 0, "allowed") < 0)
        goto done;
    if (get_buf(o_keys, &keys, "f", 4, -1, 1, "out_keys") < 0) goto done;
    if (m == 0 || keys.view.len % (4 * m)) {
        PyErr_SetString(PyExc_ValueError, "int8_topk: out_keys must be (m, k) float32, m >= 1");
        goto done;
    }
    Py_ssize_t k = keys.view.len / (4 * m);
    if (k < 1 || get_buf(o_slots, &slots, "lq", 8, m * k, 1, "out_slots") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "int8_topk: k must be >= 1");
        goto done;
    }
    if (o_all != Py_None && get_buf(o_all, &all, "f", 4, m * n_rows, 1, "out_all") < 0) goto done;
    {
        int16_t *q16 = scan_widen(q.view.buf, m, dim);
        if (!q16) {
            PyErr_NoMemory();
            goto done;
        }
        Scan s = {codes.view.buf, scales.view.buf, q16,
                  allowed.held ? allowed.view.buf : NULL, n_rows, dim, stride, m};
        Buf *in[4] = {&codes, &scales, &q, &allowed};
        int rc;
        if (all.held && threads >= 2 && m <= SCAN_MAX_QUERIES) /* keys, then selection */
            rc = topk_selected(&s, k, scan_shared(&s, in), all.view.buf, keys.view.buf,
                               slots.view.buf);
        else
            rc = topk_fused(&s, k, all.held ? all.view.buf : NULL, keys.view.buf,
                            slots.view.buf);
        free(q16);
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&codes); release(&scales); release(&q); release(&allowed);
    release(&keys); release(&slots); release(&all);
    return result;
}

/* ------------------------------------------------------------------ int8_score_rows */

static PyObject *py_int8_score_rows(PyObject *self, PyObject *args) {
    PyObject *o_codes, *o_scales, *o_q, *o_rows, *o_out;
    Py_ssize_t n_rows, dim, stride;
    if (!PyArg_ParseTuple(args, "OnnnOOOO", &o_codes, &n_rows, &dim, &stride, &o_scales, &o_q,
                          &o_rows, &o_out))
        return NULL;
    Buf codes = {0}, scales = {0}, q = {0}, rows = {0}, out = {0};
    PyObject *result = NULL;
    if (n_rows < 0 || dim < 1 || stride < dim) {
        PyErr_SetString(PyExc_ValueError, "int8_score_rows: need 1 <= dim <= stride");
        return NULL;
    }
    if (get_buf(o_codes, &codes, "b", 1, -1, 0, "codes") < 0) goto done;
    if (get_buf(o_scales, &scales, "f", 4, -1, 0, "scales") < 0) goto done;
    if (codes.view.len < n_rows * stride || scales.view.len < n_rows * 4) {
        PyErr_SetString(PyExc_ValueError, "int8_score_rows: codes/scales hold fewer rows");
        goto done;
    }
    if (get_buf(o_q, &q, "b", 1, -1, 0, "queries") < 0) goto done;
    if (q.view.len % dim || q.view.len == 0) {
        PyErr_SetString(PyExc_ValueError, "int8_score_rows: queries must be (m, dim), m >= 1");
        goto done;
    }
    Py_ssize_t m = q.view.len / dim;
    if (get_buf(o_rows, &rows, "lq", 8, -1, 0, "rows") < 0) goto done;
    if (rows.view.len % (8 * m)) {
        PyErr_SetString(PyExc_ValueError, "int8_score_rows: rows must be (m, c) int64");
        goto done;
    }
    Py_ssize_t c = rows.view.len / (8 * m);
    if (get_buf(o_out, &out, "f", 4, m * c, 1, "out") < 0) goto done;
    {
        const int64_t *rp = rows.view.buf;
        for (Py_ssize_t i = 0; i < m * c; i++) {
            if (rp[i] < -1 || rp[i] >= n_rows) {
                PyErr_Format(PyExc_ValueError, "int8_score_rows: row %lld outside [-1, %zd)",
                             (long long)rp[i], n_rows);
                goto done;
            }
        }
        const int8_t *cp = codes.view.buf;
        const float *sp = scales.view.buf;
        const int8_t *qp = q.view.buf;
        float *op = out.view.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t j = 0; j < m; j++) {
            for (Py_ssize_t i = 0; i < c; i++) {
                int64_t r = rp[j * c + i];
                int32_t dot;
                if (r < 0) {
                    op[j * c + i] = -INFINITY;
                    continue;
                }
                dots(cp + r * stride, qp + j * dim, 1, dim, &dot);
                op[j * c + i] = (float)dot * sp[r];
            }
        }
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&codes); release(&scales); release(&q); release(&rows); release(&out);
    return result;
}

/* ------------------------------------------------------------------ topk_update / finish */
/* The tile loop's selection (dense_cpu.topk_tiles): every query keeps a buffer of 2k
 * candidates (the buffered selection above) and an exact threshold, -inf until its first
 * selection, then its k-th best key. A tile's keys float32(dot) * scale are compared 8 or 16
 * lanes at a time against each query's threshold (a float32 value: every key is one), and
 * only those above it are appended. Slots rise from tile to tile, so a key equal to the
 * threshold never beats the k-th (which has a lower slot). A heap per query took a pass over
 * k log k nodes per insertion: with k = 200 and 256 queries the heaps left the cache. */

typedef struct {
    Cand *buf;        /* (n, 2k) */
    int64_t *size;    /* (n,) */
    double *thr;      /* (n,) exact threshold */
    float *thr32;     /* (n,) the same as float32, for the vector compare */
    Py_ssize_t n, k;
} CandRows;

static inline void cand_offer(CandRows *c, Py_ssize_t j, float key, int64_t slot) {
    if (!((double)key > c->thr[j])) return;
    Py_ssize_t size = (Py_ssize_t)c->size[j];
    cand_push(c->buf + j * 2 * c->k, &size, c->k, &c->thr[j], key, slot);
    c->size[j] = size;
    c->thr32[j] = (float)c->thr[j];
}

/* The keys one[lane] of the lanes set in m (queries j + lane) offered, lowest lane first. */
static inline void cand_offer_lanes(CandRows *c, Py_ssize_t j, const float *one, unsigned m,
                                    int64_t slot) {
    while (m) {
        int lane = __builtin_ctz(m);
        m &= m - 1;
        cand_offer(c, j + lane, one[lane], slot);
    }
}

/* A tile of keys: rows of dots (T, n) int32 or float32, a scale per row, each row's slot
 * (slotmap[r], or first + r) and an optional gate per row. */
typedef struct {
    const char *dots;
    const float *scales;
    const int64_t *slotmap;
    const uint8_t *gate;
    Py_ssize_t first, t;
    int f32;
} TileRows;

static inline int64_t tile_slot(const TileRows *tr, Py_ssize_t r) {
    return tr->slotmap ? tr->slotmap[r] : (int64_t)(tr->first + r);
}

/* One tile row (a corpus row against every query): its keys from lane lo on offered in query
 * order. */
static inline void cand_row_scalar(CandRows *c, const void *row, int f32, float scale,
                                   Py_ssize_t lo, int64_t slot) {
    for (Py_ssize_t j = lo; j < c->n; j++) {
        float dot = f32 ? ((const float *)row)[j] : (float)((const int32_t *)row)[j];
        float key = dot * scale;
        if (key > c->thr32[j]) cand_offer(c, j, key, slot);
    }
}

static void cand_tile_scalar(CandRows *c, const TileRows *tr) {
    for (Py_ssize_t r = 0; r < tr->t; r++) {
        if (tr->gate && !tr->gate[r]) continue;
        cand_row_scalar(c, tr->dots + r * c->n * 4, tr->f32, tr->scales[r], 0, tile_slot(tr, r));
    }
}


static void cand_tile(CandRows *c, const TileRows *tr) {
    cand_tile_scalar(c, tr);
}

/* The candidate state of n queries: buffer int64 (n, 4k) (2k candidates of 16 bytes each),
 * size int64 (n,), threshold float64 (n,); k from the buffer's length. 0, or -1 with a
 * ValueError set (the Bufs are released by the caller). */
static int cand_state(PyObject *o_buf, PyObject *o_size, PyObject *o_thr, Buf *buf, Buf *size,
                      Buf *thr, CandRows *c, const char *fn) {
    if (get_buf(o_size, size, "lq", 8, -1, 1, "sizes") < 0) return -1;
    c->n = size->view.len / 8;
    if (get_buf(o_thr, thr, "d", 8, c->n, 1, "thresholds") < 0) return -1;
    if (get_buf(o_buf, buf, "lq", 8, -1, 1, "candidates") < 0) return -1;
    Py_ssize_t per = c->n ? buf->view.len / c->n : 0;
    if (c->n == 0 || buf->view.len % c->n || per % (2 * (Py_ssize_t)sizeof(Cand)) ||
        per == 0) {
        PyErr_Format(PyExc_ValueError, "%s: candidates must be int64 (n, 4k), n >= 1, k >= 1",
                     fn);
        return -1;
    }
    c->k = per / (2 * (Py_ssize_t)sizeof(Cand));
    c->buf = buf->view.buf, c->size = size->view.buf, c->thr = thr->view.buf;
    for (Py_ssize_t j = 0; j < c->n; j++) {
        if (c->size[j] < 0 || c->size[j] >= 2 * c->k) {
            PyErr_Format(PyExc_ValueError, "%s: a size outside [0, 2k)", fn);
            return -1;
        }
    }
    return 0;
}

static PyObject *py_topk_update(PyObject *self, PyObject *args) {
    PyObject *o_dots, *o_scales, *o_slotmap, *o_gate, *o_buf, *o_size, *o_thr;
    Py_ssize_t first;
    if (!PyArg_ParseTuple(args, "OOnOOOOO", &o_dots, &o_scales, &first, &o_slotmap, &o_gate,
                          &o_buf, &o_size, &o_thr))
        return NULL;
    Buf dots = {0}, scales = {0}, slotmap = {0}, gate = {0}, buf = {0}, size = {0}, thr = {0};
    PyObject *result = NULL;
    CandRows c = {0};
    if (cand_state(o_buf, o_size, o_thr, &buf, &size, &thr, &c, "topk_update") < 0) goto done;
    if (get_buf(o_dots, &dots, "if", 4, -1, 0, "dots") < 0) goto done;
    if (dots.view.len % (4 * c.n)) {
        PyErr_SetString(PyExc_ValueError, "topk_update: dots must be (T, n) int32 or float32");
        goto done;
    }
    int f32 = dots.view.format && strchr(dots.view.format, 'f') != NULL;
    Py_ssize_t t = dots.view.len / (4 * c.n);
    if (get_buf(o_scales, &scales, "f", 4, t, 0, "scales") < 0) goto done;
    if (o_slotmap != Py_None && get_buf(o_slotmap, &slotmap, "lq", 8, t, 0, "slots") < 0) goto done;
    if (o_gate != Py_None && get_buf(o_gate, &gate, "?bB", 1, t, 0, "gate") < 0) goto done;
    c.thr32 = malloc(sizeof(float) * c.n);
    if (!c.thr32) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < c.n; j++) c.thr32[j] = (float)c.thr[j]; /* exact: a key or -inf */
    {
        TileRows tr = {dots.view.buf, scales.view.buf, slotmap.held ? slotmap.view.buf : NULL,
                       gate.held ? gate.view.buf : NULL, first, t, f32};
        Py_BEGIN_ALLOW_THREADS
        cand_tile(&c, &tr);
        Py_END_ALLOW_THREADS
    }
    free(c.thr32);
    result = Py_None;
    Py_INCREF(result);
done:
    release(&dots); release(&scales); release(&slotmap); release(&gate);
    release(&buf); release(&size); release(&thr);
    return result;
}

static PyObject *py_topk_finish(PyObject *self, PyObject *args) {
    PyObject *o_buf, *o_size, *o_thr, *o_keys, *o_slots;
    if (!PyArg_ParseTuple(args, "OOOOO", &o_buf, &o_size, &o_thr, &o_keys, &o_slots)) return NULL;
    Buf buf = {0}, size = {0}, thr = {0}, keys = {0}, slots = {0};
    PyObject *result = NULL;
    CandRows c = {0};
    if (cand_state(o_buf, o_size, o_thr, &buf, &size, &thr, &c, "topk_finish") < 0) goto done;
    if (get_buf(o_keys, &keys, "f", 4, c.n * c.k, 1, "out_keys") < 0) goto done;
    if (get_buf(o_slots, &slots, "lq", 8, c.n * c.k, 1, "out_slots") < 0) goto done;
    {
        float *kp = keys.view.buf;
        int64_t *lp = slots.view.buf;
        for (Py_ssize_t j = 0; j < c.n; j++) {
            Cand *b = c.buf + j * 2 * c.k;
            Py_ssize_t got = (Py_ssize_t)c.size[j];
            if (got > c.k) {
                cand_select(b, got, c.k);
                got = c.k;
            }
            cand_sort(b, got);
            for (Py_ssize_t i = 0; i < c.k; i++) {
                kp[j * c.k + i] = i < got ? (float)b[i].v : -INFINITY; /* a float32 key */
                lp[j * c.k + i] = i < got ? b[i].i : -1;
            }
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&buf); release(&size); release(&thr); release(&keys); release(&slots);
    return result;
}

/* ------------------------------------------------------------------ rows_topk */

static PyObject *py_rows_topk(PyObject *self, PyObject *args) {
    PyObject *o_x, *o_keys, *o_slots, *o_count;
    Py_ssize_t width;
    double bound;
    int strict;
    if (!PyArg_ParseTuple(args, "OndpOOO", &o_x, &width, &bound, &strict, &o_keys, &o_slots,
                          &o_count))
        return NULL;
    Buf x = {0}, keys = {0}, slots = {0}, count = {0};
    PyObject *result = NULL;
    if (get_float_buf(o_x, &x) < 0) goto done;
    Py_ssize_t item = x.view.itemsize;
    if (width < 1 || x.view.len % (item * width)) {
        PyErr_SetString(PyExc_ValueError, "rows_topk: x must be (n, width), width >= 1");
        goto done;
    }
    Py_ssize_t n = x.view.len / (item * width);
    if (get_buf(o_count, &count, "lq", 8, n, 1, "out_count") < 0) goto done;
    if (get_buf(o_keys, &keys, "d", 8, -1, 1, "out_keys") < 0) goto done;
    if (n == 0 || keys.view.len % (8 * n)) {
        PyErr_SetString(PyExc_ValueError, "rows_topk: out_keys must be (n, k) float64, n >= 1");
        goto done;
    }
    Py_ssize_t k = keys.view.len / (8 * n);
    if (k < 1 || get_buf(o_slots, &slots, "lq", 8, n * k, 1, "out_slots") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "rows_topk: k must be >= 1");
        goto done;
    }
    {
        double *kp = keys.view.buf;
        int64_t *lp = slots.view.buf;
        int64_t *cp = count.view.buf;
        const char *base = x.view.buf;
        /* large k: buffered selection, float32 or float64 rows (a heap update per insertion
         * costs more there: k 100 of 600 float64 columns, 21 -> 5 us a row) */
        Cand *cand = k >= 32 ? malloc(sizeof(Cand) * 2 * (size_t)k) : NULL;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_ssize_t size = 0;
            double *hk = kp + j * k;
            int64_t *hs = lp + j * k;
            if (strict && cand) { /* sorted already */
                cp[j] = item == 4 ? select_f32((const float *)base + j * width, width, bound, hk,
                                               hs, k, cand)
                                  : select_f64((const double *)base + j * width, width, bound,
                                               hk, hs, k, cand);
                for (Py_ssize_t i = cp[j]; i < k; i++) {
                    hk[i] = -INFINITY;
                    hs[i] = -1;
                }
                continue;
            } else if (item == 4 && strict) {
                size = scan_f32((const float *)base + j * width, width, bound, hk, hs, k);
            } else {
                double thr = bound;
                for (Py_ssize_t i = 0; i < width; i++) {
                    double v = item == 4 ? (double)((const float *)base)[j * width + i]
                                         : ((const double *)base)[j * width + i];
                    if (strict ? !(v > thr) : !(v >= bound)) continue; /* NaN never enters */
                    if (size == k && !(v > hk[0])) continue;
                    offer(hk, hs, k, &size, v, (int64_t)i);
                    if (size == k && strict) thr = hk[0];
                }
            }
            heap_sort(hk, hs, size);
            for (Py_ssize_t i = size; i < k; i++) {
                hk[i] = -INFINITY;
                hs[i] = -1;
            }
            cp[j] = size;
        }
        Py_END_ALLOW_THREADS
        free(cand);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&x); release(&keys); release(&slots); release(&count);
    return result;
}

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

/* ------------------------------------------------------------------ scan helper: tests */

static PyObject *py_scan_pool_stats(PyObject *self, PyObject *noargs) {
#ifdef HAVE_SCAN_POOL
    return Py_BuildValue("{s:i,s:i,s:l,s:l,s:l,s:l}", "alive", pool.alive, "busy",
                         atomic_load(&pool.busy), "jobs", (long)atomic_load(&pool.jobs),
                         "worker_chunks",
                         (long)atomic_load(&pool.worker_chunks), "copied",
                         (long)atomic_load(&pool.copied), "recomputed",
                         (long)atomic_load(&pool.recomputed));
#else
    return Py_BuildValue("{s:i,s:i,s:l,s:l,s:l,s:l}", "alive", 0, "busy", 0, "jobs", 0L,
                         "worker_chunks", 0L, "copied", 0L, "recomputed", 0L);
#endif
}

static PyObject *py_scan_pool_testing(PyObject *self, PyObject *args) {
    int worker_us, caller_us, normal;
    if (!PyArg_ParseTuple(args, "iip", &worker_us, &caller_us, &normal)) return NULL;
#ifdef HAVE_SCAN_POOL
    atomic_store(&pool.worker_pause_us, worker_us);
    atomic_store(&pool.caller_pause_us, caller_us);
    atomic_store(&pool.normal_priority, normal);
#endif
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"int8_topk", py_int8_topk, METH_VARARGS,
     "int8_topk(codes, n_rows, dim, stride, scales, queries, allowed, out_keys, out_slots"
     "[, out_all[, threads]])"},
    {"int8_score_rows", py_int8_score_rows, METH_VARARGS,
     "int8_score_rows(codes, n_rows, dim, stride, scales, queries, rows, out)"},
    {"topk_update", py_topk_update, METH_VARARGS,
     "topk_update(dots int32 or float32 (T, n), scales, first, slots, gate, candidates int64 "
     "(n, 4k), sizes int64 (n,), thresholds float64 (n,)): offer a tile's keys"},
    {"topk_finish", py_topk_finish, METH_VARARGS,
     "topk_finish(candidates, sizes, thresholds, out_keys float32 (n, k), out_slots int64 (n, k))"},
    {"rows_topk", py_rows_topk, METH_VARARGS,
     "rows_topk(x, width, bound, strict, out_keys, out_slots, out_count)"},
    {"decay_topk", py_decay_topk, METH_VARARGS,
     "decay_topk(n, now, w_div, weight, flags, arousal, d_event, last_ms, allowed, freeze_set, "
     "need_set, edges, factors, out_keys, out_slots[, horizon]) -> count, or (count, next "
     "change ms) with horizon"},
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
    {"scan_pool_stats", py_scan_pool_stats, METH_NOARGS,
     "the scan helper thread: alive, busy (holding a job), jobs posted, chunks it finished, of "
     "those copied by the caller, and its chunks the caller computed itself (counts since the "
     "process started)"},
    {"scan_pool_testing", py_scan_pool_testing, METH_VARARGS,
     "scan_pool_testing(worker_us, caller_us, normal_priority): tests only; pause the helper "
     "after each claim and the caller before its first, run the helper at normal priority "
     "from its next job ((0, 0, False): as in use)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_legacy", NULL, -1, methods};

PyMODINIT_FUNC PyInit__legacy(void) {
    return PyModule_Create(&module);
}
