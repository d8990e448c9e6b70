/* SPDX-License-Identifier: MIT */
/* The benchmark table's types: what the generated bench/fck_bench_table.c
 * fills and bench_main.c reads. */
#ifndef FCB_BENCH_TABLE_H
#define FCB_BENCH_TABLE_H

#include <stddef.h>

#include "fucina/gen/fck_kernels.h"

/* Buffers and scalars a runner passes to its arm. Buffers hold at least n
 * elements of the arm's dtype (rows*cols for row shapes), with valid inputs. */
typedef struct fcb_args {
    size_t n, rows, cols;
    void *x, *y, *z, *w;
    const float *mask;
    float alpha;
    double alpha_d;
    double *sink; /* runners of value-returning arms (probes) add the value here */
} fcb_args;

typedef enum fcb_shape {
    FCB_SHAPE_VECTOR, /* n elements */
    FCB_SHAPE_ROWS,   /* rows x cols */
    FCB_SHAPE_GEMM,   /* a register tile, kc deep */
    FCB_SHAPE_PROBE,  /* a roofline probe (registry/bench.yaml): run by `roofline`, not `kernels` */
} fcb_shape;

typedef struct fcb_arm {
    const char *symbol, *slot, *kernel, *family, *dtype;
    size_t elem_size;
    fck_isa isa;
    const char *tile; /* "64" or "6x32" */
    int is_dispatch;
    double read, write, flops; /* elements of dtype read/written, and flops, per element */
    fcb_shape shape;
    void (*run)(const fcb_args *a);
} fcb_arm;

extern const fcb_arm fcb_arms[];
extern const size_t fcb_arm_count;

#endif
