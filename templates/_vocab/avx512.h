/* Vector vocabulary, AVX-512 F/BW/DQ/VL: 16 x f32, 8 x f64.
 *
 * Same names and contract as scalar.h. Partial loads and stores use mask
 * registers: masked-off lanes are neither read nor written (no fault past n).
 * bf16 stores use integer round-to-nearest-even (see avx2.h for why).
 */
#ifndef FCK_VOCAB_AVX512_H
#define FCK_VOCAB_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fucina/half.h"

#define VF_W 16
#define VD_W 8

typedef __m512 vf_t;
typedef __m512d vd_t;
typedef __mmask16 vf_mask_t;
typedef __mmask8 vd_mask_t;

static inline __mmask16 fck_m16(size_t n) { return (__mmask16)((1u << n) - 1u); }
static inline __mmask8 fck_m8(size_t n) { return (__mmask8)((1u << n) - 1u); }

static inline vf_t vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf_t vf_set1(float a) { return _mm512_set1_ps(a); }
static inline vf_t vf_load_f32(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store_f32(float *p, vf_t v) { _mm512_storeu_ps(p, v); }
static inline vf_t vf_loadn_f32(const float *p, size_t n, float fill)
{
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), fck_m16(n), p);
}
static inline void vf_storen_f32(float *p, vf_t v, size_t n) { _mm512_mask_storeu_ps(p, fck_m16(n), v); }

static inline vf_t vf_load_f16(const fc_f16 *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
static inline __m256i fck_avx512_f16_bits(vf_t v)
{
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline void vf_store_f16(fc_f16 *p, vf_t v) { _mm256_storeu_si256((__m256i *)(void *)p, fck_avx512_f16_bits(v)); }
static inline vf_t vf_loadn_f16(const fc_f16 *p, size_t n, float fill)
{
    __m256i h = _mm256_maskz_loadu_epi16(fck_m16(n), p);
    return _mm512_mask_blend_ps(fck_m16(n), _mm512_set1_ps(fill), _mm512_cvtph_ps(h));
}
static inline void vf_storen_f16(fc_f16 *p, vf_t v, size_t n)
{
    _mm256_mask_storeu_epi16(p, fck_m16(n), fck_avx512_f16_bits(v));
}

static inline vf_t fck_avx512_bf16_widen(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
static inline __m256i fck_avx512_bf16_bits(vf_t v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
    __m512i quiet = _mm512_or_si512(u, _mm512_set1_epi32(0x400000));
    __mmask16 isnan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512i r = _mm512_mask_blend_epi32(isnan, rounded, quiet);
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}
static inline vf_t vf_load_bf16(const fc_bf16 *p)
{
    return fck_avx512_bf16_widen(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
static inline void vf_store_bf16(fc_bf16 *p, vf_t v) { _mm256_storeu_si256((__m256i *)(void *)p, fck_avx512_bf16_bits(v)); }
static inline vf_t vf_loadn_bf16(const fc_bf16 *p, size_t n, float fill)
{
    __m256i h = _mm256_maskz_loadu_epi16(fck_m16(n), p);
    return _mm512_mask_blend_ps(fck_m16(n), _mm512_set1_ps(fill), fck_avx512_bf16_widen(h));
}
static inline void vf_storen_bf16(fc_bf16 *p, vf_t v, size_t n)
{
    _mm256_mask_storeu_epi16(p, fck_m16(n), fck_avx512_bf16_bits(v));
}

static inline vf_t vf_add(vf_t a, vf_t b) { return _mm512_add_ps(a, b); }
static inline vf_t vf_sub(vf_t a, vf_t b) { return _mm512_sub_ps(a, b); }
static inline vf_t vf_mul(vf_t a, vf_t b) { return _mm512_mul_ps(a, b); }
static inline vf_t vf_div(vf_t a, vf_t b) { return _mm512_div_ps(a, b); }
static inline vf_t vf_neg(vf_t a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
static inline vf_t vf_abs(vf_t a) { return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), a); }
static inline vf_t vf_sqrt(vf_t a) { return _mm512_sqrt_ps(a); }
static inline vf_t vf_fma(vf_t a, vf_t b, vf_t c) { return _mm512_fmadd_ps(a, b, c); }
/* vmaxps(a, b) is `a > b ? a : b` exactly (see avx2.h). */
static inline vf_t vf_max(vf_t a, vf_t b) { return _mm512_max_ps(a, b); }
static inline vf_t vf_min(vf_t a, vf_t b) { return _mm512_min_ps(a, b); }
static inline vf_mask_t vf_gt(vf_t a, vf_t b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline vf_mask_t vf_lt(vf_t a, vf_t b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline vf_mask_t vf_ge(vf_t a, vf_t b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
static inline vf_mask_t vf_eq(vf_t a, vf_t b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
static inline vf_mask_t vf_isnan(vf_t a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
static inline vf_t vf_select(vf_mask_t m, vf_t a, vf_t b) { return _mm512_mask_blend_ps(m, b, a); }
static inline vf_t vf_maxnan(vf_t a, vf_t b) { return vf_select(vf_isnan(a), a, vf_select(vf_gt(a, b), a, b)); }
static inline vf_t vf_minnan(vf_t a, vf_t b) { return vf_select(vf_isnan(a), a, vf_select(vf_lt(a, b), a, b)); }
static inline float vf_lane(vf_t v, int i) { float b[16]; _mm512_storeu_ps(b, v); return b[i & 15]; }
/* Pairwise tree over lanes, fixed order: 256-bit halves, then as avx2.h. */
static inline float vf_hsum(vf_t v)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
/* Adjacent pairs (see scalar.h): after level k lane 2^k j holds the sum of
 * lanes 2^k j .. 2^k j + 2^k - 1, the neighbour brought in by a swap of
 * pairs, of 64-bit halves, of 128-bit lanes, of 256-bit halves. */
static inline float vf_hsum_pairs(vf_t v)
{
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
    return _mm512_cvtss_f32(v);
}
static inline float vf_hmax(vf_t v)
{
    __m256 h = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float vf_hmin(vf_t v)
{
    __m256 h = _mm256_min_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    s = _mm_min_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Primitives the shared vector math (vmath.h) is written in. */
static inline vf_t vf_and(vf_t a, vf_t b) { return _mm512_and_ps(a, b); }
static inline vf_t vf_or(vf_t a, vf_t b) { return _mm512_or_ps(a, b); }
static inline vf_t vf_xor(vf_t a, vf_t b) { return _mm512_xor_ps(a, b); }
static inline vf_t vf_andnot(vf_t a, vf_t b) { return _mm512_andnot_ps(a, b); }
static inline vf_t vf_bits(uint32_t u) { return _mm512_castsi512_ps(_mm512_set1_epi32((int)u)); }
static inline vf_t vf_round(vf_t a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf_t vf_floor(vf_t a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
static inline vf_t vf_pow2i(vf_t n)
{
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
/* Bit-level, like avx2.h (not vgetexpps): every ISA must give the same bits. */
static inline vf_t vf_exponent(vf_t a)
{
    __m512i e = _mm512_srli_epi32(_mm512_castps_si512(a), 23);
    e = _mm512_sub_epi32(_mm512_and_si512(e, _mm512_set1_epi32(0xff)), _mm512_set1_epi32(127));
    return _mm512_cvtepi32_ps(e);
}
static inline vf_t vf_significand(vf_t a)
{
    __m512i m = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x007fffff));
    return _mm512_castsi512_ps(_mm512_or_si512(m, _mm512_set1_epi32(0x3f800000)));
}

static inline vd_t vd_zero(void) { return _mm512_setzero_pd(); }
static inline vd_t vd_set1(double a) { return _mm512_set1_pd(a); }
static inline vd_t vd_load_f64(const double *p) { return _mm512_loadu_pd(p); }
static inline void vd_store_f64(double *p, vd_t v) { _mm512_storeu_pd(p, v); }
static inline vd_t vd_loadn_f64(const double *p, size_t n, double fill)
{
    return _mm512_mask_loadu_pd(_mm512_set1_pd(fill), fck_m8(n), p);
}
static inline void vd_storen_f64(double *p, vd_t v, size_t n) { _mm512_mask_storeu_pd(p, fck_m8(n), v); }
/* f32 <-> f64 lanes, for conversions */
static inline vd_t vd_load_f32(const float *p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
static inline void vd_store_f32(float *p, vd_t v) { _mm256_storeu_ps(p, _mm512_cvtpd_ps(v)); }
static inline vd_t vd_loadn_f32(const float *p, size_t n, double fill)
{
    __m256 f = _mm256_mask_loadu_ps(_mm256_set1_ps((float)fill), (__mmask8)fck_m8(n), p);
    return _mm512_cvtps_pd(f);
}
static inline void vd_storen_f32(float *p, vd_t v, size_t n) { _mm256_mask_storeu_ps(p, fck_m8(n), _mm512_cvtpd_ps(v)); }
static inline vd_t vd_add(vd_t a, vd_t b) { return _mm512_add_pd(a, b); }
static inline vd_t vd_sub(vd_t a, vd_t b) { return _mm512_sub_pd(a, b); }
static inline vd_t vd_mul(vd_t a, vd_t b) { return _mm512_mul_pd(a, b); }
static inline vd_t vd_div(vd_t a, vd_t b) { return _mm512_div_pd(a, b); }
static inline vd_t vd_neg(vd_t a) { return _mm512_xor_pd(a, _mm512_set1_pd(-0.0)); }
static inline vd_t vd_abs(vd_t a) { return _mm512_andnot_pd(_mm512_set1_pd(-0.0), a); }
static inline vd_t vd_sqrt(vd_t a) { return _mm512_sqrt_pd(a); }
static inline vd_t vd_fma(vd_t a, vd_t b, vd_t c) { return _mm512_fmadd_pd(a, b, c); }
static inline vd_t vd_max(vd_t a, vd_t b) { return _mm512_max_pd(a, b); }
static inline vd_t vd_min(vd_t a, vd_t b) { return _mm512_min_pd(a, b); }
static inline vd_t vd_maxnan(vd_t a, vd_t b)
{
    __mmask8 an = _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), gt = _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ);
    return _mm512_mask_blend_pd((__mmask8)(an | gt), b, a);
}
static inline vd_t vd_minnan(vd_t a, vd_t b)
{
    __mmask8 an = _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), lt = _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ);
    return _mm512_mask_blend_pd((__mmask8)(an | lt), b, a);
}
static inline double vd_hsum(vd_t v)
{
    __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
static inline double vd_hmax(vd_t v)
{
    __m256d h = _mm256_max_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    __m128d s = _mm_max_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    return _mm_cvtsd_f64(_mm_max_sd(s, _mm_unpackhi_pd(s, s)));
}
static inline double vd_hmin(vd_t v)
{
    __m256d h = _mm256_min_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    __m128d s = _mm_min_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    return _mm_cvtsd_f64(_mm_min_sd(s, _mm_unpackhi_pd(s, s)));
}

#include "vmath.h"

#endif /* FCK_VOCAB_AVX512_H */
