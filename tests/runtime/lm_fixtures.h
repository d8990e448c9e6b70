/* SPDX-License-Identifier: MIT */
/* Shared by the training model's tests (test_lm_train.c, test_lm_lora.c):
 * paths in the suite's directory, random-weight models, the training graph
 * against a session's logits, finite differences over every parameter, the
 * templated corpus, the step log and a resumed run's checks. Header-only
 * (static inline) so each test binary takes what it uses; it takes the
 * suite's context and directory (FCT_SUITE_WITH_TMPDIR's ctx and dir) as
 * parameters. */
#ifndef FCT_LM_FIXTURES_H
#define FCT_LM_FIXTURES_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/lm_train.h"

/* dir/name, valid for the test (fct_path's buffers rotate). */
static inline const char *lf_path(const char *dir, const char *name)
{
    static char paths[16][512];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, 512, "%s", fct_path(dir, name));
    return p;
}

/* A random-weight model (fc_llm_make_model, seed 11) at dir/name. */
static inline const char *lf_make_model(fc_ctx *ctx, const char *dir, const char *arch, const char *name, int untied)
{
    const char *path = lf_path(dir, name);
    fc_make_model_options mo = {.arch = arch, .seed = 11, .untied = untied};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    return path;
}

static const fc_token lf_row[] = {5, 17, 42, 99, 3, 250, 7, 7, 61, 120, 33, 8, 200, 14, 77, 2};
#define LF_ROW ((int64_t)(sizeof lf_row / sizeof lf_row[0]))

/* The session's logits of lf_row on m (f32 cache), n_vocab per position. */
static inline float *lf_session_logits(fc_ctx *ctx, const fc_llm_model *m)
{
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    fc_llm_session_options so = fc_llm_session_default_options();
    so.kv_type = FC_F32;
    so.n_ctx = 64;
    fc_llm_session *s = fc_llm_session_new_ex(ctx, m, &so);
    cr_assert_not_null(s, "%s", fc_ctx_error(ctx));
    float *l = malloc((size_t)(LF_ROW * nv) * sizeof *l);
    cr_assert_eq(fc_llm_session_eval(ctx, s, lf_row, LF_ROW, l), FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_session_free(s);
    return l;
}

/* max |training graph - ref| / max |ref| of lf_row's logits on lm (the two
 * maxima also in *worst and *scale when not NULL). */
static inline double lf_graph_vs(fc_ctx *ctx, fc_lm *lm, const float *ref, double *worst, double *scale)
{
    const int64_t nv = fc_lm_hparams(lm)->n_vocab;
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *x = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", 1}, {"seq", LF_ROW}), lf_row, sizeof lf_row);
    fc_tensor *l = fc_lm_logits(ctx, lm, x, NULL);
    cr_assert_not_null(l, "%s", fc_ctx_error(ctx));
    double *v = fct_values(l);
    double w = 0, sc = 0;
    for (int64_t i = 0; i < LF_ROW * nv; i++) {
        w = fmax(w, fabs(v[i] - ref[i]));
        sc = fmax(sc, fabs(ref[i]));
    }
    free(v);
    fc_scope_end(ctx, s);
    if (worst) *worst = w;
    if (scale) *scale = sc;
    return w / sc;
}

/* p's values replaced by uniform(-a, a) from seed. */
static inline void lf_randomize(fc_ctx *ctx, fc_tensor *p, uint64_t seed, double a)
{
    fc_dim dims[2];
    for (int i = 0; i < fc_tensor_rank(p); i++) dims[i] = (fc_dim){fc_tensor_axis(p, i), fc_tensor_dim(p, i)};
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *r = fc_rand_uniform(ctx, FC_F32, dims, fc_tensor_rank(p), seed, -a, a);
    cr_assert_eq(fc_copy_into(ctx, fc_detach(ctx, p), r), FC_OK, "%s", fc_ctx_error(ctx));
    fc_scope_end(ctx, s);
}

typedef struct lf_gc_user {
    fc_lm *lm;
    fc_tensor *x, *y;
} lf_gc_user;

static inline fc_tensor *lf_gc_loss(fc_ctx *c, void *user, fc_tensor *const *in, int n_in)
{
    (void)in, (void)n_in;
    lf_gc_user *u = user;
    return fc_lm_loss(c, u->lm, u->x, u->y, NULL);
}

/* fc_gradcheck of lm's loss on two rows of five tokens (one target
 * ignored) over every parameter, each first replaced by uniform(-a, a)
 * from seed0 + its index. */
static inline fc_status lf_gradcheck_params(fc_ctx *ctx, fc_lm *lm, uint64_t seed0, double a)
{
    const int np = fc_lm_param_count(lm);
    for (int i = 0; i < np; i++) lf_randomize(ctx, fc_lm_param(lm, i, NULL), seed0 + (uint64_t)i, a);
    static const int32_t xs[] = {1, 4, 9, 2, 2, 7, 0, 10, 5, 3};
    static const int32_t ys[] = {4, 9, 2, 2, 7, -100, 10, 5, 3, 1};
    fc_scope s = fc_scope_begin(ctx);
    lf_gc_user u = {lm, fc_from_data(ctx, FC_I32, FC_SHAPE({"b", 2}, {"seq", 5}), xs, sizeof xs),
                    fc_from_data(ctx, FC_I32, FC_SHAPE({"b", 2}, {"seq", 5}), ys, sizeof ys)};
    fc_tensor **ps = malloc((size_t)np * sizeof *ps);
    for (int i = 0; i < np; i++) ps[i] = fc_lm_param(lm, i, NULL);
    const fc_status st =
        fc_gradcheck(ctx, lf_gc_loss, &u, ps, np, &(fc_gradcheck_opts){.eps = 1e-2, .atol = 2e-3, .rtol = 2e-2});
    free(ps);
    fc_scope_end(ctx, s);
    return st;
}

/* dir/name: a small corpus of templated sentences, n_docs JSONL documents
 * from seed: learnable structure (agreement, fixed phrases) a tiny model
 * picks up within a few dozen steps. */
static inline const char *lf_write_corpus(const char *dir, const char *name, int n_docs, uint64_t seed)
{
    static const char *subj[] = {"the cat", "a dog", "the tensor", "my friend", "the model", "a small bird"};
    static const char *verb[] = {"sees", "likes", "follows", "learns", "finds"};
    static const char *obj[] = {"the mat.", "a red ball.", "the long road.", "its own shadow.", "the gradient."};
    const char *path = lf_path(dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    uint64_t s = seed;
    for (int d = 0; d < n_docs; d++) {
        fputs("{\"text\": \"", f);
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const unsigned r = (unsigned)(s >> 33);
            fprintf(f, "%s%s %s %s", k ? " " : "", subj[r % 6], verb[(r / 6) % 5], obj[(r / 30) % 5]);
        }
        fputs("\"}\n", f);
    }
    fclose(f);
    return path;
}

/* The on_step log (user of lf_on_step): the first 256 losses; with
 * copy_to, the checkpoint ckpt copied there after step copy_at. */
typedef struct lf_steps {
    double loss[256];
    int n;
    const char *ckpt, *copy_to;
    int64_t copy_at;
} lf_steps;

static inline void lf_on_step(const fc_lm_step_info *info, void *user)
{
    lf_steps *l = user;
    if (l->n < 256) l->loss[l->n++] = info->loss;
    if (l->copy_to && info->step == l->copy_at) {
        size_t n;
        unsigned char *b = fct_read_file(l->ckpt, &n);
        fct_write_file(l->copy_to, b, n);
        free(b);
    }
}

/* b's run (lm2), resumed after step `at` of a's (lm), took n steps with a's
 * losses and ends with lm's parameter bits. */
static inline void lf_expect_resumed(fc_ctx *ctx, const lf_steps *a, const lf_steps *b, int at, int n, fc_lm *lm,
                                     fc_lm *lm2)
{
    cr_assert_eq(b->n, n, "the resumed run took %d steps", b->n);
    for (int i = 0; i < n; i++)
        cr_expect(a->loss[at + i] == b->loss[i], "step %d: loss %.9g uninterrupted, %.9g resumed", at + 1 + i,
                  a->loss[at + i], b->loss[i]);
    for (int i = 0; i < fc_lm_param_count(lm); i++) {
        const char *name;
        fc_tensor *p = fc_lm_param(lm, i, &name);
        fct_expect_bits(ctx, p, ctx, fc_lm_param(lm2, i, NULL), name);
    }
}

#endif
