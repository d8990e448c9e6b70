/* SPDX-License-Identifier: MIT */
/* Cross-ISA bit-identity of vmath.h.
 *
 *   xisa OUT.bin
 *
 * Evaluates vf_exp/log/sin/cos/tanh/erf on a fixed input set (special
 * values, edges of every branch, ~1e6 pseudo-random bit patterns and values
 * in the interesting ranges; identical on every ISA) and writes input and
 * output bits to OUT.bin. Build for avx2, avx512 and neon (run the latter
 * under qemu-aarch64) and compare the files with cmp: they must be equal.
 * Also checks the special-value contract and prints a summary line.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm_isa.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float uni(float lo, float hi) { return lo + (hi - lo) * (float)(next32() >> 8) * 0x1p-24f; }
static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

#define NRAND 1000000
static const uint32_t SPECIAL[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001,
    0xff800001, 0x7fa00000, 0x7fc12345, 0x7fbfffff, 0x00000001, 0x80000001, 0x007fffff,
    0x807fffff, 0x00400000, 0x00000100, 0x00800000, 0x80800000, 0x7f7fffff, 0xff7fffff,
    0x3f800000, 0xbf800000, 0x3f000000, 0x33800000, 0x34000000, 0x39800000, 0x3c800000,
};
static const float EDGES[] = {
    88.7228394f, 88.72284f, 88.7228317f, 88.0f, 89.0f, 90.0f, 100.0f, -87.3365479f, -87.33655f,
    -88.0f, -100.0f, -103.972076f, -103.97208f, -103.9721f, -104.0f, -105.0f, -150.0f,
    0.346573591f, -0.346573591f, 1.41421354f, 1.41421366f, 0.707106769f, 0.707106829f,
    1.57079637f, 3.14159274f, 4.71238899f, 6.28318548f, 0.785398185f, 10000.0f, -10000.0f,
    1048576.0f, 2097152.0f, 16777216.0f, 1e10f, 1e20f, 1e30f, 0.625f, 0.62499994f, 0.62500006f,
    9.0f, 9.1f, 10.0f, 10.5f, 0.921875f, 0.92187494f, 0.92187506f, 3.9f, 3.92f, 3.93f,
    4.0f, 4.0000005f, 5.0f, 1e-10f, 1e-20f, 1e-30f, 1e-38f, 1e-40f, 1e-45f,
};

typedef vf_t (*vfn)(vf_t);
static vf_t w_exp(vf_t x) { return vf_exp(x); }
static vf_t w_log(vf_t x) { return vf_log(x); }
static vf_t w_sin(vf_t x) { return vf_sin(x); }
static vf_t w_cos(vf_t x) { return vf_cos(x); }
static vf_t w_tanh(vf_t x) { return vf_tanh(x); }
static vf_t w_erf(vf_t x) { return vf_erf(x); }
static const struct { const char *name; vfn f; } FNS[] = {
    {"exp", w_exp}, {"log", w_log}, {"sin", w_sin}, {"cos", w_cos}, {"tanh", w_tanh}, {"erf", w_erf},
};

static int fails;
static void expect(const char *fn, float x, float y, float want)
{
    int ok = isnan(want) ? isnan(y) : (f_bits(y) == f_bits(want));
    if (!ok) {
        printf("FAIL %s(%a): got %a (0x%08x), want %a\n", fn, x, y, f_bits(y), want);
        fails++;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: xisa OUT.bin\n"); return 2; }
    size_t nsp = sizeof SPECIAL / sizeof SPECIAL[0], ned = sizeof EDGES / sizeof EDGES[0];
    size_t n = 2 * (nsp + ned) + NRAND;
    n = (n + 15) / 16 * 16;
    float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    if (!in || !out) { fprintf(stderr, "xisa: out of memory\n"); free(in); free(out); return 1; }
    size_t k = 0;
    for (size_t i = 0; i < nsp; i++) { in[k++] = bits_f(SPECIAL[i]); in[k++] = bits_f(SPECIAL[i] ^ 0x80000000u); }
    for (size_t i = 0; i < ned; i++) { in[k++] = EDGES[i]; in[k++] = -EDGES[i]; }
    while (k < n) {
        uint32_t sel = next32() % 8;
        float v;
        switch (sel) {
        case 0: case 1: v = bits_f(next32()); break;                            /* any pattern */
        case 2: v = uni(-110.0f, 110.0f); break;                                /* exp edges */
        case 3: v = uni(-12.0f, 12.0f); break;                                  /* tanh/erf */
        case 4: v = uni(-10000.0f, 10000.0f); break;                            /* sin/cos */
        case 5: v = bits_f(next32() & 0x807fffffu); break;                      /* subnormals */
        case 6: v = bits_f((next32() & 0x80ffffffu) | ((80u + next32() % 100u) << 23)); break;
        default: v = uni(-2.0f, 2.0f); break;
        }
        in[k++] = v;
    }
    FILE *fo = fopen(argv[1], "wb");
    if (!fo) { perror(argv[1]); free(in); free(out); return 1; }
    fwrite(in, sizeof *in, n, fo);
    for (size_t f = 0; f < sizeof FNS / sizeof FNS[0]; f++) {
        for (size_t i = 0; i < n; i += VF_W) vf_store_f32(out + i, FNS[f].f(vf_load_f32(in + i)));
        fwrite(out, sizeof *out, n, fo);
        /* special-value contract, on this ISA */
        for (size_t i = 0; i < n; i++) {
            float x = in[i], y = out[i];
            const char *nm = FNS[f].name;
            if (isnan(x)) { expect(nm, x, y, NAN); continue; }
            switch (f) {
            case 0:
                if (x == INFINITY) expect(nm, x, y, INFINITY);
                if (x == -INFINITY || x < -104.0f) expect(nm, x, y, 0.0f);
                if (x > 88.7228394f) expect(nm, x, y, INFINITY);
                if (x == 0.0f) expect(nm, x, y, 1.0f);
                if (!(y >= 0.0f)) expect(nm, x, y, 0.0f);
                break;
            case 1:
                if (x == INFINITY) expect(nm, x, y, INFINITY);
                if (x == 0.0f) expect(nm, x, y, -INFINITY);
                if (x < 0.0f) expect(nm, x, y, NAN);
                if (x == 1.0f) expect(nm, x, y, 0.0f);
                if (x > 0.0f && isinf(x) == 0 && !isfinite(y)) expect(nm, x, y, 0.0f);
                break;
            case 2: case 3:
                if (isinf(x)) expect(nm, x, y, NAN);
                else if (!(y >= -1.0f && y <= 1.0f)) expect(nm, x, y, 0.0f);
                if (f == 2 && x == 0.0f) expect(nm, x, y, x);
                if (f == 3 && x == 0.0f) expect(nm, x, y, 1.0f);
                break;
            default:
                if (isinf(x)) expect(nm, x, y, x > 0 ? 1.0f : -1.0f);
                if (fabsf(x) >= (f == 4 ? 9.1f : 3.93f)) expect(nm, x, y, x > 0 ? 1.0f : -1.0f);
                if (x == 0.0f || (f == 4 && fabsf(x) < 1e-30f)) expect(nm, x, y, x);
                if (f == 5 && fabsf(x) < 1e-30f &&
                    !(fabs((double)y - 1.1283791670955126 * x) <= 0x1p-149 + fabs(x) * 0x1p-22))
                    expect(nm, x, y, (float)(1.1283791670955126 * x));
                if (signbit(x) != signbit(y) || !(fabsf(y) <= 1.0f)) expect(nm, x, y, copysignf(0.5f, x));
                break;
            }
        }
    }
    free(in);
    free(out);
    if (fclose(fo) != 0) { perror(argv[1]); return 1; }
    printf("xisa %s: %zu inputs x %zu functions written to %s; %d contract failures\n", VM_ISA, n,
           sizeof FNS / sizeof FNS[0], argv[1], fails);
    return fails != 0;
}
