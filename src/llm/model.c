/* SPDX-License-Identifier: MIT */
/* Fucina llm: loading a model from a GGUF by walking its family's entry
 * of the architecture table (src/llm/arch.c).
 *
 * Keys and defaults follow llama.cpp's hparams loaders: head_count_kv
 * defaults to head_count, key/value_length to n_embd / n_head, rope
 * dimension_count to the head size, rope.freq_base to 10000;
 * layer_norm_rms_epsilon is required; it and the RoPE bases must be finite
 * and > 0, vectors (norm weights, biases, rope_freqs) f32, and no blk.N may
 * lie past block_count. Tensor shapes are checked against the
 * entry (GGUF dims reversed: [out, in]) so a mismatched file fails at load
 * with the tensor's name, never inside the forward; a tensor the family
 * does not know is an error too (a file of another variant must not load
 * as if it were this one, silently computing something else).
 *
 * Mixtures (qwen3moe always, llama when expert_count is set) read
 * expert_count, expert_used_count (>= 1, used <= count, as llama.cpp
 * asserts) and expert_feed_forward_length (default feed_forward_length /
 * expert_used_count for qwen3moe, feed_forward_length for llama); their FFN
 * tensors are the router ffn_gate_inp and the 3-D ffn_{gate,up,down}_exps. */
#define _POSIX_C_SOURCE 200809L /* sysconf, stat */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/gguf.h"
#include "llm/arch.h"
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
    if (rank == 1 && fc_tensor_dtype(t) != FC_F32) { /* the forward reads vectors as floats */
        char d[128];
        fc_tensor_describe(t, d, sizeof d);
        fc_release(t);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: tensor %s is %s; a norm weight, bias or rope_freqs vector must be f32", path,
                name, d);
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

static fc_tensor **slot(void *base, size_t off) { return (fc_tensor **)((char *)base + off); }
static fc_tensor ***views_slot(void *base, size_t off) { return (fc_tensor ***)((char *)base + off); }

void fc_llm_model_free(fc_llm_model *m) {
    if (!m) return;
    const fc_llm_arch_desc *d = m->desc;
    if (m->layers && d) {
        for (int64_t l = 0; l < m->hp.n_layer; l++) {
            fc_llm_layer *L = &m->layers[l];
            for (int i = 0; i < d->n_layer; i++) {
                const fc_llm_tensor_spec *t = &d->layer[i];
                if (t->rank == 3) release_views(*views_slot(L, t->views), m->hp.n_expert);
                fc_release(*slot(L, t->field));
            }
        }
    }
    free(m->layers);
    if (d)
        for (int i = 0; i < d->n_globals; i++) fc_release(*slot(m, d->globals[i].field));
    fc_tokenizer_free(m->tok);
    fc_llm_lora_set_free(m->lora);
    free(m);
}

const fc_llm_hparams *fc_llm_model_hparams(const fc_llm_model *m) { return m ? &m->hp : NULL; }
const fc_tokenizer *fc_llm_model_tokenizer(const fc_llm_model *m) { return m ? m->tok : NULL; }

/* The largest expert count accepted (llama.cpp's LLAMA_MAX_EXPERTS). */
#define MAX_EXPERTS 512

/* Read one key into its field (int64_t for u32 keys, double for f32). */
static int read_key(fc_ctx *ctx, fc_gguf *g, const char *path, const char *prefix, const fc_llm_key_spec *k,
                    fc_llm_hparams *hp) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", prefix, k->suffix);
    void *f = (char *)hp + k->field;
    switch (k->type) {
    case FC_KEY_U32: return get_u32(ctx, g, path, key, k->need == FC_REQUIRED, (int64_t)k->dflt, (int64_t *)f);
    case FC_KEY_F32: return get_f32(ctx, g, path, key, k->need == FC_REQUIRED, k->dflt, (double *)f);
    }
    return -1;
}

static int bad_hp(fc_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad_hp(fc_ctx *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fc_failv(ctx, FC_ERR_FORMAT, fmt, ap);
    va_end(ap);
    return -1;
}

/* An f32 hyperparameter the forward divides by or takes powers of (an RMS
 * epsilon, a RoPE base): NaN, infinities, zero and negatives are refused. */
static int check_positive(fc_ctx *ctx, const char *path, const char *a, const char *suffix, double v) {
    if (v > 0 && isfinite(v)) return 0;
    return bad_hp(ctx, "%s: %s.%s is %g; it must be finite and > 0", path, a, suffix, v);
}

/* The rope scaling keys: none, linear or YaRN (freq_scale = 1 / factor;
 * YaRN also mixes in extrapolation with ext_factor 1 between the
 * beta_fast / beta_slow correction dims of original_context_length, as
 * llama.cpp's context sets it when the type is yarn). */
static int rope_scaling(fc_ctx *ctx, fc_gguf *g, const char *path, const char *a, fc_llm_hparams *hp) {
    char key[128];
    const char *type = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (fc_gguf_find_kv(g, key) >= 0 && fc_gguf_get_str(g, key, &type, NULL) != FC_OK) {
        fc_ctx_clear_error(ctx);
        return bad_hp(ctx, "%s: metadata key %s is not a string", path, key);
    }
    double factor = 0;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", a);
    if (get_f32(ctx, g, path, key, 0, 0.0, &factor)) return -1;
    snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", a);
    if (get_f32(ctx, g, path, key, 0, 1.0, &hp->rope_attn_factor)) return -1;
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", a);
    if (get_u32(ctx, g, path, key, 0, hp->n_ctx_train, &hp->n_ctx_orig)) return -1;
    snprintf(key, sizeof key, "%s.rope.scaling.yarn_beta_fast", a);
    if (get_f32(ctx, g, path, key, 0, 32.0, &hp->yarn_beta_fast)) return -1;
    snprintf(key, sizeof key, "%s.rope.scaling.yarn_beta_slow", a);
    if (get_f32(ctx, g, path, key, 0, 1.0, &hp->yarn_beta_slow)) return -1;
    if (factor < 0 || !isfinite(factor))
        return bad_hp(ctx, "%s: %s.rope.scaling.factor is %g (must be >= 0)", path, a, factor);
    if (!(hp->rope_attn_factor > 0) || hp->n_ctx_orig < 1)
        return bad_hp(ctx, "%s: %s.rope.scaling.attn_factor (%g) and original_context_length (%lld) must be > 0", path,
                      a, hp->rope_attn_factor, (long long)hp->n_ctx_orig);
    hp->rope_freq_scale = 1.0;
    hp->rope_ext_factor = 0.0;
    if (type && !strcmp(type, "none")) return 0;
    const int yarn = type && !strcmp(type, "yarn");
    if (!type || !strcmp(type, "linear") || yarn) { /* linear is llama.cpp's default type; factor 0 means none */
        hp->rope_freq_scale = factor == 0 ? 1.0 : 1.0f / (float)factor;
        hp->rope_ext_factor = yarn ? 1.0 : 0.0;
        return 0;
    }
    fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: %s.rope.scaling.type '%s' is not supported (supported: none, linear, yarn)",
            path, a, type);
    return -1;
}

/* The family's switches and the values derived from the read keys (the
 * attention scale, the sliding layers' base and scale); shared with the
 * training model (src/llm/lm_model.c), which sets the keys itself. */
void fc_llm_hparams_switches(fc_llm_hparams *hp, const fc_llm_arch_desc *d) {
    hp->rope_neox = d->rope_neox;
    hp->qk_norm = d->qk_norm;
    hp->attn_bias = d->attn_bias;
    hp->post_norms = d->post_norms;
    hp->ffn_gelu = d->ffn_gelu;
    hp->embd_scale = d->embd_scale ? sqrt((double)(float)hp->n_embd) : 1.0;
    if (hp->n_swa == 0) hp->swa_pattern = 0;
    if (!(hp->rope_theta_swa > 0)) hp->rope_theta_swa = hp->rope_theta; /* DERIVED, or a family without one */
    hp->rope_freq_scale_swa = d->swa_unscaled ? 1.0 : hp->rope_freq_scale;
    hp->attn_prescale = d->scale_rule != FC_SCALE_HEAD_DIM;
    switch (d->scale_rule) {
    case FC_SCALE_HEAD_DIM:
        hp->attn_scale = 1.0 / sqrt((double)hp->head_dim);
        break;
    case FC_SCALE_Q_HEAD_DIM: /* ggml_scale(Q, 1.0f / sqrtf(head_dim)): float arithmetic */
        hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
        break;
    case FC_SCALE_Q_GEMMA:
        hp->attn_scale = hp->n_layer == d->scale_embd_layers ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                                             : 1.0f / sqrtf((float)hp->head_dim);
        break;
    }
}

static int load_hparams(fc_ctx *ctx, fc_gguf *g, const char *path, fc_llm_hparams *hp,
                        const fc_llm_arch_desc **out) {
    const char *arch = NULL;
    if (fc_gguf_get_str(g, "general.architecture", &arch, NULL) != FC_OK) {
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_FORMAT, "%s: missing or non-string general.architecture", path);
        return -1;
    }
    const fc_llm_arch_desc *d = fc_llm_arch_find(arch);
    if (!d) {
        fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: %s)", path, arch,
                fc_llm_arch_names());
        return -1;
    }
    *out = d;
    hp->arch = d->arch;
    const char *a = d->name;
    int nk;
    const fc_llm_key_spec *common = fc_llm_common_keys(&nk);
    for (int i = 0; i < nk; i++)
        if (read_key(ctx, g, path, a, &common[i], hp)) return -1;
    for (int i = 0; i < d->n_keys; i++)
        if (read_key(ctx, g, path, a, &d->keys[i], hp)) return -1;
    int moe = 0;
    switch (d->ffn) {
    case FC_FFN_DENSE: hp->n_expert = hp->n_expert_used = 0; break;
    case FC_FFN_MOE: moe = 1; break;
    case FC_FFN_DENSE_OR_MOE: moe = hp->n_expert > 0; break;
    }
    if (hp->n_layer < 1 || hp->n_embd < 1 || (!moe && hp->n_ff < 1) || hp->n_head < 1 || hp->n_ctx_train < 1)
        return bad_hp(ctx, "%s: %s block_count, context_length, embedding_length, feed_forward_length "
                      "and attention.head_count must be >= 1", path, a);
    /* derived defaults (DERIVED in the table) */
    if (hp->n_head_kv < 0) hp->n_head_kv = hp->n_head;
    if (hp->head_dim < 0) hp->head_dim = hp->n_embd / hp->n_head;
    int64_t vdim;
    char vkey[128];
    snprintf(vkey, sizeof vkey, "%s.attention.value_length", a);
    if (get_u32(ctx, g, path, vkey, 0, hp->head_dim, &vdim)) return -1;
    if (hp->n_rot < 0) hp->n_rot = hp->head_dim;
    /* the forward's attention and RoPE assume these (llama.cpp's graphs assert them too) */
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv || hp->head_dim < 2 || vdim != hp->head_dim ||
        hp->n_rot != hp->head_dim || hp->head_dim % 2)
        return bad_hp(ctx,
                      "%s: %s needs head_count a multiple of head_count_kv (%lld, %lld) and key_length = value_length "
                      "= rope.dimension_count, even (%lld, %lld, %lld)",
                      path, a, (long long)hp->n_head, (long long)hp->n_head_kv, (long long)hp->head_dim,
                      (long long)vdim, (long long)hp->n_rot);
    if (d->q_is_embd && hp->n_head * hp->head_dim != hp->n_embd)
        return bad_hp(ctx, "%s: %s needs head_count x key_length = embedding_length (%lld x %lld != %lld)", path, a,
                      (long long)hp->n_head, (long long)hp->head_dim, (long long)hp->n_embd);
    if (check_positive(ctx, path, a, "attention.layer_norm_rms_epsilon", hp->rms_eps) ||
        check_positive(ctx, path, a, "rope.freq_base", hp->rope_theta))
        return -1;
    /* the sliding layers' own base, when the family reads one and the file has it */
    for (int i = 0; i < d->n_keys; i++)
        if (d->keys[i].field == offsetof(fc_llm_hparams, rope_theta_swa)) {
            char key[128];
            snprintf(key, sizeof key, "%s.%s", a, d->keys[i].suffix);
            if (fc_gguf_find_kv(g, key) >= 0 && check_positive(ctx, path, a, d->keys[i].suffix, hp->rope_theta_swa))
                return -1;
        }
    if (rope_scaling(ctx, g, path, a, hp)) return -1;
    if (hp->n_swa < 0 || hp->n_swa > INT32_MAX) return bad_hp(ctx, "%s: %s.attention.sliding_window out of range", path, a);
    if (hp->swa_pattern < 0 || hp->swa_pattern > INT32_MAX)
        return bad_hp(ctx, "%s: %s.attention.sliding_window_pattern out of range", path, a);
    fc_llm_hparams_switches(hp, d);
    if (hp->attn_softcap < 0 || hp->final_softcap < 0)
        return bad_hp(ctx, "%s: %s softcapping values must be >= 0", path, a);
    if (!moe) return 0;
    char k1[128], k2[128], k3[128];
    snprintf(k1, sizeof k1, "%s.expert_count", a);
    snprintf(k2, sizeof k2, "%s.expert_used_count", a);
    snprintf(k3, sizeof k3, "%s.expert_feed_forward_length", a);
    if (hp->n_expert < 1 || hp->n_expert > MAX_EXPERTS)
        return bad_hp(ctx, "%s: %s is %lld; it must be in 1..%d", path, k1, (long long)hp->n_expert, MAX_EXPERTS);
    if (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert)
        return bad_hp(ctx, "%s: %s is %lld; it must be in 1..%s (%lld)", path, k2, (long long)hp->n_expert_used, k1,
                      (long long)hp->n_expert);
    if (hp->n_ff_exp < 0) hp->n_ff_exp = d->ffn == FC_FFN_MOE ? hp->n_ff / hp->n_expert_used : hp->n_ff;
    if (hp->n_ff_exp < 1)
        return bad_hp(ctx, "%s: %s (or feed_forward_length / expert_used_count) must be >= 1", path, k3);
    return 0;
}

/* Bind one tensor of the entry into its slot (layer l, or -1 for a global). */
static int bind_spec(fc_ctx *ctx, fc_gguf *g, const char *path, const fc_llm_tensor_spec *t, int64_t l, void *base,
                     const fc_llm_hparams *hp) {
    if (!fc_llm_tensor_applies(t, hp)) return 0;
    char n[96];
    if (l >= 0) snprintf(n, sizeof n, "blk.%d.%s", (int)l, t->name);
    else snprintf(n, sizeof n, "%s", t->name);
    const int64_t s0 = fc_llm_dim_size(t->dims[0], hp), s1 = fc_llm_dim_size(t->dims[1], hp);
    const char *a0 = fc_llm_dim_axis(t->dims[0]), *a1 = fc_llm_dim_axis(t->dims[1]);
    if (t->rank == 3) {
        const int64_t s2 = fc_llm_dim_size(t->dims[2], hp);
        fc_tensor *x = bind_experts(ctx, g, path, n, hp->n_expert, a1, s1, fc_llm_dim_axis(t->dims[2]), s2,
                                    views_slot(base, t->views));
        *slot(base, t->field) = x;
        return x ? 0 : -1;
    }
    fc_tensor *x = bind(ctx, g, path, n, t->need == FC_OPTIONAL, t->rank, a0, s0, a1, s1);
    *slot(base, t->field) = x;
    return x || fc_ctx_status(ctx) == FC_OK ? 0 : -1;
}

/* Every tensor of the file must be one the entry binds: an unknown name is
 * a variant we would compute wrongly. */
static int check_known(fc_ctx *ctx, fc_gguf *g, const char *path, const fc_llm_arch_desc *d, const fc_llm_hparams *hp) {
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        const char *name = ti.name;
        long l;
        const int known = fc_llm_spec_of(d, hp, name, &l) != NULL;
        if (l >= hp->n_layer) {
            fc_fail(ctx, FC_ERR_FORMAT, "%s: tensor %s is in layer %ld, but %s.block_count is %lld", path, name, l,
                    d->name, (long long)hp->n_layer);
            return -1;
        }
        if (!known) {
            fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: tensor %s is not part of a %s model as Fucina knows it", path, name,
                    d->name);
            return -1;
        }
    }
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
    if (load_hparams(ctx, g, path, hp, &m->desc)) goto fail;
    const fc_llm_arch_desc *d = m->desc;
    {   /* embeddings' default pooling (llama.cpp reads it for every family; absent: none) */
        char pkey[128];
        snprintf(pkey, sizeof pkey, "%s.pooling_type", d->name);
        if (get_u32(ctx, g, path, pkey, 0, -1, &m->pooling_type)) goto fail;
    }
    int64_t ti = fc_gguf_find_tensor(g, "token_embd.weight");
    fc_gguf_tensor_info info;
    if (ti < 0 || !fc_gguf_tensor_info_at(g, ti, &info) || info.n_dims != 2) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: missing or non-matrix tensor token_embd.weight", path);
        goto fail;
    }
    hp->n_vocab = info.ne[1];
    if (check_known(ctx, g, path, d, hp)) goto fail;
    m->tok = fc_tokenizer_from_gguf(ctx, g);
    if (!m->tok) goto fail;
    if (fc_tokenizer_n_vocab(m->tok) != hp->n_vocab) {
        fc_fail(ctx, FC_ERR_FORMAT, "%s: the vocabulary has %d tokens but token_embd.weight has %lld rows", path,
                (int)fc_tokenizer_n_vocab(m->tok), (long long)hp->n_vocab);
        goto fail;
    }
    for (int i = 0; i < d->n_globals; i++)
        if (bind_spec(ctx, g, path, &d->globals[i], -1, m, hp)) goto fail;
    if (!m->output) {
        hp->tied_output = 1;
        m->output = fc_retain(m->tok_embd);
    }
    hp->has_rope_freqs = m->rope_freqs != NULL;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_model_load: out of memory");
        goto fail;
    }
    for (int64_t l = 0; l < hp->n_layer; l++) {
        fc_llm_layer *L = &m->layers[l];
        for (int i = 0; i < d->n_layer; i++)
            if (bind_spec(ctx, g, path, &d->layer[i], l, L, hp)) goto fail;
        if (d->fused_qkv && !L->wqkv && !(L->wq && L->wk && L->wv)) {
            fc_fail(ctx, FC_ERR_FORMAT, "%s: layer %lld has neither attn_qkv.weight nor attn_q/k/v.weight", path,
                    (long long)l);
            goto fail;
        }
        /* llama.cpp's set_swa_pattern(n): layer l slides when l % n < n - 1 */
        L->swa = hp->swa_pattern > 0 && l % hp->swa_pattern < hp->swa_pattern - 1;
        if (opt && opt->progress) opt->progress((double)(l + 1) / (double)hp->n_layer, opt->progress_user);
    }
    fc_gguf_close(g);
    return m;
fail:
    fc_gguf_close(g);
    fc_llm_model_free(m);
    return NULL;
}
