/* SPDX-License-Identifier: MIT */
/* Fucina llm: the training loop of `fucina pretrain` and `fucina sft`.
 *
 * nanochat's recipe where a GGUF family can hold it: Muon on the layers'
 * matrices, AdamW (betas 0.8 / 0.95, eps 1e-10, no weight decay) on the
 * embeddings, the output head and the norm weights, each group at its own
 * learning rate (the AdamW ones scaled by (n_embd / 768)^-0.5), a
 * warmup / constant / linear warmdown schedule multiplying all of them.
 *
 * Exactness: a step's loss is the sum of its micro-batches' summed
 * cross-entropies divided by the global batch's target count (counted
 * before any forward), so the gradient of a global batch does not depend
 * on how it is split into micro-batches up to float summation order, and a
 * run is a pure function of (model, data, options, thread count): the rows
 * a step reads come from the step number alone (lm_data.h), the
 * micro-batches' gradients are summed in one order (lm_grads.h) and the
 * optimizer is deterministic (optim.h), so a checkpoint resumes bit for
 * bit and K data-parallel ranks reproduce one process.
 *
 * A LoRA model (fucina/lm_lora.h) takes the same loop with AdamW alone on
 * its A/B pairs (make_lora_optimizer): its parameters are the pairs, so the
 * gradients, checkpoints and ranks need nothing else. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/ctx.h"
#include "fucina/autograd.h"
#include "fucina/checkpoint.h"
#include "fucina/ops.h"
#include "fucina/optim.h"
#include "fucina/safetensors.h"
#include "llm/lm_data.h"
#include "llm/lm_grads.h"
#include "llm/lm_internal.h"

#define IGNORE (-100)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the optimizer -------------------------------------------------------------------- */

/* The groups, in this order (each only when it has a parameter). */
typedef enum lm_group { LM_MATRICES = 0, LM_EMBED, LM_HEAD, LM_SCALARS, LM_GROUPS } lm_group;

static double pick(double v, double dflt) { return v > 0 ? v : dflt; }

static void base_lrs(const fc_lm *lm, const fc_lm_train_options *o, double lr[LM_GROUPS])
{
    const double scale = 1.0 / sqrt((double)lm->m->hp.n_embd / 768.0);
    lr[LM_MATRICES] = pick(o->matrix_lr, 0.02);
    lr[LM_EMBED] = pick(o->embed_lr, 0.2 * scale);
    lr[LM_HEAD] = pick(o->head_lr, 0.004 * scale);
    lr[LM_SCALARS] = pick(o->scalar_lr, 0.02);
}

static lm_group group_of(const char *name, const fc_tensor *p)
{
    if (!strcmp(name, "token_embd.weight")) return LM_EMBED;
    if (!strcmp(name, "output.weight")) return LM_HEAD;
    return fc_tensor_rank(p) == 2 ? LM_MATRICES : LM_SCALARS;
}

/* A LoRA model's optimizer: AdamW alone on the A/B pairs, PEFT's Trainer
 * defaults (betas 0.9 / 0.999, eps 1e-8, no weight decay). Muon's
 * orthogonalised update is for full matrices: a rank-r factor starting at
 * zero (B) has no useful polar factor. */
static fc_optim *make_lora_optimizer(fc_ctx *ctx, fc_lm *lm, const fc_lm_train_options *o, double *group_lr,
                                     int *n_groups)
{
    const double lr = pick(o->lora_lr, 1e-3);
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_ADAMW,
                                 &(fc_optim_options){.lr = lr, .weight_decay = FC_OPTIM_ZERO, .betas = {0.9, 0.999},
                                                     .eps = 1e-8});
    if (!opt) return NULL;
    const char **ns = malloc((size_t)lm->n_params * sizeof *ns);
    if (!ns) {
        fc_optim_free(opt);
        return fc_fail(ctx, FC_ERR_OOM, "fc_lm_train: out of memory");
    }
    for (int i = 0; i < lm->n_params; i++) ns[i] = lm->names[i];
    const int ok = fc_optim_add_group(opt, lm->params, ns, lm->n_params, NULL) >= 0;
    free(ns);
    if (!ok) {
        fc_optim_free(opt);
        return NULL;
    }
    group_lr[0] = lr;
    *n_groups = 1;
    return opt;
}

/* The optimizer of the recipe, and the base lr of each of its groups. */
static fc_optim *make_optimizer(fc_ctx *ctx, fc_lm *lm, const fc_lm_train_options *o, double *group_lr, int *n_groups)
{
    if (lm->lora) return make_lora_optimizer(ctx, lm, o, group_lr, n_groups);
    double lr[LM_GROUPS];
    base_lrs(lm, o, lr);
    fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_MUON,
                                 &(fc_optim_options){.lr = lr[LM_MATRICES], .momentum = 0.95, .betas = {0.8, 0.95},
                                                     .eps = 1e-10});
    if (!opt) return NULL;
    fc_tensor **ps = malloc((size_t)lm->n_params * sizeof *ps);
    const char **ns = malloc((size_t)lm->n_params * sizeof *ns);
    int ok = ps && ns;
    if (!ok) fc_fail(ctx, FC_ERR_OOM, "fc_lm_train: out of memory");
    *n_groups = 0;
    for (int g = 0; g < LM_GROUPS && ok; g++) {
        int n = 0;
        for (int i = 0; i < lm->n_params; i++)
            if (group_of(lm->names[i], lm->params[i]) == (lm_group)g) {
                ps[n] = lm->params[i];
                ns[n++] = lm->names[i];
            }
        if (!n) continue;
        const fc_optim_group og = {.lr = lr[g], .adamw = g == LM_EMBED || g == LM_HEAD};
        ok = fc_optim_add_group(opt, ps, ns, n, &og) >= 0;
        group_lr[(*n_groups)++] = lr[g];
    }
    free(ps);
    free(ns);
    if (!ok) {
        fc_optim_free(opt);
        return NULL;
    }
    return opt;
}

fc_optim *fc_lm_optimizer(fc_ctx *ctx, fc_lm *lm, const fc_lm_train_options *opt)
{
    if (!ctx) return NULL;
    if (!lm) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lm_optimizer: NULL model");
    const fc_lm_train_options dflt = {0};
    double lr[LM_GROUPS];
    int n = 0;
    return make_optimizer(ctx, lm, opt ? opt : &dflt, lr, &n);
}

/* nanochat's schedule: linear warmup over the first warmup steps (from
 * 1/w), 1, then a linear warmdown to final_frac over the last ones. */
double fc_lm_lr_factor(int64_t step, int64_t steps, double warmup, double warmdown, double final_frac)
{
    const int64_t w = (int64_t)llround(warmup * (double)steps), d = (int64_t)llround(warmdown * (double)steps);
    if (step < w) return (double)(step + 1) / (double)w;
    if (step <= steps - d || d == 0) return 1.0;
    const double progress = (double)(steps - step) / (double)d;
    return progress + (1.0 - progress) * final_frac;
}

/* ---- options -------------------------------------------------------------------------- */

typedef struct resolved {
    int64_t steps, seq, batch, accum, eval_every, eval_tokens, save_every;
    double warmup, warmdown, final_frac;
    uint64_t seed;
} resolved;

/* FC_OPTIM_ZERO (-0.0) is an explicit zero where the default is not. */
static double frac_or(double v, double dflt) { return v == 0 && !signbit(v) ? dflt : v; }

static int resolve(fc_ctx *ctx, const fc_lm *lm, const fc_lm_train_options *o, resolved *r)
{
    static const char *op = "fc_lm_train";
    r->steps = o->steps > 0 ? o->steps : 200;
    r->seq = o->seq > 0 ? o->seq : 128;
    if (r->seq > lm->m->hp.n_ctx_train) r->seq = lm->m->hp.n_ctx_train;
    r->batch = o->batch > 0 ? o->batch : 8;
    const fc_lm_parallel *par = o->parallel;
    const int ranks = par && par->size > 1 ? par->size : 1;
    r->accum = o->accum > 0 ? o->accum : ranks;
    r->eval_every = o->eval_every;
    r->eval_tokens = o->eval_tokens > 0 ? o->eval_tokens : 65536;
    r->save_every = o->save_every;
    r->warmup = frac_or(o->warmup, 0.0);
    r->warmdown = frac_or(o->warmdown, 0.2);
    r->final_frac = o->final_lr_frac;
    r->seed = o->seed ? o->seed : 1;
    const char *bad = NULL;
    if (o->steps < 0 || o->seq < 0 || o->batch < 0 || o->accum < 0) bad = "steps, seq, batch and accum must be >= 0";
    else if (par && (par->size < 1 || par->rank < 0 || par->rank >= par->size))
        bad = "parallel: rank must be in [0, size)";
    else if (ranks > 1 && (!par->send || !par->recv || !par->broadcast))
        bad = "parallel: send, recv and broadcast are needed with more than one rank";
    else if (r->batch % r->accum) bad = "accum must divide batch";
    else if (r->accum % ranks) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: accum (%lld) must be a multiple of the number of ranks (%d): each rank "
                "takes an equal share of the micro-batches", op, (long long)r->accum, ranks);
        return -1;
    }
    else if (!(r->warmup >= 0 && r->warmdown >= 0 && r->warmup + r->warmdown <= 1))
        bad = "warmup and warmdown are fractions of the steps, together at most 1";
    else if (!(r->final_frac >= 0 && r->final_frac <= 1)) bad = "final_lr_frac must be in [0, 1]";
    else if (o->matrix_lr < 0 || o->embed_lr < 0 || o->head_lr < 0 || o->scalar_lr < 0 || o->lora_lr < 0 ||
             o->clip < 0 || !isfinite(o->matrix_lr + o->embed_lr + o->head_lr + o->scalar_lr + o->lora_lr + o->clip))
        bad = "learning rates and clip must be finite and >= 0";
    else if (o->eval_every < 0 || o->save_every < 0 || o->eval_tokens < 0) bad = "eval_every, eval_tokens and "
                                                                                "save_every must be >= 0";
    else if (!o->train_files || o->n_train_files < 1) bad = "no training files";
    else if (o->save_every && !o->save_path) bad = "save_every needs save_path";
    if (bad) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %s", op, bad);
        return -1;
    }
    return 0;
}

/* ---- a step ------------------------------------------------------------------------- */

typedef struct run {
    fc_lm *lm;
    const fc_lm_train_options *o;
    resolved r;
    lm_data train, val;
    int has_val;
    fc_optim *opt;
    double group_lr[LM_GROUPS];
    int n_groups;
    int32_t *in, *out; /* the global batch's rows */
    fc_lm_forward_options fwd;
    const fc_lm_parallel *par; /* NULL: alone */
    int rank, ranks;
    lm_grads grads;
    double reduce_s; /* the last step's time combining the ranks' gradients */
} run;

/* Forward and backward of one micro-batch of rows [r0, r0 + n): its summed
 * loss into *sum; gradients of loss * scale into the (zeroed) gradients. */
static int micro_batch(fc_ctx *ctx, run *R, int64_t r0, int64_t n, double scale, double *sum)
{
    const int64_t seq = R->r.seq;
    const size_t bytes = (size_t)(n * seq) * sizeof(int32_t);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", n}, {"seq", seq}), R->in + r0 * seq, bytes);
    fc_tensor *y = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", n}, {"seq", seq}), R->out + r0 * seq, bytes);
    fc_tensor *loss = x && y ? fc_lm_loss(ctx, R->lm, x, y, &R->fwd) : NULL;
    fc_status st = loss ? fc_backward(ctx, fc_mul_scalar(ctx, loss, scale)) : fc_ctx_status(ctx);
    if (st == FC_OK) *sum = fc_tensor_item(loss);
    fc_scope_end(ctx, sc);
    return st == FC_OK ? 0 : -1;
}

static int train_step(fc_ctx *ctx, run *R, int64_t step, double *loss, int64_t *n_targets)
{
    const resolved *r = &R->r;
    const int64_t seq = r->seq;
    for (int64_t row = 0; row < r->batch; row++)
        if (lm_data_row(&R->train, r->batch, step, row, R->in + row * seq, R->out + row * seq)) {
            fc_fail(ctx, FC_ERR_OOM, "fc_lm_train: out of memory");
            return -1;
        }
    int64_t n = 0;
    for (int64_t i = 0; i < r->batch * seq; i++) n += R->out[i] != IGNORE;
    *n_targets = n;
    /* this rank's share of the micro-batches, then the ranks' sum in order */
    const int64_t mb = r->batch / r->accum, per = r->accum / R->ranks, first = R->rank * per;
    double sum = 0;
    R->reduce_s = 0;
    if (n > 0 && R->ranks == 1 && per == 1) {
        /* one micro-batch alone: autograd wrote its gradient from zeroed
         * gradients, which is the sum already (no copy through lm_grads) */
        double part = 0;
        if (micro_batch(ctx, R, 0, mb, 1.0 / (double)n, &part)) return -1;
        sum = 0.0 + part;
    } else if (n > 0) {
        for (int64_t a = 0; a < per; a++) {
            double part = 0;
            if (micro_batch(ctx, R, (first + a) * mb, mb, 1.0 / (double)n, &part) ||
                lm_grads_take(ctx, &R->grads, (int)a, part))
                return -1;
        }
        const double t0 = now_s();
        if (lm_grads_finish(ctx, &R->grads, R->par, &sum)) return -1;
        R->reduce_s = now_s() - t0;
    }
    *loss = n > 0 ? sum / (double)n : NAN;
    if (R->o->clip > 0) fc_optim_clip_grad_norm(R->opt, R->o->clip);
    const double f = fc_lm_lr_factor(step, r->steps, r->warmup, r->warmdown, r->final_frac);
    for (int g = 0; g < R->n_groups; g++)
        if (fc_optim_set_lr(R->opt, g, R->group_lr[g] * f) != FC_OK) return -1;
    fc_status st = fc_optim_step(R->opt);
    fc_optim_zero_grad(R->opt);
    return st == FC_OK ? 0 : -1;
}

/* ---- held-out evaluation ------------------------------------------------------------------ */

/* Mean nats per target and bits per byte over the first windows of the
 * held-out stream: special-token targets (document boundaries) count in
 * neither the loss nor the bytes, so bits per byte compares across
 * tokenizers. */
static int evaluate(fc_ctx *ctx, run *R, double *val_loss, double *bpb)
{
    const int64_t seq = R->r.seq, rows = R->r.batch;
    const fc_tokenizer *tok = fc_lm_tokenizer(R->lm);
    int64_t windows = (R->r.eval_tokens + seq - 1) / seq;
    if (windows > R->val.n_items) windows = R->val.n_items;
    double nats = 0, bytes = 0;
    int64_t count = 0;
    int rc = 0;
    fc_no_grad_begin();
    for (int64_t w0 = 0; w0 < windows && rc == 0; w0 += rows) {
        const int64_t n = windows - w0 < rows ? windows - w0 : rows;
        for (int64_t i = 0; i < n; i++) {
            int32_t *out = R->out + i * seq;
            lm_data_window(&R->val, w0 + i, R->in + i * seq, out);
            for (int64_t t = 0; t < seq; t++) {
                size_t len = 0;
                const fc_token_type ty = fc_tokenizer_token_type(tok, out[t]);
                if (ty == FC_TOKEN_TYPE_CONTROL || ty == FC_TOKEN_TYPE_UNUSED || ty == FC_TOKEN_TYPE_UNKNOWN) {
                    out[t] = IGNORE;
                    continue;
                }
                const char *piece = NULL;
                if (fc_token_piece(ctx, tok, out[t], 0, &piece, &len) != FC_OK) rc = -1;
                bytes += (double)len;
                count++;
            }
        }
        if (rc) break;
        double sum = 0;
        fc_scope sc = fc_scope_begin(ctx);
        const size_t nb = (size_t)(n * seq) * sizeof(int32_t);
        fc_tensor *x = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", n}, {"seq", seq}), R->in, nb);
        fc_tensor *y = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", n}, {"seq", seq}), R->out, nb);
        fc_tensor *loss = x && y ? fc_lm_loss(ctx, R->lm, x, y, NULL) : NULL;
        if (loss) sum = fc_tensor_item(loss);
        else rc = -1;
        fc_scope_end(ctx, sc);
        nats += sum;
    }
    fc_no_grad_end();
    *val_loss = count ? nats / (double)count : NAN;
    *bpb = bytes > 0 ? nats / (log(2.0) * bytes) : NAN;
    return rc;
}

/* ---- the loop ------------------------------------------------------------------------------ */

static int save(fc_ctx *ctx, run *R, const char *path)
{
    char step[32], seq[32], batch[32];
    snprintf(step, sizeof step, "%lld", (long long)fc_optim_steps(R->opt));
    snprintf(seq, sizeof seq, "%lld", (long long)R->r.seq);
    snprintf(batch, sizeof batch, "%lld", (long long)R->r.batch);
    const char *meta[] = {"fucina.lm.step", step, "fucina.lm.seq", seq, "fucina.lm.batch", batch};
    return fc_checkpoint_save(ctx, path, R->opt, meta, 3) == FC_OK ? 0 : -1;
}

/* A checkpoint continues the run it came from only with the same rows per
 * step: its seq and batch must be this run's (the data order depends on
 * both). 0, or -1 with an error naming the key. */
static int check_resume(fc_ctx *ctx, const char *path, const resolved *r)
{
    fc_safetensors *f = fc_safetensors_open(ctx, path, 0);
    if (!f) return -1;
    const struct {
        const char *key;
        int64_t want;
    } k[] = {{"fucina.lm.seq", r->seq}, {"fucina.lm.batch", r->batch}};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        const char *v = fc_safetensors_meta(f, k[i].key);
        if (v && strtoll(v, NULL, 10) != k[i].want) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lm_train: %s has %s = %s, this run %lld: resume with the same options",
                    path, k[i].key, v, (long long)k[i].want);
            rc = -1;
        }
    }
    fc_safetensors_close(f);
    return rc;
}

fc_status fc_lm_train(fc_ctx *ctx, fc_lm *lm, const fc_lm_train_options *o)
{
    static const char *op = "fc_lm_train";
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!lm || !o) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: NULL %s", op, lm ? "options" : "model");
        return FC_ERR_INVALID_ARG;
    }
    run R = {.lm = lm, .o = o, .fwd = {.checkpoint = o->checkpoint_layers}, .ranks = 1};
    if (resolve(ctx, lm, o, &R.r)) return fc_ctx_status(ctx);
    if (o->parallel && o->parallel->size > 1) {
        R.par = o->parallel;
        R.rank = R.par->rank;
        R.ranks = R.par->size;
    }
    const char *field = o->jsonl_field ? o->jsonl_field : "text";
    int rc = lm_data_load(ctx, &R.train, lm, o->data, o->train_files, o->n_train_files, field, R.r.seq, R.r.seed);
    if (rc == 0 && o->val_files && o->n_val_files > 0) {
        rc = lm_data_load(ctx, &R.val, lm, FC_LM_DATA_TEXT, o->val_files, o->n_val_files, field, R.r.seq, 1);
        R.has_val = rc == 0;
    }
    if (rc == 0) {
        const size_t n = (size_t)(R.r.batch * R.r.seq);
        R.in = malloc(n * sizeof *R.in);
        R.out = malloc(n * sizeof *R.out);
        if (!R.in || !R.out) rc = -1, fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    }
    if (rc == 0) {
        R.opt = make_optimizer(ctx, lm, o, R.group_lr, &R.n_groups);
        rc = R.opt ? 0 : -1;
    }
    if (rc == 0 && (R.ranks > 1 || R.r.accum > 1))
        rc = lm_grads_init(ctx, &R.grads, lm->params, lm->n_params, (int)(R.r.accum / R.ranks), R.rank);
    int64_t start = 0;
    if (rc == 0 && o->resume_path) {
        rc = check_resume(ctx, o->resume_path, &R.r) == 0 && fc_checkpoint_load(ctx, o->resume_path, R.opt) == FC_OK
                 ? 0
                 : -1;
        start = fc_optim_steps(R.opt);
        if (rc == 0 && start > R.r.steps) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %s is at step %lld, past the %lld steps asked for", op,
                    o->resume_path, (long long)start, (long long)R.r.steps);
            rc = -1;
        }
    }
    int64_t seen = 0;
    for (int64_t s = start; s < R.r.steps && rc == 0; s++) {
        fc_lm_step_info info = {.step = s + 1, .steps = R.r.steps, .val_bpb = NAN, .val_loss = NAN};
        int64_t n = 0;
        const double t0 = now_s();
        rc = train_step(ctx, &R, s, &info.loss, &n);
        const double dt = now_s() - t0;
        seen += n;
        info.tokens_seen = seen;
        info.tokens_per_s = dt > 0 ? (double)n / dt : 0;
        info.lr_scale = fc_lm_lr_factor(s, R.r.steps, R.r.warmup, R.r.warmdown, R.r.final_frac);
        info.reduce_s = R.reduce_s;
        const int last = s + 1 == R.r.steps, lead = R.rank == 0; /* only the first rank evaluates and saves */
        if (rc == 0 && lead && R.has_val && (last || (R.r.eval_every && (s + 1) % R.r.eval_every == 0)))
            rc = evaluate(ctx, &R, &info.val_loss, &info.val_bpb);
        if (rc == 0 && lead && o->save_path && (last || (R.r.save_every && (s + 1) % R.r.save_every == 0)))
            rc = save(ctx, &R, o->save_path);
        if (rc == 0 && o->on_step) o->on_step(&info, o->user);
    }
    fc_optim_free(R.opt);
    lm_grads_free(&R.grads);
    lm_data_free(&R.train);
    lm_data_free(&R.val);
    free(R.in);
    free(R.out);
    return rc == 0 ? FC_OK : fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_STATE;
}
