/* SPDX-License-Identifier: MIT */
/* Fucina llm: the training model's differentiable forward, on tensor ops.
 *
 * The layer is the one the inference forward (src/llm/forward.c) computes
 * on raw rows, for the switches fc_lm_check_family admits: pre-norm
 * RMSNorm, Q/K/V projections (with biases for qwen2), per-head Q/K RMSNorm
 * (qwen3), RoPE (NeoX or normal pairs, as the family says), causal GQA
 * attention at the family's scale, the output projection and the residual
 * add, then RMSNorm, the SiLU-gated FFN and the residual add. The two
 * paths are checked against each other on the same weights
 * (tests/runtime/test_lm_train.c); they differ by rounding only (fused
 * kernels and summation orders), not by a switch.
 *
 * Axes: tokens [b, seq]; the residual stream [b, seq, embd]; Q [b, seq,
 * head, d]; K and V [b, kv_seq, kv_head, d]; logits [b, seq, vocab]. */
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/autograd.h"
#include "fucina/loss.h"
#include "fucina/nn.h"
#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "llm/arch.h"
#include "llm/lm_internal.h"

#define MAX_LAYER_TENSORS 24

/* What a layer's block needs beside its tensors: the switches, the
 * positions (one per token axis name), and where each input goes. */
struct fc_lm_layer_job {
    const fc_llm_hparams *hp;
    fc_tensor *pos_q, *pos_k;        /* [seq], [kv_seq] */
    int n_fields;
    size_t fields[MAX_LAYER_TENSORS]; /* offsets into fc_llm_layer of in[1..] */
};
typedef struct fc_lm_layer_job layer_job;

static fc_tensor *heads(fc_ctx *ctx, fc_tensor *x, const char *axis, const char *head, int64_t n_head, int64_t d,
                        int kv)
{
    fc_tensor *t = fc_split_axis(ctx, x, axis, FC_SHAPE({head, n_head}, {"d", d}));
    return kv ? fc_rename(ctx, t, "seq", "kv_seq") : t;
}

static fc_tensor *rope(fc_ctx *ctx, const fc_llm_hparams *hp, fc_tensor *x, fc_tensor *pos, int kv)
{
    const fc_rope_options o = {
        .style = hp->rope_neox ? FC_ROPE_STYLE_NEOX : FC_ROPE_STYLE_NORMAL,
        .theta = hp->rope_theta,
        .token_axis = kv ? "kv_seq" : "seq",
        .head_axis = kv ? "kv_head" : "head",
    };
    return fc_rope(ctx, x, pos, &o);
}

/* One layer: in[0] the residual stream, in[1..] the layer's tensors. */
static fc_tensor *layer_block(fc_ctx *ctx, void *user, fc_tensor *const *in, int n_in)
{
    const layer_job *j = user;
    const fc_llm_hparams *hp = j->hp;
    fc_llm_layer L = {0};
    for (int i = 1; i < n_in; i++) *fc_llm_slot(&L, j->fields[i - 1]) = in[i];
    fc_tensor *h = in[0];
    const double eps = hp->rms_eps;

    fc_tensor *a = fc_rmsnorm(ctx, h, L.attn_norm, "embd", eps);
    fc_tensor *q = heads(ctx, fc_linear(ctx, a, L.wq, L.bq), "q", "head", hp->n_head, hp->head_dim, 0);
    fc_tensor *k = heads(ctx, fc_linear(ctx, a, L.wk, L.bk), "kv", "kv_head", hp->n_head_kv, hp->head_dim, 1);
    fc_tensor *v = heads(ctx, fc_linear(ctx, a, L.wv, L.bv), "kv", "kv_head", hp->n_head_kv, hp->head_dim, 1);
    if (hp->qk_norm) {
        q = fc_rmsnorm(ctx, q, L.q_norm, "d", eps);
        k = fc_rmsnorm(ctx, k, L.k_norm, "d", eps);
    }
    q = rope(ctx, hp, q, j->pos_q, 0);
    k = rope(ctx, hp, k, j->pos_k, 1);
    fc_tensor *o = fc_attention(ctx, q, k, v, &(fc_attention_options){.scale = hp->attn_scale, .causal = 1});
    o = fc_merge_axes(ctx, o, FC_AXES("head", "d"), "q");
    h = fc_add(ctx, h, fc_linear(ctx, o, L.wo, L.bo));

    fc_tensor *f = fc_rmsnorm(ctx, h, L.ffn_norm, "embd", eps);
    fc_tensor *g = fc_mul(ctx, fc_silu(ctx, fc_linear(ctx, f, L.gate, NULL)), fc_linear(ctx, f, L.up, NULL));
    return fc_add(ctx, h, fc_linear(ctx, g, L.down, NULL));
}

/* The layer's present tensors as block inputs, in the entry's order. */
static int layer_inputs(const fc_llm_arch_desc *d, const fc_llm_layer *L, layer_job *j, fc_tensor **in)
{
    int n = 0;
    for (int i = 0; i < d->n_layer && n < MAX_LAYER_TENSORS; i++) {
        fc_tensor *t = *fc_llm_slot((void *)L, d->layer[i].field);
        if (!t) continue;
        j->fields[n] = d->layer[i].field;
        in[1 + n++] = t;
    }
    j->n_fields = n;
    return 1 + n;
}

fc_tensor *fc_lm_logits(fc_ctx *ctx, fc_lm *lm, fc_tensor *tokens, const fc_lm_forward_options *opt)
{
    static const char *op = "fc_lm_logits";
    if (!ctx) return NULL;
    if (!lm || !tokens) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: NULL %s", op, lm ? "tokens" : "model");
    const fc_dtype dt = fc_tensor_dtype(tokens);
    if ((dt != FC_I32 && dt != FC_I64) || fc_tensor_rank(tokens) != 2 || fc_tensor_axis_index(tokens, "b") < 0 ||
        fc_tensor_axis_index(tokens, "seq") < 0) {
        char desc[128];
        return fc_fail(ctx, FC_ERR_SHAPE, "%s: tokens must be i32 or i64 [b, seq], not %s", op,
                       fc_tensor_describe(tokens, desc, sizeof desc));
    }
    const fc_llm_model *m = lm->m;
    const int64_t seq = fc_tensor_size(tokens, "seq");
    if (seq > m->hp.n_ctx_train)
        return fc_fail(ctx, FC_ERR_SHAPE, "%s: %lld tokens per row exceed the model's context %lld", op,
                       (long long)seq, (long long)m->hp.n_ctx_train);
    /* a checkpointed layer's job is read again in backward: it lives in lm */
    if (!lm->jobs && !(lm->jobs = calloc((size_t)m->hp.n_layer, sizeof *lm->jobs)))
        return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", op);
    fc_tensor *pos_q = fc_arange(ctx, FC_I32, "seq", seq), *pos_k = fc_arange(ctx, FC_I32, "kv_seq", seq);
    fc_tensor *h = pos_q && pos_k ? fc_get_rows(ctx, m->tok_embd, tokens) : NULL;
    for (int64_t l = 0; l < m->hp.n_layer && h; l++) {
        layer_job *j = &lm->jobs[l];
        *j = (layer_job){.hp = &m->hp, .pos_q = pos_q, .pos_k = pos_k};
        fc_tensor *in[1 + MAX_LAYER_TENSORS];
        in[0] = h;
        const int n_in = layer_inputs(m->desc, &m->layers[l], j, in);
        h = opt && opt->checkpoint ? fc_checkpoint(ctx, layer_block, j, in, n_in) : layer_block(ctx, j, in, n_in);
    }
    fc_tensor *x = fc_rmsnorm(ctx, h, m->output_norm, "embd", m->hp.rms_eps);
    return fc_linear(ctx, x, m->output, NULL);
}

fc_tensor *fc_lm_loss(fc_ctx *ctx, fc_lm *lm, fc_tensor *tokens, fc_tensor *targets, const fc_lm_forward_options *opt)
{
    if (!ctx) return NULL;
    if (!targets) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lm_loss: NULL targets");
    fc_tensor *logits = fc_lm_logits(ctx, lm, tokens, opt);
    return logits ? fc_cross_entropy(ctx, logits, targets, "vocab", &(fc_ce_options){.reduction = FC_REDUCE_SUM})
                  : NULL;
}
