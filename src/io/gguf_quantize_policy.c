/* SPDX-License-Identifier: MIT */
/* llama.cpp's per-tensor type rules for a quantization mix (see
 * gguf_quantize_policy.h), written from src/llama-quant.cpp: which tensors
 * may change (tensor_allows_quantization), the category of a tensor by its
 * name, the per-mix bumps (llama_tensor_get_type_impl: token_embd / output,
 * attn_v and ffn_down getting more bits in some layers), and the fallback
 * when ne[0] is not a multiple of the type's block (tensor_type_fallback).
 * The branches of the IQ1/IQ2/IQ3 mixes are left out (they need ggml's
 * grid encoders, which are not here); the two that an importance matrix
 * changes for the offered mixes are in (fc_quant_opts.has_imatrix). */
#include "io/gguf_quantize_policy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/gguf.h"

/* llama_ftype numbers (include/llama.h): general.file_type in the output. */
enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9, FT_Q2_K = 10,
    FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17,
    FT_Q6_K = 18, FT_IQ4_NL = 25, FT_IQ4_XS = 30, FT_BF16 = 32, FT_TQ1_0 = 36, FT_TQ2_0 = 37, FT_MXFP4_MOE = 38,
};

/* llama-quantize's names (tools/quantize/quantize.cpp QUANT_OPTIONS),
 * aliases included; the base type is llama_ftype_get_default_type. */
static const fc_quant_mix mixes[] = {
    {"Q4_0", FT_Q4_0, FC_GGML_Q4_0},       {"Q4_1", FT_Q4_1, FC_GGML_Q4_1},
    {"Q5_0", FT_Q5_0, FC_GGML_Q5_0},       {"Q5_1", FT_Q5_1, FC_GGML_Q5_1},
    {"Q8_0", FT_Q8_0, FC_GGML_Q8_0},       {"Q2_K", FT_Q2_K, FC_GGML_Q2_K},
    {"Q3_K_S", FT_Q3_K_S, FC_GGML_Q3_K},   {"Q3_K_M", FT_Q3_K_M, FC_GGML_Q3_K},
    {"Q3_K", FT_Q3_K_M, FC_GGML_Q3_K},     {"Q3_K_L", FT_Q3_K_L, FC_GGML_Q3_K},
    {"Q4_K_S", FT_Q4_K_S, FC_GGML_Q4_K},   {"Q4_K_M", FT_Q4_K_M, FC_GGML_Q4_K},
    {"Q4_K", FT_Q4_K_M, FC_GGML_Q4_K},     {"Q5_K_S", FT_Q5_K_S, FC_GGML_Q5_K},
    {"Q5_K_M", FT_Q5_K_M, FC_GGML_Q5_K},   {"Q5_K", FT_Q5_K_M, FC_GGML_Q5_K},
    {"Q6_K", FT_Q6_K, FC_GGML_Q6_K},       {"IQ4_NL", FT_IQ4_NL, FC_GGML_IQ4_NL},
    {"IQ4_XS", FT_IQ4_XS, FC_GGML_IQ4_XS}, {"TQ1_0", FT_TQ1_0, FC_GGML_TQ1_0},
    {"TQ2_0", FT_TQ2_0, FC_GGML_TQ2_0},    {"MXFP4_MOE", FT_MXFP4_MOE, FC_GGML_MXFP4},
    {"F16", FT_F16, FC_GGML_F16},          {"BF16", FT_BF16, FC_GGML_BF16},
    {"F32", FT_ALL_F32, FC_GGML_F32},
};

const fc_quant_mix *fc_quant_mix_at(size_t i)
{
    return i < sizeof mixes / sizeof mixes[0] ? &mixes[i] : NULL;
}

const fc_quant_mix *fc_quant_mix_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        const char *a = mixes[i].name, *b = name;
        while (*a && *b && toupper((unsigned char)*a) == toupper((unsigned char)*b)) a++, b++;
        if (!*a && !*b) return &mixes[i];
    }
    return NULL;
}

static uint32_t blck(uint32_t type)
{
    uint32_t e = 0, b = 0;
    fc_ggml_type_block(type, &e, &b);
    return e ? e : 1; /* unknown ids never get here; 1 keeps the modulos defined */
}

/* ggml_is_quantized: the block formats (f32/f16/bf16 and the integer types
 * have one element per block). */
static int is_quantized(uint32_t type) { return blck(type) > 1; }

/* ggml_n_dims: trailing dims of 1 do not count. */
static int eff_dims(const fc_quant_tensor *t)
{
    for (int i = 3; i >= 1; i--)
        if (i < t->n_dims && t->ne[i] > 1) return i + 1;
    return 1;
}

/* ---- names -------------------------------------------------------------------------- */

typedef enum cat {
    CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B, CAT_ATTN_OUTPUT, CAT_FFN_UP,
    CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER,
} cat;

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static int is_token_embd(const char *n)
{
    return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight");
}

/* tensor_get_category: the first match wins, in llama.cpp's order. */
static cat category(const char *n)
{
    if (!strcmp(n, "output.weight")) return CAT_OUTPUT;
    if (is_token_embd(n)) return CAT_TOKEN_EMBD;
    if (has(n, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (has(n, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (has(n, "attn_v.weight")) return CAT_ATTN_V;
    if (has(n, "attn_k.weight")) return CAT_ATTN_K;
    if (has(n, "attn_q.weight")) return CAT_ATTN_Q;
    if (has(n, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (has(n, "ffn_up")) return CAT_FFN_UP;
    if (has(n, "ffn_gate")) return CAT_FFN_GATE;
    if (has(n, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static int cat_is_attn_v(cat c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

int fc_quant_allows(const fc_quant_tensor *t)
{
    if (eff_dims(t) < 2) return 0; /* only 2-D and 3-D (experts) tensors */
    const char *n = t->name;
    size_t len = strlen(n);
    /* llama.cpp: name.rfind("weight") == name.size() - 6. With fewer than 6
     * bytes the right side wraps to SIZE_MAX - (5 - size), equal to npos
     * (not found) only for a 5-byte name: kept, as the oracle does it. */
    const char *last = NULL;
    for (const char *p = strstr(n, "weight"); p; p = strstr(p + 1, "weight")) last = p;
    int ok = len >= 6 ? (last && (size_t)(last - n) == len - 6) : (len == 5 && !last);
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
        "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
        "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
        "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
        "mm.a.code_embd",
    };
    for (size_t i = 0; ok && i < sizeof never / sizeof never[0]; i++)
        if (has(n, never[i])) ok = 0;
    /* positional embeddings and token types (BERT): LLM_TN's names */
    if (!strcmp(n, "position_embd.weight") || !strcmp(n, "token_types.weight")) ok = 0;
    return ok;
}

/* ---- order -------------------------------------------------------------------------- */

static int layer_of(const char *n)
{
    int l = -1;
    if (sscanf(n, "blk.%d.", &l) != 1) l = -1;
    return l;
}

typedef struct order_key {
    int layer;
    const char *name;
    size_t index;
} order_key;

static int cmp_loader(const void *a, const void *b)
{
    const order_key *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name); /* std::string operator<: bytewise, like strcmp */
}

int fc_quant_order(const fc_quant_tensor *t, size_t n, size_t *perm)
{
    order_key *k = malloc((n ? n : 1) * sizeof *k);
    if (!k) return 0;
    for (size_t i = 0; i < n; i++) k[i] = (order_key){layer_of(t[i].name), t[i].name, i};
    /* names are unique, so the order is total and qsort's instability is moot */
    qsort(k, n, sizeof *k, cmp_loader);
    for (size_t i = 0; i < n; i++) perm[i] = k[i].index;
    free(k);
    return 1;
}

/* ---- rules -------------------------------------------------------------------------- */

typedef struct state {
    const fc_quant_mix *mix;
    const fc_quant_model *m;
    int n_attention_wv, i_attention_wv;
    int n_ffn_down, i_ffn_down, n_ffn_gate, i_ffn_gate, n_ffn_up, i_ffn_up;
    int tied; /* no output.weight: token_embd doubles as the output */
    char *err;
    size_t errlen;
} state;

static int use_more_bits(int i_layer, int n_layers)
{
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

static int n_gqa(const fc_quant_model *m) { return m->n_head_kv ? m->n_head / m->n_head_kv : 0; }

/* llama.cpp's layer_info: with experts the counter is meaningless (experts
 * are not consecutive), so the layer comes from the name. */
static int layer_info(state *s, int counter, const char *name, int *i_layer)
{
    *i_layer = counter;
    if ((s->m->n_expert > 1 ? s->m->n_expert : 1) > 1) {
        if (sscanf(name, "blk.%d.", i_layer) != 1) {
            snprintf(s->err, s->errlen, "failed to determine the layer of tensor \"%s\"", name);
            return 0;
        }
        if (*i_layer < 0 || *i_layer >= s->m->n_layer) {
            snprintf(s->err, s->errlen, "bad layer %d for tensor \"%s\": must be in [0, %d)", *i_layer, name,
                     s->m->n_layer);
            return 0;
        }
    }
    return 1;
}

/* llama_tensor_get_type_impl for the mixes offered (no IQ1/IQ2/IQ3 mixes).
 * Returns 0 on error. */
static int rules(state *s, const fc_quant_opts *o, const fc_quant_tensor *t, cat c, uint32_t *type)
{
    const int ft = s->mix->ftype;
    const fc_quant_model *m = s->m;
    uint32_t nt = *type;
    if (c == CAT_OUTPUT || (s->tied && c == CAT_TOKEN_EMBD)) {
        if (o->output_type >= 0) {
            nt = (uint32_t)o->output_type;
        } else {
            int64_t qk = blck(nt);
            if (ft == FT_MXFP4_MOE) nt = FC_GGML_Q8_0;
            else if (m->is_falcon || t->ne[0] % qk != 0) nt = FC_GGML_Q8_0;
            else if (nt != FC_GGML_Q8_0) nt = FC_GGML_Q6_K;
        }
    } else if (ft == FT_MXFP4_MOE) {
        /* expert tensors (3-D) to MXFP4, the rest to Q8_0 */
        int expert_role = c == CAT_FFN_UP || c == CAT_FFN_GATE || c == CAT_FFN_DOWN;
        nt = (t->n_dims > 2 && t->ne[2] > 1 && (!m->is_bailingmoe3 || expert_role)) ? FC_GGML_MXFP4 : FC_GGML_Q8_0;
    } else if (c == CAT_TOKEN_EMBD) {
        if (o->token_embd_type >= 0) nt = (uint32_t)o->token_embd_type;
        else if (ft == FT_TQ1_0 || ft == FT_TQ2_0) nt = FC_GGML_Q4_K;
    } else if (cat_is_attn_v(c)) {
        if (ft == FT_Q2_K) nt = n_gqa(m) >= 4 ? FC_GGML_Q4_K : FC_GGML_Q3_K;
        else if (ft == FT_Q3_K_M) nt = s->i_attention_wv < 2 ? FC_GGML_Q5_K : FC_GGML_Q4_K;
        else if (ft == FT_Q3_K_L) nt = FC_GGML_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && n_gqa(m) >= 4) nt = FC_GGML_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(s->i_attention_wv, s->n_attention_wv))
            nt = FC_GGML_Q6_K;
        else if (ft == FT_Q4_K_S && s->i_attention_wv < 4) nt = FC_GGML_Q5_K;
        /* 70B: 8 heads share attn_v, so more bits cost little */
        if (m->is_70b && (nt == FC_GGML_Q3_K || nt == FC_GGML_Q4_K)) nt = FC_GGML_Q5_K;
        if (m->n_expert == 8) nt = FC_GGML_Q8_0;
        s->i_attention_wv++;
    } else if (c == CAT_ATTN_K) {
        if (m->n_expert == 8) nt = FC_GGML_Q8_0;
    } else if (c == CAT_ATTN_Q) {
        /* only the IQ3 mixes change attn_q */
    } else if (c == CAT_FFN_DOWN) {
        int il, nl = s->n_ffn_down;
        if (!layer_info(s, s->i_ffn_down, t->name, &il)) return 0;
        if (ft == FT_Q2_K) nt = FC_GGML_Q3_K;
        else if (ft == FT_Q3_K_M)
            nt = il < nl / 16 ? FC_GGML_Q5_K : (!m->is_falcon || use_more_bits(il, nl)) ? FC_GGML_Q4_K : FC_GGML_Q3_K;
        else if (ft == FT_Q3_K_L) nt = m->is_falcon ? FC_GGML_Q4_K : FC_GGML_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (m->is_falcon) nt = il < nl / 16 ? FC_GGML_Q6_K : use_more_bits(il, nl) ? FC_GGML_Q5_K : FC_GGML_Q4_K;
            else if (use_more_bits(il, nl)) nt = FC_GGML_Q6_K;
        } else if (il < nl / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !o->has_imatrix) nt = FC_GGML_Q5_K;
        else if (ft == FT_Q5_K_M && use_more_bits(il, nl)) nt = FC_GGML_Q6_K;
        else if (ft == FT_Q4_K_S && !m->is_falcon && il < nl / 8) nt = FC_GGML_Q5_K;
        /* llama.cpp guards the first ffn_down layers of Q4_0 / Q5_0 only with
         * an imatrix, so that a file without one stays what it always was */
        else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && o->has_imatrix && il < nl / 8)
            nt = ft == FT_Q4_0 ? FC_GGML_Q4_1 : FC_GGML_Q5_1;
        s->i_ffn_down++;
    } else if (c == CAT_ATTN_OUTPUT) {
        if (!m->is_falcon) {
            if (m->n_expert == 8) {
                if (ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL || ft == FT_Q4_K_S ||
                    ft == FT_Q4_K_M || ft == FT_IQ4_XS)
                    nt = FC_GGML_Q5_K;
            } else {
                if (ft == FT_Q2_K) nt = FC_GGML_Q3_K;
                else if (ft == FT_Q3_K_M) nt = FC_GGML_Q4_K;
                else if (ft == FT_Q3_K_L) nt = FC_GGML_Q5_K;
            }
        } else if (ft == FT_Q3_K_L) {
            nt = FC_GGML_Q4_K;
        }
    } else if (c == CAT_ATTN_QKV) {
        /* unreachable: attn_qkv is attn_v-like above (as in llama.cpp) */
    } else if (c == CAT_FFN_GATE || c == CAT_FFN_UP) {
        /* only IQ3_XS changes these, but the layer check runs for every mix */
        int il;
        if (!layer_info(s, c == CAT_FFN_GATE ? s->i_ffn_gate : s->i_ffn_up, t->name, &il)) return 0;
        if (c == CAT_FFN_GATE) s->i_ffn_gate++;
        else s->i_ffn_up++;
    }
    *type = nt;
    return 1;
}

/* tensor_type_fallback: a type whose block does not divide ne[0] becomes a
 * 32-element one, else F16. */
static int fallback_type(state *s, const fc_quant_tensor *t, uint32_t *type, int *fell)
{
    int64_t qk = blck(*type);
    if (t->ne[0] % qk == 0) return 1;
    uint32_t r;
    switch (*type) {
    case FC_GGML_IQ1_S: case FC_GGML_IQ1_M: case FC_GGML_IQ2_XXS: case FC_GGML_IQ2_XS: case FC_GGML_IQ2_S:
    case FC_GGML_IQ3_XXS: case FC_GGML_IQ3_S: case FC_GGML_IQ4_XS: r = FC_GGML_IQ4_NL; break;
    case 42 /* Q2_0 */: case FC_GGML_Q2_K: case FC_GGML_Q3_K: case FC_GGML_TQ1_0: case FC_GGML_TQ2_0:
        r = FC_GGML_Q4_0; break;
    case FC_GGML_Q4_K: r = FC_GGML_Q5_0; break;
    case FC_GGML_Q5_K: r = FC_GGML_Q5_1; break;
    case FC_GGML_Q6_K: r = FC_GGML_Q8_0; break;
    default:
        if (qk <= 32) {
            r = *type; /* already a 32-block type: the F16 check below applies */
            break;
        }
        snprintf(s->err, s->errlen, "tensor \"%s\": ne[0] %lld is not a multiple of %lld and type %s has no fallback",
                 t->name, (long long)t->ne[0], (long long)qk, fc_ggml_type_name(*type));
        return 0;
    }
    if (t->ne[0] % blck(r) != 0) r = FC_GGML_F16;
    *type = r;
    *fell = 1;
    return 1;
}

int fc_quant_policy(const fc_quant_mix *mix, const fc_quant_model *m, const fc_quant_opts *o,
                    const fc_quant_tensor *t, size_t n, uint32_t *out, int *fallback, char *err, size_t errlen)
{
    state s = {.mix = mix, .m = m, .tied = 1, .err = err, .errlen = errlen};
    for (size_t i = 0; i < n; i++) {
        cat c = category(t[i].name);
        if (cat_is_attn_v(c)) s.n_attention_wv++;
        if (c == CAT_OUTPUT) s.tied = 0;
    }
    s.n_ffn_down = s.n_ffn_gate = s.n_ffn_up = m->n_layer;
    for (size_t i = 0; i < n; i++) {
        fallback[i] = 0;
        out[i] = t[i].type;
        if (!fc_quant_allows(&t[i])) continue;
        cat c = category(t[i].name);
        if (o->token_embd_type >= 0 && c == CAT_TOKEN_EMBD) {
            out[i] = (uint32_t)o->token_embd_type;
            continue;
        }
        if (o->output_type >= 0 && c == CAT_OUTPUT) {
            out[i] = (uint32_t)o->output_type;
            continue;
        }
        uint32_t nt = mix->base;
        if (is_quantized(mix->base)) {
            if (!o->pure && !rules(&s, o, &t[i], c, &nt)) return 0;
            if (!fallback_type(&s, &t[i], &nt, &fallback[i])) return 0;
        }
        out[i] = nt;
    }
    return 1;
}
