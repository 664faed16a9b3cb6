/* The token relay's MaxSim and order (pathways/recall/token_relay.py), bound in
 * kernels/_lexical.pyx (which checks every count, ordinal, offset and query token first and
 * sizes the scratch). Each cosine is two int8 rows' exact integer dot over the product of
 * their norms, in float64: TokenVocab.cosines bit for bit. */
#include "select.h"

/* n queries of width W: fused float32 (n, W), counts int32 (n,), ordinals int64 (n, W); the
 * memories' token rows ids[offsets[o]:offsets[o+1]) (int32); the table's int8
 * codes (vocab, dim), norm and SIF weight float64 (vocab,); query i's token ids
 * qids[qoff[i]:qoff[i+1]); outputs (n, W) as token_rescore documents them. */
typedef struct {
    const float *fused;
    const int8_t *codes;
    const int32_t *counts, *ids, *qids;
    const int64_t *ordinals, *offsets, *qoff;
    const double *norm, *weight;
    ptrdiff_t width, vocab, dim;
    double token_weight;
    int64_t *out_order;
    float *out_fused;
    double *out_token;
} TokJob;

/* Scratch sized for the largest query (see _lexical.pyx): slot each table token's slot among
 * the query's distinct tokens (vocab entries, -1 between queries), uniq/pslot its postings,
 * sims its postings x its query tokens rounded up to 4 (t4), qcodes t4 int16 rows, idots t4,
 * rank W x 24 bytes, tmp 2 W. */
typedef struct {
    int32_t *slot, *uniq, *pslot, *idots;
    int16_t *qcodes;
    double *sims, *tmp;
    void *rank;
} TokScratch;

/* Each distinct token's cosines with the query tokens, row d of sims (stride wide, -inf past
 * t): the exact integer dots of its int8 row with the t4 int16 query rows, four per pass so
 * the row is widened once for four (the compiler makes each a multiply-add of int16 pairs),
 * over the product of the norms in float64. */
VECTOR_CLONES static void cosines(const TokJob *j, const TokScratch *s, const int32_t *q,
                                  size_t t, size_t stride, size_t distinct) {
    ptrdiff_t dim = j->dim;
    int32_t *idots = s->idots;
    for (size_t d = 0; d < distinct; d++) {
        int32_t u = s->uniq[d], ahead = s->uniq[d + 4 < distinct ? d + 4 : d];
        const int8_t *row = j->codes + (ptrdiff_t)u * dim;
        for (ptrdiff_t x = 0; x < dim; x += 64) __builtin_prefetch(j->codes + ahead * dim + x);
        for (size_t a = 0; a < stride; a += 4) {
            const int16_t *q0 = s->qcodes + a * dim, *q1 = q0 + dim, *q2 = q1 + dim, *q3 = q2 + dim;
            int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (ptrdiff_t i = 0; i < dim; i++) {
                int16_t r = row[i];
                s0 += r * q0[i], s1 += r * q1[i], s2 += r * q2[i], s3 += r * q3[i];
            }
            idots[a] = s0, idots[a + 1] = s1, idots[a + 2] = s2, idots[a + 3] = s3;
        }
        double *sim = s->sims + d * stride, nu = j->norm[u];
        for (size_t a = 0; a < stride; a++)
            sim[a] = a < t ? (double)idots[a] / (j->norm[q[a]] * nu) : -INFINITY;
    }
}

/* min-max over x[0..n) into out (0 everywhere unless two different values) */
static void minmax(const double *x, ptrdiff_t n, double *out) {
    double lo = INFINITY, hi = -INFINITY;
    for (ptrdiff_t m = 0; m < n; m++) lo = x[m] < lo ? x[m] : lo, hi = x[m] > hi ? x[m] : hi;
    for (ptrdiff_t m = 0; m < n; m++) out[m] = hi > lo ? (x[m] - lo) / (hi - lo) : 0.0;
}

/* The token scores of one query's c members (0 without tokens), in three passes so the cold
 * table rows load together: each posting's distinct-token slot, each distinct token's cosines
 * with the query tokens (rows prefetched ahead), each member's best per query token. */
static int maxsim(const TokJob *j, const TokScratch *s, const int64_t *ord, ptrdiff_t c,
                  const int32_t *q, size_t t, double *token) {
    ptrdiff_t dim = j->dim;
    size_t stride = (t + 3) & ~(size_t)3;
    double wsum = 0.0;
    for (size_t a = 0; a < stride; a++) {
        const int8_t *code = j->codes + (ptrdiff_t)q[a < t ? a : 0] * dim;
        wsum += a < t ? j->weight[q[a]] : 0.0;
        for (ptrdiff_t d = 0; d < dim; d++) s->qcodes[a * (size_t)dim + d] = a < t ? code[d] : 0;
    }
    size_t distinct = 0, n_post = 0;
    for (ptrdiff_t m = 0; m < c; m++) {
        for (int64_t p = j->offsets[ord[m]]; p < j->offsets[ord[m] + 1]; p++) {
            int32_t u = j->ids[p];
            if (u < 0 || u >= j->vocab) return -1; /* (the claim ends: its scratch is dropped) */
            int32_t at = s->slot[u], fresh = at < 0;
            at = fresh ? (int32_t)distinct : at;
            s->slot[u] = at, s->uniq[distinct] = u, s->pslot[n_post++] = at;
            distinct += (size_t)fresh;
        }
    }
    for (size_t d = 0; d < distinct; d++) s->slot[s->uniq[d]] = -1; /* ready for the next */
    cosines(j, s, q, t, stride, distinct);
    /* each member's best per query token, four at a time (rows padded with -inf; a maximum
     * is exact, so the order of the postings does not change it) */
    n_post = 0;
    for (ptrdiff_t m = 0; m < c; m++) {
        int64_t len = j->offsets[ord[m] + 1] - j->offsets[ord[m]];
        const int32_t *slots = s->pslot + n_post;
        n_post += (size_t)len;
        if (len == 0) continue;
        double acc = 0.0;
        for (size_t a = 0; a < t; a += 4) {
            double b[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
            for (int64_t p = 0; p < len; p++) {
                const double *row = s->sims + (size_t)slots[p] * stride + a;
                for (int l = 0; l < 4; l++) b[l] = row[l] > b[l] ? row[l] : b[l];
            }
            for (size_t l = 0; l < 4 && a + l < t; l++) acc += j->weight[q[a + l]] * b[l];
        }
        token[m] = wsum > 0 ? acc / wsum : 0.0;
    }
    return 0;
}

/* Query i: its token scores, order and mixed scores; -1 for a token id out of the table. */
int token_query(const TokJob *j, const TokScratch *s, ptrdiff_t i) {
    ptrdiff_t c = j->counts[i], w = j->width;
    const int64_t *ord = j->ordinals + i * w;
    const int32_t *q = j->qids + j->qoff[i];
    size_t t = (size_t)(j->qoff[i + 1] - j->qoff[i]);
    double *token = j->out_token + i * w;
    for (ptrdiff_t m = 0; m < w; m++) token[m] = 0.0;
    for (ptrdiff_t m = 0; m < c; m++) /* the rows of pass one */
        for (int64_t p = j->offsets[ord[m]]; p < j->offsets[ord[m] + 1]; p += 16)
            __builtin_prefetch(j->ids + p);
    if (t > 0 && maxsim(j, s, ord, c, q, t, token) < 0) return -1;
    const float *fused = j->fused + i * w;
    int64_t *order = j->out_order + i * w;
    float *out = j->out_fused + i * w;
    for (ptrdiff_t m = 0; m < w; m++) order[m] = m, out[m] = fused[m];
    if (c == 0) return 0;
    double *fm = s->tmp, *tm = s->tmp + w;
    Rank *rank = s->rank;
    for (ptrdiff_t m = 0; m < c; m++) fm[m] = (double)fused[m];
    minmax(fm, c, fm);
    minmax(token, c, tm);
    for (ptrdiff_t m = 0; m < c; m++) rank[m] = (Rank){fm[m] + j->token_weight * tm[m], ord[m], m};
    rank_sort(rank, c);
    for (ptrdiff_t m = 0; m < c; m++) order[m] = rank[m].at, out[m] = (float)rank[m].score;
    return 0;
}
