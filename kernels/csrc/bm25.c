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
 * (terms ascending, postings in order); with mark (N / 64 + 1 words), set each document's bit. */
void bm25_accumulate(const Bm25 *z, ptrdiff_t i, float *acc, uint64_t *mark) {
    const uint8_t *allowed = z->allowed;
    uint64_t n = (uint64_t)z->n_docs;
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
                if (mark) mark[d >> 6] |= (uint64_t)1 << (d & 63);
                float add = cnt * *w;
                acc[d] = acc[d] + add;
            }
        }
    }
}

/* Query i summed into acc (zero on entry), then its depth best positive scores (value
 * descending, slot ascending; -inf / -1 padding) into keys/slots and the scores of width
 * slots cand into cout (0 out of range); scratch: list (N int32), buf (2 * depth 16-byte
 * candidates). A query of fewer postings than N / 2 marks what it writes in mark (zero on
 * entry) and selects from that, else it scans the whole row. Returns 1 for the whole row,
 * else 0; unless keep, acc and mark are left zero (keep: the caller clears the whole row, or
 * the marked documents). */
VECTOR_CLONES int bm25_query(const Bm25 *z, ptrdiff_t i, float *acc, uint64_t *mark,
                             int32_t *list, void *buf, ptrdiff_t depth, float *keys, int64_t *slots,
                             const int64_t *cand, float *cout, ptrdiff_t width, int keep) {
    ptrdiff_t n = z->n_docs;
    int64_t postings = 0;
    for (int64_t e = z->qptr[i]; e < z->qptr[i + 1]; e++) {
        int64_t j = z->qcol[e];
        postings += (z->mhi[j] - z->mlo[j]) + (z->tptr[j + 1] - z->tptr[j]);
    }
    int whole = postings * 2 > (int64_t)n;
    bm25_accumulate(z, i, acc, whole ? NULL : mark);
    for (ptrdiff_t c = 0; c < width; c++)
        cout[c] = cand[c] >= 0 && cand[c] < (int64_t)n ? acc[cand[c]] : 0.0f;
    Cand *cb = buf;
    ptrdiff_t size = 0;
    double thr = 0.0;
    if (depth > 0 && whole) { /* from a sampled bound when depth values pass it, else 0 */
        double from = sampled_bound(acc, n, depth);
        size = take_above_f32(acc, n, from, depth, cb);
        if (size < depth && from > 0.0) size = take_above_f32(acc, n, 0.0, depth, cb);
    } else if (!whole) {
        /* the marked documents listed in slot order (their bits cleared unless keep), with a
         * histogram of their scores' leading bits (positive float32 bits order as the values)
         * that puts the threshold just below the bucket holding the depth-th best; then the
         * list offered (and cleared unless keep) */
        uint32_t hist[4096] = {0}, low;
        ptrdiff_t t = 0;
        for (ptrdiff_t w = 0; w <= n >> 6; w++) {
            for (uint64_t bits = mark[w]; bits; bits &= bits - 1) {
                float v = acc[list[t++] = (int32_t)((w << 6) + __builtin_ctzll(bits))];
                if (depth > 0 && v > 0.0f) hist[(memcpy(&low, &v, 4), low >> 19)]++;
            }
            if (!keep) mark[w] = 0;
        }
        ptrdiff_t above = 0, floor = 4096;
        while (floor > 0 && above < depth) above += hist[--floor];
        float f;
        low = ((uint32_t)floor << 19) - 1;
        memcpy(&f, &low, 4);
        thr = floor > 0 ? (double)f : 0.0;
        for (ptrdiff_t r = 0; r < t; r++) { /* slots ascending: an equal value never enters */
            float v = acc[list[r]];
            if (depth > 0 && v > thr) cand_push(cb, &size, depth, &thr, v, list[r]);
            if (!keep) acc[list[r]] = 0.0f;
        }
    }
    if (size > depth) cand_select(cb, size, depth);
    size = size < depth ? size : depth;
    cand_sort(cb, size);
    for (ptrdiff_t r = 0; r < depth; r++) {
        keys[r] = r < size ? (float)cb[r].v : -INFINITY;
        slots[r] = r < size ? cb[r].i : -1;
    }
    if (!keep && whole) memset(acc, 0, sizeof(float) * (size_t)n);
    return whole;
}
