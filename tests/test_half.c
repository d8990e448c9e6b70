/* f16 and bf16 conversions (include/fucina/half.h) against independent
 * references: the f16 decoder against the binary16 formula evaluated with
 * ldexp for all 65536 codes; the encoders against "the nearest representable
 * value, ties to even" found by searching the decoded table in double. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fucina/half.h"

static double f16_formula(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -24);
    else v = ldexp(1.0 + m / 1024.0, e - 15);
    return s ? -v : v;
}

Test(half, f16_decode_all_codes)
{
    for (uint32_t c = 0; c < 65536; c++) {
        fc_f16 h = {(uint16_t)c};
        double want = f16_formula((uint16_t)c);
        float got = fc_f16_to_f32(h);
        if (isnan(want)) {
            cr_expect(isnan(got), "code 0x%04x: want NaN", c);
            continue;
        }
        cr_expect((double)got == want && !!signbit(got) == !!signbit(want), "code 0x%04x: got %a want %a", c, got, want);
    }
}

Test(half, f16_roundtrip_all_codes)
{
    for (uint32_t c = 0; c < 65536; c++) {
        fc_f16 h = {(uint16_t)c};
        fc_f16 back = fc_f32_to_f16(fc_f16_to_f32(h));
        if (((c >> 10) & 31) == 31 && (c & 1023)) {
            cr_expect((back.bits & 0x7c00) == 0x7c00 && (back.bits & 0x3ff), "NaN 0x%04x came back as 0x%04x", c, back.bits);
            cr_expect((back.bits & 0x200), "NaN 0x%04x: quiet bit not set (0x%04x)", c, back.bits);
            continue;
        }
        cr_expect(back.bits == c, "code 0x%04x came back as 0x%04x", c, back.bits);
    }
}

/* Nearest f16 to x by search over the positive finite codes, ties to even. */
static uint16_t f16_nearest(double x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (a >= 65520.0) return sign | 0x7c00; /* 65504 + half an ulp (16) rounds to Inf */
    uint16_t lo = 0, hi = 0x7bff;
    while (lo < hi) { /* largest code with value <= a */
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (f16_formula(mid) <= a) lo = mid; else hi = (uint16_t)(mid - 1);
    }
    if (lo == 0x7bff) return sign | lo;
    double dl = a - f16_formula(lo), du = f16_formula((uint16_t)(lo + 1)) - a;
    uint16_t pick = dl < du ? lo : du < dl ? (uint16_t)(lo + 1) : ((lo & 1) ? (uint16_t)(lo + 1) : lo);
    return sign | pick;
}

Test(half, f32_to_f16_is_nearest_even)
{
    fct_rng r = {fct_seed_of("f32_to_f16")};
    for (int i = 0; i < 400000; i++) {
        float x;
        uint32_t u = (uint32_t)fct_next(&r);
        if (i & 1) {
            /* exponents around the f16 range, including subnormals and overflow */
            u = (u & 0x807fffffu) | ((uint32_t)(96 + (fct_next(&r) % 50)) << 23);
        } else if (i % 4 == 2) {
            /* exact halfway points and their neighbours */
            uint16_t c = (uint16_t)(fct_next(&r) & 0x7bff);
            double mid = (f16_formula(c) + f16_formula((uint16_t)(c + 1))) / 2;
            x = (float)mid;
            memcpy(&u, &x, 4);
            u += (uint32_t)(fct_next(&r) % 3) - 1;
        }
        memcpy(&x, &u, 4);
        if (isnan(x)) continue;
        uint16_t want = f16_nearest((double)x);
        uint16_t got = fc_f32_to_f16(x).bits;
        cr_expect(got == want, "x=%a (0x%08x): got 0x%04x want 0x%04x", x, u, got, want);
    }
}

Test(half, f32_to_f16_specials)
{
    cr_expect(fc_f32_to_f16(INFINITY).bits == 0x7c00);
    cr_expect(fc_f32_to_f16(-INFINITY).bits == 0xfc00);
    cr_expect(fc_f32_to_f16(-0.0f).bits == 0x8000);
    uint16_t n = fc_f32_to_f16(NAN).bits;
    cr_expect((n & 0x7c00) == 0x7c00 && (n & 0x3ff), "NaN -> 0x%04x", n);
    /* a NaN whose payload lives only in the low 13 bits must not become Inf */
    uint16_t n2 = fc_f32_to_f16(fc_bits_f32(0x7f800001u)).bits;
    cr_expect((n2 & 0x7c00) == 0x7c00 && (n2 & 0x3ff), "sNaN 0x7f800001 -> 0x%04x", n2);
}

Test(half, f32_to_bf16_is_nearest_even)
{
    fct_rng r = {fct_seed_of("f32_to_bf16")};
    for (int i = 0; i < 400000; i++) {
        uint32_t u = (uint32_t)fct_next(&r);
        if (i % 3 == 0) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
        float x = fc_bits_f32(u);
        fc_bf16 got = fc_f32_to_bf16(x);
        if (isnan(x)) {
            cr_expect(isnan(fc_bf16_to_f32(got)), "NaN 0x%08x -> 0x%04x", u, got.bits);
            continue;
        }
        /* candidates: truncation toward zero, and the next code away from zero */
        uint32_t t = u & 0xffff0000u;
        double lo = fc_bits_f32(t), hi = fc_bits_f32(t + 0x10000u);
        /* past the largest finite bf16 the next step (with an unbounded
         * exponent) is 2^128, which then overflows to Inf */
        if (isnan(hi) || isinf(hi)) hi = copysign(ldexp(1.0, 128), lo);
        double dl = fabs((double)x - lo), dh = fabs(hi - (double)x);
        uint16_t want = (uint16_t)(t >> 16);
        if (dh < dl || (dh == dl && (want & 1))) want = (uint16_t)((t + 0x10000u) >> 16);
        cr_expect(got.bits == want, "x=%a (0x%08x): got 0x%04x want 0x%04x", x, u, got.bits, want);
    }
}
