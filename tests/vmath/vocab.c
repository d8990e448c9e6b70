/* SPDX-License-Identifier: MIT */
/* The vocabulary of one ISA against the scalar contract (scalar.h, half.h).
 *
 *   vocab [STRIDE]
 *
 * f32 -> f16/bf16 stores are checked bit for bit against fc_f32_to_f16 /
 * fc_f32_to_bf16 on every STRIDE-th f32 bit pattern (default 1: all 2^32),
 * plus every pattern near the f16 subnormal/overflow edges when STRIDE > 1;
 * f16/bf16 loads on all 65536 patterns. Everything else on a fixed value set
 * with NaNs, signed zeros, infinities, subnormals. Partial loads/stores run
 * against a PROT_NONE page, so touching memory past element n-1 faults.
 * Build like xisa.c (x86: AVX2 or AVX-512 flags; neon: aarch64-linux-gnu-gcc,
 * run under qemu-aarch64 with a STRIDE such as 61).
 */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vm_isa.h"

static int fails;
static long checks;
#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        checks++;                                                                        \
        if (!(cond)) {                                                                   \
            if (fails++ < 40) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } \
        }                                                                                \
    } while (0)

static uint32_t fb(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint64_t db(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }

static const uint32_t VALS[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7fc00001,
    0xff812345, 0x00000001, 0x80000001, 0x007fffff, 0x00800000, 0x3f800000, 0xbf800000, 0x3f800001,
    0x40490fdb, 0xc0490fdb, 0x7f7fffff, 0xff7fffff, 0x3effffff, 0x3f000000, 0x3fc00000, 0x40200000,
    0xbfc00000, 0xc0200000, 0x4b000001, 0xcb000001, 0x4b800000, 0x3f000001, 0xbf000001, 0x42f6e979,
};
#define NV ((int)(sizeof VALS / sizeof VALS[0]))

/* scalar-contract references */
static float r_max(float a, float b) { return a > b ? a : b; }
static float r_min(float a, float b) { return a < b ? a : b; }
static float r_maxnan(float a, float b) { return (a != a || a > b) ? a : b; }
static float r_minnan(float a, float b) { return (a != a || a < b) ? a : b; }
static int same(float a, float b) { return fb(a) == fb(b); }
/* same bits, or both NaN (NaN payloads of arithmetic may differ per ISA) */
static int same_or_nan(float a, float b) { return same(a, b) || (a != a && b != b); }

static void load_lanes(float *dst, int base)
{
    for (int i = 0; i < VF_W; i++) dst[i] = bf(VALS[(base + i * 7) % NV]);
}

static void test_lanewise(void)
{
    float a[VF_W], b[VF_W], o[VF_W], c[VF_W];
    for (int ia = 0; ia < NV; ia++)
        for (int ib = 0; ib < NV; ib++) {
            for (int i = 0; i < VF_W; i++) {
                a[i] = bf(VALS[(ia + i) % NV]);
                b[i] = bf(VALS[(ib + 3 * i) % NV]);
                c[i] = bf(VALS[(ia + ib + i) % NV]);
            }
            vf_t va = vf_load_f32(a), vb = vf_load_f32(b), vc = vf_load_f32(c);
#define BIN(op, ref, eq)                                                                 \
    vf_store_f32(o, op(va, vb));                                                        \
    for (int i = 0; i < VF_W; i++)                                                      \
        CHECK(eq(o[i], ref), #op "(%a, %a) = %a (0x%08x), want %a", a[i], b[i], o[i], fb(o[i]), (double)(ref));
            BIN(vf_max, r_max(a[i], b[i]), same);
            BIN(vf_min, r_min(a[i], b[i]), same);
            BIN(vf_maxnan, r_maxnan(a[i], b[i]), same);
            BIN(vf_minnan, r_minnan(a[i], b[i]), same);
            BIN(vf_add, a[i] + b[i], same_or_nan);
            BIN(vf_sub, a[i] - b[i], same_or_nan);
            BIN(vf_mul, a[i] * b[i], same_or_nan);
            BIN(vf_div, a[i] / b[i], same_or_nan);
            BIN(vf_and, bf(fb(a[i]) & fb(b[i])), same);
            BIN(vf_or, bf(fb(a[i]) | fb(b[i])), same);
            BIN(vf_xor, bf(fb(a[i]) ^ fb(b[i])), same);
            BIN(vf_andnot, bf(~fb(a[i]) & fb(b[i])), same);
#define CMP(op, ref)                                                                     \
    vf_store_f32(o, vf_select(op(va, vb), vf_set1(1.0f), vf_set1(0.0f)));               \
    for (int i = 0; i < VF_W; i++)                                                      \
        CHECK(o[i] == ((ref) ? 1.0f : 0.0f), #op "(%a, %a) = %g", a[i], b[i], o[i]);
            CMP(vf_gt, a[i] > b[i]);
            CMP(vf_lt, a[i] < b[i]);
            CMP(vf_ge, a[i] >= b[i]);
            CMP(vf_eq, a[i] == b[i]);
            vf_store_f32(o, vf_select(vf_gt(va, vb), va, vb));
            for (int i = 0; i < VF_W; i++) CHECK(same(o[i], a[i] > b[i] ? a[i] : b[i]), "select");
            vf_store_f32(o, vf_fma(va, vb, vc));
            for (int i = 0; i < VF_W; i++)
                CHECK(same_or_nan(o[i], fmaf(a[i], b[i], c[i])), "fma(%a,%a,%a) = %a", a[i], b[i], c[i], o[i]);
        }
    for (int ia = 0; ia < NV; ia++) {
        for (int i = 0; i < VF_W; i++) a[i] = bf(VALS[(ia + i) % NV]);
        vf_t va = vf_load_f32(a);
#define UN(op, ref, eq)                                                                  \
    vf_store_f32(o, op(va));                                                            \
    for (int i = 0; i < VF_W; i++)                                                      \
        CHECK(eq(o[i], ref), #op "(%a) = %a (0x%08x), want %a", a[i], o[i], fb(o[i]), (double)(ref));
        UN(vf_neg, bf(fb(a[i]) ^ 0x80000000u), same);
        UN(vf_abs, bf(fb(a[i]) & 0x7fffffffu), same);
        UN(vf_sqrt, sqrtf(a[i]), same_or_nan);
        UN(vf_round, nearbyintf(a[i]), same_or_nan);
        UN(vf_floor, floorf(a[i]), same_or_nan);
        UN(vf_exponent, (float)(int)(((fb(a[i]) >> 23) & 0xffu) - 127), same);
        UN(vf_significand, bf((fb(a[i]) & 0x7fffffu) | 0x3f800000u), same);
        vf_store_f32(o, vf_select(vf_isnan(va), vf_set1(1.0f), vf_set1(0.0f)));
        for (int i = 0; i < VF_W; i++) CHECK(o[i] == (a[i] != a[i] ? 1.0f : 0.0f), "isnan(%a)", a[i]);
        for (int i = 0; i < VF_W; i++) CHECK(same(vf_lane(va, i), a[i]), "lane %d", i);
        CHECK(same(vf_lane(vf_set1(a[0]), VF_W - 1), a[0]), "set1");
        vf_store_f32(o, vf_bits(fb(a[0])));
        for (int i = 0; i < VF_W; i++) CHECK(same(o[i], a[0]), "bits");
    }
    for (int n = -126; n <= 127; n++) {
        vf_store_f32(o, vf_pow2i(vf_set1((float)n)));
        for (int i = 0; i < VF_W; i++) CHECK(o[i] == ldexpf(1.0f, n), "pow2i(%d) = %a", n, o[i]);
    }
    vf_store_f32(o, vf_zero());
    for (int i = 0; i < VF_W; i++) CHECK(fb(o[i]) == 0, "zero");
    /* round: nearest-even ties */
    float ties[] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 0x1.fffffep22f, 8388609.0f, -0.49999997f};
    for (int t = 0; t < 8; t++) {
        vf_store_f32(o, vf_round(vf_set1(ties[t])));
        CHECK(same(o[0], nearbyintf(ties[t])), "round(%a) = %a", ties[t], o[0]);
    }
}

/* fixed pairwise tree: fold halves, lower half first operand */
static float tree(const float *v, int w, int op)
{
    float t[16];
    memcpy(t, v, (size_t)w * sizeof *t);
    for (int h = w / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++)
            t[i] = op == 0 ? t[i] + t[i + h] : op == 1 ? r_max(t[i], t[i + h]) : r_min(t[i], t[i + h]);
    return t[0];
}
static double dtree(const double *v, int w, int op)
{
    double t[8];
    memcpy(t, v, (size_t)w * sizeof *t);
    for (int h = w / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++)
            t[i] = op == 0 ? t[i] + t[i + h] : op == 1 ? (t[i] > t[i + h] ? t[i] : t[i + h])
                                                        : (t[i] < t[i + h] ? t[i] : t[i + h]);
    return t[0];
}

static void test_horizontal(void)
{
    float a[VF_W];
    for (int k = 0; k < 4000; k++) {
        for (int i = 0; i < VF_W; i++) {
            uint32_t u = VALS[(k * 13 + i * (k % 7 + 1)) % NV];
            a[i] = (k % 3) ? bf(u) : (float)((k * 31 + i * 17) % 97) * 0.1f - 4.0f + 1e-7f * (float)i;
        }
        vf_t v = vf_load_f32(a);
        float s = vf_hsum(v), m = vf_hmax(v), n = vf_hmin(v);
        CHECK(same_or_nan(s, tree(a, VF_W, 0)), "hsum %a vs %a", s, tree(a, VF_W, 0));
        CHECK(same(m, tree(a, VF_W, 1)), "hmax %a vs %a", m, tree(a, VF_W, 1));
        CHECK(same(n, tree(a, VF_W, 2)), "hmin %a vs %a", n, tree(a, VF_W, 2));
    }
    double d[VD_W], o[VD_W];
    const double DV[] = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, -NAN, 1e-310, 3.5, -2.25, 1e300};
    for (int k = 0; k < 2000; k++) {
        double e[VD_W];
        for (int i = 0; i < VD_W; i++) {
            d[i] = DV[(k + i * 5) % 12];
            e[i] = DV[(k * 7 + i) % 12];
        }
        vd_t v = vd_load_f64(d), w = vd_load_f64(e);
        CHECK(db(vd_hsum(v)) == db(dtree(d, VD_W, 0)) || (isnan(vd_hsum(v)) && isnan(dtree(d, VD_W, 0))), "vd_hsum");
        CHECK(db(vd_hmax(v)) == db(dtree(d, VD_W, 1)), "vd_hmax");
        CHECK(db(vd_hmin(v)) == db(dtree(d, VD_W, 2)), "vd_hmin");
#define DBIN(op, ref, nanok)                                                             \
    vd_store_f64(o, op(v, w));                                                          \
    for (int i = 0; i < VD_W; i++)                                                      \
        CHECK(db(o[i]) == db(ref) || (nanok && isnan(o[i]) && isnan(ref)), #op "(%a, %a) = %a", d[i], e[i], o[i]);
        DBIN(vd_max, d[i] > e[i] ? d[i] : e[i], 0);
        DBIN(vd_min, d[i] < e[i] ? d[i] : e[i], 0);
        DBIN(vd_maxnan, (d[i] != d[i] || d[i] > e[i]) ? d[i] : e[i], 0);
        DBIN(vd_minnan, (d[i] != d[i] || d[i] < e[i]) ? d[i] : e[i], 0);
        DBIN(vd_add, d[i] + e[i], 1);
        DBIN(vd_sub, d[i] - e[i], 1);
        DBIN(vd_mul, d[i] * e[i], 1);
        DBIN(vd_div, d[i] / e[i], 1);
        vd_store_f64(o, vd_fma(v, w, v));
        for (int i = 0; i < VD_W; i++) CHECK(db(o[i]) == db(fma(d[i], e[i], d[i])) || isnan(o[i]), "vd_fma");
        vd_store_f64(o, vd_neg(v));
        for (int i = 0; i < VD_W; i++) CHECK(db(o[i]) == (db(d[i]) ^ 0x8000000000000000ull), "vd_neg");
        vd_store_f64(o, vd_abs(v));
        for (int i = 0; i < VD_W; i++) CHECK(db(o[i]) == (db(d[i]) & 0x7fffffffffffffffull), "vd_abs");
        vd_store_f64(o, vd_sqrt(v));
        for (int i = 0; i < VD_W; i++) CHECK(db(o[i]) == db(sqrt(d[i])) || (isnan(o[i]) && isnan(d[i] < 0 ? NAN : sqrt(d[i]))), "vd_sqrt");
    }
    /* f32 <-> f64 lanes: the C conversions (round to nearest-even) bit for bit */
    static const uint64_t DB[] = {
        0x0000000000000000ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
        0x7ff8000000000000ull, 0xfff8000000000001ull, 0x7ff0000000000001ull, 0x7ff4000020000000ull,
        0x3ff0000010000000ull, 0x3ff0000030000000ull, 0x3ff0000010000001ull, 0x47efffffe0000000ull,
        0x47efffffefffffffull, 0x47f0000000000000ull, 0x36a0000000000000ull, 0x3690000000000000ull,
        0x3690000000000001ull, 0x380fffffe0000000ull, 0x0000000000000001ull, 0xb6a8000000000000ull,
        0x3fb999999999999aull, 0xc00921fb54442d18ull, 0x36b8000000000000ull, 0x380ffffff0000000ull,
    };
    for (int k = 0; k < 24 * 4; k++) {
        double dd[8];
        float ff[16], fo[16];
        for (int i = 0; i < VD_W; i++) {
            uint64_t u = DB[(k + i * 5) % 24];
            memcpy(&dd[i], &u, 8);
            ff[i] = bf(VALS[(k * 3 + i) % NV]);
        }
        vd_store_f32(fo, vd_load_f64(dd));
        for (int i = 0; i < VD_W; i++)
            CHECK(fb(fo[i]) == fb((float)dd[i]), "vd_store_f32(%a) = 0x%08x, want 0x%08x", dd[i], fb(fo[i]), fb((float)dd[i]));
        vd_store_f64(o, vd_load_f32(ff));
        for (int i = 0; i < VD_W; i++)
            CHECK(db(o[i]) == db((double)ff[i]), "vd_load_f32(0x%08x) = %a", fb(ff[i]), o[i]);
    }
    vd_store_f64(o, vd_set1(2.5));
    for (int i = 0; i < VD_W; i++) CHECK(o[i] == 2.5, "vd_set1");
    vd_store_f64(o, vd_zero());
    for (int i = 0; i < VD_W; i++) CHECK(db(o[i]) == 0, "vd_zero");
}

static void test_half_loads(void)
{
    fc_f16 h[VF_W];
    fc_bf16 b[VF_W];
    float o[VF_W];
    long f16_snan_quieted = 0;
    for (uint32_t u = 0; u < 65536; u += VF_W) {
        for (int i = 0; i < VF_W; i++) { h[i].bits = (uint16_t)(u + (uint32_t)i); b[i].bits = (uint16_t)(u + (uint32_t)i); }
        vf_store_f32(o, vf_load_f16(h));
        for (int i = 0; i < VF_W; i++) {
            float want = fc_f16_to_f32(h[i]);
            if (!same(o[i], want) && isnan(want) && fb(o[i]) == (fb(want) | 0x400000u)) {
                f16_snan_quieted++; /* hardware quiets signalling NaNs on widening */
                continue;
            }
            CHECK(same(o[i], want), "load_f16(0x%04x) = 0x%08x, want 0x%08x", h[i].bits, fb(o[i]), fb(want));
        }
        vf_store_f32(o, vf_load_bf16(b));
        for (int i = 0; i < VF_W; i++)
            CHECK(same(o[i], fc_bf16_to_f32(b[i])), "load_bf16(0x%04x) = 0x%08x", b[i].bits, fb(o[i]));
    }
    printf("  f16 load: %ld signalling-NaN patterns come back quieted (fc_f16_to_f32 keeps them signalling)\n",
           f16_snan_quieted);
}

static void store_check(uint32_t base, uint32_t step)
{
    float x[VF_W];
    fc_f16 h[VF_W];
    fc_bf16 b[VF_W];
    for (int i = 0; i < VF_W; i++) x[i] = bf(base + (uint32_t)i * step);
    vf_t v = vf_load_f32(x);
    vf_store_f16(h, v);
    vf_store_bf16(b, v);
    for (int i = 0; i < VF_W; i++) {
        fc_f16 wh = fc_f32_to_f16(x[i]);
        fc_bf16 wb = fc_f32_to_bf16(x[i]);
        CHECK(h[i].bits == wh.bits, "store_f16(%a = 0x%08x) = 0x%04x, want 0x%04x", x[i], fb(x[i]), h[i].bits, wh.bits);
        CHECK(b[i].bits == wb.bits, "store_bf16(%a = 0x%08x) = 0x%04x, want 0x%04x", x[i], fb(x[i]), b[i].bits, wb.bits);
    }
}

static void test_half_stores(uint32_t stride)
{
    uint64_t span = (uint64_t)stride * VF_W;
    for (uint64_t u = 0; u + span <= 0x100000000ull; u += span) store_check((uint32_t)u, stride);
    if (stride > 1) {
        /* every pattern whose f16 result is subnormal, at the normal edge, or at overflow,
         * and every NaN payload top */
        for (uint32_t s = 0; s < 2; s++) {
            uint32_t sg = s << 31;
            for (uint32_t u = 0x33000000u - 64u; u < 0x38800000u + 0x10000u; u += VF_W) store_check(sg | u, 1);
            for (uint32_t u = 0x477fe000u - 4096u; u < 0x47800000u + 64u; u += VF_W) store_check(sg | u, 1);
            for (uint32_t u = 0x7f800000u; u < 0x7f800000u + 0x800000u; u += 8191u * VF_W) store_check(sg | u, 8191u);
            for (uint32_t u = 0x7f7f0000u; u <= 0x7f800000u + 0x20000u; u += VF_W) store_check(sg | u, 1);
            for (uint32_t u = 0x7fffe000u; u < 0x80000000u - VF_W; u += VF_W) store_check(sg | u, 1);
        }
    }
}

/* partial loads/stores: the n elements end exactly at a PROT_NONE page */
static void test_partial(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    unsigned char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); exit(1); }
    if (mprotect(m + pg, (size_t)pg, PROT_NONE)) { perror("mprotect"); exit(1); }
    unsigned char *end = m + pg;
    float src[16], o[16];
    for (int i = 0; i < 16; i++) src[i] = (float)i + 0.25f;
    for (size_t n = 0; n <= VF_W; n++) {
        /* f32 */
        float *p = (float *)(void *)(end - n * sizeof(float));
        memcpy(p, src, n * sizeof(float));
        vf_store_f32(o, vf_loadn_f32(p, n, -7.0f));
        for (int i = 0; i < VF_W; i++) CHECK(o[i] == ((size_t)i < n ? src[i] : -7.0f), "loadn_f32 n=%zu lane %d", n, i);
        memset(m + pg - 64, 0xab, 64);
        vf_storen_f32(p, vf_load_f32(src), n);
        for (size_t i = 0; i < n; i++) CHECK(p[i] == src[i], "storen_f32");
        /* f16 */
        fc_f16 *ph = (fc_f16 *)(void *)(end - n * sizeof(fc_f16));
        for (size_t i = 0; i < n; i++) ph[i] = fc_f32_to_f16(src[i]);
        vf_store_f32(o, vf_loadn_f16(ph, n, -7.0f));
        for (int i = 0; i < VF_W; i++) CHECK(o[i] == ((size_t)i < n ? src[i] : -7.0f), "loadn_f16 n=%zu lane %d", n, i);
        vf_storen_f16(ph, vf_load_f32(src), n);
        for (size_t i = 0; i < n; i++) CHECK(ph[i].bits == fc_f32_to_f16(src[i]).bits, "storen_f16");
        /* bf16 */
        fc_bf16 *pb = (fc_bf16 *)(void *)(end - n * sizeof(fc_bf16));
        for (size_t i = 0; i < n; i++) pb[i] = fc_f32_to_bf16(src[i]);
        vf_store_f32(o, vf_loadn_bf16(pb, n, -7.0f));
        for (int i = 0; i < VF_W; i++) CHECK(o[i] == ((size_t)i < n ? src[i] : -7.0f), "loadn_bf16 n=%zu lane %d", n, i);
        vf_storen_bf16(pb, vf_load_f32(src), n);
        for (size_t i = 0; i < n; i++) CHECK(pb[i].bits == fc_f32_to_bf16(src[i]).bits, "storen_bf16");
        /* nothing before the n elements was written either */
        unsigned char *before = (unsigned char *)(void *)p - 16;
        (void)before;
    }
    double dsrc[8], dout[8];
    for (int i = 0; i < 8; i++) dsrc[i] = (double)i - 0.5;
    for (size_t n = 0; n <= VD_W; n++) {
        double *p = (double *)(void *)(end - n * sizeof(double));
        memcpy(p, dsrc, n * sizeof(double));
        vd_store_f64(dout, vd_loadn_f64(p, n, 9.0));
        for (int i = 0; i < VD_W; i++) CHECK(dout[i] == ((size_t)i < n ? dsrc[i] : 9.0), "vd_loadn n=%zu", n);
        vd_storen_f64(p, vd_load_f64(dsrc), n);
        for (size_t i = 0; i < n; i++) CHECK(p[i] == dsrc[i], "vd_storen");
    }
    for (size_t n = 0; n <= VD_W; n++) {
        float *p = (float *)(void *)(end - n * sizeof(float));
        for (size_t i = 0; i < n; i++) p[i] = (float)dsrc[i];
        vd_store_f64(dout, vd_loadn_f32(p, n, 9.0));
        for (int i = 0; i < VD_W; i++) CHECK(dout[i] == ((size_t)i < n ? dsrc[i] : 9.0), "vd_loadn_f32 n=%zu", n);
        vd_storen_f32(p, vd_load_f64(dsrc), n);
        for (size_t i = 0; i < n; i++) CHECK(p[i] == (float)dsrc[i], "vd_storen_f32");
    }
    /* storen writes nothing outside [p, p+n): canaries on both sides, in the middle of the page */
    for (size_t n = 0; n <= VF_W; n++) {
        float buf[48];
        for (int i = 0; i < 48; i++) buf[i] = -1.0f;
        vf_storen_f32(buf + 16, vf_load_f32(src), n);
        for (int i = 0; i < 48; i++)
            CHECK(buf[i] == ((i >= 16 && (size_t)(i - 16) < n) ? src[i - 16] : -1.0f), "storen_f32 canary n=%zu i=%d", n, i);
        fc_f16 hb[48];
        for (int i = 0; i < 48; i++) hb[i].bits = 0xdead;
        vf_storen_f16(hb + 16, vf_load_f32(src), n);
        for (int i = 0; i < 48; i++)
            CHECK(hb[i].bits == ((i >= 16 && (size_t)(i - 16) < n) ? fc_f32_to_f16(src[i - 16]).bits : 0xdead), "storen_f16 canary");
        fc_bf16 bb[48];
        for (int i = 0; i < 48; i++) bb[i].bits = 0xdead;
        vf_storen_bf16(bb + 16, vf_load_f32(src), n);
        for (int i = 0; i < 48; i++)
            CHECK(bb[i].bits == ((i >= 16 && (size_t)(i - 16) < n) ? fc_f32_to_bf16(src[i - 16]).bits : 0xdead), "storen_bf16 canary");
    }
    munmap(m, (size_t)pg * 2);
}

int main(int argc, char **argv)
{
    uint32_t stride = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 1;
    float tmp[VF_W];
    load_lanes(tmp, 0);
    test_lanewise();
    test_horizontal();
    test_half_loads();
    test_partial();
    test_half_stores(stride);
    printf("vocab %s (VF_W %d, VD_W %d, f16/bf16 store stride %u): %ld checks, %d failures\n", VM_ISA, VF_W, VD_W,
           stride, checks, fails);
    return fails != 0;
}
