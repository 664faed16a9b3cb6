/* Native batch codecs for the storage kernel (optional: a pure-Python twin is always present).
 *
 * encode_episodes: build back-to-back episode records [WalkPrefix 32 | header 64 | payload]
 * with each record's CRC32C over prefix[0:28] || header || payload (payload zero-padded to 8).
 * walk_offsets: the salience walk (jump 96+N from record to record) over a committed log.
 * crc32c_rows: CRC32C of each fixed-length row.
 *
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78), slicing-by-8, byte-identical to the
 * crc32c package. Everything is bounds-checked; errors raise ValueError.
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

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n) {
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

static void put32(uint8_t *d, uint32_t v) { memcpy(d, &v, 4); }  /* little-endian hosts only */
static void put64(uint8_t *d, int64_t v) { memcpy(d, &v, 8); }

static PyObject *encode_episodes(PyObject *self, PyObject *args) {
    Py_buffer hb, pb, ob, ib, sb, qb;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*", &hb, &pb, &ob, &ib, &sb, &qb)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = ib.len / 8;
    if (hb.len != n * 64 || ob.len != (n + 1) * 8 || sb.len != n * 8 || qb.len != n * 4) {
        PyErr_SetString(PyExc_ValueError, "encode_episodes: array lengths do not agree");
        goto done;
    }
    const int64_t *off = (const int64_t *)ob.buf;
    if (n < 0 || off[0] != 0 || off[n] != pb.len) {
        PyErr_SetString(PyExc_ValueError, "encode_episodes: payload offsets do not span the blob");
        goto done;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t len = off[i + 1] - off[i];
        if (len < 0 || len > 0xFFFFFFF0LL) {
            PyErr_SetString(PyExc_ValueError, "encode_episodes: bad payload length");
            goto done;
        }
        total += 96 + ((len + 7) & ~7LL);
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (!result) goto done;
    {
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
        memset(out, 0, (size_t)total);
        const uint8_t *head = (const uint8_t *)hb.buf, *blob = (const uint8_t *)pb.buf;
        const int64_t *ids = (const int64_t *)ib.buf, *stamps = (const int64_t *)sb.buf;
        const uint32_t *seqs = (const uint32_t *)qb.buf;
        Py_ssize_t pos = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t len = off[i + 1] - off[i];
            uint32_t padded = (uint32_t)((len + 7) & ~7LL);
            uint8_t *r = out + pos;
            put32(r, 0x45504953u);
            put32(r + 4, padded);
            put64(r + 8, ids[i]);
            put64(r + 16, stamps[i]);
            put32(r + 24, seqs[i]);
            memcpy(r + 32, head + i * 64, 64);
            memcpy(r + 96, blob + off[i], (size_t)len);
            uint32_t c = crc_update(0, r, 28);
            c = crc_update(c, r + 32, 64 + (size_t)padded);
            put32(r + 28, c);
            pos += 96 + padded;
        }
    }
done:
    PyBuffer_Release(&hb); PyBuffer_Release(&pb); PyBuffer_Release(&ob);
    PyBuffer_Release(&ib); PyBuffer_Release(&sb); PyBuffer_Release(&qb);
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

static PyMethodDef methods[] = {
    {"encode_episodes", encode_episodes, METH_VARARGS, "Encode episode records (see module doc)."},
    {"walk_offsets", walk_offsets, METH_VARARGS, "Offsets of the records of a log buffer."},
    {"crc32c_rows", crc32c_rows, METH_VARARGS, "CRC32C of each fixed-width row (uint32 LE bytes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    init_tables();
    return PyModule_Create(&module);
}
