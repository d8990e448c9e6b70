/* SPDX-License-Identifier: MIT */
/* The OpenBLAS provider (CMake -DFUCINA_BLAS=openblas defines
 * FUCINA_HAVE_OPENBLAS): cblas_sgemm for f32 operands that each have a unit
 * stride, used in auto mode only where it measured faster than our own. */
#include "exec/gemm_internal.h"

#ifdef FUCINA_HAVE_OPENBLAS
#include <cblas.h>
#include <stdatomic.h>

/* Not in every cblas.h (the netlib one lacks it); part of OpenBLAS's ABI. */
extern void openblas_set_num_threads(int num_threads);

int fc_gemm_openblas_available(void) { return 1; }

/* Row-major operand with unit stride along one axis: its CBLAS transpose
 * flag and leading dimension (which CBLAS requires >= the row length). */
static int layout(int64_t rs, int64_t cs, int64_t rows, int64_t cols, enum CBLAS_TRANSPOSE *t, int64_t *ld)
{
    if (cs == 1 && rs >= (cols > 1 ? cols : 1)) {
        *t = CblasNoTrans;
        *ld = rs;
        return 1;
    }
    if (rs == 1 && cs >= (rows > 1 ? rows : 1)) {
        *t = CblasTrans;
        *ld = cs;
        return 1;
    }
    return 0;
}

int fc_gemm_openblas_fits(const fc_gemm_args *g)
{
    enum CBLAS_TRANSPOSE t;
    int64_t ld;
    const int64_t lim = 0x7fffffff;
    return g->btype == FC_GEMM_B_F32 && g->m <= lim && g->n <= lim && g->k <= lim && g->ldc <= lim &&
           layout(g->rsa, g->csa, g->m, g->k, &t, &ld) && ld <= lim && layout(g->rsb, g->csb, g->k, g->n, &t, &ld) &&
           ld <= lim;
}

/* The measured rule (fucina-bench ops, OpenBLAS 0.3.21 pthread, Ice Lake
 * 2 vCPUs, shared machine at load 4-9, ours/OpenBLAS rate ratio, ABAB
 * medians; 1-thread figures also from min CPU time per call):
 *
 *   shape (M x N x K, B as noted)         1 thread       2 threads
 *   M = 1 (weights [N, K] or [K, N])      3.1-3.9x       5.1-8.1x
 *   M = 8, 32 x 3072x1024 / 1024x3072     1.0-1.5x       1.9-3.8x
 *   M = 128                               1.0-1.2x       1.0-1.5x
 *   256^2, 512^2, 1024^2                  1.04-1.31x     1.0-1.41x
 *   M = 512 x 3072x1024 / 1024x3072       1.03-1.14x     0.80-1.03x (5 runs, median 0.89)
 *   2048^2                                1.00-1.18x     0.60-0.98x
 *
 * The choice may depend on the shape only (never on the thread count: the
 * bits of C must not), and the runtime uses every core by default, so
 * OpenBLAS takes the large products where it led at 2 threads: M >= 512 and
 * 2*M*N*K >= 3 GFLOP (M = 512 LLM projections, 2048^2; not 1024^2). */
int fc_gemm_openblas_preferred(const fc_gemm_args *g)
{
    double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
    return g->m >= 512 && flops >= 3e9;
}

int fc_gemm_openblas(fc_workers *w, const fc_gemm_args *g)
{
    /* OpenBLAS runs its own threads: as many as our pool has (a process-wide
     * setting, so set only when it changes). */
    static _Atomic int threads_set;
    int threads = fc_workers_count(w);
    if (atomic_exchange(&threads_set, threads) != threads) openblas_set_num_threads(threads);
    enum CBLAS_TRANSPOSE ta = CblasNoTrans, tb = CblasNoTrans;
    int64_t lda = 0, ldb = 0;
    layout(g->rsa, g->csa, g->m, g->k, &ta, &lda);
    layout(g->rsb, g->csb, g->k, g->n, &tb, &ldb);
    cblas_sgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, 1.0f, g->a, (int)lda, (const float *)g->b,
                (int)ldb, g->accumulate ? 1.0f : 0.0f, g->c, (int)g->ldc);
    return 0;
}

#else

int fc_gemm_openblas_available(void) { return 0; }
int fc_gemm_openblas_fits(const fc_gemm_args *g)
{
    (void)g;
    return 0;
}
int fc_gemm_openblas_preferred(const fc_gemm_args *g)
{
    (void)g;
    return 0;
}
int fc_gemm_openblas(fc_workers *w, const fc_gemm_args *g)
{
    (void)w;
    (void)g;
    return -1;
}

#endif
