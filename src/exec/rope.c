/* SPDX-License-Identifier: MIT */
/* RoPE tables and application; see rope.h. Plain C: the op is O(n) and
 * memory-bound, and the table is built once per position batch. */
#include "exec/rope.h"

#include <math.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void fc_rope_params_default(fc_rope_params *p, int64_t n_rot)
{
    memset(p, 0, sizeof(*p));
    p->n_rot = n_rot;
    p->theta_base = 10000.0f;
    p->freq_scale = 1.0f;
    p->n_ctx_orig = 0;
    p->ext_factor = 0.0f;
    p->attn_factor = 1.0f;
    p->beta_fast = 32.0f;
    p->beta_slow = 1.0f;
    p->freq_factors = NULL;
    p->f64_angles = 0;
}

/* ggml_rope_yarn_corr_dim, in float as ggml writes it: the dimension whose
 * wavelength makes n_rot_turns turns over n_ctx_orig positions. */
static float yarn_corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_rot_turns, float base)
{
    const float num = (float)n_ctx_orig / (n_rot_turns * 2.0f * (float)M_PI);
    return (float)n_dims * logf(num) / (2.0f * logf(base));
}

void fc_rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float base, float beta_fast, float beta_slow,
                            float dims[2])
{
    const float start = floorf(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, base));
    const float end = ceilf(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, base));
    const float last = (float)(n_rot - 1);
    dims[0] = start > 0.0f ? start : 0.0f;
    dims[1] = end < last ? end : last;
}

/* ggml's rope_yarn_ramp for pair i (ggml passes i0 = 2i and uses i0/2). */
static float yarn_ramp(float low, float high, int64_t i)
{
    const float d = high - low;
    const float y = ((float)i - low) / (d > 0.001f ? d : 0.001f);
    const float c = y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    return 1.0f - c;
}

static double yarn_ramp_f64(double low, double high, int64_t i)
{
    const double d = high - low;
    const double y = ((double)i - low) / (d > 0.001 ? d : 0.001);
    const double c = y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y);
    return 1.0 - c;
}

int fc_rope_cache_f32(const fc_rope_params *p, const int64_t *pos, int64_t n_pos, float *cos_tab, float *sin_tab,
                      int64_t ld)
{
    if (!p || p->n_rot < 2 || p->n_rot % 2 || n_pos < 0 || ld < p->n_rot / 2) return -2;
    if (n_pos > 0 && (!pos || !cos_tab || !sin_tab)) return -2;
    if (!(p->theta_base > 0.0f) || !(p->freq_scale > 0.0f)) return -2;
    if (p->ext_factor != 0.0f && p->n_ctx_orig <= 0) return -2;

    const int64_t half = p->n_rot / 2;
    float corr[2] = {0.0f, 0.0f};
    if (p->ext_factor != 0.0f)
        fc_rope_yarn_corr_dims(p->n_rot, p->n_ctx_orig, p->theta_base, p->beta_fast, p->beta_slow, corr);

    if (!p->f64_angles) {
        /* ggml_compute_forward_rope_flt + ggml_rope_cache_init + rope_yarn */
        const float theta_scale = powf(p->theta_base, -2.0f / (float)p->n_rot);
        float mscale = p->attn_factor;
        if (p->ext_factor != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
        for (int64_t k = 0; k < n_pos; k++) {
            float *c = cos_tab + k * ld, *s = sin_tab + k * ld;
            float theta = (float)pos[k];
            for (int64_t i = 0; i < half; i++) {
                const float extrap = p->freq_factors ? theta / p->freq_factors[i] : theta;
                const float interp = p->freq_scale * extrap;
                float th = interp;
                if (p->ext_factor != 0.0f) {
                    const float mix = yarn_ramp(corr[0], corr[1], i) * p->ext_factor;
                    th = interp * (1.0f - mix) + extrap * mix;
                }
                c[i] = cosf(th) * mscale;
                s[i] = sinf(th) * mscale;
                theta *= theta_scale;
            }
        }
    } else {
        double mscale = p->attn_factor;
        if (p->ext_factor != 0.0f) mscale *= 1.0 + 0.1 * log(1.0 / (double)p->freq_scale);
        for (int64_t k = 0; k < n_pos; k++) {
            float *c = cos_tab + k * ld, *s = sin_tab + k * ld;
            for (int64_t i = 0; i < half; i++) {
                double extrap = (double)pos[k] * pow((double)p->theta_base, -2.0 * (double)i / (double)p->n_rot);
                if (p->freq_factors) extrap /= (double)p->freq_factors[i];
                const double interp = (double)p->freq_scale * extrap;
                double th = interp;
                if (p->ext_factor != 0.0f) {
                    const double mix = yarn_ramp_f64(corr[0], corr[1], i) * (double)p->ext_factor;
                    th = interp * (1.0 - mix) + extrap * mix;
                }
                c[i] = (float)(cos(th) * mscale);
                s[i] = (float)(sin(th) * mscale);
            }
        }
    }
    return 0;
}

/* ---- application ------------------------------------------------------------- */

static void rope_rows(const fc_rope_apply_args *a, int64_t t_begin, int64_t t_end)
{
    const int64_t half = a->n_rot / 2;
    const int64_t step = a->mode == FC_ROPE_NEOX ? 1 : 2;  /* index of x0 for pair i: i*step */
    const int64_t off = a->mode == FC_ROPE_NEOX ? half : 1; /* x1 = x0 + off */
    const float sgn = a->backward ? -1.0f : 1.0f;
    for (int64_t t = t_begin; t < t_end; t++) {
        const float *ct = a->cos_tab + t * a->cs_ts, *st = a->sin_tab + t * a->cs_ts;
        for (int64_t h = 0; h < a->n_head; h++) {
            const float *x = a->x + t * a->x_ts + h * a->x_hs;
            float *y = a->y + t * a->y_ts + h * a->y_hs;
            for (int64_t i = 0; i < half; i++) {
                const float c = ct[i], s = sgn * st[i];
                const float x0 = x[i * step], x1 = x[i * step + off];
                y[i * step] = x0 * c - x1 * s;
                y[i * step + off] = x0 * s + x1 * c;
            }
            if (y != x)
                for (int64_t i = a->n_rot; i < a->head_dim; i++) y[i] = x[i];
        }
    }
}

#define FC_ROPE_CHUNK_TOKENS 16

static void rope_chunk(void *arg, int64_t c, int worker)
{
    (void)worker;
    const fc_rope_apply_args *a = arg;
    const int64_t t0 = c * FC_ROPE_CHUNK_TOKENS;
    const int64_t t1 = t0 + FC_ROPE_CHUNK_TOKENS < a->n_tok ? t0 + FC_ROPE_CHUNK_TOKENS : a->n_tok;
    rope_rows(a, t0, t1);
}

int fc_rope_apply_f32(fc_workers *w, const fc_rope_apply_args *a)
{
    if (!a || a->n_tok < 0 || a->n_head < 0 || a->n_rot < 2 || a->n_rot % 2 || a->n_rot > a->head_dim) return -2;
    if (a->mode != FC_ROPE_NORMAL && a->mode != FC_ROPE_NEOX) return -2;
    if (a->x_ts < 0 || a->x_hs < 0 || a->y_ts < 0 || a->y_hs < 0 || a->cs_ts < 0) return -2;
    if (a->n_tok == 0 || a->n_head == 0) return 0;
    if (!a->x || !a->y || !a->cos_tab || !a->sin_tab) return -2;
    const int64_t n_chunks = (a->n_tok + FC_ROPE_CHUNK_TOKENS - 1) / FC_ROPE_CHUNK_TOKENS;
    fc_workers_run(w, n_chunks, rope_chunk, (void *)a);
    return 0;
}
