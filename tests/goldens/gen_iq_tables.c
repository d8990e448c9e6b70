/* SPDX-License-Identifier: MIT */
/* Fucina: derives the GGML IQ lookup tables from ggml's own decoders.
 *
 * The IQ/FP4 formats decode through constant tables (codebook grids, sign
 * patterns, non-linear value sets). Rather than transcribe them from ggml's
 * source, this program asks the oracle library (libggml-base, loaded through
 * oracle/ggml_oracle.c) to decode crafted blocks: the block scale is chosen so
 * the effective sub-block scale is exactly 1.0, the sign bits are clear and
 * one grid index sits in each slot, so each decoded group of 4 or 8 floats IS
 * that grid entry. Sign tables come from decoding a fixed grid entry under
 * every sign index. Every derived value is checked to be an exact small
 * integer (or, for iq1_s, an integer plus the delta) before it is printed.
 *
 * Output: src/quant/iq_tables.h and src/quant/iq_tables.c (commit-ready).
 * Build and run by hand from the repository root:
 *
 *   gcc -std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off -Ioracle \
 *       -DFCO_GGML_DEFAULT_DIR="\"$PWD/.oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64\"" \
 *       -o /tmp/gen_iq_tables tests/goldens/gen_iq_tables.c oracle/ggml_oracle.c -ldl -lpthread
 *   /tmp/gen_iq_tables src/quant/iq_tables.h src/quant/iq_tables.c
 *
 * tests/runtime/test_quant_codec.c then checks every decoder that reads
 * these tables against the oracle bit for bit, on random blocks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_oracle.h"

typedef void (*dequant_fn)(const void *x, float *y, int64_t k);

static dequant_fn need(const char *name)
{
    dequant_fn f = (dequant_fn)fco_ggml_sym(name);
    if (!f) {
        fprintf(stderr, "gen_iq_tables: the oracle does not export %s\n", name);
        exit(1);
    }
    return f;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }

/* The value must be an exact integer in [lo, hi]. */
static int exact_int(float v, int lo, int hi, const char *what, int idx)
{
    if (!(v == floorf(v)) || v < (float)lo || v > (float)hi) {
        fprintf(stderr, "gen_iq_tables: %s[%d]: decoded %a is not an integer in [%d, %d]\n", what, idx, (double)v,
                lo, hi);
        exit(1);
    }
    return (int)v;
}

#define F16_ONE 0x3C00u   /* 1.0 */
#define F16_FOUR 0x4400u  /* 4.0 */
#define F16_EIGHT 0x4800u /* 8.0 */

static int8_t iq4nl[16], e2m1[16];
static uint8_t iq2xxs[256][8], iq2xs[512][8], iq2s[1024][8], iq3xxs[256][4], iq3s[512][4];
static int8_t iq1s[2048][8];
static uint8_t ksigns[128];
static float iq1s_delta;

static void derive_nl(void)
{
    /* iq4_nl: 2-byte f16 d, 16 nibble bytes; y[j] = d * kvalues[qs[j] & 15]. */
    dequant_fn f = need("dequantize_row_iq4_nl");
    uint8_t b[18] = {0};
    float y[32];
    put16(b, F16_ONE);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)j;
    f(b, y, 32);
    for (int j = 0; j < 16; j++) iq4nl[j] = (int8_t)exact_int(y[j], -128, 127, "kvalues_iq4nl", j);

    /* mxfp4: E8M0 byte e, decoded with half its value (ggml doubles E2M1); e = 128 gives 1.0. */
    f = need("dequantize_row_mxfp4");
    uint8_t m[17] = {0};
    m[0] = 128;
    for (int j = 0; j < 16; j++) m[1 + j] = (uint8_t)j;
    f(m, y, 32);
    for (int j = 0; j < 16; j++) e2m1[j] = (int8_t)exact_int(y[j], -12, 12, "kvalues_mxfp4", j);
}

static void derive_iq2xxs(void)
{
    /* 66 bytes: d, then per 32 elements two u32: four 8-bit grid indices, then
     * 4x7 sign bits and a 4-bit scale s; db = d * (0.5 + s) * 0.25 = 1 for d = 8, s = 0. */
    dequant_fn f = need("dequantize_row_iq2_xxs");
    for (int blk = 0; blk < 8; blk++) {
        uint8_t b[66] = {0};
        float y[256];
        put16(b, F16_EIGHT);
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) b[2 + 8 * ib + l] = (uint8_t)(blk * 32 + ib * 4 + l);
        f(b, y, 256);
        for (int g = 0; g < 32; g++)
            for (int j = 0; j < 8; j++) iq2xxs[blk * 32 + g][j] = (uint8_t)exact_int(y[8 * g + j], 0, 255, "iq2xxs_grid", blk * 32 + g);
    }
    /* Signs: grid entry 0 in every slot, sign index s in slot l: bit j of
     * ksigns[s] is set where element j comes out negative. */
    for (int base = 0; base < 128; base += 32) {
        uint8_t b[66] = {0};
        float y[256];
        put16(b, F16_EIGHT);
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux = 0;
            for (int l = 0; l < 4; l++) aux |= (uint32_t)(base + ib * 4 + l) << (7 * l);
            put32(b + 2 + 8 * ib + 4, aux);
        }
        f(b, y, 256);
        for (int g = 0; g < 32; g++) {
            uint8_t mask = 0;
            for (int j = 0; j < 8; j++) {
                if (fabsf(y[8 * g + j]) != (float)iq2xxs[0][j]) {
                    fprintf(stderr, "gen_iq_tables: ksigns[%d]: magnitude changed\n", base + g);
                    exit(1);
                }
                if (signbit(y[8 * g + j])) mask |= (uint8_t)(1u << j);
            }
            ksigns[base + g] = mask;
        }
    }
}

static void derive_iq2xs(void)
{
    /* 74 bytes: d, 32 u16 (9-bit grid index | 7-bit sign index << 9), 8 scale bytes. */
    dequant_fn f = need("dequantize_row_iq2_xs");
    for (int blk = 0; blk < 16; blk++) {
        uint8_t b[74] = {0};
        float y[256];
        put16(b, F16_EIGHT);
        for (int g = 0; g < 32; g++) put16(b + 2 + 2 * g, (uint16_t)(blk * 32 + g));
        f(b, y, 256);
        for (int g = 0; g < 32; g++)
            for (int j = 0; j < 8; j++) iq2xs[blk * 32 + g][j] = (uint8_t)exact_int(y[8 * g + j], 0, 255, "iq2xs_grid", blk * 32 + g);
    }
}

static void derive_iq2s(void)
{
    /* 82 bytes: d, qs[32] low 8 index bits, signs[32], qh[8] (2 high bits per
     * slot: bits 2l..2l+1 of qh[ib] for slot l), scales[8]. */
    dequant_fn f = need("dequantize_row_iq2_s");
    for (int blk = 0; blk < 32; blk++) {
        uint8_t b[82] = {0};
        float y[256];
        put16(b, F16_EIGHT);
        for (int g = 0; g < 32; g++) {
            int idx = blk * 32 + g, ib = g / 4, l = g % 4;
            b[2 + g] = (uint8_t)(idx & 255);
            b[2 + 64 + ib] |= (uint8_t)(((idx >> 8) & 3) << (2 * l));
        }
        f(b, y, 256);
        for (int g = 0; g < 32; g++)
            for (int j = 0; j < 8; j++) iq2s[blk * 32 + g][j] = (uint8_t)exact_int(y[8 * g + j], 0, 255, "iq2s_grid", blk * 32 + g);
    }
}

static void derive_iq3xxs(void)
{
    /* 98 bytes: d, qs[64] 8-bit indices (two 4-element halves per group of 8),
     * then per 32 elements a u32 of signs and a 4-bit scale: db = d*(0.5+s)*0.5 = 1 for d = 4. */
    dequant_fn f = need("dequantize_row_iq3_xxs");
    for (int blk = 0; blk < 4; blk++) {
        uint8_t b[98] = {0};
        float y[256];
        put16(b, F16_FOUR);
        for (int q = 0; q < 64; q++) b[2 + q] = (uint8_t)(blk * 64 + q);
        f(b, y, 256);
        for (int q = 0; q < 64; q++)
            for (int j = 0; j < 4; j++) iq3xxs[blk * 64 + q][j] = (uint8_t)exact_int(y[4 * q + j], 0, 255, "iq3xxs_grid", blk * 64 + q);
    }
}

static void derive_iq3s(void)
{
    /* 110 bytes: d, qs[64], qh[8], signs[32], scales[4]; db = d * (1 + 2*s) = 1
     * for d = 1, s = 0. The 9th index bit of qs[q] (q = 8*ib + k) is bit k of qh[ib]. */
    dequant_fn f = need("dequantize_row_iq3_s");
    for (int blk = 0; blk < 8; blk++) {
        uint8_t b[110] = {0};
        float y[256];
        put16(b, F16_ONE);
        for (int q = 0; q < 64; q++) {
            int idx = blk * 64 + q;
            b[2 + q] = (uint8_t)(idx & 255);
            if (idx & 256) b[2 + 64 + q / 8] |= (uint8_t)(1u << (q % 8));
        }
        f(b, y, 256);
        for (int q = 0; q < 64; q++)
            for (int j = 0; j < 4; j++) iq3s[blk * 64 + q][j] = (uint8_t)exact_int(y[4 * q + j], 0, 255, "iq3s_grid", blk * 64 + q);
    }
}

static void derive_iq1s(void)
{
    /* 50 bytes: d, qs[32] low 8 index bits, qh[8] u16: 3 high bits per slot
     * (bits 3l..3l+2), scale in bits 12..14 (dl = d*(2s+1)), delta sign in bit 15.
     * y = dl * (grid + delta). First the delta: grid 0 with both delta signs. */
    dequant_fn f = need("dequantize_row_iq1_s");
    {
        uint8_t b[50] = {0};
        float y[256];
        put16(b, F16_ONE);
        put16(b + 34 + 2, 0x8000u); /* sub-block 1: negative delta */
        f(b, y, 256);
        iq1s_delta = (y[0] - y[32]) * 0.5f;
        if (!(iq1s_delta > 0.0f) || y[0] - iq1s_delta != y[32] + iq1s_delta) {
            fprintf(stderr, "gen_iq_tables: iq1_s delta not recoverable\n");
            exit(1);
        }
    }
    for (int blk = 0; blk < 64; blk++) {
        uint8_t b[50] = {0};
        float y[256];
        put16(b, F16_ONE);
        for (int g = 0; g < 32; g++) {
            int idx = blk * 32 + g, ib = g / 4, l = g % 4;
            b[2 + g] = (uint8_t)(idx & 255);
            uint16_t qh = (uint16_t)(b[34 + 2 * ib] | b[35 + 2 * ib] << 8);
            qh = (uint16_t)(qh | ((idx >> 8) & 7) << (3 * l));
            put16(b + 34 + 2 * ib, qh);
        }
        f(b, y, 256);
        for (int g = 0; g < 32; g++)
            for (int j = 0; j < 8; j++)
                iq1s[blk * 32 + g][j] = (int8_t)exact_int(y[8 * g + j] - iq1s_delta, -128, 127, "iq1s_grid", blk * 32 + g);
    }
}

static void print_u8_rows(FILE *o, const char *decl, const uint8_t *p, int rows, int cols)
{
    fprintf(o, "%s = {\n", decl);
    for (int r = 0; r < rows; r++) {
        fprintf(o, "%s{", r % 2 == 0 ? "    " : "");
        for (int c = 0; c < cols; c++) fprintf(o, "%s0x%02x", c ? ", " : "", p[r * cols + c]);
        fprintf(o, "},%s", (r % 2 == 1 || r == rows - 1) ? "\n" : " ");
    }
    fprintf(o, "};\n\n");
}

static void print_i8_rows(FILE *o, const char *decl, const int8_t *p, int rows, int cols)
{
    fprintf(o, "%s = {\n", decl);
    for (int r = 0; r < rows; r++) {
        fprintf(o, "%s{", r % 4 == 0 ? "    " : "");
        for (int c = 0; c < cols; c++) fprintf(o, "%s%2d", c ? ", " : "", p[r * cols + c]);
        fprintf(o, "},%s", (r % 4 == 3 || r == rows - 1) ? "\n" : " ");
    }
    fprintf(o, "};\n\n");
}

static const char *provenance =
    " * GENERATED by tests/goldens/gen_iq_tables.c from the decoders of the ggml\n"
    " * oracle (npm @node-llama-cpp/linux-x64@3.22.1, libggml-base.so): each entry is\n"
    " * what dequantize_row_<fmt> produced for a crafted block whose effective scale\n"
    " * is 1.0. Do not edit; rerun the generator (command in its header comment).\n";

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s OUT_H OUT_C\n", argv[0]);
        return 2;
    }
    const char *why = NULL;
    if (!fco_ggml_available(&why)) {
        fprintf(stderr, "gen_iq_tables: %s\n", why);
        return 1;
    }
    derive_nl();
    derive_iq2xxs();
    derive_iq2xs();
    derive_iq2s();
    derive_iq3xxs();
    derive_iq3s();
    derive_iq1s();

    FILE *h = fopen(argv[1], "w");
    if (!h) { perror(argv[1]); return 1; }
    fprintf(h, "/* Fucina: the lookup tables of GGML's IQ and FP4 formats (layer quant).\n *\n%s *\n"
               " * Grids are stored as bytes, element j of entry i at [i][j] (ggml's uint64\n"
               " * grid words read as bytes on a little-endian machine), so a kernel can load\n"
               " * one entry with an 8- or 4-byte memcpy on any host. */\n"
               "#ifndef FUCINA_QUANT_IQ_TABLES_H\n#define FUCINA_QUANT_IQ_TABLES_H\n\n#include <stdint.h>\n\n",
            provenance);
    fprintf(h, "/* iq1_s / iq1_m: y = dl * (grid + delta), delta = +-FCQ_IQ1S_DELTA. */\n");
    fprintf(h, "#define FCQ_IQ1S_DELTA %af /* %g */\n\n", (double)iq1s_delta, (double)iq1s_delta);
    fprintf(h, "/* Non-linear 4-bit values of iq4_nl / iq4_xs. */\nextern const int8_t fcq_kvalues_iq4nl[16];\n");
    fprintf(h, "/* E2M1 values doubled (so they are integers), as mxfp4 / nvfp4 decode them:\n"
               " * the scale conversions halve the scale to compensate. */\nextern const int8_t fcq_kvalues_e2m1x2[16];\n");
    fprintf(h, "/* 8-bit sign patterns of the iq2 / iq3 formats: a 7-bit index selects\n"
               " * 8 signs (bit j set: element j negative), bit 7 making the count even. */\n"
               "extern const uint8_t fcq_ksigns_iq2xs[128];\n");
    fprintf(h, "extern const uint8_t fcq_iq2xxs_grid[256][8];\nextern const uint8_t fcq_iq2xs_grid[512][8];\n"
               "extern const uint8_t fcq_iq2s_grid[1024][8];\nextern const uint8_t fcq_iq3xxs_grid[256][4];\n"
               "extern const uint8_t fcq_iq3s_grid[512][4];\nextern const int8_t fcq_iq1s_grid[2048][8];\n\n#endif\n");
    fclose(h);

    FILE *o = fopen(argv[2], "w");
    if (!o) { perror(argv[2]); return 1; }
    fprintf(o, "/* Fucina: the lookup tables of GGML's IQ and FP4 formats (see iq_tables.h).\n *\n%s */\n"
               "#include \"quant/iq_tables.h\"\n\n",
            provenance);
    fprintf(o, "const int8_t fcq_kvalues_iq4nl[16] = {");
    for (int j = 0; j < 16; j++) fprintf(o, "%s%d", j ? ", " : "", iq4nl[j]);
    fprintf(o, "};\n\nconst int8_t fcq_kvalues_e2m1x2[16] = {");
    for (int j = 0; j < 16; j++) fprintf(o, "%s%d", j ? ", " : "", e2m1[j]);
    fprintf(o, "};\n\nconst uint8_t fcq_ksigns_iq2xs[128] = {\n");
    for (int j = 0; j < 128; j++) fprintf(o, "%s0x%02x,%s", j % 16 ? " " : "    ", ksigns[j], j % 16 == 15 ? "\n" : "");
    fprintf(o, "};\n\n");
    print_u8_rows(o, "const uint8_t fcq_iq2xxs_grid[256][8]", &iq2xxs[0][0], 256, 8);
    print_u8_rows(o, "const uint8_t fcq_iq2xs_grid[512][8]", &iq2xs[0][0], 512, 8);
    print_u8_rows(o, "const uint8_t fcq_iq2s_grid[1024][8]", &iq2s[0][0], 1024, 8);
    print_u8_rows(o, "const uint8_t fcq_iq3xxs_grid[256][4]", &iq3xxs[0][0], 256, 4);
    print_u8_rows(o, "const uint8_t fcq_iq3s_grid[512][4]", &iq3s[0][0], 512, 4);
    print_i8_rows(o, "const int8_t fcq_iq1s_grid[2048][8]", &iq1s[0][0], 2048, 8);
    fclose(o);
    return 0;
}
