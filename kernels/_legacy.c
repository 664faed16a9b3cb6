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
 * bm25_dense       BM25 scores of a few queries as dense rows, from the postings in place
 * bm25_select      each query's best BM25 scores and the scores of given slots, from one
 *                  scratch row per thread (no (m, N) block)
 * bm25_row         bm25_select of one query into a caller's row, left written until
 *                  bm25_row_release has scored any slots from it
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
    {"token_rescore", py_token_rescore, METH_VARARGS,
     "token_rescore(fused, counts, ordinals, offsets, ids, codes, norm, weight, query_offsets, "
     "query_ids, token_weight, out_order, out_fused, out_token[, threads]): the token relay's "
     "MaxSim and order over each query's fused top list (threads 2: a helper shares them)"},
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
