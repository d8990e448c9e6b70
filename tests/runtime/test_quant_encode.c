/* SPDX-License-Identifier: MIT */
/* The super-block and non-linear reference encoders (src/quant/encode_k.c,
 * encode_other.c) against ggml's quantize_row_<fmt>_ref, byte for byte.
 *
 * Calls our encoders directly (not through fcq_traits), so a format whose
 * traits.encode is still NULL is checked too. Inputs target the branches of
 * the scale searches: normal and uniform rows, all zeros, constants, one huge
 * outlier per block, subnormals, exact rounding ties, 16/32-element
 * sub-blocks that are zero while others are not, sub-blocks of one sign (the
 * min search of q2_K/q4_K/q5_K), a wide dynamic range across sub-blocks,
 * exact grid values, sparse rows, -0.0 mixes; 1..4 super-blocks per row.
 * Then ggml's dequantize_row_<fmt> of our bytes must equal, bit for bit, its
 * decode of its own bytes.
 *
 * The one allowed difference: an iq4_nl block whose max |x| < 1e-15. ggml
 * stores d = 0 there and leaves the nibbles to whatever its level buffer
 * held (not reproducible); we store nibble 8 everywhere. Such blocks are
 * compared on d, on our nibbles being 0x88, and on decoding to zeros. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "ggml_oracle.h"
#include "quant/quant.h"

/* Prototypes from ggml/src/ggml-quants.h (called through dlsym). */
typedef void (*ggml_quant_fn)(const float *x, void *y, int64_t k);
typedef void (*ggml_dequant_fn)(const void *x, float *y, int64_t k);

typedef struct fmt {
    const char *name;
    fcq_encode_fn encode;
    size_t block_elems, block_bytes;
} fmt;

enum { MAX_SB = 4, MAX_N = MAX_SB * FCQ_QK_K };

typedef enum gen {
    GEN_NORMAL,
    GEN_UNIFORM,
    GEN_ZEROS,
    GEN_CONSTANT,
    GEN_OUTLIER,
    GEN_SUBNORMAL,
    GEN_TIES,
    GEN_ZERO_SUBBLOCKS,
    GEN_ONE_SIGN_SUBBLOCKS,
    GEN_DYNAMIC_RANGE,
    GEN_GRID,
    GEN_SPARSE,
    GEN_NEG_ZERO,
    GEN_OFFSET,
    GEN_COUNT
} gen;

static const char *const gen_names[GEN_COUNT] = {
    "normal",   "uniform",         "zeros",     "constant",       "outlier",   "subnormal", "ties",
    "zero sub-blocks", "one-sign sub-blocks", "dynamic range", "grid values", "sparse", "-0.0 mix", "offset"};

static double normal(fct_rng *r)
{
    double u = fct_uniform(r, 0x1p-53, 1.0), v = fct_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void fill(gen g, float *x, size_t n, size_t blk, fct_rng *r)
{
    switch (g) {
    case GEN_NORMAL: {
        double s = ldexp(1.0, (int)(fct_next(r) % 20) - 10);
        for (size_t i = 0; i < n; i++) x[i] = (float)(s * normal(r));
        break;
    }
    case GEN_UNIFORM: {
        double a = fct_uniform(r, 1e-3, 1e3);
        for (size_t i = 0; i < n; i++) x[i] = (float)fct_uniform(r, -a, a);
        break;
    }
    case GEN_ZEROS: memset(x, 0, n * sizeof *x); break;
    case GEN_CONSTANT: {
        float c = (float)fct_uniform(r, -10.0, 10.0);
        for (size_t i = 0; i < n; i++) x[i] = c;
        break;
    }
    case GEN_OUTLIER: /* one outlier per block, up to 1e4 times the rest */
        for (size_t i = 0; i < n; i++) x[i] = (float)normal(r);
        for (size_t b = 0; b < n / blk; b++)
            x[b * blk + fct_next(r) % blk] = (float)(pow(10.0, fct_uniform(r, 1.0, 4.0)) * (fct_next(r) & 1 ? -1 : 1));
        break;
    case GEN_SUBNORMAL:
        for (size_t i = 0; i < n; i++) x[i] = (float)(fct_uniform(r, -1.0, 1.0) * 0x1p-126);
        break;
    case GEN_TIES: { /* small multiples of a power of two: many x/d land on .5 */
        int e = (int)(fct_next(r) % 10) - 5;
        for (size_t i = 0; i < n; i++) x[i] = (float)ldexp((int)(fct_next(r) % 33) - 16, e - (int)(fct_next(r) % 3));
        break;
    }
    case GEN_ZERO_SUBBLOCKS: /* random 16-element groups zeroed, one group always kept */
        for (size_t i = 0; i < n; i++) x[i] = (float)normal(r);
        for (size_t g16 = 0; g16 < n / 16; g16++)
            if (g16 % 16 != 5 && fct_next(r) % 3 == 0) memset(x + 16 * g16, 0, 16 * sizeof *x);
        break;
    case GEN_ONE_SIGN_SUBBLOCKS: /* each 16-group all >0, all <0, or mixed */
        for (size_t g16 = 0; g16 < n / 16; g16++) {
            int k = (int)(fct_next(r) % 3);
            double off = fct_uniform(r, 0.0, 3.0);
            for (size_t i = 0; i < 16; i++) {
                double v = fabs(normal(r)) + off;
                x[16 * g16 + i] = (float)(k == 0 ? v : k == 1 ? -v : normal(r));
            }
        }
        break;
    case GEN_DYNAMIC_RANGE: /* 16-groups scaled by 10^[-8, 8] */
        for (size_t g16 = 0; g16 < n / 16; g16++) {
            double s = pow(10.0, fct_uniform(r, -8.0, 8.0));
            for (size_t i = 0; i < 16; i++) x[16 * g16 + i] = (float)(s * normal(r));
        }
        break;
    case GEN_GRID: { /* integers in [-k, k]: exact levels for the symmetric searches */
        int k = 1 + (int)(fct_next(r) % 40);
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)(fct_next(r) % (2 * k + 1)) - k);
        break;
    }
    case GEN_SPARSE:
        for (size_t i = 0; i < n; i++) x[i] = fct_next(r) % 10 == 0 ? (float)normal(r) : 0.0f;
        break;
    case GEN_NEG_ZERO:
        for (size_t i = 0; i < n; i++) {
            uint64_t u = fct_next(r) % 3;
            x[i] = u == 0 ? -0.0f : u == 1 ? 0.0f : (float)normal(r);
        }
        break;
    case GEN_OFFSET: { /* c + small noise: the min dominates */
        double c = fct_uniform(r, -50.0, 50.0), s = fct_uniform(r, 1e-3, 1.0);
        for (size_t i = 0; i < n; i++) x[i] = (float)(c + s * normal(r));
        break;
    }
    case GEN_COUNT: break;
    }
}

static void need_oracle(void)
{
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("%s", why);
}

static void *sym(const char *prefix, const char *name)
{
    char full[64];
    snprintf(full, sizeof full, "%s%s%s", prefix, name, strcmp(prefix, "quantize_row_") == 0 ? "_ref" : "");
    void *p = fco_ggml_sym(full);
    cr_assert(p != NULL, "the ggml oracle does not export %s", full);
    return p;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* iq4_nl: is block b one whose nibbles ggml leaves undefined? */
static int iq4_nl_dont_care(const fmt *f, const float *x, size_t b)
{
    if (strcmp(f->name, "iq4_nl") != 0) return 0;
    float amax = 0;
    for (size_t i = 0; i < 32; i++)
        if (fabsf(x[32 * b + i]) > amax) amax = fabsf(x[32 * b + i]);
    return amax < 1e-15f;
}

static void check_format(const fmt *f)
{
    need_oracle();
    ggml_quant_fn ref = (ggml_quant_fn)sym("quantize_row_", f->name);
    ggml_dequant_fn deq = (ggml_dequant_fn)sym("dequantize_row_", f->name);
    const size_t max_bytes = MAX_N / f->block_elems * f->block_bytes;
    float *x = malloc(MAX_N * sizeof *x), *y_got = malloc(MAX_N * sizeof *x), *y_want = malloc(MAX_N * sizeof *x);
    unsigned char *want = malloc(max_bytes);
    fct_buf got = fct_buf_new(max_bytes, 3); /* odd address: encoders must not assume alignment */
    cr_assert(x && y_got && y_want && want);
    enum { SEEDS = 12 };
    int rows = 0, dont_care = 0;
    for (int g = 0; g < GEN_COUNT; g++)
        for (size_t sb = 1; sb <= MAX_SB; sb++)
            for (int s = 0; s < SEEDS; s++, rows++) {
                const size_t n = sb * FCQ_QK_K, nblk = n / f->block_elems, nbytes = nblk * f->block_bytes;
                char seed_name[96];
                snprintf(seed_name, sizeof seed_name, "quant_encode/%s/%d/%zu/%d", f->name, g, sb, s);
                const uint64_t seed = fct_seed_of(seed_name);
                fct_rng rng = {seed};
                fill((gen)g, x, n, f->block_elems, &rng);
                memset(got.data, 0, max_bytes);
                memset(want, 0, max_bytes); /* q8_K leaves bsums of a zero block unwritten */
                f->encode(x, got.data, n);
                ref(x, want, (int64_t)n);
                for (size_t b = 0; b < nblk; b++) {
                    const unsigned char *gb = got.data + b * f->block_bytes, *wb = want + b * f->block_bytes;
                    if (iq4_nl_dont_care(f, x, b)) {
                        dont_care++;
                        cr_assert(gb[0] == wb[0] && gb[1] == wb[1], "iq4_nl ~0 block: d %02x%02x, ggml %02x%02x",
                                  gb[0], gb[1], wb[0], wb[1]);
                        for (size_t i = 2; i < f->block_bytes; i++)
                            cr_assert(gb[i] == 0x88, "iq4_nl ~0 block: nibbles must be 8");
                        continue;
                    }
                    for (size_t i = 0; i < f->block_bytes; i++) {
                        if (gb[i] == wb[i]) continue;
                        const float *xb = x + b * f->block_elems;
                        cr_assert_fail("%s (%s, %zu super-blocks, seed %016llx): byte %zu of block %zu: ours %02x, "
                                "ggml %02x (x[%zu..] = %a %a %a %a)",
                                f->name, gen_names[g], sb, (unsigned long long)seed, i, b, gb[i], wb[i],
                                b * f->block_elems, (double)xb[0], (double)xb[1], (double)xb[2], (double)xb[3]);
                        goto done;
                    }
                }
                cr_assert(fct_buf_guards_ok(&got), "%s wrote outside its %zu bytes", f->name, nbytes);
                /* ggml's decode of our bytes and of its own: same bits, except
                 * iq4_nl ~0 blocks, where only the values (all zero) must agree. */
                deq(got.data, y_got, (int64_t)n);
                deq(want, y_want, (int64_t)n);
                for (size_t i = 0; i < n; i++) {
                    int ok = iq4_nl_dont_care(f, x, i / f->block_elems) ? y_got[i] == 0.0f && y_want[i] == 0.0f
                                                                          : bits(y_got[i]) == bits(y_want[i]);
                    if (!ok) {
                        cr_assert_fail("%s (%s, seed %016llx): decode of element %zu: ours %a, ggml %a", f->name, gen_names[g],
                                (unsigned long long)seed, i, (double)y_got[i], (double)y_want[i]);
                        goto done;
                    }
                }
            }
    cr_assert_eq(rows, GEN_COUNT * MAX_SB * SEEDS);
    if (strcmp(f->name, "iq4_nl") == 0) cr_assert_gt(dont_care, 0, "the ~0 iq4_nl block was never exercised");
done:
    free(x);
    free(y_got);
    free(y_want);
    free(want);
    fct_buf_free(&got);
}

#define FMT(nm, blk) {#nm, fcq_encode_##nm, blk, sizeof(fcq_block_##nm)}
#define FMT_TEST(nm, blk)                 \
    Test(quant_encode, nm)                \
    {                                     \
        static const fmt f = FMT(nm, blk); \
        check_format(&f);                 \
    }

FMT_TEST(q8_K, FCQ_QK_K)
FMT_TEST(q6_K, FCQ_QK_K)
FMT_TEST(q5_K, FCQ_QK_K)
FMT_TEST(q4_K, FCQ_QK_K)
FMT_TEST(q3_K, FCQ_QK_K)
FMT_TEST(q2_K, FCQ_QK_K)
FMT_TEST(iq4_nl, 32)
FMT_TEST(iq4_xs, FCQ_QK_K)
FMT_TEST(tq1_0, FCQ_QK_K)
FMT_TEST(tq2_0, FCQ_QK_K)
FMT_TEST(mxfp4, 32)
FMT_TEST(nvfp4, 64)
FMT_TEST(q1_0, 128)
FMT_TEST(q2_0, 64)

/* The iq4_nl encoder of ggml_quantize_chunk / llama-quantize (quantize_iq4_nl,
 * 7 trial scales and a final pass): byte-identical, ~0 blocks included
 * (defined there: every level is the one nearest 0). */
Test(quant_encode, iq4_nl_search)
{
    need_oracle();
    typedef size_t (*chunk_fn)(const float *, void *, int64_t, int64_t, const float *);
    chunk_fn ref = (chunk_fn)fco_ggml_sym("quantize_iq4_nl");
    cr_assert(ref != NULL, "the ggml oracle does not export quantize_iq4_nl");
    const size_t max_bytes = MAX_N / 32 * sizeof(fcq_block_iq4_nl);
    float *x = malloc(MAX_N * sizeof *x);
    unsigned char *got = malloc(max_bytes), *want = malloc(max_bytes);
    cr_assert(x && got && want);
    for (int g = 0; g < GEN_COUNT; g++)
        for (size_t sb = 1; sb <= MAX_SB; sb++)
            for (int s = 0; s < 12; s++) {
                const size_t n = sb * FCQ_QK_K, nbytes = n / 32 * sizeof(fcq_block_iq4_nl);
                char seed_name[96];
                snprintf(seed_name, sizeof seed_name, "quant_encode/iq4_nl_search/%d/%zu/%d", g, sb, s);
                fct_rng rng = {fct_seed_of(seed_name)};
                fill((gen)g, x, n, 32, &rng);
                memset(want, 0xEE, max_bytes);
                fcq_encode_iq4_nl_search(x, got, n);
                cr_assert_eq(ref(x, want, 1, (int64_t)n, NULL), nbytes);
                for (size_t i = 0; i < nbytes; i++)
                    if (got[i] != want[i]) {
                        cr_assert_fail("iq4_nl search (%s, %zu super-blocks, seed %d): byte %zu of block %zu: ours %02x, "
                                       "ggml %02x", gen_names[g], sb, s, i % sizeof(fcq_block_iq4_nl),
                                       i / sizeof(fcq_block_iq4_nl), got[i], want[i]);
                        goto done;
                    }
            }
done:
    free(x);
    free(got);
    free(want);
}

/* Edge rows that the generators reach only by chance: exact halfway points
 * of the 6-bit scale rounding, a single nonzero element, +-huge, a row of
 * alternating signs with equal magnitudes. Every format, one super-block. */
Test(quant_encode, edge_rows)
{
    need_oracle();
    static const fmt all[] = {FMT(q8_K, FCQ_QK_K), FMT(q6_K, FCQ_QK_K), FMT(q5_K, FCQ_QK_K), FMT(q4_K, FCQ_QK_K),
                              FMT(q3_K, FCQ_QK_K), FMT(q2_K, FCQ_QK_K), FMT(iq4_xs, FCQ_QK_K), FMT(tq1_0, FCQ_QK_K),
                              FMT(tq2_0, FCQ_QK_K), FMT(mxfp4, 32),       FMT(nvfp4, 64),         FMT(q1_0, 128),
                              FMT(q2_0, 64),          FMT(iq4_nl, 32)};
    float x[FCQ_QK_K];
    unsigned char got[400], want[400];
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        const fmt *f = &all[k];
        ggml_quant_fn ref = (ggml_quant_fn)sym("quantize_row_", f->name);
        for (int row = 0; row < 6; row++) {
            for (int i = 0; i < FCQ_QK_K; i++) {
                switch (row) {
                case 0: x[i] = i == 77 ? 1.0f : 0.0f; break;              /* one element per row */
                case 1: x[i] = i % 32 == 3 ? -2.5f : 0.0f; break;         /* one element per 32 */
                case 2: x[i] = (i & 1) ? 1.0f : -1.0f; break;             /* alternating signs */
                case 3: x[i] = (float)(i % 16) - 7.5f; break;             /* halfway levels */
                case 4: x[i] = i == 200 ? 6.0e4f : (float)(i % 7) * 1e-3f; break; /* f16-range outlier */
                default: x[i] = (float)((i * 37) % 64) / 64.0f + 1.0f; break;     /* positive only */
                }
            }
            memset(got, 0, sizeof got);
            memset(want, 0, sizeof want);
            f->encode(x, got, FCQ_QK_K);
            ref(x, want, FCQ_QK_K);
            const size_t nbytes = FCQ_QK_K / f->block_elems * f->block_bytes;
            for (size_t i = 0; i < nbytes; i++) {
                size_t b = i / f->block_bytes;
                if (iq4_nl_dont_care(f, x, b) && i % f->block_bytes >= 2) continue;
                cr_assert(got[i] == want[i], "%s edge row %d: byte %zu: ours %02x, ggml %02x", f->name, row, i, got[i],
                          want[i]);
            }
        }
    }
}

/* ---- importance-weighted encoders (an imatrix) against ggml_quantize_chunk ---------- */

/* What llama-quantize runs with an imatrix: ggml_quantize_chunk(type, rows,
 * imatrix), which goes through quantize_<fmt>(..., quant_weights). Every
 * generator above, 1..4 super-blocks, 6 seeds, and five kinds of weights:
 * random positive over six decades, random with zeros among them, all
 * zero, all one, and a few large among tiny (what an imatrix with outlier
 * channels looks like). Several rows per call with one weight vector, as
 * llama-quantize passes it, and a chunk that starts past row 0. */
typedef size_t (*ggml_chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
                                int64_t n_per_row, const float *imatrix);

typedef struct wfmt {
    const char *name;
    uint32_t type;
    size_t block_elems, block_bytes;
} wfmt;

enum { W_RANDOM, W_SOME_ZERO, W_ZERO, W_ONES, W_SPIKY, W_COUNT };
static const char *const wkind_names[W_COUNT] = {"random", "some zero", "all zero", "ones", "spiky"};

static void fill_weights(int kind, float *w, size_t n, fct_rng *r)
{
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case W_RANDOM: w[i] = (float)pow(10.0, fct_uniform(r, -3.0, 3.0)); break;
        case W_SOME_ZERO: w[i] = fct_next(r) % 4 == 0 ? 0.0f : (float)fct_uniform(r, 1e-3, 10.0); break;
        case W_ZERO: w[i] = 0.0f; break;
        case W_ONES: w[i] = 1.0f; break;
        default: w[i] = fct_next(r) % 16 == 0 ? (float)fct_uniform(r, 100.0, 1e4) : (float)fct_uniform(r, 0.0, 1e-2); break;
        }
    }
}

static void check_weighted(const wfmt *f)
{
    need_oracle();
    ggml_chunk_fn chunk = (ggml_chunk_fn)fco_ggml_sym("ggml_quantize_chunk");
    cr_assert(chunk != NULL, "the ggml oracle does not export ggml_quantize_chunk");
    fcq_encode_w_fn enc = fcq_weighted_encoder(f->type);
    cr_assert(enc != NULL, "%s has no weighted encoder", f->name);
    enum { ROWS = 3, SEEDS = 6 };
    const size_t max_row = MAX_N / f->block_elems * f->block_bytes;
    float *x = malloc(ROWS * MAX_N * sizeof *x), *w = malloc(MAX_N * sizeof *w);
    unsigned char *want = malloc(ROWS * max_row);
    fct_buf got = fct_buf_new(ROWS * max_row, 1);
    cr_assert(x && w && want);
    long rows_checked = 0;
    for (int g = 0; g < GEN_COUNT; g++)
        for (int wk = 0; wk < W_COUNT; wk++)
            for (size_t sb = 1; sb <= MAX_SB; sb++)
                for (int s = 0; s < SEEDS; s++) {
                    const size_t n = sb * FCQ_QK_K, row = n / f->block_elems * f->block_bytes;
                    char seed_name[96];
                    snprintf(seed_name, sizeof seed_name, "quant_encode/w/%s/%d/%d/%zu/%d", f->name, g, wk, sb, s);
                    const uint64_t seed = fct_seed_of(seed_name);
                    fct_rng rng = {seed};
                    for (int r = 0; r < ROWS; r++) fill((gen)g, x + (size_t)r * n, n, f->block_elems, &rng);
                    fill_weights(wk, w, n, &rng);
                    memset(want, 0xEE, ROWS * max_row);
                    /* rows 0..1 in one call, row 2 as a chunk that starts at row 2 */
                    cr_assert_eq(chunk((int)f->type, x, want, 0, 2, (int64_t)n, w), 2 * row);
                    cr_assert_eq(chunk((int)f->type, x, want, 2 * (int64_t)n, 1, (int64_t)n, w), row);
                    for (int r = 0; r < ROWS; r++) enc(x + (size_t)r * n, got.data + (size_t)r * row, n, w);
                    cr_assert(fct_buf_guards_ok(&got), "%s (weighted) wrote outside its bytes", f->name);
                    for (size_t i = 0; i < ROWS * row; i++) {
                        if (got.data[i] == want[i]) continue;
                        const size_t b = (i % row) / f->block_bytes;
                        const float *xb = x + (i / row) * n + b * f->block_elems;
                        cr_assert_fail("%s with an imatrix (%s, weights %s, %zu super-blocks, seed %016llx): row %zu, "
                                       "byte %zu of block %zu: ours %02x, ggml %02x (x = %a %a ..., w = %a %a ...)",
                                       f->name, gen_names[g], wkind_names[wk], sb, (unsigned long long)seed, i / row,
                                       i % f->block_bytes, b, got.data[i], want[i], (double)xb[0], (double)xb[1],
                                       (double)w[b * f->block_elems], (double)w[b * f->block_elems + 1]);
                        goto done;
                    }
                    rows_checked += ROWS;
                }
    cr_assert_eq(rows_checked, (long)GEN_COUNT * W_COUNT * MAX_SB * SEEDS * ROWS);
done:
    free(x);
    free(w);
    free(want);
    fct_buf_free(&got);
}

#define WFMT_TEST(nm, id, blk)                                          \
    Test(quant_encode, nm##_imatrix)                                    \
    {                                                                   \
        const wfmt f = {#nm, id, blk, sizeof(fcq_block_##nm)};          \
        check_weighted(&f);                                             \
    }

WFMT_TEST(q4_0, FCQ_Q4_0, 32)
WFMT_TEST(q4_1, FCQ_Q4_1, 32)
WFMT_TEST(q5_0, FCQ_Q5_0, 32)
WFMT_TEST(q5_1, FCQ_Q5_1, 32)
WFMT_TEST(q2_K, FCQ_Q2_K, FCQ_QK_K)
WFMT_TEST(q3_K, FCQ_Q3_K, FCQ_QK_K)
WFMT_TEST(q4_K, FCQ_Q4_K, FCQ_QK_K)
WFMT_TEST(q5_K, FCQ_Q5_K, FCQ_QK_K)
WFMT_TEST(q6_K, FCQ_Q6_K, FCQ_QK_K)
WFMT_TEST(iq4_nl, FCQ_IQ4_NL, 32)
WFMT_TEST(iq4_xs, FCQ_IQ4_XS, FCQ_QK_K)

/* The formats whose ggml encoders ignore the weights: ggml_quantize_chunk
 * with an imatrix gives the bytes it gives without one, which are our
 * unweighted encoders' (so a quantizer may pass weights to every type). */
Test(quant_encode, weights_ignored)
{
    need_oracle();
    ggml_chunk_fn chunk = (ggml_chunk_fn)fco_ggml_sym("ggml_quantize_chunk");
    cr_assert(chunk != NULL);
    static const wfmt ign[] = {{"q8_0", FCQ_Q8_0, 32, sizeof(fcq_block_q8_0)},
                               {"tq1_0", FCQ_TQ1_0, FCQ_QK_K, sizeof(fcq_block_tq1_0)},
                               {"tq2_0", FCQ_TQ2_0, FCQ_QK_K, sizeof(fcq_block_tq2_0)},
                               {"mxfp4", FCQ_MXFP4, 32, sizeof(fcq_block_mxfp4)}};
    float x[2 * FCQ_QK_K], w[2 * FCQ_QK_K];
    unsigned char got[2 * 300], want[2 * 300];
    for (size_t k = 0; k < sizeof ign / sizeof ign[0]; k++) {
        cr_assert_null((void *)fcq_weighted_encoder(ign[k].type), "%s: the weights do not enter ggml's encoder",
                       ign[k].name);
        fct_rng rng = {fct_seed_of(ign[k].name)};
        fill(GEN_NORMAL, x, 2 * FCQ_QK_K, ign[k].block_elems, &rng);
        fill_weights(W_RANDOM, w, 2 * FCQ_QK_K, &rng);
        const size_t nb = 2 * FCQ_QK_K / ign[k].block_elems * ign[k].block_bytes;
        cr_assert_eq(chunk((int)ign[k].type, x, want, 0, 1, 2 * FCQ_QK_K, w), nb);
        fcq_traits_of(ign[k].type)->encode(x, got, 2 * FCQ_QK_K);
        cr_assert_arr_eq(got, want, nb, "%s with weights differs from without", ign[k].name);
    }
    /* no encoder for the grid formats, weighted or not */
    cr_assert_null((void *)fcq_weighted_encoder(FCQ_IQ2_XXS));
    cr_assert_null((void *)fcq_weighted_encoder(FCQ_IQ1_S));
    cr_assert_null((void *)fcq_weighted_encoder(0 /* f32 */));
}
