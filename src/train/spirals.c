/* SPDX-License-Identifier: MIT */
/* The two-spirals demo (see spirals.h).
 *
 * Data: n points per class on two interleaved spirals,
 *   t = 3 pi sqrt(i / n) + 0.3,  class 0 at (t cos t, t sin t) / (3 pi + 0.3),
 *   class 1 at the negation,
 * with no noise, so 100% training accuracy is reachable. The model is
 * 2 -> hidden -> hidden -> 2 with tanh, trained full-batch on cross-entropy.
 * The forward is the same code for training and for the accuracy check (run
 * under no-grad there). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "core/hash.h"
#include "exec/ctx.h"
#include "train/spirals.h"

#define PI 3.141592653589793

typedef struct model {
    fc_tensor *w1, *b1, *w2, *b2, *w3, *b3;
} model;

static fc_tensor *forward(fc_ctx *ctx, const model *m, fc_tensor *x, double dropout, uint64_t seed)
{
    fc_tensor *h = fc_tanh(ctx, fc_linear(ctx, x, m->w1, m->b1));
    if (dropout > 0) h = fc_dropout(ctx, h, dropout, seed * 2);
    h = fc_tanh(ctx, fc_linear(ctx, h, m->w2, m->b2));
    if (dropout > 0) h = fc_dropout(ctx, h, dropout, seed * 2 + 1);
    return fc_linear(ctx, h, m->w3, m->b3);
}

static void make_data(fc_ctx *ctx, int n, fc_tensor **x, fc_tensor **y)
{
    float *xs = malloc(sizeof(float) * 4 * (size_t)n);
    int64_t *ys = malloc(sizeof(int64_t) * 2 * (size_t)n);
    if (!xs || !ys) {
        free(xs);
        free(ys);
        *x = *y = fc_fail(ctx, FC_ERR_OOM, "fc_spirals: out of memory");
        return;
    }
    for (int i = 0; i < n; i++) {
        double t = 3 * PI * sqrt((double)i / n) + 0.3, s = 3 * PI + 0.3;
        double px = t * cos(t) / s, py = t * sin(t) / s;
        xs[4 * i + 0] = (float)px;
        xs[4 * i + 1] = (float)py;
        xs[4 * i + 2] = (float)-px;
        xs[4 * i + 3] = (float)-py;
        ys[2 * i] = 0;
        ys[2 * i + 1] = 1;
    }
    *x = fc_from_data(ctx, FC_F32, FC_SHAPE({"b", 2 * n}, {"in", 2}), xs, sizeof(float) * 4 * (size_t)n);
    *y = fc_from_data(ctx, FC_I64, FC_SHAPE({"b", 2 * n}), ys, sizeof(int64_t) * 2 * (size_t)n);
    free(xs);
    free(ys);
}

/* Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), like torch.nn.Linear. */
static fc_tensor *init(fc_ctx *ctx, const char *out, int64_t no, const char *in, int64_t ni, uint64_t seed)
{
    double k = 1.0 / sqrt((double)ni);
    fc_tensor *t = in ? fc_rand_uniform(ctx, FC_F32, FC_SHAPE({out, no}, {in, ni}), seed, -k, k)
                      : fc_rand_uniform(ctx, FC_F32, FC_SHAPE({out, no}), seed, -k, k);
    if (t && fc_requires_grad(ctx, t, 1) != FC_OK) {
        fc_release(t);
        return NULL;
    }
    return t;
}

static double default_lr(fc_optim_kind k)
{
    switch (k) {
    case FC_OPTIM_SGD: return 0.2;
    case FC_OPTIM_ADAM: return 0.01;
    case FC_OPTIM_ADAMW: return 0.01;
    case FC_OPTIM_MUON: return 0.02;
    }
    return 0.01;
}

static int64_t default_steps(fc_optim_kind k)
{
    switch (k) {
    case FC_OPTIM_SGD: return 2000;
    case FC_OPTIM_ADAM: case FC_OPTIM_ADAMW: case FC_OPTIM_MUON: return 800;
    }
    return 2000;
}

static uint64_t fnv(uint64_t h, const fc_tensor *t) { return fc_fnv1a(h, fc_tensor_data(t), fc_tensor_nbytes(t)); }

fc_status fc_spirals_train(fc_ctx *ctx, const fc_spirals_config *cfg, fc_spirals_result *res)
{
    int n = cfg->points > 0 ? cfg->points : 200, hd = cfg->hidden > 0 ? cfg->hidden : 64;
    int64_t steps = cfg->steps > 0 ? cfg->steps : default_steps(cfg->optim);
    double lr = cfg->lr > 0 ? cfg->lr : default_lr(cfg->optim);
    fc_tensor *x = NULL, *y = NULL;
    make_data(ctx, n, &x, &y);
    model m = {
        init(ctx, "h1", hd, "in", 2, cfg->seed * 8 + 1), init(ctx, "h1", hd, NULL, 2, cfg->seed * 8 + 2),
        init(ctx, "h2", hd, "h1", hd, cfg->seed * 8 + 3), init(ctx, "h2", hd, NULL, hd, cfg->seed * 8 + 4),
        init(ctx, "cls", 2, "h2", hd, cfg->seed * 8 + 5), init(ctx, "cls", 2, NULL, hd, cfg->seed * 8 + 6),
    };
    fc_optim_options oo = {.lr = lr};
    if (cfg->optim == FC_OPTIM_SGD) oo.momentum = 0.9;
    if (cfg->optim == FC_OPTIM_ADAMW) oo.weight_decay = 1e-4;
    fc_optim *opt = x && y && m.b3 ? fc_optim_new(ctx, cfg->optim, &oo) : NULL;
    fc_status st = opt ? FC_OK : fc_ctx_status(ctx);
    if (st == FC_OK &&
        fc_optim_add_group(opt, FC_PARAMS(m.w1, m.b1, m.w2, m.b2, m.w3, m.b3),
                           FC_NAMES("w1", "b1", "w2", "b2", "w3", "b3"), NULL) < 0)
        st = fc_ctx_status(ctx);
    if (st == FC_OK && cfg->resume_path) st = fc_checkpoint_load(ctx, cfg->resume_path, opt);
    fc_lr_schedule sched = {.kind = FC_LR_WARMUP_COSINE, .lr = lr, .warmup_steps = steps / 20 + 1,
                            .total_steps = steps, .min_lr = lr * 0.05};
    double loss = NAN;
    while (st == FC_OK && fc_optim_steps(opt) < steps) {
        int64_t s = fc_optim_steps(opt);
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *l = fc_cross_entropy(ctx, forward(ctx, &m, x, cfg->dropout, cfg->seed * 1000003 + (uint64_t)s), y,
                                        "cls", NULL);
        if (!l) st = fc_ctx_status(ctx);
        if (st == FC_OK) {
            loss = fc_tensor_item(l);
            st = fc_backward(ctx, l);
        }
        fc_scope_end(ctx, sc);
        if (st == FC_OK) st = fc_optim_set_lr(opt, -1, fc_lr_at(&sched, s));
        if (st == FC_OK) st = fc_optim_step(opt);
        fc_optim_zero_grad(opt);
        if (st == FC_OK && cfg->save_path && fc_optim_steps(opt) == cfg->save_at)
            st = fc_checkpoint_save(ctx, cfg->save_path, opt, NULL, 0);
        if (st == FC_OK && cfg->log && cfg->log_every > 0 && (s + 1) % cfg->log_every == 0)
            fprintf(cfg->log, "step %6lld  loss %.6f\n", (long long)(s + 1), loss);
    }
    double acc = NAN;
    if (st == FC_OK) {
        fc_no_grad_begin();
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *pred = fc_argmax(ctx, forward(ctx, &m, x, 0, 0), "cls");
        fc_tensor *hit = fc_sum(ctx, fc_cast(ctx, fc_compare(ctx, FC_EQ, pred, y), FC_F32), FC_NO_AXES);
        if (hit) acc = fc_tensor_item(hit) / (2.0 * n);
        else st = fc_ctx_status(ctx);
        fc_scope_end(ctx, sc);
        fc_no_grad_end();
    }
    if (st == FC_OK && res) {
        res->steps = fc_optim_steps(opt);
        res->loss = loss;
        res->accuracy = acc;
        uint64_t h = FC_FNV1A_INIT;
        fc_tensor *ps[6] = {m.w1, m.b1, m.w2, m.b2, m.w3, m.b3};
        for (int i = 0; i < 6; i++) h = fnv(h, ps[i]);
        res->param_hash = h;
    }
    fc_optim_free(opt);
    fc_release(x);
    fc_release(y);
    fc_release(m.w1);
    fc_release(m.b1);
    fc_release(m.w2);
    fc_release(m.b2);
    fc_release(m.w3);
    fc_release(m.b3);
    return st;
}
