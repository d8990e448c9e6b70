/* Vector vocabulary, AVX2 + FMA + F16C: 8 x f32, 4 x f64.
 *
 * Same names and contract as scalar.h. Only kernel translation units compiled
 * with this ISA's flags include it; everything is static inline so no AVX2
 * code can leak into baseline objects through the linker.
 *
 * bf16 stores use integer round-to-nearest-even, not AVX512-BF16's
 * vcvtneps2bf16, whose handling of subnormals differs from the scalar rule.
 */
#ifndef FCK_VOCAB_AVX2_H
#define FCK_VOCAB_AVX2_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fucina/half.h"

#define VF_W 8
#define VD_W 4

typedef __m256 vf_t;
typedef __m256d vd_t;
typedef __m256 vf_mask_t;
typedef __m256d vd_mask_t;

static inline vf_t vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf_t vf_set1(float a) { return _mm256_set1_ps(a); }
static inline vf_t vf_load_f32(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store_f32(float *p, vf_t v) { _mm256_storeu_ps(p, v); }
static inline vf_t vf_load_f16(const fc_f16 *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
static inline void vf_store_f16(fc_f16 *p, vf_t v)
{
    _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline vf_t vf_load_bf16(const fc_bf16 *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline __m128i fck_avx2_f32_to_bf16_bits(vf_t v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
    __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
    __m256i isnan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m256i r = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, isnan), 16);
    /* pack 8 x u32 (each < 65536) into 8 x u16 */
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    return _mm_packus_epi32(lo, hi);
}
static inline void vf_store_bf16(fc_bf16 *p, vf_t v)
{
    _mm_storeu_si128((__m128i *)(void *)p, fck_avx2_f32_to_bf16_bits(v));
}

/* Partial loads and stores go through a lane buffer: nothing past element n-1
 * is read or written, whatever the alignment. */
#define FCK_AVX2_LOADN(dt, T)                                                            \
    static inline vf_t vf_loadn_##dt(const T *p, size_t n, float fill)                 \
    {                                                                                  \
        float buf[8];                                                                  \
        T tmp[8];                                                                      \
        memset(tmp, 0, sizeof tmp);                                                    \
        memcpy(tmp, p, n * sizeof(T));                                                 \
        vf_t v = vf_load_##dt(tmp);                                                    \
        _mm256_storeu_ps(buf, v);                                                      \
        for (size_t i = n; i < 8; i++) buf[i] = fill;                                  \
        return _mm256_loadu_ps(buf);                                                   \
    }                                                                                  \
    static inline void vf_storen_##dt(T *p, vf_t v, size_t n)                           \
    {                                                                                  \
        T tmp[8];                                                                      \
        vf_store_##dt(tmp, v);                                                         \
        memcpy(p, tmp, n * sizeof(T));                                                 \
    }
FCK_AVX2_LOADN(f32, float)
FCK_AVX2_LOADN(f16, fc_f16)
FCK_AVX2_LOADN(bf16, fc_bf16)
#undef FCK_AVX2_LOADN

static inline vf_t vf_add(vf_t a, vf_t b) { return _mm256_add_ps(a, b); }
static inline vf_t vf_sub(vf_t a, vf_t b) { return _mm256_sub_ps(a, b); }
static inline vf_t vf_mul(vf_t a, vf_t b) { return _mm256_mul_ps(a, b); }
static inline vf_t vf_div(vf_t a, vf_t b) { return _mm256_div_ps(a, b); }
static inline vf_t vf_neg(vf_t a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
static inline vf_t vf_abs(vf_t a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf_t vf_sqrt(vf_t a) { return _mm256_sqrt_ps(a); }
static inline vf_t vf_fma(vf_t a, vf_t b, vf_t c) { return _mm256_fmadd_ps(a, b, c); }
/* maxps(a, b) is `a > b ? a : b` exactly: the second operand when either is
 * NaN or both are equal (so max(-0, +0) is +0 and max(+0, -0) is -0). */
static inline vf_t vf_max(vf_t a, vf_t b) { return _mm256_max_ps(a, b); }
static inline vf_t vf_min(vf_t a, vf_t b) { return _mm256_min_ps(a, b); }
static inline vf_mask_t vf_gt(vf_t a, vf_t b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline vf_mask_t vf_lt(vf_t a, vf_t b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline vf_mask_t vf_ge(vf_t a, vf_t b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
static inline vf_mask_t vf_eq(vf_t a, vf_t b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
static inline vf_mask_t vf_isnan(vf_t a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
static inline vf_t vf_select(vf_mask_t m, vf_t a, vf_t b) { return _mm256_blendv_ps(b, a, m); }
static inline vf_t vf_maxnan(vf_t a, vf_t b) { return vf_select(vf_isnan(a), a, vf_select(vf_gt(a, b), a, b)); }
static inline vf_t vf_minnan(vf_t a, vf_t b) { return vf_select(vf_isnan(a), a, vf_select(vf_lt(a, b), a, b)); }
static inline float vf_lane(vf_t v, int i) { float b[8]; _mm256_storeu_ps(b, v); return b[i & 7]; }
/* Pairwise tree: (l0+l4) ... then halves again; the order is fixed and documented. */
static inline float vf_hsum(vf_t v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
/* Adjacent pairs (see scalar.h): swaps of pairs, of 64-bit halves, of
 * 128-bit halves; lane 0 ends with the scalar loop's sum. */
static inline float vf_hsum_pairs(vf_t v)
{
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0xB1));
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E));
    v = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 0x01));
    return _mm256_cvtss_f32(v);
}
static inline float vf_hmax(vf_t v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float vf_hmin(vf_t v)
{
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    s = _mm_min_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Primitives the shared vector math (vmath.h) is written in. */
static inline vf_t vf_and(vf_t a, vf_t b) { return _mm256_and_ps(a, b); }
static inline vf_t vf_or(vf_t a, vf_t b) { return _mm256_or_ps(a, b); }
static inline vf_t vf_xor(vf_t a, vf_t b) { return _mm256_xor_ps(a, b); }
static inline vf_t vf_andnot(vf_t a, vf_t b) { return _mm256_andnot_ps(a, b); }
static inline vf_t vf_bits(uint32_t u) { return _mm256_castsi256_ps(_mm256_set1_epi32((int)u)); }
static inline vf_t vf_round(vf_t a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf_t vf_floor(vf_t a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
/* 2^n for integral n in [-126, 127]. */
static inline vf_t vf_pow2i(vf_t n)
{
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
/* For normal a: the unbiased exponent as float, and the significand in [1, 2). */
static inline vf_t vf_exponent(vf_t a)
{
    __m256i e = _mm256_srli_epi32(_mm256_castps_si256(a), 23);
    e = _mm256_sub_epi32(_mm256_and_si256(e, _mm256_set1_epi32(0xff)), _mm256_set1_epi32(127));
    return _mm256_cvtepi32_ps(e);
}
static inline vf_t vf_significand(vf_t a)
{
    __m256i m = _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x007fffff));
    return _mm256_castsi256_ps(_mm256_or_si256(m, _mm256_set1_epi32(0x3f800000)));
}

static inline vd_t vd_zero(void) { return _mm256_setzero_pd(); }
static inline vd_t vd_set1(double a) { return _mm256_set1_pd(a); }
static inline vd_t vd_load_f64(const double *p) { return _mm256_loadu_pd(p); }
static inline void vd_store_f64(double *p, vd_t v) { _mm256_storeu_pd(p, v); }
static inline vd_t vd_loadn_f64(const double *p, size_t n, double fill)
{
    double buf[4] = {fill, fill, fill, fill};
    memcpy(buf, p, n * sizeof(double));
    return _mm256_loadu_pd(buf);
}
static inline void vd_storen_f64(double *p, vd_t v, size_t n)
{
    double buf[4];
    _mm256_storeu_pd(buf, v);
    memcpy(p, buf, n * sizeof(double));
}
/* f32 <-> f64 lanes, for conversions (vcvtpd2ps rounds to nearest-even, MXCSR default) */
static inline vd_t vd_load_f32(const float *p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
static inline void vd_store_f32(float *p, vd_t v) { _mm_storeu_ps(p, _mm256_cvtpd_ps(v)); }
static inline vd_t vd_loadn_f32(const float *p, size_t n, double fill)
{
    float buf[4] = {(float)fill, (float)fill, (float)fill, (float)fill};
    memcpy(buf, p, n * sizeof(float));
    return vd_load_f32(buf);
}
static inline void vd_storen_f32(float *p, vd_t v, size_t n)
{
    float buf[4];
    vd_store_f32(buf, v);
    memcpy(p, buf, n * sizeof(float));
}
static inline vd_t vd_add(vd_t a, vd_t b) { return _mm256_add_pd(a, b); }
static inline vd_t vd_sub(vd_t a, vd_t b) { return _mm256_sub_pd(a, b); }
static inline vd_t vd_mul(vd_t a, vd_t b) { return _mm256_mul_pd(a, b); }
static inline vd_t vd_div(vd_t a, vd_t b) { return _mm256_div_pd(a, b); }
static inline vd_t vd_neg(vd_t a) { return _mm256_xor_pd(a, _mm256_set1_pd(-0.0)); }
static inline vd_t vd_abs(vd_t a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
static inline vd_t vd_sqrt(vd_t a) { return _mm256_sqrt_pd(a); }
static inline vd_t vd_fma(vd_t a, vd_t b, vd_t c) { return _mm256_fmadd_pd(a, b, c); }
static inline vd_t vd_max(vd_t a, vd_t b) { return _mm256_max_pd(a, b); }
static inline vd_t vd_min(vd_t a, vd_t b) { return _mm256_min_pd(a, b); }
static inline vd_t vd_select_(vd_mask_t m, vd_t a, vd_t b) { return _mm256_blendv_pd(b, a, m); }
static inline vd_t vd_maxnan(vd_t a, vd_t b)
{
    return vd_select_(_mm256_cmp_pd(a, a, _CMP_UNORD_Q), a, vd_select_(_mm256_cmp_pd(a, b, _CMP_GT_OQ), a, b));
}
static inline vd_t vd_minnan(vd_t a, vd_t b)
{
    return vd_select_(_mm256_cmp_pd(a, a, _CMP_UNORD_Q), a, vd_select_(_mm256_cmp_pd(a, b, _CMP_LT_OQ), a, b));
}
static inline double vd_hsum(vd_t v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
static inline double vd_hmax(vd_t v)
{
    __m128d s = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_max_sd(s, _mm_unpackhi_pd(s, s)));
}
static inline double vd_hmin(vd_t v)
{
    __m128d s = _mm_min_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_min_sd(s, _mm_unpackhi_pd(s, s)));
}

#include "vmath.h"

#endif /* FCK_VOCAB_AVX2_H */
