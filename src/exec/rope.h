/* SPDX-License-Identifier: MIT */
/* Rotary position embedding (RoPE): angle tables and their application.
 *
 * Angles. For pair i in [0, n_rot/2) and integer position p:
 *
 *   theta_extrap = p * base^(-2i/n_rot) / ff[i]          (ff: freq_factors or 1)
 *   theta_interp = freq_scale * theta_extrap              (linear scaling)
 *   YaRN (ext_factor != 0):
 *     [lo, hi]  = corr_dims: floor/ceil of n_rot*ln(n_ctx_orig/(beta*2pi))/(2 ln base)
 *                 for beta_fast/beta_slow, clamped to [0, n_rot-1]
 *     ramp      = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)
 *     mix       = ramp * ext_factor
 *     theta     = theta_interp*(1-mix) + theta_extrap*mix
 *     mscale    = attn_factor * (1 + 0.1 ln(1/freq_scale))
 *   otherwise theta = theta_interp, mscale = attn_factor
 *   cos[p, i] = cos(theta) * mscale,  sin[p, i] = sin(theta) * mscale
 *
 * These are exactly ggml's semantics (ggml_rope_yarn_corr_dims, rope_yarn,
 * ggml_rope_cache_init). With f64_angles = 0 (the default) the arithmetic is
 * ggml's own, in float and in its order: theta_scale = powf(base, -2/n_rot),
 * theta_0 = (float)p and theta_{i+1} = theta_i * theta_scale (a running
 * product, whose rounding error grows with i and with p), the YaRN blend in
 * float, then cosf/sinf times mscale. This reproduces ggml's tables to within
 * the ulp or two of libm's cosf/sinf (ggml may contract a*b+c into an FMA
 * where Fucina rounds twice). With f64_angles = 1 each angle is computed in
 * double (base^(-2i/n_rot) with pow, the blend and cos/sin in double) and
 * rounded once: more accurate at long positions, not ggml-identical.
 *
 * Application. x is [n_tok, n_head, head_dim] with element (t, h, i) at
 * x[t*x_ts + h*x_hs + i]; the output y likewise (y may be x, with the same
 * strides, for in place). Token t uses table row t (cos + t*cs_ts; cs_ts = 0
 * broadcasts one row). Pairs:
 *   FC_ROPE_NORMAL (interleaved, GPT-J / llama.cpp "normal"): (2i, 2i+1)
 *   FC_ROPE_NEOX (rotate-half, GPT-NeoX / HF):                (i, i + n_rot/2)
 *   y0 = x0 cos - x1 sin,  y1 = x0 sin + x1 cos
 * backward = 1 rotates by -theta (y0 = x0 cos + x1 sin, y1 = -x0 sin + x1 cos),
 * the transpose of the forward rotation: the gradient of RoPE. Elements
 * [n_rot, head_dim) are copied unchanged (partial rotary). Arithmetic is
 * two products and one sum, each rounded (no FMA).
 */
#ifndef FC_EXEC_ROPE_H
#define FC_EXEC_ROPE_H

#include <stddef.h>
#include <stdint.h>

#include "exec/workers.h"

typedef enum fc_rope_mode {
    FC_ROPE_NORMAL = 0, /* ggml's values */
    FC_ROPE_NEOX = 2,
} fc_rope_mode;

typedef struct fc_rope_params {
    int64_t n_rot;             /* rotated dimensions: even, >= 2 */
    float theta_base;          /* freq_base, e.g. 10000 */
    float freq_scale;          /* 1 = none; linear scaling by factor s: 1/s */
    int64_t n_ctx_orig;        /* YaRN: the original training context */
    float ext_factor;          /* YaRN: 0 off, 1 on (ggml's yarn_ext_factor) */
    float attn_factor;         /* magnitude scale; 1 by default */
    float beta_fast, beta_slow; /* YaRN: 32 and 1 by default */
    const float *freq_factors; /* NULL, or n_rot/2 frequency divisors (llama 3.1, longrope) */
    int f64_angles;            /* 0: ggml's float arithmetic; 1: angles in double */
} fc_rope_params;

/* Defaults: base 10000, no scaling, no YaRN, attn_factor 1, betas 32/1. */
void fc_rope_params_default(fc_rope_params *p, int64_t n_rot);

/* ggml_rope_yarn_corr_dims: dims[0] = start, dims[1] = end (floats, as ggml). */
void fc_rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float base, float beta_fast, float beta_slow,
                            float dims[2]);

/* Fill cos and sin tables [n_pos, n_rot/2] (row stride ld >= n_rot/2) for
 * positions pos[0..n_pos). Returns 0, or -2 on invalid parameters. */
int fc_rope_cache_f32(const fc_rope_params *p, const int64_t *pos, int64_t n_pos, float *cos_tab, float *sin_tab,
                      int64_t ld);

typedef struct fc_rope_apply_args {
    int64_t n_tok, n_head, head_dim, n_rot; /* n_rot even, <= head_dim */
    fc_rope_mode mode;
    int backward;                           /* rotate by -theta */
    const float *cos_tab, *sin_tab;         /* [n_tok, n_rot/2] rows */
    int64_t cs_ts;                          /* table row stride; 0 broadcasts row 0 */
    const float *x;
    int64_t x_ts, x_hs;
    float *y;                               /* may be x (same strides) */
    int64_t y_ts, y_hs;
} fc_rope_apply_args;

/* Returns 0, or -2 on invalid arguments (nothing written). Threads over
 * tokens when `w` has more than one thread (results do not depend on it). */
int fc_rope_apply_f32(fc_workers *w, const fc_rope_apply_args *a);

#endif
