/* Fucina llm: the architecture descriptor and weight binding from a GGUF.
 *
 * Keys and defaults follow llama.cpp's llama_model::load_hparams: head_count_kv
 * defaults to head_count, key/value_length to n_embd / n_head, rope
 * dimension_count to the head size, rope.freq_base to 10000; qwen3 requires
 * layer_norm_rms_epsilon. Tensor shapes are checked against the descriptor
 * (GGUF dims reversed: [out, in]) so a mismatched file fails at load with
 * the tensor's name, never inside the forward.
 *
 * qwen3moe (llama.cpp's llama_model_qwen3moe) has qwen3's attention and
 * keys plus expert_count, expert_used_count (both required here and >= 1,
 * used <= count, as llama.cpp asserts) and expert_feed_forward_length
 * (default feed_forward_length / expert_used_count); its FFN tensors are the
 * router ffn_gate_inp and the 3-D ffn_{gate,up,down}_exps. */
#define _POSIX_C_SOURCE 200809L /* sysconf, stat */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
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

/* A 3-D tensor `name` [n_expert, rows, cols] (GGUF dims reversed), plus one
 * zero-copy 2-D view [rows, cols] per expert over its bytes (the 3-D tensor
 * keeps the mapping alive; the views are released first). */
static fc_tensor *bind_experts(fc_ctx *ctx, fc_gguf *g, const char *path, const char *name, int64_t nx,
                               const char *n1, int64_t rows, const char *n2, int64_t cols, fc_tensor ***views) {
    if (fc_gguf_find_tensor(g, name) < 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: missing tensor %s", path, name);
        return NULL;
    }
    fc_tensor *t = fc_gguf_tensor(g, name);
    if (!t) return NULL;
    if (fc_tensor_rank(t) != 3 || fc_tensor_dim(t, 0) != nx || fc_tensor_dim(t, 1) != rows ||
        fc_tensor_dim(t, 2) != cols) {
        char d[128];
        fc_tensor_describe(t, d, sizeof d);
        fc_release(t);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: tensor %s is %s, expected [%lld, %lld, %lld] (expert, %s, %s; GGUF dims "
                "reversed)", path, name, d, (long long)nx, (long long)rows, (long long)cols, n1, n2);
        return NULL;
    }
    const fc_dtype dt = fc_tensor_dtype(t);
    const size_t bytes = fc_dtype_row_bytes(dt, cols) * (size_t)rows;
    *views = calloc((size_t)nx, sizeof **views);
    if (!*views) {
        fc_release(t);
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_model_load: out of memory");
        return NULL;
    }
    unsigned char *base = fc_tensor_data(t);
    for (int64_t e = 0; e < nx; e++) {
        (*views)[e] = fc_wrap(ctx, dt, FC_SHAPE({n1, rows}, {n2, cols}), base + (size_t)e * bytes, bytes, NULL, NULL);
        if (!(*views)[e]) {
            fc_release(t); /* the caller frees the views made so far (it owns *views now) */
            return NULL;
        }
    }
    return t;
}

static void release_views(fc_tensor **v, int64_t n) {
    if (!v) return;
    for (int64_t i = 0; i < n; i++) fc_release(v[i]);
    free(v);
}

void fc_llm_model_free(fc_llm_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int64_t l = 0; l < m->hp.n_layer; l++) {
            fc_llm_layer *L = &m->layers[l];
            release_views(L->gate_e, m->hp.n_expert);
            release_views(L->up_e, m->hp.n_expert);
            release_views(L->down_e, m->hp.n_expert);
            fc_tensor *ts[] = {L->attn_norm, L->wq,   L->wk,       L->wv,        L->wo,      L->q_norm,
                               L->k_norm,    L->ffn_norm, L->gate, L->up,        L->down,    L->gate_inp,
                               L->gate_exps, L->up_exps,  L->down_exps};
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

/* The largest expert count accepted (llama.cpp's LLAMA_MAX_EXPERTS). */
#define MAX_EXPERTS 512

static int load_hparams(fc_ctx *ctx, fc_gguf *g, const char *path, fc_llm_hparams *hp) {
    const char *arch = NULL;
    if (fc_gguf_get_str(g, "general.architecture", &arch, NULL) != FC_OK) {
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: missing or non-string general.architecture", path);
        return -1;
    }
    if (!strcmp(arch, "qwen3")) {
        hp->arch = FC_LLM_ARCH_QWEN3;
    } else if (!strcmp(arch, "qwen3moe")) {
        hp->arch = FC_LLM_ARCH_QWEN3MOE;
    } else {
        fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: qwen3, qwen3moe)", path,
                arch);
        return -1;
    }
    const int moe = hp->arch == FC_LLM_ARCH_QWEN3MOE;
    const char *a = moe ? "qwen3moe" : "qwen3";
    char k1[96], k2[96], k3[96], k4[96], k5[96];
#define KEY(buf, s) (snprintf(buf, sizeof buf, "%s." s, a), buf)
    if (get_u32(ctx, g, path, KEY(k1, "block_count"), 1, 0, &hp->n_layer) ||
        get_u32(ctx, g, path, KEY(k2, "context_length"), 1, 0, &hp->n_ctx_train) ||
        get_u32(ctx, g, path, KEY(k3, "embedding_length"), 1, 0, &hp->n_embd) ||
        /* a MoE model's FFN width is the experts' (llama.cpp reads it optionally) */
        get_u32(ctx, g, path, KEY(k4, "feed_forward_length"), !moe, 0, &hp->n_ff) ||
        get_u32(ctx, g, path, KEY(k5, "attention.head_count"), 1, 0, &hp->n_head))
        return -1;
    if (hp->n_layer < 1 || hp->n_embd < 1 || (!moe && hp->n_ff < 1) || hp->n_head < 1 || hp->n_ctx_train < 1) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: %s block_count, context_length, embedding_length, feed_forward_length "
                "and attention.head_count must be >= 1", path, a);
        return -1;
    }
    int64_t vdim;
    if (get_u32(ctx, g, path, KEY(k1, "attention.head_count_kv"), 0, hp->n_head, &hp->n_head_kv) ||
        get_u32(ctx, g, path, KEY(k2, "attention.key_length"), 0, hp->n_embd / hp->n_head, &hp->head_dim) ||
        get_u32(ctx, g, path, KEY(k3, "attention.value_length"), 0, hp->n_embd / hp->n_head, &vdim))
        return -1;
    if (get_u32(ctx, g, path, KEY(k1, "rope.dimension_count"), 0, hp->head_dim, &hp->n_rot) ||
        get_f32(ctx, g, path, KEY(k2, "rope.freq_base"), 0, 10000.0, &hp->rope_theta) ||
        get_f32(ctx, g, path, KEY(k3, "attention.layer_norm_rms_epsilon"), 1, 0, &hp->rms_eps))
        return -1;
    /* llama.cpp's qwen3 graph asserts these too. */
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv || hp->head_dim < 2 || vdim != hp->head_dim ||
        hp->n_rot != hp->head_dim || hp->head_dim % 2) {
        fc_fail(ctx, FC_ERR_FORMAT,
                "%s: %s needs head_count a multiple of head_count_kv (%lld, %lld) and key_length = value_length "
                "= rope.dimension_count, even (%lld, %lld, %lld)",
                path, a, (long long)hp->n_head, (long long)hp->n_head_kv, (long long)hp->head_dim, (long long)vdim,
                (long long)hp->n_rot);
        return -1;
    }
    if (!moe) return 0;
    if (get_u32(ctx, g, path, KEY(k1, "expert_count"), 1, 0, &hp->n_expert) ||
        get_u32(ctx, g, path, KEY(k2, "expert_used_count"), 1, 0, &hp->n_expert_used))
        return -1;
    if (hp->n_expert < 1 || hp->n_expert > MAX_EXPERTS) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: %s is %lld; it must be in 1..%d", path, k1, (long long)hp->n_expert,
                MAX_EXPERTS);
        return -1;
    }
    if (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: %s is %lld; it must be in 1..%s (%lld)", path, k2,
                (long long)hp->n_expert_used, k1, (long long)hp->n_expert);
        return -1;
    }
    if (get_u32(ctx, g, path, KEY(k3, "expert_feed_forward_length"), 0, hp->n_ff / hp->n_expert_used, &hp->n_ff_exp))
        return -1;
    if (hp->n_ff_exp < 1) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: %s (or feed_forward_length / expert_used_count) must be >= 1", path, k3);
        return -1;
    }
#undef KEY
    return 0;
}

/* fc_llm_load_options.mmap: read the file unless asked to map it or it is
 * more than half the physical memory (reading a file that does not fit
 * would end in the kernel's OOM killer, not in an error), or always when
 * asked to (-1). */
static int read_whole(const char *path, const fc_llm_load_options *opt) {
    if (opt && opt->mmap < 0) return 1;
    if (opt && opt->mmap) return 0;
    struct stat st;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (stat(path, &st) != 0 || pages <= 0 || page <= 0) return 0;
    return (double)st.st_size <= 0.5 * (double)pages * (double)page;
}

fc_llm_model *fc_llm_model_load(fc_ctx *ctx, const char *path) { return fc_llm_model_load_ex(ctx, path, NULL); }

fc_llm_model *fc_llm_model_load_ex(fc_ctx *ctx, const char *path, const fc_llm_load_options *opt) {
    if (!ctx) return NULL;
    if (!path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_model_load: NULL path");
    fc_gguf *g = fc_gguf_open(ctx, path, read_whole(path, opt) ? FC_GGUF_READ : 0);
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
        switch (hp->arch) {
        case FC_LLM_ARCH_QWEN3:
            B(gate, "ffn_gate.weight", 2, "ff", hp->n_ff, "embd", E);
            B(up, "ffn_up.weight", 2, "ff", hp->n_ff, "embd", E);
            B(down, "ffn_down.weight", 2, "embd", E, "ff", hp->n_ff);
            break;
        case FC_LLM_ARCH_QWEN3MOE: {
            const int64_t NX = hp->n_expert, F = hp->n_ff_exp;
            B(gate_inp, "ffn_gate_inp.weight", 2, "expert", NX, "embd", E);
#define X(field, views, suffix, a1, s1, a2, s2)                                                                    \
    do {                                                                                                           \
        snprintf(n, sizeof n, "blk.%d." suffix, (int)l);                                                           \
        if (!(L->field = bind_experts(ctx, g, path, n, NX, a1, s1, a2, s2, &L->views))) goto fail;                 \
    } while (0)
            X(gate_exps, gate_e, "ffn_gate_exps.weight", "ff", F, "embd", E);
            X(up_exps, up_e, "ffn_up_exps.weight", "ff", F, "embd", E);
            X(down_exps, down_e, "ffn_down_exps.weight", "embd", E, "ff", F);
#undef X
            break;
        }
        }
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
