/* The decay law's kernels (see decay.h). */
#include "decay.h"

#include "select.h"

#include <math.h>

static void denoms(double denom[256]) { /* the arousal divisors 1 + a / 255 */
    for (int a = 0; a < 256; a++) denom[a] = 1.0 + (double)a / 255.0;
}

/* The bucket of a row last touched at `last`: the last edge its age in seconds reaches. */
static inline ptrdiff_t bucket(int64_t now, int64_t last, double denom, const Law *law) {
    int64_t dt = now - last;
    double t = (double)(dt > 0 ? dt : 0) / 1000.0;
    t = t / denom;
    ptrdiff_t b = 0;
    for (ptrdiff_t e = 1; e < law->nb; e++) b += law->edges[e] <= t;
    return b;
}

static inline int frozen(const Law *law, uint8_t fl) {
    return (fl & law->freeze_set) || !(fl & law->need_set);
}

ptrdiff_t decay_topk(const Records *r, ptrdiff_t n, const uint8_t *allowed, const Law *law,
                     int64_t now, double w_div, int horizon, double *keys, int64_t *slots,
                     ptrdiff_t k, int64_t *next_change) {
    double denom[256];
    denoms(denom);
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
        int still = frozen(law, FIELD(r->flags, uint8_t, i));
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

void pool_columns(const Records *r, const int64_t *idx, ptrdiff_t m, const Law *law,
                  int64_t now, void *const out[8]) {
    float *o_w = out[0], *o_d = out[3], *o_s = out[5];
    uint8_t *o_f = out[1], *o_a = out[2];
    int64_t *o_l = out[4], *o_t = out[6];
    double *o_now = out[7], denom[256];
    denoms(denom);
    for (ptrdiff_t j = 0; j < m; j++) {
        int64_t i = idx[j];
        uint8_t fl = FIELD(r->flags, uint8_t, i), ar = FIELD(r->arousal, uint8_t, i);
        float d0 = FIELD(r->d, float, i);
        int64_t at = FIELD(r->last, int64_t, i);
        o_w[j] = FIELD(r->weight, float, i);
        o_f[j] = fl, o_a[j] = ar, o_d[j] = d0, o_l[j] = at;
        o_s[j] = FIELD(r->storage, float, i);
        o_t[j] = FIELD(r->formed, int64_t, i);
        double f = frozen(law, fl) ? 1.0 : law->factors[bucket(now, at, denom[ar], law)];
        o_now[j] = (double)(float)((double)d0 * f);
    }
}
