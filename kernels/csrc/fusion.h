/* Fusion's row kernels: plain C over caller-owned arrays, no Python API (bound in
 * kernels/_fusion.pyx). */
#ifndef SPECTOR_NATIVE_FUSION_H
#define SPECTOR_NATIVE_FUSION_H

#include <stddef.h>
#include <stdint.h>

/* Absolute relevance of n pool rows of width W (pathways/recall/relevance.py): with the tensor
 * operations' arithmetic in their order, 1 - (1 - unit(lex / ceiling)) * (1 - unit(dense)),
 * unit(x) = x clipped to [0, 1] (0 when not finite), lex / ceiling = 0 where the ceiling is
 * not > 0. lex and ceiling (both or neither) and dense may be NULL: a relay without scores
 * contributes nothing (neither: zeros). Arrays are row-major (n, W); ceiling is (n,). */
void relevance_rows(const double *lex, const double *dense, const double *ceiling, double *out,
                    ptrdiff_t n, ptrdiff_t width);

/* Each row of x (n, W) min-max normalised over its valid finite entries into out (float32):
 * (x - lo) / (hi - lo) in float64 rounded to float32; 0 for the rest, and for every entry of a
 * row without two different finite members. */
void minmax_rows(const double *x, const uint8_t *valid, float *out, ptrdiff_t n, ptrdiff_t width);

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
              double *rel, float *factor, double *fused, ptrdiff_t n, ptrdiff_t width);

#endif
