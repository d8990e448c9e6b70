/* SPDX-License-Identifier: MIT */
/* Accuracy sweep of vmath.h against libm in double precision.
 *
 *   acc FUNC LO HI [STRIDE]
 *
 * Evaluates vf_FUNC on every STRIDE-th f32 from LO to HI (inclusive, in the
 * order of the floats; STRIDE 1 = every float) and reports the largest error
 * in ulps of the correctly rounded result (ulp of the exact value's binade,
 * never below 2^-149), with the reference computed by the double-precision
 * libm function. Also counts NaN/Inf/zero-sign disagreements.
 *
 * Build (x86, AVX-512; results are bit-identical on every ISA, see xisa.c):
 *   gcc -std=c11 -O2 -ffp-contract=off -mavx512f -mavx512bw -mavx512dq -mavx512vl \
 *       -mfma -mf16c -Wall -Wextra -Werror -I include -I templates/_vocab \
 *       tests/vmath/acc.c -o acc -lm -lpthread
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm_isa.h"

/* -DNTHREADS=1 runs without threads (qemu-user here hangs in pthread_create) */
#ifndef NTHREADS
#define NTHREADS 2
#endif

typedef vf_t (*vfn)(vf_t);
typedef double (*dfn)(double);

static vf_t w_exp(vf_t x) { return vf_exp(x); }
static vf_t w_log(vf_t x) { return vf_log(x); }
static vf_t w_sin(vf_t x) { return vf_sin(x); }
static vf_t w_cos(vf_t x) { return vf_cos(x); }
static vf_t w_tanh(vf_t x) { return vf_tanh(x); }
static vf_t w_erf(vf_t x) { return vf_erf(x); }

static const struct { const char *name; vfn v; dfn d; } FNS[] = {
    {"exp", w_exp, exp}, {"log", w_log, log}, {"sin", w_sin, sin},
    {"cos", w_cos, cos}, {"tanh", w_tanh, tanh}, {"erf", w_erf, erf},
};

static int64_t ord_of(float f)
{
    uint32_t u; memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}
static float f_of(int64_t o)
{
    uint32_t u = o < 0 ? (0x80000000u | (uint32_t)(-o)) : (uint32_t)o;
    float f; memcpy(&f, &u, 4);
    return f;
}

/* error of y in ulps of the exact value ref; -1 when both are the same NaN/Inf */
static double ulp_err(float y, double ref)
{
    if (isnan(ref) || isnan(y)) return (isnan(ref) && isnan(y)) ? 0.0 : INFINITY;
    double yd = y;
    if (isinf(y)) {
        if ((float)ref == y) return 0.0;
        yd = copysign(0x1p128, y);
    }
    if (isinf(ref)) return yd == ref ? 0.0 : INFINITY;
    int ex;
    (void)frexp(ref, &ex);
    int ue = ex - 24;
    if (ue < -149) ue = -149;
    if (ref == 0.0) ue = -149;
    return fabs(yd - ref) / ldexp(1.0, ue);
}

typedef struct {
    int fn;
    int64_t lo, hi, stride;
    double maxerr;
    float argmax, ymax;
    double refmax;
    uint64_t n, n_half, n_one, n_two, n_special, n_zsign;
    float first_special;
} job_t;

static void *run(void *arg)
{
    job_t *j = arg;
    vfn v = FNS[j->fn].v;
    dfn d = FNS[j->fn].d;
    float xb[VF_W], yb[VF_W];
    j->maxerr = -1.0;
    for (int64_t o = j->lo; o <= j->hi;) {
        int k = 0;
        for (; k < VF_W && o <= j->hi; k++, o += j->stride) xb[k] = f_of(o);
        for (int i = k; i < VF_W; i++) xb[i] = xb[0];
        vf_store_f32(yb, v(vf_load_f32(xb)));
        for (int i = 0; i < k; i++) {
            double ref = d((double)xb[i]);
            double e = ulp_err(yb[i], ref);
            j->n++;
            if (e > 0.5) j->n_half++;
            if (e > 1.0) j->n_one++;
            if (e > 2.0) j->n_two++;
            if (isinf(e)) {
                if (!j->n_special) j->first_special = xb[i];
                j->n_special++;
                continue;
            }
            if (yb[i] == 0.0f && (float)ref == 0.0f && signbit(yb[i]) != signbit(ref)) j->n_zsign++;
            if (e > j->maxerr) {
                j->maxerr = e; j->argmax = xb[i]; j->ymax = yb[i]; j->refmax = ref;
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) { fprintf(stderr, "usage: acc FUNC LO HI [STRIDE]\n"); return 2; }
    int fn = -1;
    for (int i = 0; i < (int)(sizeof FNS / sizeof FNS[0]); i++)
        if (!strcmp(argv[1], FNS[i].name)) fn = i;
    if (fn < 0) { fprintf(stderr, "unknown function %s\n", argv[1]); return 2; }
    float lo = strtof(argv[2], NULL), hi = strtof(argv[3], NULL);
    int64_t stride = argc > 4 ? strtoll(argv[4], NULL, 0) : 1;
    int64_t olo = ord_of(lo), ohi = ord_of(hi);
    if (lo == 0.0f && signbit(lo)) olo = 0; /* -0 and +0 share ordinal 0 */
    job_t jobs[NTHREADS];
    pthread_t th[NTHREADS];
    int64_t span = (ohi - olo) / stride + 1, per = (span + NTHREADS - 1) / NTHREADS;
    for (int t = 0; t < NTHREADS; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].fn = fn;
        jobs[t].stride = stride;
        jobs[t].lo = olo + (int64_t)t * per * stride;
        int64_t h = olo + ((int64_t)(t + 1) * per - 1) * stride;
        jobs[t].hi = h > ohi ? ohi : h;
        if (NTHREADS == 1) run(&jobs[t]);
        else pthread_create(&th[t], NULL, run, &jobs[t]);
    }
    job_t all; memset(&all, 0, sizeof all); all.maxerr = -1.0;
    for (int t = 0; t < NTHREADS; t++) {
        if (NTHREADS > 1) pthread_join(th[t], NULL);
        job_t *j = &jobs[t];
        if (j->maxerr > all.maxerr) {
            all.maxerr = j->maxerr; all.argmax = j->argmax; all.ymax = j->ymax; all.refmax = j->refmax;
        }
        if (j->n_special && !all.n_special) all.first_special = j->first_special;
        all.n += j->n; all.n_half += j->n_half; all.n_one += j->n_one; all.n_two += j->n_two;
        all.n_special += j->n_special; all.n_zsign += j->n_zsign;
    }
    printf("%s [%a, %a] stride %lld (%s): n=%llu max %.4f ulp at x=%a (%.9g) y=%a ref=%.17g | "
           ">0.5ulp %.4f%% >1ulp %llu >2ulp %llu special-mismatch %llu zero-sign %llu",
           argv[1], lo, hi, (long long)stride, VM_ISA, (unsigned long long)all.n, all.maxerr,
           all.argmax, all.argmax, all.ymax, all.refmax, 100.0 * (double)all.n_half / (double)all.n,
           (unsigned long long)all.n_one, (unsigned long long)all.n_two,
           (unsigned long long)all.n_special, (unsigned long long)all.n_zsign);
    if (all.n_special) printf(" (first at x=%a)", all.first_special);
    printf("\n");
    return 0;
}
