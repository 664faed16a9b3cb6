/* The token relay's MaxSim and order (pathways/recall/token_relay.py): plain C over
 * caller-owned arrays, no Python API (bound in kernels/_lexical.pyx, which checks every count,
 * ordinal, offset and query token first and sizes the scratch). */
#ifndef SPECTOR_NATIVE_TOKEN_H
#define SPECTOR_NATIVE_TOKEN_H

#include <stddef.h>
#include <stdint.h>

/* n queries of width W: fused float32 (n, W), counts int32 (n,), ordinals int64 (n, W); the
 * memories' token rows ids[offsets[o]:offsets[o+1]) (int32); the table's int8
 * codes (vocab, dim), norm and SIF weight float64 (vocab,); query i's token ids
 * qids[qoff[i]:qoff[i+1]); outputs (n, W) as token_rescore documents them. */
typedef struct {
    const float *fused;
    const int8_t *codes;
    const int32_t *counts, *ids, *qids;
    const int64_t *ordinals, *offsets, *qoff;
    const double *norm, *weight;
    ptrdiff_t width, vocab, dim;
    double token_weight;
    int64_t *out_order;
    float *out_fused;
    double *out_token;
} TokJob;

/* Scratch sized for the largest query (see _lexical.pyx): keys/slot a hash table (a power
 * of two >= twice its postings, at least 64), uniq/pslot its postings, sims its postings x
 * its query tokens rounded up to 4, qcodes its query tokens' rows, idots one per query token,
 * rank W x 24 bytes, tmp 2 W. */
typedef struct {
    int32_t *keys, *slot, *uniq, *pslot, *idots;
    int8_t *qcodes;
    double *sims;
    void *rank;
    double *tmp;
} TokScratch;

/* Query i: its token scores, order and mixed scores; -1 for a token id out of the table. */
int token_query(const TokJob *j, const TokScratch *s, ptrdiff_t i);

#endif
