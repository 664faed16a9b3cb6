/* Fusion's row kernels: plain C over caller-owned arrays, no Python API (bound in
 * kernels/_fusion.pyx). */
#ifndef SPECTOR_NATIVE_FUSION_H
#define SPECTOR_NATIVE_FUSION_H

#include <stddef.h>

/* Absolute relevance of n pool rows of width W (pathways/recall/relevance.py): with the tensor
 * operations' arithmetic in their order, 1 - (1 - unit(lex / ceiling)) * (1 - unit(dense)),
 * unit(x) = x clipped to [0, 1] (0 when not finite), lex / ceiling = 0 where the ceiling is
 * not > 0. lex and ceiling (both or neither) and dense may be NULL: a relay without scores
 * contributes nothing (neither: zeros). Arrays are row-major (n, W); ceiling is (n,). */
void relevance_rows(const double *lex, const double *dense, const double *ceiling, double *out,
                    ptrdiff_t n, ptrdiff_t width);

#endif
