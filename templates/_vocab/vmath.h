/* Shared f32 vector math, written only in vocabulary primitives.
 *
 * Included at the end of every SIMD vocabulary (avx2.h, avx512.h, neon.h);
 * the scalar vocabulary uses libm instead and is the specification.
 *
 * Bit-identical on every ISA. Only these primitives are used: vf_zero, set1,
 * add, sub, mul, div, fma, neg, abs, max, min, gt, lt, ge, eq, isnan,
 * select, and, or, bits, round, floor, pow2i, exponent, significand. Each is
 * exact or one IEEE-754 operation rounded once to nearest-even (FMA is a
 * single rounding everywhere), so AVX2, AVX-512 and NEON give the same bits
 * lane for lane, with any compiler and optimisation level (contraction off),
 * under the default FP environment: round to nearest, subnormals kept (no
 * FTZ/DAZ in MXCSR; FPCR.FZ = 0, DN = 0). No NaN produced inside escapes:
 * inputs are clamped first and special lanes are replaced at the end, so
 * NaN bits never depend on the ISA's NaN rules:
 *   - an input NaN comes back quieted with its payload (x + x);
 *   - a NaN made from a non-NaN input (log(x < 0), sin/cos(+-Inf)) is the
 *     positive default NaN 0x7fc00000.
 * Checked by tests/vmath/xisa.c (1e6 inputs incl. specials; gcc and clang,
 * -O0..-O3, avx2 / avx512 / neon under qemu: identical files).
 *
 * Errors below are MEASURED: ulps of the correctly rounded f32 result (the
 * ulp of the exact value's binade, 2^-149 for subnormal results), against
 * libm's double-precision function, on every f32 of the domain unless a
 * stride is given (tests/vmath/acc.c; tests/vmath/sweep.sh reruns them all).
 * Polynomials are minimax fits with f32 coefficients
 * (tests/vmath/fit_coeffs.py).
 *
 * vf_exp   x clamped to [-104, 89]; n = round(x log2(e)); r = x - n ln2 with
 *          ln2 in two parts (the first FMA step is exact), |r| <= ln2/2;
 *          exp(r) = 1 + r + r^2 Q(r), Q degree 4. The result is scaled by
 *          2^floor(n/2) * 2^(n - floor(n/2)), so n in [-150, 128] needs no
 *          special case and only the last multiply rounds: overflow to +Inf
 *          exactly where the rounded result exceeds FLT_MAX (x > 88.72284),
 *          GRADUAL underflow (subnormal results, one rounding) down to
 *          x ~ -103.972, +0 below. exp(-Inf) = +0, exp(+Inf) = +Inf.
 *            [-87, 88], every float:            max 1.013 ulp
 *            [-104, -87] (subnormal results):   max 0.749 ulp
 *            [88, 89] (up to overflow):         max 0.886 ulp
 * vf_log   x < 2^-126 (subnormal) is first scaled by 2^23. x = 2^e m with
 *          m in (sqrt(1/2), sqrt(2)], f = m - 1 (exact);
 *          log1p(f) = f + f^2 (-1/2 + f P(f)), P degree 8; + e ln2 (two
 *          parts, FMA). log(+-0) = -Inf, log(x < 0) = NaN, log(+Inf) = +Inf.
 *            every positive finite float (subnormals included): max 0.902 ulp
 * vf_sin,  q = round(x 2/pi); r = x - q pi/2 with pi/2 in 3 parts
 * vf_cos   (Cody-Waite with FMA; the first step is exact). Where
 *          |r| >= |q| 2^-22 the rounding error of the second step is
 *          recovered exactly and carried as r = rh + rl; nearer the zeros of
 *          the function the 3-part chain keeps the relative accuracy.
 *          sin r = r + r^3 S(r^2), S degree 3; cos r = 1 - r^2/2 + r^4 C(r^2),
 *          C degree 2 (both on |r| <= 1.02 pi/4), chosen and signed by q mod 4.
 *          sin(+-0) = +-0, cos(+-0) = 1, +-Inf -> NaN.
 *            |x| <= 10000, every float:        sin 1.301, cos 1.287 ulp
 *            10000 < |x| <= 2^20, every 7th:   sin 1.526, cos 1.537 ulp
 *            2^20 < |x| <= 2^21, sampled:      about 2.1 ulp
 *          Above 2^21 the f32 product x 2/pi no longer pins q (r leaves the
 *          polynomials' range): results are WRONG, but always finite and in
 *          [-1, 1]. No large-argument (Payne-Hanek) reduction.
 * vf_tanh  |x| < 0.625: x + x^3 T(x^2), T degree 6 (relative accuracy down
 *          to subnormals); else 1 - 2/(exp(2|x|) + 1) with |x| clamped to 10
 *          (tanh rounds to 1 from |x| >= 9.01). The sign is copied from x:
 *          exactly odd, tanh(-0) = -0, tanh(+-Inf) = +-1.
 *            [0, 10], every float (negatives: same by symmetry): max 1.332 ulp
 * vf_erf   |x| < 0.921875: x + x E(x^2), E degree 6; else
 *          1 - exp(L(|x| - 0.921875)), L degree 9 fitted to log(erfc) with
 *          weight erfc (absolute erf error), |x| clamped to 4 (erf rounds to
 *          1 from |x| >= 3.92). Sign copied from x: exactly odd,
 *          erf(+-Inf) = +-1.
 *            [0, 4], every float (negatives: same by symmetry):
 *            max 1.106 ulp (absolute error <= 6.6e-8)
 */
#ifndef FCK_VOCAB_VMATH_H
#define FCK_VOCAB_VMATH_H

#define FCK_VM_C(x) vf_set1(x)

/* ln2 = LN2_HI + LN2_LO: 0x1.62e43p-1f, -0x1.05c61p-29f.
 * pi/2 = 0x1.921fb6p+0f - 0x1.777a5cp-25f - 0x1.ee59dap-50f (+ 1.1e-23). */

/* exp for x already clamped to [-104, 89] (not NaN); shared by tanh and erf. */
static inline vf_t fck_vm_exp_core(vf_t x)
{
    vf_t n = vf_round(vf_mul(x, FCK_VM_C(0x1.715476p+0f)));
    vf_t r = vf_fma(n, FCK_VM_C(-0x1.62e43p-1f), x); /* exact */
    r = vf_fma(n, FCK_VM_C(0x1.05c61p-29f), r);
    /* exp(r) - 1 - r = r^2 Q(r) */
    vf_t q = vf_fma(FCK_VM_C(0x1.6a7a3ap-10f), r, FCK_VM_C(0x1.123844p-7f));
    q = vf_fma(q, r, FCK_VM_C(0x1.555886p-5f));
    q = vf_fma(q, r, FCK_VM_C(0x1.555494p-3f));
    q = vf_fma(q, r, FCK_VM_C(0x1.fffffcp-2f));
    vf_t p = vf_fma(vf_mul(r, r), q, r);
    vf_t y = vf_add(FCK_VM_C(1.0f), p);
    /* 2^n in two factors, each in [2^-75, 2^64]: y * 2^n1 is exact, the last
     * multiply rounds once (gradual underflow, overflow to +Inf). */
    vf_t n1 = vf_floor(vf_mul(n, FCK_VM_C(0.5f)));
    return vf_mul(vf_mul(y, vf_pow2i(n1)), vf_pow2i(vf_sub(n, n1)));
}

static inline vf_t vf_exp(vf_t x)
{
    /* vf_max(NaN, c) is c: no NaN inside; the NaN lane is put back at the end. */
    vf_t xc = vf_min(vf_max(x, FCK_VM_C(-104.0f)), FCK_VM_C(89.0f));
    return vf_select(vf_isnan(x), vf_add(x, x), fck_vm_exp_core(xc));
}

static inline vf_t vf_log(vf_t x)
{
    vf_mask_t tiny = vf_lt(x, FCK_VM_C(0x1p-126f));
    vf_t xs = vf_select(tiny, vf_mul(x, FCK_VM_C(0x1p23f)), x);
    vf_t e = vf_sub(vf_exponent(xs), vf_select(tiny, FCK_VM_C(23.0f), vf_zero()));
    vf_t m = vf_significand(xs);
    vf_mask_t hi = vf_gt(m, FCK_VM_C(0x1.6a09e6p+0f));
    m = vf_select(hi, vf_mul(m, FCK_VM_C(0.5f)), m);
    e = vf_select(hi, vf_add(e, FCK_VM_C(1.0f)), e);
    vf_t f = vf_sub(m, FCK_VM_C(1.0f)); /* exact */
    /* log1p(f) = f + f^2 (-1/2 + f P(f)) */
    vf_t p = vf_fma(FCK_VM_C(0x1.b5a984p-5f), f, FCK_VM_C(-0x1.bf2902p-4f));
    p = vf_fma(p, f, FCK_VM_C(0x1.eff058p-4f));
    p = vf_fma(p, f, FCK_VM_C(-0x1.0103e2p-3f));
    p = vf_fma(p, f, FCK_VM_C(0x1.23036ep-3f));
    p = vf_fma(p, f, FCK_VM_C(-0x1.552f18p-3f));
    p = vf_fma(p, f, FCK_VM_C(0x1.99a54p-3f));
    p = vf_fma(p, f, FCK_VM_C(-0x1.00007p-2f));
    p = vf_fma(p, f, FCK_VM_C(0x1.555548p-2f));
    p = vf_fma(p, f, FCK_VM_C(-0.5f));
    vf_t r = vf_fma(vf_mul(f, f), p, f);
    /* + e ln2, low part first */
    vf_t t = vf_fma(e, FCK_VM_C(-0x1.05c61p-29f), r);
    vf_t y = vf_fma(e, FCK_VM_C(0x1.62e43p-1f), t);
    y = vf_select(vf_eq(x, vf_bits(0x7f800000u)), x, y);
    y = vf_select(vf_eq(x, vf_zero()), vf_bits(0xff800000u), y);
    y = vf_select(vf_lt(x, vf_zero()), vf_bits(0x7fc00000u), y);
    return vf_select(vf_isnan(x), vf_add(x, x), y);
}

/* log1p(y) = log(u) * (y / (u - 1)) with u = 1 + y rounded: the rounding error
 * of 1 + y cancels between log(u) and u - 1 (Goldberg 1991, theorem 4), so
 * the result stays accurate where e.g. softplus computes log(1 + tiny). When
 * u == 1 exactly, log1p(y) = y to within an ulp. Error: about 2 ulp above
 * vf_log's (the product and quotient add one rounding each). */
static inline vf_t vf_log1p(vf_t y)
{
    vf_t u = vf_add(FCK_VM_C(1.0f), y);
    vf_t um1 = vf_sub(u, FCK_VM_C(1.0f));
    vf_t r = vf_mul(vf_log(u), vf_div(y, um1));
    r = vf_select(vf_eq(um1, vf_zero()), y, r);
    return vf_select(vf_eq(u, vf_bits(0x7f800000u)), u, r); /* +Inf: Inf/Inf would be NaN */
}

/* sin (qoff = 0) or cos (qoff = 1: the quadrant shifted by one). */
static inline vf_t fck_vm_sincos(vf_t x, float qoff)
{
    vf_t q = vf_round(vf_mul(x, FCK_VM_C(0x1.45f306p-1f)));
    vf_t r1 = vf_fma(q, FCK_VM_C(-0x1.921fb6p+0f), x); /* exact for |q| < 2^22 */
    vf_t r2 = vf_fma(q, FCK_VM_C(0x1.777a5cp-25f), r1);
    vf_t r3 = vf_fma(q, FCK_VM_C(0x1.ee59dap-50f), r2);
    /* Where |r2| >= 2 |q P2|, r1 - r2 is exact (Sterbenz) and e is the rounding
     * error of r2 (plus the third part): r = r2 + e to ~48 bits. Elsewhere
     * (near a zero of sin or cos) use the 3-part chain r3, relatively accurate. */
    vf_t e = vf_fma(q, FCK_VM_C(0x1.777a5cp-25f), vf_sub(r1, r2));
    e = vf_fma(q, FCK_VM_C(0x1.ee59dap-50f), e);
    vf_mask_t big = vf_ge(vf_abs(r2), vf_mul(vf_abs(q), FCK_VM_C(0x1p-22f)));
    vf_t rh = vf_select(big, r2, r3);
    vf_t rl = vf_select(big, e, vf_zero());
    vf_t z = vf_mul(rh, rh);
    /* sin(rh + rl) ~ rh + (rh z S(z) + rl) */
    vf_t s = vf_fma(FCK_VM_C(0x1.7c83c2p-19f), z, FCK_VM_C(-0x1.a05c16p-13f));
    s = vf_fma(s, z, FCK_VM_C(0x1.111178p-7f));
    s = vf_fma(s, z, FCK_VM_C(-0x1.555556p-3f));
    s = vf_add(rh, vf_fma(vf_mul(rh, z), s, rl));
    vf_t c = vf_fma(FCK_VM_C(0x1.9a497ep-16f), z, FCK_VM_C(-0x1.6c0dfp-10f));
    c = vf_fma(c, z, FCK_VM_C(0x1.55554ep-5f));
    c = vf_fma(c, z, FCK_VM_C(-0.5f));
    /* cos(rh + rl) ~ 1 + (z C'(z) - zl/2), zl = (rh + rl)^2 - z to first order */
    vf_t zl = vf_fma(rh, vf_add(rl, rl), vf_fma(rh, rh, vf_neg(z)));
    c = vf_add(FCK_VM_C(1.0f), vf_fma(c, z, vf_mul(FCK_VM_C(-0.5f), zl)));
    /* quadrant qm = (q + qoff) mod 4: odd -> cos polynomial, >= 2 -> negate */
    vf_t qq = vf_add(q, FCK_VM_C(qoff));
    vf_t qm = vf_sub(qq, vf_mul(FCK_VM_C(4.0f), vf_floor(vf_mul(qq, FCK_VM_C(0.25f)))));
    vf_t odd = vf_sub(qm, vf_mul(FCK_VM_C(2.0f), vf_floor(vf_mul(qm, FCK_VM_C(0.5f)))));
    vf_t y = vf_select(vf_eq(odd, FCK_VM_C(1.0f)), c, s);
    y = vf_min(vf_max(y, FCK_VM_C(-1.0f)), FCK_VM_C(1.0f)); /* |x| > 2^21: finite, bounded */
    y = vf_select(vf_ge(qm, FCK_VM_C(2.0f)), vf_neg(y), y);
    y = vf_select(vf_eq(vf_abs(x), vf_bits(0x7f800000u)), vf_bits(0x7fc00000u), y);
    return vf_select(vf_isnan(x), vf_add(x, x), y);
}

static inline vf_t vf_sin(vf_t x)
{
    /* r + r^3 S gives +0 for r = -0; keep the sign of a zero input */
    return vf_select(vf_eq(x, vf_zero()), x, fck_vm_sincos(x, 0.0f));
}

static inline vf_t vf_cos(vf_t x) { return fck_vm_sincos(x, 1.0f); }

static inline vf_t vf_tanh(vf_t x)
{
    vf_t ax = vf_abs(x);
    vf_t z = vf_mul(ax, ax);
    vf_t p = vf_fma(FCK_VM_C(-0x1.6d1958p-10f), z, FCK_VM_C(0x1.070bf6p-8f));
    p = vf_fma(p, z, FCK_VM_C(-0x1.2c145ep-7f));
    p = vf_fma(p, z, FCK_VM_C(0x1.67aafep-6f));
    p = vf_fma(p, z, FCK_VM_C(-0x1.ba3292p-5f));
    p = vf_fma(p, z, FCK_VM_C(0x1.111164p-3f));
    p = vf_fma(p, z, FCK_VM_C(-0x1.555556p-2f));
    vf_t ys = vf_fma(vf_mul(ax, z), p, ax);
    vf_t axc = vf_min(ax, FCK_VM_C(10.0f)); /* NaN -> 10 */
    vf_t e = fck_vm_exp_core(vf_add(axc, axc));
    vf_t yl = vf_sub(FCK_VM_C(1.0f), vf_div(FCK_VM_C(2.0f), vf_add(e, FCK_VM_C(1.0f))));
    vf_t y = vf_select(vf_lt(ax, FCK_VM_C(0.625f)), ys, yl);
    y = vf_or(y, vf_and(x, vf_bits(0x80000000u))); /* y >= 0: copy the sign of x */
    return vf_select(vf_isnan(x), vf_add(x, x), y);
}

static inline vf_t vf_erf(vf_t x)
{
    vf_t ax = vf_abs(x);
    vf_t z = vf_mul(ax, ax);
    vf_t p = vf_fma(FCK_VM_C(0x1.4f562ep-14f), z, FCK_VM_C(-0x1.a606c2p-11f));
    p = vf_fma(p, z, FCK_VM_C(0x1.5449e4p-8f));
    p = vf_fma(p, z, FCK_VM_C(-0x1.b80118p-6f));
    p = vf_fma(p, z, FCK_VM_C(0x1.ce2d64p-4f));
    p = vf_fma(p, z, FCK_VM_C(-0x1.81274p-2f));
    p = vf_fma(p, z, FCK_VM_C(0x1.06eba8p-3f));
    vf_t ys = vf_fma(ax, p, ax);
    /* erfc(|x|) = exp(L(t)), t = |x| - 0.921875 in [0, 3.078125] (NaN -> 4) */
    vf_t t = vf_max(vf_sub(vf_min(ax, FCK_VM_C(4.0f)), FCK_VM_C(0.921875f)), vf_zero());
    vf_t l = vf_fma(FCK_VM_C(-0x1.6b2908p-12f), t, FCK_VM_C(0x1.59dd82p-9f));
    l = vf_fma(l, t, FCK_VM_C(-0x1.08b7b6p-7f));
    l = vf_fma(l, t, FCK_VM_C(0x1.ab06d2p-7f));
    l = vf_fma(l, t, FCK_VM_C(-0x1.b623bap-7f));
    l = vf_fma(l, t, FCK_VM_C(0x1.0cbaecp-6f));
    l = vf_fma(l, t, FCK_VM_C(-0x1.7b362ap-5f));
    l = vf_fma(l, t, FCK_VM_C(-0x1.aa6574p-1f));
    l = vf_fma(l, t, FCK_VM_C(-0x1.4106d4p+1f));
    l = vf_fma(l, t, FCK_VM_C(-0x1.a60826p+0f));
    vf_t yl = vf_sub(FCK_VM_C(1.0f), fck_vm_exp_core(l));
    vf_t y = vf_select(vf_lt(ax, FCK_VM_C(0.921875f)), ys, yl);
    y = vf_or(y, vf_and(x, vf_bits(0x80000000u)));
    return vf_select(vf_isnan(x), vf_add(x, x), y);
}

#undef FCK_VM_C
#endif /* FCK_VOCAB_VMATH_H */
