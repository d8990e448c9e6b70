/* Vector vocabulary, scalar ISA: one lane, portable C.
 *
 * Generic family templates (templates/<family>/vector.c.j2) are written once
 * against this vocabulary; each ISA provides the same names. In the scalar
 * ISA the transcendental functions are libm's, so a scalar arm rendered from
 * a generic template is the specification the other arms are tested against.
 *
 * Contract of every vocabulary (see docs/KERNELS.md, "The vocabulary"):
 *   vf_t / vd_t        f32 / f64 vector; VF_W / VD_W lanes
 *   vf_mask_t          lane mask
 *   vf_load_<dt>(p)    load VF_W elements of storage dtype <dt>, widened to f32
 *   vf_store_<dt>(p,v) round once to nearest-even and store VF_W elements
 *   vf_loadn_<dt>(p,n,fill) / vf_storen_<dt>(p,v,n)  first n lanes only; never
 *                      touch memory past element n-1; other lanes read `fill`
 *   vf_max(a,b)        a > b ? a : b  (b when unordered, like maxps)
 *   vf_maxnan(a,b)     NaN in either operand propagates
 *   vf_fma(a,b,c)      a*b+c rounded once
 *   vf_hsum(v)         lane sum in the fixed order of a pairwise tree over lanes
 *   vf_hsum_pairs(v)   lane sum as `lanes[j] = lanes[2j] + lanes[2j+1]` repeated
 *                      down to one lane (the fold of dot and dot_rows), in
 *                      registers, with the scalar loop's bits (which of two
 *                      NaN payloads survives is not fixed by C's + either)
 */
#ifndef FCK_VOCAB_SCALAR_H
#define FCK_VOCAB_SCALAR_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fucina/half.h"

#define VF_W 1
#define VD_W 1

typedef float vf_t;
typedef double vd_t;
typedef int vf_mask_t;
typedef int vd_mask_t;

static inline vf_t vf_zero(void) { return 0.0f; }
static inline vf_t vf_set1(float a) { return a; }
static inline vf_t vf_load_f32(const float *p) { return *p; }
static inline void vf_store_f32(float *p, vf_t v) { *p = v; }
static inline vf_t vf_load_f16(const fc_f16 *p) { return fc_f16_to_f32(*p); }
static inline void vf_store_f16(fc_f16 *p, vf_t v) { *p = fc_f32_to_f16(v); }
static inline vf_t vf_load_bf16(const fc_bf16 *p) { return fc_bf16_to_f32(*p); }
static inline void vf_store_bf16(fc_bf16 *p, vf_t v) { *p = fc_f32_to_bf16(v); }
#define FCK_SCALAR_LOADN(dt, T)                                                       \
    static inline vf_t vf_loadn_##dt(const T *p, size_t n, float fill)              \
    { return n ? vf_load_##dt(p) : fill; }                                           \
    static inline void vf_storen_##dt(T *p, vf_t v, size_t n)                        \
    { if (n) vf_store_##dt(p, v); }
FCK_SCALAR_LOADN(f32, float)
FCK_SCALAR_LOADN(f16, fc_f16)
FCK_SCALAR_LOADN(bf16, fc_bf16)
#undef FCK_SCALAR_LOADN

static inline vf_t vf_add(vf_t a, vf_t b) { return a + b; }
static inline vf_t vf_sub(vf_t a, vf_t b) { return a - b; }
static inline vf_t vf_mul(vf_t a, vf_t b) { return a * b; }
static inline vf_t vf_div(vf_t a, vf_t b) { return a / b; }
static inline vf_t vf_neg(vf_t a) { return -a; }
static inline vf_t vf_abs(vf_t a) { return fabsf(a); }
static inline vf_t vf_sqrt(vf_t a) { return sqrtf(a); }
static inline vf_t vf_fma(vf_t a, vf_t b, vf_t c) { return fmaf(a, b, c); }
static inline vf_t vf_max(vf_t a, vf_t b) { return a > b ? a : b; }
static inline vf_t vf_min(vf_t a, vf_t b) { return a < b ? a : b; }
static inline vf_t vf_maxnan(vf_t a, vf_t b) { return (a != a || a > b) ? a : b; }
static inline vf_t vf_minnan(vf_t a, vf_t b) { return (a != a || a < b) ? a : b; }
static inline vf_mask_t vf_gt(vf_t a, vf_t b) { return a > b; }
static inline vf_mask_t vf_lt(vf_t a, vf_t b) { return a < b; }
static inline vf_mask_t vf_ge(vf_t a, vf_t b) { return a >= b; }
static inline vf_mask_t vf_eq(vf_t a, vf_t b) { return a == b; }
static inline vf_mask_t vf_isnan(vf_t a) { return a != a; }
static inline vf_t vf_select(vf_mask_t m, vf_t a, vf_t b) { return m ? a : b; }
static inline float vf_hsum(vf_t v) { return v; }
static inline float vf_hsum_pairs(vf_t v) { return v; }
static inline float vf_hmax(vf_t v) { return v; }
static inline float vf_hmin(vf_t v) { return v; }
static inline float vf_lane(vf_t v, int i) { (void)i; return v; }

/* Transcendentals: libm, the specification. */
static inline vf_t vf_exp(vf_t a) { return expf(a); }
static inline vf_t vf_log(vf_t a) { return logf(a); }
static inline vf_t vf_log1p(vf_t a) { return log1pf(a); }
static inline vf_t vf_sin(vf_t a) { return sinf(a); }
static inline vf_t vf_cos(vf_t a) { return cosf(a); }
static inline vf_t vf_tanh(vf_t a) { return tanhf(a); }
static inline vf_t vf_erf(vf_t a) { return erff(a); }

static inline vd_t vd_zero(void) { return 0.0; }
static inline vd_t vd_set1(double a) { return a; }
static inline vd_t vd_load_f64(const double *p) { return *p; }
static inline void vd_store_f64(double *p, vd_t v) { *p = v; }
static inline vd_t vd_loadn_f64(const double *p, size_t n, double fill) { return n ? *p : fill; }
static inline void vd_storen_f64(double *p, vd_t v, size_t n) { if (n) *p = v; }
/* f32 <-> f64 lanes, for conversions */
static inline vd_t vd_load_f32(const float *p) { return *p; }
static inline void vd_store_f32(float *p, vd_t v) { *p = (float)v; }
static inline vd_t vd_loadn_f32(const float *p, size_t n, double fill) { return n ? *p : (double)(float)fill; }
static inline void vd_storen_f32(float *p, vd_t v, size_t n) { if (n) *p = (float)v; }
static inline vd_t vd_add(vd_t a, vd_t b) { return a + b; }
static inline vd_t vd_sub(vd_t a, vd_t b) { return a - b; }
static inline vd_t vd_mul(vd_t a, vd_t b) { return a * b; }
static inline vd_t vd_div(vd_t a, vd_t b) { return a / b; }
static inline vd_t vd_neg(vd_t a) { return -a; }
static inline vd_t vd_abs(vd_t a) { return fabs(a); }
static inline vd_t vd_sqrt(vd_t a) { return sqrt(a); }
static inline vd_t vd_fma(vd_t a, vd_t b, vd_t c) { return fma(a, b, c); }
static inline vd_t vd_max(vd_t a, vd_t b) { return a > b ? a : b; }
static inline vd_t vd_min(vd_t a, vd_t b) { return a < b ? a : b; }
static inline vd_t vd_maxnan(vd_t a, vd_t b) { return (a != a || a > b) ? a : b; }
static inline vd_t vd_minnan(vd_t a, vd_t b) { return (a != a || a < b) ? a : b; }
static inline double vd_hsum(vd_t v) { return v; }
static inline double vd_hmax(vd_t v) { return v; }
static inline double vd_hmin(vd_t v) { return v; }

#endif /* FCK_VOCAB_SCALAR_H */
