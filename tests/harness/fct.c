/* SPDX-License-Identifier: MIT */
/* Conformance-test harness: buffers, inputs, comparisons. See fct.h. */
#define _POSIX_C_SOURCE 200809L
#include "fct.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"

enum { FCT_GUARD = 64, FCT_CANARY = 0xA5 };

uint64_t fct_next(fct_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double fct_uniform(fct_rng *r, double lo, double hi)
{
    double u = (double)(fct_next(r) >> 11) * 0x1p-53;
    return lo + (hi - lo) * u;
}

uint64_t fct_seed_of(const char *name)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

fct_buf fct_buf_new(size_t bytes, size_t misalign)
{
    fct_buf b;
    size_t total = bytes + 2 * FCT_GUARD + 128;
    b.base = malloc(total);
    if (!b.base) {
        fprintf(stderr, "fct: out of memory (%zu bytes)\n", total);
        exit(2);
    }
    memset(b.base, FCT_CANARY, total);
    uintptr_t p = (uintptr_t)(b.base + FCT_GUARD + 63) & ~(uintptr_t)63;
    b.data = (unsigned char *)p + misalign;
    b.bytes = bytes;
    return b;
}

int fct_buf_guards_ok(const fct_buf *b)
{
    for (size_t i = 1; i <= FCT_GUARD; i++)
        if (b->data[-(ptrdiff_t)i] != FCT_CANARY) return 0;
    for (size_t i = 0; i < FCT_GUARD; i++)
        if (b->data[b->bytes + i] != FCT_CANARY) return 0;
    return 1;
}

void fct_buf_free(fct_buf *b)
{
    free(b->base);
    b->base = b->data = NULL;
}

size_t fct_dtype_size(fct_dtype dt)
{
    switch (dt) {
    case FCT_F32: return 4;
    case FCT_F64: return 8;
    case FCT_F16: return 2;
    case FCT_BF16: return 2;
    case FCT_I8: return 1;
    case FCT_I32: return 4;
    }
    return 0;
}

const char *fct_dtype_name(fct_dtype dt)
{
    switch (dt) {
    case FCT_F32: return "f32";
    case FCT_F64: return "f64";
    case FCT_F16: return "f16";
    case FCT_BF16: return "bf16";
    case FCT_I8: return "i8";
    case FCT_I32: return "i32";
    }
    return "?";
}

double fct_get(fct_dtype dt, const void *p, size_t i)
{
    switch (dt) {
    case FCT_F32: return ((const float *)p)[i];
    case FCT_F64: return ((const double *)p)[i];
    case FCT_F16: return fc_f16_to_f32(((const fc_f16 *)p)[i]);
    case FCT_BF16: return fc_bf16_to_f32(((const fc_bf16 *)p)[i]);
    case FCT_I8: return ((const int8_t *)p)[i];
    case FCT_I32: return ((const int32_t *)p)[i];
    }
    return 0;
}

void fct_set(fct_dtype dt, void *p, size_t i, double v)
{
    switch (dt) {
    case FCT_F32: ((float *)p)[i] = (float)v; return;
    case FCT_F64: ((double *)p)[i] = v; return;
    case FCT_F16: ((fc_f16 *)p)[i] = fc_f32_to_f16((float)v); return;
    case FCT_BF16: ((fc_bf16 *)p)[i] = fc_f32_to_bf16((float)v); return;
    case FCT_I8: ((int8_t *)p)[i] = (int8_t)v; return;
    case FCT_I32: ((int32_t *)p)[i] = (int32_t)v; return;
    }
}

static double special_value(fct_dtype dt, fct_rng *r, int no_huge)
{
    static const double common[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0.5};
    unsigned pick = (unsigned)(fct_next(r) % 14);
    if (no_huge && (pick == 10 || pick == 11)) pick = 8;
    if (pick < 8) return common[pick];
    switch (dt) {
    case FCT_F16:
        switch (pick) {
        case 8: return 0x1p-24;          /* smallest subnormal */
        case 9: return -0x1.ff8p-15;     /* largest subnormal */
        case 10: return 65504.0;         /* largest finite */
        case 11: return -65504.0;
        case 12: return 0x1p-14;         /* smallest normal */
        default: return 1.0 + 0x1p-10;
        }
    case FCT_BF16:
    case FCT_F32:
        switch (pick) {
        case 8: return 0x1p-149;         /* f32 subnormal */
        case 9: return -0x1.fep-127;     /* subnormal, exact in bf16 */
        case 10: return 3.3895313892515355e38; /* largest bf16 finite */
        case 11: return -3.4028234663852886e38;
        case 12: return 0x1p-126;
        default: return 65520.0;         /* overflows f16 */
        }
    case FCT_F64:
        switch (pick) {
        case 8: return 0x1p-1074;
        case 9: return -0x1p-1022;
        case 10: return 1.7976931348623157e308;
        case 11: return -1.7976931348623157e308;
        case 12: return 1e300;
        default: return 1.0 + 0x1p-52;
        }
    case FCT_I8: return (pick & 1) ? -128.0 : 127.0;
    case FCT_I32: return (pick & 1) ? -2147483648.0 : 2147483647.0;
    }
    return 0.0;
}

void fct_fill(fct_dtype dt, void *p, size_t n, double lo, double hi, int specials, fct_rng *r)
{
    for (size_t i = 0; i < n; i++) {
        double v;
        if (specials && (fct_next(r) & 7) == 0)
            v = special_value(dt, r, specials == FCT_SPECIALS_NO_HUGE);
        else if (dt == FCT_I8 || dt == FCT_I32)
            v = floor(fct_uniform(r, lo, hi + 1.0));
        else
            v = fct_uniform(r, lo, hi);
        fct_set(dt, p, i, v);
    }
}

/* Map a float's bits onto a line where adjacent floats differ by 1 and
 * -0 and +0 coincide. */
static int64_t ordered(fct_dtype dt, const void *p, size_t i)
{
    switch (dt) {
    case FCT_F32: {
        int32_t u;
        memcpy(&u, (const float *)p + i, 4);
        return u < 0 ? (int64_t)INT32_MIN - u : u;
    }
    case FCT_F64: {
        int64_t u;
        memcpy(&u, (const double *)p + i, 8);
        return u < 0 ? INT64_MIN - u : u;
    }
    case FCT_F16:
    case FCT_BF16: {
        uint16_t u;
        memcpy(&u, (const uint16_t *)p + i, 2);
        int32_t s = (int16_t)u;
        return s < 0 ? -32768 - s : s;
    }
    case FCT_I8: return ((const int8_t *)p)[i];
    case FCT_I32: return ((const int32_t *)p)[i];
    }
    return 0;
}

static int is_float(fct_dtype dt)
{
    switch (dt) {
    case FCT_F32:
    case FCT_F64:
    case FCT_F16:
    case FCT_BF16: return 1;
    case FCT_I8:
    case FCT_I32: return 0;
    }
    return 0;
}

static double eps_of(fct_dtype dt)
{
    switch (dt) {
    case FCT_F32: return 0x1p-23;
    case FCT_F64: return 0x1p-52;
    case FCT_F16: return 0x1p-10;
    case FCT_BF16: return 0x1p-7;
    case FCT_I8:
    case FCT_I32: return 0;
    }
    return 0;
}

static void print_hex(fct_dtype dt, const void *p, size_t i)
{
    if (!p) return;
    double v = fct_get(dt, p, i);
    switch (dt) {
    case FCT_F32: { uint32_t u; memcpy(&u, (const float *)p + i, 4); fprintf(stderr, "%a (0x%08x)", v, u); return; }
    case FCT_F64: { uint64_t u; memcpy(&u, (const double *)p + i, 8); fprintf(stderr, "%a (0x%016llx)", v, (unsigned long long)u); return; }
    case FCT_F16:
    case FCT_BF16: { uint16_t u; memcpy(&u, (const uint16_t *)p + i, 2); fprintf(stderr, "%a (0x%04x)", v, u); return; }
    case FCT_I8: fprintf(stderr, "%d", ((const int8_t *)p)[i]); return;
    case FCT_I32: fprintf(stderr, "%d", ((const int32_t *)p)[i]); return;
    }
}

static int element_ok(fct_dtype dt, const void *got, const void *want, size_t i, fct_tol tol, fct_nan nan,
                      const double *sum_abs, size_t nterms)
{
    if (!is_float(dt)) return ordered(dt, got, i) == ordered(dt, want, i);
    double g = fct_get(dt, got, i), w = fct_get(dt, want, i);
    int gn = isnan(g), wn = isnan(w);
    switch (nan) {
    case FCT_NAN_PROPAGATE:
        if (gn || wn) return gn && wn;
        break;
    case FCT_NAN_ANY:
        if (wn) return 1;
        if (gn) return 0;
        break;
    case FCT_NAN_UNCHECKED:
        if (gn || wn) return 1;
        break;
    }
    if (tol.kind == FCT_TOL_EXACT) {
        size_t sz = fct_dtype_size(dt);
        return memcmp((const char *)got + i * sz, (const char *)want + i * sz, sz) == 0;
    }
    if (isinf(g) || isinf(w)) return g == w;
    int64_t d = ordered(dt, got, i) - ordered(dt, want, i);
    if (d < 0) d = -d;
    if (d <= tol.ulp) return 1;
    double err = fabs(g - w);
    if (err <= tol.abs + tol.rel * fabs(w)) return 1;
    if (tol.sum_bound > 0 && sum_abs) {
        /* |got - want| <= c * n * eps * sum|terms|, plus one rounding of the
         * stored result itself. */
        double bound = tol.sum_bound * (double)nterms * eps_of(dt) * sum_abs[i] + eps_of(dt) * fabs(w);
        if (err <= bound) return 1;
    }
    return 0;
}

int fct_compare(const char *what, uint64_t seed, fct_dtype dt, const void *got, const void *want, size_t n,
                fct_tol tol, fct_nan nan, fct_dtype in_dt, const void *const ins[3], const double *sum_abs,
                size_t nterms)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (element_ok(dt, got, want, i, tol, nan, sum_abs, nterms)) continue;
        if (bad < 4) {
            fprintf(stderr, "FAIL %s seed=0x%016llx n=%zu index=%zu:", what, (unsigned long long)seed, n, i);
            for (int k = 0; k < 3; k++) {
                if (!ins || !ins[k]) continue;
                fprintf(stderr, " in%d=", k);
                print_hex(in_dt, ins[k], i);
            }
            fprintf(stderr, " got=");
            print_hex(dt, got, i);
            fprintf(stderr, " want=");
            print_hex(dt, want, i);
            if (sum_abs) fprintf(stderr, " sum|terms|=%g", sum_abs[i]);
            fprintf(stderr, "\n");
        }
        bad++;
    }
    if (bad) fprintf(stderr, "FAIL %s: %zu of %zu elements out of tolerance\n", what, bad, n);
    return bad == 0;
}

int fct_isa_runnable(fck_isa isa, const char **why)
{
    if (fck_isa_supported(isa)) return 1;
    if (why) *why = fck_isa_missing_features(isa);
    return 0;
}
