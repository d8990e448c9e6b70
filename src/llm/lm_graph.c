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
 * A LoRA model (src/llm/lm_lora.c) runs the same layer: every projection
 * goes through project(), which adds the weight's pair when the model has
 * one, and the pairs are layer inputs so fc_checkpoint recomputes them too.
 *
 * Axes: tokens [b, seq]; the residual stream [b, seq, embd]; Q [b, seq,
 * head, d]; K and V [b, kv_seq, kv_head, d]; logits [b, seq, vocab]. */
#include <stddef.h>
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
#define MAX_LAYER_LORA 8 /* LoRA pairs of one layer (the seven projections, and room) */

/* What a layer's block needs beside its tensors: the switches, the
 * positions (one per token axis name), and where each input goes. A LoRA
 * model's pairs of the layer are inputs too (after the layer's tensors), so
 * that a checkpointed layer's recomputation takes their gradients. */
struct fc_lm_layer_job {
    const fc_llm_hparams *hp;
    fc_tensor *pos_q, *pos_k;        /* [seq], [kv_seq] */
    int n_fields;
    size_t fields[MAX_LAYER_TENSORS]; /* offsets into fc_llm_layer of in[1..] */
    int n_lora;
    size_t lora_field[MAX_LAYER_LORA]; /* the adapted weight's offset into fc_llm_layer */
    int lora_in[MAX_LAYER_LORA];       /* in[] index of its A (B follows) */
    float lora_scale[MAX_LAYER_LORA];
};
typedef struct fc_lm_layer_job layer_job;

fc_tensor *fc_lm_lora_add(fc_ctx *ctx, fc_tensor *y, fc_tensor *x, fc_tensor *a, fc_tensor *b, float scale)
{
    fc_tensor *t = fc_mul_scalar(ctx, fc_linear(ctx, x, a, NULL), (double)scale);
    return fc_add(ctx, y, fc_linear(ctx, t, b, NULL));
}

/* Every projection of the layer: x W^T (+ bias), plus the LoRA delta of
 * the weight in field when the model adapts it (a lookup per weight: one
 * layer function serves the plain and the LoRA model). */
static fc_tensor *project(fc_ctx *ctx, const layer_job *j, fc_tensor *const *in, size_t field, fc_tensor *x,
                          fc_tensor *w, fc_tensor *bias)
{
    fc_tensor *y = fc_linear(ctx, x, w, bias);
    for (int k = 0; k < j->n_lora; k++)
        if (j->lora_field[k] == field)
            return fc_lm_lora_add(ctx, y, x, in[j->lora_in[k]], in[j->lora_in[k] + 1], j->lora_scale[k]);
    return y;
}

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
    (void)n_in; /* in[1 + n_fields..] are the LoRA pairs (project) */
    for (int i = 1; i <= j->n_fields; i++) *fc_llm_slot(&L, j->fields[i - 1]) = in[i];
    fc_tensor *h = in[0];
    const double eps = hp->rms_eps;

#define P(input, weight, bias) project(ctx, j, in, offsetof(fc_llm_layer, weight), input, L.weight, bias)
    fc_tensor *a = fc_rmsnorm(ctx, h, L.attn_norm, "embd", eps);
    fc_tensor *q = heads(ctx, P(a, wq, L.bq), "q", "head", hp->n_head, hp->head_dim, 0);
    fc_tensor *k = heads(ctx, P(a, wk, L.bk), "kv", "kv_head", hp->n_head_kv, hp->head_dim, 1);
    fc_tensor *v = heads(ctx, P(a, wv, L.bv), "kv", "kv_head", hp->n_head_kv, hp->head_dim, 1);
    if (hp->qk_norm) {
        q = fc_rmsnorm(ctx, q, L.q_norm, "d", eps);
        k = fc_rmsnorm(ctx, k, L.k_norm, "d", eps);
    }
    q = rope(ctx, hp, q, j->pos_q, 0);
    k = rope(ctx, hp, k, j->pos_k, 1);
    fc_tensor *o = fc_attention(ctx, q, k, v, &(fc_attention_options){.scale = hp->attn_scale, .causal = 1});
    o = fc_merge_axes(ctx, o, FC_AXES("head", "d"), "q");
    h = fc_add(ctx, h, P(o, wo, L.bo));

    fc_tensor *f = fc_rmsnorm(ctx, h, L.ffn_norm, "embd", eps);
    fc_tensor *g = fc_mul(ctx, fc_silu(ctx, P(f, gate, NULL)), P(f, up, NULL));
    return fc_add(ctx, h, P(g, down, NULL));
#undef P
}

/* The layer's present tensors as block inputs, in the entry's order, then
 * layer l's LoRA pairs (A, B). */
static int layer_inputs(const fc_lm *lm, int64_t l, layer_job *j, fc_tensor **in)
{
    const fc_llm_arch_desc *d = lm->m->desc;
    const fc_llm_layer *L = &lm->m->layers[l];
    int n = 0;
    for (int i = 0; i < d->n_layer && n < MAX_LAYER_TENSORS; i++) {
        fc_tensor *t = *fc_llm_slot((void *)L, d->layer[i].field);
        if (!t) continue;
        j->fields[n] = d->layer[i].field;
        in[1 + n++] = t;
    }
    j->n_fields = n;
    int at = 1 + n;
    for (int k = 0; k < lm->n_lora; k++) {
        const fc_lm_lora_w *p = &lm->lora[k];
        if (p->layer != l || j->n_lora == MAX_LAYER_LORA) continue; /* fc_lm_lora_new bounds the count */
        j->lora_field[j->n_lora] = p->field;
        j->lora_in[j->n_lora] = at;
        j->lora_scale[j->n_lora++] = p->scale;
        in[at++] = p->a;
        in[at++] = p->b;
    }
    return at;
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
    /* a LoRA model's frozen f16 / bf16 embeddings give rows of their type: the stream is f32 (exact widening,
     * as the inference forward reads them) */
    if (h && fc_tensor_dtype(h) != FC_F32) h = fc_cast(ctx, h, FC_F32);
    for (int64_t l = 0; l < m->hp.n_layer && h; l++) {
        layer_job *j = &lm->jobs[l];
        *j = (layer_job){.hp = &m->hp, .pos_q = pos_q, .pos_k = pos_k};
        fc_tensor *in[1 + MAX_LAYER_TENSORS + 2 * MAX_LAYER_LORA];
        in[0] = h;
        const int n_in = layer_inputs(lm, l, j, in);
        h = opt && opt->checkpoint ? fc_checkpoint(ctx, layer_block, j, in, n_in) : layer_block(ctx, j, in, n_in);
    }
    fc_tensor *x = fc_rmsnorm(ctx, h, m->output_norm, "embd", m->hp.rms_eps);
    fc_tensor *y = x ? fc_linear(ctx, x, m->output, NULL) : NULL;
    for (int k = 0; k < lm->n_lora && y; k++) /* the output head's pair, when adapted */
        if (lm->lora[k].layer < 0) y = fc_lm_lora_add(ctx, y, x, lm->lora[k].a, lm->lora[k].b, lm->lora[k].scale);
    return y;
}

fc_tensor *fc_lm_loss(fc_ctx *ctx, fc_lm *lm, fc_tensor *tokens, fc_tensor *targets, const fc_lm_forward_options *opt)
{
    if (!ctx) return NULL;
    if (!targets) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_lm_loss: NULL targets");
    fc_tensor *logits = fc_lm_logits(ctx, lm, tokens, opt);
    return logits ? fc_cross_entropy(ctx, logits, targets, "vocab", &(fc_ce_options){.reduction = FC_REDUCE_SUM})
                  : NULL;
}
