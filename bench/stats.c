/* SPDX-License-Identifier: MIT */
/* Summary statistics of repeated timings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fcb.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fcb_median(const double *v, size_t n)
{
    if (n == 0) return NAN;
    double tmp[FCB_MAX_REPEATS];
    if (n > FCB_MAX_REPEATS) n = FCB_MAX_REPEATS;
    memcpy(tmp, v, n * sizeof *v);
    qsort(tmp, n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

double fcb_min(const double *v, size_t n)
{
    double m = n ? v[0] : NAN;
    for (size_t i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

double fcb_max(const double *v, size_t n)
{
    double m = n ? v[0] : NAN;
    for (size_t i = 1; i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

double fcb_cv(const double *v, size_t n)
{
    if (n < 2) return 0;
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++) mean += v[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
    var /= (double)(n - 1);
    return mean > 0 ? sqrt(var) / mean : 0;
}
