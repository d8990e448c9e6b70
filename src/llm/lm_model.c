/* SPDX-License-Identifier: MIT */
/* Fucina llm: the training model — made from a configuration with
 * nanochat's initialisation, or loaded from a GGUF file — as an inference
 * model (fc_llm_model) whose weights are f32 variables. Both walk the
 * family's table entry (src/llm/arch.c), so a weight sits in the slot, with
 * the axes, the loader gives it, and the inference forward reads it there. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/autograd.h"
#include "fucina/lm_train.h"
#include "fucina/ops.h"
#include "llm/arch.h"
#include "llm/lm_internal.h"

/* The entry's tensors of layer l (-1: the globals), their count, and the
 * struct their fields are offsets into. */
static const fc_llm_tensor_spec *specs_of(const fc_llm_model *m, int64_t l, int *n, void **base)
{
    const fc_llm_arch_desc *d = m->desc;
    *n = l < 0 ? d->n_globals : d->n_layer;
    *base = l < 0 ? (void *)m : (void *)&m->layers[l];
    return l < 0 ? d->globals : d->layer;
}

int fc_lm_check_family(fc_ctx *ctx, const char *who, const fc_llm_hparams *hp, const fc_llm_arch_desc *d)
{
    const char *why = NULL;
    switch (d->arch) {
    case FC_LLM_ARCH_QWEN3:
    case FC_LLM_ARCH_LLAMA:
    case FC_LLM_ARCH_QWEN2: break;
    case FC_LLM_ARCH_QWEN3MOE:
    case FC_LLM_ARCH_GEMMA3:
    case FC_LLM_ARCH_GEMMA2:
    case FC_LLM_ARCH_PHI3: why = "its graph is not one the training forward computes"; break;
    }
    if (!why && hp->n_expert > 0) why = "mixture-of-experts layers are not trainable";
    if (!why && (hp->rope_freq_scale != 1.0 || hp->rope_ext_factor != 0.0 || hp->has_rope_freqs))
        why = "RoPE scaling (linear, YaRN or rope_freqs) is not trainable";
    if (!why && (hp->n_swa > 0 || hp->attn_softcap > 0 || hp->final_softcap > 0))
        why = "sliding windows and softcaps are not trainable";
    if (!why) return 0;
    fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: architecture %s: %s (trainable: qwen3, llama and qwen2 dense models)", who,
            d->name, why);
    return -1;
}

int fc_lm_collect_params(fc_ctx *ctx, fc_lm *lm)
{
    const fc_llm_model *m = lm->m;
    const fc_llm_arch_desc *d = m->desc;
    const int cap = d->n_globals + (int)m->hp.n_layer * d->n_layer;
    lm->params = calloc((size_t)cap, sizeof *lm->params);
    lm->names = calloc((size_t)cap, sizeof *lm->names);
    if (!lm->params || !lm->names) {
        fc_fail(ctx, FC_ERR_OOM, "fc_lm: out of memory");
        return -1;
    }
    /* the loader's order: globals, then layer by layer */
    for (int64_t l = -1; l < m->hp.n_layer; l++) {
        int nt;
        void *base;
        const fc_llm_tensor_spec *ts = specs_of(m, l, &nt, &base);
        for (int i = 0; i < nt; i++) {
            fc_tensor *t = *fc_llm_slot(base, ts[i].field);
            if (!t || t == m->rope_freqs || (l < 0 && t == m->output && m->hp.tied_output)) continue;
            if (l < 0) snprintf(lm->names[lm->n_params], FC_LM_NAME_MAX, "%s", ts[i].name);
            else snprintf(lm->names[lm->n_params], FC_LM_NAME_MAX, "blk.%d.%s", (int)l, ts[i].name);
            lm->params[lm->n_params++] = t;
        }
    }
    return 0;
}

/* ---- a new model ------------------------------------------------------------------ */

/* nanochat's initialisation for one tensor of the entry (see the header). */
static fc_tensor *init_tensor(fc_ctx *ctx, const fc_llm_tensor_spec *t, const fc_llm_hparams *hp, uint64_t seed)
{
    fc_dim dims[2];
    for (int i = 0; i < t->rank; i++)
        dims[i] = (fc_dim){fc_llm_dim_axis(t->dims[i]), fc_llm_dim_size(t->dims[i], hp)};
    if (t->rank == 1) return fc_full(ctx, FC_F32, dims, 1, strstr(t->name, ".bias") ? 0.0 : 1.0);
    if (!strcmp(t->name, "token_embd.weight")) return fc_rand_normal(ctx, FC_F32, dims, 2, seed, 0.0, 1.0);
    /* residual-branch outputs and the head start at zero: each block begins as the identity */
    if (!strcmp(t->name, "attn_output.weight") || !strcmp(t->name, "ffn_down.weight") ||
        !strcmp(t->name, "output.weight"))
        return fc_zeros(ctx, FC_F32, dims, 2);
    const double out = (double)dims[0].size, in = (double)dims[1].size;
    const double std = 1.0 / sqrt(in) * fmin(1.0, sqrt(out / in));
    const double a = sqrt(3.0) * std; /* uniform(-a, a) has this std */
    return fc_rand_uniform(ctx, FC_F32, dims, 2, seed, -a, a);
}

static int64_t or_default(int64_t v, int64_t dflt) { return v > 0 ? v : dflt; }

static int config_hparams(fc_ctx *ctx, const fc_lm_config *c, const fc_llm_arch_desc *d, int64_t n_vocab,
                          fc_llm_hparams *hp)
{
    static const char *op = "fc_lm_new";
    memset(hp, 0, sizeof *hp);
    hp->arch = d->arch;
    hp->n_vocab = n_vocab;
    hp->n_embd = or_default(c->n_embd, 128);
    hp->n_layer = or_default(c->n_layer, 4);
    hp->n_head = or_default(c->n_head, hp->n_embd / 64 > 1 ? hp->n_embd / 64 : 1);
    hp->n_head_kv = or_default(c->n_head_kv, hp->n_head);
    hp->head_dim = or_default(c->head_dim, hp->n_embd / hp->n_head);
    hp->n_rot = hp->head_dim;
    hp->n_ff = or_default(c->n_ff, (hp->n_embd * 8 / 3 + 31) / 32 * 32);
    hp->n_ctx_train = or_default(c->n_ctx, 512);
    hp->rope_theta = c->rope_theta > 0 ? c->rope_theta : 10000.0;
    hp->rms_eps = c->rms_eps > 0 ? c->rms_eps : 1e-6;
    hp->tied_output = c->tied != 0;
    hp->rope_freq_scale = 1.0;
    hp->rope_attn_factor = 1.0;
    hp->n_ctx_orig = hp->n_ctx_train;
    hp->yarn_beta_fast = 32.0;
    hp->yarn_beta_slow = 1.0;
    if (c->n_embd < 0 || c->n_layer < 0 || c->n_head < 0 || c->n_head_kv < 0 || c->head_dim < 0 || c->n_ff < 0 ||
        c->n_ctx < 0 || c->rope_theta < 0 || c->rms_eps < 0 || !isfinite(c->rope_theta) || !isfinite(c->rms_eps)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: a negative or non-finite size in the configuration", op);
        return -1;
    }
    if (hp->n_head % hp->n_head_kv || hp->head_dim < 2 || hp->head_dim % 2) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "%s: heads %lld must be a multiple of kv heads %lld, and the head dim %lld even and >= 2", op,
                (long long)hp->n_head, (long long)hp->n_head_kv, (long long)hp->head_dim);
        return -1;
    }
    if (d->q_is_embd && hp->n_head * hp->head_dim != hp->n_embd) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %s needs heads x head dim = embedding width (%lld x %lld != %lld)", op,
                d->name, (long long)hp->n_head, (long long)hp->head_dim, (long long)hp->n_embd);
        return -1;
    }
    const double params = (double)hp->n_layer * (double)hp->n_embd * (double)(hp->n_embd + hp->n_ff) * 4.0;
    if (hp->n_embd > (1 << 16) || hp->n_layer > 1024 || hp->n_ff > (1 << 18) || params > 4e10) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: the configuration is too large to train here (%g parameters)", op,
                params);
        return -1;
    }
    fc_llm_hparams_switches(hp, d);
    return 0;
}

static uint64_t seed_of(uint64_t seed, uint64_t k) { return seed * 0x9E3779B97F4A7C15ull + k * 0xD1B54A32D192ED03ull; }

fc_lm *fc_lm_new(fc_ctx *ctx, const char *tokenizer_gguf, const fc_lm_config *cfg)
{
    static const char *op = "fc_lm_new";
    if (!ctx) return NULL;
    const fc_lm_config dflt = {0};
    const fc_lm_config *c = cfg ? cfg : &dflt;
    if (!tokenizer_gguf && c->n_vocab < 1)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: without a tokenizer file the configuration needs n_vocab", op);
    const char *arch = c->arch ? c->arch : "qwen3";
    const fc_llm_arch_desc *d = fc_llm_arch_find(arch);
    if (!d) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: unknown architecture '%s'", op, arch);
    fc_lm *lm = calloc(1, sizeof *lm);
    fc_llm_model *m = lm ? calloc(1, sizeof *m) : NULL;
    if (!m) {
        free(lm);
        return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    }
    lm->m = m;
    m->desc = d;
    if (tokenizer_gguf) {
        lm->tok_path = strdup(tokenizer_gguf);
        m->tok = lm->tok_path ? fc_tokenizer_load(ctx, tokenizer_gguf) : NULL;
        if (!lm->tok_path) fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
        if (!m->tok) goto fail;
        if (c->n_vocab > 0 && c->n_vocab != fc_tokenizer_n_vocab(m->tok)) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: n_vocab %lld, but the tokenizer of %s has %d tokens", op,
                    (long long)c->n_vocab, tokenizer_gguf, (int)fc_tokenizer_n_vocab(m->tok));
            goto fail;
        }
    }
    if (config_hparams(ctx, c, d, m->tok ? fc_tokenizer_n_vocab(m->tok) : c->n_vocab, &m->hp) ||
        fc_lm_check_family(ctx, op, &m->hp, d))
        goto fail;
    m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if (!m->layers) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
        goto fail;
    }
    uint64_t k = 0;
    for (int64_t l = -1; l < m->hp.n_layer; l++) {
        int nt;
        void *base;
        const fc_llm_tensor_spec *ts = specs_of(m, l, &nt, &base);
        for (int i = 0; i < nt; i++) {
            const fc_llm_tensor_spec *t = &ts[i];
            const uint64_t seed = seed_of(c->seed, ++k); /* drawn for every spec: stable layouts */
            if (!fc_llm_tensor_applies(t, &m->hp) || t->rank == 3) continue;
            const int wanted = t->need == FC_REQUIRED || (strstr(t->name, ".bias") && d->attn_bias) ||
                               (!strcmp(t->name, "output.weight") && !m->hp.tied_output);
            if (!wanted) continue;
            fc_tensor *x = init_tensor(ctx, t, &m->hp, seed);
            if (!x || fc_requires_grad(ctx, x, 1) != FC_OK) {
                fc_release(x);
                goto fail;
            }
            *fc_llm_slot(base, t->field) = x;
        }
    }
    if (m->hp.tied_output) m->output = fc_retain(m->tok_embd);
    if (fc_lm_collect_params(ctx, lm)) goto fail;
    return lm;
fail:
    fc_lm_free(lm);
    return NULL;
}

/* ---- loading ------------------------------------------------------------------------ */

/* An owned f32 contiguous copy of a bound weight, as a variable with the
 * same axes; NULL + error (a block-quantized weight is not trainable). */
static fc_tensor *trainable_copy(fc_ctx *ctx, const char *path, const char *name, fc_tensor *w)
{
    const fc_dtype dt = fc_tensor_dtype(w);
    if (dt != FC_F32 && dt != FC_F16 && dt != FC_BF16)
        return fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: tensor %s is %s; training needs f32, f16 or bf16 weights "
                       "(fine-tune a quantized model with LoRA)", path, name, fc_dtype_name(dt));
    fc_tensor *c = dt == FC_F32 ? fc_clone(ctx, w) : fc_cast(ctx, w, FC_F32);
    if (c && fc_requires_grad(ctx, c, 1) != FC_OK) {
        fc_release(c);
        return NULL;
    }
    return c;
}

fc_lm *fc_lm_load(fc_ctx *ctx, const char *path)
{
    static const char *op = "fc_lm_load";
    if (!ctx) return NULL;
    if (!path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: NULL path", op);
    fc_lm *lm = calloc(1, sizeof *lm);
    if (!lm) return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    lm->tok_path = strdup(path);
    lm->m = lm->tok_path ? fc_llm_model_load_ex(ctx, path, &(fc_llm_load_options){.mmap = -1}) : NULL;
    if (!lm->tok_path) fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    if (!lm->m || fc_lm_check_family(ctx, path, &lm->m->hp, lm->m->desc)) goto fail;
    fc_llm_model *m = lm->m;
    for (int64_t l = -1; l < m->hp.n_layer; l++) {
        int nt;
        void *base;
        const fc_llm_tensor_spec *ts = specs_of(m, l, &nt, &base);
        for (int i = 0; i < nt; i++) {
            fc_tensor **s = fc_llm_slot(base, ts[i].field);
            if (!*s || (l < 0 && *s == m->output && m->hp.tied_output)) continue;
            fc_tensor *c = trainable_copy(ctx, path, ts[i].name, *s);
            if (!c) goto fail;
            fc_release(*s);
            *s = c;
        }
    }
    if (m->hp.tied_output) {
        fc_release(m->output);
        m->output = fc_retain(m->tok_embd);
    }
    if (fc_lm_collect_params(ctx, lm)) goto fail;
    return lm;
fail:
    fc_lm_free(lm);
    return NULL;
}

void fc_lm_free(fc_lm *lm)
{
    if (!lm) return;
    fc_llm_model_free(lm->m);
    for (int k = 0; k < lm->n_lora; k++) { /* a LoRA model owns its pairs (params point at them) */
        fc_release(lm->lora[k].a);
        fc_release(lm->lora[k].b);
    }
    free(lm->lora);
    free(lm->params);
    free(lm->names);
    free(lm->jobs);
    free(lm->tok_path);
    free(lm);
}

const fc_llm_model *fc_lm_model(const fc_lm *lm) { return lm ? lm->m : NULL; }
const fc_llm_hparams *fc_lm_hparams(const fc_lm *lm) { return lm ? &lm->m->hp : NULL; }
const fc_tokenizer *fc_lm_tokenizer(const fc_lm *lm) { return lm ? lm->m->tok : NULL; }
int fc_lm_param_count(const fc_lm *lm) { return lm ? lm->n_params : 0; }

fc_tensor *fc_lm_param(const fc_lm *lm, int i, const char **name)
{
    if (!lm || i < 0 || i >= lm->n_params) return NULL;
    if (name) *name = lm->names[i];
    return lm->params[i];
}

int64_t fc_lm_n_elements(const fc_lm *lm)
{
    int64_t n = 0;
    for (int i = 0; lm && i < lm->n_params; i++) n += fc_tensor_numel(lm->params[i]);
    return n;
}
