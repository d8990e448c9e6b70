/* SPDX-License-Identifier: MIT */
/* Fucina llm: a random-weight model written with llama.cpp's names.
 *
 * Tensor names and metadata keys are those llama.cpp's loader asks for
 * (src/llama-arch.cpp, src/models/qwen3.cpp, qwen3moe.cpp; gguf-py
 * constants.py): the file loads in libllama as a real qwen3 / qwen3moe
 * model, which is what the parity tests rely on. Norm weights are f32 in
 * every dtype, as convert_hf_to_gguf.py writes them (1-D tensors are never
 * quantized); the router (ffn_gate_inp) is f32 too, as llama-quantize keeps
 * it.
 *
 * The file is streamed: every tensor is declared first (the header needs
 * the sizes), then generated, encoded and appended a slab of rows at a time,
 * so a 0.6B model never sits in memory. A llama-quantize mix (Q4_K_M, ...)
 * takes each tensor's type from the quantizer's policy (llama.cpp's
 * per-tensor rules, src/io/gguf_quantize_policy.c) and the tensor order
 * llama-quantize writes, so the file is the one fc_gguf_quantize would make
 * from the f32 model, without writing that model first. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/chat.h"
#include "fucina/gguf.h"
#include "fucina/llm.h"
#include "fucina/ops.h"
#include "fucina/qtensor.h"
#include "fucina/tensor.h"
#include "io/gguf_internal.h"
#include "io/gguf_quantize_policy.h"
#include "llm/arch.h"
#include "llm/make_model.h"

typedef struct preset {
    const char *name;
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_ctx;
    double eps;
    int64_t n_vocab;                            /* 0: the small vocabulary */
    int64_t n_expert, n_expert_used, n_ff_exp;  /* mixtures; 0: dense only */
} preset;

/* small: every matrix's input width is a multiple of 256, so K-quants apply
 * to every tensor (tiny's 64 makes llama.cpp-style fallbacks). The shapes
 * are any family's; what differs by family (RoPE base, window, softcaps)
 * is in k_family below. */
static const preset k_presets[] = {
    {"tiny", 64, 128, 2, 4, 2, 32, 256, 1e-6, 0, 8, 2, 32},
    {"small", 256, 768, 2, 4, 2, 64, 512, 1e-6, 0, 8, 2, 256},
    /* qwen3moe at this size: 16 experts, 4 used, 768 wide, so a token's active FFN
     * (4 x 768) matches the dense 3072 while the experts hold 1.06 G weights */
    {"0.6b", 1024, 3072, 28, 16, 8, 128, 40960, 1e-6, 151936, 16, 4, 768},
    /* Llama-3.2-1B's shapes (its 128256-token vocabulary size) */
    {"llama-1b", 2048, 8192, 16, 32, 8, 64, 131072, 1e-5, 128256, 0, 0, 0},
    /* Gemma-3-1B's shapes (its 262144-token vocabulary size) */
    {"gemma3-1b", 1152, 6912, 26, 4, 1, 256, 32768, 1e-6, 262144, 0, 0, 0},
};
#define N_PRESETS ((int)(sizeof k_presets / sizeof k_presets[0]))

/* What a family's files carry beyond the shapes (the values its real
 * models use): RoPE bases, the sliding window (small enough that a test
 * prompt crosses it), softcaps. */
/* The tokenizer a family's files carry, as its real models do. */
typedef enum vocab_layout {
    VOCAB_QWEN,   /* byte-level BPE, pre qwen2 (mm_vocab_build) */
    VOCAB_LLAMA3, /* byte-level BPE, pre llama-bpe (mm_vocab_build_llama3) */
    VOCAB_SPM,    /* SentencePiece (mm_spm_vocab_build): Llama 2, Mistral, Gemma, Phi-3 */
} vocab_layout;

typedef struct family_values {
    fc_llm_arch arch;
    double theta, theta_swa;
    int64_t n_swa, swa_pattern;
    double attn_softcap, final_softcap;
    vocab_layout vocab;
    fc_chat_template tmpl;
    const char *extra_control; /* a control token the family's vocabulary has beyond the layout's, or NULL */
} family_values;
static const family_values k_family[] = {
    {FC_LLM_ARCH_QWEN3, 1000000.0, 0, 0, 0, 0, 0, VOCAB_QWEN, FC_CHAT_TEMPLATE_QWEN3, NULL},
    {FC_LLM_ARCH_QWEN3MOE, 1000000.0, 0, 0, 0, 0, 0, VOCAB_QWEN, FC_CHAT_TEMPLATE_QWEN3, NULL},
    {FC_LLM_ARCH_LLAMA, 500000.0, 0, 0, 0, 0, 0, VOCAB_LLAMA3, FC_CHAT_TEMPLATE_LLAMA3, NULL},
    {FC_LLM_ARCH_QWEN2, 1000000.0, 0, 0, 0, 0, 0, VOCAB_QWEN, FC_CHAT_TEMPLATE_CHATML, NULL},
    {FC_LLM_ARCH_GEMMA3, 1000000.0, 10000.0, 8, 2, 0, 0, VOCAB_SPM, FC_CHAT_TEMPLATE_GEMMA, NULL},
    {FC_LLM_ARCH_GEMMA2, 10000.0, 0, 8, 2, 50.0, 30.0, VOCAB_SPM, FC_CHAT_TEMPLATE_GEMMA, NULL},
    /* Phi-3's vocabulary is Llama 2's plus <|endoftext|> (id 32000), which llama.cpp's
     * vocabulary loader looks up by name for phi3 (it refuses a file without it) */
    {FC_LLM_ARCH_PHI3, 10000.0, 0, 0, 0, 0, 0, VOCAB_SPM, FC_CHAT_TEMPLATE_PHI3, "<|endoftext|>"},
};

/* A template family whose models use SentencePiece (Mistral's, Llama 2's). */
static int spm_template(fc_chat_template t) {
    switch (t) {
    case FC_CHAT_TEMPLATE_MISTRAL_V1:
    case FC_CHAT_TEMPLATE_MISTRAL_V3:
    case FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN:
    case FC_CHAT_TEMPLATE_MISTRAL_V7:
    case FC_CHAT_TEMPLATE_LLAMA2:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP: return 1;
    case FC_CHAT_TEMPLATE_CHATML:
    case FC_CHAT_TEMPLATE_QWEN3:
    case FC_CHAT_TEMPLATE_LLAMA3:
    case FC_CHAT_TEMPLATE_GEMMA:
    case FC_CHAT_TEMPLATE_PHI3: return 0;
    }
    return 0;
}

static const family_values *family_of(fc_llm_arch arch) {
    for (size_t i = 0; i < sizeof k_family / sizeof k_family[0]; i++)
        if (k_family[i].arch == arch) return &k_family[i];
    return &k_family[0];
}

/* The family's vocabulary (Mixtral: Mistral's SentencePiece one), padded
 * with unused "[PADn]" tokens to n_vocab when that is larger (a benchmark
 * model of a real vocabulary's size; the Qwen layout lays out its own).
 * 0, or -1 (out of memory, or n_vocab too small for the Qwen layout). */
static int build_vocab(mm_vocab *v, const family_values *fv, int spm_llama, int64_t n_vocab) {
    const vocab_layout lay = spm_llama && fv->arch == FC_LLM_ARCH_LLAMA ? VOCAB_SPM : fv->vocab;
    switch (lay) {
    case VOCAB_QWEN: return mm_vocab_build(v, n_vocab);
    case VOCAB_LLAMA3:
        if (mm_vocab_build_llama3(v)) return -1;
        break;
    case VOCAB_SPM:
        if (mm_spm_vocab_build(v)) return -1;
        break;
    }
    if (fv->extra_control && mm_vocab_find(v, fv->extra_control) < 0 &&
        mm_vocab_add(v, fv->extra_control, FC_TOKEN_TYPE_CONTROL, 0.0f))
        return -1;
    char pad[32];
    for (int64_t i = 0; v->n < n_vocab; i++) {
        snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
        if (mm_vocab_add(v, pad, FC_TOKEN_TYPE_UNUSED, -1e9f)) return -1;
    }
    return 0;
}

/* ---- the tensor plan ----------------------------------------------------------- */

typedef struct tplan {
    char name[48];
    int n_dims;
    int64_t ne[3]; /* GGUF order: ne[0] is the row width */
    fc_dtype dt;
    double mean, std;
    uint64_t seed;
} tplan;

typedef struct plan {
    tplan *t;
    int n, cap;
} plan;

/* llama-quantize's fallback when a row is not a whole number of blocks
 * (llama_tensor_get_type: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, ...);
 * then F16 if even that does not fit. */
static fc_dtype row_type(fc_dtype dt, int64_t width)
{
    int g = fc_dtype_ggml_type(dt);
    uint32_t be = 1, bb = 0;
    if (g >= 0 && fc_ggml_type_block((uint32_t)g, &be, &bb) && width % be == 0) return dt;
    const fc_dtype fb = dt == FC_Q4_K ? FC_Q5_0 : dt == FC_Q5_K ? FC_Q5_1 : dt == FC_Q6_K ? FC_Q8_0 : FC_F16;
    g = fc_dtype_ggml_type(fb);
    if (g >= 0 && fc_ggml_type_block((uint32_t)g, &be, &bb) && width % be == 0) return fb;
    return FC_F16;
}

static int plan_add(plan *p, const char *name, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, fc_dtype dt,
                    double mean, double std, uint64_t seed)
{
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        tplan *t = realloc(p->t, (size_t)cap * sizeof *t);
        if (!t) return -1;
        p->t = t;
        p->cap = cap;
    }
    tplan *t = &p->t[p->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->dt = n_dims == 1 ? FC_F32 : row_type(dt, ne0);
    t->mean = mean;
    t->std = std;
    t->seed = seed;
    return 0;
}

/* Every tensor's seed is derived from the model seed and its index, so a
 * tensor does not depend on the others' sizes. */
static uint64_t seed_of(uint64_t model_seed, uint64_t k)
{
    return model_seed * 0x9E3779B97F4A7C15ull + k * 0xD1B54A32D192ED03ull;
}

/* GGUF sizes (ne[0] the row width) of a spec under hp. */
static void spec_ne(const fc_llm_tensor_spec *t, const fc_llm_hparams *hp, int64_t ne[3]) {
    for (int i = 0; i < 3; i++) ne[i] = 1;
    for (int i = 0; i < t->rank; i++) ne[t->rank - 1 - i] = fc_llm_dim_size(t->dims[i], hp);
}

/* Whether the writer emits an optional tensor: biases where the family has
 * them, a fused projection rather than its parts, rope_freqs on request;
 * output.weight is the untied flag's. */
static int writes_optional(const fc_llm_arch_desc *d, const fc_llm_tensor_spec *t, const fc_make_model_options *o) {
    if (!strcmp(t->name, "output.weight")) return o->untied;
    if (!strcmp(t->name, "rope_freqs.weight")) return o->rope_freqs;
    if (strstr(t->name, ".bias")) return d->attn_bias;
    if (!strcmp(t->name, "attn_qkv.weight")) return d->fused_qkv;
    return 0;
}

/* The tensors of the entry, in its order. Every tensor's seed is drawn in
 * turn (the untied output's even when tied: tied and untied models share
 * every other tensor). Norm weights 1 + N(0, 0.1), biases and the frequency
 * divisors as noted, matrices N(0, 1/sqrt(in)) so activations stay O(1). */
static int build_plan(plan *p, const fc_llm_arch_desc *d, const fc_llm_hparams *hp, fc_dtype dt,
                      const fc_make_model_options *o) {
    uint64_t k = 0;
    int bad = 0;
    for (int pass = 0; pass < 1 + (int)hp->n_layer && !bad; pass++) {
        const int global = pass == 0;
        const fc_llm_tensor_spec *ts = global ? d->globals : d->layer;
        const int nt = global ? d->n_globals : d->n_layer;
        for (int i = 0; i < nt && !bad; i++) {
            const fc_llm_tensor_spec *t = &ts[i];
            if (!fc_llm_tensor_applies(t, hp)) continue;
            const uint64_t seed = seed_of(o->seed, ++k);
            if (t->need == FC_OPTIONAL && !writes_optional(d, t, o)) continue;
            char nm[48];
            if (global) snprintf(nm, sizeof nm, "%s", t->name);
            else snprintf(nm, sizeof nm, "blk.%d.%s", pass - 1, t->name);
            int64_t ne[3];
            spec_ne(t, hp, ne);
            double mean = 0, std = 1.0 / sqrt((double)ne[0]);
            if (!strcmp(t->name, "token_embd.weight")) std = 1.0;
            else if (!strcmp(t->name, "rope_freqs.weight")) mean = 1.5, std = 0.25; /* divisors around Llama 3.1's */
            else if (strstr(t->name, ".bias")) std = 0.1;
            else if (t->rank == 1) mean = 1.0, std = 0.1; /* norms: not all ones, so a dropped weight shows */
            if (!strcmp(t->name, "ffn_gate_inp.weight")) bad |= plan_add(p, nm, 2, ne[0], ne[1], 1, FC_F32, 0, std, seed);
            else bad |= plan_add(p, nm, t->rank, ne[0], ne[1], ne[2], dt, mean, std, seed);
        }
    }
    return bad ? -1 : 0;
}

/* ---- streaming the data ------------------------------------------------------- */

static uint64_t row_bytes(fc_dtype dt, int64_t width)
{
    uint32_t be = 1, bb = 0;
    fc_ggml_type_block((uint32_t)fc_dtype_ggml_type(dt), &be, &bb);
    return (uint64_t)(width / be) * bb;
}

/* The caller's progress report: bytes of tensor data written of the total. */
typedef struct progress {
    const fc_make_model_options *opt;
    uint64_t done, total;
} progress;

static void progress_add(progress *pr, uint64_t n)
{
    pr->done += n;
    if (pr->opt->progress)
        pr->opt->progress(pr->total ? (double)pr->done / (double)pr->total : 1.0, pr->opt->progress_user);
}

/* One tensor, generated and encoded a slab of rows at a time. Slab c draws
 * from its own seed (slab 0 from the tensor's seed, so a small tensor is one
 * fc_rand_normal draw); rows stay whole so every slab encodes alone. */
static fc_status write_tensor(fc_ctx *ctx, fc_gguf_writer *w, const tplan *t, void **buf, size_t *buf_cap,
                              progress *pr)
{
    const int64_t width = t->ne[0], rows = t->ne[1] * t->ne[2];
    int64_t slab = (int64_t)(4 << 20) / width;
    if (slab < 1) slab = 1;
    fc_status st = FC_OK;
    for (int64_t r0 = 0, c = 0; r0 < rows && st == FC_OK; r0 += slab, c++) {
        const int64_t nr = rows - r0 < slab ? rows - r0 : slab;
        const uint64_t seed = c == 0 ? t->seed : seed_of(t->seed, (uint64_t)c);
        const size_t nbytes = (size_t)(row_bytes(t->dt, width) * (uint64_t)nr);
        if (nbytes > *buf_cap) {
            void *b = realloc(*buf, nbytes);
            if (!b) {
                fc_fail(ctx, FC_ERR_OOM, "fc_llm_make_model: out of memory for tensor %s", t->name);
                return FC_ERR_OOM;
            }
            *buf = b;
            *buf_cap = nbytes;
        }
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *x = t->n_dims == 1
                           ? fc_rand_normal(ctx, FC_F32, FC_SHAPE({"n", width}), seed, t->mean, t->std)
                           : fc_rand_normal(ctx, FC_F32, FC_SHAPE({"out", nr}, {"in", width}), seed, t->mean, t->std);
        fc_tensor *y = !x || t->dt == FC_F32                 ? x
                       : t->dt == FC_F16 || t->dt == FC_BF16 ? fc_cast(ctx, x, t->dt)
                                                             : fc_quantize(ctx, x, t->dt);
        st = y ? fc_tensor_read(ctx, y, *buf, nbytes) : fc_ctx_status(ctx);
        fc_scope_end(ctx, sc);
        if (st == FC_OK) st = fc_gguf_writer_write(w, *buf, nbytes);
        if (st == FC_OK) progress_add(pr, nbytes);
    }
    return st;
}

/* ---- the file ----------------------------------------------------------------- */

#define TRY(e)                                                                                                     \
    do {                                                                                                           \
        if ((st = (e)) != FC_OK) goto done;                                                                        \
    } while (0)

/* llama_ftype of a uniform dtype (general.file_type): MOSTLY_F16 1, Q4_0 2,
 * Q8_0 7, Q4_K_S 14 (every matrix Q4_K), Q5_K_S 16, Q6_K 18, BF16 32;
 * ALL_F32 0. */
static uint32_t file_type_of(fc_dtype dt)
{
    static const struct {
        fc_dtype dt;
        uint32_t ft;
    } k[] = {{FC_F16, 1}, {FC_Q4_0, 2}, {FC_Q8_0, 7}, {FC_Q4_K, 14}, {FC_Q5_K, 16}, {FC_Q6_K, 18}, {FC_BF16, 32}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].dt == dt) return k[i].ft;
    return 0;
}

/* The mix's type for every tensor of the (f32) plan, and llama.cpp's loader
 * order, which llama-quantize writes in (the policy's counters depend on
 * it). 0, or -1 with the error recorded. */
static int apply_mix(fc_ctx *ctx, plan *pl, const fc_llm_hparams *hp, const fc_quant_mix *mix)
{
    const size_t n = (size_t)pl->n;
    fc_quant_tensor *qt = calloc(n, sizeof *qt), *ordered = calloc(n, sizeof *ordered);
    size_t *perm = calloc(n, sizeof *perm);
    uint32_t *types = calloc(n, sizeof *types);
    int *fallback = calloc(n, sizeof *fallback);
    tplan *out = calloc(n, sizeof *out);
    int rc = -1;
    if (!qt || !ordered || !perm || !types || !fallback || !out) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_make_model: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const tplan *t = &pl->t[i];
        qt[i] = (fc_quant_tensor){.name = t->name, .type = (uint32_t)fc_dtype_ggml_type(FC_F32), .n_dims = t->n_dims,
                                  .ne = {t->ne[0], t->ne[1], t->ne[2], 1}};
    }
    if (!fc_quant_order(qt, n, perm)) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_make_model: out of memory");
        goto done;
    }
    for (size_t k = 0; k < n; k++) ordered[k] = qt[perm[k]];
    const fc_quant_model qm = {.n_layer = (int)hp->n_layer, .n_head = (int)hp->n_head,
                               .n_head_kv = (int)hp->n_head_kv, .n_expert = (int)hp->n_expert};
    const fc_quant_opts qo = {.pure = 0, .output_type = -1, .token_embd_type = -1};
    char why[256];
    if (!fc_quant_policy(mix, &qm, &qo, ordered, n, types, fallback, why, sizeof why)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_make_model: mix %s: %s", mix->name, why);
        goto done;
    }
    for (size_t k = 0; k < n; k++) {
        out[k] = pl->t[perm[k]]; /* its seed comes along: the weights do not depend on the order */
        if (!fc_dtype_from_ggml_type(types[k], &out[k].dt)) {
            fc_fail(ctx, FC_ERR_UNSUPPORTED, "fc_llm_make_model: mix %s gives tensor %s type %s, unknown here",
                    mix->name, out[k].name, fc_ggml_type_name(types[k]));
            goto done;
        }
    }
    memcpy(pl->t, out, n * sizeof *out);
    rc = 0;
done:
    free(qt), free(ordered), free(perm), free(types), free(fallback), free(out);
    return rc;
}

/* The entry's metadata keys with the model's values: required ones always,
 * optional ones when set (value_length beside key_length, as converters
 * write it; rope.dimension_count is left to its default). */
fc_status fc_llm_write_keys(fc_gguf_writer *w, const fc_llm_arch_desc *d, const fc_llm_hparams *hp) {
    fc_status st = FC_OK;
    char key[128];
    int nc;
    const fc_llm_key_spec *common = fc_llm_common_keys(&nc);
    for (int pass = 0; pass < 2 && st == FC_OK; pass++) {
        const fc_llm_key_spec *ks = pass ? d->keys : common;
        const int n = pass ? d->n_keys : nc;
        for (int i = 0; i < n && st == FC_OK; i++) {
            const fc_llm_key_spec *k = &ks[i];
            if (!strcmp(k->suffix, "rope.dimension_count")) continue;
            snprintf(key, sizeof key, "%s.%s", d->name, k->suffix);
            const void *f = (const char *)hp + k->field;
            switch (k->type) {
            case FC_KEY_U32: {
                const int64_t v = *(const int64_t *)f;
                if (k->need == FC_REQUIRED || v > 0) st = fc_gguf_set_u32(w, key, (uint32_t)v);
                break;
            }
            case FC_KEY_F32: {
                const double v = *(const double *)f;
                if (k->need == FC_REQUIRED || v > 0) st = fc_gguf_set_f32(w, key, (float)v);
                break;
            }
            }
            if (st == FC_OK && !strcmp(k->suffix, "attention.key_length")) {
                snprintf(key, sizeof key, "%s.attention.value_length", d->name);
                st = fc_gguf_set_u32(w, key, (uint32_t)hp->head_dim);
            }
        }
    }
    return st;
}

static fc_status write_file(fc_ctx *ctx, const char *path, const fc_llm_arch_desc *d, fc_llm_hparams *hp,
                            int64_t n_vocab, fc_dtype dt, const fc_make_model_options *opt, const fc_quant_mix *mix)
{
    mm_vocab v;
    plan pl = {0};
    fc_status st = FC_OK;
    fc_gguf_writer *w = NULL;
    void *buf = NULL;
    size_t buf_cap = 0;
    progress pr = {.opt = opt};
    const family_values *fv = family_of(d->arch);
    /* the template written: the family's own (Mixtral: Mistral's), or the one asked for */
    fc_chat_template tmpl = hp->n_expert > 0 && d->arch == FC_LLM_ARCH_LLAMA ? FC_CHAT_TEMPLATE_MISTRAL_V1 : fv->tmpl;
    if (opt->chat_template) fc_chat_template_from_name(ctx, opt->chat_template, &tmpl); /* checked before */
    if (build_vocab(&v, fv, hp->n_expert > 0 || spm_template(tmpl), n_vocab)) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_make_model: out of memory building the vocabulary");
        st = FC_ERR_OOM;
        goto done;
    }
    hp->n_vocab = v.n;
    if (build_plan(&pl, d, hp, mix ? FC_F32 : dt, opt)) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_make_model: out of memory");
        st = FC_ERR_OOM;
        goto done;
    }
    if (mix && apply_mix(ctx, &pl, hp, mix)) {
        st = fc_ctx_status(ctx);
        goto done;
    }
    w = fc_gguf_writer_new(ctx);
    if (!w) {
        st = fc_ctx_status(ctx);
        goto done;
    }
    char name[96];
    snprintf(name, sizeof name, "fucina random %s", d->name);
    TRY(fc_gguf_set_str(w, "general.architecture", d->name));
    TRY(fc_gguf_set_str(w, "general.name", name));
    if (!mix) TRY(fc_gguf_set_u32(w, "general.file_type", file_type_of(dt)));
    TRY(fc_llm_write_keys(w, d, hp));
    if (opt->rope_scaling) {
        const double f = opt->rope_scaling_factor > 0 ? opt->rope_scaling_factor : 4.0;
        char key[128];
        snprintf(key, sizeof key, "%s.rope.scaling.type", d->name);
        TRY(fc_gguf_set_str(w, key, opt->rope_scaling));
        snprintf(key, sizeof key, "%s.rope.scaling.factor", d->name);
        TRY(fc_gguf_set_f32(w, key, (float)f));
        snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", d->name);
        const int64_t orig = (int64_t)((double)hp->n_ctx_train / f);
        TRY(fc_gguf_set_u32(w, key, (uint32_t)(orig > 0 ? orig : 1)));
    }
    TRY(mm_vocab_write(w, &v));
    /* the family's own template (Mixtral: Mistral's), so fucina chat and llama.cpp pick the real format */
    TRY(fc_gguf_set_str(w, "tokenizer.chat_template", fc_chat_template_text(tmpl)));
    if (mix) { /* last, in this order, as llama-quantize (and fc_gguf_quantize) re-set them */
        TRY(fc_gguf_set_u32(w, "general.quantization_version", 2));
        TRY(fc_gguf_set_u32(w, "general.file_type", (uint32_t)mix->ftype));
    }
    mm_vocab_free(&v); /* copied into the writer */
    for (int i = 0; i < pl.n; i++)
        TRY(fc_gguf_writer_add_info(w, pl.t[i].name, (uint32_t)fc_dtype_ggml_type(pl.t[i].dt), pl.t[i].n_dims,
                                    pl.t[i].ne));
    for (int i = 0; i < pl.n; i++)
        pr.total += row_bytes(pl.t[i].dt, pl.t[i].ne[0]) * (uint64_t)(pl.t[i].ne[1] * pl.t[i].ne[2]);
    TRY(fc_gguf_writer_begin(w, path));
    for (int i = 0; i < pl.n; i++) TRY(write_tensor(ctx, w, &pl.t[i], &buf, &buf_cap, &pr));
    TRY(fc_gguf_writer_finish(w));
done:
    fc_gguf_writer_free(w); /* removes a file left half written */
    mm_vocab_free(&v);
    free(pl.t);
    free(buf);
    return st;
}

static int is_plain_dtype(fc_dtype dt)
{
    return dt == FC_F32 || dt == FC_F16 || dt == FC_BF16 || dt == FC_Q8_0 || dt == FC_Q4_0 || dt == FC_Q4_K ||
           dt == FC_Q5_K || dt == FC_Q6_K;
}

/* The model's hparams: the preset's shapes, the family's values; experts
 * for a mixture family, or for llama with opt->moe (Mixtral). */
static void preset_hparams(const preset *p, const fc_llm_arch_desc *d, const fc_make_model_options *opt,
                           fc_llm_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    hp->arch = d->arch;
    hp->n_layer = p->n_layer;
    hp->n_ctx_train = p->n_ctx;
    hp->n_embd = p->n_embd;
    hp->n_ff = p->n_ff;
    hp->n_head = p->n_head;
    hp->n_head_kv = p->n_head_kv;
    /* qwen2 and phi3 take Q n_embd wide (llama.cpp's graphs) */
    hp->head_dim = d->q_is_embd ? p->n_embd / p->n_head : p->head_dim;
    hp->n_rot = hp->head_dim;
    hp->rms_eps = p->eps;
    const family_values *fv = family_of(d->arch);
    hp->rope_theta = fv->theta;
    hp->rope_theta_swa = fv->theta_swa;
    hp->n_swa = fv->n_swa;
    hp->swa_pattern = fv->swa_pattern;
    hp->attn_softcap = fv->attn_softcap;
    hp->final_softcap = fv->final_softcap;
    const int moe = d->ffn == FC_FFN_MOE || (d->ffn == FC_FFN_DENSE_OR_MOE && opt->moe);
    if (moe) {
        hp->n_expert = p->n_expert;
        hp->n_expert_used = p->n_expert_used;
        /* qwen3moe's experts have their own width; Mixtral's are feed_forward_length wide */
        hp->n_ff_exp = d->ffn == FC_FFN_MOE ? p->n_ff_exp : p->n_ff;
    }
}

fc_status fc_llm_make_model(fc_ctx *ctx, const char *path, const fc_make_model_options *opt)
{
    static const char *op = "fc_llm_make_model";
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!path || !opt) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: NULL %s", op, path ? "options" : "path");
        return FC_ERR_INVALID_ARG;
    }
    const char *arch = opt->arch ? opt->arch : "qwen3";
    const char *pname = opt->preset ? opt->preset : "tiny";
    const fc_llm_arch_desc *d = fc_llm_arch_find(arch);
    if (!d) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: unsupported architecture '%s' (supported: %s)", op, arch,
                fc_llm_arch_names());
        return FC_ERR_INVALID_ARG;
    }
    const preset *p = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(k_presets[i].name, pname)) p = &k_presets[i];
    if (!p) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: unknown preset '%s' (supported: tiny, small, 0.6b, llama-1b, gemma3-1b)",
                op, pname);
        return FC_ERR_INVALID_ARG;
    }
    if (opt->moe && d->ffn != FC_FFN_DENSE_OR_MOE) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: moe applies to llama (Mixtral) only, not %s", op, d->name);
        return FC_ERR_INVALID_ARG;
    }
    if (opt->rope_freqs && d->arch != FC_LLM_ARCH_LLAMA) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: rope_freqs applies to llama only, not %s", op, d->name);
        return FC_ERR_INVALID_ARG;
    }
    if (opt->rope_scaling && strcmp(opt->rope_scaling, "linear") && strcmp(opt->rope_scaling, "yarn")) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: rope scaling '%s' is not linear or yarn", op, opt->rope_scaling);
        return FC_ERR_INVALID_ARG;
    }
    fc_chat_template named;
    if (opt->chat_template && fc_chat_template_from_name(ctx, opt->chat_template, &named) != FC_OK) return FC_ERR_INVALID_ARG;
    if (opt->rope_scaling_factor < 0 || !isfinite(opt->rope_scaling_factor)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: rope scaling factor %g must be > 0", op, opt->rope_scaling_factor);
        return FC_ERR_INVALID_ARG;
    }
    fc_llm_hparams hp;
    preset_hparams(p, d, opt, &hp);
    if ((d->ffn == FC_FFN_MOE || opt->moe) && !hp.n_expert) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: preset '%s' has no mixture shape (mixtures: tiny, small, 0.6b)", op, pname);
        return FC_ERR_INVALID_ARG;
    }
    const int64_t n_vocab = opt->n_vocab ? opt->n_vocab : p->n_vocab;
    const int qwen_layout = family_of(d->arch)->vocab == VOCAB_QWEN;
    if (opt->n_vocab && ((qwen_layout && opt->n_vocab < MM_QWEN_MIN_VOCAB) || opt->n_vocab > INT32_MAX / 2)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: n_vocab %lld: Qwen's layout needs at least %d ids", op,
                (long long)opt->n_vocab, MM_QWEN_MIN_VOCAB);
        return FC_ERR_INVALID_ARG;
    }
    if (opt->mix) {
        const fc_quant_mix *mix = fc_quant_mix_find(opt->mix);
        if (!mix) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: unknown quantization mix '%s' (llama-quantize's names: Q4_K_M, "
                    "Q6_K, ...)", op, opt->mix);
            return FC_ERR_INVALID_ARG;
        }
        return write_file(ctx, path, d, &hp, n_vocab, FC_F32, opt, mix);
    }
    /* a zero field takes the default (the options convention of nn.h) */
    const fc_dtype dt = opt->dtype == (fc_dtype)0 ? FC_F32 : opt->dtype;
    if (!is_plain_dtype(dt)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "%s: weight dtype %s unsupported (f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K; or a mix)", op,
                fc_dtype_name(dt));
        return FC_ERR_INVALID_ARG;
    }
    return write_file(ctx, path, d, &hp, n_vocab, dt, opt, NULL);
}
