/* Fusion's row kernels: plain C over caller-owned arrays, no Python API (bound in
 * kernels/_fusion.pyx). Built with -ffp-contract=off: each result equals the torch operations'
 * bits. */
#include "select.h"

static double unit(double x) { return isfinite(x) ? (x < 0.0 ? 0.0 : (x > 1.0 ? 1.0 : x)) : 0.0; }

/* Absolute relevance of n pool rows of width W (pathways/recall/relevance.py): with the tensor
 * operations' arithmetic in their order, 1 - (1 - unit(lex / ceiling)) * (1 - unit(dense)),
 * unit(x) = x clipped to [0, 1] (0 when not finite), lex / ceiling = 0 where the ceiling is
 * not > 0. lex and ceiling (both or neither) and dense may be NULL: a relay without scores
 * contributes nothing (neither: zeros). Arrays are row-major (n, W); ceiling is (n,). */
void relevance_rows(const double *lex, const double *dense, const double *ceiling, double *out,
                    ptrdiff_t n, ptrdiff_t width) {
    for (ptrdiff_t i = 0; i < n; i++) {
        double c = lex ? ceiling[i] : 0.0;
        for (ptrdiff_t j = i * width; j < (i + 1) * width; j++) {
            double miss = 1.0;
            int any = 0;
            if (lex) {
                miss = 1.0 - unit(c > 0.0 ? lex[j] / c : 0.0);
                any = 1;
            }
            if (dense) {
                double d = 1.0 - unit(dense[j]);
                miss = any ? miss * d : d;
                any = 1;
            }
            out[j] = any ? 1.0 - miss : 0.0;
        }
    }
}

/* Each row of x (n, W) min-max normalised over its valid finite entries into out (float32):
 * (x - lo) / (hi - lo) in float64 rounded to float32; 0 for the rest, and for every entry of a
 * row without two different finite members. */
void minmax_rows(const double *x, const uint8_t *valid, float *out, ptrdiff_t n, ptrdiff_t width) {
    for (ptrdiff_t i = 0; i < n; i++) {
        const double *row = x + i * width;
        const uint8_t *ok = valid + i * width;
        float *dst = out + i * width;
        double lo = INFINITY, hi = -INFINITY;
        for (ptrdiff_t c = 0; c < width; c++) {
            if (!ok[c] || !isfinite(row[c])) continue;
            lo = row[c] < lo ? row[c] : lo;
            hi = row[c] > hi ? row[c] : hi;
        }
        double span = hi - lo;
        for (ptrdiff_t c = 0; c < width; c++)
            dst[c] = hi > lo && ok[c] && isfinite(row[c]) ? (float)((row[c] - lo) / span) : 0.0f;
    }
}

/* fusion.fuse after the base and the association (n rows of width W): relevance = base +
 * w_assoc * assoc + float32(sal * float32(w_sal)) (assoc, sal NULL: no term); with importance,
 * d and s_term (NULL: not cognitive) the factor float32(1 + beta * I / 10 * D * S^0.3), lifted
 * by (1 + tau) where match (NULL: none) and relevance * factor * (1 + tau) reaches the row's
 * k-th relevance * factor over its valid members; fused = relevance * factor, -inf where not
 * valid. Returns 1, 0 for a NaN relevance * factor in a row that needs its k-th value (outputs
 * unspecified: the caller takes the tensors), -1 out of memory. */
int fuse_rows(const double *base, const double *assoc, double w_assoc, const float *sal,
              double w_sal, const uint8_t *valid, const double *importance, const double *d,
              const double *s_term, double beta, double tau, const uint8_t *match, ptrdiff_t k,
              double *rel, float *factor, double *fused, ptrdiff_t n, ptrdiff_t width) {
    /* a row's members' relevance * factor, for its k-th value */
    Cand *kept = match ? malloc(sizeof(Cand) * (size_t)(width + 1)) : NULL;
    int ok = match && !kept ? -1 : 1;
    float ws = (float)w_sal;
    for (ptrdiff_t i = 0; ok == 1 && i < n; i++) {
        ptrdiff_t o = i * width, size = 0;
        double kth = -INFINITY;
        for (ptrdiff_t c = o; c < o + width; c++) {
            double r = base[c];
            if (assoc) r = r + w_assoc * assoc[c];
            if (sal) r = r + (double)(sal[c] * ws);
            rel[c] = r;
            factor[c] = 1.0f;
            if (!importance) continue;
            double im = importance[c], dc = d[c];
            im = im < 0.0 ? 0.0 : (im > 10.0 ? 10.0 : im);
            dc = dc < 0.0 ? 0.0 : (dc > 1.0 ? 1.0 : dc);
            factor[c] = (float)(1.0 + beta * im / 10.0 * dc * s_term[c]);
            if (match && valid[c]) {
                kept[size] = (Cand){r * (double)factor[c], size};
                ok = isnan(kept[size++].v) ? 0 : ok;
            }
        }
        if (size && ok == 1) { /* kept[top - 1] is then the top-th best */
            ptrdiff_t top = k < size ? k : size;
            cand_select(kept, size, top);
            kth = kept[top - 1].v;
        }
        for (ptrdiff_t c = o; importance && c < o + width; c++) {
            double bf = (double)factor[c], lift = 0.0;
            if (match && match[c] && valid[c] && rel[c] * bf * (1.0 + tau) >= kth) lift = 1.0;
            factor[c] = (float)(bf * (1.0 + tau * lift));
        }
        for (ptrdiff_t c = o; c < o + width; c++)
            fused[c] = valid[c] ? rel[c] * (double)factor[c] : -INFINITY;
    }
    free(kept);
    return ok;
}
