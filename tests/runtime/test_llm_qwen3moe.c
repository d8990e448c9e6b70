/* SPDX-License-Identifier: MIT */
/* Qwen3 MoE forward (include/fucina/llm.h, src/llm/moe.c) against llama.cpp.
 *
 * Random-weight qwen3moe models written by fc_llm_make_model (preset small:
 * embd 256, 2 layers, 8 experts of ff 256, 2 used, so K-quants apply to
 * every matrix) load in libllama (the oracle) and in us; the logits of every
 * position for the same tokens, and greedy generations of 32 tokens, must
 * agree. Bounds on max |diff| / max |logit| per position, with the worst
 * measured over seeds 1-24 (FCT_SEED=S picks the model seed; default 7):
 *   f32   1e-5  (7.5e-7: f32 summation order only)
 *   f16   5e-3  (2.2e-4: ggml rounds activations to f16 for the f16 dot)
 *   q8_0, q4_K, q6_K  2e-2, cosine >= 0.999 (4.9e-3, cosine 0.99990: an f32
 *         order difference moves an activation across a q8 rounding step)
 * and, for the quantized ones, at most two outlier positions (cosine >=
 * 0.9; llm_parity.h): a router tie within the quantization noise picks
 * another expert (seed 9, q4_K: layer 0 position 13, 2nd/3rd expert
 * probabilities 0.201215 / 0.201181; 0.106 x max |logit|, cosine 0.944; the
 * only seed of 24 with outliers). Greedy generations of 32 tokens were
 * identical for every seed. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/llm.h"
#include "fucina/quantize.h"
#include "llm_parity.h"

FCT_SUITE_WITH_TMPDIR(llm_qwen3moe, 1, "fc_llm_qwen3moe_");

#include "fct_alloc_count.h" /* interposes malloc & co: fct_n_malloc, COUNT_MALLOC */

static void make(const char *name, const char *preset, fc_dtype dt, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    fc_make_model_options mo = {.arch = "qwen3moe", .preset = preset, .dtype = dt, .seed = lp_seed(7)};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_OK, "fc_llm_make_model: %s", fc_ctx_error(ctx));
}

/* Prefill of the prompt but its last 3 tokens, then 3 decode steps; then a
 * greedy generation of 32 tokens. */
static void parity(const char *preset, fc_dtype dt, double bound, double min_cos, int max_outliers,
                   const char *name) {
    lp_oracle o = lp_get_oracle();
    char path[512];
    make(name, preset, dt, path, sizeof path);
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "load: %s", fc_ctx_error(ctx));
    const fc_llm_hparams *hp = fc_llm_model_hparams(m);
    cr_assert_eq(hp->arch, FC_LLM_ARCH_QWEN3MOE);
    cr_assert_eq(hp->n_expert, 8);
    cr_assert_eq(hp->n_expert_used, 2);
    fc_token *toks;
    size_t nt;
    cr_assert_eq(fc_tokenize(ctx, fc_llm_model_tokenizer(m), lp_prompt, strlen(lp_prompt), FC_TOKENIZE_PARSE_SPECIAL,
                             &toks, &nt), FC_OK, "%s", fc_ctx_error(ctx));
    int n = (int)nt, split = n - 3;
    float *ref = lp_oracle_logits(&o, path, toks, n, split, hp->n_vocab);
    float *ours = lp_our_logits(ctx, m, toks, n, split);
    lp_stats st = lp_compare(ours, ref, n, hp->n_vocab, bound, min_cos, max_outliers, name);
    int steps = lp_greedy(ctx, &o, path, m, toks, n, 32, bound, name);
    cr_log_info("%s: %d positions, worst max|diff|/max|logit| = %.3g, min cosine %.9f; greedy %d/32 identical", name,
                n, st.worst_rel, st.worst_cos, steps);
    free(ref);
    free(ours);
    fc_tokens_free(toks);
    fc_llm_model_free(m);
}

Test(llm_qwen3moe, f32_matches_llama) { parity("small", FC_F32, 1e-5, 0.0, 0, "moe_f32.gguf"); }
Test(llm_qwen3moe, f16_matches_llama) { parity("small", FC_F16, 5e-3, 0.0, 0, "moe_f16.gguf"); }
Test(llm_qwen3moe, q8_0_matches_llama) { parity("small", FC_Q8_0, 2e-2, 0.999, 2, "moe_q8_0.gguf"); }
Test(llm_qwen3moe, q4_K_matches_llama) { parity("small", FC_Q4_K, 2e-2, 0.999, 2, "moe_q4_K.gguf"); }
Test(llm_qwen3moe, q6_K_matches_llama) { parity("small", FC_Q6_K, 2e-2, 0.999, 2, "moe_q6_K.gguf"); }
/* tiny: embd 64, experts of ff 32 (f32; the K-quant fallbacks are the dense tests' subject) */
Test(llm_qwen3moe, tiny_f32_matches_llama) { parity("tiny", FC_F32, 1e-5, 0.0, 0, "moe_tiny_f32.gguf"); }

/* the 3-D expert tensors too (llama.cpp's rules for ffn_*_exps) */
Test(llm_qwen3moe, mix_is_fc_gguf_quantize_of_the_f32_model) {
    lp_mix_equals_quantize(ctx, dir, "qwen3moe", "Q4_K_M");
    lp_mix_equals_quantize(ctx, dir, "qwen3moe", "Q6_K");
}

/* ---- steady-state decode allocates nothing ----------------------------------------- */

/* The routing and the per-expert batches take their scratch from the buffer
 * pool (scoped tensors), so after warm-up a decode step (one token: every
 * expert batch has one row) makes no malloc call and no pool miss. */
static void no_alloc(fc_dtype dt) {
    char path[512], err[256];
    make("alloc.gguf", "small", dt, path, sizeof path);
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    fc_ctx *c2 = fc_ctx_new(&(fc_ctx_options){.threads = 2}, err, sizeof err);
    cr_assert_not_null(c2, "%s", err);
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = 64;
    fc_llm_session *s = fc_llm_session_new_ex(c2, m, &so);
    cr_assert_not_null(s, "%s", fc_ctx_error(c2));
    float *logits = malloc((size_t)fc_llm_model_hparams(m)->n_vocab * sizeof *logits);
    fc_token prompt[5] = {11, 12, 13, 14, 15};
    cr_assert_eq(fc_llm_session_eval_ex(c2, s, prompt, 5, FC_LLM_LOGITS_LAST, logits), FC_OK, "%s", fc_ctx_error(c2));
    unsigned long mallocs = 0;
    uint64_t misses = 0, requests = 0;
    const int warm = 2, steps = 8;
    for (int i = 0; i < warm + steps; i++) {
        fc_token t = (fc_token)(20 + 7 * i); /* different tokens: different experts */
        fc_pool_stats p0 = fc_ctx_pool_stats(c2);
#if COUNT_MALLOC
        unsigned long m0 = atomic_load(&fct_n_malloc);
#endif
        fc_status st = fc_llm_session_eval_ex(c2, s, &t, 1, FC_LLM_LOGITS_LAST, logits);
#if COUNT_MALLOC
        unsigned long m1 = atomic_load(&fct_n_malloc);
        if (i >= warm) mallocs += m1 - m0;
#endif
        fc_pool_stats p1 = fc_ctx_pool_stats(c2);
        cr_assert_eq(st, FC_OK, "%s", fc_ctx_error(c2));
        if (i >= warm) misses += p1.allocs - p0.allocs, requests += p1.requests - p0.requests;
    }
    cr_log_info("qwen3moe %s: %d decode steps after warm-up: %lu malloc calls (counted: %d), %llu pool misses of %llu "
                "requests", fc_dtype_name(dt), steps, mallocs, COUNT_MALLOC, (unsigned long long)misses,
                (unsigned long long)requests);
    cr_assert_eq(mallocs, 0, "%lu malloc calls in %d decode steps", mallocs, steps);
    cr_assert_eq(misses, 0, "%llu buffer-pool misses in %d decode steps", (unsigned long long)misses, steps);
    free(logits);
    fc_llm_session_free(s);
    fc_llm_model_free(m);
    fc_ctx_free(c2);
}

Test(llm_qwen3moe, decode_allocates_nothing_f32) { no_alloc(FC_F32); }
Test(llm_qwen3moe, decode_allocates_nothing_f16) { no_alloc(FC_F16); }
Test(llm_qwen3moe, decode_allocates_nothing_q8_0) { no_alloc(FC_Q8_0); }
/* Not asserted for block weights: there every fc_linear of a decode step makes
 * one malloc call (measured 06:25: q8_0 and q4_K, dense qwen3 as well: 15
 * per step for small = one per matmul), which is the quantized matmul's, not
 * the MoE block's. */

/* ---- bad input ---------------------------------------------------------------------- */

static void expect_load_error(const char *path, const char *needle) {
    cr_assert_null(fc_llm_model_load(ctx, path), "%s loaded", path);
    cr_assert(strstr(fc_ctx_error(ctx), needle), "error '%s' does not name '%s'", fc_ctx_error(ctx), needle);
    fc_ctx_clear_error(ctx);
}

Test(llm_qwen3moe, bad_input_is_a_clear_error) {
    char good[512], path[512];
    make("good.gguf", "tiny", FC_F32, good, sizeof good);
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    lp_gguf_rewrite(ctx, good, path, "qwen3moe.expert_count", 0, NULL);
    expect_load_error(path, "qwen3moe.expert_count");
    lp_gguf_rewrite(ctx, good, path, "qwen3moe.expert_count", -1, NULL); /* missing */
    expect_load_error(path, "qwen3moe.expert_count");
    lp_gguf_rewrite(ctx, good, path, "qwen3moe.expert_used_count", 9, NULL); /* > 8 experts */
    expect_load_error(path, "qwen3moe.expert_used_count");
    lp_gguf_rewrite(ctx, good, path, "qwen3moe.expert_used_count", 0, NULL);
    expect_load_error(path, "qwen3moe.expert_used_count");
    lp_gguf_rewrite(ctx, good, path, NULL, 0, "blk.1.ffn_down_exps.weight");
    expect_load_error(path, "blk.1.ffn_down_exps.weight");
    lp_gguf_rewrite(ctx, good, path, NULL, 0, "blk.0.ffn_gate_inp.weight");
    expect_load_error(path, "blk.0.ffn_gate_inp.weight");
    lp_gguf_rewrite(ctx, good, path, "qwen3moe.expert_feed_forward_length", 16, NULL); /* the tensors say 32 */
    expect_load_error(path, "ffn_gate_exps.weight");
    /* the good file still loads */
    fc_llm_model *m = fc_llm_model_load(ctx, good);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    fc_llm_model_free(m);
}
