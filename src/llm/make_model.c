/* Fucina llm: a random-weight model written with llama.cpp's names.
 *
 * Tensor names and metadata keys are those llama.cpp's loader asks for
 * (src/llama-arch.cpp, src/models/qwen3.cpp; gguf-py constants.py): the file
 * loads in libllama as a real qwen3 model, which is what the parity test
 * relies on. Norm weights are f32 in every dtype, as convert_hf_to_gguf.py
 * writes them (1-D tensors are never quantized). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/gguf.h"
#include "fucina/llm.h"
#include "fucina/ops.h"
#include "fucina/qtensor.h"
#include "fucina/tensor.h"

typedef struct preset {
    const char *name;
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_ctx;
    double theta, eps;
} preset;

static const preset k_presets[] = {
    {"tiny", 64, 128, 2, 4, 2, 32, 256, 1000000.0, 1e-6},
};

/* ---- the vocabulary ---------------------------------------------------------- */

/* Words whose left-to-right merges make the BPE table: each word w adds the
 * merges (w[0..i), w[i]) for i = 1.., skipping pairs already present. The
 * result is a valid BPE (every merge's result is a token). */
static const char *const k_words[] = {
    " the", " and", " of", " to", " in", " is", " that", " for", " it", " with", " as", " on", " was",
    " he", " be", " at", " by", " this", " had", " not", " are", " but", " from", " or", " have",
    " an", " they", " which", " one", " you", " were", " her", " all", " she", " there", " would",
    " their", " we", " him", " been", " has", " when", " who", " will", " more", " no", " if", " out",
    "ing", "tion", "ed", "er", "es", "ly", "ent", "ation", "Hello", " hello", " world", " World",
    " model", " token", " fucina", " tensor", " Qwen", " llama", "The", " The", "  ", "   ", "\n\n",
    " 1", " 2", "12", "123", ", ", ". ", "!\n", "'s", "'t",
};

typedef struct vocab {
    char **tok;
    int32_t *type;
    int n, cap;
    char **merge;
    int n_merges, merge_cap;
} vocab;

/* GPT-2's byte images: printable bytes stand for themselves, the others map
 * to U+0100.. in byte order. */
static uint32_t byte_image(unsigned b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
    return 256 + n;
}

static size_t put_utf8(uint32_t c, char *o) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    o[0] = (char)(0xC0 | (c >> 6));
    o[1] = (char)(0x80 | (c & 0x3F));
    return 2; /* byte images are < U+0800 */
}

static int vocab_find(const vocab *v, const char *s) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->tok[i], s)) return i;
    return -1;
}

static int vocab_add(vocab *v, const char *s, int32_t type) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 512;
        char **t = realloc(v->tok, (size_t)cap * sizeof *t);
        if (!t) return -1;
        v->tok = t;
        int32_t *ty = realloc(v->type, (size_t)cap * sizeof *ty);
        if (!ty) return -1;
        v->type = ty;
        v->cap = cap;
    }
    size_t len = strlen(s);
    v->tok[v->n] = malloc(len + 1);
    if (!v->tok[v->n]) return -1;
    memcpy(v->tok[v->n], s, len + 1);
    v->type[v->n++] = type;
    return 0;
}

static int merge_add(vocab *v, const char *l, const char *r) {
    if (v->n_merges == v->merge_cap) {
        int cap = v->merge_cap ? v->merge_cap * 2 : 256;
        char **m = realloc(v->merge, (size_t)cap * sizeof *m);
        if (!m) return -1;
        v->merge = m;
        v->merge_cap = cap;
    }
    size_t ll = strlen(l), lr = strlen(r);
    char *m = malloc(ll + lr + 2);
    if (!m) return -1;
    memcpy(m, l, ll);
    m[ll] = ' ';
    memcpy(m + ll + 1, r, lr + 1);
    v->merge[v->n_merges++] = m;
    return 0;
}

static void vocab_free(vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->tok[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merge[i]);
    free(v->tok);
    free(v->type);
    free(v->merge);
}

static int build_vocab(vocab *v) {
    char s[8];
    for (unsigned b = 0; b < 256; b++) {
        s[put_utf8(byte_image(b), s)] = 0;
        if (vocab_add(v, s, FC_TOKEN_TYPE_NORMAL)) return -1;
    }
    for (size_t w = 0; w < sizeof k_words / sizeof k_words[0]; w++) {
        const unsigned char *word = (const unsigned char *)k_words[w];
        char cur[256], next[8];
        cur[put_utf8(byte_image(word[0]), cur)] = 0;
        for (size_t i = 1; word[i]; i++) {
            next[put_utf8(byte_image(word[i]), next)] = 0;
            char joined[256];
            snprintf(joined, sizeof joined, "%s%s", cur, next);
            if (vocab_find(v, joined) < 0) {
                if (merge_add(v, cur, next) || vocab_add(v, joined, FC_TOKEN_TYPE_NORMAL)) return -1;
            }
            snprintf(cur, sizeof cur, "%s", joined);
        }
    }
    if (vocab_add(v, "<|endoftext|>", FC_TOKEN_TYPE_CONTROL) || vocab_add(v, "<|im_start|>", FC_TOKEN_TYPE_CONTROL) ||
        vocab_add(v, "<|im_end|>", FC_TOKEN_TYPE_CONTROL))
        return -1;
    return 0;
}

/* ---- weights ----------------------------------------------------------------- */

static double sqrt_int(int64_t n) { return sqrt((double)n); }

/* A [rows, cols] matrix N(0, std) encoded to dt and added as `name`. */
static fc_status add_matrix(fc_ctx *ctx, fc_gguf_writer *w, const char *name, int64_t rows, int64_t cols,
                            double std, fc_dtype dt, uint64_t seed) {
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"out", rows}, {"in", cols}), seed, 0.0, std);
    /* dt is F32, F16 or a block format (checked by the caller) */
    fc_tensor *y = dt == FC_F32 ? x : dt == FC_F16 ? fc_cast(ctx, x, FC_F16) : fc_quantize(ctx, x, dt);
    fc_status st = y ? fc_gguf_writer_add_tensor(w, name, y) : fc_ctx_status(ctx);
    fc_scope_end(ctx, sc);
    return st;
}

static fc_status add_norm(fc_ctx *ctx, fc_gguf_writer *w, const char *name, int64_t n, uint64_t seed) {
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"n", n}), seed, 1.0, 0.1);
    fc_status st = x ? fc_gguf_writer_add_tensor(w, name, x) : fc_ctx_status(ctx);
    fc_scope_end(ctx, sc);
    return st;
}

#define TRY(e)                                                                                                     \
    do {                                                                                                           \
        if ((st = (e)) != FC_OK) goto done;                                                                        \
    } while (0)

fc_status fc_llm_make_model(fc_ctx *ctx, const char *path, const fc_make_model_options *opt) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!path || !opt) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_make_model: NULL %s", path ? "options" : "path");
        return FC_ERR_INVALID_ARG;
    }
    const char *arch = opt->arch ? opt->arch : "qwen3";
    const char *pname = opt->preset ? opt->preset : "tiny";
    if (strcmp(arch, "qwen3")) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_make_model: unsupported architecture '%s' (supported: qwen3)", arch);
        return FC_ERR_INVALID_ARG;
    }
    const preset *p = NULL;
    for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++)
        if (!strcmp(k_presets[i].name, pname)) p = &k_presets[i];
    if (!p) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_make_model: unknown preset '%s' (supported: tiny)", pname);
        return FC_ERR_INVALID_ARG;
    }
    /* a zero field takes the default (the options convention of nn.h) */
    const fc_dtype dt = opt->dtype == (fc_dtype)0 ? FC_F32 : opt->dtype;
    if (dt != FC_F32 && dt != FC_F16 && dt != FC_Q8_0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_make_model: weight dtype %s unsupported (f32, f16, q8_0)",
                fc_dtype_name(dt));
        return FC_ERR_INVALID_ARG;
    }

    vocab v = {0};
    fc_status st = FC_OK;
    fc_gguf_writer *w = NULL;
    if (build_vocab(&v)) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_make_model: out of memory building the vocabulary");
        st = FC_ERR_OOM;
        goto done;
    }
    w = fc_gguf_writer_new(ctx);
    if (!w) {
        st = fc_ctx_status(ctx);
        goto done;
    }
    const int64_t n_vocab = v.n;
    const int32_t eot = (int32_t)vocab_find(&v, "<|endoftext|>"), im_end = (int32_t)vocab_find(&v, "<|im_end|>");
    TRY(fc_gguf_set_str(w, "general.architecture", "qwen3"));
    TRY(fc_gguf_set_str(w, "general.name", "fucina random qwen3"));
    TRY(fc_gguf_set_u32(w, "general.file_type",
                        dt == FC_F32 ? 0u : dt == FC_F16 ? 1u : 7u)); /* llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0 */
    TRY(fc_gguf_set_u32(w, "qwen3.block_count", (uint32_t)p->n_layer));
    TRY(fc_gguf_set_u32(w, "qwen3.context_length", (uint32_t)p->n_ctx));
    TRY(fc_gguf_set_u32(w, "qwen3.embedding_length", (uint32_t)p->n_embd));
    TRY(fc_gguf_set_u32(w, "qwen3.feed_forward_length", (uint32_t)p->n_ff));
    TRY(fc_gguf_set_u32(w, "qwen3.attention.head_count", (uint32_t)p->n_head));
    TRY(fc_gguf_set_u32(w, "qwen3.attention.head_count_kv", (uint32_t)p->n_head_kv));
    TRY(fc_gguf_set_u32(w, "qwen3.attention.key_length", (uint32_t)p->head_dim));
    TRY(fc_gguf_set_u32(w, "qwen3.attention.value_length", (uint32_t)p->head_dim));
    TRY(fc_gguf_set_f32(w, "qwen3.rope.freq_base", (float)p->theta));
    TRY(fc_gguf_set_f32(w, "qwen3.attention.layer_norm_rms_epsilon", (float)p->eps));
    TRY(fc_gguf_set_str(w, "tokenizer.ggml.model", "gpt2"));
    TRY(fc_gguf_set_str(w, "tokenizer.ggml.pre", "qwen2"));
    TRY(fc_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, NULL, (uint64_t)v.n));
    TRY(fc_gguf_set_arr(w, "tokenizer.ggml.token_type", FC_GGUF_I32, v.type, (uint64_t)v.n));
    TRY(fc_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merge, NULL, (uint64_t)v.n_merges));
    TRY(fc_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)im_end));
    TRY(fc_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)eot));
    TRY(fc_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)eot));
    TRY(fc_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 0));

    /* Every tensor's seed is derived from the model seed and its index, so a
     * tensor does not depend on the others' sizes. */
    uint64_t k = 0;
#define SEED() (opt->seed * 0x9E3779B97F4A7C15ull + (++k) * 0xD1B54A32D192ED03ull)
    const int64_t q_dim = p->n_head * p->head_dim, kv_dim = p->n_head_kv * p->head_dim;
    TRY(add_matrix(ctx, w, "token_embd.weight", n_vocab, p->n_embd, 1.0, dt, SEED()));
    TRY(add_norm(ctx, w, "output_norm.weight", p->n_embd, SEED()));
    const uint64_t out_seed = SEED(); /* drawn either way: tied and untied models share every other tensor */
    if (opt->untied)
        TRY(add_matrix(ctx, w, "output.weight", n_vocab, p->n_embd, 1.0 / sqrt_int(p->n_embd), dt, out_seed));
    for (int64_t l = 0; l < p->n_layer; l++) {
        char name[64];
        const double se = 1.0 / sqrt_int(p->n_embd);
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s, (int)l), name)
        TRY(add_norm(ctx, w, NAME("attn_norm.weight"), p->n_embd, SEED()));
        TRY(add_matrix(ctx, w, NAME("attn_q.weight"), q_dim, p->n_embd, se, dt, SEED()));
        TRY(add_matrix(ctx, w, NAME("attn_k.weight"), kv_dim, p->n_embd, se, dt, SEED()));
        TRY(add_matrix(ctx, w, NAME("attn_v.weight"), kv_dim, p->n_embd, se, dt, SEED()));
        TRY(add_matrix(ctx, w, NAME("attn_output.weight"), p->n_embd, q_dim, 1.0 / sqrt_int(q_dim), dt,
                       SEED()));
        TRY(add_norm(ctx, w, NAME("attn_q_norm.weight"), p->head_dim, SEED()));
        TRY(add_norm(ctx, w, NAME("attn_k_norm.weight"), p->head_dim, SEED()));
        TRY(add_norm(ctx, w, NAME("ffn_norm.weight"), p->n_embd, SEED()));
        TRY(add_matrix(ctx, w, NAME("ffn_gate.weight"), p->n_ff, p->n_embd, se, dt, SEED()));
        TRY(add_matrix(ctx, w, NAME("ffn_up.weight"), p->n_ff, p->n_embd, se, dt, SEED()));
        TRY(add_matrix(ctx, w, NAME("ffn_down.weight"), p->n_embd, p->n_ff, 1.0 / sqrt_int(p->n_ff), dt,
                       SEED()));
#undef NAME
    }
#undef SEED
    TRY(fc_gguf_writer_save(w, path));
done:
    fc_gguf_writer_free(w);
    vocab_free(&v);
    return st;
}
