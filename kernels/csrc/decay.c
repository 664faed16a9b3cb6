/* The decay law's kernels: plain C over caller-owned arrays, no Python API (bound in
 * kernels/_graph.pyx). The law is kernels/decay.py's, each float64 operation of decayed_numpy
 * in its order (built with -ffp-contract=off), so results are its bits. */
#include "select.h"

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

/* The bucket of a row last touched at `last`: the last edge its age in seconds reaches. */
static inline ptrdiff_t bucket(int64_t now, int64_t last, double denom, const Law *law) {
    int64_t dt = now - last;
    double t = (double)(dt > 0 ? dt : 0) / 1000.0;
    t = t / denom;
    ptrdiff_t b = 0;
    for (ptrdiff_t e = 1; e < law->nb; e++) b += law->edges[e] <= t;
    return b;
}

/* The k best allowed rows (allowed NULL: all) of n by v = w / w_div * float32(d * f(bucket)),
 * best first into keys/slots (padding -inf / -1); returns their count. With horizon,
 * *next_change gets the earliest ms (a lower bound) at which an allowed row may change
 * bucket (INT64_MAX: none), and no row is skipped by the bound that prunes otherwise. */
ptrdiff_t decay_topk(const Records *r, ptrdiff_t n, const uint8_t *allowed, const Law *law,
                     int64_t now, double w_div, int horizon, double *keys, int64_t *slots,
                     ptrdiff_t k, int64_t *next_change) {
    double denom[256]; /* the arousal divisors 1 + a / 255 */
    for (int a = 0; a < 256; a++) denom[a] = 1.0 + (double)a / 255.0;
    /* v <= (w / div) * d when no factor exceeds 1: once the heap is full, a row whose bound
     * does not beat the root cannot enter (rows rise, so a tie never does) */
    int bounded = !horizon;
    for (ptrdiff_t e = 0; e < law->nb; e++) bounded &= law->factors[e] <= 1.0;
    ptrdiff_t size = 0;
    int64_t next = INT64_MAX;
    for (ptrdiff_t i = 0; i < n; i++) {
        if (allowed && !allowed[i]) continue;
        double scaled = (double)FIELD(r->weight, float, i) / w_div;
        float d0 = FIELD(r->d, float, i);
        if (bounded && scaled >= 0.0 && size == k && !(scaled * (double)d0 > keys[0])) continue;
        int64_t last = FIELD(r->last, int64_t, i);
        double dn = denom[FIELD(r->arousal, uint8_t, i)];
        ptrdiff_t b = bucket(now, last, dn, law);
        uint8_t fl = FIELD(r->flags, uint8_t, i);
        int still = (fl & law->freeze_set) || !(fl & law->need_set); /* frozen: no decay */
        if (horizon && !still && b + 1 < law->nb) {
            /* t reaches the next edge near last + edge * 1000 * denom ms; 2 ms early covers
             * the rounding of the exact test */
            double at = (double)last + law->edges[b + 1] * 1000.0 * dn - 2.0;
            if (at < (double)next) next = at < -9e18 ? INT64_MIN : (int64_t)at;
        }
        float dnow = (float)((double)d0 * (still ? 1.0 : law->factors[b]));
        double v = scaled * (double)dnow;
        if (size == k && !(v > keys[0])) continue;
        offer(keys, slots, k, &size, v, (int64_t)i);
    }
    heap_sort(keys, slots, size);
    for (ptrdiff_t i = size; i < k; i++) keys[i] = -INFINITY, slots[i] = -1;
    if (next_change) *next_change = next;
    return size;
}
