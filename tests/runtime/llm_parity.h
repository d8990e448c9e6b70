/* SPDX-License-Identifier: MIT */
/* Shared by the LLM parity tests (test_llm_qwen3.c, test_llm_qwen3moe.c):
 * the same tokens through libllama (the oracle, oracle/llama_abi.h) and
 * through us, logits of every position and greedy generations compared.
 * Header-only (static inline) so each test binary takes what it uses; it
 * takes the suite's context as a parameter. */
#ifndef FCT_LLM_PARITY_H
#define FCT_LLM_PARITY_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/llm.h"
#include "fucina/quantize.h"
#include "llama_abi.h"

typedef fco_llama_api lp_oracle;

static inline lp_oracle lp_get_oracle(void) {
    const char *why = NULL;
    const fco_llama_api *api = fco_llama_load(&why);
    if (!api) cr_skip_test("llama.cpp oracle unavailable: %s", why);
    return *api;
}

/* The model seed: FCT_SEED=S, else dflt. */
static inline uint64_t lp_seed(uint64_t dflt) {
    const char *s = getenv("FCT_SEED");
    return s ? strtoull(s, NULL, 10) : dflt;
}

static const char *const lp_prompt = "Hello world, the model is a tensor. 12 + 3 =<|im_end|>";

typedef struct lp_llama {
    struct llama_model *model;
    struct llama_context *lc;
} lp_llama;

/* libllama over path with a KV cache of ggml type kv (flash attention on
 * when flash: llama.cpp needs it for a quantized V), one thread, logits for
 * every position; checks that it tokenizes lp_prompt as we do. */
static inline lp_llama lp_llama_open_kv(const lp_oracle *o, const char *path, const fc_token *tokens, int n, int kv,
                                        int flash) {
    lp_llama r;
    struct llama_model_params mp = o->model_defaults();
    r.model = o->load(path, mp);
    cr_assert_not_null(r.model, "llama.cpp cannot load %s (run with FCT_LLAMA_VERBOSE=1 for its log)", path);
    llama_token lt[256];
    int32_t ln = o->tokenize(o->get_vocab(r.model), lp_prompt, (int32_t)strlen(lp_prompt), lt, 256, false, true);
    cr_assert_eq(ln, n, "llama.cpp tokenizes the prompt into %d tokens, we into %d", ln, n);
    for (int i = 0; i < n; i++) cr_assert_eq(lt[i], tokens[i], "token %d: llama.cpp %d, ours %d", i, lt[i], tokens[i]);
    struct llama_context_params cp = o->ctx_defaults();
    cp.n_ctx = 256;
    cp.n_batch = cp.n_ubatch = 256;
    cp.n_outputs_max = 0;         /* = n_batch */
    cp.n_outputs_max_per_seq = 0; /* = n_outputs_max: logits of every position */
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = flash ? 1 : FCO_LLAMA_FLASH_ATTN_DISABLED; /* LLAMA_FLASH_ATTN_TYPE_ENABLED = 1 */
    cp.type_k = cp.type_v = kv;
    r.lc = o->init(r.model, cp);
    cr_assert_not_null(r.lc, "llama_init_from_model failed for %s", path);
    return r;
}

/* An f32 KV cache (no f16 rounding of K and V), flash attention off. */
static inline lp_llama lp_llama_open(const lp_oracle *o, const char *path, const fc_token *tokens, int n) {
    return lp_llama_open_kv(o, path, tokens, n, FCO_GGML_TYPE_F32, 0);
}

static inline void lp_llama_close(const lp_oracle *o, lp_llama *r) {
    o->free_ctx(r->lc);
    o->model_free(r->model);
}

/* Decode tokens[0..cnt) at positions pos0.. and copy the logits of every one
 * (out may be NULL: then only the last row, into last). */
static inline void lp_llama_decode(const lp_oracle *o, lp_llama *r, const fc_token *tokens, int cnt, int pos0,
                                   int64_t nv, float *out, float *last) {
    llama_batch b = o->batch_init(cnt, 0, 1);
    for (int i = 0; i < cnt; i++) {
        b.token[i] = tokens[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = out || i == cnt - 1;
    }
    b.n_tokens = cnt;
    cr_assert_eq(o->decode(r->lc, b), 0, "llama_decode failed");
    for (int i = 0; i < cnt; i++) {
        if (!out && i != cnt - 1) continue;
        const float *l = o->logits_ith(r->lc, i);
        cr_assert_not_null(l, "llama_get_logits_ith(%d) is NULL", i);
        memcpy(out ? out + (size_t)i * (size_t)nv : last, l, (size_t)nv * sizeof *l);
    }
    o->batch_free(b);
}

/* Logits of tokens[0..n) at every position on r: one batch of `split`, then
 * one at a time; closes r. */
static inline float *lp_llama_logits_close(const lp_oracle *o, lp_llama *r, const fc_token *tokens, int n, int split,
                                           int64_t nv)
{
    float *out = malloc((size_t)n * (size_t)nv * sizeof *out);
    cr_assert_not_null(out);
    for (int start = 0; start < n;) {
        int cnt = start == 0 ? split : 1;
        lp_llama_decode(o, r, tokens + start, cnt, start, nv, out + (size_t)start * (size_t)nv, NULL);
        start += cnt;
    }
    lp_llama_close(o, r);
    return out;
}

/* Logits of tokens[0..n) at every position: one batch of `split`, then one
 * at a time; a KV cache of ggml type kv (flash attention as lp_llama_open_kv). */
static inline float *lp_oracle_logits_kv(const lp_oracle *o, const char *path, const fc_token *tokens, int n,
                                         int split, int64_t nv, int kv, int flash) {
    lp_llama r = lp_llama_open_kv(o, path, tokens, n, kv, flash);
    return lp_llama_logits_close(o, &r, tokens, n, split, nv);
}

static inline float *lp_oracle_logits(const lp_oracle *o, const char *path, const fc_token *tokens, int n,
                                      int split, int64_t nv) {
    return lp_oracle_logits_kv(o, path, tokens, n, split, nv, FCO_GGML_TYPE_F32, 0);
}

/* Ours, in the same batches, over a KV cache of type kv. */
static inline float *lp_our_logits_kv(fc_ctx *c, fc_llm_model *m, const fc_token *tokens, int n, int split,
                                      fc_dtype kv) {
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = 64;
    so.kv_type = kv;
    fc_llm_session *s = fc_llm_session_new_ex(c, m, &so);
    cr_assert_not_null(s, "%s", fc_ctx_error(c));
    float *out = malloc((size_t)n * (size_t)nv * sizeof *out);
    cr_assert_not_null(out);
    for (int start = 0; start < n;) {
        int cnt = start == 0 ? split : 1;
        cr_assert_eq(fc_llm_session_eval(c, s, tokens + start, (size_t)cnt, out + (size_t)start * (size_t)nv),
                     FC_OK, "eval: %s", fc_ctx_error(c));
        start += cnt;
    }
    cr_assert_eq(fc_llm_session_pos(s), n);
    fc_llm_session_free(s);
    return out;
}

/* An f32 KV cache. */
static inline float *lp_our_logits(fc_ctx *c, fc_llm_model *m, const fc_token *tokens, int n, int split) {
    return lp_our_logits_kv(c, m, tokens, n, split, FC_F32);
}

static inline int lp_argmax(const float *x, int64_t n) {
    int b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = (int)i;
    return b;
}

/* The oracle's top-1 minus top-2, over max |logit|. */
static inline double lp_gap(const float *r, int64_t nv) {
    int ra = lp_argmax(r, nv);
    double second = -INFINITY, amax = 0;
    for (int64_t i = 0; i < nv; i++) {
        amax = fmax(amax, fabs(r[i]));
        if (i != ra) second = fmax(second, r[i]);
    }
    return (r[ra] - second) / amax;
}

typedef struct lp_stats {
    double worst_rel; /* max over positions (outliers aside) of max |diff| / max |ref| */
    double worst_cos; /* min cosine similarity (outliers aside) */
    int n_loose;      /* positions above 1e-5 */
} lp_stats;

/* Per position: max |ours - ref| <= bound x max |ref|, cosine >= min_cos,
 * and the same argmax wherever the oracle's top two are further apart than
 * 2 x bound x max |ref| (a flip inside the error bound is not a bug).
 * max_outliers positions may miss the bound and the cosine (still >= 0.9,
 * and logged): a MoE router whose k-th and (k+1)-th expert probabilities are
 * tied within the quantization noise picks another expert in one engine
 * than in the other (measured: qwen3moe q4_K seed 9, layer 0 position 13,
 * probabilities 0.201215 vs 0.201181: that position differs by 0.106 x max
 * |logit|, cosine 0.944; position 20 of the same run was a second one:
 * 0.0454, cosine 0.989). Later positions attend to an outlier's different K
 * and V in the next layers, so after one the bound is POST_OUTLIER_BOUND and
 * the cosine >= POST_OUTLIER_COS (measured there: <= 0.0134, cosine >=
 * 0.99928). Dense models allow none. */
#define POST_OUTLIER_BOUND 0.1
#define POST_OUTLIER_COS 0.995
static inline lp_stats lp_compare(const float *ours, const float *ref, int n, int64_t nv, double bound, double min_cos,
                                  int max_outliers, const char *what) {
    lp_stats st = {0, 1, 0};
    int outliers = 0;
    for (int p = 0; p < n; p++) {
        const float *a = ours + (size_t)p * (size_t)nv, *r = ref + (size_t)p * (size_t)nv;
        double amax = 0, dmax = 0, ab = 0, aa = 0, bb = 0;
        for (int64_t i = 0; i < nv; i++) {
            cr_assert(isfinite(a[i]), "%s: position %d logit %lld is not finite", what, p, (long long)i);
            amax = fmax(amax, fabs(r[i]));
            dmax = fmax(dmax, fabs((double)a[i] - r[i]));
            ab += (double)a[i] * r[i], aa += (double)a[i] * a[i], bb += (double)r[i] * r[i];
        }
        double rel = dmax / amax, cs = ab / sqrt(aa * bb);
        st.n_loose += rel > 1e-5;
        const double b = outliers ? fmax(bound, POST_OUTLIER_BOUND) : bound;
        const double c = outliers ? fmin(min_cos, POST_OUTLIER_COS) : min_cos;
        if ((rel > b || cs < c) && outliers < max_outliers && cs >= 0.9) {
            outliers++;
            cr_log_warn("%s: position %d is an outlier (%d of at most %d): %.3g x max |logit|, cosine %.6f", what, p,
                        outliers, max_outliers, rel, cs);
            continue;
        }
        if (outliers) cr_log_info("%s: position %d after an outlier: %.3g x max |logit|, cosine %.6f", what, p, rel, cs);
        else st.worst_rel = fmax(st.worst_rel, rel), st.worst_cos = fmin(st.worst_cos, cs);
        cr_assert(rel <= b, "%s: position %d max |diff| %.3g = %.3g x max |logit| %.3g (bound %.3g)", what, p, dmax,
                  rel, amax, b);
        cr_assert(cs >= c, "%s: position %d cosine similarity %.8f < %.8f", what, p, cs, c);
        if (lp_gap(r, nv) > 2 * b)
            cr_assert_eq(lp_argmax(a, nv), lp_argmax(r, nv), "%s: position %d argmax %d, llama.cpp %d", what, p,
                         lp_argmax(a, nv), lp_argmax(r, nv));
    }
    return st;
}

/* lp_prompt in m's tokenizer (special tokens parsed): *nt tokens, freed
 * with fc_tokens_free. */
static inline fc_token *lp_prompt_tokens(fc_ctx *ctx, fc_llm_model *m, size_t *nt)
{
    fc_token *toks;
    cr_assert_eq(
        fc_tokenize(ctx, fc_llm_model_tokenizer(m), lp_prompt, strlen(lp_prompt), FC_TOKENIZE_PARSE_SPECIAL, &toks, nt),
        FC_OK, "%s", fc_ctx_error(ctx));
    return toks;
}

/* max |a - b| / max |b| over n values (how far adapters move the logits) */
static inline double lp_rel_diff(const float *a, const float *b, int64_t n)
{
    double d = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i])), mx = fmax(mx, fabs(b[i]));
    return d / mx;
}

/* LoRA adapters on the oracle's context (llama_adapter_lora_init, then
 * llama_set_adapters_lora with their scales; skips the test when the
 * oracle's release lacks them). n 0: nothing. */
static inline void lp_llama_set_loras(const lp_oracle *o, lp_llama *r, const char *const *loras, const float *scales,
                                      int n) {
    if (n == 0) return;
    if (!o->adapter_lora_init || !o->set_adapters_lora)
        cr_skip_test("the oracle's libllama has no llama_adapter_lora_init / llama_set_adapters_lora");
    struct llama_adapter_lora *ad[16];
    float sc[16];
    cr_assert_leq(n, 16);
    for (int i = 0; i < n; i++) {
        ad[i] = o->adapter_lora_init(r->model, loras[i]);
        cr_assert_not_null(ad[i], "llama.cpp cannot load the adapter %s (FCT_LLAMA_VERBOSE=1 for its log)", loras[i]);
        sc[i] = scales[i];
    }
    cr_assert_eq(o->set_adapters_lora(r->lc, ad, (size_t)n, sc), 0, "llama_set_adapters_lora failed");
}

/* lp_oracle_logits with n_lora adapters set on the context. */
static inline float *lp_oracle_logits_lora(const lp_oracle *o, const char *path, const fc_token *tokens, int n,
                                           int split, int64_t nv, const char *const *loras, const float *scales,
                                           int n_lora) {
    lp_llama r = lp_llama_open(o, path, tokens, n);
    lp_llama_set_loras(o, &r, loras, scales, n_lora);
    return lp_llama_logits_close(o, &r, tokens, n, split, nv);
}

/* Greedy (argmax) generation of n_gen tokens after the prompt, by both
 * engines, each step fed its own previous choice. The sequences must be
 * identical; a divergence is accepted only at a step where the oracle's top
 * two are within 2 x bound of each other (a tie inside the documented
 * error), and the comparison stops there. Returns the steps compared.
 * The _lora form sets n_lora adapters on the oracle's context (ours: set on
 * m by the caller). */
static inline int lp_greedy_lora(fc_ctx *ctx, const lp_oracle *o, const char *path, fc_llm_model *m,
                                 const fc_token *prompt, int n, int n_gen, double bound, const char *what,
                                 const char *const *loras, const float *scales, int n_lora) {
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    float *lo = malloc((size_t)nv * sizeof *lo), *lu = malloc((size_t)nv * sizeof *lu);
    cr_assert(lo && lu);
    lp_llama r = lp_llama_open(o, path, prompt, n);
    lp_llama_set_loras(o, &r, loras, scales, n_lora);
    fc_llm_session *s = fc_llm_session_new(ctx, m, 128);
    cr_assert_not_null(s, "%s", fc_ctx_error(ctx));
    lp_llama_decode(o, &r, prompt, n, 0, nv, NULL, lo);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, prompt, (size_t)n, FC_LLM_LOGITS_LAST, lu), FC_OK, "%s",
                 fc_ctx_error(ctx));
    int step = 0;
    for (; step < n_gen; step++) {
        fc_token to = lp_argmax(lo, nv), tu = lp_argmax(lu, nv);
        if (to != tu) {
            double gap = lp_gap(lo, nv);
            cr_assert(gap <= 2 * bound, "%s: greedy step %d: we chose %d, llama.cpp %d (its top-2 gap %.3g > %.3g)",
                      what, step, tu, to, gap, 2 * bound);
            cr_log_warn("%s: greedy step %d: a tie within the bound (gap %.3g); compared %d steps", what, step, gap,
                        step);
            break;
        }
        lp_llama_decode(o, &r, &to, 1, n + step, nv, NULL, lo);
        cr_assert_eq(fc_llm_session_eval_ex(ctx, s, &tu, 1, FC_LLM_LOGITS_LAST, lu), FC_OK, "%s", fc_ctx_error(ctx));
    }
    fc_llm_session_free(s);
    lp_llama_close(o, &r);
    free(lo);
    free(lu);
    return step;
}

static inline int lp_greedy(fc_ctx *ctx, const lp_oracle *o, const char *path, fc_llm_model *m,
                            const fc_token *prompt, int n, int n_gen, double bound, const char *what) {
    return lp_greedy_lora(ctx, o, path, m, prompt, n, n_gen, bound, what, NULL, NULL, 0);
}

/* The bytes of a file (caller frees); *n its size. */
static inline unsigned char *lp_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* fc_llm_make_model with a llama-quantize mix writes the very file
 * fc_gguf_quantize makes from the f32 model of the same seed (same types,
 * order, keys and bytes), without the f32 file. */
static inline void lp_mix_equals_quantize(fc_ctx *ctx, const char *dir, const char *arch, const char *mix) {
    char f32[512], ref[512], direct[512];
    snprintf(f32, sizeof f32, "%s/%s_f32.gguf", dir, arch);
    snprintf(ref, sizeof ref, "%s/%s_%s_ref.gguf", dir, arch, mix);
    snprintf(direct, sizeof direct, "%s/%s_%s.gguf", dir, arch, mix);
    fc_make_model_options mo = {.arch = arch, .preset = "small", .seed = lp_seed(7)};
    cr_assert_eq(fc_llm_make_model(ctx, f32, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    fc_quantize_options q = fc_quantize_default_options();
    q.type = mix;
    cr_assert_eq(fc_gguf_quantize(ctx, f32, ref, &q, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    mo.mix = mix;
    cr_assert_eq(fc_llm_make_model(ctx, direct, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    size_t na, nb;
    unsigned char *a = lp_slurp(ref, &na), *b = lp_slurp(direct, &nb);
    cr_assert_eq(na, nb, "%s %s: fc_gguf_quantize wrote %zu bytes, make-model %zu", arch, mix, na, nb);
    size_t i = 0;
    while (i < na && a[i] == b[i]) i++;
    cr_assert_eq(i, na, "%s %s: the files differ from byte %zu", arch, mix, i);
    free(a);
    free(b);
}

/* A copy of the GGUF src at dst for the bad-input tests: the u32 key `key`
 * (if non-NULL) set to v, or dropped when v < 0; the tensor `halve` (if
 * non-NULL) with its last dimension halved (half the rows of a matrix, half
 * the experts of a stack, half the elements of a vector) and only the first
 * half of its bytes, so the file stays well-formed and only the shape lies. */
static inline void lp_gguf_rewrite(fc_ctx *ctx, const char *src, const char *dst, const char *key, int64_t v,
                                   const char *halve) {
    fc_gguf *g = fc_gguf_open(ctx, src, 0);
    cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert_not_null(w, "%s", fc_ctx_error(ctx));
    for (int64_t i = 0; i < fc_gguf_kv_count(g); i++) {
        if (key && !strcmp(fc_gguf_kv_key(g, i), key)) continue;
        cr_assert_eq(fc_gguf_writer_copy_kv(w, g, i), FC_OK, "%s", fc_ctx_error(ctx));
    }
    if (key && v >= 0) cr_assert_eq(fc_gguf_set_u32(w, key, (uint32_t)v), FC_OK, "%s", fc_ctx_error(ctx));
    int found = !halve;
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(g, i, &ti));
        int64_t ne[FC_GGUF_MAX_DIMS];
        memcpy(ne, ti.ne, sizeof ne);
        uint64_t nb = ti.nbytes;
        if (halve && !strcmp(ti.name, halve)) {
            cr_assert_eq(ne[ti.n_dims - 1] % 2, 0, "%s: odd last dimension %lld", halve, (long long)ne[ti.n_dims - 1]);
            ne[ti.n_dims - 1] /= 2, nb /= 2; /* the last dimension is the outermost: half the bytes */
            found = 1;
        }
        cr_assert_eq(fc_gguf_writer_add_raw(w, ti.name, ti.type, ti.n_dims, ne, ti.data, nb), FC_OK, "%s",
                     fc_ctx_error(ctx));
    }
    cr_assert(found, "%s has no tensor %s", src, halve);
    cr_assert_eq(fc_gguf_writer_save(w, dst), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);
    fc_gguf_close(g);
}

#endif
