/* Fucina llm: the architecture descriptor and weight binding from a GGUF.
 *
 * Keys and defaults follow llama.cpp's llama_model::load_hparams: head_count_kv
 * defaults to head_count, key/value_length to n_embd / n_head, rope
 * dimension_count to the head size, rope.freq_base to 10000; qwen3 requires
 * layer_norm_rms_epsilon. Tensor shapes are checked against the descriptor
 * (GGUF dims reversed: [out, in]) so a mismatched file fails at load with
 * the tensor's name, never inside the forward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/gguf.h"
#include "llm/model.h"

static int get_u32(fc_ctx *ctx, fc_gguf *g, const char *path, const char *key, int required, int64_t dflt,
                   int64_t *out) {
    if (fc_gguf_find_kv(g, key) < 0) {
        if (required) {
            fc_fail(ctx, FC_ERR_FORMAT, "%s: missing metadata key %s", path, key);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    uint32_t v;
    if (fc_gguf_get_u32(g, key, &v) != FC_OK) {
        int32_t i;
        fc_ctx_clear_error(ctx);
        if (fc_gguf_get_i32(g, key, &i) != FC_OK || i < 0) {
            fc_ctx_clear_error(ctx);
            fc_fail(ctx, FC_ERR_FORMAT, "%s: metadata key %s is not a u32", path, key);
            return -1;
        }
        v = (uint32_t)i;
    }
    *out = v;
    return 0;
}

static int get_f32(fc_ctx *ctx, fc_gguf *g, const char *path, const char *key, int required, double dflt,
                   double *out) {
    if (fc_gguf_find_kv(g, key) < 0) {
        if (required) {
            fc_fail(ctx, FC_ERR_FORMAT, "%s: missing metadata key %s", path, key);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    float v;
    if (fc_gguf_get_f32(g, key, &v) != FC_OK) {
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: metadata key %s is not an f32", path, key);
        return -1;
    }
    *out = v;
    return 0;
}

/* Tensor `name` with sizes {a} or {a, b} (row-major), renamed to the given
 * axis names. NULL + error when absent (unless optional) or mis-shaped. */
static fc_tensor *bind(fc_ctx *ctx, fc_gguf *g, const char *path, const char *name, int optional, int rank,
                       const char *n0, int64_t s0, const char *n1, int64_t s1) {
    if (fc_gguf_find_tensor(g, name) < 0) {
        if (!optional) fc_fail(ctx, FC_ERR_FORMAT, "%s: missing tensor %s", path, name);
        return NULL;
    }
    fc_tensor *t = fc_gguf_tensor(g, name);
    if (!t) return NULL;
    int ok = fc_tensor_rank(t) == rank && fc_tensor_dim(t, 0) == s0 && (rank == 1 || fc_tensor_dim(t, 1) == s1);
    if (!ok) {
        char d[128];
        fc_tensor_describe(t, d, sizeof d);
        fc_release(t);
        if (rank == 1)
            fc_fail(ctx, FC_ERR_FORMAT, "%s: tensor %s is %s, expected [%lld]", path, name, d, (long long)s0);
        else
            fc_fail(ctx, FC_ERR_FORMAT, "%s: tensor %s is %s, expected [%lld, %lld] (GGUF dims reversed)", path, name,
                    d, (long long)s0, (long long)s1);
        return NULL;
    }
    const char *names[2] = {n0, n1};
    fc_tensor *r = fc_rename_all(ctx, t, names, rank);
    fc_release(t);
    return r;
}

void fc_llm_model_free(fc_llm_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int64_t l = 0; l < m->hp.n_layer; l++) {
            fc_llm_layer *L = &m->layers[l];
            fc_tensor *ts[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->q_norm,
                               L->k_norm, L->ffn_norm, L->gate, L->up, L->down};
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) fc_release(ts[i]);
        }
        free(m->layers);
    }
    fc_release(m->tok_embd);
    fc_release(m->output_norm);
    fc_release(m->output);
    fc_tokenizer_free(m->tok);
    free(m);
}

const fc_llm_hparams *fc_llm_model_hparams(const fc_llm_model *m) { return m ? &m->hp : NULL; }
const fc_tokenizer *fc_llm_model_tokenizer(const fc_llm_model *m) { return m ? m->tok : NULL; }

static int load_hparams(fc_ctx *ctx, fc_gguf *g, const char *path, fc_llm_hparams *hp) {
    const char *arch = NULL;
    if (fc_gguf_get_str(g, "general.architecture", &arch, NULL) != FC_OK) {
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: missing or non-string general.architecture", path);
        return -1;
    }
    if (strcmp(arch, "qwen3")) {
        fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: qwen3)", path, arch);
        return -1;
    }
    hp->arch = FC_LLM_ARCH_QWEN3;
    if (get_u32(ctx, g, path, "qwen3.block_count", 1, 0, &hp->n_layer) ||
        get_u32(ctx, g, path, "qwen3.context_length", 1, 0, &hp->n_ctx_train) ||
        get_u32(ctx, g, path, "qwen3.embedding_length", 1, 0, &hp->n_embd) ||
        get_u32(ctx, g, path, "qwen3.feed_forward_length", 1, 0, &hp->n_ff) ||
        get_u32(ctx, g, path, "qwen3.attention.head_count", 1, 0, &hp->n_head))
        return -1;
    if (hp->n_layer < 1 || hp->n_embd < 1 || hp->n_ff < 1 || hp->n_head < 1 || hp->n_ctx_train < 1) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: qwen3 block_count, context_length, embedding_length, feed_forward_length "
                "and attention.head_count must be >= 1", path);
        return -1;
    }
    int64_t vdim;
    if (get_u32(ctx, g, path, "qwen3.attention.head_count_kv", 0, hp->n_head, &hp->n_head_kv) ||
        get_u32(ctx, g, path, "qwen3.attention.key_length", 0, hp->n_embd / hp->n_head, &hp->head_dim) ||
        get_u32(ctx, g, path, "qwen3.attention.value_length", 0, hp->n_embd / hp->n_head, &vdim))
        return -1;
    if (get_u32(ctx, g, path, "qwen3.rope.dimension_count", 0, hp->head_dim, &hp->n_rot) ||
        get_f32(ctx, g, path, "qwen3.rope.freq_base", 0, 10000.0, &hp->rope_theta) ||
        get_f32(ctx, g, path, "qwen3.attention.layer_norm_rms_epsilon", 1, 0, &hp->rms_eps))
        return -1;
    /* llama.cpp's qwen3 graph asserts these too. */
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv || hp->head_dim < 2 || vdim != hp->head_dim ||
        hp->n_rot != hp->head_dim || hp->head_dim % 2) {
        fc_fail(ctx, FC_ERR_FORMAT,
                "%s: qwen3 needs head_count a multiple of head_count_kv (%lld, %lld) and key_length = value_length "
                "= rope.dimension_count, even (%lld, %lld, %lld)",
                path, (long long)hp->n_head, (long long)hp->n_head_kv, (long long)hp->head_dim, (long long)vdim,
                (long long)hp->n_rot);
        return -1;
    }
    return 0;
}

fc_llm_model *fc_llm_model_load(fc_ctx *ctx, const char *path) { return fc_llm_model_load_ex(ctx, path, NULL); }

fc_llm_model *fc_llm_model_load_ex(fc_ctx *ctx, const char *path, const fc_llm_load_options *opt) {
    if (!ctx) return NULL;
    if (!path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_model_load: NULL path");
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    if (!g) return NULL;
    fc_llm_model *m = calloc(1, sizeof *m);
    if (!m) {
        fc_gguf_close(g);
        return fc_fail(ctx, FC_ERR_OOM, "fc_llm_model_load: out of memory");
    }
    fc_llm_hparams *hp = &m->hp;
    if (load_hparams(ctx, g, path, hp)) goto fail;
    int64_t ti = fc_gguf_find_tensor(g, "token_embd.weight");
    fc_gguf_tensor_info info;
    if (ti < 0 || !fc_gguf_tensor_info_at(g, ti, &info) || info.n_dims != 2) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: missing or non-matrix tensor token_embd.weight", path);
        goto fail;
    }
    hp->n_vocab = info.ne[1];
    m->tok = fc_tokenizer_from_gguf(ctx, g);
    if (!m->tok) goto fail;
    if (fc_tokenizer_n_vocab(m->tok) != hp->n_vocab) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: the vocabulary has %d tokens but token_embd.weight has %lld rows", path,
                (int)fc_tokenizer_n_vocab(m->tok), (long long)hp->n_vocab);
        goto fail;
    }
    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim, D = hp->head_dim;
    if (!(m->tok_embd = bind(ctx, g, path, "token_embd.weight", 0, 2, "vocab", hp->n_vocab, "embd", E))) goto fail;
    if (!(m->output_norm = bind(ctx, g, path, "output_norm.weight", 0, 1, "embd", E, NULL, 0))) goto fail;
    m->output = bind(ctx, g, path, "output.weight", 1, 2, "vocab", hp->n_vocab, "embd", E);
    if (!m->output) {
        if (fc_ctx_status(ctx) != FC_OK) goto fail;
        hp->tied_output = 1;
        m->output = fc_retain(m->tok_embd);
    }
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_model_load: out of memory");
        goto fail;
    }
    for (int64_t l = 0; l < hp->n_layer; l++) {
        fc_llm_layer *L = &m->layers[l];
        char n[64];
#define B(field, suffix, rank, a0, s0, a1, s1)                                                                     \
    do {                                                                                                           \
        snprintf(n, sizeof n, "blk.%d." suffix, (int)l);                                                           \
        if (!(L->field = bind(ctx, g, path, n, 0, rank, a0, s0, a1, s1))) goto fail;                               \
    } while (0)
        B(attn_norm, "attn_norm.weight", 1, "embd", E, NULL, 0);
        B(wq, "attn_q.weight", 2, "q", Q, "embd", E);
        B(wk, "attn_k.weight", 2, "kv", KV, "embd", E);
        B(wv, "attn_v.weight", 2, "kv", KV, "embd", E);
        B(wo, "attn_output.weight", 2, "embd", E, "q", Q);
        B(q_norm, "attn_q_norm.weight", 1, "d", D, NULL, 0);
        B(k_norm, "attn_k_norm.weight", 1, "d", D, NULL, 0);
        B(ffn_norm, "ffn_norm.weight", 1, "embd", E, NULL, 0);
        B(gate, "ffn_gate.weight", 2, "ff", hp->n_ff, "embd", E);
        B(up, "ffn_up.weight", 2, "ff", hp->n_ff, "embd", E);
        B(down, "ffn_down.weight", 2, "embd", E, "ff", hp->n_ff);
#undef B
        if (opt && opt->progress) opt->progress((double)(l + 1) / (double)hp->n_layer, opt->progress_user);
    }
    fc_gguf_close(g);
    return m;
fail:
    fc_gguf_close(g);
    fc_llm_model_free(m);
    return NULL;
}
