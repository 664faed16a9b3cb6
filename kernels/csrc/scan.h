/* The INT8 scan with exact top-k, and the top-k selections of the dense and lexical paths:
 * plain C over caller-owned arrays, no Python API (bound in kernels/_scan.pyx).
 *
 * A key is float32(dot(q, c_r)) * s_r: the dot an exact int32, the product one IEEE float32
 * multiply (built with -ffp-contract=off), so keys equal the torch and numpy twins bit for bit.
 * Order everywhere: key descending, then slot (row) ascending; padding (-inf, -1). Functions
 * returning int give 0, or -1 when out of memory. */
#ifndef SPECTOR_NATIVE_SCAN_H
#define SPECTOR_NATIVE_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* Exact top-k of m queries q (m, dim) over n_rows rows `stride` bytes apart, each row's scale
 * in scales; rows with allowed[r] == 0 are left out (allowed may be NULL). Results (m, k)
 * into keys and slots; all (m, n_rows), if not NULL, gets every row's key (-inf if gated). */
int int8_topk(const int8_t *codes, const float *scales, ptrdiff_t n_rows, ptrdiff_t dim,
              ptrdiff_t stride, const int8_t *q, ptrdiff_t m, const uint8_t *allowed, ptrdiff_t k,
              float *keys, int64_t *slots, float *all);

/* The keys of given rows: out[j, i] for query j and row rows[j, i] ((m, c); -1 gives -inf).
 * Rows must be in [-1, n_rows) (checked by the caller). */
void int8_score_rows(const int8_t *codes, const float *scales, ptrdiff_t dim, ptrdiff_t stride,
                     const int8_t *q, ptrdiff_t m, const int64_t *rows, ptrdiff_t c, float *out);

/* The per-query candidate state of the tile loop (kernels/dense_cpu.py): for n queries a
 * buffer of 2k candidates (select.h's Cand: key, slot), its size (in [0, 2k)) and an exact
 * threshold (-inf until the first selection, then the k-th best key). */
typedef struct {
    void *buf; /* (n, 2k) Cand */
    int64_t *size;
    double *thr;
    ptrdiff_t n, k;
} TopkState;

/* Offer a tile of dots (t, n) int32, or float32 when f32, to the state: row r's key for query j
 * is float32(dots[r, j]) * scales[r]; its slot slotmap[r] (or first + r when slotmap is NULL);
 * rows with gate[r] == 0 are skipped (gate may be NULL). Slots must rise from tile to tile. */
int topk_update(TopkState *st, const void *dots, int f32, const float *scales, ptrdiff_t t,
                ptrdiff_t first, const int64_t *slotmap, const uint8_t *gate);

/* Each query's k best, best first, into keys and slots (n, k). */
void topk_finish(TopkState *st, float *keys, int64_t *slots);

/* Exact top-k of each of n rows of width values (float32 when f32, else float64) above bound
 * (strict: > bound; else >= bound; NaN never enters) into keys and slots (n, k), padded;
 * count[i] gets row i's number of results. */
void rows_topk(const void *x, int f32, ptrdiff_t n, ptrdiff_t width, double bound, int strict,
               ptrdiff_t k, double *keys, int64_t *slots, int64_t *count);

#endif
