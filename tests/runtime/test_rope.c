/* SPDX-License-Identifier: MIT */
/* RoPE (src/exec/rope.c): tables against ggml's float arithmetic (goldens from
 * tests/goldens/gen_rope.py, within 2 ulp) and against a double-precision
 * reference of the formulas; application against the Hugging Face style
 * float64 rotation in the goldens and against a double rotation of the same
 * tables; both modes, partial rotary, linear scaling, YaRN, backward (forward
 * then backward is the identity, times mscale^2), in place, strided, threads. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/rope.h"
#include "exec/workers.h"
#include "fct.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int64_t ulp_dist(float a, float b)
{
    if (a == b) return 0;
    if (isnan(a) || isnan(b)) return INT64_MAX;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t la = ia < 0 ? (int64_t)INT32_MIN - ia : ia;
    int64_t lb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return la > lb ? la - lb : lb - la;
}

/* ---- a double-precision reference of the formulas ------------------------------------ */

typedef struct ref_angles {
    double mscale;
    double *theta; /* [n_pos][half] */
} ref_angles;

static ref_angles ref_tables(const fc_rope_params *p, const int64_t *pos, int64_t n_pos)
{
    const int64_t half = p->n_rot / 2;
    ref_angles r;
    r.theta = malloc((size_t)(n_pos * half) * sizeof(double));
    r.mscale = p->attn_factor;
    double lo = 0, hi = 0;
    if (p->ext_factor != 0.0f) {
        const double base = p->theta_base, n = (double)p->n_rot, nc = (double)p->n_ctx_orig;
        lo = floor(n * log(nc / ((double)p->beta_fast * 2 * M_PI)) / (2 * log(base)));
        hi = ceil(n * log(nc / ((double)p->beta_slow * 2 * M_PI)) / (2 * log(base)));
        if (lo < 0) lo = 0;
        if (hi > n - 1) hi = n - 1;
        r.mscale *= 1.0 + 0.1 * log(1.0 / (double)p->freq_scale);
    }
    for (int64_t k = 0; k < n_pos; k++)
        for (int64_t i = 0; i < half; i++) {
            double inv = pow((double)p->theta_base, -2.0 * (double)i / (double)p->n_rot);
            if (p->freq_factors) inv /= (double)p->freq_factors[i];
            double ex = (double)pos[k] * inv, in = (double)p->freq_scale * ex, th = in;
            if (p->ext_factor != 0.0f) {
                double d = hi - lo > 0.001 ? hi - lo : 0.001;
                double y = ((double)i - lo) / d;
                double ramp = 1.0 - (y < 0 ? 0 : (y > 1 ? 1 : y));
                double mix = ramp * (double)p->ext_factor;
                th = in * (1 - mix) + ex * mix;
            }
            r.theta[k * half + i] = th;
        }
    return r;
}

/* Bound on |table - reference| for ggml's float angles: the running product
 * theta_i = p * ts^i has about i+1 roundings (plus powf's in ts, amplified by
 * i), the YaRN blend a few more; then cos/sin and the mscale product. */
static double float_angle_bound(const fc_rope_params *p, int64_t pos, int64_t i, double mscale)
{
    double ex = fabs((double)pos) * pow((double)p->theta_base, -2.0 * (double)i / (double)p->n_rot);
    if (p->freq_factors) ex /= fabs((double)p->freq_factors[i]);
    return mscale * (ex * (double)(2 * i + 8) * 0x1p-24 + 4 * 0x1p-24);
}

static void check_tables(const fc_rope_params *p, const int64_t *pos, int64_t n_pos)
{
    const int64_t half = p->n_rot / 2, ld = half + 3;
    float *c = malloc((size_t)(n_pos * ld) * sizeof(float)), *s = malloc((size_t)(n_pos * ld) * sizeof(float));
    cr_assert_eq(fc_rope_cache_f32(p, pos, n_pos, c, s, ld), 0);
    ref_angles r = ref_tables(p, pos, n_pos);
    for (int64_t k = 0; k < n_pos; k++)
        for (int64_t i = 0; i < half; i++) {
            double th = r.theta[k * half + i];
            double wc = cos(th) * r.mscale, wsn = sin(th) * r.mscale;
            double tol = p->f64_angles ? 0x1p-24 * r.mscale + 1e-12 : float_angle_bound(p, pos[k], i, r.mscale);
            cr_assert(fabs(c[k * ld + i] - wc) <= tol && fabs(s[k * ld + i] - wsn) <= tol,
                      "n_rot %lld base %g fs %g ext %g f64 %d: pos %lld pair %lld: cos %.9g sin %.9g, want %.12g "
                      "%.12g (tol %.3g)",
                      (long long)p->n_rot, (double)p->theta_base, (double)p->freq_scale, (double)p->ext_factor,
                      p->f64_angles, (long long)pos[k], (long long)i, (double)c[k * ld + i],
                      (double)s[k * ld + i], wc, wsn, tol);
        }
    free(r.theta);
    free(c);
    free(s);
}

static void param_set(fc_rope_params *p, int64_t n_rot, float base, float fs, int64_t n_ctx_orig, float ext,
                      float attn, int f64)
{
    fc_rope_params_default(p, n_rot);
    p->theta_base = base;
    p->freq_scale = fs;
    p->n_ctx_orig = n_ctx_orig;
    p->ext_factor = ext;
    p->attn_factor = attn;
    p->f64_angles = f64;
}

Test(rope, tables_vs_double_formulas)
{
    const int64_t pos[] = {0, 1, 2, 3, 10, 100, 1000, 4095, 4096, 12345, 65535, 131071};
    const int64_t rots[] = {2, 16, 64, 128};
    for (int f64 = 0; f64 <= 1; f64++)
        for (size_t ir = 0; ir < N_ELEMS(rots); ir++) {
            fc_rope_params p;
            param_set(&p, rots[ir], 10000.0f, 1.0f, 0, 0.0f, 1.0f, f64);
            check_tables(&p, pos, (int64_t)N_ELEMS(pos));
            param_set(&p, rots[ir], 500000.0f, 0.25f, 0, 0.0f, 1.0f, f64); /* linear scaling */
            check_tables(&p, pos, (int64_t)N_ELEMS(pos));
            param_set(&p, rots[ir], 10000.0f, 0.25f, 4096, 1.0f, 1.0f, f64); /* YaRN x4 */
            check_tables(&p, pos, (int64_t)N_ELEMS(pos));
            param_set(&p, rots[ir], 1000000.0f, 1.0f / 32.0f, 8192, 0.7f, 0.8f, f64);
            p.beta_fast = 16.0f;
            p.beta_slow = 2.0f;
            check_tables(&p, pos, (int64_t)N_ELEMS(pos));
            /* frequency factors (llama 3.1 style divisors) */
            float ff[64];
            for (int i = 0; i < 64; i++) ff[i] = 1.0f + (float)i / 8.0f;
            param_set(&p, rots[ir], 10000.0f, 1.0f, 0, 0.0f, 1.0f, f64);
            p.freq_factors = ff;
            check_tables(&p, pos, (int64_t)N_ELEMS(pos));
        }
}

Test(rope, yarn_corr_dims)
{
    const int64_t rots[] = {64, 128};
    const int64_t ctxs[] = {2048, 4096, 32768};
    const float bases[] = {10000.0f, 500000.0f};
    for (size_t a = 0; a < N_ELEMS(rots); a++)
        for (size_t b = 0; b < N_ELEMS(ctxs); b++)
            for (size_t c = 0; c < N_ELEMS(bases); c++) {
                float d[2];
                fc_rope_yarn_corr_dims(rots[a], ctxs[b], bases[c], 32.0f, 1.0f, d);
                double n = (double)rots[a], nc = (double)ctxs[b], base = bases[c];
                double lo = floor(n * log(nc / (32.0 * 2 * M_PI)) / (2 * log(base)));
                double hi = ceil(n * log(nc / (1.0 * 2 * M_PI)) / (2 * log(base)));
                if (lo < 0) lo = 0;
                if (hi > n - 1) hi = n - 1;
                cr_assert_eq((double)d[0], lo);
                cr_assert_eq((double)d[1], hi);
            }
    /* the classic llama-2 x4 case: dims 128, ctx 4096, base 10000 -> [20, 46] */
    float d[2];
    fc_rope_yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f, d);
    cr_assert_eq(d[0], 20.0f);
    cr_assert_eq(d[1], 46.0f);
}

/* ---- goldens ---------------------------------------------------------------------------- */

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Expect `key` at *pp, then read n doubles. */
static void read_vals(char **pp, const char *key, double *out, int64_t n)
{
    char *p = *pp;
    while (*p == ' ' || *p == '\n') p++;
    size_t kl = strlen(key);
    cr_assert(strncmp(p, key, kl) == 0 && p[kl] == ' ', "golden file: expected '%s'", key);
    p += kl;
    for (int64_t i = 0; i < n; i++) {
        char *end;
        out[i] = strtod(p, &end);
        cr_assert(end != p, "golden file: short '%s' line", key);
        p = end;
    }
    *pp = p;
}

Test(rope, goldens)
{
    char *text = read_file(FC_GOLDEN_DIR "/rope_goldens.txt");
    char *p = strchr(text, '\n') + 1; /* skip the provenance line */
    int n_configs = 0;
    for (;;) {
        while (*p == '\n') p++;
        if (strncmp(p, "end", 3) == 0) break;
        char name[64], mode[16];
        long long head_dim, n_rot, n_ctx_orig, n_pos;
        char sb[64], sfs[64], sext[64], sattn[64], sbf[64], sbs[64];
        int used = 0;
        int n_read = sscanf(p,
                         "config %63s mode %15s head_dim %lld n_rot %lld base %63s freq_scale %63s n_ctx_orig %lld "
                         "ext_factor %63s attn_factor %63s beta_fast %63s beta_slow %63s n_pos %lld%n",
                         name, mode, &head_dim, &n_rot, sb, sfs, &n_ctx_orig, sext, sattn, sbf, sbs, &n_pos, &used);
        cr_assert_eq(n_read, 12, "golden file: bad config line");
        p += used;
        fc_rope_params prm;
        fc_rope_params_default(&prm, n_rot);
        prm.theta_base = (float)strtod(sb, NULL);
        prm.freq_scale = (float)strtod(sfs, NULL);
        prm.n_ctx_orig = n_ctx_orig;
        prm.ext_factor = (float)strtod(sext, NULL);
        prm.attn_factor = (float)strtod(sattn, NULL);
        prm.beta_fast = (float)strtod(sbf, NULL);
        prm.beta_slow = (float)strtod(sbs, NULL);
        const int64_t half = n_rot / 2;
        double *pos_d = malloc((size_t)n_pos * sizeof(double));
        double *gc = malloc((size_t)(n_pos * half) * sizeof(double));
        double *gs = malloc((size_t)(n_pos * half) * sizeof(double));
        double *gx = malloc((size_t)(n_pos * head_dim) * sizeof(double));
        double *gy = malloc((size_t)(n_pos * head_dim) * sizeof(double));
        read_vals(&p, "pos", pos_d, n_pos);
        read_vals(&p, "cos", gc, n_pos * half);
        read_vals(&p, "sin", gs, n_pos * half);
        read_vals(&p, "x", gx, n_pos * head_dim);
        read_vals(&p, "yref", gy, n_pos * head_dim);

        int64_t *pos = malloc((size_t)n_pos * sizeof(int64_t));
        for (int64_t k = 0; k < n_pos; k++) pos[k] = (int64_t)pos_d[k];
        float *c = malloc((size_t)(n_pos * half) * sizeof(float)), *s = malloc((size_t)(n_pos * half) * sizeof(float));
        cr_assert_eq(fc_rope_cache_f32(&prm, pos, n_pos, c, s, half), 0);
        for (int64_t i = 0; i < n_pos * half; i++) {
            cr_assert(ulp_dist(c[i], (float)gc[i]) <= 2 && ulp_dist(s[i], (float)gs[i]) <= 2,
                      "%s: table [%lld] cos %a sin %a, ggml float arithmetic gives %a %a", name, (long long)i,
                      (double)c[i], (double)s[i], gc[i], gs[i]);
        }

        /* rotate x (one head per position) and compare with the float64 HF rotation */
        float *x = malloc((size_t)(n_pos * head_dim) * sizeof(float)), *y = malloc((size_t)(n_pos * head_dim) * sizeof(float));
        for (int64_t i = 0; i < n_pos * head_dim; i++) x[i] = (float)gx[i];
        fc_rope_apply_args a = {.n_tok = n_pos, .n_head = 1, .head_dim = head_dim, .n_rot = n_rot,
                                .mode = strcmp(mode, "neox") == 0 ? FC_ROPE_NEOX : FC_ROPE_NORMAL,
                                .cos_tab = c, .sin_tab = s, .cs_ts = half,
                                .x = x, .x_ts = head_dim, .x_hs = head_dim, .y = y, .y_ts = head_dim, .y_hs = head_dim};
        cr_assert(strcmp(mode, "neox") == 0 || strcmp(mode, "normal") == 0);
        cr_assert_eq(fc_rope_apply_f32(NULL, &a), 0);
        double mscale = prm.attn_factor;
        if (prm.ext_factor != 0.0f) mscale *= 1.0 + 0.1 * log(1.0 / (double)prm.freq_scale);
        for (int64_t k = 0; k < n_pos; k++)
            for (int64_t e = 0; e < head_dim; e++) {
                int64_t i = a.mode == FC_ROPE_NEOX ? e % half : e / 2; /* pair of element e */
                double tol = e < n_rot ? 2.0 * float_angle_bound(&prm, pos[k], i, mscale) * 2.0 + 1e-6 : 0.0;
                double got = y[k * head_dim + e], want = gy[k * head_dim + e];
                cr_assert(fabs(got - want) <= tol, "%s: pos %lld elem %lld: %.9g, HF float64 %.9g (tol %.3g)", name,
                          (long long)pos[k], (long long)e, got, want, tol);
            }
        n_configs++;
        free(pos_d);
        free(gc);
        free(gs);
        free(gx);
        free(gy);
        free(pos);
        free(c);
        free(s);
        free(x);
        free(y);
    }
    cr_assert(n_configs >= 8, "only %d golden configs", n_configs);
    free(text);
}

/* ---- application -------------------------------------------------------------------- */

typedef struct apply_case {
    int64_t n_tok, n_head, head_dim, n_rot;
    fc_rope_mode mode;
    int pad;
} apply_case;

static void run_apply(const apply_case *ac, const fc_rope_params *prm, fc_workers *w)
{
    const int64_t half = ac->n_rot / 2, x_hs = ac->head_dim + ac->pad, x_ts = ac->n_head * x_hs + ac->pad;
    const int64_t n = ac->n_tok * x_ts;
    int64_t *pos = malloc((size_t)ac->n_tok * sizeof(int64_t));
    for (int64_t t = 0; t < ac->n_tok; t++) pos[t] = 3 * t + 5;
    float *c = malloc((size_t)(ac->n_tok * half) * sizeof(float)), *s = malloc((size_t)(ac->n_tok * half) * sizeof(float));
    cr_assert_eq(fc_rope_cache_f32(prm, pos, ac->n_tok, c, s, half), 0);
    fct_rng r = {77};
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *z = malloc((size_t)n * sizeof(float)), *ip = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)fct_uniform(&r, -1.0, 1.0);
        y[i] = z[i] = -999.0f;
    }
    memcpy(ip, x, (size_t)n * sizeof(float));

    fc_rope_apply_args a = {.n_tok = ac->n_tok, .n_head = ac->n_head, .head_dim = ac->head_dim, .n_rot = ac->n_rot,
                            .mode = ac->mode, .cos_tab = c, .sin_tab = s, .cs_ts = half,
                            .x = x, .x_ts = x_ts, .x_hs = x_hs, .y = y, .y_ts = x_ts, .y_hs = x_hs};
    cr_assert_eq(fc_rope_apply_f32(w, &a), 0);

    /* double rotation of the same tables */
    const int64_t step = ac->mode == FC_ROPE_NEOX ? 1 : 2, off = ac->mode == FC_ROPE_NEOX ? half : 1;
    for (int64_t t = 0; t < ac->n_tok; t++)
        for (int64_t h = 0; h < ac->n_head; h++) {
            const float *xr = x + t * x_ts + h * x_hs;
            const float *yr = y + t * x_ts + h * x_hs;
            for (int64_t i = 0; i < half; i++) {
                double cc = c[t * half + i], ss = s[t * half + i];
                double x0 = xr[i * step], x1 = xr[i * step + off];
                double w0 = x0 * cc - x1 * ss, w1 = x0 * ss + x1 * cc;
                double tol0 = 2 * 0x1p-24 * (fabs(x0 * cc) + fabs(x1 * ss)) + 1e-30;
                double tol1 = 2 * 0x1p-24 * (fabs(x0 * ss) + fabs(x1 * cc)) + 1e-30;
                cr_assert(fabs(yr[i * step] - w0) <= tol0 && fabs(yr[i * step + off] - w1) <= tol1,
                          "mode %d n_rot %lld: tok %lld head %lld pair %lld: %.9g %.9g, want %.9g %.9g", (int)ac->mode,
                          (long long)ac->n_rot, (long long)t, (long long)h, (long long)i, (double)yr[i * step],
                          (double)yr[i * step + off], w0, w1);
            }
            for (int64_t i = ac->n_rot; i < ac->head_dim; i++) cr_assert_eq(yr[i], xr[i], "tail not copied");
            for (int64_t i = ac->head_dim; i < x_hs; i++) cr_assert_eq(yr[i], -999.0f, "padding written");
        }

    /* in place gives the same bits */
    fc_rope_apply_args b = a;
    b.x = ip;
    b.y = ip;
    cr_assert_eq(fc_rope_apply_f32(w, &b), 0);
    for (int64_t t = 0; t < ac->n_tok; t++)
        for (int64_t h = 0; h < ac->n_head; h++)
            cr_assert(memcmp(ip + t * x_ts + h * x_hs, y + t * x_ts + h * x_hs, (size_t)ac->head_dim * sizeof(float)) == 0);

    /* backward of forward: x * mscale^2 */
    fc_rope_apply_args bw = a;
    bw.backward = 1;
    bw.x = y;
    bw.y = z;
    cr_assert_eq(fc_rope_apply_f32(w, &bw), 0);
    double ms = prm->attn_factor;
    if (prm->ext_factor != 0.0f) ms *= 1.0 + 0.1 * log(1.0 / (double)prm->freq_scale);
    for (int64_t t = 0; t < ac->n_tok; t++)
        for (int64_t h = 0; h < ac->n_head; h++)
            for (int64_t i = 0; i < ac->head_dim; i++) {
                double want = (i < ac->n_rot ? ms * ms : 1.0) * x[t * x_ts + h * x_hs + i];
                double got = z[t * x_ts + h * x_hs + i];
                cr_assert(fabs(got - want) <= 1e-6 * (i < ac->n_rot ? ms * ms : 1.0),
                          "backward(forward(x)) at tok %lld head %lld elem %lld: %.9g want %.9g", (long long)t,
                          (long long)h, (long long)i, got, want);
            }

    free(pos);
    free(c);
    free(s);
    free(x);
    free(y);
    free(z);
    free(ip);
}

Test(rope, apply_modes_partial_scaling)
{
    fc_workers *w2 = fc_workers_new(2);
    const apply_case cases[] = {
        {.n_tok = 1, .n_head = 1, .head_dim = 2, .n_rot = 2},
        {.n_tok = 7, .n_head = 4, .head_dim = 64, .n_rot = 64},
        {.n_tok = 33, .n_head = 3, .head_dim = 80, .n_rot = 32, .pad = 5},
        {.n_tok = 50, .n_head = 2, .head_dim = 128, .n_rot = 128, .pad = 1},
        {.n_tok = 5, .n_head = 8, .head_dim = 96, .n_rot = 94, .pad = 2},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++)
        for (int m = 0; m < 2; m++) {
            apply_case ac = cases[i];
            ac.mode = m ? FC_ROPE_NEOX : FC_ROPE_NORMAL;
            fc_rope_params p;
            param_set(&p, ac.n_rot, 10000.0f, 1.0f, 0, 0.0f, 1.0f, 0);
            run_apply(&ac, &p, NULL);
            param_set(&p, ac.n_rot, 10000.0f, 0.5f, 0, 0.0f, 1.0f, 0); /* linear */
            run_apply(&ac, &p, w2);
            param_set(&p, ac.n_rot, 10000.0f, 0.25f, 2048, 1.0f, 1.0f, 0); /* YaRN: mscale > 1 */
            run_apply(&ac, &p, w2);
            param_set(&p, ac.n_rot, 10000.0f, 0.25f, 2048, 1.0f, 1.0f, 1);
            run_apply(&ac, &p, NULL);
        }
    fc_workers_free(w2);
}

Test(rope, threads_and_broadcast)
{
    fc_workers *w2 = fc_workers_new(2);
    const int64_t n_tok = 100, n_head = 4, hd = 64, half = 32;
    fc_rope_params p;
    param_set(&p, hd, 10000.0f, 1.0f, 0, 0.0f, 1.0f, 0);
    int64_t pos[100];
    for (int64_t t = 0; t < n_tok; t++) pos[t] = t;
    float *c = malloc(n_tok * half * sizeof(float)), *s = malloc(n_tok * half * sizeof(float));
    cr_assert_eq(fc_rope_cache_f32(&p, pos, n_tok, c, s, half), 0);
    float *x = malloc(n_tok * n_head * hd * sizeof(float)), *y1 = malloc(n_tok * n_head * hd * sizeof(float));
    float *y2 = malloc(n_tok * n_head * hd * sizeof(float));
    fct_rng r = {5};
    for (int64_t i = 0; i < n_tok * n_head * hd; i++) x[i] = (float)fct_uniform(&r, -1, 1);
    fc_rope_apply_args a = {.n_tok = n_tok, .n_head = n_head, .head_dim = hd, .n_rot = hd, .mode = FC_ROPE_NEOX,
                            .cos_tab = c, .sin_tab = s, .cs_ts = half, .x = x, .x_ts = n_head * hd, .x_hs = hd,
                            .y = y1, .y_ts = n_head * hd, .y_hs = hd};
    cr_assert_eq(fc_rope_apply_f32(NULL, &a), 0);
    a.y = y2;
    cr_assert_eq(fc_rope_apply_f32(w2, &a), 0);
    cr_assert(memcmp(y1, y2, n_tok * n_head * hd * sizeof(float)) == 0);
    /* cs_ts = 0: every token uses row 0 (position 0: identity) */
    a.cs_ts = 0;
    cr_assert_eq(fc_rope_apply_f32(w2, &a), 0);
    cr_assert(memcmp(x, y2, n_tok * n_head * hd * sizeof(float)) == 0);
    /* invalid */
    a.n_rot = 3;
    cr_assert_eq(fc_rope_apply_f32(NULL, &a), -2);
    a.n_rot = hd + 2;
    cr_assert_eq(fc_rope_apply_f32(NULL, &a), -2);
    fc_rope_params bad = p;
    bad.n_rot = 5;
    cr_assert_eq(fc_rope_cache_f32(&bad, pos, 1, c, s, half), -2);
    free(c);
    free(s);
    free(x);
    free(y1);
    free(y2);
    fc_workers_free(w2);
}
