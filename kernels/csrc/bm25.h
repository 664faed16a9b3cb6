/* BM25 posting accumulation and per-query selection: plain C over caller-owned arrays, no
 * Python API (bound in kernels/_lexical.pyx, which checks every shape and range first). */
#ifndef SPECTOR_NATIVE_BM25_H
#define SPECTOR_NATIVE_BM25_H

#include <stddef.h>
#include <stdint.h>

/* The postings of a batch of queries: the query terms (CSR qptr/qcol/qcnt, columns ascending
 * in each row), term j's main postings mdoc/mtf[mlo[j]:mhi[j]) then its tail postings
 * tdoc/ttf[tptr[j]:tptr[j+1]), the documents' lengths and the gate (allowed, 1 byte per
 * document, or NULL). Each term's posting weights float32(tfc(tf, dl) * idf) are computed
 * once per call into wbuf at woff[j] (main then tail), or, with a weight cache (wmain, one
 * weight per main posting; cached[j] = 1 where term j's are current), its main ones are read
 * from or written into wmain[mlo[j]:mhi[j]) and wbuf holds tail ones only. */
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

/* Term j's posting weights (its main ones only where not cached). */
void bm25_term_weights(const Bm25 *z, int64_t j);

/* Query i's sums added into acc (float32 (N,), the order of scipy's csr product Q @ W:
 * terms ascending, each term's postings in order). With touched, every document reached for
 * the first time is set in the bitset mark (N / 64 + 1 words) and appended to touched
 * (N + 1 entries); returns how many. */
ptrdiff_t bm25_accumulate(const Bm25 *z, ptrdiff_t i, float *acc, uint64_t *mark,
                          int32_t *touched);

/* A selection's scratch: acc, mark and touched as above, zero between queries; buf holds
 * 2 * depth candidates (16 bytes each). */
typedef struct {
    float *acc;
    uint64_t *mark;
    int32_t *touched;
    void *buf;
} Bm25Row;

/* Query i into row: its depth best positive scores (value descending, slot ascending) into
 * keys/slots (-inf / -1 padding), and the scores of width candidate slots cand into cout (0
 * for a slot out of range). A query reading fewer postings than N / 2 lists the documents it
 * touches and selects from those, else it scans the whole row. With keep, the row is left as
 * written and the return value is what bm25_clear needs (the listed count, or -1 for the
 * whole row); else the row is cleared and 0 returned. */
ptrdiff_t bm25_query(const Bm25 *z, ptrdiff_t i, const Bm25Row *row, ptrdiff_t depth,
                     float *keys, int64_t *slots, const int64_t *cand, float *cout,
                     ptrdiff_t width, int keep);

/* Zero a kept row again: the kept documents listed in touched, or all n_docs when kept < 0. */
void bm25_clear(const Bm25Row *row, ptrdiff_t kept, ptrdiff_t n_docs);

#endif
