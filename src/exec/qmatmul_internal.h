/* SPDX-License-Identifier: MIT */
/* What qmatmul.c and qmatmul_kernels.c share: the integer kernels of one
 * weight format, as resolved by dispatch now. Not installed. */
#ifndef FC_EXEC_QMATMUL_INTERNAL_H
#define FC_EXEC_QMATMUL_INTERNAL_H

#include <stddef.h>

#include "quant/quant.h"

/* A register-tile kernel (generated family qgemm): for i < mr, j < nr,
 *   c[i*ldc + j] = dot(activation row i, weight row j)
 * over nb weight blocks; rows at a + i*a_stride and w + j*w_stride (bytes),
 * activations in the weight format's dot partner. */
typedef void (*fc_qgemm_fn)(size_t nb, const void *w, size_t w_stride, const void *a, size_t a_stride, float *c,
                            size_t ldc);
/* An activation quantizer (generated family qquant): n f32 -> partner blocks. */
typedef void (*fc_qquant_fn)(size_t n, const float *x, void *y);

#define FC_QM_MAX_TILES 4

typedef struct fc_qm_plan {
    const fcq_traits *wt, *at; /* weight format, activation (partner) format */
    int ntiles;                /* 0: no integer kernel for this format */
    struct {
        size_t mr, nr;
        fc_qgemm_fn fn;
    } tile[FC_QM_MAX_TILES];   /* mr descending (qgemm MR x NR, qgemms if any, then qgemv 1 x NR') */
    fc_qquant_fn quant;
    char name[32];             /* "int 8x4/4x4/1x4": qgemm / qgemms (if used) / qgemv tiles */
} fc_qm_plan;

/* Fill the plan for wtype from the dispatch table (ntiles 0 when the format
 * has no integer kernel, or when the forced-decode hook is on). wt and at
 * are set whenever wtype is a block format; returns -1 when it is not. */
int fc_qm_plan_for(uint32_t wtype, fc_qm_plan *p);

extern int fc_qm_force_decode_flag;

#endif
