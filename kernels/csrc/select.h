/* Exact top-k selection shared by the kernels (static inline: each .c includes its copy),
 * and the standard headers every kernel file uses (each includes this file alone).
 * Plain C over caller-owned arrays, no Python API.
 *
 * Order everywhere: key descending, then slot (index) ascending, a total order, so ties are
 * exact; padding is (-inf, -1). Keys are float64 (float32 keys exactly). Two forms:
 * - a heap of k pairs with the *worst* at its root (offer, heap_sort): small k;
 * - buffered selection (Cand, cand_push, cand_finish): candidates above a running threshold
 *   go to a buffer of 2k; when it fills a quickselect keeps the k best and the threshold rises
 *   to the k-th; about log(n/k) selections of 2k items instead of a heap update per entry. */
#ifndef SPECTOR_NATIVE_SELECT_H
#define SPECTOR_NATIVE_SELECT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* x86-64 GCC builds vectorised loops twice: AVX2 and baseline (picked at import); CI builds
 * the baseline alone too (-DSPECTOR_PORTABLE, tools/portable_check.sh) and tests it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(SPECTOR_PORTABLE)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif

/* The next row of a batch whose rows threads claim one at a time (kernels/sharing.share_rows). */
static inline int64_t claim_row(int64_t *n) { return __atomic_fetch_add(n, 1, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------------ heaps */

static inline int worse(double ka, int64_t sa, double kb, int64_t sb) {
    return ka < kb || (ka == kb && sa > sb);
}

static inline void sift_down(double *key, int64_t *slot, ptrdiff_t size, ptrdiff_t i) {
    for (;;) {
        ptrdiff_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < size && worse(key[l], slot[l], key[w], slot[w])) w = l;
        if (r < size && worse(key[r], slot[r], key[w], slot[w])) w = r;
        if (w == i) return;
        double tk = key[i]; key[i] = key[w]; key[w] = tk;
        int64_t ts = slot[i]; slot[i] = slot[w]; slot[w] = ts;
        i = w;
    }
}

static inline void sift_up(double *key, int64_t *slot, ptrdiff_t i) {
    while (i > 0) {
        ptrdiff_t p = (i - 1) / 2;
        if (!worse(key[i], slot[i], key[p], slot[p])) return;
        double tk = key[i]; key[i] = key[p]; key[p] = tk;
        int64_t ts = slot[i]; slot[i] = slot[p]; slot[p] = ts;
        i = p;
    }
}

/* Offer (k, s) to a heap of capacity cap holding *size: it enters if better than the root. */
static inline void offer(double *key, int64_t *slot, ptrdiff_t cap, ptrdiff_t *size, double k,
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
static inline void heap_sort(double *key, int64_t *slot, ptrdiff_t size) {
    for (ptrdiff_t end = size - 1; end > 0; end--) {
        double tk = key[0]; key[0] = key[end]; key[end] = tk;
        int64_t ts = slot[0]; slot[0] = slot[end]; slot[end] = ts;
        sift_down(key, slot, end, 0);
    }
}

/* The largest float32 value <= x (x a float32 value stored as double, or -inf). */
static inline float below(double x) {
    float f = (float)x;
    return (double)f > x ? nextafterf(f, -INFINITY) : f;
}

/* ------------------------------------------------------------------ buffered selection */

typedef struct {
    double v; /* float32 keys exactly, float64 values as they are */
    int64_t i;
} Cand;

static inline int cand_better(const Cand *a, const Cand *b) {
    return a->v > b->v || (a->v == b->v && a->i < b->i);
}

/* Hoare partition of c[lo..hi] around its middle candidate: afterwards every candidate in
 * c[lo..*pb] is no worse and every one in c[*pa..hi] no better than the pivot (*pb < *pa). */
static inline void cand_partition(Cand *c, ptrdiff_t lo, ptrdiff_t hi, ptrdiff_t *pa,
                                  ptrdiff_t *pb) {
    Cand pivot = c[lo + (hi - lo) / 2];
    ptrdiff_t a = lo, b = hi;
    while (a <= b) {
        while (cand_better(&c[a], &pivot)) a++;
        while (cand_better(&pivot, &c[b])) b--;
        if (a <= b) {
            Cand t = c[a]; c[a] = c[b]; c[b] = t;
            a++, b--;
        }
    }
    *pa = a, *pb = b;
}

/* Rearrange c[0..n) so that c[0..k) are the k best (in no order). */
static inline void cand_select(Cand *c, ptrdiff_t n, ptrdiff_t k) {
    ptrdiff_t lo = 0, hi = n - 1, a, b;
    while (lo < hi) {
        cand_partition(c, lo, hi, &a, &b);
        if (k - 1 <= b) hi = b;
        else if (k - 1 >= a) lo = a;
        else return;
    }
}

/* Sort candidates best first: quicksort, insertion sort below 16. */
static inline void cand_sort(Cand *c, ptrdiff_t n) {
    ptrdiff_t a, b;
    while (n > 16) {
        cand_partition(c, 0, n - 1, &a, &b);
        if (b + 1 < n - a) {
            cand_sort(c, b + 1);
            c += a;
            n -= a;
        } else {
            cand_sort(c + a, n - a);
            n = b + 1;
        }
    }
    for (ptrdiff_t i = 1; i < n; i++) {
        Cand x = c[i];
        ptrdiff_t j = i;
        for (; j > 0 && cand_better(&x, &c[j - 1]); j--) c[j] = c[j - 1];
        c[j] = x;
    }
}

/* Append one candidate (above *thr) to a buffer of 2k holding *size; a full buffer keeps its
 * k best and raises *thr to the k-th (a later equal value has a higher index: never better). */
static inline void cand_push(Cand *buf, ptrdiff_t *size, ptrdiff_t k, double *thr, double v,
                             int64_t i) {
    buf[*size].v = v;
    buf[*size].i = i;
    if (++*size == 2 * k) {
        cand_select(buf, *size, k);
        *size = k;
        double worst = buf[0].v;
        for (ptrdiff_t t = 1; t < k; t++) worst = buf[t].v < worst ? buf[t].v : worst;
        *thr = worst;
    }
}

/* The k best of `size` candidates, best first, into (hk, hs); returns the count. */
static inline ptrdiff_t cand_finish(Cand *buf, ptrdiff_t size, ptrdiff_t k, double *hk,
                                    int64_t *hs) {
    if (size > k) {
        cand_select(buf, size, k);
        size = k;
    }
    cand_sort(buf, size);
    for (ptrdiff_t t = 0; t < size; t++) {
        hk[t] = buf[t].v;
        hs[t] = buf[t].i;
    }
    return size;
}

/* ------------------------------------------------------------------ ranked lists */

typedef struct { double score; int64_t ordinal, at; } Rank; /* at: the position in its row */

static inline int rank_cmp(const void *pa, const void *pb) {
    const Rank *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->ordinal > b->ordinal) - (a->ordinal < b->ordinal);
}

/* rank[0..c) by score descending, then ordinal ascending (distinct in a row: a total order):
 * by insertion up to 128 members (the default token depth is 100, and the fused order is
 * close to the mixed one: a third of qsort's time), by qsort past it. The list re-scorers'
 * order: the token relay's (token.c) and the session relay's (_fusion.pyx). */
static inline void rank_sort(Rank *rank, ptrdiff_t c) {
    if (c > 128) { qsort(rank, (size_t)c, sizeof(Rank), rank_cmp); return; }
    for (ptrdiff_t m = 1, k; m < c; m++) {
        Rank x = rank[m];
        for (k = m; k > 0 && rank_cmp(&x, &rank[k - 1]) < 0; k--) rank[k] = rank[k - 1];
        rank[k] = x;
    }
}

/* ------------------------------------------------------------------ one row's top-k */

/* Whether any of x[0..16) is > t: vector compares (kept a loop: unrolled first, GCC 12
 * compares the 16 one by one where this is inlined in a loop). */
static inline int any_above16(const float *x, float t) {
    int any = 0;
#pragma GCC unroll 1
    for (int l = 0; l < 16; l++) any |= x[l] > t;
    return any;
}

/* The k best x[i] > bound (NaN never enters) of a float64 row, best first; buf: 2k. */
static inline ptrdiff_t select_f64(const double *x, ptrdiff_t n, double bound, double *hk,
                                   int64_t *hs, ptrdiff_t k, Cand *buf) {
    ptrdiff_t size = 0;
    double thr = bound;
    for (ptrdiff_t i = 0; i < n; i++)
        if (x[i] > thr) cand_push(buf, &size, k, &thr, x[i], i);
    return cand_finish(buf, size, k, hk, hs);
}

/* A float32 row's values x[i] > from into buf (2k, the buffered form), blocks of 16 with
 * nothing above the threshold skipped (the same entries, in order); returns the count in buf:
 * fewer than k only if fewer than k values passed `from`. */
static inline ptrdiff_t take_above_f32(const float *x, ptrdiff_t n, double from, ptrdiff_t k,
                                       Cand *buf) {
    ptrdiff_t size = 0, i = 0;
    double thr = from;
    for (; i < n; i += 16) {
        ptrdiff_t end = i + 16 <= n ? i + 16 : n;
        if (end - i == 16 && !any_above16(x + i, below(thr))) continue;
        for (ptrdiff_t j = i; j < end; j++)
            if (x[j] > thr) cand_push(buf, &size, k, &thr, x[j], j);
    }
    return size;
}

/* A first bound for the k best positive values of t float32 values x[at[r]] (at NULL: x[r])
 * (0: none, as for fewer than 4,096 or 8 k): from every s-th of them (some 2,048), the floor
 * of the highest histogram bucket (positive float32 bits >> 19 order as the values) at which
 * the sample holds 5 k / 4 t of its values and 8 more. Exact only with the caller's check
 * that k values passed it. */
static inline double sampled_bound(const float *x, const int32_t *at, ptrdiff_t t,
                                   ptrdiff_t k) {
    if (t < 4096 || t < 8 * k) return 0.0;
    uint32_t hist[4096] = {0}, bits;
    ptrdiff_t s = t / 2048, taken = 0, above = 0, floor = 4096;
    for (ptrdiff_t r = 0; r < t; r += s, taken++)
        if (x[at ? at[r] : r] > 0.0f) hist[(memcpy(&bits, x + (at ? at[r] : r), 4), bits >> 19)]++;
    while (floor > 0 && above < 5 * k * taken / (4 * t) + 8) above += hist[--floor];
    float f;
    bits = ((uint32_t)floor << 19) - 1; /* the largest value below the bucket */
    memcpy(&f, &bits, 4);
    return floor > 0 ? (double)f : 0.0;
}

/* The t values x[at[r]] > from (float32 or 0) into buf (2k) as entries at[r], slots in any
 * order: from the least float32 above from, once the threshold rose from it (an equal value
 * may be better); at NULL: take_above_f32 of x[0, t). Returns the count in buf. */
static inline ptrdiff_t take_listed_f32(const float *x, const int32_t *at, ptrdiff_t t,
                                        double from, ptrdiff_t k, Cand *buf) {
    if (!at) return take_above_f32(x, t, from, k, buf);
    ptrdiff_t size = 0;
    double thr = from;
    float lo = nextafterf((float)from, INFINITY);
    for (ptrdiff_t r = 0; r < t; r++)
        if (x[at[r]] >= lo)
            cand_push(buf, &size, k, &thr, x[at[r]], at[r]), lo = thr > from ? (float)thr : lo;
    return size;
}

/* The k best x[i] > bound of a float32 row, best first; with buf (2k) buffered, else by a
 * heap (columns rise: an equal value never enters a full heap). */
VECTOR_CLONES static inline ptrdiff_t select_f32(const float *x, ptrdiff_t n, double bound,
                                                 double *hk, int64_t *hs, ptrdiff_t k,
                                                 Cand *buf) {
    if (buf) return cand_finish(buf, take_above_f32(x, n, bound, k, buf), k, hk, hs);
    ptrdiff_t size = 0;
    double thr = bound;
    for (ptrdiff_t i = 0; i < n; i += 16) {
        ptrdiff_t end = i + 16 <= n ? i + 16 : n;
        if (end - i == 16 && !any_above16(x + i, below(thr))) continue;
        for (ptrdiff_t j = i; j < end; j++) {
            if (!(x[j] > thr)) continue;
            offer(hk, hs, k, &size, x[j], j);
            if (size == k) thr = hk[0];
        }
    }
    return size;
}

#endif
