/* BM25 posting accumulation and per-query selection: plain C over caller-owned arrays, no
 * Python API (bound in kernels/_lexical.pyx, which checks every shape and range first). Built
 * with -ffp-contract=off: each weight and sum is the float64/float32 arithmetic of
 * cortex/bm25.py and scipy's product, in their order, bit for bit. */
#include "select.h"

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

/* term j's main weights (the cache's, or the call's) and tail weights */
#define MAIN_W(z, j) ((z)->wmain ? (z)->wmain + (z)->mlo[j] : (z)->wbuf + (z)->woff[j])
#define TAIL_W(z, j) ((z)->wbuf + (z)->woff[j] + ((z)->wmain ? 0 : (z)->mhi[j] - (z)->mlo[j]))

/* Compute term j's posting weights (its main ones only where not cached). */
void bm25_term_weights(const Bm25 *z, int64_t j) {
    double base = 1.0 - z->b;
    for (int pass = z->wmain && z->cached[j] ? 1 : 0; pass < 2; pass++) {
        const int32_t *docs = pass ? z->tdoc : z->mdoc, *tfs = pass ? z->ttf : z->mtf;
        int64_t p = pass ? z->tptr[j] : z->mlo[j], end = pass ? z->tptr[j + 1] : z->mhi[j];
        float *w = pass ? TAIL_W(z, j) : MAIN_W(z, j);
        for (; p < end; p++, w++) {
            int32_t d = docs[p];
            int in = (uint64_t)(uint32_t)d < (uint64_t)z->n_docs; /* else weight 0 */
            double tf = (double)tfs[p], dl = in ? (double)z->len[d] : 0.0;
            double norm = z->k1 * (base + z->b * dl / z->avgdl);
            double num = z->okapi ? tf * (z->k1 + 1.0) : tf;
            *w = in ? (float)(num / (tf + norm) * z->idf[j]) : 0.0f;
        }
    }
}

/* Add query i's sums into acc (float32 (N,)) in the order of scipy's csr product Q @ W
 * (terms ascending, postings in order); with mark (N / 64 + 1 words), set each document's bit,
 * and where it was clear start from 0 (whatever acc held) and list the document in list, in
 * the order reached (list holds one more than the documents reached). Returns the count. */
ptrdiff_t bm25_accumulate(const Bm25 *z, ptrdiff_t i, float *acc, uint64_t *mark,
                          int32_t *list) {
    const uint8_t *allowed = z->allowed;
    uint64_t n = (uint64_t)z->n_docs;
    ptrdiff_t t = 0;
    for (int64_t e = z->qptr[i]; e < z->qptr[i + 1]; e++) {
        int64_t j = z->qcol[e];
        float cnt = z->qcnt[e];
        for (int pass = 0; pass < 2; pass++) {
            const int32_t *docs = pass ? z->tdoc : z->mdoc;
            int64_t p = pass ? z->tptr[j] : z->mlo[j], end = pass ? z->tptr[j + 1] : z->mhi[j];
            const float *w = pass ? TAIL_W(z, j) : MAIN_W(z, j);
            for (; p < end; p++, w++) {
                int32_t d = docs[p];
                if ((uint64_t)(uint32_t)d >= n || (allowed && !allowed[d])) continue;
                float add = cnt * *w, was = acc[d];
                if (mark) {
                    uint64_t word = mark[d >> 6], bit = (uint64_t)1 << (d & 63);
                    list[t] = d, t += !(word & bit), mark[d >> 6] = word | bit;
                    was = word & bit ? was : 0.0f;
                }
                acc[d] = was + add;
            }
        }
    }
    return t;
}

/* Query i summed into acc, then its depth best positive scores (value descending, slot
 * ascending; -inf / -1 padding) into keys/slots and the scores of width slots cand into cout
 * (0 where none); scratch: list (N int32), buf (2 * depth 16-byte candidates). A query of
 * fewer postings than N / 2 marks (in mark, zero on entry) and selects from the t documents
 * it reached, else from the whole row (t = N, cleared first unless keep); from a sampled bound
 * when depth values pass it, else 0. Returns 1 for the whole row, else 0. Unless keep, mark is
 * left zero (acc as it is); keep: acc is zero on entry and the caller clears what was written. */
VECTOR_CLONES int bm25_query(const Bm25 *z, ptrdiff_t i, float *acc, uint64_t *mark,
                             int32_t *list, void *buf, ptrdiff_t depth, float *keys, int64_t *slots,
                             const int64_t *cand, float *cout, ptrdiff_t width, int keep) {
    ptrdiff_t n = z->n_docs, size = 0;
    int64_t postings = 0;
    for (int64_t e = z->qptr[i]; e < z->qptr[i + 1]; e++) {
        int64_t j = z->qcol[e];
        postings += (z->mhi[j] - z->mlo[j]) + (z->tptr[j + 1] - z->tptr[j]);
    }
    int whole = postings * 2 > (int64_t)n; /* (else the list has room for one more) */
    if (whole && !keep) memset(acc, 0, sizeof(float) * (size_t)n);
    ptrdiff_t t = bm25_accumulate(z, i, acc, whole ? NULL : mark, list);
    for (ptrdiff_t c = 0, d; c < width; c++) /* (a document not reached: not marked) */
        cout[c] = (d = cand[c]) >= 0 && d < n && (whole || mark[d >> 6] >> (d & 63) & 1) ? acc[d]
                                                                                        : 0.0f;
    const int32_t *at = whole ? NULL : list;
    t = whole ? n : t;
    double from = depth > 0 ? sampled_bound(acc, at, t, depth) : 0.0;
    size = depth > 0 ? take_listed_f32(acc, at, t, from, depth, buf) : 0;
    if (size < depth && from > 0.0) size = take_listed_f32(acc, at, t, 0.0, depth, buf);
    Cand *cb = buf;
    if (size > depth) cand_select(cb, size, depth);
    size = size < depth ? size : depth;
    cand_sort(cb, size);
    for (ptrdiff_t r = 0; r < depth; r++) {
        keys[r] = r < size ? (float)cb[r].v : -INFINITY;
        slots[r] = r < size ? cb[r].i : -1;
    }
    for (ptrdiff_t r = 0; r < t && at && !keep; r++) mark[list[r] >> 6] = 0;
    return whole;
}
