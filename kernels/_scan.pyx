# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The INT8 scan with exact top-k and the top-k selections (``csrc/scan.c``), bound by Cython.

Arrays are numpy: Cython checks each one's dtype and contiguity and raises ``ValueError`` on a
mismatch; the shapes are checked here. Order everywhere: key descending, then slot ascending;
padding ``(-inf, -1)``. The GIL is released while computing.
"""

import numpy as np

from .flags import byte_flags

from libc.stdint cimport int8_t, int64_t, uint8_t
from libc.string cimport memcpy

cdef extern from "csrc/scan.c" nogil:
    ctypedef struct TopkState:
        void *buf
        int64_t *size
        double *thr
        Py_ssize_t n, k
    int c_int8_topk "int8_topk"(
        const int8_t *codes, const float *scales, Py_ssize_t n_rows, Py_ssize_t dim,
        Py_ssize_t stride, const int8_t *q, Py_ssize_t m, const uint8_t *allowed, Py_ssize_t k,
        int64_t *next, float *keys, int64_t *slots, float *all)
    void c_int8_score_rows "int8_score_rows"(
        const int8_t *codes, const float *scales, Py_ssize_t dim, Py_ssize_t stride,
        const int8_t *q, Py_ssize_t m, const int64_t *rows, Py_ssize_t c, float *out)
    void c_topk_update "topk_update"(
        TopkState *st, const void *dots, int f32, const float *scales, Py_ssize_t t,
        Py_ssize_t first, const int64_t *slotmap, const uint8_t *gate)
    void c_topk_finish "topk_finish"(TopkState *st, float *keys, int64_t *slots)
    int64_t claim_row(int64_t *n)
    void c_rows_topk "rows_topk"(
        const void *x, int f32, Py_ssize_t n, Py_ssize_t width, double bound, int strict,
        Py_ssize_t k, double *keys, int64_t *slots, int64_t *count)


cdef extern from "<pthread.h>" nogil:
    ctypedef int pthread_t  # (opaque: only its address and value are passed on)
    int pthread_create(pthread_t *thread, const void *attr, void *(*run)(void *) noexcept nogil,
                       void *arg)
    int pthread_join(pthread_t thread, void **value)


cdef struct ScanJob:
    # int8_topk of m queries, one at a time; each query's blocks of rows are claimed from
    # next[i] by the caller (side 0) and the thread (side 1), each keeping its own top-k
    const int8_t *codes
    const float *scales
    Py_ssize_t n_rows, dim, stride, m, k
    const int8_t *q
    const uint8_t *allowed
    float *all
    int64_t *next
    float *keys[2]
    int64_t *slots[2]
    int rc[2]
    int64_t claim  # 0 until the thread (to run) or the caller (to withdraw it) claims it


cdef void _scan_side(ScanJob *j, int side) noexcept nogil:
    """Side ``side``'s share of each query's blocks into its own top-k."""
    cdef Py_ssize_t i
    for i in range(j.m):
        if j.rc[side] == 0:
            j.rc[side] = c_int8_topk(
                j.codes, j.scales, j.n_rows, j.dim, j.stride, j.q + i * j.dim, 1, j.allowed, j.k,
                &j.next[i], j.keys[side] + i * j.k, j.slots[side] + i * j.k,
                j.all + i * j.n_rows if j.all != NULL else NULL)


cdef void *_job_thread(void *arg) noexcept nogil:
    cdef ScanJob *j = <ScanJob *>arg
    if claim_row(&j.claim) == 0:
        _scan_side(j, 1)
    return NULL


cdef void _merge(const float *ka, const int64_t *sa, const float *kb, const int64_t *sb,
                 Py_ssize_t k, float *keys, int64_t *slots) noexcept nogil:
    """The k best of two disjoint top-k lists (key descending, then slot ascending; padding
    ``(-inf, -1)`` last): after t picks a + b == t < k, so neither index runs past its list."""
    cdef Py_ssize_t a = 0, b = 0, t
    for t in range(k):
        if sb[b] < 0 or (sa[a] >= 0 and (ka[a] > kb[b] or (ka[a] == kb[b] and sa[a] < sb[b]))):
            keys[t], slots[t] = ka[a], sa[a]
            a += 1
        else:
            keys[t], slots[t] = kb[b], sb[b]
            b += 1


cdef object _queries(object q, Py_ssize_t dim, str fn):
    """Query codes (m, dim), m >= 1, from an (m, dim) or flat array."""
    if isinstance(q, np.ndarray) and q.ndim == 2 and q.shape[1] == dim and q.shape[0]:
        return q
    arr = np.asarray(q)
    if arr.size == 0 or arr.size % dim:
        raise ValueError(f"{fn}: queries must be (m, dim) int8, m >= 1")
    return arr.reshape(-1, dim)


cdef void _check_outputs(float[:, ::1] out_keys, int64_t[:, ::1] out_slots, float[:, ::1] out_all,
                        Py_ssize_t m, Py_ssize_t n_rows, str fn) except *:
    """Shapes of a scan's outputs for m queries: keys and slots (m, k), k >= 1; every row's
    key (m, n_rows) when given."""
    cdef Py_ssize_t k = out_keys.shape[1]
    if out_keys.shape[0] != m or k < 1:
        raise ValueError(f"{fn}: out_keys must be (m, k) float32, k >= 1")
    if out_slots.shape[0] != m or out_slots.shape[1] != k:
        raise ValueError(f"{fn}: out_slots must be (m, k) int64 like out_keys")
    if out_all is not None and (out_all.shape[0] != m or out_all.shape[1] != n_rows):
        raise ValueError(f"{fn}: out_all must be (m, n_rows) float32")


cdef void _check_codes(const int8_t[:, ::1] codes, const float[::1] scales, Py_ssize_t n_rows,
                       Py_ssize_t dim, Py_ssize_t stride, str fn) except *:
    if n_rows < 0 or dim < 1 or stride < dim:
        raise ValueError(f"{fn}: need n_rows >= 0 and 1 <= dim <= stride")
    if codes.shape[0] * codes.shape[1] < n_rows * stride:
        raise ValueError(f"{fn}: codes hold fewer than n_rows rows")
    if scales.shape[0] < n_rows:
        raise ValueError(f"{fn}: scales hold fewer than n_rows values")


def int8_topk(
    const int8_t[:, ::1] codes not None,
    Py_ssize_t n_rows,
    Py_ssize_t dim,
    Py_ssize_t stride,
    const float[::1] scales not None,
    q,
    allowed,
    float[:, ::1] out_keys not None,
    int64_t[:, ::1] out_slots not None,
    float[:, ::1] out_all=None,
) -> None:
    """Exact top-k of ``float32(dot(q_j, c_r)) * scales[r]`` over the first ``n_rows`` rows
    of ``codes`` (rows ``stride`` bytes apart, ``dim`` codes each) for the int8 queries ``q``
    (m, dim): keys float32 and slots int64 into ``out_keys`` / ``out_slots`` (m, k). Rows
    whose ``allowed`` flag (bool (n_rows,) or None) is false are left out; ``out_all``
    (m, n_rows) float32, if given, gets every row's key (``-inf`` for those)."""
    _check_codes(codes, scales, n_rows, dim, stride, "int8_topk")
    cdef const int8_t[:, ::1] qv = _queries(q, dim, "int8_topk")
    cdef const uint8_t[::1] av = byte_flags(allowed, "allowed", n=n_rows)
    cdef Py_ssize_t m = qv.shape[0], k = out_keys.shape[1]
    _check_outputs(out_keys, out_slots, out_all, m, n_rows, "int8_topk")
    cdef const uint8_t *ap = &av[0] if av is not None and n_rows else NULL
    cdef float *allp = &out_all[0, 0] if out_all is not None and n_rows else NULL
    cdef int rc
    with nogil:
        rc = c_int8_topk(&codes[0, 0] if n_rows else NULL, &scales[0] if n_rows else NULL,
                         n_rows, dim, stride, &qv[0, 0], m, ap, k, NULL, &out_keys[0, 0],
                         &out_slots[0, 0], allp)
    if rc < 0:
        raise MemoryError("int8_topk: out of memory")


def int8_score_rows(
    const int8_t[:, ::1] codes not None,
    Py_ssize_t n_rows,
    Py_ssize_t dim,
    Py_ssize_t stride,
    const float[::1] scales not None,
    q,
    const int64_t[:, ::1] rows not None,
    float[:, ::1] out not None,
) -> None:
    """The keys of given rows: ``out[j, i]`` (float32 (m, c)) for query ``q[j]`` and row
    ``rows[j, i]`` (int64 (m, c), in ``[-1, n_rows)``; -1 gives ``-inf``)."""
    _check_codes(codes, scales, n_rows, dim, stride, "int8_score_rows")
    cdef const int8_t[:, ::1] qv = _queries(q, dim, "int8_score_rows")
    cdef Py_ssize_t m = qv.shape[0], c = rows.shape[1], i, j
    if rows.shape[0] != m or out.shape[0] != m or out.shape[1] != c:
        raise ValueError("int8_score_rows: rows must be (m, c) int64 and out (m, c) float32")
    for j in range(m):
        for i in range(c):
            if rows[j, i] < -1 or rows[j, i] >= n_rows:
                raise ValueError(f"int8_score_rows: row {rows[j, i]} outside [-1, {n_rows})")
    if m == 0 or c == 0:
        return
    with nogil:
        c_int8_score_rows(&codes[0, 0] if n_rows else NULL, &scales[0] if n_rows else NULL,
                          dim, stride, &qv[0, 0], m, &rows[0, 0], c, &out[0, 0])


cdef TopkState _state(int64_t[:, ::1] cands, int64_t[::1] sizes, double[::1] thresholds,
                      str fn) except *:
    """The candidate state: candidates int64 (n, 4k) (2k pairs of 16 bytes), sizes int64 (n,)
    in [0, 2k), thresholds float64 (n,)."""
    cdef TopkState st
    cdef Py_ssize_t j
    st.n = cands.shape[0]
    if st.n == 0 or cands.shape[1] == 0 or cands.shape[1] % 4:
        raise ValueError(f"{fn}: candidates must be int64 (n, 4k), n >= 1, k >= 1")
    st.k = cands.shape[1] // 4
    if sizes.shape[0] != st.n or thresholds.shape[0] != st.n:
        raise ValueError(f"{fn}: sizes and thresholds must be (n,) like the candidates")
    for j in range(st.n):
        if sizes[j] < 0 or sizes[j] >= 2 * st.k:
            raise ValueError(f"{fn}: a size outside [0, 2k)")
    st.buf = &cands[0, 0]
    st.size = &sizes[0]
    st.thr = &thresholds[0]
    return st


def topk_update(
    dots,
    const float[::1] scales not None,
    Py_ssize_t first,
    const int64_t[::1] slotmap,
    gate,
    int64_t[:, ::1] cands not None,
    int64_t[::1] sizes not None,
    double[::1] thresholds not None,
) -> None:
    """Merge a tile's keys ``float32(dots[r, j]) * scales[r]`` (dots (T, n) int32 or float32)
    into the n queries' candidate state (``cands``, ``sizes``, ``thresholds``: see
    ``csrc/scan.c``); row r's slot is ``slotmap[r]`` (int64 (T,)) or ``first + r`` when
    ``slotmap`` is None; rows whose ``gate`` flag (bool (T,) or None) is false are skipped."""
    cdef TopkState st = _state(cands, sizes, thresholds, "topk_update")
    arr = np.asarray(dots)
    if arr.dtype not in (np.int32, np.float32) or arr.ndim != 2 or arr.shape[1] != st.n:
        raise ValueError("topk_update: dots must be (T, n) int32 or float32 (expected 4-byte "
                         f"items), got {arr.dtype} {arr.shape}")
    cdef int f32 = arr.dtype == np.float32
    cdef const unsigned char[:, ::1] raw = np.ascontiguousarray(arr).view(np.uint8)
    cdef Py_ssize_t t = arr.shape[0]
    if scales.shape[0] != t or (slotmap is not None and slotmap.shape[0] != t):
        raise ValueError("topk_update: scales and slotmap must be (T,) like dots")
    cdef const uint8_t[::1] gv = byte_flags(gate, "gate", n=t)
    if t == 0:
        return
    cdef const int64_t *sp = &slotmap[0] if slotmap is not None else NULL
    cdef const uint8_t *gp = &gv[0] if gv is not None else NULL
    with nogil:
        c_topk_update(&st, &raw[0, 0], f32, &scales[0], t, first, sp, gp)


def topk_finish(
    int64_t[:, ::1] cands not None,
    int64_t[::1] sizes not None,
    double[::1] thresholds not None,
    float[:, ::1] out_keys not None,
    int64_t[:, ::1] out_slots not None,
) -> None:
    """Each query's k best of the candidate state (see :func:`topk_update`), best first,
    into ``out_keys`` float32 and ``out_slots`` int64 (n, k), padded."""
    cdef TopkState st = _state(cands, sizes, thresholds, "topk_finish")
    if out_keys.shape[0] != st.n or out_keys.shape[1] != st.k:
        raise ValueError("topk_finish: out_keys must be (n, k) float32")
    if out_slots.shape[0] != st.n or out_slots.shape[1] != st.k:
        raise ValueError("topk_finish: out_slots must be (n, k) int64")
    with nogil:
        c_topk_finish(&st, &out_keys[0, 0], &out_slots[0, 0])


def rows_topk(
    x,
    Py_ssize_t width,
    double bound,
    bint strict,
    double[:, ::1] out_keys not None,
    int64_t[:, ::1] out_slots not None,
    int64_t[::1] out_count not None,
) -> None:
    """Exact top-k of each row of ``x`` (n, width) float32 or float64 above ``bound``
    (``> bound`` when ``strict``, else ``>=``; NaN never enters): values into ``out_keys``
    float64 and columns into ``out_slots`` int64 (n, k), padded, and each row's count into
    ``out_count`` int64 (n,)."""
    arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    if width < 1 or arr.size % width:
        raise ValueError("rows_topk: x must be (n, width), width >= 1")
    if arr.ndim != 2 or arr.shape[1] != width:
        arr = arr.reshape(-1, width)
    cdef const float[:, ::1] xf
    cdef const double[:, ::1] xd
    cdef const void *xp
    cdef int f32 = arr.dtype.char == "f"
    if f32:
        xf = arr
        xp = &xf[0, 0] if xf.shape[0] else NULL
    elif arr.dtype.char == "d":
        xd = arr
        xp = &xd[0, 0] if xd.shape[0] else NULL
    else:
        raise ValueError(f"x: expected a float32 or float64 array, got {arr.dtype}")
    cdef Py_ssize_t n = arr.shape[0], k = out_keys.shape[1]
    if n == 0 or out_keys.shape[0] != n:
        raise ValueError("rows_topk: out_keys must be (n, k) float64, n >= 1")
    if k < 1:
        raise ValueError("rows_topk: k must be >= 1")
    if out_slots.shape[0] != n or out_slots.shape[1] != k or out_count.shape[0] != n:
        raise ValueError("rows_topk: out_slots must be (n, k) int64 and out_count (n,) int64")
    with nogil:
        c_rows_topk(xp, f32, n, width, bound, strict, k, &out_keys[0, 0], &out_slots[0, 0],
                    &out_count[0])


cdef class ScanAhead:
    """:func:`int8_topk` of each query, started now on a native thread of its own (no GIL, no
    pool) while the caller goes on. :meth:`wait` takes it: the caller joins in, each query's
    blocks of 4,096 rows going to whichever of the two claims them first (each keeps its own
    top-k; the two are merged, exact by the total order), and it runs them all if the thread
    has not started yet (a busy machine: the thread, withdrawn, then only has to exit).
    ``thread=False`` (or a thread that cannot be created)
    leaves every block to :meth:`wait`. The arrays are held until the job has ended; dropping
    it without :meth:`wait` settles it (:meth:`settle`)."""

    cdef ScanJob job
    cdef pthread_t thread
    cdef bint started, joined, claimed, ran, done
    cdef object held

    def __cinit__(self, const int8_t[:, ::1] codes not None, Py_ssize_t n_rows, Py_ssize_t dim,
                  Py_ssize_t stride, const float[::1] scales not None, q, allowed,
                  float[:, ::1] out_keys not None, int64_t[:, ::1] out_slots not None,
                  float[:, ::1] out_all=None, bint thread=True):
        _check_codes(codes, scales, n_rows, dim, stride, "ScanAhead")
        cdef const int8_t[:, ::1] qv = _queries(q, dim, "ScanAhead")
        cdef const uint8_t[::1] av = byte_flags(allowed, "allowed", n=n_rows)
        cdef Py_ssize_t m = qv.shape[0], k = out_keys.shape[1]
        _check_outputs(out_keys, out_slots, out_all, m, n_rows, "ScanAhead")
        # the thread's side and the counters live here; the caller's side in the outputs
        side = (np.zeros(m, np.int64), np.empty((m, k), np.float32), np.empty((m, k), np.int64))
        cdef int64_t[::1] nv = side[0]
        cdef float[:, ::1] tk = side[1]
        cdef int64_t[:, ::1] ts = side[2]
        self.held = (codes, scales, qv, av, out_keys, out_slots, out_all, side)
        self.job.codes = &codes[0, 0] if n_rows else NULL
        self.job.scales = &scales[0] if n_rows else NULL
        self.job.n_rows, self.job.dim, self.job.stride = n_rows, dim, stride
        self.job.m, self.job.k, self.job.q = m, k, &qv[0, 0]
        self.job.allowed = &av[0] if av is not None and n_rows else NULL
        self.job.all = &out_all[0, 0] if out_all is not None and n_rows else NULL
        self.job.next = &nv[0]
        self.job.keys[0], self.job.slots[0] = &out_keys[0, 0], &out_slots[0, 0]
        self.job.keys[1], self.job.slots[1] = &tk[0, 0], &ts[0, 0]
        self.job.rc[0], self.job.rc[1], self.job.claim = 0, 0, 0
        if thread:
            with nogil:
                self.started = pthread_create(&self.thread, NULL, _job_thread, &self.job) == 0

    @property
    def threaded(self) -> bool:
        """Whether a thread was started for the job."""
        return self.started

    @property
    def thread_ran(self) -> bool:
        """Whether the thread took part (known after :meth:`wait`)."""
        return self.ran

    @property
    def thread_started(self) -> bool:
        """Whether the thread has claimed the job by now (before the caller claims it)."""
        return self.started and not self.claimed and self.job.claim != 0

    @property
    def thread_slots(self) -> np.ndarray:
        """A copy of the slots the thread found, int64 (m, k) (its own top-k before the
        merge; -1 padding): which rows it scanned, for tests and diagnostics."""
        return np.array(self.held[7][2]) if self.ran else np.full((self.job.m, self.job.k), -1)

    def wait(self) -> None:
        """Scan the blocks left, wait for the thread, merge: the outputs are then written (a
        second call does nothing). ``MemoryError`` if a scan ran out of memory."""
        cdef ScanJob *j = &self.job
        cdef Py_ssize_t i
        cdef float[::1] mk = np.empty(j.k, np.float32)
        cdef int64_t[::1] ms = np.empty(j.k, np.int64)
        if not self.done:
            with nogil:
                self._claim()
                _scan_side(j, 0)
                self._join()
                for i in range(j.m if self.ran and j.rc[0] == 0 and j.rc[1] == 0 else 0):
                    memcpy(&mk[0], j.keys[0] + i * j.k, j.k * sizeof(float))
                    memcpy(&ms[0], j.slots[0] + i * j.k, j.k * sizeof(int64_t))
                    _merge(&mk[0], &ms[0], j.keys[1] + i * j.k, j.slots[1] + i * j.k, j.k,
                           j.keys[0] + i * j.k, j.slots[0] + i * j.k)
            self.done = True
        if j.rc[0] < 0 or j.rc[1] < 0:
            raise MemoryError("ScanAhead: out of memory")

    def settle(self) -> None:
        """Withdraw the job if the thread has not started it, else wait for the thread's
        blocks (their outputs then unused): afterwards nothing reads or writes the arrays."""
        with nogil:
            self._claim()
            self._join()

    cdef void _claim(self) noexcept nogil:
        """The caller's claim (once): the thread ran if it claimed the job first."""
        if not self.claimed:
            self.claimed = True
            self.ran = claim_row(&self.job.claim) != 0 and self.started

    cdef void _join(self) noexcept nogil:
        if self.started and not self.joined:
            pthread_join(self.thread, NULL)
            self.joined = True

    def __dealloc__(self):
        with nogil:
            self._claim()
            self._join()
