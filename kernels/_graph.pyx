# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The decay law's and the association graph's native kernels (``csrc/decay.c``,
``csrc/graph.c``), bound by Cython.

Arrays are numpy (any buffer): Cython checks each one's dtype, dimensions and contiguity and
raises ``ValueError`` on a mismatch; shapes and ranges are checked here. Boolean arrays are
read as their bytes. The GIL is released while computing.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t

from .flags import byte_flags

cdef extern from "csrc/decay.c" nogil:
    ctypedef struct Field:
        const char *p
        Py_ssize_t stride
    ctypedef struct Records:
        Field weight, flags, arousal, d, last
    ctypedef struct Law:
        const double *edges
        const double *factors
        Py_ssize_t nb
        int freeze_set, need_set
    Py_ssize_t bucket(int64_t now, int64_t last, double denom, const Law *law)
    void prefetch "__builtin_prefetch"(const void *p)
    Py_ssize_t c_decay_topk "decay_topk"(
        const Records *r, Py_ssize_t n, const uint8_t *allowed, const Law *law, int64_t now,
        double w_div, int horizon, double *keys, int64_t *slots, Py_ssize_t k,
        int64_t *next_change)

cdef extern from "csrc/graph.c" nogil:
    ctypedef struct Links:
        const int64_t *chain
        const int64_t *row_of
        const int64_t *extra
        const double *chain_w
        const double *extra_w
        double tw
        Py_ssize_t n, cw, rows, dw
    Py_ssize_t c_pool_expand "pool_expand"(
        const int64_t *seeds, Py_ssize_t c, const Links *l, const uint8_t *allowed,
        int64_t *out, Py_ssize_t cap, Py_ssize_t *distinct)
    int c_spread_rows "spread_rows"(
        const Links *l, const int64_t *pool, const uint8_t *valid, int32_t *table,
        int64_t size, const double *base, Py_ssize_t m, Py_ssize_t width, int hops,
        double decay, double *out)


ctypedef fused item:
    float
    uint8_t
    int64_t


cdef Field _field(const item[:] x, Py_ssize_t n, str name) except *:
    """One (strided) column of n values."""
    if x.shape[0] != n:
        raise ValueError(f"{name} must have n = {n} rows, got {x.shape[0]}")
    cdef Field f
    f.p = <const char *>&x[0]
    f.stride = x.strides[0]
    return f


cdef Law _law(const double[::1] edges, const double[::1] factors, int freeze_set,
              int need_set) except *:
    if edges.shape[0] < 1 or factors.shape[0] != edges.shape[0]:
        raise ValueError("the decay law needs bucket edges and one factor per edge")
    cdef Law law
    law.edges = &edges[0]
    law.factors = &factors[0]
    law.nb = edges.shape[0]
    law.freeze_set = freeze_set
    law.need_set = need_set
    return law


def decay_topk(
    Py_ssize_t n,
    int64_t now,
    double w_div,
    const float[:] weight not None,
    const uint8_t[:] flags not None,
    const uint8_t[:] arousal not None,
    const float[:] d_event not None,
    const int64_t[:] last_ms not None,
    allowed,
    int freeze_set,
    int need_set,
    const double[::1] edges not None,
    const double[::1] factors not None,
    double[::1] out_keys not None,
    int64_t[::1] out_slots not None,
    bint horizon=False,
):
    """The k = len(out_keys) best allowed rows of n by weight / w_div * D now (kernels/decay.py),
    best first into out_keys / out_slots (padding -inf / -1). The columns may be strided (fields
    of the records); allowed: bool (n,) or None. Returns the count, and with ``horizon`` also
    the earliest ms at which a row may change bucket: ``(count, ms)``."""
    cdef Records r
    r.weight = _field(weight, n, "weight")
    r.flags = _field(flags, n, "flags")
    r.arousal = _field(arousal, n, "arousal")
    r.d = _field(d_event, n, "d_event")
    r.last = _field(last_ms, n, "last_ms")
    cdef Law law = _law(edges, factors, freeze_set, need_set)
    cdef Py_ssize_t k = out_keys.shape[0]
    if k < 1 or out_slots.shape[0] != k:
        raise ValueError("decay_topk: k = len(out_keys) must be >= 1, out_slots as long")
    cdef const uint8_t[::1] ok = byte_flags(allowed, "allowed")
    cdef const uint8_t *ap = NULL
    if ok is not None:
        if ok.shape[0] != n:
            raise ValueError(f"allowed must have n = {n} rows, got {ok.shape[0]}")
        ap = &ok[0] if n else NULL
    cdef int64_t nxt = 0
    cdef Py_ssize_t count
    with nogil:
        count = c_decay_topk(&r, n, ap, &law, now, w_div, horizon, &out_keys[0], &out_slots[0],
                             k, &nxt)
    if horizon:
        return count, nxt
    return count


def pool_columns(
    Py_ssize_t n,
    int64_t now,
    const int64_t[::1] ordinals not None,
    const float[:] importance not None,
    const uint8_t[:] flags not None,
    const uint8_t[:] arousal not None,
    const int64_t[:] formed_ms not None,
    const float[:] d_event not None,
    const int64_t[:] last_ms not None,
    const float[:] storage not None,
    int freeze_set,
    int need_set,
    const double[::1] edges not None,
    const double[::1] factors not None,
    float[::1] out_importance not None,
    uint8_t[::1] out_flags not None,
    uint8_t[::1] out_arousal not None,
    int64_t[::1] out_formed_ms not None,
    float[::1] out_d_event not None,
    int64_t[::1] out_last_ms not None,
    float[::1] out_storage not None,
    double[::1] out_d_now not None,
) -> None:
    """The columns recall reads for m pool members (``ordinals`` int64, each in [0, n)) and
    their D now (kernels/decay.py's law at ``now``, the bits of ``decayed_numpy``, as
    float64), each member's record read once, into the eight (m,) outputs. The columns may be
    strided (fields of the records)."""
    cdef Field f_imp = _field(importance, n, "importance"), f_fl = _field(flags, n, "flags")
    cdef Field f_ar = _field(arousal, n, "arousal"), f_fo = _field(formed_ms, n, "formed_ms")
    cdef Field f_d = _field(d_event, n, "d_event"), f_la = _field(last_ms, n, "last_ms")
    cdef Field f_st = _field(storage, n, "storage")
    cdef Law law = _law(edges, factors, freeze_set, need_set)
    cdef Py_ssize_t m = ordinals.shape[0], j, b
    for name, got in (("out_importance", out_importance.shape[0]),
                      ("out_flags", out_flags.shape[0]), ("out_arousal", out_arousal.shape[0]),
                      ("out_formed_ms", out_formed_ms.shape[0]),
                      ("out_d_event", out_d_event.shape[0]),
                      ("out_last_ms", out_last_ms.shape[0]),
                      ("out_storage", out_storage.shape[0]), ("out_d_now", out_d_now.shape[0])):
        if got != m:
            raise ValueError(f"pool_columns: {name} must have m = {m} items, got {got}")
    for j in range(m):
        if not 0 <= ordinals[j] < n:
            raise ValueError(f"pool_columns: ordinal {ordinals[j]} is outside [0, {n})")
    cdef int64_t i, last
    cdef uint8_t fl, ar
    cdef float d0
    cdef double denom[256]
    for j in range(256):
        denom[j] = 1.0 + <double>j / 255.0
    with nogil:
        for j in range(m):
            if j + 16 < m:  # the loop is memory-bound: fetch the lines of a later member
                i = ordinals[j + 16]
                prefetch(f_imp.p + i * f_imp.stride)
                prefetch(f_d.p + i * f_d.stride)
                prefetch(f_la.p + i * f_la.stride)
                prefetch(f_st.p + i * f_st.stride)
            i = ordinals[j]
            fl = (<const uint8_t *>(f_fl.p + i * f_fl.stride))[0]
            ar = (<const uint8_t *>(f_ar.p + i * f_ar.stride))[0]
            d0 = (<const float *>(f_d.p + i * f_d.stride))[0]
            last = (<const int64_t *>(f_la.p + i * f_la.stride))[0]
            out_importance[j] = (<const float *>(f_imp.p + i * f_imp.stride))[0]
            out_formed_ms[j] = (<const int64_t *>(f_fo.p + i * f_fo.stride))[0]
            out_storage[j] = (<const float *>(f_st.p + i * f_st.stride))[0]
            out_flags[j], out_arousal[j], out_d_event[j], out_last_ms[j] = fl, ar, d0, last
            if (fl & law.freeze_set) or not (fl & law.need_set):  # frozen: no decay
                out_d_now[j] = <double>(<float>(<double>d0 * 1.0))
            else:
                b = bucket(now, last, denom[ar], &law)
                out_d_now[j] = <double>(<float>(<double>d0 * law.factors[b]))


cdef Links _links(const int64_t[:, ::1] chain, row_of, extra, extra_w, double tw) except *:
    """The link tables (row_of None: no extra edges; extra_w None: their weights unread)."""
    cdef Links l
    l.chain = &chain[0, 0] if chain.shape[0] and chain.shape[1] else NULL
    l.n = chain.shape[0]
    l.cw = chain.shape[1]
    l.chain_w = NULL
    l.tw = tw
    l.row_of = NULL
    l.extra = NULL
    l.extra_w = NULL
    l.rows = l.dw = 0
    if row_of is None:
        return l
    if extra is None:
        raise ValueError("extra (R, D) comes with row_of")
    cdef const int64_t[::1] ro = row_of
    cdef const int64_t[:, ::1] ex = extra
    if ro.shape[0] != l.n:
        raise ValueError(f"row_of must have N = {l.n} rows like chain, got {ro.shape[0]}")
    l.rows = ex.shape[0]
    l.dw = ex.shape[1]
    l.row_of = &ro[0] if l.n else NULL
    l.extra = &ex[0, 0] if l.rows and l.dw else NULL
    if l.extra == NULL:
        l.rows = 0
    cdef const double[:, ::1] ew
    if extra_w is not None:
        ew = extra_w
        if ew.shape[0] != ex.shape[0] or ew.shape[1] != ex.shape[1]:
            raise ValueError("extra_w must be (R, D) like extra")
        l.extra_w = &ew[0, 0] if l.rows else NULL
    return l


def pool_expand(
    const int64_t[::1] seeds not None,
    const int64_t[:, ::1] chain not None,
    row_of,
    extra,
    allowed,
    int64_t[::1] out not None,
):
    """One query's pool: its seeds (int64, -1 padding) and every allowed neighbour of a seed
    (chain (N, C), then row_of (N,) | None into extra (R, D); allowed bool (N,) | None) into
    out, ascending without repeats. Returns ``(distinct seeds, count)``."""
    cdef Links l = _links(chain, row_of, extra, None, 0.0)
    cdef const uint8_t[::1] ok = byte_flags(allowed, "allowed")
    cdef const uint8_t *ap = NULL
    if ok is not None:
        if ok.shape[0] != l.n:
            raise ValueError(f"allowed must have N = {l.n} rows like chain, got {ok.shape[0]}")
        ap = &ok[0] if l.n else NULL
    cdef Py_ssize_t distinct = 0, count
    cdef Py_ssize_t c = seeds.shape[0], cap = out.shape[0]
    cdef const int64_t *sp = &seeds[0] if c else NULL
    cdef int64_t *op = &out[0] if cap else NULL
    with nogil:
        count = c_pool_expand(sp, c, &l, ap, op, cap, &distinct)
    if count == -1:
        raise ValueError("pool_expand: out is too small")
    if count == -2:
        raise MemoryError()
    return distinct, count


cdef int _spread(const Links *l, const int64_t *pool, const uint8_t *valid, int32_t *table,
                 int64_t size, const double[:, ::1] base, int hops, double decay,
                 double[:, ::1] out) except -1:
    """spread_rows over base's rows into out (1 done, 0 declined)."""
    cdef Py_ssize_t m = base.shape[0], width = base.shape[1]
    if out.shape[0] != m or out.shape[1] != width:
        raise ValueError("out must be shaped like base")
    if not (m and width):
        return 1
    cdef int done
    with nogil:
        done = c_spread_rows(l, pool, valid, table, size, &base[0, 0], m, width, hops, decay,
                             &out[0, 0])
    if done < 0:
        raise MemoryError()
    return done


def spread_dense(
    const int64_t[:, ::1] nbr not None,
    const double[:, ::1] weight not None,
    valid,
    const double[:, ::1] base not None,
    int hops,
    double decay,
    double[:, ::1] out not None,
) -> bool:
    """The dense pool layout's spreading (every row holds the whole store: base (m, N),
    valid bool (m, N) its members; nbr int64 (N, E), -1 for none, at weight float64 (N, E))
    into out (m, N); False where it declines (``csrc/graph.c``)."""
    cdef Py_ssize_t n = base.shape[1], t, r
    if nbr.shape[0] != n or weight.shape[0] != n or weight.shape[1] != nbr.shape[1]:
        raise ValueError("spread_dense: nbr and weight must be (N, E) for base (m, N)")
    if valid is None:
        raise ValueError("spread_dense: valid (m, N) is required")
    cdef const uint8_t[:, ::1] member = byte_flags(valid, "valid")
    if member.shape[0] != base.shape[0] or member.shape[1] != n:
        raise ValueError("spread_dense: valid must be (m, N) like base")
    for r in range(n):
        for t in range(nbr.shape[1]):
            if nbr[r, t] < -1 or nbr[r, t] >= n:
                raise ValueError(f"spread_dense: neighbour {nbr[r, t]} is outside [-1, N = {n})")
    cdef Links l = _links(nbr, None, None, None, 0.0)
    l.chain_w = &weight[0, 0] if n and nbr.shape[1] else NULL
    return bool(_spread(&l, NULL, &member[0, 0] if n and base.shape[0] else NULL, NULL, 0,
                        base, hops, decay, out))


def spread_tables(
    const int64_t[:, ::1] pool not None,
    const int64_t[:, ::1] chain not None,
    row_of,
    extra,
    extra_w,
    double temporal_weight,
    const double[:, ::1] base not None,
    int hops,
    double decay,
    int32_t[::1] table not None,
    double[:, ::1] out not None,
) -> bool:
    """Spreading over pool rows (int64 (n, W) ordinals ascending, padding above every one)
    with each member's neighbour slots read from the link tables: its chain row (N, C) at
    temporal_weight, then its extra-edge row (row_of (N,) into extra (R, D) at extra_w,
    float64; all three None without extra edges). ``table``: int32, -1 everywhere (left so).
    False where it declines (``csrc/graph.c``)."""
    if pool.shape[0] != base.shape[0] or pool.shape[1] != base.shape[1]:
        raise ValueError("spread_tables: pool must be (n, W) like base")
    if row_of is not None and extra_w is None:
        raise ValueError("spread_tables: extra_w comes with row_of and extra")
    cdef Links l = _links(chain, row_of, extra, extra_w, temporal_weight)
    return bool(_spread(&l, &pool[0, 0] if pool.shape[0] and pool.shape[1] else NULL, NULL,
                        &table[0] if table.shape[0] else NULL, table.shape[0], base, hops,
                        decay, out))
