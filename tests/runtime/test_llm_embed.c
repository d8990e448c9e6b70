/* SPDX-License-Identifier: MIT */
/* Hidden states and embeddings (fucina/embed.h) against llama.cpp.
 *
 * Random-weight tiny models of every family (fc_llm_make_model, f32
 * weights, seed 5), the parity prompt (llm_parity.h), an f32 KV cache on
 * both sides (flash attention off in llama.cpp). libllama with embeddings
 * on and a pooling type gives llama_get_embeddings_ith (none: each token's
 * final hidden state) or llama_get_embeddings_seq (mean, cls, last: the
 * sequence's pooled vector); ours is fc_llm_embed without normalization.
 * Bound: max |diff| <= 1e-5 x max |value| (the f32 logits' bound of the
 * parity tests: the hidden states are the LM head's input, one matmul less;
 * llama.cpp's mean is a matmul over the rows, ours a double sum).
 *
 * Also: the default pooling (a copy of the file with <arch>.pooling_type
 * set, and none) equals the one libllama resolves for an unspecified
 * pooling; the normalizations equal llama-embedding's formulas written out
 * again here; the hidden rows and logits of one eval equal the logits of a
 * plain eval bitwise and are the rows the head would take; errors. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/embed.h"
#include "fucina/fucina.h"
#include "llm_parity.h"

FCT_SUITE_WITH_TMPDIR(llm_embed, 1, "fc_embd_");

#define BOUND 1e-5

static const char *make(const char *arch, const char *name)
{
    static char p[4][512];
    static int k;
    char *b = p[k++ & 3];
    snprintf(b, 512, "%s/%s", dir, name);
    const fc_make_model_options mo = {.arch = arch, .seed = 5};
    cr_assert_eq(fc_llm_make_model(ctx, b, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    return b;
}

/* A copy of src with <arch>.pooling_type = value (u32). */
static const char *with_pooling(const char *src, const char *arch, uint32_t value)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/pool%u_%s.gguf", dir, value, arch);
    char key[96];
    snprintf(key, sizeof key, "%s.pooling_type", arch);
    fc_gguf *g = fc_gguf_open(ctx, src, 0);
    cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert_not_null(w, "%s", fc_ctx_error(ctx));
    for (int64_t i = 0; i < fc_gguf_kv_count(g); i++)
        cr_assert_eq(fc_gguf_writer_copy_kv(w, g, i), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_set_u32(w, key, value), FC_OK, "%s", fc_ctx_error(ctx));
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(g, i, &ti));
        cr_assert_eq(fc_gguf_writer_add_raw(w, ti.name, ti.type, ti.n_dims, ti.ne, ti.data, ti.nbytes), FC_OK, "%s",
                     fc_ctx_error(ctx));
    }
    cr_assert_eq(fc_gguf_writer_save(w, path), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);
    fc_gguf_close(g);
    return path;
}

static fc_token *prompt_tokens(fc_llm_model *m, size_t *n)
{
    fc_token *t = NULL;
    cr_assert_eq(fc_tokenize(ctx, fc_llm_model_tokenizer(m), lp_prompt, strlen(lp_prompt),
                             FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL, &t, n),
                 FC_OK, "%s", fc_ctx_error(ctx));
    return t;
}

static fc_llm_session *f32_session(fc_llm_model *m)
{
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = 128;
    so.kv_type = FC_F32;
    fc_llm_session *s = fc_llm_session_new_ex(ctx, m, &so);
    cr_assert_not_null(s, "%s", fc_ctx_error(ctx));
    return s;
}

/* libllama with embeddings on and pooling `pool` (llama.cpp's enum) over
 * path: the rows it returns for tokens (n x embd for none, embd otherwise)
 * and the pooling type the context resolved. */
static float *oracle_embd(const lp_oracle *o, const char *path, const fc_token *t, int n, int64_t E, int pool,
                          int *resolved)
{
    struct llama_model_params mp = o->model_defaults();
    struct llama_model *model = o->load(path, mp);
    cr_assert_not_null(model, "llama.cpp cannot load %s", path);
    struct llama_context_params cp = o->ctx_defaults();
    cr_assert_eq(cp.pooling_type, FCO_LLAMA_POOLING_UNSPECIFIED, "llama_context_params.pooling_type defaults to %d",
                 cp.pooling_type);
    cp.n_ctx = 128;
    cp.n_batch = cp.n_ubatch = 128; /* one ubatch: llama.cpp pools within it */
    cp.n_outputs_max = 0;
    cp.n_outputs_max_per_seq = 0;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = FCO_LLAMA_FLASH_ATTN_DISABLED;
    cp.type_k = cp.type_v = FCO_GGML_TYPE_F32;
    cp.embeddings = true;
    cp.pooling_type = pool;
    struct llama_context *lc = o->init(model, cp);
    cr_assert_not_null(lc, "llama_init_from_model failed for %s", path);
    *resolved = o->pooling_type(lc);
    llama_batch b = o->batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = t[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    cr_assert_eq(o->decode(lc, b), 0, "llama_decode failed");
    const int rows = *resolved == FCO_LLAMA_POOLING_NONE ? n : 1;
    float *out = malloc((size_t)rows * (size_t)E * sizeof *out);
    cr_assert_not_null(out);
    for (int r = 0; r < rows; r++) {
        const float *e = *resolved == FCO_LLAMA_POOLING_NONE ? o->embeddings_ith(lc, r) : o->embeddings_seq(lc, 0);
        cr_assert_not_null(e, "libllama returned no embedding (row %d)", r);
        memcpy(out + (size_t)r * (size_t)E, e, (size_t)E * sizeof *e);
    }
    o->batch_free(b);
    o->free_ctx(lc);
    o->model_free(model);
    return out;
}

static lp_oracle embd_oracle(void)
{
    lp_oracle o = lp_get_oracle();
    if (!o.embeddings_ith || !o.embeddings_seq || !o.pooling_type)
        cr_skip_test("the oracle's libllama lacks llama_get_embeddings_ith / _seq / llama_pooling_type");
    return o;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return d / (mx > 0 ? mx : 1);
}

/* Every pooling of a family's model against libllama's. */
static void family_matches(const char *arch)
{
    lp_oracle o = embd_oracle();
    char name[64];
    snprintf(name, sizeof name, "%s.gguf", arch);
    const char *path = make(arch, name);
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    const int64_t E = fc_llm_model_hparams(m)->n_embd;
    size_t n;
    fc_token *t = prompt_tokens(m, &n);
    static const struct {
        fc_llm_pooling ours;
        int theirs;
    } pools[] = {{FC_LLM_POOLING_NONE, FCO_LLAMA_POOLING_NONE},
                 {FC_LLM_POOLING_MEAN, FCO_LLAMA_POOLING_MEAN},
                 {FC_LLM_POOLING_CLS, FCO_LLAMA_POOLING_CLS},
                 {FC_LLM_POOLING_LAST, FCO_LLAMA_POOLING_LAST}};
    for (size_t k = 0; k < sizeof pools / sizeof pools[0]; k++) {
        const fc_llm_embed_options eo = {.pooling = pools[k].ours, .norm = FC_LLM_EMBD_NORM_NONE};
        const int64_t rows = fc_llm_embed_rows(ctx, m, &eo, n);
        cr_assert_eq(rows, pools[k].ours == FC_LLM_POOLING_NONE ? (int64_t)n : 1);
        float *ours = malloc((size_t)rows * (size_t)E * sizeof *ours);
        fc_llm_session *s = f32_session(m);
        cr_assert_eq(fc_llm_embed(ctx, s, 0, t, n, &eo, ours), FC_OK, "%s", fc_ctx_error(ctx));
        cr_assert_eq(fc_llm_session_pos(s), (int64_t)n);
        int resolved;
        float *ref = oracle_embd(&o, path, t, (int)n, E, pools[k].theirs, &resolved);
        cr_assert_eq(resolved, pools[k].theirs);
        const double d = rel_diff(ours, ref, (size_t)rows * (size_t)E);
        cr_log_info("%s pooling %s: max|diff|/max|value| %.3g", arch, fc_llm_pooling_name(pools[k].ours), d);
        cr_assert_leq(d, BOUND, "%s pooling %s: %.3g > %.1g", arch, fc_llm_pooling_name(pools[k].ours), d, BOUND);
        free(ref);
        free(ours);
        fc_llm_session_free(s);
    }
    fc_tokens_free(t);
    fc_llm_model_free(m);
}

Test(llm_embed, qwen3_matches_llama_cpp)
{
    family_matches("qwen3");
}
Test(llm_embed, llama_matches_llama_cpp)
{
    family_matches("llama");
}
Test(llm_embed, qwen2_matches_llama_cpp)
{
    family_matches("qwen2");
}
Test(llm_embed, gemma3_matches_llama_cpp)
{
    family_matches("gemma3");
}
Test(llm_embed, gemma2_matches_llama_cpp)
{
    family_matches("gemma2");
}
Test(llm_embed, phi3_matches_llama_cpp)
{
    family_matches("phi3");
}
Test(llm_embed, qwen3moe_matches_llama_cpp)
{
    family_matches("qwen3moe");
}

/* The default: what libllama resolves an unspecified pooling to, for the
 * file as written (no key) and with <arch>.pooling_type = mean and last,
 * in every family (llama.cpp reads the key in some families' loaders only). */
Test(llm_embed, default_pooling_is_llama_cpp_s)
{
    lp_oracle o = embd_oracle();
    const char *archs[] = {"qwen3", "qwen3moe", "llama", "qwen2", "gemma3", "gemma2", "phi3"};
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        char name[64];
        snprintf(name, sizeof name, "%s.gguf", archs[a]);
        const char *base = make(archs[a], name);
        for (int v = -1; v <= 3; v += 2) { /* absent, mean (1), last (3) */
            const char *path = v < 0 ? base : with_pooling(base, archs[a], (uint32_t)v);
            fc_llm_model *m = fc_llm_model_load(ctx, path);
            cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
            fc_llm_pooling p = FC_LLM_POOLING_MODEL;
            cr_assert_eq(fc_llm_model_pooling(ctx, m, &p), FC_OK, "%s", fc_ctx_error(ctx));
            size_t n;
            fc_token *t = prompt_tokens(m, &n);
            int resolved;
            float *ref = oracle_embd(&o, path, t, (int)n, fc_llm_model_hparams(m)->n_embd,
                                     FCO_LLAMA_POOLING_UNSPECIFIED, &resolved);
            const fc_llm_pooling theirs = resolved == FCO_LLAMA_POOLING_NONE   ? FC_LLM_POOLING_NONE
                                          : resolved == FCO_LLAMA_POOLING_MEAN ? FC_LLM_POOLING_MEAN
                                          : resolved == FCO_LLAMA_POOLING_CLS  ? FC_LLM_POOLING_CLS
                                          : resolved == FCO_LLAMA_POOLING_LAST ? FC_LLM_POOLING_LAST
                                                                               : FC_LLM_POOLING_MODEL;
            cr_log_info("%s pooling_type %d: llama.cpp %d, ours %s", archs[a], v, resolved, fc_llm_pooling_name(p));
            cr_assert_eq(p, theirs, "%s with pooling_type %d: llama.cpp resolves %d, we %s", archs[a], v, resolved,
                         fc_llm_pooling_name(p));
            free(ref);
            fc_tokens_free(t);
            fc_llm_model_free(m);
        }
    }
}

/* llama-embedding's common_embd_normalize, written out again. */
static void ref_normalize(const float *in, float *out, int n, int mode)
{
    double sum = 0;
    if (mode == -1)
        sum = 1;
    else if (mode == 0) {
        for (int i = 0; i < n; i++) sum = fmax(sum, fabs(in[i]));
        sum /= 32760.0;
    } else if (mode == 2) {
        for (int i = 0; i < n; i++) sum += (double)in[i] * in[i];
        sum = sqrt(sum);
    } else {
        for (int i = 0; i < n; i++) sum += pow(fabs(in[i]), mode);
        sum = pow(sum, 1.0 / mode);
    }
    const float norm = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int i = 0; i < n; i++) out[i] = in[i] * norm;
}

Test(llm_embed, normalizations)
{
    float v[67], a[67], b[67];
    for (int i = 0; i < 67; i++) v[i] = (float)sin(i * 1.7) * (float)(1 + i % 5);
    const struct {
        fc_llm_embd_norm norm;
        int p, mode;
    } c[] = {{FC_LLM_EMBD_NORM_NONE, 0, -1},     {FC_LLM_EMBD_NORM_MAX_ABS, 0, 0}, {FC_LLM_EMBD_NORM_P, 1, 1},
             {FC_LLM_EMBD_NORM_EUCLIDEAN, 0, 2}, {FC_LLM_EMBD_NORM_P, 3, 3},       {FC_LLM_EMBD_NORM_P, 2, 2}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        cr_assert_eq(fc_llm_embd_normalize(ctx, v, a, 67, c[k].norm, c[k].p), FC_OK, "%s", fc_ctx_error(ctx));
        ref_normalize(v, b, 67, c[k].mode);
        cr_assert_arr_eq(a, b, sizeof a, "mode %d", c[k].mode);
    }
    /* unit L2 norm; the largest |x| 32760 */
    fc_llm_embd_normalize(ctx, v, a, 67, FC_LLM_EMBD_NORM_EUCLIDEAN, 0);
    double s = 0;
    for (int i = 0; i < 67; i++) s += (double)a[i] * a[i];
    cr_assert_float_eq(s, 1.0, 1e-6);
    fc_llm_embd_normalize(ctx, v, a, 67, FC_LLM_EMBD_NORM_MAX_ABS, 0);
    double mx = 0;
    for (int i = 0; i < 67; i++) mx = fmax(mx, fabs(a[i]));
    cr_assert_float_eq(mx, 32760.0, 1e-2);
    /* zero stays zero; in place */
    float z[4] = {0};
    cr_assert_eq(fc_llm_embd_normalize(ctx, z, z, 4, FC_LLM_EMBD_NORM_EUCLIDEAN, 0), FC_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(z[i], 0.0f);
    /* refusals */
    cr_assert_eq(fc_llm_embd_normalize(ctx, v, a, 67, FC_LLM_EMBD_NORM_P, 0), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "p must be >= 1"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_llm_embd_normalize(ctx, v, a, 67, (fc_llm_embd_norm)9, 0), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "unknown normalization 9"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
}

/* The default options: the model's pooling (none here) and unit L2 rows;
 * the hidden rows and logits of one eval are a plain eval's logits bit for
 * bit, and the LAST row is the ALL rows' last. */
Test(llm_embed, hidden_rows_beside_logits)
{
    const char *path = make("qwen3", "h.gguf");
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    const int64_t E = fc_llm_model_hparams(m)->n_embd, V = fc_llm_model_hparams(m)->n_vocab;
    size_t n;
    fc_token *t = prompt_tokens(m, &n);
    float *l1 = malloc(n * (size_t)V * sizeof *l1), *l2 = malloc(n * (size_t)V * sizeof *l2);
    float *h = malloc(n * (size_t)E * sizeof *h), *hl = malloc((size_t)E * sizeof *hl);
    float *d = malloc(n * (size_t)E * sizeof *d);
    fc_llm_session *s1 = f32_session(m), *s2 = f32_session(m), *s3 = f32_session(m), *s4 = f32_session(m);
    cr_assert_eq(fc_llm_session_eval(ctx, s1, t, n, l1), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_llm_session_eval_hidden(ctx, s2, 0, t, n, FC_LLM_LOGITS_ALL, l2, h), FC_OK, "%s",
                 fc_ctx_error(ctx));
    cr_assert_arr_eq(l1, l2, n * (size_t)V * sizeof *l1, "logits beside the hidden states differ");
    cr_assert_eq(fc_llm_session_eval_hidden(ctx, s3, 0, t, n, FC_LLM_LOGITS_LAST, NULL, hl), FC_OK, "%s",
                 fc_ctx_error(ctx));
    cr_assert_arr_eq(hl, h + (n - 1) * (size_t)E, (size_t)E * sizeof *hl);
    /* defaults: the model says nothing, so one unit-length row per token */
    cr_assert_eq(fc_llm_embed_rows(ctx, m, NULL, n), (int64_t)n);
    cr_assert_eq(fc_llm_embed(ctx, s4, 0, t, n, NULL, d), FC_OK, "%s", fc_ctx_error(ctx));
    for (size_t r = 0; r < n; r++) {
        float want[1024];
        ref_normalize(h + r * (size_t)E, want, (int)E, 2);
        cr_assert_arr_eq(d + r * (size_t)E, want, (size_t)E * sizeof *want, "row %zu", r);
    }
    /* errors leave the session as it was */
    const int64_t pos = fc_llm_session_pos(s4);
    const fc_token bad = (fc_token)V;
    cr_assert_eq(fc_llm_embed(ctx, s4, 0, &bad, 1, NULL, d), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "out of range"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    const fc_llm_embed_options bp = {.pooling = (fc_llm_pooling)7};
    cr_assert_eq(fc_llm_embed(ctx, s4, 0, t, 1, &bp, d), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "unknown pooling 7"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_llm_embed(ctx, s4, 3, t, 1, NULL, d), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_llm_session_eval_hidden(ctx, s4, 0, t, 1, FC_LLM_LOGITS_ALL, NULL, NULL), FC_ERR_INVALID_ARG);
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_llm_session_pos(s4), pos);
    fc_llm_session_free(s1);
    fc_llm_session_free(s2);
    fc_llm_session_free(s3);
    fc_llm_session_free(s4);
    free(l1), free(l2), free(h), free(hl), free(d);
    fc_tokens_free(t);
    fc_llm_model_free(m);
}

/* A pooling we do not pool by (rank) is refused naming it, with the way out. */
Test(llm_embed, rank_pooling_refused)
{
    const char *base = make("qwen3", "r.gguf");
    const char *path = with_pooling(base, "qwen3", 4);
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    fc_llm_pooling p = FC_LLM_POOLING_MODEL;
    cr_assert_eq(fc_llm_model_pooling(ctx, m, &p), FC_ERR_UNSUPPORTED);
    cr_assert(strstr(fc_ctx_error(ctx), "qwen3.pooling_type is 4 (rank)"), "%s", fc_ctx_error(ctx));
    cr_assert_eq(p, FC_LLM_POOLING_MODEL);
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_llm_embed_rows(ctx, m, NULL, 3), 0);
    fc_ctx_clear_error(ctx);
    const fc_llm_embed_options eo = {.pooling = FC_LLM_POOLING_MEAN};
    cr_assert_eq(fc_llm_embed_rows(ctx, m, &eo, 3), 1);
    fc_llm_model_free(m);
}
