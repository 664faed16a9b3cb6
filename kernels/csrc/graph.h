/* The association graph's kernels: plain C over caller-owned arrays, no Python API (bound in
 * kernels/_graph.pyx). */
#ifndef SPECTOR_NATIVE_GRAPH_H
#define SPECTOR_NATIVE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

/* Each of n memories' neighbour slots, -1 for none: its chain row (n, cw) at weights chain_w
 * (n, cw) or tw each (chain_w NULL), then, with row_of (n,) non-NULL, its row of extra
 * edges extra (rows, dw) at weights extra_w (rows, dw; NULL where weights are not read). */
typedef struct {
    const int64_t *chain, *row_of, *extra;
    const double *chain_w, *extra_w;
    double tw;
    ptrdiff_t n, cw, rows, dw;
} Links;

/* One query's pool into out (cap): its seeds (c, -1 padding) and every allowed (allowed NULL:
 * all) neighbour of a seed, ascending without repeats. Returns the count (-1: out too small,
 * -2: out of memory); *distinct gets the number of distinct seeds. */
ptrdiff_t pool_expand(const int64_t *seeds, ptrdiff_t c, const Links *l, const uint8_t *allowed,
                      int64_t *out, ptrdiff_t cap, ptrdiff_t *distinct);

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
                double decay, double *out);

#endif
