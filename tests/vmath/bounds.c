/* SPDX-License-Identifier: MIT */
/* Fast ctest of every error bound templates/_vocab/vmath.h documents.
 *
 *   bounds [SCALE]
 *
 * Reuses acc.c's sweep and reference (libm in double, ulps of the correctly
 * rounded result) with a coarse stride over each documented range (SCALE
 * divides the strides; default 1), and asserts the measured maximum is within
 * the documented figure (rounded up in its last printed digit). Also checks
 * the documented edges (overflow at 88.72284, +0 below the gradual underflow,
 * exact oddness of tanh/erf, sin/cos finite in [-1, 1] above 2^21, erf's
 * absolute error). Exit 0 all bounds hold, 1 otherwise, 77 if this CPU lacks
 * the ISA the binary was compiled for. Built by tests/CMakeLists.txt once per
 * ISA arm (avx2, avx512; neon on aarch64).
 */
#define main fcv_acc_main
#include "acc.c"
#undef main

typedef struct {
    const char *fn;
    float lo, hi;
    int64_t stride;   /* in floats (ordinals) */
    double bound;     /* documented max, rounded up in its last digit */
    const char *doc;
} sweep_t;

/* Strides are odd and not multiples of small powers of two, so the samples
 * walk through every mantissa pattern class; ~1e5..1e6 samples per range. */
static const sweep_t SWEEPS[] = {
    {"exp", -87.0f, 88.0f, 2003, 1.0135, "[-87, 88]: max 1.013 ulp"},
    {"exp", -104.0f, -87.0f, 97, 0.7495, "[-104, -87]: max 0.749 ulp"},
    {"exp", 88.0f, 89.0f, 7, 0.8865, "[88, 89]: max 0.886 ulp"},
    {"log", 0x1p-149f, 0x1.fffffep127f, 2003, 0.9025, "every positive finite float: max 0.902 ulp"},
    {"sin", -10000.0f, 10000.0f, 2003, 1.3015, "|x| <= 10000: sin 1.301 ulp"},
    {"cos", -10000.0f, 10000.0f, 2003, 1.2875, "|x| <= 10000: cos 1.287 ulp"},
    {"sin", 10000.0f, 0x1p20f, 211, 1.5265, "10000 < |x| <= 2^20: sin 1.526 ulp"},
    {"sin", -0x1p20f, -10000.0f, 211, 1.5265, "10000 < |x| <= 2^20: sin 1.526 ulp"},
    {"cos", 10000.0f, 0x1p20f, 211, 1.5375, "10000 < |x| <= 2^20: cos 1.537 ulp"},
    {"cos", -0x1p20f, -10000.0f, 211, 1.5375, "10000 < |x| <= 2^20: cos 1.537 ulp"},
    {"sin", 0x1p20f, 0x1p21f, 13, 2.15, "2^20 < |x| <= 2^21: about 2.1 ulp"},
    {"cos", 0x1p20f, 0x1p21f, 13, 2.15, "2^20 < |x| <= 2^21: about 2.1 ulp"},
    {"tanh", 0.0f, 10.0f, 1009, 1.3325, "[0, 10]: max 1.332 ulp"},
    {"tanh", -10.0f, 0.0f, 1009, 1.3325, "negatives: same by symmetry"},
    {"erf", 0.0f, 4.0f, 1009, 1.1065, "[0, 4]: max 1.106 ulp"},
    {"erf", -4.0f, 0.0f, 1009, 1.1065, "negatives: same by symmetry"},
};

static int fails;

static float ev(int fn, float x)
{
    float xb[VF_W], yb[VF_W];
    for (int i = 0; i < VF_W; i++) xb[i] = x;
    vf_store_f32(yb, FNS[fn].v(vf_load_f32(xb)));
    return yb[0];
}
static int fn_ix(const char *name)
{
    for (int i = 0; i < (int)(sizeof FNS / sizeof FNS[0]); i++)
        if (!strcmp(name, FNS[i].name)) return i;
    abort();
}
static void check(int ok, const char *what, float x, float y)
{
    if (!ok) { printf("FAIL %s: x=%a y=%a\n", what, x, y); fails++; }
}

int main(int argc, char **argv)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
#if defined(__AVX512F__)
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512vl")) {
        printf("skip: this CPU has no AVX-512 (F/BW/DQ/VL)\n");
        return 77;
    }
#else
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("skip: this CPU has no AVX2+FMA\n");
        return 77;
    }
#endif
#endif
    int64_t scale = argc > 1 ? strtoll(argv[1], NULL, 0) : 1;
    if (scale < 1) scale = 1;
    for (size_t s = 0; s < sizeof SWEEPS / sizeof SWEEPS[0]; s++) {
        const sweep_t *w = &SWEEPS[s];
        job_t j;
        memset(&j, 0, sizeof j);
        j.fn = fn_ix(w->fn);
        j.lo = ord_of(w->lo);
        j.hi = ord_of(w->hi);
        j.stride = w->stride / scale > 0 ? w->stride / scale : 1;
        run(&j);
        int ok = j.maxerr <= w->bound && j.n_special == 0 && j.n_zsign == 0;
        printf("%s %s [%a, %a] stride %lld (%s): n=%llu max %.4f ulp at x=%a (bound %.4f: %s)",
               ok ? "ok  " : "FAIL", w->fn, w->lo, w->hi, (long long)j.stride, VM_ISA,
               (unsigned long long)j.n, j.maxerr, j.argmax, w->bound, w->doc);
        if (j.n_special) printf(" special-mismatch %llu (first at x=%a)", (unsigned long long)j.n_special, j.first_special);
        if (j.n_zsign) printf(" zero-sign %llu", (unsigned long long)j.n_zsign);
        printf("\n");
        if (!ok) fails++;
    }

    /* documented edges and special ranges */
    int fe = fn_ix("exp"), fl = fn_ix("log"), fs = fn_ix("sin"), fc = fn_ix("cos");
    int ft = fn_ix("tanh"), ff = fn_ix("erf");
    float x, y;
    x = 88.72283f; y = ev(fe, x); check(isfinite(y), "exp finite up to 88.72284", x, y);
    x = nextafterf(88.72283f, INFINITY); y = ev(fe, x);
    check(isinf(y) && y > 0, "exp overflows to +Inf above 88.72284", x, y);
    check(ev(fe, INFINITY) == INFINITY, "exp(+Inf) = +Inf", INFINITY, ev(fe, INFINITY));
    y = ev(fe, -INFINITY); check(y == 0.0f && !signbit(y), "exp(-Inf) = +0", -INFINITY, y);
    y = ev(fe, -103.9f); check(y > 0.0f && y < FLT_MIN, "exp gradual underflow (subnormal) at -103.9", -103.9f, y);
    for (x = -103.98f; x >= -200.0f; x -= 0.37f) {
        y = ev(fe, x);
        if (!(y == 0.0f && !signbit(y))) { check(0, "exp = +0 below -103.972", x, y); break; }
    }
    y = ev(fl, 0.0f); check(y == -INFINITY, "log(+0) = -Inf", 0.0f, y);
    y = ev(fl, -0.0f); check(y == -INFINITY, "log(-0) = -Inf", -0.0f, y);
    y = ev(fl, -1.0f); check(isnan(y), "log(x < 0) = NaN", -1.0f, y);
    y = ev(fl, INFINITY); check(y == INFINITY, "log(+Inf) = +Inf", INFINITY, y);
    y = ev(fs, -0.0f); check(y == 0.0f && signbit(y), "sin(-0) = -0", -0.0f, y);
    y = ev(fc, -0.0f); check(y == 1.0f, "cos(-0) = 1", -0.0f, y);
    check(isnan(ev(fs, INFINITY)) && isnan(ev(fc, -INFINITY)), "sin/cos(+-Inf) = NaN", INFINITY, ev(fs, INFINITY));
    /* above 2^21: wrong but finite and in [-1, 1] */
    for (int64_t o = ord_of(0x1p21f); o <= ord_of(FLT_MAX); o += 100003) {
        float xs = f_of(o);
        for (int sg = 0; sg < 2; sg++, xs = -xs) {
            float a = ev(fs, xs), b = ev(fc, xs);
            if (!(a >= -1.0f && a <= 1.0f) || !(b >= -1.0f && b <= 1.0f)) {
                check(0, "sin/cos above 2^21 finite in [-1, 1]", xs, !(a >= -1.0f && a <= 1.0f) ? a : b);
                o = INT64_MAX - 200000;
                break;
            }
        }
    }
    y = ev(ft, -0.0f); check(y == 0.0f && signbit(y), "tanh(-0) = -0", -0.0f, y);
    check(ev(ft, INFINITY) == 1.0f && ev(ft, -INFINITY) == -1.0f, "tanh(+-Inf) = +-1", INFINITY, ev(ft, INFINITY));
    check(ev(ff, INFINITY) == 1.0f && ev(ff, -INFINITY) == -1.0f, "erf(+-Inf) = +-1", INFINITY, ev(ff, INFINITY));
    /* exactly odd (every 1009th float up to the clamps and past them), erf's
     * absolute error <= 6.6e-8 on [0, 4] */
    double erf_abs = 0.0;
    for (int64_t o = 0; o <= ord_of(20.0f); o += 1009) {
        float xs = f_of(o);
        float t = ev(ft, xs), tn = ev(ft, -xs), e = ev(ff, xs), en = ev(ff, -xs);
        if (!(tn == -t && signbit(tn) != signbit(t))) { check(0, "tanh exactly odd", xs, tn); break; }
        if (!(en == -e && signbit(en) != signbit(e))) { check(0, "erf exactly odd", xs, en); break; }
        if (xs <= 4.0f) { double d = fabs((double)e - erf((double)xs)); if (d > erf_abs) erf_abs = d; }
    }
    printf("%s erf absolute error on [0, 4]: %.3g (bound 6.6e-8)\n", erf_abs <= 6.6e-8 ? "ok  " : "FAIL", erf_abs);
    if (!(erf_abs <= 6.6e-8)) fails++;
    printf("vmath bounds (%s): %d failures\n", VM_ISA, fails);
    (void)fcv_acc_main;
    return fails != 0;
}
