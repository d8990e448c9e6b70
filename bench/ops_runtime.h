/* SPDX-License-Identifier: MIT */
/* The runtime-op part of `fucina-bench ops` (ops_runtime.c). */
#ifndef FCB_OPS_RUNTIME_H
#define FCB_OPS_RUNTIME_H

#include <stdio.h>

#include "fcb.h"

typedef struct fcb_ops_cfg {
    FILE *out;
    const char *const *filters;
    int nfilters;
    const int *threads;
    int nthreads;
    long rounds;
    double min_ms;
    int quick;
} fcb_ops_cfg;

typedef struct fcb_ops_result {
    const char *name;
    int threads;
    double median_ns, cv, gflops, gbps, frac;
    const char *roof;
} fcb_ops_result;

#define FCB_OPS_RUNTIME_MAX 64

/* Run the cases the filters keep; 0 on success. */
int fcb_ops_runtime(const fcb_ops_cfg *cfg, fcb_ops_result *res, size_t max, size_t *n);
/* Append one JSON record per result to an open array. */
void fcb_ops_runtime_json(fcb_json *j, const fcb_ops_result *res, size_t n);

#endif
