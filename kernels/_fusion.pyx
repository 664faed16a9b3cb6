# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Fusion's native row kernels (``csrc/fusion.c``), bound by Cython, and the row passes written
here in Cython's typed loops: the session relay's (``session_lift_rows``), the pool masks'
(``top_mask_rows``) and the final top-k's (``rows_top_sorted``), the last two selecting each
row's k-th value by a quickselect over the values alone (``_kth``).

Arrays are numpy (any buffer): Cython checks each one's dtype, dimensions and contiguity and
raises ``ValueError`` on a mismatch; the shapes are checked here. The GIL is released while
computing.
"""

from libc.math cimport INFINITY, isfinite
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

import numpy as np

from .flags import byte_flags

cdef extern from "csrc/fusion.c" nogil:
    void c_relevance_rows "relevance_rows"(
        const double *lex, const double *dense, const double *ceiling, double *out,
        Py_ssize_t n, Py_ssize_t width)
    void c_minmax_rows "minmax_rows"(
        const double *x, const uint8_t *valid, float *out, Py_ssize_t n, Py_ssize_t width)
    int c_fuse_rows "fuse_rows"(
        const double *base, const double *assoc, double w_assoc, const float *sal,
        double w_sal, const uint8_t *valid, const double *importance, const double *d,
        const double *s_term, double beta, double tau, const uint8_t *match, Py_ssize_t k,
        double *rel, float *factor, double *fused, Py_ssize_t n, Py_ssize_t width)
    ctypedef struct Rank:
        double score
        int64_t ordinal, at
    void rank_sort(Rank *rank, Py_ssize_t c)


def relevance_rows(
    const double[:, ::1] lex,
    const double[:, ::1] dense,
    const double[::1] ceiling,
    double[:, ::1] out not None,
) -> None:
    """Absolute relevance of pool rows into ``out`` (n, W) float64 from the raw lexical
    (n, W) and dense (n, W) scores and each row's lexical ceiling (n,): ``lex`` and
    ``ceiling`` both or neither (None), ``dense`` or None (see ``csrc/fusion.c``)."""
    cdef Py_ssize_t n = out.shape[0], width = out.shape[1]
    if (lex is None) != (ceiling is None):
        raise ValueError("relevance_rows: lex and ceiling come together")
    if lex is not None and (lex.shape[0] != n or lex.shape[1] != width or ceiling.shape[0] != n):
        raise ValueError("relevance_rows: lex must be (n, W) and ceiling (n,) like out")
    if dense is not None and (dense.shape[0] != n or dense.shape[1] != width):
        raise ValueError("relevance_rows: dense must be (n, W) like out")
    cdef const double *lp = NULL
    cdef const double *cp = NULL
    cdef const double *dp = NULL
    if lex is not None and n and width:
        lp = &lex[0, 0]
        cp = &ceiling[0]
    if dense is not None and n and width:
        dp = &dense[0, 0]
    if not (n and width):
        return
    with nogil:
        c_relevance_rows(lp, dp, cp, &out[0, 0], n, width)


def _rows(const double[:, ::1] a, str name, Py_ssize_t n, Py_ssize_t width):
    if a is not None and (a.shape[0] != n or a.shape[1] != width):
        raise ValueError(f"{name} must be ({n}, {width}) like base")


def minmax_rows(const double[:, ::1] x not None, valid, float[:, ::1] out not None) -> None:
    """Each row of ``x`` (n, W) float64 min-max normalised over its ``valid`` (bool (n, W))
    finite entries into ``out`` (n, W) float32 (see ``csrc/fusion.c``)."""
    cdef Py_ssize_t n = x.shape[0], width = x.shape[1]
    cdef const uint8_t[:, ::1] ok = byte_flags(valid, "valid", shape=(n, width), bool_only=True)
    if ok is None or out.shape[0] != n or out.shape[1] != width:
        raise ValueError("minmax_rows: valid and out must be (n, W) like x")
    if not (n and width):
        return
    with nogil:
        c_minmax_rows(&x[0, 0], &ok[0, 0], &out[0, 0], n, width)


def fuse_rows(
    const double[:, ::1] base not None,
    const double[:, ::1] assoc,
    double w_assoc,
    const float[:, ::1] sal,
    double w_sal,
    valid,
    bint cognitive,
    const double[:, ::1] importance,
    const double[:, ::1] d,
    const double[:, ::1] s_term,
    double beta,
    double tau,
    match,
    Py_ssize_t k,
    double[:, ::1] out_rel not None,
    float[:, ::1] out_factor not None,
    double[:, ::1] out_fused not None,
) -> bool:
    """Fusion after the base and the association, one pass per row (``csrc/fusion.c``):
    every array (n, W) like ``base``; ``assoc``, ``sal`` (float32) and ``match`` (bool) may be
    None, ``importance``, ``d``, ``s_term`` are read in ``cognitive`` mode only. False where
    it declines (a NaN that the k-th value needs: the caller takes the tensors)."""
    cdef Py_ssize_t n = base.shape[0], width = base.shape[1]
    if k < 1:
        raise ValueError("fuse_rows: k must be >= 1")
    _rows(assoc, "assoc", n, width)
    if sal is not None and (sal.shape[0] != n or sal.shape[1] != width):
        raise ValueError(f"sal must be ({n}, {width}) like base")
    for name, a in (("out_rel", out_rel), ("out_fused", out_fused)):
        _rows(a, name, n, width)
    if out_factor.shape[0] != n or out_factor.shape[1] != width:
        raise ValueError(f"out_factor must be ({n}, {width}) like base")
    cdef const uint8_t[:, ::1] ok = byte_flags(valid, "valid", shape=(n, width), bool_only=True)
    cdef const uint8_t[:, ::1] mk = byte_flags(match, "match", shape=(n, width), bool_only=True)
    if ok is None:
        raise ValueError("fuse_rows: valid is required")
    if cognitive:
        if importance is None or d is None or s_term is None:
            raise ValueError("fuse_rows: cognitive mode needs importance, d and s_term")
        _rows(importance, "importance", n, width)
        _rows(d, "d", n, width)
        _rows(s_term, "s_term", n, width)
    if not (n and width):
        return True
    cdef const double *ap = &assoc[0, 0] if assoc is not None else NULL
    cdef const float *sp = &sal[0, 0] if sal is not None else NULL
    cdef const uint8_t *mp = &mk[0, 0] if mk is not None else NULL
    cdef const double *ip = &importance[0, 0] if cognitive else NULL
    cdef const double *dp = &d[0, 0] if cognitive else NULL
    cdef const double *tp = &s_term[0, 0] if cognitive else NULL
    cdef int done
    with nogil:
        done = c_fuse_rows(&base[0, 0], ap, w_assoc, sp, w_sal, &ok[0, 0], ip, dp, tp, beta, tau,
                           mp, k, &out_rel[0, 0], &out_factor[0, 0], &out_fused[0, 0], n, width)
    if done < 0:
        raise MemoryError()
    return done == 1


cdef double _kth(double *a, double *b, double *c, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    """The k-th largest (1 <= k <= n) of a[0..n) (no NaN), by quickselect over the values
    alone: each round takes a median-of-three pivot and copies the values above it and those
    below it to two other buffers in one branch-free pass (which side a value falls is
    random), then goes on in the part holding the k-th (b and c: scratch of n; any of the
    three is overwritten)."""
    cdef Py_ssize_t want = k - 1, i, up, down
    cdef double p, q, r, pivot, x
    while n > 1:
        p, q, r = a[0], a[n // 2], a[n - 1]
        pivot = max(min(p, q), min(max(p, q), r))  # one of the values: each round shrinks
        up = down = 0
        for i in range(n):
            x = a[i]
            b[up] = x
            c[down] = x
            up += x > pivot
            down += x < pivot
        if want < up:
            n = up
            a, b = b, a
        elif want < n - down:
            return pivot  # among the values equal to it
        else:
            want -= n - down
            n = down
            a, c = c, a
    return a[0]


def top_mask_rows(x not None, valid, Py_ssize_t take, mask not None) -> bool:
    """Flag in ``mask`` (bool (n, W)) the ``take`` best live entries of each row of ``x``
    (float32 or float64 (n, W); live: ``valid`` (bool (n, W)) and above -inf; value
    descending, column ascending), every live entry of a row holding at most ``take``
    (kernels/selection.topk_mask): the entries above the row's take-th value, then those
    equal to it from the lowest column. False where it declines (a valid NaN: the caller
    keeps torch's order)."""
    cdef Py_ssize_t n = x.shape[0] if x.ndim == 2 else -1, width = x.shape[x.ndim - 1]
    if n < 0 or take < 1:
        raise ValueError("top_mask_rows: x must be (n, W) and take >= 1")
    cdef const float[:, ::1] xf = x if x.dtype == np.float32 else None
    cdef const double[:, ::1] xd = None if x.dtype == np.float32 else x
    cdef const uint8_t[:, ::1] ok = byte_flags(valid, "valid", shape=(n, width), bool_only=True)
    cdef uint8_t[:, ::1] out = byte_flags(mask, "mask", shape=(n, width), bool_only=True)
    if ok is None:
        raise ValueError("top_mask_rows: valid is required")
    if not (n and width):
        return True
    cdef double[::1] row = np.empty(width, dtype=np.float64)
    cdef double[::1] buf = np.empty(3 * width, dtype=np.float64)  # _kth's three buffers
    cdef Py_ssize_t r, c, live, need
    cdef double v, kth
    cdef bint f32 = xf is not None, nan = False, flag
    with nogil:  # (branch-free passes: a live entry's side of the take-th value is random)
        for r in range(n):
            live = 0
            for c in range(width):
                v = <double>xf[r, c] if f32 else xd[r, c]
                row[c] = v
                nan |= (ok[r, c] != 0) & (v != v)
                flag = (ok[r, c] != 0) & (v > -INFINITY)
                out[r, c] = flag
                buf[live] = v
                live += flag
            if nan:
                break
            if live <= take:
                continue
            kth = _kth(&buf[0], &buf[width], &buf[2 * width], live, take)
            need = take
            for c in range(width):  # the entries above it kept, those equal to it marked 2
                flag = (out[r, c] != 0) & (row[c] > kth)
                need -= flag
                out[r, c] = flag | (((out[r, c] != 0) & (row[c] == kth)) << 1)
            for c in range(width):  # then the equal ones, from the lowest column
                if out[r, c] == 2:
                    out[r, c] = need > 0
                    need -= need > 0
    return not nan

cdef inline void _spread(const double *x, Py_ssize_t c, double *out) noexcept nogil:
    """x[0..c) min-max normalised into out (0 everywhere without two different values)."""
    cdef double lo = INFINITY, hi = -INFINITY, width
    cdef Py_ssize_t m
    for m in range(c):
        lo = x[m] if x[m] < lo else lo
        hi = x[m] if x[m] > hi else hi
    width = hi - lo
    for m in range(c):
        out[m] = (x[m] - lo) / width if width > 0 else 0.0


def session_lift_rows(const float[:, ::1] fused not None, const int32_t[::1] counts not None,
                      const int64_t[:, ::1] ordinals not None, const double[:, ::1] dense not None,
                      const int64_t[:, ::1] session not None, turn not None, double weight,
                      int64_t[:, ::1] out_order not None, float[:, ::1] out_fused not None,
                      double[:, ::1] out_lift not None) -> bool:
    """The session relay (pathways/recall/session_lift.py) over n rows of width W, each listing
    its first ``counts[i]`` members (ordinals >= 0, -1 past the count): each member's lift is
    the best ``dense`` score of the listed turns (``turn`` bool (n, W)) of its ``session`` in
    the row, or its own ``dense`` score when it is no turn (0 past the count, into
    ``out_lift``); the members are then ordered by minmax(fused) + weight * minmax(lift), ties
    to the lower ordinal: ``out_order`` the positions into the row (the identity past the
    count), ``out_fused`` float32 those scores in that order (the input past the count).
    The numpy twin's arithmetic in its order, so the same bits. False, with the outputs
    unspecified, where the twin must decide: a listed fused or dense score that is not finite,
    a row whose ordinals are not its count's, or a weight that is not finite."""
    fn = "session_lift_rows"
    cdef Py_ssize_t n = fused.shape[0], w = fused.shape[1], i, m, c, h, cap = 16
    for name, a in (("ordinals", ordinals), ("dense", dense), ("session", session),
                    ("out_order", out_order), ("out_fused", out_fused), ("out_lift", out_lift)):
        if a.shape[0] != n or a.shape[1] != w:
            raise ValueError(f"{fn}: {name} must be (n, W) like fused")
    if counts.shape[0] != n:
        raise ValueError(f"{fn}: counts must be (n,) like fused's rows")
    cdef const uint8_t[:, ::1] is_turn = byte_flags(turn, f"{fn}: turn", shape=(n, w),
                                                    bool_only=True)
    if not isfinite(weight):
        return False
    for i in range(n):
        if counts[i] < 0 or counts[i] > w:
            raise ValueError(f"{fn}: counts[{i}] = {counts[i]} is outside [0, {w}]")
    if n == 0 or w == 0:
        return True
    while cap < 2 * w:
        cap *= 2
    cdef int shift = 64
    h = cap
    while h > 1:
        h //= 2
        shift -= 1
    # each row's sessions: an open-addressing table of cap slots, a slot live in row i when
    # its stamp is i + 1 (nothing is cleared between rows)
    cdef int64_t[::1] key = np.empty(cap, dtype=np.int64)
    cdef int64_t[::1] stamp = np.zeros(cap, dtype=np.int64)
    cdef double[::1] best = np.empty(cap, dtype=np.float64)
    cdef int64_t[::1] slot = np.empty(w, dtype=np.int64)
    cdef double[::1] x = np.empty(w, dtype=np.float64)
    cdef double[::1] sf = np.empty(w, dtype=np.float64)
    cdef double[::1] sl = np.empty(w, dtype=np.float64)
    cdef Rank[::1] rank = np.empty(w, dtype=[("s", np.float64), ("o", np.int64), ("a", np.int64)])
    cdef int64_t s
    cdef double d
    cdef bint ok = True
    with nogil:
        for i in range(n):
            c = counts[i]
            for m in range(w):
                if (ordinals[i, m] >= 0) != (m < c) or (m < c and not (
                        isfinite(fused[i, m]) and isfinite(dense[i, m]))):
                    ok = False
            if not ok:
                break
            for m in range(c):  # each turn's session slot, holding the session's best
                slot[m] = -1
                if not is_turn[i, m]:
                    continue
                s, d = session[i, m], dense[i, m]
                h = <Py_ssize_t>((<uint64_t>s * <uint64_t>0x9E3779B97F4A7C15) >> shift)
                while stamp[h] == i + 1 and key[h] != s:
                    h = (h + 1) & (cap - 1)
                if stamp[h] != i + 1:
                    stamp[h], key[h], best[h] = i + 1, s, d
                elif d > best[h]:
                    best[h] = d
                slot[m] = h
            for m in range(w):
                out_lift[i, m] = 0.0 if m >= c else (
                    best[slot[m]] if slot[m] >= 0 else dense[i, m])
                x[m] = <double>fused[i, m]
            _spread(&x[0], c, &sf[0])
            _spread(&out_lift[i, 0], c, &sl[0])
            for m in range(c):
                rank[m].score = sf[m] + weight * sl[m]
                rank[m].ordinal, rank[m].at = ordinals[i, m], m
            rank_sort(&rank[0], c)  # (csrc/select.h: the token relay's order too)
            for m in range(w):
                out_order[i, m] = rank[m].at if m < c else m
                out_fused[i, m] = <float>rank[m].score if m < c else fused[i, m]
    return ok


cdef void _sort_desc(double *v, int64_t *s, double *tv, int64_t *ts, Py_ssize_t m) noexcept nogil:
    """v[0..m) into descending order, stably (equal values keep their order), the slots s
    alongside: a bottom-up merge sort, each merge step branch-free; tv, ts: scratch of m."""
    cdef Py_ssize_t w = 1, i, j, l, r, le, re, o
    cdef double *a = v
    cdef double *b = tv
    cdef int64_t *sa = s
    cdef int64_t *sb = ts
    cdef bint left
    while w < m:
        i = 0
        while i < m:
            l, le = i, min(i + w, m)
            r, re, o = le, min(i + 2 * w, m), i
            while l < le and r < re:
                left = a[l] >= a[r]
                j = r + left * (l - r)  # (an index, not a branch: which side wins is random)
                b[o], sb[o] = a[j], sa[j]
                l += left
                r += not left
                o += 1
            while l < le:
                b[o], sb[o] = a[l], sa[l]
                l += 1
                o += 1
            while r < re:
                b[o], sb[o] = a[r], sa[r]
                r += 1
                o += 1
            i += 2 * w
        a, b = b, a
        sa, sb = sb, sa
        w *= 2
    if a != v:
        for i in range(m):
            v[i], s[i] = a[i], sa[i]


def rows_top_sorted(x not None, Py_ssize_t k, double[:, ::1] out_keys not None,
                    int64_t[:, ::1] out_slots not None) -> bool:
    """The exact top-k of each row of ``x`` (float32 or float64 (n, W)) above -inf: values
    descending, equal values by lower column (kernels/selection.topk_exact), into
    ``out_keys`` float64 and ``out_slots`` int64 (n, k), ``(-inf, -1)`` past a row's live
    entries. The row's k-th value by a quickselect over the values, the entries above it
    and then those equal to it from the lowest column, ordered by a stable merge sort.
    False where it declines (a NaN: the caller keeps torch's order)."""
    cdef Py_ssize_t n = x.shape[0] if x.ndim == 2 else -1, width = x.shape[x.ndim - 1]
    if n < 0 or k < 1:
        raise ValueError("rows_top_sorted: x must be (n, W) and k >= 1")
    if out_keys.shape[0] != n or out_keys.shape[1] != k or out_slots.shape[0] != n or (
            out_slots.shape[1] != k):
        raise ValueError("rows_top_sorted: out_keys and out_slots must be (n, k)")
    cdef const float[:, ::1] xf = x if x.dtype == np.float32 else None
    cdef const double[:, ::1] xd = None if x.dtype == np.float32 else x
    if not (n and width):
        out_keys[:, :] = -INFINITY
        out_slots[:, :] = -1
        return True
    cdef double[::1] row = np.empty(width, dtype=np.float64)
    cdef double[::1] buf = np.empty(3 * width, dtype=np.float64)  # _kth's three buffers
    cdef double[::1] tv = np.empty(width, dtype=np.float64)
    cdef int64_t[::1] ts = np.empty(width, dtype=np.int64)
    cdef int64_t[::1] cols = np.empty(width, dtype=np.int64)
    cdef Py_ssize_t r, c, live, take, m, need
    cdef double v, kth
    cdef bint f32 = xf is not None, nan = False
    with nogil:
        for r in range(n):
            live = 0
            for c in range(width):
                v = <double>xf[r, c] if f32 else xd[r, c]
                row[c] = v
                nan |= v != v
                buf[live] = v
                live += v > -INFINITY
            if nan:
                break
            take = min(k, live)
            kth = _kth(&buf[0], &buf[width], &buf[2 * width], live, take) if live > k else (
                -INFINITY)
            m = 0
            for c in range(width):  # the entries above it, in column order
                buf[m] = row[c]
                cols[m] = c
                m += row[c] > kth
            need = take - m
            for c in range(width):  # then those equal to it, from the lowest column
                if need > 0 and row[c] == kth:
                    buf[m], cols[m] = kth, c
                    m += 1
                    need -= 1
            _sort_desc(&buf[0], &cols[0], &tv[0], &ts[0], m)
            for c in range(k):
                out_keys[r, c] = buf[c] if c < m else -INFINITY
                out_slots[r, c] = cols[c] if c < m else -1
    return not nan
