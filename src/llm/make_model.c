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
#include "llm/make_model.h"

typedef struct preset {
    const char *name;
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_ctx;
    double theta, eps;
    int64_t n_vocab;                            /* 0: the small vocabulary */
    int64_t n_expert, n_expert_used, n_ff_exp;  /* qwen3moe; 0: dense only */
} preset;

/* small: every matrix's input width is a multiple of 256, so K-quants apply
 * to every tensor (tiny's 64 makes llama.cpp-style fallbacks). */
static const preset k_presets[] = {
    {"tiny", 64, 128, 2, 4, 2, 32, 256, 1000000.0, 1e-6, 0, 8, 2, 32},
    {"small", 256, 768, 2, 4, 2, 64, 512, 1000000.0, 1e-6, 0, 8, 2, 256},
    /* qwen3moe at this size: 16 experts, 4 used, 768 wide, so a token's active FFN
     * (4 x 768) matches the dense 3072 while the experts hold 1.06 G weights */
    {"0.6b", 1024, 3072, 28, 16, 8, 128, 40960, 1000000.0, 1e-6, 151936, 16, 4, 768},
};
#define N_PRESETS ((int)(sizeof k_presets / sizeof k_presets[0]))

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

static double inv_sqrt(int64_t n) { return 1.0 / sqrt((double)n); }

/* Every tensor's seed is derived from the model seed and its index, so a
 * tensor does not depend on the others' sizes. */
static uint64_t seed_of(uint64_t model_seed, uint64_t k)
{
    return model_seed * 0x9E3779B97F4A7C15ull + k * 0xD1B54A32D192ED03ull;
}

static int build_plan(plan *p, const preset *ps, int moe, fc_dtype dt, int untied, int64_t n_vocab, uint64_t seed)
{
    uint64_t k = 0;
#define S() seed_of(seed, ++k)
    const int64_t e = ps->n_embd, q_dim = ps->n_head * ps->head_dim, kv_dim = ps->n_head_kv * ps->head_dim;
    int bad = plan_add(p, "token_embd.weight", 2, e, n_vocab, 1, dt, 0.0, 1.0, S());
    bad |= plan_add(p, "output_norm.weight", 1, e, 1, 1, FC_F32, 1.0, 0.1, S());
    const uint64_t out_seed = S(); /* drawn either way: tied and untied models share every other tensor */
    if (untied) bad |= plan_add(p, "output.weight", 2, e, n_vocab, 1, dt, 0.0, inv_sqrt(e), out_seed);
    for (int64_t l = 0; l < ps->n_layer && !bad; l++) {
        char nm[48];
#define N(s) (snprintf(nm, sizeof nm, "blk.%d." s, (int)l), nm)
        bad |= plan_add(p, N("attn_norm.weight"), 1, e, 1, 1, FC_F32, 1.0, 0.1, S());
        bad |= plan_add(p, N("attn_q.weight"), 2, e, q_dim, 1, dt, 0.0, inv_sqrt(e), S());
        bad |= plan_add(p, N("attn_k.weight"), 2, e, kv_dim, 1, dt, 0.0, inv_sqrt(e), S());
        bad |= plan_add(p, N("attn_v.weight"), 2, e, kv_dim, 1, dt, 0.0, inv_sqrt(e), S());
        bad |= plan_add(p, N("attn_output.weight"), 2, q_dim, e, 1, dt, 0.0, inv_sqrt(q_dim), S());
        bad |= plan_add(p, N("attn_q_norm.weight"), 1, ps->head_dim, 1, 1, FC_F32, 1.0, 0.1, S());
        bad |= plan_add(p, N("attn_k_norm.weight"), 1, ps->head_dim, 1, 1, FC_F32, 1.0, 0.1, S());
        bad |= plan_add(p, N("ffn_norm.weight"), 1, e, 1, 1, FC_F32, 1.0, 0.1, S());
        if (!moe) {
            bad |= plan_add(p, N("ffn_gate.weight"), 2, e, ps->n_ff, 1, dt, 0.0, inv_sqrt(e), S());
            bad |= plan_add(p, N("ffn_up.weight"), 2, e, ps->n_ff, 1, dt, 0.0, inv_sqrt(e), S());
            bad |= plan_add(p, N("ffn_down.weight"), 2, ps->n_ff, e, 1, dt, 0.0, inv_sqrt(ps->n_ff), S());
        } else {
            const int64_t nx = ps->n_expert, f = ps->n_ff_exp;
            /* router logits O(1) so the top-k choice varies with the token */
            bad |= plan_add(p, N("ffn_gate_inp.weight"), 2, e, nx, 1, FC_F32, 0.0, inv_sqrt(e), S());
            bad |= plan_add(p, N("ffn_gate_exps.weight"), 3, e, f, nx, dt, 0.0, inv_sqrt(e), S());
            bad |= plan_add(p, N("ffn_up_exps.weight"), 3, e, f, nx, dt, 0.0, inv_sqrt(e), S());
            bad |= plan_add(p, N("ffn_down_exps.weight"), 3, f, e, nx, dt, 0.0, inv_sqrt(f), S());
        }
#undef N
    }
#undef S
    return bad ? -1 : 0;
}

/* ---- streaming the data ------------------------------------------------------- */

static uint64_t row_bytes(fc_dtype dt, int64_t width)
{
    uint32_t be = 1, bb = 0;
    fc_ggml_type_block((uint32_t)fc_dtype_ggml_type(dt), &be, &bb);
    return (uint64_t)(width / be) * bb;
}

/* One tensor, generated and encoded a slab of rows at a time. Slab c draws
 * from its own seed (slab 0 from the tensor's seed, so a small tensor is one
 * fc_rand_normal draw); rows stay whole so every slab encodes alone. */
static fc_status write_tensor(fc_ctx *ctx, fc_gguf_writer *w, const tplan *t, void **buf, size_t *buf_cap)
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
static int apply_mix(fc_ctx *ctx, plan *pl, const preset *p, int moe, const fc_quant_mix *mix)
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
    const fc_quant_model qm = {.n_layer = (int)p->n_layer, .n_head = (int)p->n_head, .n_head_kv = (int)p->n_head_kv,
                               .n_expert = moe ? (int)p->n_expert : 0};
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

static fc_status write_file(fc_ctx *ctx, const char *path, const preset *p, int moe, fc_dtype dt,
                            const fc_make_model_options *opt, const fc_quant_mix *mix)
{
    mm_vocab v;
    plan pl = {0};
    fc_status st = FC_OK;
    fc_gguf_writer *w = NULL;
    void *buf = NULL;
    size_t buf_cap = 0;
    if (mm_vocab_build(&v, opt->n_vocab ? opt->n_vocab : p->n_vocab)) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_make_model: out of memory building the vocabulary");
        st = FC_ERR_OOM;
        goto done;
    }
    if (build_plan(&pl, p, moe, mix ? FC_F32 : dt, opt->untied, v.n, opt->seed)) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_make_model: out of memory");
        st = FC_ERR_OOM;
        goto done;
    }
    if (mix && apply_mix(ctx, &pl, p, moe, mix)) {
        st = fc_ctx_status(ctx);
        goto done;
    }
    w = fc_gguf_writer_new(ctx);
    if (!w) {
        st = fc_ctx_status(ctx);
        goto done;
    }
    const char *a = moe ? "qwen3moe" : "qwen3";
    char key[96];
#define K(s) (snprintf(key, sizeof key, "%s." s, a), key)
    const int32_t eot = (int32_t)mm_vocab_find(&v, "<|endoftext|>"), im_end = (int32_t)mm_vocab_find(&v, "<|im_end|>");
    TRY(fc_gguf_set_str(w, "general.architecture", a));
    TRY(fc_gguf_set_str(w, "general.name", moe ? "fucina random qwen3moe" : "fucina random qwen3"));
    if (!mix) TRY(fc_gguf_set_u32(w, "general.file_type", file_type_of(dt)));
    TRY(fc_gguf_set_u32(w, K("block_count"), (uint32_t)p->n_layer));
    TRY(fc_gguf_set_u32(w, K("context_length"), (uint32_t)p->n_ctx));
    TRY(fc_gguf_set_u32(w, K("embedding_length"), (uint32_t)p->n_embd));
    TRY(fc_gguf_set_u32(w, K("feed_forward_length"), (uint32_t)p->n_ff));
    TRY(fc_gguf_set_u32(w, K("attention.head_count"), (uint32_t)p->n_head));
    TRY(fc_gguf_set_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_head_kv));
    TRY(fc_gguf_set_u32(w, K("attention.key_length"), (uint32_t)p->head_dim));
    TRY(fc_gguf_set_u32(w, K("attention.value_length"), (uint32_t)p->head_dim));
    TRY(fc_gguf_set_f32(w, K("rope.freq_base"), (float)p->theta));
    TRY(fc_gguf_set_f32(w, K("attention.layer_norm_rms_epsilon"), (float)p->eps));
    if (moe) {
        TRY(fc_gguf_set_u32(w, K("expert_count"), (uint32_t)p->n_expert));
        TRY(fc_gguf_set_u32(w, K("expert_used_count"), (uint32_t)p->n_expert_used));
        TRY(fc_gguf_set_u32(w, K("expert_feed_forward_length"), (uint32_t)p->n_ff_exp));
    }
#undef K
    TRY(fc_gguf_set_str(w, "tokenizer.ggml.model", "gpt2"));
    TRY(fc_gguf_set_str(w, "tokenizer.ggml.pre", "qwen2"));
    TRY(fc_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, NULL, (uint64_t)v.n));
    TRY(fc_gguf_set_arr(w, "tokenizer.ggml.token_type", FC_GGUF_I32, v.type, (uint64_t)v.n));
    TRY(fc_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merge, NULL, (uint64_t)v.n_merges));
    TRY(fc_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)im_end));
    TRY(fc_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)eot));
    TRY(fc_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)eot));
    TRY(fc_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 0));
    /* Qwen3's own template, so fucina chat and llama.cpp pick the real format */
    TRY(fc_gguf_set_str(w, "tokenizer.chat_template", fc_chat_template_text(FC_CHAT_TEMPLATE_QWEN3)));
    if (mix) { /* last, in this order, as llama-quantize (and fc_gguf_quantize) re-set them */
        TRY(fc_gguf_set_u32(w, "general.quantization_version", 2));
        TRY(fc_gguf_set_u32(w, "general.file_type", (uint32_t)mix->ftype));
    }
    mm_vocab_free(&v); /* copied into the writer */
    for (int i = 0; i < pl.n; i++)
        TRY(fc_gguf_writer_add_info(w, pl.t[i].name, (uint32_t)fc_dtype_ggml_type(pl.t[i].dt), pl.t[i].n_dims,
                                    pl.t[i].ne));
    TRY(fc_gguf_writer_begin(w, path));
    for (int i = 0; i < pl.n; i++) TRY(write_tensor(ctx, w, &pl.t[i], &buf, &buf_cap));
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
    const int moe = !strcmp(arch, "qwen3moe");
    if (!moe && strcmp(arch, "qwen3")) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: unsupported architecture '%s' (supported: qwen3, qwen3moe)", op, arch);
        return FC_ERR_INVALID_ARG;
    }
    const preset *p = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(k_presets[i].name, pname)) p = &k_presets[i];
    if (!p) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: unknown preset '%s' (supported: tiny, small, 0.6b)", op, pname);
        return FC_ERR_INVALID_ARG;
    }
    if (moe && !p->n_expert) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: preset '%s' has no qwen3moe shape (qwen3moe: tiny, small, 0.6b)", op, pname);
        return FC_ERR_INVALID_ARG;
    }
    if (opt->n_vocab && (opt->n_vocab < MM_QWEN_MIN_VOCAB || opt->n_vocab > INT32_MAX / 2)) {
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
        return write_file(ctx, path, p, moe, FC_F32, opt, mix);
    }
    /* a zero field takes the default (the options convention of nn.h) */
    const fc_dtype dt = opt->dtype == (fc_dtype)0 ? FC_F32 : opt->dtype;
    if (!is_plain_dtype(dt)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "%s: weight dtype %s unsupported (f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K; or a mix)", op,
                fc_dtype_name(dt));
        return FC_ERR_INVALID_ARG;
    }
    return write_file(ctx, path, p, moe, dt, opt, NULL);
}
