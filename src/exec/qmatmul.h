/* SPDX-License-Identifier: MIT */
/* Quantized matrix multiplication: f32 activations times a block-quantized
 * weight matrix (GGML formats, src/quant/).
 *
 *   C[M,N] = A[M,K] · W[N,K]^T
 *
 * A is f32, row i at a + i*lda; W holds N rows of K elements in block format
 * `wtype` (an fcq_type id), row j at (const char *)w + j*w_row_bytes; C is
 * f32, row-major, leading dimension ldc (overwritten, never accumulated).
 *
 * Semantics are ggml's: every activation row is first quantized to the
 * weight format's dot partner (fcq_traits.dot_partner: q8_0, q8_1 or q8_K),
 * then each C[i,j] is the dot of quantized row i with weight row j. So
 *   C[i,j] = sum_k dequant(quant_partner(A[i,:]))[k] * dequant(W[j,:])[k]
 * up to float summation order. Formats with a generated integer kernel
 * (family qgemm) take the integer path: one register-tile kernel call per
 * MR x NR tile covers all K, so each C element is one kernel's sum and the
 * bits never depend on the thread count or the tiling. Formats without one
 * decode W, a chunk of rows at a time, to f32 and run the f32 GEMM
 * (exec/gemm.h) on the quantized-then-decoded activations; the chunking is
 * fixed by the shape, so those bits do not depend on the thread count
 * either. (While the partner format has no reference encoder in
 * src/quant/, that fallback uses A unquantized.)
 *
 * Threads split the weight rows (each weight byte is read by one thread: at
 * M = 1 the product is a DRAM stream of W) and, for large M, the rows of A.
 * At M = 1 each thread streams a contiguous home range of W and then helps
 * the others from the front of what they have left; otherwise tasks of
 * about 128 KiB of W are claimed in turn. */
#ifndef FC_EXEC_QMATMUL_H
#define FC_EXEC_QMATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "exec/workers.h"

typedef struct fc_qmatmul_args {
    int64_t m, n, k;
    const float *a;
    int64_t lda;        /* elements, >= k */
    const void *w;
    uint32_t wtype;     /* fcq_type id of W's block format */
    size_t w_row_bytes; /* >= the bytes of K elements in that format */
    float *c;
    int64_t ldc;        /* elements, >= n */
} fc_qmatmul_args;

/* Check the arguments: 0, or -1 with a message naming the argument and the
 * reason in err (when err is not NULL). M or N of 0 is valid (nothing to
 * do); K of 0 is valid (C is zeroed). */
int fc_qmatmul_check(const fc_qmatmul_args *g, char *err, size_t errlen);

/* Returns 0, or -1 on bad arguments (fc_qmatmul_check) or when scratch
 * memory cannot be had: C is then untouched. One exception: on the f32
 * fallback path the f32 GEMM allocates its own scratch per chunk, and if
 * that fails part of C may have been written. `w` may be NULL (one thread). */
int fc_qmatmul(fc_workers *w, const fc_qmatmul_args *g);
/* n products over one A (every g[i] with the same m, k, a and lda): A is
 * quantized once and the tasks of all of them run in one parallel loop, so
 * a decode step's Q/K/V (or gate/up) projections make one fork/join instead
 * of n. Each C element is the same kernel call as fc_qmatmul's: the same
 * bits. Formats without an integer kernel, or with different activation
 * partners, run as n fc_qmatmul calls. 0, or -1 (bad arguments, no memory). */
int fc_qmatmul_multi(fc_workers *w, const fc_qmatmul_args *g, int n);

/* Which path fc_qmatmul takes for a format on this CPU now: "int 4x4/1x4"
 * (the integer path with its qgemm tile MR x NR, used for whole MR-row
 * tiles, and its qgemv tile 1 x NR, for the rows left), "f32-decode", or
 * "bad" for an id that is not a block format. A thread-local string; for
 * tests and the bench. */
const char *fc_qmatmul_path(uint32_t wtype);

/* Test hook: 1 forces the f32-decode path for every format (so both paths
 * can be checked on one CPU), 0 restores the default. Not thread-safe. */
void fc_qmatmul_force_decode(int on);

/* ---- prepared ("packed") weights: issue 5's load-time repacking ----------------------
 *
 * fc_qweights_prepare converts W once (at load time) into an interleaved
 * layout for prefill-sized products: for q4_0, q8_0 and q4_K, 16 weight
 * rows per group, quants ordered for vpdpbusd and the f16 scales (q4_0 and
 * q8_0: every block's quants, then every block's scales, the size of W;
 * q4_K: per super-block, its 6-bit scales and mins pre-decoded; registry/
 * quant_packed.yaml, generated family qgemm_packed). Formats
 * without a packed layout, or CPUs whose packed kernel would be the scalar
 * arm, keep only a reference to W. fc_qmatmul_prepared takes the packed path
 * when M >= fc_qweights_min_m() and the row-major fc_qmatmul otherwise
 * (decode). Packed results do not depend on the thread count, and equal the
 * row-major scalar kernels' bit for bit (the same integer per block and
 * the same float operations); they may differ from the row-major SIMD
 * kernels by float summation order (bounded like fc_qmatmul's). Packing is
 * deterministic. The object keeps a pointer to W (not a copy): W must stay
 * valid and unchanged while it is used. Immutable after prepare, so
 * concurrent fc_qmatmul_prepared calls on one object are safe. */
typedef struct fc_qweights fc_qweights;

/* 0 with *out set, or -1 with a message in err (bad arguments, as in
 * fc_qmatmul_check, or no memory). w_row_bytes as in fc_qmatmul_args. */
int fc_qweights_prepare(fc_qweights **out, const void *w, uint32_t wtype, int64_t n, int64_t k, size_t w_row_bytes,
                        char *err, size_t errlen);
void fc_qweights_free(fc_qweights *q);

/* C[M,N] = A[M,K] · W^T as fc_qmatmul (a, lda, c, ldc likewise); 0 or -1. */
int fc_qmatmul_prepared(fc_workers *w, const fc_qweights *q, int64_t m, const float *a, int64_t lda, float *c,
                        int64_t ldc);

/* The path fc_qmatmul_prepared takes at this M: "packed 8x16" (the packed
 * kernel's tile) or fc_qmatmul_path's string. Thread-local, for the bench. */
const char *fc_qweights_path(const fc_qweights *q, int64_t m);

/* Bytes of the packed copy (0 when there is none). */
size_t fc_qweights_packed_bytes(const fc_qweights *q);

/* The smallest M that takes the packed path (measured, see qmatmul_pack.c). */
int64_t fc_qweights_min_m(void);

#endif
