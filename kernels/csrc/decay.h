/* The decay law's kernels: plain C over caller-owned arrays, no Python API (bound in
 * kernels/_graph.pyx). The law is kernels/decay.py's, each float64 operation of
 * decayed_numpy in its order (built with -ffp-contract=off), so results are its bits. */
#ifndef SPECTOR_NATIVE_DECAY_H
#define SPECTOR_NATIVE_DECAY_H

#include <stddef.h>
#include <stdint.h>

/* A column of n values `stride` bytes apart (a field of the memory records). */
typedef struct {
    const char *p;
    ptrdiff_t stride;
} Field;

#define FIELD(f, type, i) (*(const type *)((f).p + (ptrdiff_t)(i) * (f).stride))

/* The columns read (weight, d: float32; flags, arousal: uint8; last: int64 ms). */
typedef struct {
    Field weight, flags, arousal, d, last;
} Records;

/* nb ascending bucket edges in seconds (edges[0] == 0) and their factors; decay is frozen
 * for rows with (flags & freeze_set) or without (flags & need_set). */
typedef struct {
    const double *edges, *factors;
    ptrdiff_t nb;
    int freeze_set, need_set;
} Law;

/* The k best allowed rows (allowed NULL: all) of n by v = w / w_div * float32(d * f(bucket)),
 * best first into keys/slots (padding -inf / -1); returns their count. With horizon,
 * *next_change gets the earliest ms (a lower bound) at which an allowed row may change
 * bucket (INT64_MAX: none), and no row is skipped by the bound that prunes otherwise. */
ptrdiff_t decay_topk(const Records *r, ptrdiff_t n, const uint8_t *allowed, const Law *law,
                     int64_t now, double w_div, int horizon, double *keys, int64_t *slots,
                     ptrdiff_t k, int64_t *next_change);

#endif
