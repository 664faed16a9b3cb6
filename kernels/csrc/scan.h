/* The INT8 scan with exact top-k, and the top-k selections of the dense and lexical paths:
 * plain C over caller-owned arrays, no Python API (bound in kernels/_scan.pyx). A key is
 * float32(dot(q, c_r)) * s_r: an exact int32 dot, then one IEEE float32 multiply (built with
 * -ffp-contract=off), so keys equal the torch and numpy twins bit for bit. Order everywhere:
 * key descending, then slot ascending; padding (-inf, -1). An int result is 0, or -1 when out
 * of memory. */
#ifndef SPECTOR_NATIVE_SCAN_H
#define SPECTOR_NATIVE_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* Top-k (keys, slots (m, k)) of m queries q (m, dim) over n_rows rows `stride` bytes apart,
 * rows with allowed[r] == 0 left out (allowed may be NULL); all (m, n_rows), unless NULL, gets
 * every row's key (-inf where not allowed). */
int int8_topk(const int8_t *codes, const float *scales, ptrdiff_t n_rows, ptrdiff_t dim,
              ptrdiff_t stride, const int8_t *q, ptrdiff_t m, const uint8_t *allowed, ptrdiff_t k,
              float *keys, int64_t *slots, float *all);

/* out[j, i]: query j's key of row rows[j, i] ((m, c), each in [-1, n_rows); -1 gives -inf). */
void int8_score_rows(const int8_t *codes, const float *scales, ptrdiff_t dim, ptrdiff_t stride,
                     const int8_t *q, ptrdiff_t m, const int64_t *rows, ptrdiff_t c, float *out);

/* The tile loop's state for n queries: 2k candidates each (select.h's Cand), their count
 * (in [0, 2k)) and an exact threshold (-inf, then the k-th best key). */
typedef struct {
    void *buf; /* (n, 2k) Cand */
    int64_t *size;
    double *thr;
    ptrdiff_t n, k;
} TopkState;

/* Offer a tile's keys float32(dots[r, j]) * scales[r] (dots (t, n) int32, or float32 when
 * f32); row r's slot is slotmap[r], or first + r without one; rows with gate[r] == 0 are
 * skipped (gate may be NULL). Slots must rise from tile to tile. */
void topk_update(TopkState *st, const void *dots, int f32, const float *scales, ptrdiff_t t,
                 ptrdiff_t first, const int64_t *slotmap, const uint8_t *gate);
/* Each query's k best, best first, into keys and slots (n, k). */
void topk_finish(TopkState *st, float *keys, int64_t *slots);

/* Top-k of each of n rows of width values (float32 when f32, else float64) > bound (>= when
 * not strict; NaN never enters) into keys and slots (n, k); count[i]: row i's result count. */
void rows_topk(const void *x, int f32, ptrdiff_t n, ptrdiff_t width, double bound, int strict,
               ptrdiff_t k, double *keys, int64_t *slots, int64_t *count);

#endif
