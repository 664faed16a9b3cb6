/* The storage's batch codecs: plain C over caller-owned arrays, no Python API (bound in
 * spector_gpu/storage/_codec.pyx; every caller keeps a pure-Python twin with the same bytes).
 * Little-endian hosts only, as the store's formats are. */
#ifndef SPECTOR_STORAGE_CODEC_H
#define SPECTOR_STORAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C (Castagnoli), byte-identical to the crc32c package, continuing from crc: the CPU's
 * CRC32C instruction on x86-64 with SSE4.2, else tables; crc32c_init() (once, before any
 * other call) builds the tables and picks. */
void crc32c_init(void);
uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n);
uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t n); /* the tables alone */
const char *crc32c_impl(void); /* "sse4.2" or "table" */

/* CRC32C of each of n rows of width bytes into out. */
void crc32c_rows(const uint8_t *rows, size_t n, size_t width, uint32_t *out);

/* n episode records back to back into out (sum of 96 + payload padded to 8), offsets[i] each
 * one's start: prefix (magic, padded length, id, stamp, sequence, CRC32C over prefix[0:28] ||
 * header || payload), the 64-byte header, the payload zero-padded to 8. */
void encode_episodes(ptrdiff_t n, const uint8_t *headers, const uint8_t *const *payloads,
                     const int64_t *lens, const int64_t *ids, const int64_t *stamps,
                     const uint32_t *seqs, uint8_t *out, int64_t *offsets);

/* The start of every record in buf[start, end), jumping 96 + padded length from one to the
 * next, into out ((end - start) / 96 + 1 slots): their count, or -1 - pos at a bad magic. */
ptrdiff_t walk_offsets(const uint8_t *buf, ptrdiff_t start, ptrdiff_t end, int64_t *out);

#endif
