/* SPDX-License-Identifier: MIT */
/* GGML block formats: our reference codecs against ggml itself (the oracle,
 * libggml-base loaded through oracle/ggml_oracle.h).
 *
 * Data-driven over fcq_traits, so every format and every encoder that appears
 * in the table is checked without editing this file:
 *   - decoders vs dequantize_row_<fmt>, bit for bit (NaN compared by bits
 *     too), on random blocks with random finite f16 scales across the
 *     exponent range, fully random blocks, all-zero blocks, the largest and
 *     smallest (subnormal) scales, -0 scales; unaligned input, guarded output;
 *   - encoders vs quantize_row_<fmt>_ref, byte for byte, on 240 rows of 1, 2
 *     and 7 blocks from ten distributions (normal, uniform, zeros, constant,
 *     one huge outlier, subnormals, exact rounding ties, -0.0, mixed block
 *     scales, wide exponent range), then decode(encode(x)) vs ggml's decode
 *     of its own encoding;
 *   - the traits vs ggml_blck_size / ggml_type_size / ggml_type_name and
 *     ggml-cpu's vec_dot_type for every id; fcq_type_parse round trips and
 *     rejections;
 *   - fc_f16_to_f32 vs ggml_fp16_to_fp32 on all 65536 patterns (every f16
 *     scale goes through it).
 * q8_1 has no ggml decoder: its blocks are checked against ggml's q8_0
 * decoder on the same d and quants. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fucina/half.h"
#include "ggml_oracle.h"
#include "quant/quant.h"

/* Prototypes from ggml/include/ggml.h, ggml-cpu.h (called through dlsym). */
typedef void (*ggml_dequant_fn)(const void *x, float *y, int64_t k);
typedef void (*ggml_quant_fn)(const float *x, void *y, int64_t k);
typedef int64_t (*ggml_blck_size_fn)(int type);
typedef size_t (*ggml_type_size_fn)(int type);
typedef const char *(*ggml_type_name_fn)(int type);
typedef float (*ggml_fp16_to_fp32_fn)(uint16_t h);
struct ggml_type_traits_cpu {
    void (*from_float)(const float *x, void *y, int64_t k);
    void (*vec_dot)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by, int nrc);
    int vec_dot_type; /* enum ggml_type */
    int64_t nrows;
};
typedef const struct ggml_type_traits_cpu *(*ggml_get_type_traits_cpu_fn)(int type);

#define GGML_TYPE_F32 0

static void need_oracle(void)
{
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("%s", why);
}

static void *sym(const char *name)
{
    void *p = fco_ggml_sym(name);
    cr_assert(p != NULL, "the ggml oracle does not export %s", name);
    return p;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void hexdump(char *out, size_t cap, const unsigned char *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 3 < cap; i++) o += (size_t)snprintf(out + o, cap - o, "%02x", p[i]);
}

/* ---- block generation -------------------------------------------------------- */

/* Where a format keeps its binary16 scales (byte offsets in the block); the
 * other bytes are quants, sign bits or small integer scales, any value legal. */
typedef struct scale_fields {
    int n;
    size_t off[2];
} scale_fields;

static scale_fields f16_fields(fcq_type t)
{
    switch (t) {
    case FCQ_Q4_0: return (scale_fields){1, {offsetof(fcq_block_q4_0, d)}};
    case FCQ_Q4_1: return (scale_fields){2, {offsetof(fcq_block_q4_1, d), offsetof(fcq_block_q4_1, m)}};
    case FCQ_Q5_0: return (scale_fields){1, {offsetof(fcq_block_q5_0, d)}};
    case FCQ_Q5_1: return (scale_fields){2, {offsetof(fcq_block_q5_1, d), offsetof(fcq_block_q5_1, m)}};
    case FCQ_Q8_0: return (scale_fields){1, {offsetof(fcq_block_q8_0, d)}};
    case FCQ_Q8_1: return (scale_fields){2, {offsetof(fcq_block_q8_1, d), offsetof(fcq_block_q8_1, s)}};
    case FCQ_Q2_K: return (scale_fields){2, {offsetof(fcq_block_q2_K, d), offsetof(fcq_block_q2_K, dmin)}};
    case FCQ_Q3_K: return (scale_fields){1, {offsetof(fcq_block_q3_K, d)}};
    case FCQ_Q4_K: return (scale_fields){2, {offsetof(fcq_block_q4_K, d), offsetof(fcq_block_q4_K, dmin)}};
    case FCQ_Q5_K: return (scale_fields){2, {offsetof(fcq_block_q5_K, d), offsetof(fcq_block_q5_K, dmin)}};
    case FCQ_Q6_K: return (scale_fields){1, {offsetof(fcq_block_q6_K, d)}};
    case FCQ_Q8_K: return (scale_fields){0, {0}}; /* f32 d: see fill_blocks */
    case FCQ_IQ2_XXS: return (scale_fields){1, {offsetof(fcq_block_iq2_xxs, d)}};
    case FCQ_IQ2_XS: return (scale_fields){1, {offsetof(fcq_block_iq2_xs, d)}};
    case FCQ_IQ2_S: return (scale_fields){1, {offsetof(fcq_block_iq2_s, d)}};
    case FCQ_IQ3_XXS: return (scale_fields){1, {offsetof(fcq_block_iq3_xxs, d)}};
    case FCQ_IQ3_S: return (scale_fields){1, {offsetof(fcq_block_iq3_s, d)}};
    case FCQ_IQ1_S: return (scale_fields){1, {offsetof(fcq_block_iq1_s, d)}};
    case FCQ_IQ1_M: return (scale_fields){0, {0}}; /* f16 spread over nibbles: see fill_blocks */
    case FCQ_IQ4_NL: return (scale_fields){1, {offsetof(fcq_block_iq4_nl, d)}};
    case FCQ_IQ4_XS: return (scale_fields){1, {offsetof(fcq_block_iq4_xs, d)}};
    case FCQ_TQ1_0: return (scale_fields){1, {offsetof(fcq_block_tq1_0, d)}};
    case FCQ_TQ2_0: return (scale_fields){1, {offsetof(fcq_block_tq2_0, d)}};
    case FCQ_MXFP4: return (scale_fields){0, {0}}; /* E8M0 byte: every value legal */
    case FCQ_NVFP4: return (scale_fields){0, {0}}; /* UE4M3 bytes: every value legal */
    case FCQ_Q1_0: return (scale_fields){1, {offsetof(fcq_block_q1_0, d)}};
    case FCQ_Q2_0: return (scale_fields){1, {offsetof(fcq_block_q2_0, d)}};
    }
    return (scale_fields){0, {0}};
}

typedef enum block_mode {
    MODE_RANDOM_FINITE, /* random bytes, finite f16 scales over the whole exponent range */
    MODE_FULLY_RANDOM,  /* every byte random (Inf/NaN scales included: all patterns are legal) */
    MODE_ZERO,          /* all-zero blocks */
    MODE_MAX_SCALE,     /* +-65504 scales */
    MODE_MIN_SCALE,     /* +-2^-24, the smallest subnormal */
    MODE_SUBNORMAL,     /* random subnormal scales */
    MODE_NEG_ZERO,      /* -0 scales */
    MODE_COUNT
} block_mode;

static const char *const mode_names[MODE_COUNT] = {"random finite scales", "fully random", "all zero",
                                                   "max scales",           "min scales",   "subnormal scales",
                                                   "-0 scales"};

static uint16_t scale_for(block_mode m, fct_rng *r)
{
    uint16_t sign = (uint16_t)((fct_next(r) & 1) << 15);
    switch (m) {
    case MODE_RANDOM_FINITE: {
        uint16_t e = (uint16_t)(fct_next(r) % 31); /* 0..30: subnormal up to the largest binade */
        return (uint16_t)(sign | e << 10 | (fct_next(r) & 0x3ff));
    }
    case MODE_MAX_SCALE: return (uint16_t)(sign | 0x7bff);
    case MODE_MIN_SCALE: return (uint16_t)(sign | 0x0001);
    case MODE_SUBNORMAL: return (uint16_t)(sign | (1 + fct_next(r) % 0x3ff));
    case MODE_NEG_ZERO: return 0x8000;
    case MODE_FULLY_RANDOM:
    case MODE_ZERO:
    case MODE_COUNT: break;
    }
    return 0;
}

static void fill_blocks(const fcq_traits *t, block_mode m, unsigned char *p, size_t nblk, fct_rng *r)
{
    const size_t bb = t->block_bytes;
    if (m == MODE_ZERO) {
        memset(p, 0, nblk * bb);
        return;
    }
    for (size_t i = 0; i < nblk * bb; i++) p[i] = (unsigned char)fct_next(r);
    if (m == MODE_FULLY_RANDOM) return;
    scale_fields sf = f16_fields(t->type);
    for (size_t b = 0; b < nblk; b++) {
        unsigned char *blk = p + b * bb;
        for (int k = 0; k < sf.n; k++) put16(blk + sf.off[k], scale_for(m, r));
        if (t->type == FCQ_IQ1_M) {
            /* The f16 scale is the top nibbles of the four u16 scale words. */
            uint16_t s = scale_for(m, r);
            unsigned char *sc = blk + offsetof(fcq_block_iq1_m, scales);
            for (int w = 0; w < 4; w++) sc[2 * w + 1] = (unsigned char)((sc[2 * w + 1] & 0x0f) | ((s >> (4 * w)) & 0xf) << 4);
        } else if (t->type == FCQ_Q8_K) {
            /* f32 d: a finite value of the f16-like ranges and beyond */
            uint16_t s = scale_for(m, r);
            float d = fc_f16_to_f32((fc_f16){s});
            if (m == MODE_RANDOM_FINITE) d = (float)ldexp(fct_uniform(r, -1.0, 1.0), (int)(fct_next(r) % 200) - 140);
            memcpy(blk + offsetof(fcq_block_q8_K, d), &d, 4);
        }
    }
}

/* ---- decoders ------------------------------------------------------------------ */

/* Compares n floats by bit pattern; on mismatch fails naming format, mode,
 * block, element and the block's bytes. */
static void expect_same_bits(const fcq_traits *t, const char *what, const float *got, const float *want, size_t n,
                             const unsigned char *blocks, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        if (bits_of(got[i]) == bits_of(want[i])) continue;
        size_t b = i / t->block_elems;
        char hex[2 * 300 + 1] = {0};
        hexdump(hex, sizeof hex, blocks + b * t->block_bytes, t->block_bytes);
        cr_assert_fail("%s decode (%s, seed %llx): element %zu (block %zu, elem %zu): got %08x (%a), ggml %08x (%a)\nblock: %s",
                t->name, what, (unsigned long long)seed, i, b, i % t->block_elems, (unsigned)bits_of(got[i]),
                (double)got[i], (unsigned)bits_of(want[i]), (double)want[i], hex);
        return;
    }
}

/* q8_1 -> q8_0 blocks with the same d and quants (ggml has no q8_1 decoder). */
static void q8_1_as_q8_0(const unsigned char *src, unsigned char *dst, size_t nblk)
{
    for (size_t b = 0; b < nblk; b++) {
        memcpy(dst + b * 34, src + b * 36, 2);
        memcpy(dst + b * 34 + 2, src + b * 36 + 4, 32);
    }
}

/* Runs the oracle's decoder (q8_1 through q8_0) on nblk blocks. */
static void oracle_decode(const fcq_traits *t, const unsigned char *blocks, size_t nblk, float *out)
{
    char name[64];
    if (t->type == FCQ_Q8_1) {
        unsigned char *tmp = malloc(nblk * 34);
        cr_assert(tmp);
        q8_1_as_q8_0(blocks, tmp, nblk);
        ((ggml_dequant_fn)sym("dequantize_row_q8_0"))(tmp, out, (int64_t)(nblk * 32));
        free(tmp);
        return;
    }
    snprintf(name, sizeof name, "dequantize_row_%s", t->name);
    ((ggml_dequant_fn)sym(name))(blocks, out, (int64_t)(nblk * t->block_elems));
}

static void check_decoder(const fcq_traits *t)
{
    enum { NBLK = 16, ROUNDS = 48 };
    const size_t n = NBLK * t->block_elems;
    fct_buf src = fct_buf_new(NBLK * t->block_bytes, 1); /* odd address: no alignment assumed */
    fct_buf got = fct_buf_new(n * sizeof(float), 4);
    float *want = malloc(n * sizeof(float));
    cr_assert(want);
    for (int mode = 0; mode < MODE_COUNT; mode++) {
        int rounds = mode == MODE_ZERO || mode == MODE_NEG_ZERO ? 1 : ROUNDS;
        for (int r = 0; r < rounds; r++) {
            char seed_name[96];
            snprintf(seed_name, sizeof seed_name, "decode/%s/%d/%d", t->name, mode, r);
            uint64_t seed = fct_seed_of(seed_name);
            fct_rng rng = {seed};
            fill_blocks(t, (block_mode)mode, src.data, NBLK, &rng);
            t->decode(src.data, (float *)got.data, n);
            oracle_decode(t, src.data, NBLK, want);
            cr_assert(fct_buf_guards_ok(&got), "%s decode wrote outside its %zu floats", t->name, n);
            expect_same_bits(t, mode_names[mode], (const float *)got.data, want, n, src.data, seed);
        }
    }
    free(want);
    fct_buf_free(&src);
    fct_buf_free(&got);
}

Test(quant_codec, decoders_match_ggml_bit_for_bit)
{
    need_oracle();
    int seen = 0;
    for (uint32_t id = 0; id < FCQ_TYPE_LIMIT; id++) {
        const fcq_traits *t = fcq_traits_of(id);
        if (!t) continue;
        cr_assert(t->decode != NULL, "%s has no decoder", t->name);
        check_decoder(t);
        seen++;
    }
    cr_assert_eq(seen, 27, "expected 27 block formats, the table has %d", seen);
}

/* Every f16 scale goes through fc_f16_to_f32: it must equal ggml's
 * conversion on all 65536 patterns (NaN payloads included). */
Test(quant_codec, f16_to_f32_matches_ggml_on_every_pattern)
{
    need_oracle();
    ggml_fp16_to_fp32_fn ref = (ggml_fp16_to_fp32_fn)sym("ggml_fp16_to_fp32");
    for (uint32_t h = 0; h < 65536; h++) {
        float got = fc_f16_to_f32((fc_f16){(uint16_t)h}), want = ref((uint16_t)h);
        cr_assert_eq(bits_of(got), bits_of(want), "f16 %04x: got %08x, ggml %08x", (unsigned)h,
                     (unsigned)bits_of(got), (unsigned)bits_of(want));
    }
}

/* Every stored f16 scale goes through fc_f32_to_f16 (the encoders only add
 * ggml's canonical NaN): it must round as ggml_fp32_to_fp16 does. Checked on
 * every f16 value, the midpoints between neighbours and one f32 ulp either
 * side of each, plus a stride through all 2^32 patterns. (The whole space was
 * checked once by hand: no difference outside NaN payloads.) */
Test(quant_codec, f32_to_f16_rounds_as_ggml)
{
    need_oracle();
    typedef uint16_t (*ggml_fp32_to_fp16_fn)(float f);
    ggml_fp32_to_fp16_fn ref = (ggml_fp32_to_fp16_fn)sym("ggml_fp32_to_fp16");
    for (uint64_t k = 0; k < (1ull << 32) + 6 * 65536; k++) {
        uint32_t u;
        if (k < 6 * 65536) {
            const uint16_t h = (uint16_t)(k / 6);
            const uint32_t hb = bits_of(fc_f16_to_f32((fc_f16){h}));
            const uint32_t next = bits_of(fc_f16_to_f32((fc_f16){(uint16_t)(h + 1)}));
            const uint32_t mid = (uint32_t)(((uint64_t)hb + next) / 2); /* same sign, adjacent: the midpoint's pattern */
            static const int deltas[6] = {0, -1, 1, 0, -1, 1};
            u = (uint32_t)((int64_t)(k % 6 < 3 ? hb : mid) + deltas[k % 6]);
        } else {
            u = (uint32_t)((k - 6 * 65536) * 4093u); /* stride through every exponent */
            if (k - 6 * 65536 > (1ull << 32) / 4093) break;
        }
        const float f = fc_bits_f32(u);
        if (f != f) continue; /* NaN payloads: ggml canonicalises them (encoders do too) */
        const uint16_t got = fc_f32_to_f16(f).bits, want = ref(f);
        cr_assert_eq(got, want, "f32 %08x: f16 %04x, ggml %04x", (unsigned)u, (unsigned)got, (unsigned)want);
    }
}

/* ---- encoders ------------------------------------------------------------------- */

typedef enum dist {
    DIST_NORMAL,
    DIST_UNIFORM,
    DIST_ZEROS,
    DIST_CONSTANT,
    DIST_OUTLIER,
    DIST_SUBNORMAL,
    DIST_TIES,
    DIST_NEG_ZERO,
    DIST_MIXED_SCALES,
    DIST_WIDE,
    DIST_COUNT
} dist;

static const char *const dist_names[DIST_COUNT] = {"normal",    "uniform", "zeros",    "constant",     "outlier",
                                                   "subnormal", "ties",    "-0.0 mix", "mixed scales", "wide range"};

static double normal(fct_rng *r)
{
    double u = fct_uniform(r, 0x1p-53, 1.0), v = fct_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void fill_row(dist d, float *x, size_t n, size_t blk, fct_rng *r)
{
    switch (d) {
    case DIST_NORMAL: {
        double s = ldexp(1.0, (int)(fct_next(r) % 16) - 8);
        for (size_t i = 0; i < n; i++) x[i] = (float)(s * normal(r));
        break;
    }
    case DIST_UNIFORM: {
        double a = fct_uniform(r, 0.01, 100.0);
        for (size_t i = 0; i < n; i++) x[i] = (float)fct_uniform(r, -a, a);
        break;
    }
    case DIST_ZEROS: memset(x, 0, n * sizeof *x); break;
    case DIST_CONSTANT: {
        float c = (float)(fct_uniform(r, -4.0, 4.0));
        for (size_t i = 0; i < n; i++) x[i] = c;
        break;
    }
    case DIST_OUTLIER: {
        static const float huge[] = {1e3f, 1e6f, 7e4f, 3e38f};
        for (size_t i = 0; i < n; i++) x[i] = (float)normal(r);
        size_t at = (size_t)(fct_next(r) % n);
        x[at] = huge[fct_next(r) % 4] * (fct_next(r) & 1 ? -1.0f : 1.0f);
        break;
    }
    case DIST_SUBNORMAL:
        for (size_t i = 0; i < n; i++) x[i] = (float)(fct_uniform(r, -1.0, 1.0) * 0x1p-127);
        break;
    case DIST_TIES:
        /* Per block, a power-of-two step h and an extreme of M*h with M one
         * of the formats' divisors (127, 8, 16, 15, 31, ...), so d = M*h / M
         * is h exactly and x / d = x * (1/d) lands exactly on k + 0.5 for the
         * other elements, multiples of h/2: where roundf (half away from
         * zero), nearest-even and the +0.5 truncation trick disagree.
         * Symmetric blocks suit q8_0/q4_0/q5_0, one-sided [0, M*h] blocks
         * the min/max formats. */
        for (size_t b = 0; b < n / blk; b++) {
            static const int ms[] = {127, 8, 16, 15, 31, 3, 2, 1, 6, 4};
            const int m = ms[fct_next(r) % 10], e = (int)(fct_next(r) % 20) - 10;
            const int one_sided = (int)(fct_next(r) & 1);
            float *xb = x + b * blk;
            for (size_t i = 0; i < blk; i++) {
                int k = one_sided ? (int)(fct_next(r) % (uint64_t)(2 * m + 1))
                                  : (int)(fct_next(r) % (uint64_t)(4 * m + 1)) - 2 * m;
                xb[i] = (float)ldexp(k, e - 1);
            }
            xb[fct_next(r) % blk] = (float)ldexp(one_sided ? m : (fct_next(r) & 1 ? m : -m), e);
            if (one_sided) xb[fct_next(r) % blk] = 0.0f;
        }
        break;
    case DIST_NEG_ZERO:
        for (size_t i = 0; i < n; i++) {
            uint64_t u = fct_next(r) % 4;
            x[i] = u == 0 ? -0.0f : u == 1 ? 0.0f : (float)normal(r) * (u == 2 ? 1e-3f : 1.0f);
        }
        if (fct_next(r) & 1)
            for (size_t i = 0; i < n; i++) x[i] = -0.0f; /* an all -0.0 row now and then */
        break;
    case DIST_MIXED_SCALES:
        for (size_t b = 0; b < n / blk; b++) {
            double s = pow(10.0, fct_uniform(r, -6.0, 6.0));
            for (size_t i = 0; i < blk; i++) x[b * blk + i] = (float)(s * normal(r));
        }
        break;
    case DIST_WIDE:
        for (size_t i = 0; i < n; i++)
            x[i] = (float)ldexp(fct_uniform(r, -1.0, 1.0), (int)(fct_next(r) % 60) - 30);
        break;
    case DIST_COUNT: break;
    }
}

/* An iq4_nl block whose largest magnitude is below ggml's 1e-15 gets d = 0,
 * and ggml's reference encoder leaves its 16 nibble bytes as whatever its
 * level buffer held (the previous block's levels, or stack bytes for the
 * first block of a call): undefined output no encoder can reproduce. Ours
 * writes nibble 8 (+0). For those blocks only d is compared (both must be
 * 0); the nibbles are taken from ours so the rest of the check (bytes, the
 * round trip through ggml's decoder) sees defined data. */
static void iq4_nl_zero_blocks(const unsigned char *got, unsigned char *want, size_t nblk)
{
    for (size_t b = 0; b < nblk; b++) {
        const unsigned char *g = got + b * sizeof(fcq_block_iq4_nl);
        unsigned char *w = want + b * sizeof(fcq_block_iq4_nl);
        if (w[0] == 0 && w[1] == 0 && g[0] == 0 && g[1] == 0)
            memcpy(w + 2, g + 2, sizeof(fcq_block_iq4_nl) - 2);
    }
}

static void check_encoder(const fcq_traits *t)
{
    static const size_t lens[] = {1, 2, 7};
    enum { SEEDS = 8 };
    char name[64];
    snprintf(name, sizeof name, "quantize_row_%s_ref", t->name);
    ggml_quant_fn ref = (ggml_quant_fn)sym(name);
    const size_t max_n = 7 * t->block_elems, max_bytes = 7 * t->block_bytes;
    float *x = malloc(max_n * sizeof *x), *y_ref = malloc(max_n * sizeof *x);
    unsigned char *want = malloc(max_bytes);
    fct_buf got = fct_buf_new(max_bytes, 1);
    fct_buf y = fct_buf_new(max_n * sizeof(float), 0);
    cr_assert(x && y_ref && want);
    int rows = 0;
    for (int d = 0; d < DIST_COUNT; d++)
        for (size_t li = 0; li < 3; li++)
            for (int s = 0; s < SEEDS; s++, rows++) {
                const size_t nblk = lens[li], n = nblk * t->block_elems, nbytes = nblk * t->block_bytes;
                char seed_name[96];
                snprintf(seed_name, sizeof seed_name, "encode/%s/%d/%zu/%d", t->name, d, nblk, s);
                uint64_t seed = fct_seed_of(seed_name);
                fct_rng rng = {seed};
                fill_row((dist)d, x, n, t->block_elems, &rng);
                got = (fct_buf){got.base, got.data, nbytes};
                memset(got.data + nbytes, 0xA5, 64); /* re-arm the tail guard for this length */
                memset(want, 0, nbytes);
                t->encode(x, got.data, n);
                ref(x, want, (int64_t)n);
                cr_assert(fct_buf_guards_ok(&got), "%s encode wrote outside its %zu bytes", t->name, nbytes);
                if (t->type == FCQ_IQ4_NL) iq4_nl_zero_blocks(got.data, want, nblk);
                for (size_t i = 0; i < nbytes; i++) {
                    if (got.data[i] == want[i]) continue;
                    size_t b = i / t->block_bytes, e0 = b * t->block_elems;
                    char gh[600] = {0}, wh[600] = {0};
                    hexdump(gh, sizeof gh, got.data + b * t->block_bytes, t->block_bytes);
                    hexdump(wh, sizeof wh, want + b * t->block_bytes, t->block_bytes);
                    cr_assert_fail("%s encode (%s, %zu blocks, seed %llx): byte %zu of block %zu differs "
                            "(x[%zu..] = %a %a %a %a ...)\n ours: %s\n ggml: %s",
                            t->name, dist_names[d], nblk, (unsigned long long)seed, i % t->block_bytes, b, e0,
                            (double)x[e0], (double)x[e0 + 1], (double)x[e0 + 2], (double)x[e0 + 3], gh, wh);
                    goto done;
                }
                /* Round trip: our decode of our bytes vs ggml's decode of its own bytes. */
                t->decode(got.data, (float *)y.data, n);
                oracle_decode(t, want, nblk, y_ref);
                expect_same_bits(t, "round trip", (const float *)y.data, y_ref, n, got.data, seed);
            }
    cr_assert_geq(rows, 200);
done:
    free(x);
    free(y_ref);
    free(want);
    fct_buf_free(&got);
    fct_buf_free(&y);
}

Test(quant_codec, encoders_match_ggml_byte_for_byte)
{
    need_oracle();
    int seen = 0;
    for (uint32_t id = 0; id < FCQ_TYPE_LIMIT; id++) {
        const fcq_traits *t = fcq_traits_of(id);
        if (!t || !t->encode) continue;
        check_encoder(t);
        seen++;
    }
    cr_assert_geq(seen, 6, "the six basic encoders (q4_0 .. q8_1) must be in the table; found %d encoders", seen);
}

/* ---- traits --------------------------------------------------------------------- */

Test(quant_codec, traits_match_ggml)
{
    need_oracle();
    ggml_blck_size_fn blck = (ggml_blck_size_fn)sym("ggml_blck_size");
    ggml_type_size_fn tsize = (ggml_type_size_fn)sym("ggml_type_size");
    ggml_type_name_fn tname = (ggml_type_name_fn)sym("ggml_type_name");
    ggml_get_type_traits_cpu_fn cpu = (ggml_get_type_traits_cpu_fn)sym("ggml_get_type_traits_cpu");
    for (uint32_t id = 0; id < FCQ_TYPE_LIMIT; id++) {
        const fcq_traits *t = fcq_traits_of(id);
        int64_t bs = blck((int)id);
        if (!t) {
            /* Not a block format: a scalar type (block of 1) or a removed id (0). */
            cr_assert(bs <= 1, "ggml type %u (%s) has blocks of %lld but no traits", (unsigned)id, tname((int)id),
                      (long long)bs);
            continue;
        }
        cr_assert_eq((uint32_t)t->type, id, "%s: traits id %d in slot %u", t->name, (int)t->type, (unsigned)id);
        cr_assert_str_eq(t->name, tname((int)id), "type %u: name %s, ggml says %s", (unsigned)id, t->name,
                         tname((int)id));
        cr_assert_eq((int64_t)t->block_elems, bs, "%s: %u elements per block, ggml %lld", t->name,
                     (unsigned)t->block_elems, (long long)bs);
        cr_assert_eq((size_t)t->block_bytes, tsize((int)id), "%s: %u bytes per block, ggml %zu", t->name,
                     (unsigned)t->block_bytes, tsize((int)id));
        cr_assert(t->decode != NULL, "%s: no decoder", t->name);
        cr_assert_eq(fcq_row_bytes(t, 3 * t->block_elems), 3 * (size_t)t->block_bytes);
        int vdt = cpu((int)id)->vec_dot_type;
        if (t->type == FCQ_Q8_K)
            cr_assert(vdt == GGML_TYPE_F32 && t->dot_partner == FCQ_Q8_K,
                      "q8_K: ggml has no dot partner for it (%d), ours must name itself", vdt);
        else
            cr_assert_eq((int)t->dot_partner, vdt, "%s: dot partner %d, ggml-cpu vec_dot_type %d", t->name,
                         (int)t->dot_partner, vdt);
        cr_assert(t->dot_partner == FCQ_Q8_0 || t->dot_partner == FCQ_Q8_1 || t->dot_partner == FCQ_Q8_K,
                  "%s: dot partner %d is not an activation format", t->name, (int)t->dot_partner);
    }
    cr_assert_null(fcq_traits_of(FCQ_TYPE_LIMIT));
    cr_assert_null(fcq_traits_of(1000));
    cr_assert_null(fcq_traits_of(UINT32_MAX));
}

Test(quant_codec, type_names_parse)
{
    for (uint32_t id = 0; id < FCQ_TYPE_LIMIT; id++) {
        const fcq_traits *t = fcq_traits_of(id);
        if (!t) continue;
        char up[32], mixed[32];
        size_t k = strlen(t->name);
        cr_assert_lt(k, sizeof up);
        for (size_t i = 0; i <= k; i++) {
            up[i] = (char)(t->name[i] >= 'a' && t->name[i] <= 'z' ? t->name[i] - 32 : t->name[i]);
            mixed[i] = (char)(i % 2 ? up[i] : (t->name[i] >= 'A' && t->name[i] <= 'Z' ? t->name[i] + 32 : t->name[i]));
        }
        const char *forms[] = {t->name, up, mixed};
        for (int f = 0; f < 3; f++) {
            fcq_type got = (fcq_type)0;
            cr_assert(fcq_type_parse(forms[f], &got), "\"%s\" not parsed", forms[f]);
            cr_assert_eq((uint32_t)got, id, "\"%s\" parsed as %d, want %u", forms[f], (int)got, (unsigned)id);
        }
    }
    static const char *const bad[] = {"", "q4", "q4_", "q4_0 ", " q4_0", "q4_0x", "q4_2", "f32", "f16", "bf16",
                                      "i8", "q8_k_", "iq2", "iq2_xxxs", "nvfp", "mxfp4\n", "q4-0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fcq_type got = (fcq_type)12345;
        cr_assert(!fcq_type_parse(bad[i], &got), "\"%s\" must be rejected", bad[i]);
        cr_assert_eq((int)got, 12345, "\"%s\": out written on failure", bad[i]);
    }
    cr_assert(!fcq_type_parse(NULL, NULL));
}
