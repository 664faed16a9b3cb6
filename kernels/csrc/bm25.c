/* BM25 posting accumulation and per-query selection (see bm25.h). Built with
 * -ffp-contract=off: each weight and sum is the float64/float32 arithmetic of cortex/bm25.py
 * and scipy's product, in their order, bit for bit. */
#include "bm25.h"

#include <math.h>
#include <string.h>

static float *main_w(const Bm25 *z, int64_t j) {
    return z->wmain ? z->wmain + z->mlo[j] : z->wbuf + z->woff[j];
}

static float *tail_w(const Bm25 *z, int64_t j) {
    return z->wbuf + z->woff[j] + (z->wmain ? 0 : z->mhi[j] - z->mlo[j]);
}

void bm25_term_weights(const Bm25 *z, int64_t j) {
    double base = 1.0 - z->b;
    for (int pass = z->wmain && z->cached[j] ? 1 : 0; pass < 2; pass++) {
        const int32_t *docs = pass ? z->tdoc : z->mdoc, *tfs = pass ? z->ttf : z->mtf;
        int64_t p = pass ? z->tptr[j] : z->mlo[j], end = pass ? z->tptr[j + 1] : z->mhi[j];
        float *w = pass ? tail_w(z, j) : main_w(z, j);
        for (; p < end; p++, w++) {
            int32_t d = docs[p];
            if ((uint64_t)(uint32_t)d >= (uint64_t)z->n_docs) {
                *w = 0.0f;
                continue;
            }
            double tf = (double)tfs[p];
            double norm = z->k1 * (base + z->b * (double)z->len[d] / z->avgdl);
            double num = z->okapi ? tf * (z->k1 + 1.0) : tf;
            *w = (float)(num / (tf + norm) * z->idf[j]);
        }
    }
}

ptrdiff_t bm25_accumulate(const Bm25 *z, ptrdiff_t i, float *acc, uint64_t *mark,
                          int32_t *touched) {
    ptrdiff_t t = 0;
    for (int64_t e = z->qptr[i]; e < z->qptr[i + 1]; e++) {
        int64_t j = z->qcol[e];
        float cnt = z->qcnt[e];
        for (int pass = 0; pass < 2; pass++) {
            const int32_t *docs = pass ? z->tdoc : z->mdoc;
            int64_t p = pass ? z->tptr[j] : z->mlo[j], end = pass ? z->tptr[j + 1] : z->mhi[j];
            const float *w = pass ? tail_w(z, j) : main_w(z, j);
            for (; p < end; p++, w++) {
                int32_t d = docs[p];
                if ((uint64_t)(uint32_t)d >= (uint64_t)z->n_docs || (z->allowed && !z->allowed[d]))
                    continue;
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

/* ---- exact top-k: candidates above a running threshold go into a buffer of 2k; a full
 * buffer keeps its k best (quickselect) and the threshold rises to the k-th. Order: value
 * descending, then slot ascending (a total order, so the k best are one set). */
typedef struct {
    double v;
    int64_t i;
} Cand;

static int better(const Cand *a, const Cand *b) { return a->v > b->v || (a->v == b->v && a->i < b->i); }

/* Hoare partition of c[lo..hi] around its middle: c[lo..*pb] no worse, c[*pa..hi] no better. */
static void partition(Cand *c, ptrdiff_t lo, ptrdiff_t hi, ptrdiff_t *pa, ptrdiff_t *pb) {
    Cand pivot = c[lo + (hi - lo) / 2];
    ptrdiff_t a = lo, b = hi;
    while (a <= b) {
        while (better(&c[a], &pivot)) a++;
        while (better(&pivot, &c[b])) b--;
        if (a <= b) {
            Cand t = c[a];
            c[a++] = c[b];
            c[b--] = t;
        }
    }
    *pa = a;
    *pb = b;
}

/* c[0..k) the k best of c[0..n), in no order */
static void select_best(Cand *c, ptrdiff_t n, ptrdiff_t k) {
    ptrdiff_t lo = 0, hi = n - 1, a, b;
    while (lo < hi) {
        partition(c, lo, hi, &a, &b);
        if (k - 1 <= b) hi = b;
        else if (k - 1 >= a) lo = a;
        else return;
    }
}

static void sort_best(Cand *c, ptrdiff_t n) {
    ptrdiff_t a, b;
    while (n > 16) { /* quicksort, recursing into the smaller side */
        partition(c, 0, n - 1, &a, &b);
        if (b + 1 < n - a) {
            sort_best(c, b + 1);
            c += a;
            n -= a;
        } else {
            sort_best(c + a, n - a);
            n = b + 1;
        }
    }
    for (ptrdiff_t i = 1; i < n; i++) {
        Cand x = c[i];
        ptrdiff_t j = i;
        for (; j > 0 && better(&x, &c[j - 1]); j--) c[j] = c[j - 1];
        c[j] = x;
    }
}

typedef struct {
    Cand *buf;
    ptrdiff_t size, k;
    double thr; /* positive scores only: starts at 0 */
} Top;

/* Offer (v, slot). ties: slots come in no order, so a value equal to the threshold may still
 * be better (a lower slot); scanning slots upwards, it never is. */
static inline void offer(Top *top, double v, int64_t slot, int ties) {
    if (!(v > top->thr || (ties && v == top->thr && v > 0.0))) return; /* NaN never enters */
    top->buf[top->size].v = v;
    top->buf[top->size].i = slot;
    if (++top->size == 2 * top->k) {
        select_best(top->buf, top->size, top->k);
        top->size = top->k;
        double worst = top->buf[0].v;
        for (ptrdiff_t r = 1; r < top->k; r++) worst = top->buf[r].v < worst ? top->buf[r].v : worst;
        top->thr = worst;
    }
}

/* whether any of x[0..16) is > t: a loop the compiler vectorises (one compare per block of 16
 * scores that cannot enter) */
static inline int any_above16(const float *x, float t) {
    int any = 0;
    for (int l = 0; l < 16; l++) any |= x[l] > t;
    return any;
}

/* the largest float32 <= x */
static inline float below(double x) {
    float f = (float)x;
    return (double)f > x ? nextafterf(f, -INFINITY) : f;
}

void bm25_clear(const Bm25Row *row, ptrdiff_t kept, ptrdiff_t n_docs) {
    if (kept < 0) {
        memset(row->acc, 0, sizeof(float) * (size_t)n_docs);
        return;
    }
    for (ptrdiff_t r = 0; r < kept; r++) {
        int32_t d = row->touched[r];
        if ((uint64_t)(uint32_t)d >= (uint64_t)n_docs) continue;
        row->acc[d] = 0.0f;
        row->mark[d >> 6] = 0;
    }
}

ptrdiff_t bm25_query(const Bm25 *z, ptrdiff_t i, const Bm25Row *row, ptrdiff_t depth,
                     float *keys, int64_t *slots, const int64_t *cand, float *cout,
                     ptrdiff_t width, int keep) {
    ptrdiff_t n = z->n_docs;
    float *acc = row->acc;
    int64_t postings = 0;
    for (int64_t e = z->qptr[i]; e < z->qptr[i + 1]; e++) {
        int64_t j = z->qcol[e];
        postings += (z->mhi[j] - z->mlo[j]) + (z->tptr[j + 1] - z->tptr[j]);
    }
    int whole = postings * 2 > (int64_t)n;
    ptrdiff_t t = bm25_accumulate(z, i, acc, row->mark, whole ? NULL : row->touched);
    for (ptrdiff_t c = 0; c < width; c++)
        cout[c] = cand[c] >= 0 && cand[c] < (int64_t)n ? acc[cand[c]] : 0.0f;
    Top top = {row->buf, 0, depth, 0.0};
    if (depth > 0 && whole) {
        ptrdiff_t d = 0;
        for (; d + 16 <= n; d += 16) {
            if (!any_above16(acc + d, below(top.thr))) continue;
            for (ptrdiff_t r = d; r < d + 16; r++) offer(&top, (double)acc[r], r, 0);
        }
        for (; d < n; d++) offer(&top, (double)acc[d], d, 0);
    } else if (depth > 0) {
        for (ptrdiff_t r = 0; r < t; r++) offer(&top, (double)acc[row->touched[r]], row->touched[r], 1);
    }
    if (top.size > depth) select_best(top.buf, top.size, depth);
    ptrdiff_t size = top.size < depth ? top.size : depth;
    sort_best(top.buf, size);
    for (ptrdiff_t r = 0; r < depth; r++) {
        keys[r] = r < size ? (float)top.buf[r].v : -INFINITY;
        slots[r] = r < size ? top.buf[r].i : -1;
    }
    if (keep) return whole ? -1 : t;
    bm25_clear(row, whole ? -1 : t, n);
    return 0;
}
