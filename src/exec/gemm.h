/* SPDX-License-Identifier: MIT */
/* f32 matrix multiplication over the generated micro-kernels.
 *
 *   C[M,N] (+)= A[M,K] · B[K,N]
 *
 * A is read as A[i,k] = a[i*rsa + k*csa] and B as B[k,j] = b[k*rsb + j*csb]
 * (element strides, so transposed and strided views need no copy); C is
 * row-major with leading dimension ldc. The blocked path packs A and B into
 * MR/NR panels (the slot's tile string gives MR x NR), loops KC/MC/NC blocks
 * and runs the micro-kernel, with edge tiles through a scratch tile. M == 1
 * (and other skinny shapes) stream B once through dot/axpy kernels instead:
 * that case is memory-bound and packing would double the traffic.
 *
 * Accumulation is f32 throughout; the order of the K loop is fixed for a
 * given shape, so results do not depend on the thread count. */
#ifndef FC_EXEC_GEMM_H
#define FC_EXEC_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/dtype.h"
#include "fucina/half.h"
#include "exec/workers.h"

typedef enum fc_gemm_btype {
    FC_GEMM_B_F32 = 0,
    FC_GEMM_B_F16,  /* B elements are fc_f16, widened exactly while packing */
    FC_GEMM_B_BF16, /* B elements are fc_bf16, widened exactly while packing */
} fc_gemm_btype;

/* The B type that reads a tensor of dtype dt: f16 and bf16 as themselves,
 * anything else as f32 (callers hand the GEMM only those three). */
static inline fc_gemm_btype fc_gemm_btype_of(fc_dtype dt)
{
    return dt == FC_F16 ? FC_GEMM_B_F16 : dt == FC_BF16 ? FC_GEMM_B_BF16 : FC_GEMM_B_F32;
}

typedef struct fc_gemm_args {
    int64_t m, n, k;
    const float *a;
    int64_t rsa, csa;
    const void *b;          /* float, fc_f16 or fc_bf16 per btype */
    fc_gemm_btype btype;
    int64_t rsb, csb;
    float *c;
    int64_t ldc;
    int accumulate;         /* 0: C = A·B; 1: C += A·B */
} fc_gemm_args;

/* Returns 0, or -1 when scratch memory cannot be allocated or the arguments
 * are invalid (negative sizes, ldc < n, NULL operands): C is then untouched.
 * `w` may be NULL (one thread). */
int fc_gemm_f32(fc_workers *w, const fc_gemm_args *g);

/* Batched: `batch` independent products, operand i at a + i*bsa,
 * b + i*bsb (elements of the B type), c + i*bsc. */
int fc_gemm_f32_batched(fc_workers *w, const fc_gemm_args *g, int64_t batch,
                        int64_t bsa, int64_t bsb, int64_t bsc);

/* Which implementation fc_gemm_f32 chooses for a shape ("own-blocked",
 * "own-gemv", "openblas"; "none" when M, N or K is 0); for the bench and
 * tests. The choice never depends on the thread count. */
const char *fc_gemm_provider_for(const fc_gemm_args *g);

/* Force a provider for tests and the bench: "auto" (default), "own",
 * "openblas" (returns -1 if not built with it). Not thread-safe. */
int fc_gemm_set_provider(const char *name);

#endif
