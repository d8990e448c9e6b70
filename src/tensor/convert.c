/* SPDX-License-Identifier: MIT */
/* Element conversions by the casting rules in fucina/dtype.h.
 *
 * Going through double is exact for every source value (i64 aside: values
 * beyond 2^53 round, which only matters for i64 -> i64, handled directly),
 * so one load and one store per dtype cover all pairs. Float -> integer
 * truncates toward zero and saturates; NaN -> 0. */
#include <math.h>
#include <string.h>

#include "fucina/half.h"
#include "dispatch/dispatch.h"
#include "tensor/internal.h"

static float f64_to_f32_odd(double v);

double fct_load(fc_dtype dt, const void *p)
{
    switch (dt) {
    case FC_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    case FC_U8: return *(const uint8_t *)p;
    case FC_I8: return *(const int8_t *)p;
    case FC_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case FC_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case FC_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case FC_F16: { fc_f16 v; memcpy(&v, p, 2); return fc_f16_to_f32(v); }
    case FC_BF16: { fc_bf16 v; memcpy(&v, p, 2); return fc_bf16_to_f32(v); }
    case FC_F32: { float v; memcpy(&v, p, 4); return v; }
    case FC_F64: { double v; memcpy(&v, p, 8); return v; }
    FC_CASE_BLOCK_DTYPES: return NAN; /* no elements: ops refuse block tensors before loading */
    }
    return 0.0;
}

/* Truncate toward zero and saturate to [lo, hi]; NaN -> 0. */
static double sat(double v, double lo, double hi)
{
    if (isnan(v)) return 0.0;
    v = trunc(v);
    return v < lo ? lo : v > hi ? hi : v;
}

void fct_store(fc_dtype dt, void *p, double v)
{
    switch (dt) {
    case FC_BOOL: *(uint8_t *)p = (v != 0.0 || isnan(v)) ? 1 : 0; return;
    case FC_U8: *(uint8_t *)p = (uint8_t)sat(v, 0, 255); return;
    case FC_I8: *(int8_t *)p = (int8_t)sat(v, -128, 127); return;
    case FC_I16: { int16_t x = (int16_t)sat(v, -32768, 32767); memcpy(p, &x, 2); return; }
    case FC_I32: { int32_t x = (int32_t)sat(v, -2147483648.0, 2147483647.0); memcpy(p, &x, 4); return; }
    case FC_I64: {
        /* 2^63 is not an i64; the largest double below it is 2^63 - 1024. */
        int64_t x;
        if (isnan(v)) x = 0;
        else if (v >= 9223372036854775808.0) x = INT64_MAX;
        else if (v < -9223372036854775808.0) x = INT64_MIN;
        else x = (int64_t)trunc(v);
        memcpy(p, &x, 8);
        return;
    }
    case FC_F16: { fc_f16 x = fc_f32_to_f16(f64_to_f32_odd(v)); memcpy(p, &x, 2); return; }
    case FC_BF16: { fc_bf16 x = fc_f32_to_bf16(f64_to_f32_odd(v)); memcpy(p, &x, 2); return; }
    case FC_F32: { float x = (float)v; memcpy(p, &x, 4); return; }
    case FC_F64: memcpy(p, &v, 8); return;
    FC_CASE_BLOCK_DTYPES: return; /* refused before: see fct_load */
    }
}

/* f64 -> f16/bf16 must round once: (float)v then a second rounding could
 * land on the wrong side of a tie. Rounding to f32 by round-to-odd first
 * (truncate, then set the last bit when inexact) keeps the information a
 * correct second rounding needs, since f32 has >= 2 more bits than either. */
static float f64_to_f32_odd(double v)
{
    float f = (float)v;
    if (isnan(v) || isinf(f) || (double)f == v) return f;
    if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
    return fc_bits_f32(fc_f32_bits(f) | 1u);
}
static fc_f16 f64_to_f16(double v) { return fc_f32_to_f16(f64_to_f32_odd(v)); }
static fc_bf16 f64_to_bf16(double v) { return fc_f32_to_bf16(f64_to_f32_odd(v)); }

void fct_convert(fc_dtype from, const void *src, fc_dtype to, void *dst, int64_t n)
{
    const fck_table *k = fck_kernels();
    size_t ss = fc_dtype_size(from), ds = fc_dtype_size(to);
    if (from == to) {
        memcpy(dst, src, (size_t)n * ss);
        return;
    }
    if (from == FC_F32 && to == FC_F16) { k->f32_to_f16((size_t)n, src, dst); return; }
    if (from == FC_F32 && to == FC_BF16) { k->f32_to_bf16((size_t)n, src, dst); return; }
    if (from == FC_F16 && to == FC_F32) { k->f16_to_f32((size_t)n, src, dst); return; }
    if (from == FC_BF16 && to == FC_F32) { k->bf16_to_f32((size_t)n, src, dst); return; }
    if (from == FC_F64 && to == FC_F16) {
        for (int64_t i = 0; i < n; i++) ((fc_f16 *)dst)[i] = f64_to_f16(((const double *)src)[i]);
        return;
    }
    if (from == FC_F64 && to == FC_BF16) {
        for (int64_t i = 0; i < n; i++) ((fc_bf16 *)dst)[i] = f64_to_bf16(((const double *)src)[i]);
        return;
    }
    if (from == FC_I64 && fc_dtype_is_integer(to)) {
        /* Direct saturation: double would round values beyond 2^53. */
        const int64_t *s = src;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = s[i];
            switch (to) {
            case FC_U8: ((uint8_t *)dst)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); break;
            case FC_I8: ((int8_t *)dst)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v); break;
            case FC_I16: ((int16_t *)dst)[i] = (int16_t)(v < -32768 ? -32768 : v > 32767 ? 32767 : v); break;
            case FC_I32: ((int32_t *)dst)[i] = (int32_t)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v); break;
            case FC_I64: ((int64_t *)dst)[i] = v; break;
            case FC_BOOL: case FC_F16: case FC_BF16: case FC_F32: case FC_F64: break;
            FC_CASE_BLOCK_DTYPES: break;
            }
        }
        return;
    }
    const char *s = src;
    char *d = dst;
    for (int64_t i = 0; i < n; i++) fct_store(to, d + (size_t)i * ds, fct_load(from, s + (size_t)i * ss));
}

const float *fct_row_f32(fc_dtype dt, const char *row, int64_t n, int64_t st, float *buf)
{
    if (dt == FC_F32 && st == 4) return (const float *)(const void *)row;
    if (st == (int64_t)fc_dtype_size(dt)) {
        fct_convert(dt, row, FC_F32, buf, n);
        return buf;
    }
    for (int64_t i = 0; i < n; i++) buf[i] = (float)fct_load(dt, row + i * st);
    return buf;
}
