/* Native batch codecs for the storage kernel (optional: a pure-Python twin is always present).
 *
 * encode_episodes: build back-to-back episode records [WalkPrefix 32 | header 64 | payload]
 * with each record's CRC32C over prefix[0:28] || header || payload (payload zero-padded to 8).
 * walk_offsets: the salience walk (jump 96+N from record to record) over a committed log.
 * crc32c_rows: CRC32C of each fixed-length row.
 *
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78), byte-identical to the crc32c package:
 * the CPU's CRC32C instruction where it has one (x86-64 SSE4.2, chosen at import by a CPUID
 * check; AArch64 built with the CRC extension), else slicing-by-8 tables. `crc_impl()` says
 * which one runs. Everything is bounds-checked; errors raise ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static uint32_t T[8][256];

static void init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        T[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) T[t][i] = (T[t - 1][i] >> 8) ^ T[0][T[t - 1][i] & 0xFF];
}

static uint32_t crc_update_table(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) { crc = T[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = T[7][v & 0xFF] ^ T[6][(v >> 8) & 0xFF] ^ T[5][(v >> 16) & 0xFF] ^ T[4][(v >> 24) & 0xFF] ^
              T[3][(v >> 32) & 0xFF] ^ T[2][(v >> 40) & 0xFF] ^ T[1][(v >> 48) & 0xFF] ^ T[0][v >> 56];
        p += 8; n -= 8;
    }
    while (n--) crc = T[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define CRC_HW_NAME "sse4.2"
__attribute__((target("sse4.2")))
static uint32_t crc_update_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = (uint32_t)~crc;
    while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8; n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
static int crc_hw_available(void) { __builtin_cpu_init(); return __builtin_cpu_supports("sse4.2"); }
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define CRC_HW_NAME "armv8-crc"
static uint32_t crc_update_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = __crc32cb(c, *p++); n--; }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __crc32cd(c, v);
        p += 8; n -= 8;
    }
    while (n--) c = __crc32cb(c, *p++);
    return ~c;
}
static int crc_hw_available(void) { return 1; }
#endif

static uint32_t (*crc_update)(uint32_t, const uint8_t *, size_t) = crc_update_table;
static const char *crc_name = "table";

static void put32(uint8_t *d, uint32_t v) { memcpy(d, &v, 4); }  /* little-endian hosts only */
static void put64(uint8_t *d, int64_t v) { memcpy(d, &v, 8); }

/* encode_episodes(headers, payloads, ids, stamps, seqs) -> (records, offsets)
 * headers: n*64 bytes; payloads: a list/tuple of n bytes objects; ids, stamps: n int64;
 * seqs: n uint32 (any contiguous buffers). Returns the records back to back and the int64
 * offset of each record in them. */
static PyObject *encode_episodes(PyObject *self, PyObject *args) {
    Py_buffer hb, ib, sb, qb;
    PyObject *seq_obj, *fast = NULL, *result = NULL, *data = NULL, *rel = NULL;
    if (!PyArg_ParseTuple(args, "y*Oy*y*y*", &hb, &seq_obj, &ib, &sb, &qb)) return NULL;
    fast = PySequence_Fast(seq_obj, "encode_episodes: payloads must be a sequence of bytes");
    if (!fast) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (hb.len != n * 64 || ib.len != n * 8 || sb.len != n * 8 || qb.len != n * 4) {
        PyErr_SetString(PyExc_ValueError, "encode_episodes: array lengths do not agree");
        goto done;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_SetString(PyExc_TypeError, "encode_episodes: every payload must be bytes");
            goto done;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(items[i]);
        if (len > 0xFFFFFFF0LL) {
            PyErr_SetString(PyExc_ValueError, "encode_episodes: bad payload length");
            goto done;
        }
        total += 96 + ((len + 7) & ~(Py_ssize_t)7);
    }
    data = PyBytes_FromStringAndSize(NULL, total);
    rel = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!data || !rel) goto done;
    {
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
        int64_t *offs = (int64_t *)PyBytes_AS_STRING(rel);
        const uint8_t *head = (const uint8_t *)hb.buf;
        const int64_t *ids = (const int64_t *)ib.buf, *stamps = (const int64_t *)sb.buf;
        const uint32_t *seqs = (const uint32_t *)qb.buf;
        Py_ssize_t pos = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t len = PyBytes_GET_SIZE(items[i]);
            uint32_t padded = (uint32_t)((len + 7) & ~(Py_ssize_t)7);
            uint8_t *r = out + pos;
            offs[i] = pos;
            put32(r, 0x45504953u);
            put32(r + 4, padded);
            put64(r + 8, ids[i]);
            put64(r + 16, stamps[i]);
            put32(r + 24, seqs[i]);
            memcpy(r + 32, head + i * 64, 64);
            memcpy(r + 96, PyBytes_AS_STRING(items[i]), (size_t)len);
            memset(r + 96 + len, 0, (size_t)(padded - len));
            uint32_t c = crc_update(0, r, 28);
            c = crc_update(c, r + 32, 64 + (size_t)padded);
            put32(r + 28, c);
            pos += 96 + padded;
        }
    }
    result = PyTuple_Pack(2, data, rel);
done:
    Py_XDECREF(data); Py_XDECREF(rel); Py_XDECREF(fast);
    PyBuffer_Release(&hb); PyBuffer_Release(&ib); PyBuffer_Release(&sb); PyBuffer_Release(&qb);
    return result;
}

static PyObject *walk_offsets(PyObject *self, PyObject *args) {
    Py_buffer b;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &b, &start, &end)) return NULL;
    PyObject *result = NULL;
    if (start < 0 || end > b.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "walk_offsets: range outside the buffer");
        goto done;
    }
    {
        const uint8_t *p = (const uint8_t *)b.buf;
        Py_ssize_t cap = (end - start) / 96 + 1, n = 0, pos = start;
        int64_t *tmp = PyMem_Malloc((size_t)cap * sizeof(int64_t));
        if (!tmp) { PyErr_NoMemory(); goto done; }
        while (pos + 96 <= end) {
            uint32_t magic, len;
            memcpy(&magic, p + pos, 4);
            memcpy(&len, p + pos + 4, 4);
            if (magic != 0x45504953u) {
                PyMem_Free(tmp);
                PyErr_Format(PyExc_ValueError, "bad record magic at offset %zd", pos);
                goto done;
            }
            tmp[n++] = pos;
            pos += 96 + (Py_ssize_t)len;
        }
        result = PyBytes_FromStringAndSize((const char *)tmp, n * (Py_ssize_t)sizeof(int64_t));
        PyMem_Free(tmp);
    }
done:
    PyBuffer_Release(&b);
    return result;
}

static PyObject *crc32c_rows(PyObject *self, PyObject *args) {
    Py_buffer b;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "y*n", &b, &width)) return NULL;
    PyObject *result = NULL;
    if (width <= 0 || b.len % width) {
        PyErr_SetString(PyExc_ValueError, "crc32c_rows: buffer is not whole rows");
        goto done;
    }
    {
        Py_ssize_t n = b.len / width;
        result = PyBytes_FromStringAndSize(NULL, n * 4);
        if (!result) goto done;
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
        const uint8_t *p = (const uint8_t *)b.buf;
        for (Py_ssize_t i = 0; i < n; i++) put32(out + 4 * i, crc_update(0, p + i * width, (size_t)width));
    }
done:
    PyBuffer_Release(&b);
    return result;
}

static PyObject *crc_impl(PyObject *self, PyObject *args) {
    return PyUnicode_FromString(crc_name);
}

static PyObject *crc32c_table(PyObject *self, PyObject *args) {
    Py_buffer b;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &b, &value)) return NULL;
    uint32_t c = crc_update_table(value, (const uint8_t *)b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"crc_impl", crc_impl, METH_NOARGS, "Which CRC32C implementation runs: 'sse4.2', 'armv8-crc' or 'table'."},
    {"crc32c_table", crc32c_table, METH_VARARGS, "CRC32C by the portable tables (tests compare it with the hardware path)."},
    {"encode_episodes", encode_episodes, METH_VARARGS, "Encode episode records: (records, int64 offsets)."},
    {"walk_offsets", walk_offsets, METH_VARARGS, "Offsets of the records of a log buffer."},
    {"crc32c_rows", crc32c_rows, METH_VARARGS, "CRC32C of each fixed-width row (uint32 LE bytes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    init_tables();
#ifdef CRC_HW_NAME
    if (crc_hw_available()) { crc_update = crc_update_hw; crc_name = CRC_HW_NAME; }
#endif
    return PyModule_Create(&module);
}
