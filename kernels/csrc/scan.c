/* The INT8 scan with exact top-k, and the top-k selections of the dense and lexical paths:
 * plain C over caller-owned arrays (bound in kernels/_scan.pyx). A key, float32(dot(q, c_r))
 * times s_r, is an exact int32 dot, then one IEEE float32 multiply (-ffp-contract=off), so
 * keys equal the torch and numpy twins bit for bit. Order: key descending, then slot ascending;
 * padding (-inf, -1). An int result is 0, or -1 when out of memory. */
#include "select.h"

/* The tile loop's state for n queries: 2k candidates each (select.h's Cand), their count
 * (in [0, 2k)) and an exact threshold (-inf, then the k-th best key). */
typedef struct { /* buf: (n, 2k) Cand */
    void *buf; int64_t *size; double *thr; ptrdiff_t n, k;
} TopkState;

/* The queries are widened to int16 once, so each step widens 16 row codes and multiply-adds
 * them in pairs: dots16 for m queries and one row, dots_rows for one query and four rows. */
#define ROWS_BLOCK 4

VECTOR_CLONES static void dots16(const int8_t *row, const int16_t *qs, ptrdiff_t m, ptrdiff_t d,
                                 int32_t *out) {
    for (ptrdiff_t j = 0; j < m; j++) {
        const int16_t *q = qs + j * d;
        int32_t acc = 0;
        for (ptrdiff_t i = 0; i < d; i++) acc += (int16_t)row[i] * q[i];
        out[j] = acc;
    }
}

VECTOR_CLONES static void dots_rows(const int8_t *rows, ptrdiff_t stride, const int16_t *q,
                                    ptrdiff_t d, int32_t *out) {
    const int8_t *r0 = rows, *r1 = r0 + stride, *r2 = r1 + stride, *r3 = r2 + stride;
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (ptrdiff_t i = 0; i < d; i++) {
        a0 += (int16_t)r0[i] * q[i];
        a1 += (int16_t)r1[i] * q[i];
        a2 += (int16_t)r2[i] * q[i];
        a3 += (int16_t)r3[i] * q[i];
    }
    out[0] = a0, out[1] = a1, out[2] = a2, out[3] = a3;
}

/* Query j's key for row r: into its heap when it can enter (thr[j]: a float32 bound below
 * which it cannot, -inf while the heap is not full; an equal key keeps the lower slot). */
static inline void scan_offer(float key, ptrdiff_t j, ptrdiff_t k, int64_t r, float *thr,
                              double *hk, int64_t *hs, ptrdiff_t *size) {
    if (!(key >= thr[j])) return;
    double *h = hk + j * k;
    if (size[j] == k && !((double)key > h[0])) return;
    offer(h, hs + j * k, k, &size[j], (double)key, r);
    if (size[j] == k) thr[j] = below(h[0]);
}

/* Top-k (keys, slots (m, k)) of m queries q (m, dim) over n_rows rows `stride` bytes apart,
 * rows with allowed[r] == 0 left out (allowed may be NULL); all (m, n_rows), unless NULL, gets
 * every row's key (-inf where not allowed). One query (m == 1) with `next` scans only the
 * blocks of CLAIM_ROWS rows it claims from that counter (shared with other threads). */
#define CLAIM_ROWS 4096
int int8_topk(const int8_t *codes, const float *scales, ptrdiff_t n_rows, ptrdiff_t dim,
              ptrdiff_t stride, const int8_t *q, ptrdiff_t m, const uint8_t *allowed, ptrdiff_t k,
              int64_t *next, float *keys, int64_t *slots, float *all) {
    double *hk = malloc(sizeof(double) * m * k);
    int64_t *hs = malloc(sizeof(int64_t) * m * k);
    ptrdiff_t *size = calloc(m, sizeof(ptrdiff_t));
    int32_t *dotv = malloc(sizeof(int32_t) * (m > ROWS_BLOCK ? m : ROWS_BLOCK));
    float *thr = malloc(sizeof(float) * m);
    int16_t *q16 = malloc(sizeof(int16_t) * m * dim);
    int rc = -1;
    if (!hk || !hs || !size || !dotv || !thr || !q16) goto done;
    for (ptrdiff_t i = 0; i < m * dim; i++) q16[i] = q[i];
    for (ptrdiff_t j = 0; j < m; j++) thr[j] = -INFINITY;
    for (ptrdiff_t b = 0; m == 1; b++) { /* one query: blocks of rows, in order or claimed */
        ptrdiff_t lo = (next ? claim_row(next) : b) * CLAIM_ROWS;
        if (lo >= n_rows) break;
        for (ptrdiff_t r = lo, t; r < n_rows && r < lo + CLAIM_ROWS; r += t) {
            t = n_rows - r < ROWS_BLOCK ? n_rows - r : ROWS_BLOCK;
            if (t == ROWS_BLOCK) dots_rows(codes + r * stride, stride, q16, dim, dotv);
            for (ptrdiff_t i = 0; i < t; i++) {
                int ok = !allowed || allowed[r + i];
                if (ok && t < ROWS_BLOCK) dots16(codes + (r + i) * stride, q16, 1, dim, dotv + i);
                float key = ok ? (float)dotv[i] * scales[r + i] : -INFINITY;
                if (all) all[r + i] = key;
                if (ok) scan_offer(key, 0, k, r + i, thr, hk, hs, size);
            }
        }
    }
    for (ptrdiff_t r = 0; m > 1 && r < n_rows; r++) {
        int ok = !allowed || allowed[r];
        if (ok) dots16(codes + r * stride, q16, m, dim, dotv);
        for (ptrdiff_t j = 0; j < m; j++) {
            float key = ok ? (float)dotv[j] * scales[r] : -INFINITY;
            if (all) all[j * n_rows + r] = key;
            if (ok) scan_offer(key, j, k, r, thr, hk, hs, size);
        }
    }
    for (ptrdiff_t j = 0; j < m; j++) {
        heap_sort(hk + j * k, hs + j * k, size[j]);
        for (ptrdiff_t i = 0; i < k; i++) {
            keys[j * k + i] = i < size[j] ? (float)hk[j * k + i] : -INFINITY;
            slots[j * k + i] = i < size[j] ? hs[j * k + i] : -1;
        }
    }
    rc = 0;
done:
    free(hk), free(hs), free(size), free(dotv), free(thr), free(q16);
    return rc;
}

/* out[j, i]: query j's key of row rows[j, i] ((m, c), in [-1, n_rows); -1 gives -inf). */
void int8_score_rows(const int8_t *codes, const float *scales, ptrdiff_t dim, ptrdiff_t stride,
                     const int8_t *q, ptrdiff_t m, const int64_t *rows, ptrdiff_t c, float *out) {
    int16_t q16[dim > 0 ? dim : 1];
    for (ptrdiff_t j = 0; j < m; j++) {
        for (ptrdiff_t d = 0; d < dim; d++) q16[d] = q[j * dim + d];
        for (ptrdiff_t i = 0; i < c; i++) {
            int64_t r = rows[j * c + i];
            int32_t dot = 0;
            if (r >= 0) dots16(codes + r * stride, q16, 1, dim, &dot);
            out[j * c + i] = r < 0 ? -INFINITY : (float)dot * scales[r];
        }
    }
}

/* Offer a tile's keys float32(dots[r, j]) * scales[r] (dots (t, n) int32, or float32 when
 * f32); row r's slot is slotmap[r], or first + r; rows with gate[r] == 0 are skipped (gate
 * may be NULL). Slots rise from tile to tile, so a key equal to its query's threshold never
 * beats the k-th; 16 keys are tested against float copies of the thresholds at once. */
VECTOR_CLONES void topk_update(TopkState *st, const void *dots, int f32, const float *scales,
                               ptrdiff_t t, ptrdiff_t first, const int64_t *slotmap,
                               const uint8_t *gate) {
    ptrdiff_t n = st->n, k = st->k;
    float *tf = malloc(sizeof(float) * (size_t)(n + 1));
    for (ptrdiff_t j = 0; tf && j < n; j++) tf[j] = (float)st->thr[j];
    for (ptrdiff_t r = 0; r < t; r++) {
        if (gate && !gate[r]) continue;
        int64_t slot = slotmap ? slotmap[r] : (int64_t)(first + r);
        const float *df = (const float *)dots + r * n, s = scales[r];
        const int32_t *di = (const int32_t *)dots + r * n;
        for (ptrdiff_t j0 = 0; j0 < n; j0 += 16) {
            ptrdiff_t end = j0 + 16 < n ? j0 + 16 : n;
            int hit = !tf || end - j0 < 16;
            for (int l = 0; !hit && f32 && l < 16; l++) hit |= df[j0 + l] * s > tf[j0 + l];
            for (int l = 0; !hit && !f32 && l < 16; l++) hit |= (float)di[j0 + l] * s > tf[j0 + l];
            for (ptrdiff_t j = j0; hit && j < end; j++) {
                float key = (f32 ? df[j] : (float)di[j]) * s;
                if (!((double)key > st->thr[j])) continue;
                ptrdiff_t size = (ptrdiff_t)st->size[j];
                cand_push((Cand *)st->buf + j * 2 * k, &size, k, &st->thr[j], key, slot);
                st->size[j] = size;
                if (tf) tf[j] = (float)st->thr[j];
            }
        }
    }
    free(tf);
}

/* Each query's k best, best first, into keys and slots (n, k). */
void topk_finish(TopkState *st, float *keys, int64_t *slots) {
    ptrdiff_t k = st->k;
    for (ptrdiff_t j = 0; j < st->n; j++) {
        Cand *b = (Cand *)st->buf + j * 2 * k;
        ptrdiff_t got = (ptrdiff_t)st->size[j];
        if (got > k) {
            cand_select(b, got, k);
            got = k;
        }
        cand_sort(b, got);
        for (ptrdiff_t i = 0; i < k; i++) {
            keys[j * k + i] = i < got ? (float)b[i].v : -INFINITY; /* a float32 key */
            slots[j * k + i] = i < got ? b[i].i : -1;
        }
    }
}

/* Top-k of each of n rows of width values (float32 when f32, else float64) > bound (>= when
 * not strict; NaN never enters) into keys and slots (n, k); count[i]: row i's result count.
 * Large k: the buffered selection (a heap update per entry costs more there: k = 100 of 600
 * float64 columns, 21 -> 5 us a row). */
void rows_topk(const void *x, int f32, ptrdiff_t n, ptrdiff_t width, double bound, int strict,
               ptrdiff_t k, double *keys, int64_t *slots, int64_t *count) {
    Cand *cand = strict && k >= 32 ? malloc(sizeof(Cand) * 2 * (size_t)k) : NULL;
    for (ptrdiff_t j = 0; j < n; j++) {
        ptrdiff_t size = 0;
        double *hk = keys + j * k;
        int64_t *hs = slots + j * k;
        const float *xf = (const float *)x + j * width;
        const double *xd = (const double *)x + j * width;
        if (strict && f32) {
            size = select_f32(xf, width, bound, hk, hs, k, cand);
        } else if (strict && cand) {
            size = select_f64(xd, width, bound, hk, hs, k, cand);
        } else {
            double thr = bound;
            for (ptrdiff_t i = 0; i < width; i++) {
                double v = f32 ? (double)xf[i] : xd[i];
                if (strict ? !(v > thr) : !(v >= bound)) continue; /* NaN never enters */
                if (size == k && !(v > hk[0])) continue;
                offer(hk, hs, k, &size, v, (int64_t)i);
                if (size == k && strict) thr = hk[0];
            }
        }
        if (!cand) heap_sort(hk, hs, size);
        for (ptrdiff_t i = size; i < k; i++) {
            hk[i] = -INFINITY;
            hs[i] = -1;
        }
        count[j] = size;
    }
    free(cand);
}
