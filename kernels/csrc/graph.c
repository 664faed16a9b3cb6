/* The association graph's kernels: plain C over caller-owned arrays, no Python API (bound in
 * kernels/_graph.pyx). Built with -ffp-contract=off: every product is the torch operations'
 * bits. */
#include "select.h"

/* Each of n memories' neighbour slots, -1 for none: its chain row (n, cw) at weights chain_w
 * (n, cw) or tw each (chain_w NULL), then, with row_of (n,) non-NULL, its row of extra
 * edges extra (rows, dw) at weights extra_w (rows, dw; NULL where weights are not read). */
typedef struct {
    const int64_t *chain, *row_of, *extra;
    const double *chain_w, *extra_w;
    double tw;
    ptrdiff_t n, cw, rows, dw;
} Links;

/* Neighbour slot k (< cw + dw) of memory d (in [0, n)), its weight in *w; -1 for none. */
static inline int64_t link_at(const Links *l, int64_t d, ptrdiff_t k, double *w) {
    if (k < l->cw) {
        *w = l->chain_w ? l->chain_w[d * l->cw + k] : l->tw;
        return l->chain[d * l->cw + k];
    }
    *w = l->tw;
    int64_t r = l->row_of ? l->row_of[d] : -1;
    if (r < 0 || r >= l->rows) return -1;
    ptrdiff_t at = r * l->dw + (k - l->cw);
    if (l->extra_w) *w = l->extra_w[at];
    return l->extra[at];
}

/* One query's pool into out (cap): its seeds (c, -1 padding) and every allowed (allowed NULL:
 * all) neighbour of a seed, ascending without repeats. Returns the count (-1: out too small,
 * -2: out of memory); *distinct gets the number of distinct seeds. */
ptrdiff_t pool_expand(const int64_t *seeds, ptrdiff_t c, const Links *l, const uint8_t *allowed,
                      int64_t *out, ptrdiff_t cap, ptrdiff_t *distinct) {
    ptrdiff_t n = l->n, e = l->cw + (l->row_of ? l->dw : 0), count = 0;
    uint64_t *bits = calloc((size_t)(n / 64 + 1), sizeof(uint64_t)); /* one bit per memory */
    if (!bits) return -2;
    *distinct = 0;
    for (ptrdiff_t i = 0; i < c; i++) {
        int64_t d = seeds[i];
        if (d < 0 || d >= n) continue;
        uint64_t bit = (uint64_t)1 << (d & 63);
        *distinct += !(bits[d >> 6] & bit);
        bits[d >> 6] |= bit;
    }
    for (ptrdiff_t i = 0; i < c; i++) {
        int64_t d = seeds[i];
        for (ptrdiff_t k = 0; d >= 0 && d < n && k < e; k++) {
            double w;
            int64_t j = link_at(l, d, k, &w);
            if (j >= 0 && j < n && (!allowed || allowed[j]))
                bits[j >> 6] |= (uint64_t)1 << (j & 63);
        }
    }
    for (ptrdiff_t w = 0; w <= n / 64 && count >= 0; w++) /* the bits in order: ascending */
        for (uint64_t word = bits[w]; word && count >= 0; word &= word - 1)
            out[count == cap ? (count = -1, 0) : count++] = (int64_t)w * 64 + __builtin_ctzll(word);
    free(bits);
    return count;
}

static inline int unsigned_finite(double x) { return isfinite(x) && !signbit(x); }

/* One row's spreading: member c's slots k at positions pos[c·e + k] (-1 for none), weights
 * w[c·e + k]; src holds 2·width doubles of scratch. */
static void spread_row(const int32_t *pos, const double *w, const double *base, ptrdiff_t width,
                       ptrdiff_t e, int steps, double decay, double *src, double *act) {
    double *step = src + width;
    memcpy(src, base, sizeof(double) * (size_t)width);
    for (ptrdiff_t c = 0; c < width; c++) act[c] = 0.0;
    for (int h = 0; h < steps; h++) {
        double dec = pow(decay, (double)h);
        for (ptrdiff_t c = 0; c < width; c++) {
            double best = 0.0;
            for (ptrdiff_t k = 0; k < e; k++) {
                int32_t j = pos[c * e + k];
                if (j < 0) continue;
                double v = (w[c * e + k] * src[j]) * dec;
                if (v > best) best = v;
            }
            step[c] = best;
            if (best > act[c]) act[c] = best;
        }
        memcpy(src, step, sizeof(double) * (size_t)width);
    }
}

/* Max-product spreading over m pool rows of `width` members (kernels/spread.py spread_max:
 * each hop h takes, per member, the largest (w * src[j]) * decay^h over its neighbour slots j
 * in the row, floored at 0; out is the running maximum from 0), member c's slots read from
 * the links. A row's members are either pool[i, c] (ordinals; each one's position found
 * through `table`, int32 of `size`, -1 everywhere, left so) or, with pool NULL, every memory
 * (width == n) where valid[i, c]. Returns 1, or 0 (out unspecified) where the maxima would
 * not have one answer -- decay, a member's base or a live slot's weight not finite or with a
 * sign bit: the caller takes the tensors --, or -1 out of memory. */
int spread_rows(const Links *l, const int64_t *pool, const uint8_t *valid, int32_t *table,
                int64_t size, const double *base, ptrdiff_t m, ptrdiff_t width, int hops,
                double decay, double *out) {
    ptrdiff_t e = l->cw + (l->row_of ? l->dw : 0), slots = width * e > 0 ? width * e : 1;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)slots);
    double *wts = malloc(sizeof(double) * (size_t)slots);
    double *src = malloc(sizeof(double) * (size_t)(2 * width + 1));
    int ok = pos && wts && src ? unsigned_finite(decay) : -1;
    for (ptrdiff_t i = 0; i < m && ok == 1; i++) {
        const int64_t *row = pool ? pool + i * width : NULL;
        const uint8_t *member = valid ? valid + i * width : NULL;
        const double *b = base + i * width;
        for (ptrdiff_t c = 0; c < width; c++) {
            int64_t d = row ? row[c] : (member[c] ? c : -1);
            if (row && d >= 0 && d < size) table[d] = (int32_t)c;
            if (d >= 0 && (!row || d < size) && !unsigned_finite(b[c])) ok = 0;
        }
        for (ptrdiff_t c = 0; c < width; c++) {
            int64_t d = row ? row[c] : (member[c] ? c : -1);
            for (ptrdiff_t k = 0; k < e; k++) {
                double w = 0.0;
                int64_t j = d >= 0 && d < l->n ? link_at(l, d, k, &w) : -1;
                int32_t p = j < 0 ? -1 : row ? (j < size ? table[j] : -1) : (int32_t)j;
                pos[c * e + k] = p = row || p < 0 || member[p] ? p : -1;
                wts[c * e + k] = w;
                if (p >= 0 && !unsigned_finite(w)) ok = 0;
            }
        }
        for (ptrdiff_t c = 0; row && c < width; c++)
            if (row[c] >= 0 && row[c] < size) table[row[c]] = -1;
        if (ok == 1)
            spread_row(pos, wts, b, width, e, hops > 1 ? hops : 1, decay, src, out + i * width);
    }
    free(pos), free(wts), free(src);
    return ok;
}
