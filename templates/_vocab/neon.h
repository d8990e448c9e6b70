/* Vector vocabulary, AArch64 Advanced SIMD (ASIMD): 4 x f32, 2 x f64.
 *
 * Same names and contract as scalar.h and avx2.h. Only kernel translation
 * units compiled for this ISA include it; everything is static inline.
 *
 * Assumes the default FPCR of every AArch64 OS ABI (round to nearest-even,
 * FZ = 0, DN = 0, AHP = 0), the counterpart of the default MXCSR on x86:
 * subnormals are kept, NaN payloads propagate, f16 is IEEE binary16.
 *
 * Points where NEON's natural instruction differs from the contract:
 *   - vmaxq_f32/vminq_f32 (FMAX/FMIN) propagate NaN and order -0 < +0, while
 *     vf_max(a, b) must be exactly `a > b ? a : b` (maxps): compare + select.
 *   - f16: FCVTN/FCVTL (vcvt_f16_f32 / vcvt_f32_f16) round to nearest-even
 *     with gradual underflow and overflow to Inf; a NaN stays NaN with its
 *     quiet bit set and the top of its payload kept, like F16C's vcvtps2ph.
 *   - bf16 stores use integer round-to-nearest-even, like avx2.h (no
 *     reliance on the optional BF16 extension's BFCVTN).
 *   - Loads and stores of 16-bit types go through memcpy (the storage types
 *     are structs; no aliasing assumptions).
 */
#ifndef FCK_VOCAB_NEON_H
#define FCK_VOCAB_NEON_H

#include <arm_neon.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fucina/half.h"

#define VF_W 4
#define VD_W 2

typedef float32x4_t vf_t;
typedef float64x2_t vd_t;
typedef uint32x4_t vf_mask_t;
typedef uint64x2_t vd_mask_t;

static inline vf_t vf_zero(void) { return vdupq_n_f32(0.0f); }
static inline vf_t vf_set1(float a) { return vdupq_n_f32(a); }
static inline vf_t vf_load_f32(const float *p) { return vld1q_f32(p); }
static inline void vf_store_f32(float *p, vf_t v) { vst1q_f32(p, v); }
static inline vf_t vf_load_f16(const fc_f16 *p)
{
    uint16_t b[4];
    memcpy(b, p, sizeof b);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(b)));
}
static inline void vf_store_f16(fc_f16 *p, vf_t v)
{
    uint16_t b[4];
    vst1_u16(b, vreinterpret_u16_f16(vcvt_f16_f32(v)));
    memcpy(p, b, sizeof b);
}
static inline vf_t vf_load_bf16(const fc_bf16 *p)
{
    uint16_t b[4];
    memcpy(b, p, sizeof b);
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(b), 16));
}
/* Exactly fck_avx2_f32_to_bf16_bits: round to nearest-even on the dropped
 * 16 bits; a NaN gets its quiet bit (0x400000) set instead of being rounded. */
static inline uint16x4_t fck_neon_f32_to_bf16_bits(vf_t v)
{
    uint32x4_t u = vreinterpretq_u32_f32(v);
    uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    uint32x4_t rounded = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), lsb));
    uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x400000));
    uint32x4_t isnan = vmvnq_u32(vceqq_f32(v, v));
    return vmovn_u32(vshrq_n_u32(vbslq_u32(isnan, quiet, rounded), 16));
}
static inline void vf_store_bf16(fc_bf16 *p, vf_t v)
{
    uint16_t b[4];
    vst1_u16(b, fck_neon_f32_to_bf16_bits(v));
    memcpy(p, b, sizeof b);
}

/* Partial loads and stores go through a lane buffer: nothing past element n-1
 * is read or written, whatever the alignment. n <= VF_W. */
#define FCK_NEON_LOADN(dt, T)                                                            \
    static inline vf_t vf_loadn_##dt(const T *p, size_t n, float fill)                 \
    {                                                                                  \
        float buf[4];                                                                  \
        T tmp[4];                                                                      \
        memset(tmp, 0, sizeof tmp);                                                    \
        memcpy(tmp, p, n * sizeof(T));                                                 \
        vst1q_f32(buf, vf_load_##dt(tmp));                                             \
        for (size_t i = n; i < 4; i++) buf[i] = fill;                                  \
        return vld1q_f32(buf);                                                         \
    }                                                                                  \
    static inline void vf_storen_##dt(T *p, vf_t v, size_t n)                           \
    {                                                                                  \
        T tmp[4];                                                                      \
        vf_store_##dt(tmp, v);                                                         \
        memcpy(p, tmp, n * sizeof(T));                                                 \
    }
FCK_NEON_LOADN(f32, float)
FCK_NEON_LOADN(f16, fc_f16)
FCK_NEON_LOADN(bf16, fc_bf16)
#undef FCK_NEON_LOADN

static inline vf_t vf_add(vf_t a, vf_t b) { return vaddq_f32(a, b); }
static inline vf_t vf_sub(vf_t a, vf_t b) { return vsubq_f32(a, b); }
static inline vf_t vf_mul(vf_t a, vf_t b) { return vmulq_f32(a, b); }
static inline vf_t vf_div(vf_t a, vf_t b) { return vdivq_f32(a, b); }
/* FNEG / FABS only touch the sign bit (NaN payload kept), like the xor/andnot
 * of avx2.h. */
static inline vf_t vf_neg(vf_t a) { return vnegq_f32(a); }
static inline vf_t vf_abs(vf_t a) { return vabsq_f32(a); }
static inline vf_t vf_sqrt(vf_t a) { return vsqrtq_f32(a); }
/* vfmaq_f32(c, a, b) = c + a*b, rounded once. */
static inline vf_t vf_fma(vf_t a, vf_t b, vf_t c) { return vfmaq_f32(c, a, b); }
static inline vf_mask_t vf_gt(vf_t a, vf_t b) { return vcgtq_f32(a, b); }
static inline vf_mask_t vf_lt(vf_t a, vf_t b) { return vcltq_f32(a, b); }
static inline vf_mask_t vf_ge(vf_t a, vf_t b) { return vcgeq_f32(a, b); }
static inline vf_mask_t vf_eq(vf_t a, vf_t b) { return vceqq_f32(a, b); }
static inline vf_mask_t vf_isnan(vf_t a) { return vmvnq_u32(vceqq_f32(a, a)); }
static inline vf_t vf_select(vf_mask_t m, vf_t a, vf_t b) { return vbslq_f32(m, a, b); }
/* `a > b ? a : b` exactly (b when unordered or equal), not FMAX. */
static inline vf_t vf_max(vf_t a, vf_t b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
static inline vf_t vf_min(vf_t a, vf_t b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
static inline vf_t vf_maxnan(vf_t a, vf_t b) { return vf_select(vf_isnan(a), a, vf_select(vf_gt(a, b), a, b)); }
static inline vf_t vf_minnan(vf_t a, vf_t b) { return vf_select(vf_isnan(a), a, vf_select(vf_lt(a, b), a, b)); }
static inline float vf_lane(vf_t v, int i) { float b[4]; vst1q_f32(b, v); return b[i & 3]; }
/* Pairwise tree, fixed order, folding halves as avx2.h does:
 * (l0 + l2) + (l1 + l3). */
static inline float vf_hsum(vf_t v)
{
    float32x4_t s = vaddq_f32(v, vextq_f32(v, v, 2));
    return vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 1);
}
/* Adjacent pairs (see scalar.h): (v0 + v1) + (v2 + v3). */
static inline float vf_hsum_pairs(vf_t v)
{
    const float32x4_t s = vpaddq_f32(v, v);
    return vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 1);
}
static inline float vf_hmax(vf_t v)
{
    float32x4_t s = vf_max(v, vextq_f32(v, v, 2));
    float a = vgetq_lane_f32(s, 0), b = vgetq_lane_f32(s, 1);
    return a > b ? a : b;
}
static inline float vf_hmin(vf_t v)
{
    float32x4_t s = vf_min(v, vextq_f32(v, v, 2));
    float a = vgetq_lane_f32(s, 0), b = vgetq_lane_f32(s, 1);
    return a < b ? a : b;
}

/* Primitives the shared vector math (vmath.h) is written in. */
static inline vf_t vf_and(vf_t a, vf_t b)
{
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}
static inline vf_t vf_or(vf_t a, vf_t b)
{
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}
static inline vf_t vf_xor(vf_t a, vf_t b)
{
    return vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}
/* ~a & b, like andnps (BIC computes its first operand AND NOT its second). */
static inline vf_t vf_andnot(vf_t a, vf_t b)
{
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(b), vreinterpretq_u32_f32(a)));
}
static inline vf_t vf_bits(uint32_t u) { return vreinterpretq_f32_u32(vdupq_n_u32(u)); }
static inline vf_t vf_round(vf_t a) { return vrndnq_f32(a); }
static inline vf_t vf_floor(vf_t a) { return vrndmq_f32(a); }
/* 2^n for integral n in [-126, 127]. */
static inline vf_t vf_pow2i(vf_t n)
{
    int32x4_t e = vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127));
    return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
}
/* For normal a: the unbiased exponent as float, and the significand in [1, 2).
 * Bit-level, like avx2.h. */
static inline vf_t vf_exponent(vf_t a)
{
    uint32x4_t e = vandq_u32(vshrq_n_u32(vreinterpretq_u32_f32(a), 23), vdupq_n_u32(0xff));
    return vcvtq_f32_s32(vsubq_s32(vreinterpretq_s32_u32(e), vdupq_n_s32(127)));
}
static inline vf_t vf_significand(vf_t a)
{
    uint32x4_t m = vandq_u32(vreinterpretq_u32_f32(a), vdupq_n_u32(0x007fffff));
    return vreinterpretq_f32_u32(vorrq_u32(m, vdupq_n_u32(0x3f800000)));
}

static inline vd_t vd_zero(void) { return vdupq_n_f64(0.0); }
static inline vd_t vd_set1(double a) { return vdupq_n_f64(a); }
static inline vd_t vd_load_f64(const double *p) { return vld1q_f64(p); }
static inline void vd_store_f64(double *p, vd_t v) { vst1q_f64(p, v); }
static inline vd_t vd_loadn_f64(const double *p, size_t n, double fill)
{
    double buf[2] = {fill, fill};
    memcpy(buf, p, n * sizeof(double));
    return vld1q_f64(buf);
}
static inline void vd_storen_f64(double *p, vd_t v, size_t n)
{
    double buf[2];
    vst1q_f64(buf, v);
    memcpy(p, buf, n * sizeof(double));
}
/* f32 <-> f64 lanes, for conversions (FCVTN rounds to nearest-even, FPCR default;
 * NaNs stay NaN, quieted, top payload bits kept, like vcvtpd2ps / vcvtps2pd). */
static inline vd_t vd_load_f32(const float *p) { return vcvt_f64_f32(vld1_f32(p)); }
static inline void vd_store_f32(float *p, vd_t v) { vst1_f32(p, vcvt_f32_f64(v)); }
static inline vd_t vd_loadn_f32(const float *p, size_t n, double fill)
{
    float buf[2] = {(float)fill, (float)fill};
    memcpy(buf, p, n * sizeof(float));
    return vd_load_f32(buf);
}
static inline void vd_storen_f32(float *p, vd_t v, size_t n)
{
    float buf[2];
    vd_store_f32(buf, v);
    memcpy(p, buf, n * sizeof(float));
}
static inline vd_t vd_add(vd_t a, vd_t b) { return vaddq_f64(a, b); }
static inline vd_t vd_sub(vd_t a, vd_t b) { return vsubq_f64(a, b); }
static inline vd_t vd_mul(vd_t a, vd_t b) { return vmulq_f64(a, b); }
static inline vd_t vd_div(vd_t a, vd_t b) { return vdivq_f64(a, b); }
static inline vd_t vd_neg(vd_t a) { return vnegq_f64(a); }
static inline vd_t vd_abs(vd_t a) { return vabsq_f64(a); }
static inline vd_t vd_sqrt(vd_t a) { return vsqrtq_f64(a); }
static inline vd_t vd_fma(vd_t a, vd_t b, vd_t c) { return vfmaq_f64(c, a, b); }
static inline vd_t vd_select_(vd_mask_t m, vd_t a, vd_t b) { return vbslq_f64(m, a, b); }
static inline vd_t vd_max(vd_t a, vd_t b) { return vbslq_f64(vcgtq_f64(a, b), a, b); }
static inline vd_t vd_min(vd_t a, vd_t b) { return vbslq_f64(vcltq_f64(a, b), a, b); }
static inline vd_t vd_maxnan(vd_t a, vd_t b)
{
    uint64x2_t an = vreinterpretq_u64_u32(vmvnq_u32(vreinterpretq_u32_u64(vceqq_f64(a, a))));
    return vd_select_(an, a, vd_select_(vcgtq_f64(a, b), a, b));
}
static inline vd_t vd_minnan(vd_t a, vd_t b)
{
    uint64x2_t an = vreinterpretq_u64_u32(vmvnq_u32(vreinterpretq_u32_u64(vceqq_f64(a, a))));
    return vd_select_(an, a, vd_select_(vcltq_f64(a, b), a, b));
}
static inline double vd_hsum(vd_t v) { return vgetq_lane_f64(v, 0) + vgetq_lane_f64(v, 1); }
static inline double vd_hmax(vd_t v)
{
    double a = vgetq_lane_f64(v, 0), b = vgetq_lane_f64(v, 1);
    return a > b ? a : b;
}
static inline double vd_hmin(vd_t v)
{
    double a = vgetq_lane_f64(v, 0), b = vgetq_lane_f64(v, 1);
    return a < b ? a : b;
}

#include "vmath.h"

#endif /* FCK_VOCAB_NEON_H */
