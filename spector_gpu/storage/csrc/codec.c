/* The storage's batch codecs: plain C over caller-owned arrays, no Python API (bound in
 * spector_gpu/storage/_codec.pyx; every caller keeps a pure-Python twin with the same bytes).
 * Little-endian hosts only, as the store's formats are. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EPISODE_MAGIC 0x45504953u

static uint32_t T[8][256]; /* slicing-by-8 tables of the reflected polynomial 0x82F63B78 */
static uint32_t (*crc_fn)(uint32_t, const uint8_t *, size_t);

/* CRC32C (Castagnoli), byte-identical to the crc32c package, continuing from crc: the CPU's
 * CRC32C instruction on x86-64 with SSE4.2 (crc32c_update), else tables (crc32c_table, the
 * tables alone); crc32c_init() (once, before any other call) builds the tables and picks,
 * crc32c_impl() names the pick ("sse4.2" or "table"). */
uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = T[7][v & 0xFF] ^ T[6][(v >> 8) & 0xFF] ^ T[5][(v >> 16) & 0xFF] ^
              T[4][(v >> 24) & 0xFF] ^ T[3][(v >> 32) & 0xFF] ^ T[2][(v >> 40) & 0xFF] ^
              T[1][(v >> 48) & 0xFF] ^ T[0][v >> 56];
    }
    while (n--) crc = T[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const uint8_t *p,
                                                            size_t n) {
    uint64_t c = (uint32_t)~crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    while (n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

void crc32c_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        T[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (uint32_t i = 0; i < 256; i++) T[t][i] = (T[t - 1][i] >> 8) ^ T[0][T[t - 1][i] & 0xFF];
    crc_fn = crc32c_table;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) crc_fn = crc_sse42;
#endif
}

uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n) { return crc_fn(crc, p, n); }

const char *crc32c_impl(void) { return crc_fn == crc32c_table ? "table" : "sse4.2"; }

/* CRC32C of each of n rows of width bytes into out. */
void crc32c_rows(const uint8_t *rows, size_t n, size_t width, uint32_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = crc32c_update(0, rows + i * width, width);
}

static void put32(uint8_t *d, uint32_t v) { memcpy(d, &v, 4); }
static void put64(uint8_t *d, int64_t v) { memcpy(d, &v, 8); }

/* n episode records back to back into out (sum of 96 + payload padded to 8), offsets[i] each
 * one's start: prefix (magic, padded length, id, stamp, sequence, CRC32C over prefix[0:28] ||
 * header || payload), the 64-byte header, the payload zero-padded to 8. */
void encode_episodes(ptrdiff_t n, const uint8_t *headers, const uint8_t *const *payloads,
                     const int64_t *lens, const int64_t *ids, const int64_t *stamps,
                     const uint32_t *seqs, uint8_t *out, int64_t *offsets) {
    int64_t pos = 0;
    for (ptrdiff_t i = 0; i < n; i++) {
        uint32_t padded = (uint32_t)((lens[i] + 7) & ~(int64_t)7);
        uint8_t *r = out + pos;
        offsets[i] = pos;
        put32(r, EPISODE_MAGIC);
        put32(r + 4, padded);
        put64(r + 8, ids[i]);
        put64(r + 16, stamps[i]);
        put32(r + 24, seqs[i]);
        memcpy(r + 32, headers + i * 64, 64);
        if (lens[i]) memcpy(r + 96, payloads[i], (size_t)lens[i]);
        memset(r + 96 + lens[i], 0, (size_t)(padded - lens[i]));
        put32(r + 28, crc32c_update(crc32c_update(0, r, 28), r + 32, 64 + (size_t)padded));
        pos += 96 + padded;
    }
}

/* The start of every record in buf[start, end), jumping 96 + padded length from one to the
 * next, into out ((end - start) / 96 + 1 slots): their count, or -1 - pos at a bad magic. */
ptrdiff_t walk_offsets(const uint8_t *buf, ptrdiff_t start, ptrdiff_t end, int64_t *out) {
    ptrdiff_t count = 0;
    for (ptrdiff_t pos = start; pos + 96 <= end;) {
        uint32_t magic, len;
        memcpy(&magic, buf + pos, 4);
        memcpy(&len, buf + pos + 4, 4);
        if (magic != EPISODE_MAGIC) return -1 - pos;
        out[count++] = pos;
        pos += 96 + (ptrdiff_t)len;
    }
    return count;
}
