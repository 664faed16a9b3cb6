/* Fusion's row kernels (see fusion.h). Built with -ffp-contract=off: each result equals the
 * torch operations' bits. */
#include "fusion.h"

#include <math.h>

static double unit(double x) { return isfinite(x) ? (x < 0.0 ? 0.0 : (x > 1.0 ? 1.0 : x)) : 0.0; }

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
