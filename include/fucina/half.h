/* Fucina: 16-bit float storage types and their exact conversions.
 *
 * fc_f16 is IEEE 754 binary16; fc_bf16 is the upper half of a binary32.
 * Both are storage types only: Fucina computes in f32 and rounds once, to
 * nearest-even, when it stores. The conversions below are the scalar
 * specification that every SIMD conversion arm is tested against bit for bit.
 *
 * Encoding traps handled here:
 *   - f32 -> f16 of a value that rounds up past 65504 gives +-Inf (overflow),
 *     values below half the smallest subnormal give +-0, and subnormal results
 *     are rounded once (not truncated then rounded).
 *   - NaN stays NaN: the payload's top bits are kept and the quiet bit is set,
 *     as F16C's vcvtps2ph and the ARMv8 FCVT instruction do, so a NaN never
 *     turns into Inf by truncation.
 *   - f32 -> bf16 rounds to nearest-even on the dropped 16 bits; a NaN gets
 *     its quiet bit set instead (rounding could carry a NaN into Inf).
 */
#ifndef FUCINA_HALF_H
#define FUCINA_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_f16 { uint16_t bits; } fc_f16;
typedef struct fc_bf16 { uint16_t bits; } fc_bf16;

static inline uint32_t fc_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fc_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float fc_f16_to_f32(fc_f16 h)
{
    uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16;
    uint32_t exp = (h.bits >> 10) & 0x1fu;
    uint32_t man = h.bits & 0x3ffu;
    if (exp == 0x1f) /* Inf, or NaN: payload widened and quieted, as F16C and FCVT do */
        return fc_bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));
    if (exp == 0) {
        if (man == 0) return fc_bits_f32(sign);
        /* Subnormal: man * 2^-24, exact in f32. */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return fc_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline fc_f16 fc_f32_to_f16(float f)
{
    uint32_t u = fc_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    fc_f16 h;
    if (exp == 0xff) { /* Inf stays Inf; NaN stays NaN (quiet bit set) */
        h.bits = (uint16_t)(sign | 0x7c00u | (man ? (0x200u | (man >> 13)) : 0u));
        return h;
    }
    int e = (int)exp - 127 + 15; /* biased f16 exponent */
    if (e >= 31) { h.bits = (uint16_t)(sign | 0x7c00u); return h; }
    if (e <= 0) {
        /* Subnormal or zero in f16: shift the full significand right once and
         * round to nearest-even on everything shifted out. */
        if (e < -10) { h.bits = sign; return h; } /* < half the smallest subnormal */
        uint32_t m = man | 0x800000u;
        unsigned shift = (unsigned)(14 - e); /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        h.bits = (uint16_t)(sign | q); /* q may carry into the smallest normal: correct */
        return h;
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++; /* may carry into Inf: correct */
    h.bits = (uint16_t)(sign | q);
    return h;
}

static inline float fc_bf16_to_f32(fc_bf16 b) { return fc_bits_f32((uint32_t)b.bits << 16); }

static inline fc_bf16 fc_f32_to_bf16(float f)
{
    uint32_t u = fc_f32_bits(f);
    fc_bf16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN: quiet it, never round */
        b.bits = (uint16_t)((u >> 16) | 0x40u);
        return b;
    }
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest-even; overflow carries into Inf */
    b.bits = (uint16_t)(u >> 16);
    return b;
}

#ifdef __cplusplus
}
#endif
#endif /* FUCINA_HALF_H */
