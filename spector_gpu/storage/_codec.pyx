# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The storage's batch codecs (``csrc/codec.c``), bound by Cython.

Byte buffers are anything with the buffer protocol (bytes, memoryview, a uint8 array); ids and
stamps int64 and sequences uint32 arrays. Cython checks each one's type and contiguity and
raises ``ValueError`` on a mismatch; the lengths are checked here. Every caller keeps a
pure-Python twin producing the same bytes (``tests/storage/test_native.py``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc

cdef extern from "csrc/codec.c" nogil:
    void crc32c_init()
    uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n)
    uint32_t c_crc32c_table "crc32c_table"(uint32_t crc, const uint8_t *p, size_t n)
    const char *crc32c_impl()
    void c_crc32c_rows "crc32c_rows"(const uint8_t *rows, size_t n, size_t width, uint32_t *out)
    void c_encode_episodes "encode_episodes"(
        Py_ssize_t n, const uint8_t *headers, const uint8_t *const *payloads,
        const int64_t *lens, const int64_t *ids, const int64_t *stamps, const uint32_t *seqs,
        uint8_t *out, int64_t *offsets)
    Py_ssize_t c_walk_offsets "walk_offsets"(
        const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t *out)

crc32c_init()


def crc_impl() -> str:
    """Which CRC32C implementation runs: ``"sse4.2"`` or ``"table"``."""
    return crc32c_impl().decode()


def crc32c_table(const uint8_t[::1] data, uint32_t value=0) -> int:
    """CRC32C of ``data`` continuing from ``value``, by the portable tables alone (tests
    compare it with the CPU-instruction path)."""
    cdef uint32_t c
    with nogil:
        c = c_crc32c_table(value, &data[0] if data.shape[0] else NULL, data.shape[0])
    return c


def crc32c_rows(const uint8_t[::1] data, Py_ssize_t width) -> bytes:
    """CRC32C of each ``width``-byte row of ``data``, as little-endian uint32 bytes."""
    if width <= 0 or data.shape[0] % width:
        raise ValueError("crc32c_rows: buffer is not whole rows")
    cdef Py_ssize_t n = data.shape[0] // width
    out = PyBytes_FromStringAndSize(NULL, n * 4)
    cdef uint32_t *op = <uint32_t *>PyBytes_AS_STRING(out)
    if n:
        with nogil:
            c_crc32c_rows(&data[0], n, width, op)
    return out


def encode_episodes(
    const uint8_t[::1] headers,
    payloads,
    const int64_t[::1] ids,
    const int64_t[::1] stamps,
    const uint32_t[::1] seqs,
) -> tuple[bytes, bytes]:
    """Episode records back to back for ``n`` 64-byte ``headers``, ``payloads`` (a sequence
    of n bytes), ``ids`` and ``stamps`` (int64) and ``seqs`` (uint32): the records and each
    one's int64 offset in them (bytes; layout in ``csrc/codec.c``)."""
    items = payloads if isinstance(payloads, (list, tuple)) else list(payloads)
    cdef Py_ssize_t n = len(items), i, total = 0
    if headers.shape[0] != n * 64 or ids.shape[0] != n or stamps.shape[0] != n or (
        seqs.shape[0] != n
    ):
        raise ValueError("encode_episodes: array lengths do not agree")
    for p in items:
        if not isinstance(p, bytes):
            raise TypeError("encode_episodes: every payload must be bytes")
        if PyBytes_GET_SIZE(p) > 0xFFFFFFF0:
            raise ValueError("encode_episodes: a payload longer than 4 GiB")
        total += 96 + ((PyBytes_GET_SIZE(p) + 7) & ~7)
    cdef const uint8_t **ptrs = <const uint8_t **>malloc(sizeof(uint8_t *) * (n + 1))
    cdef int64_t *lens = <int64_t *>malloc(sizeof(int64_t) * (n + 1))
    if ptrs == NULL or lens == NULL:
        free(ptrs)
        free(lens)
        raise MemoryError("encode_episodes: out of memory")
    for i in range(n):  # the list holds the bytes alive while the GIL is released
        ptrs[i] = <const uint8_t *>PyBytes_AS_STRING(items[i])
        lens[i] = PyBytes_GET_SIZE(items[i])
    data = PyBytes_FromStringAndSize(NULL, total)
    rel = PyBytes_FromStringAndSize(NULL, n * 8)
    cdef uint8_t *dp = <uint8_t *>PyBytes_AS_STRING(data)
    cdef int64_t *rp = <int64_t *>PyBytes_AS_STRING(rel)
    try:
        if n:
            with nogil:
                c_encode_episodes(n, &headers[0], ptrs, lens, &ids[0], &stamps[0], &seqs[0],
                                  dp, rp)
    finally:
        free(ptrs)
        free(lens)
    return data, rel


def walk_offsets(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t end) -> bytes:
    """The int64 offset (bytes) of every record of a log buffer in ``[start, end)``, jumping
    ``96 + N`` from record to record; ``ValueError`` at a record without the magic."""
    if start < 0 or end > buf.shape[0] or start > end:
        raise ValueError("walk_offsets: range outside the buffer")
    cdef Py_ssize_t cap = (end - start) // 96 + 1, count
    out = PyBytes_FromStringAndSize(NULL, cap * 8)
    cdef int64_t *op = <int64_t *>PyBytes_AS_STRING(out)
    with nogil:
        count = c_walk_offsets(&buf[0] if buf.shape[0] else NULL, start, end, op)
    if count < 0:
        raise ValueError(f"bad record magic at offset {-1 - count}")
    return out[: count * 8]
