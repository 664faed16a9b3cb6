/* BM25 posting accumulation and per-query selection: plain C over caller-owned arrays, no
 * Python API (bound in kernels/_lexical.pyx, which checks every shape and range first). */
#ifndef SPECTOR_NATIVE_BM25_H
#define SPECTOR_NATIVE_BM25_H

#include <stddef.h>
#include <stdint.h>

/* A batch's postings: query terms (CSR qptr/qcol/qcnt, columns ascending in a row); term j's
 * main postings mdoc/mtf[mlo[j]:mhi[j]) then tail postings tdoc/ttf[tptr[j]:tptr[j+1]); the
 * documents' lengths; the gate (allowed, a byte per document, or NULL). Term j's weights
 * float32(tfc(tf, dl) * idf) lie at wbuf + woff[j] (main then tail), or with a weight cache
 * (wmain, one per main posting; cached[j] = 1 where term j's are current) its main ones in
 * wmain[mlo[j]:mhi[j]) and only its tail ones in wbuf. */
typedef struct {
    const int64_t *qptr, *qcol, *mlo, *mhi, *tptr, *woff;
    const float *qcnt;
    const double *idf;
    const int32_t *mdoc, *mtf, *tdoc, *ttf, *len;
    const uint8_t *allowed, *cached;
    float *wmain, *wbuf;
    ptrdiff_t n_docs;
    double k1, b, avgdl;
    int okapi;
} Bm25;

/* Compute term j's posting weights (its main ones only where not cached). */
void bm25_term_weights(const Bm25 *z, int64_t j);

/* Add query i's sums into acc (float32 (N,)) in the order of scipy's csr product Q @ W
 * (terms ascending, postings in order); with mark (N / 64 + 1 words), set each document's bit. */
void bm25_accumulate(const Bm25 *z, ptrdiff_t i, float *acc, uint64_t *mark);

/* Query i summed into acc (zero on entry), then its depth best positive scores (value
 * descending, slot ascending; -inf / -1 padding) into keys/slots and the scores of width
 * slots cand into cout (0 out of range); scratch: list (N int32), buf (2 * depth 16-byte
 * candidates). A query of fewer postings than N / 2 marks what it writes in mark (zero on
 * entry) and selects from that, else it scans the whole row. Returns 1 for the whole row,
 * else 0; unless keep, acc and mark are left zero (keep: the caller clears the whole row, or
 * the marked documents). */
int bm25_query(const Bm25 *z, ptrdiff_t i, float *acc, uint64_t *mark, int32_t *list,
               void *buf, ptrdiff_t depth, float *keys, int64_t *slots, const int64_t *cand,
               float *cout, ptrdiff_t width, int keep);

#endif
