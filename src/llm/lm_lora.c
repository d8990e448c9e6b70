/* SPDX-License-Identifier: MIT */
/* Fucina llm: the LoRA training model (fucina/lm_lora.h) — a base model as
 * the loader binds it, frozen in its own format, with an A/B pair of f32
 * variables per targeted projection — and its adapter file in llama.cpp's
 * format.
 *
 * The base's weights stay the loader's tensors (mapped or read, f32 to any
 * block format): the training forward's fc_linear takes them as they are
 * and records only the gradient of its input, so a quantized model is
 * fine-tuned without a dequantized copy (QLoRA's point). The pairs are also
 * attached to the base as an in-memory adapter, so fc_lm_model's sessions
 * compute the fine-tuned model through the inference forward's own LoRA
 * step (src/llm/lora_apply.c), reading the variables in place. */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/autograd.h"
#include "fucina/gguf.h"
#include "fucina/lm_lora.h"
#include "fucina/lora.h"
#include "fucina/ops.h"
#include "llm/arch.h"
#include "llm/lm_internal.h"
#include "llm/lora_internal.h"

/* The projections a target name may mean: the GGUF name's stem, a short
 * alias, and the weight's slot. attn_qkv (phi3's fused projection) is a
 * projection name no trainable family has: it is refused as absent. */
typedef struct target_def {
    const char *name, *alias;
    int global; /* 1: a model-level weight (the output head) */
    size_t field;
} target_def;

static const target_def k_targets[] = {
    {"attn_q", "q", 0, offsetof(fc_llm_layer, wq)},        {"attn_k", "k", 0, offsetof(fc_llm_layer, wk)},
    {"attn_v", "v", 0, offsetof(fc_llm_layer, wv)},        {"attn_output", "o", 0, offsetof(fc_llm_layer, wo)},
    {"ffn_gate", "gate", 0, offsetof(fc_llm_layer, gate)}, {"ffn_up", "up", 0, offsetof(fc_llm_layer, up)},
    {"ffn_down", "down", 0, offsetof(fc_llm_layer, down)}, {"attn_qkv", "qkv", 0, offsetof(fc_llm_layer, wqkv)},
    {"output", "head", 1, offsetof(fc_llm_model, output)},
};
#define N_TARGETS         ((int)(sizeof k_targets / sizeof k_targets[0]))
#define N_DEFAULT_TARGETS 7 /* the first seven: every attention and FFN projection */

static const target_def *find_target(const char *name)
{
    for (int i = 0; i < N_TARGETS; i++)
        if (!strcmp(name, k_targets[i].name) || !strcmp(name, k_targets[i].alias)) return &k_targets[i];
    return NULL;
}

int fc_lm_is_lora(const fc_lm *lm)
{
    return lm && lm->lora != NULL;
}
int64_t fc_lm_lora_rank(const fc_lm *lm)
{
    return lm ? lm->lora_rank : 0;
}
double fc_lm_lora_alpha(const fc_lm *lm)
{
    return lm ? lm->lora_alpha : 0.0;
}

/* The GGUF name of the adapted weight p ("blk.L.attn_q.weight", "output.weight"). */
static void weight_name(const fc_lm *lm, const fc_lm_lora_w *p, char *buf, size_t cap)
{
    const fc_llm_arch_desc *d = lm->m->desc;
    const fc_llm_tensor_spec *ts = p->layer < 0 ? d->globals : d->layer;
    const int n = p->layer < 0 ? d->n_globals : d->n_layer;
    for (int i = 0; i < n; i++)
        if (ts[i].field == p->field && fc_llm_tensor_applies(&ts[i], &lm->m->hp)) {
            if (p->layer < 0)
                snprintf(buf, cap, "%s", ts[i].name);
            else
                snprintf(buf, cap, "blk.%lld.%s", (long long)p->layer, ts[i].name);
            return;
        }
    snprintf(buf, cap, "?");
}

/* The targets, resolved and deduplicated into want[] (indices of k_targets). 0, or -1 + error. */
static int resolve_targets(fc_ctx *ctx, const char *path, const fc_llm_model *m, const fc_lm_lora_config *c,
                           int want[N_TARGETS])
{
    static const char *op = "fc_lm_lora_new";
    memset(want, 0, N_TARGETS * sizeof *want);
    if (c->n_targets < 0 || (c->n_targets > 0 && !c->targets)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %d targets%s", op, c->n_targets, c->n_targets > 0 ? " but NULL" : "");
        return -1;
    }
    if (c->n_targets == 0)
        for (int i = 0; i < N_DEFAULT_TARGETS; i++) want[i] = 1;
    for (int i = 0; i < c->n_targets; i++) {
        const target_def *t = c->targets[i] ? find_target(c->targets[i]) : NULL;
        if (!t) {
            fc_fail(ctx, FC_ERR_INVALID_ARG,
                    "%s: unknown target '%s' (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, "
                    "output; or q, k, v, o, gate, up, down)",
                    op, c->targets[i] ? c->targets[i] : "(null)");
            return -1;
        }
        want[t - k_targets] = 1;
    }
    for (int i = 0; i < N_TARGETS; i++) {
        if (!want[i]) continue;
        const target_def *t = &k_targets[i];
        const fc_tensor *w = t->global ? (m->hp.tied_output ? NULL : *fc_llm_slot((void *)m, t->field))
                                       : *fc_llm_slot(&m->layers[0], t->field);
        if (!w) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: target %s: %s has no %s%s.weight%s", op, t->name, path,
                    t->global ? "" : "blk.0.", t->name,
                    t->global && m->hp.tied_output ? " (its output is tied to token_embd.weight)" : "");
            return -1;
        }
    }
    return 0;
}

/* A [rank, in] like PEFT's kaiming_uniform_(a = sqrt 5): U(-1/sqrt(in), 1/sqrt(in)); B [out, rank] zero. */
static int make_pair(fc_ctx *ctx, fc_lm_lora_w *p, int64_t rank, uint64_t seed)
{
    const fc_tensor *w = p->w;
    const char *out_ax = fc_tensor_axis(w, 0), *in_ax = fc_tensor_axis(w, 1);
    const int64_t n_out = fc_tensor_dim(w, 0), n_in = fc_tensor_dim(w, 1);
    const double bound = 1.0 / sqrt((double)n_in);
    p->a = fc_rand_uniform(ctx, FC_F32, (fc_dim[]){{"lora_r", rank}, {in_ax, n_in}}, 2, seed, -bound, bound);
    p->b = fc_zeros(ctx, FC_F32, (fc_dim[]){{out_ax, n_out}, {"lora_r", rank}}, 2);
    if (!p->a || !p->b || fc_requires_grad(ctx, p->a, 1) != FC_OK || fc_requires_grad(ctx, p->b, 1) != FC_OK) return -1;
    return 0;
}

/* The pairs as an adapter set on the base (the variables themselves, retained by the set). */
static int attach(fc_ctx *ctx, fc_lm *lm)
{
    fc_llm_lora a = {.m = lm->m, .alpha = (float)lm->lora_alpha, .n = (size_t)lm->n_lora};
    a.p = calloc((size_t)lm->n_lora, sizeof *a.p);
    if (!a.p) {
        fc_fail(ctx, FC_ERR_OOM, "fc_lm_lora_new: out of memory");
        return -1;
    }
    for (int k = 0; k < lm->n_lora; k++) {
        const fc_lm_lora_w *p = &lm->lora[k];
        a.p[k] = (fc_llm_lora_pair){.w = p->w, .a = p->a, .b = p->b, .rank = lm->lora_rank};
        weight_name(lm, p, a.p[k].name, sizeof a.p[k].name);
    }
    fc_llm_lora *ap = &a;
    const float one = 1.0f;
    const fc_status st = fc_llm_model_set_loras(ctx, lm->m, &ap, &one, 1);
    free(a.p);
    return st == FC_OK ? 0 : -1;
}

static uint64_t seed_of(uint64_t seed, uint64_t k)
{
    return seed * 0x9E3779B97F4A7C15ull + k * 0xD1B54A32D192ED03ull;
}

fc_lm *fc_lm_lora_new(fc_ctx *ctx, const char *base_path, const fc_lm_lora_config *cfg)
{
    static const char *op = "fc_lm_lora_new";
    if (!ctx) return NULL;
    if (!base_path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: NULL base path", op);
    const fc_lm_lora_config dflt = {0};
    const fc_lm_lora_config *c = cfg ? cfg : &dflt;
    if (c->rank < 0 || c->rank > 4096)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: rank %lld: it must be in 1..4096 (0: 8)", op, (long long)c->rank);
    if (!isfinite(c->alpha) || c->alpha < 0)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: alpha %g: it must be finite and > 0 (0: the rank)", op, c->alpha);
    fc_lm *lm = calloc(1, sizeof *lm);
    if (!lm) return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    lm->lora_rank = c->rank ? c->rank : 8;
    lm->lora_alpha = c->alpha > 0 ? c->alpha : (double)lm->lora_rank;
    lm->tok_path = strdup(base_path);
    lm->m = lm->tok_path ? fc_llm_model_load_ex(ctx, base_path, NULL) : NULL;
    if (!lm->tok_path) fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    if (!lm->m || fc_lm_check_family(ctx, base_path, &lm->m->hp, lm->m->desc)) goto fail;
    fc_llm_model *m = lm->m;
    int want[N_TARGETS];
    if (resolve_targets(ctx, base_path, m, c, want)) goto fail;
    int per_layer = 0, global = 0;
    for (int i = 0; i < N_TARGETS; i++) {
        if (k_targets[i].global)
            global += want[i];
        else
            per_layer += want[i];
    }
    const int n = per_layer * (int)m->hp.n_layer + global;
    lm->lora = calloc((size_t)n, sizeof *lm->lora);
    lm->params = calloc((size_t)(2 * n), sizeof *lm->params);
    lm->names = calloc((size_t)(2 * n), sizeof *lm->names);
    if (!lm->lora || !lm->params || !lm->names) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
        goto fail;
    }
    /* the loader's order: layer by layer, each in the table's order; then the head */
    const float scale = fc_llm_lora_scale(1.0f, (float)lm->lora_alpha, lm->lora_rank);
    for (int64_t l = 0; l <= m->hp.n_layer; l++)
        for (int i = 0; i < N_TARGETS; i++) {
            const target_def *t = &k_targets[i];
            if (!want[i] || t->global != (l == m->hp.n_layer)) continue;
            fc_lm_lora_w *p = &lm->lora[lm->n_lora];
            p->layer = t->global ? -1 : l;
            p->field = t->field;
            p->w = t->global ? m->output : *fc_llm_slot(&m->layers[l], t->field);
            p->scale = scale;
            if (!p->w || fc_tensor_rank(p->w) != 2) {
                fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: target %s: %s has no such 2-D weight in layer %lld", op, t->name,
                        base_path, (long long)l);
                goto fail;
            }
            lm->n_lora++;
            if (make_pair(ctx, p, lm->lora_rank, seed_of(c->seed, (uint64_t)lm->n_lora))) goto fail;
            char wn[FC_LM_NAME_MAX - 8];
            weight_name(lm, p, wn, sizeof wn);
            snprintf(lm->names[lm->n_params], FC_LM_NAME_MAX, "%s.lora_a", wn);
            lm->params[lm->n_params++] = p->a;
            snprintf(lm->names[lm->n_params], FC_LM_NAME_MAX, "%s.lora_b", wn);
            lm->params[lm->n_params++] = p->b;
        }
    if (attach(ctx, lm)) goto fail;
    return lm;
fail:
    fc_lm_free(lm);
    return NULL;
}

/* ---- the adapter file ------------------------------------------------------------------ */

/* general.* and adapter.*: llama.cpp's adapter keys */
static fc_status adapter_head(fc_ctx *ctx, fc_gguf_writer *w, const fc_lm *lm, fc_dtype dt)
{
    (void)ctx, (void)dt;
    fc_status st = fc_gguf_set_str(w, "general.architecture", lm->m->desc->name);
    if (st == FC_OK) st = fc_gguf_set_str(w, "general.type", "adapter");
    if (st == FC_OK) st = fc_gguf_set_str(w, "general.name", "fucina LoRA adapter");
    if (st == FC_OK) st = fc_gguf_set_str(w, "adapter.type", "lora");
    if (st == FC_OK) st = fc_gguf_set_f32(w, "adapter.lora.alpha", (float)lm->lora_alpha);
    return st;
}

fc_status fc_lm_save_lora(fc_ctx *ctx, const fc_lm *lm, const char *path, fc_dtype dtype)
{
    static const char *op = "fc_lm_save_lora";
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!lm || !path || !lm->lora) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %s", op,
                !lm     ? "NULL model"
                : !path ? "NULL path"
                        : "the model has no LoRA pairs (make it with fc_lm_lora_new)");
        return FC_ERR_INVALID_ARG;
    }
    const fc_dtype dt = dtype == (fc_dtype)0 ? FC_F32 : dtype;
    if (dt != FC_F32 && dt != FC_F16 && dt != FC_BF16) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: dtype %s: an adapter is f32, f16 or bf16", op, fc_dtype_name(dt));
        return FC_ERR_INVALID_ARG;
    }
    /* params are the pairs' A and B (matrices: all in dt) with their GGUF names; our [rank, in] is GGUF's ne
     * [in, rank] */
    return fc_lm_write_gguf(ctx, lm, path, dt, adapter_head);
}
