/* SPDX-License-Identifier: MIT */
/* Fucina: the scale searches of the K-format reference encoders.
 *
 * Each is a re-derivation of the search ggml runs in its *_ref quantizers
 * (ggml-quants.c: make_qx_quants, make_q3_quants, make_qkx2_quants), written
 * so that every float operation happens in ggml's order: the searches pick a
 * scale by comparing sums, and one different rounding anywhere can flip a
 * comparison and change the encoded bytes. Integer levels enter sums as
 * floats at the same point ggml converts them (w*l*l is (w*l)*l). */
#include <math.h>

#include "quant/encode_internal.h"

#define FCQ_GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The per-element weight of make_qx_quants without importance weights. */
static inline float qx_weight(int rmse_type, float x)
{
    switch (rmse_type) {
    case 1: return x * x;
    case 2: return 1.f;
    case 3: return fabsf(x);
    default: return sqrtf(fabsf(x));
    }
}

#if defined(__GNUC__)
#define FCQ_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define FCQ_ALWAYS_INLINE inline
#endif

static FCQ_ALWAYS_INLINE float qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < FCQ_GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    /* -nmax / max: an int negated, then converted, then divided. */
    float iscale = (float)(-nmax) / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) L[i] = (int8_t)(nmax + clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1));
        return 1 / iscale;
    }
    int return_early = 0;
    if (rmse_type < 0) { rmse_type = -rmse_type; return_early = 1; }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        sumlx += qx_weight(rmse_type, x[i]) * x[i] * (float)l;
        suml2 += qx_weight(rmse_type, x[i]) * (float)l * (float)l;
    }
    float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            sumlx += qx_weight(rmse_type, x[i]) * x[i] * (float)l;
            suml2 += qx_weight(rmse_type, x[i]) * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = (int8_t)(nmax + clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float fcq_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type)
{
    /* q6_K's call with constant n, nmax and weights, so the compiler unrolls it (~1.5x). */
    if (n == 16 && nmax == 32 && rmse_type == 1) return qx_quants(16, 32, x, L, 1);
    return qx_quants(n, nmax, x, L, rmse_type);
}

float fcq_make_q3_quants(int n, int nmax, const float *x, int8_t *L, int do_rmse)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < FCQ_GROUP_MAX_EPS) { /* L = 0, not nmax: q3_K relies on it */
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)(-nmax) / max;
    if (do_rmse) {
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            L[i] = (int8_t)l;
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        /* Coordinate descent: move one level at a time while the fitted
         * error (sumlx^2/suml2, compared cross-multiplied) improves. */
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * (float)L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                    int new_l = clampi(fcq_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                    if (new_l != L[i]) {
                        slx += w * x[i] * (float)new_l;
                        sl2 += w * (float)new_l * (float)new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = (int8_t)new_l;
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1) + nmax);
    return 1 / iscale;
}

float fcq_make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                           uint8_t *Laux, float rmin, float rdelta, int nstep, int use_mad)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = fcq_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clampi(l, 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = clampi(fcq_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) { /* the min is an offset below zero only */
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

void fcq_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void fcq_put_scales_mins_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t q[12])
{
    /* Sub-blocks 0..3: 6 bits in bytes 0..3 (scale) and 4..7 (min); 4..7:
     * low nibbles in bytes 8..11, high 2 bits in the top of bytes 0..7. */
    for (int j = 0; j < 4; ++j) {
        q[j] = ls[j];
        q[j + 4] = lm[j];
    }
    for (int j = 4; j < 8; ++j) {
        q[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
        q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
        q[j] |= (uint8_t)((lm[j] >> 4) << 6);
    }
}

/* ---- the importance-weighted searches (ggml's quantize_<fmt> with quant_weights) ---- */

float fcq_make_qx_quants_w(int n, int nmax, const float *x, int8_t *L, const float *qw)
{
    /* make_qx_quants with rmse_type 1 and per-element weights qw: the same
     * 19-step scale search, the weights in place of x^2. */
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < FCQ_GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)(-nmax) / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        sumlx += qw[i] * x[i] * (float)l;
        suml2 += qw[i] * (float)l * (float)l;
    }
    float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            sumlx += qw[i] * x[i] * (float)l;
            suml2 += qw[i] * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = (int8_t)(nmax + clampi(fcq_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float fcq_make_qkx3_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                           uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    /* make_qkx3_quants with weights and squared errors (use_mad false in every
     * caller). The trial scales are taken against the best (scale, min) so
     * far, as ggml does: max - min shrinks as min moves towards 0. */
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max <= min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; ++i) {
        int l = fcq_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clampi(l, 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        best_mad += weights[i] * (diff * diff);
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            /* v is finite and in range for every finite row; where the best
             * min reached max it is not, and the level is pinned to [0, nmax]
             * before rounding (ggml's newer guard) rather than wrapped. */
            const float v = iscale * (x[i] - min);
            const int l = v > 0 ? fcq_nearest_int(v < (float)nmax ? v : (float)nmax) : 0;
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float mad = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                mad += weights[i] * (diff * diff);
            }
            if (mad < best_mad) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

float fcq_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *qw)
{
    /* make_qp_quants: a non-negative vector (sub-block scales or mins) onto
     * 0..nmax with weights qw. Levels are stored as uint8 and read back as
     * stored (a negative level, which only a negative x can give, wraps as
     * ggml's uint8_t store wraps it), while the running sums use the int
     * level, exactly as ggml mixes the two. */
    float max = 0;
    for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
    if (max < FCQ_GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)fcq_nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        float diff = x[i] - scale * (float)L[i];
        best_mse += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = fcq_nearest_int(iscale_is * x[i]);
            if (l > nmax) l = nmax;
            float diff = x[i] - scale_is * (float)l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = fcq_nearest_int(iscale * x[i]);
        if (l > nmax) l = nmax;
        L[i] = (uint8_t)l;
        sumlx += qw[i] * x[i] * (float)l;
        suml2 += qw[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = qw[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = fcq_nearest_int(x[i] * sl2 / slx);
                if (new_l > nmax) new_l = nmax;
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}
