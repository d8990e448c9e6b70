/* SPDX-License-Identifier: MIT */
/* Qwen3 forward (include/fucina/llm.h) against llama.cpp.
 *
 * Random-weight models written by fc_llm_make_model are loaded by both
 * libllama (the oracle: it validates the names, keys and vocabulary as a
 * real qwen3 file) and by us; the logits of every position for the same
 * token ids must agree. llama.cpp is run with an f32 KV cache and flash
 * attention off, so with f32 weights the only differences are f32
 * summation order (measured 6e-7 x max |logit|; bound 1e-5 per position).
 * With f16 weights ggml rounds each activation row to f16 before the dot
 * product (the f16 vec_dot type) and we do not (measured 5.6e-4; bound
 * 5e-3). With q8_0 both round activations to the same q8_0 blocks, so
 * usually every position agrees to 1e-7; but an f32 order difference can
 * move one activation across a rounding boundary, changing it by a whole q8
 * step (amax/127 of its block); a flip in K or V reaches every later
 * position. Over seeds 1-20 (FCT_SEED=S picks the model seed; default 7)
 * the worst was 1.15e-2 (seed 20); bound 2e-2. For scale: NORMAL instead
 * of NeoX RoPE gives 9e-2. The argmax must match wherever the top
 * two oracle logits are further apart than twice the bound.
 *
 * The other weight types use the preset small (embd 256, ff 768, head dim
 * 64: every row width a multiple of 256, so K-quants apply to every matrix,
 * token_embd and the tied output included). Measured worst over seeds 1-12:
 * bf16 1.8e-3 (bound 5e-3), q4_0 3.7e-3, q4_K 5.5e-3, q5_K 5.3e-3, q6_K
 * 4.5e-3, the Q4_K_M mix 4.2e-4 (bound 2e-2; cosine >= 0.99989, bound
 * 0.999): as with q8_0, the difference is activations crossing a rounding
 * step of the q8 (q8_K for K-quants) encoding after an f32 order
 * difference. Every test also generates 32 tokens greedily with both
 * engines: identical for every seed. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/llm.h"
#include "fucina/quantize.h"
#include "llm_parity.h"

FCT_SUITE_WITH_TMPDIR(llm_qwen3, 1, "fc_llm_qwen3_");

/* The helpers (oracle, logits of both engines, comparison, greedy
 * generation) are in llm_parity.h, shared with test_llm_qwen3moe.c. */

static void make_ex(const char *name, const char *preset, fc_dtype dt, const char *mix, int untied, char *path,
                    size_t cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    fc_make_model_options mo = {.preset = preset, .dtype = dt, .mix = mix, .seed = lp_seed(7), .untied = untied};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_OK, "fc_llm_make_model: %s", fc_ctx_error(ctx));
}

static void make(const char *name, fc_dtype dt, int untied, char *path, size_t cap) {
    make_ex(name, NULL, dt, NULL, untied, path, cap);
}

/* Logits of every position (prefill, or prefill + 3 decode steps when
 * split_last) and, when n_gen > 0, a greedy generation of n_gen tokens. */
static void parity_file(const char *path, int untied, int split_last, double bound, double min_cos, int n_gen,
                        const char *name) {
    lp_oracle o = lp_get_oracle();
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "load: %s", fc_ctx_error(ctx));
    const fc_llm_hparams *hp = fc_llm_model_hparams(m);
    cr_assert_eq(hp->tied_output, !untied);
    fc_token *toks;
    size_t nt;
    cr_assert_eq(fc_tokenize(ctx, fc_llm_model_tokenizer(m), lp_prompt, strlen(lp_prompt), FC_TOKENIZE_PARSE_SPECIAL,
                             &toks, &nt), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_geq(nt, 8u);
    int n = (int)nt, split = split_last ? n - 3 : n;
    float *ref = lp_oracle_logits(&o, path, toks, n, split, hp->n_vocab);
    float *ours = lp_our_logits(ctx, m, toks, n, split);
    lp_stats st = lp_compare(ours, ref, n, hp->n_vocab, bound, min_cos, 0, name);
    int steps = n_gen ? lp_greedy(ctx, &o, path, m, toks, n, n_gen, bound, name) : 0;
    cr_log_info("%s: %d positions x %lld logits, worst max|diff|/max|logit| = %.3g, %d above 1e-5, min cosine %.9f; "
                "greedy %d/%d identical", name, n, (long long)hp->n_vocab, st.worst_rel, st.n_loose, st.worst_cos,
                steps, n_gen);
    free(ref);
    free(ours);
    fc_tokens_free(toks);
    fc_llm_model_free(m);
}

static void parity(fc_dtype dt, int untied, int split_last, double bound, const char *name) {
    char path[512];
    make(name, dt, untied, path, sizeof path);
    parity_file(path, untied, split_last, bound, 0.0, 32, name);
}

Test(llm_qwen3, f32_tied_prefill_matches_llama) { parity(FC_F32, 0, 0, 1e-5, "f32_tied.gguf"); }
Test(llm_qwen3, f32_untied_prefill_matches_llama) { parity(FC_F32, 1, 0, 1e-5, "f32_untied.gguf"); }
/* prefill, then three single-token decode steps through the KV cache (both sides) */
Test(llm_qwen3, f32_kv_cache_decode_matches_llama) { parity(FC_F32, 1, 1, 1e-5, "f32_decode.gguf"); }
Test(llm_qwen3, f16_prefill_matches_llama) { parity(FC_F16, 1, 0, 5e-3, "f16.gguf"); }
Test(llm_qwen3, q8_0_prefill_and_decode_match_llama) { parity(FC_Q8_0, 1, 1, 2e-2, "q8_0.gguf"); }
/* tied output over a block / f16 token_embd: get_rows decodes it, the output reuses it */
Test(llm_qwen3, f16_tied_matches_llama) { parity(FC_F16, 0, 1, 5e-3, "f16_tied.gguf"); }
Test(llm_qwen3, q8_0_tied_matches_llama) { parity(FC_Q8_0, 0, 0, 2e-2, "q8_0_tied.gguf"); }

/* ---- K-quants (preset small: every row width a multiple of 256) -------------------- */

static void parity_small(fc_dtype dt, const char *mix, double bound, double min_cos, const char *name) {
    char path[512];
    make_ex(name, "small", dt, mix, 0, path, sizeof path);
    parity_file(path, 0, 1, bound, min_cos, 32, name);
}

Test(llm_qwen3, q4_K_matches_llama) { parity_small(FC_Q4_K, NULL, 2e-2, 0.999, "small_q4_K.gguf"); }
Test(llm_qwen3, q6_K_matches_llama) { parity_small(FC_Q6_K, NULL, 2e-2, 0.999, "small_q6_K.gguf"); }
Test(llm_qwen3, bf16_matches_llama) { parity_small(FC_BF16, NULL, 5e-3, 0.9999, "small_bf16.gguf"); }
Test(llm_qwen3, q4_0_matches_llama) { parity_small(FC_Q4_0, NULL, 2e-2, 0.999, "small_q4_0.gguf"); }
Test(llm_qwen3, q5_K_matches_llama) { parity_small(FC_Q5_K, NULL, 2e-2, 0.999, "small_q5_K.gguf"); }
/* llama-quantize's Q4_K_M mix through fc_gguf_quantize (Q6_K and Q4_K tensors) */
Test(llm_qwen3, q4_K_M_mix_matches_llama) { parity_small(FC_F32, "Q4_K_M", 2e-2, 0.999, "small_q4_K_M.gguf"); }

Test(llm_qwen3, mix_is_fc_gguf_quantize_of_the_f32_model) {
    static const char *const mixes[] = {"Q4_K_M", "Q6_K", "Q5_K_S", "Q8_0"};
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) lp_mix_equals_quantize(ctx, dir, "qwen3", mixes[i]);
}

/* The ggml type of every tensor of path: norms f32, matrices `mat`. */
static void expect_types(const char *path, uint32_t mat) {
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(g, i, &ti));
        uint32_t want = ti.n_dims == 1 ? (uint32_t)fc_dtype_ggml_type(FC_F32) : mat;
        cr_assert_eq(ti.type, want, "%s: %s is %s, expected %s", path, ti.name, fc_ggml_type_name(ti.type),
                     fc_ggml_type_name(want));
    }
    fc_gguf_close(g);
}

/* small: every matrix really is Q4_K / Q6_K; tiny (row widths 64 and 128):
 * llama-quantize's fallbacks, Q4_K -> Q5_0 and Q6_K -> Q8_0, which llama.cpp
 * loads and computes like any file. Q5_0 parity over seeds 1-12: 1.9e-7
 * except seed 7 (the default), 1.58e-2 (a q8 rounding flip); bound 3e-2. */
Test(llm_qwen3, k_quant_types_and_fallbacks) {
    char path[512];
    make_ex("small_q4_K_types.gguf", "small", FC_Q4_K, NULL, 0, path, sizeof path);
    expect_types(path, (uint32_t)fc_dtype_ggml_type(FC_Q4_K));
    make_ex("tiny_q4_K.gguf", NULL, FC_Q4_K, NULL, 1, path, sizeof path);
    expect_types(path, (uint32_t)fc_dtype_ggml_type(FC_Q5_0));
    parity_file(path, 1, 1, 3e-2, 0.999, 0, "tiny_q4_K.gguf");
    make_ex("tiny_q6_K.gguf", NULL, FC_Q6_K, NULL, 1, path, sizeof path);
    expect_types(path, (uint32_t)fc_dtype_ggml_type(FC_Q8_0));
}

/* Qwen3's 151936-id vocabulary (the 0.6b preset's) on a tiny model: libllama
 * loads it and tokenizes a corpus (chat markup with added tokens, code with
 * CRLF and tabs, CJK, emoji with modifiers, digits, whitespace runs, English)
 * token for token as we do; the logits of all 151936 ids agree (f32). */
Test(llm_qwen3, qwen_vocabulary_matches_llama) {
    lp_oracle o = lp_get_oracle();
    char path[512];
    snprintf(path, sizeof path, "%s/qwen_vocab.gguf", dir);
    fc_make_model_options mo = {.seed = lp_seed(7), .untied = 1, .n_vocab = 151936};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    const fc_tokenizer *tk = fc_llm_model_tokenizer(m);
    cr_assert_eq(fc_llm_model_hparams(m)->n_vocab, 151936);
    struct llama_model_params mp = o.model_defaults();
    mp.vocab_only = 1;
    struct llama_model *lm = o.load(path, mp);
    cr_assert_not_null(lm, "llama.cpp cannot load %s", path);
    static const char *const corpus[] = {
        "<|im_start|>user\nWhat is the capital of France? Think step by step.<|im_end|>\n<|im_start|>assistant\n"
        "<think>\n\n</think>\n\n",
        "int main(void) {\r\n\treturn printf(\"%d\\n\", 42);\r\n}\r\n",
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 "
        "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd caf\xc3\xa9s",
        "1234567 + 89 = 1234656, 3.14159     \t\t   x\n\n\n",
        "The quick brown fox jumps over the lazy dog, again and again; there were more of them.",
        "<tool_call>{\"name\": \"f\"}</tool_call><|endoftext|><|fim_prefix|>a<|fim_suffix|>",
    };
    for (size_t c = 0; c < sizeof corpus / sizeof corpus[0]; c++) {
        fc_token *toks;
        size_t nt;
        cr_assert_eq(fc_tokenize(ctx, tk, corpus[c], strlen(corpus[c]), FC_TOKENIZE_PARSE_SPECIAL, &toks, &nt), FC_OK,
                     "%s", fc_ctx_error(ctx));
        llama_token lt[512];
        int32_t ln = o.tokenize(o.get_vocab(lm), corpus[c], (int32_t)strlen(corpus[c]), lt, 512, false, true);
        cr_assert_eq((size_t)ln, nt, "text %zu: llama.cpp %d tokens, ours %zu", c, ln, nt);
        for (size_t i = 0; i < nt; i++)
            cr_assert_eq(lt[i], toks[i], "text %zu token %zu: llama.cpp %d, ours %d", c, i, lt[i], toks[i]);
        fc_tokens_free(toks);
    }
    o.model_free(lm);
    fc_llm_model_free(m);
    parity_file(path, 1, 1, 1e-5, 0.0, 8, "qwen_vocab.gguf");
}

/* ---- bad input ---------------------------------------------------------------------- */

Test(llm_qwen3, bad_input_is_a_clear_error) {
    char path[512];
    fc_make_model_options mo = {.arch = "mamba", .dtype = FC_F32};
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "mamba"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    mo = (fc_make_model_options){.dtype = FC_IQ2_XXS};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "iq2_xxs") || strstr(fc_ctx_error(ctx), "IQ2_XXS"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    mo = (fc_make_model_options){.preset = "huge"};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "huge"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    mo = (fc_make_model_options){.mix = "Q9_X"};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "Q9_X"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    mo = (fc_make_model_options){.n_vocab = 1000};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "n_vocab"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    mo = (fc_make_model_options){.arch = "qwen3moe", .preset = "7b"};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "7b"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);

    make("ok.gguf", FC_F32, 0, path, sizeof path);
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    fc_llm_session *s = fc_llm_session_new(ctx, m, 4);
    cr_assert_not_null(s);
    fc_token bad[2] = {1, (fc_token)fc_llm_model_hparams(m)->n_vocab};
    cr_assert_eq(fc_llm_session_eval(ctx, s, bad, 2, NULL), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "out of range"), "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_llm_session_pos(s), 0);
    fc_ctx_clear_error(ctx);
    fc_token five[5] = {1, 2, 3, 4, 5};
    cr_assert_eq(fc_llm_session_eval(ctx, s, five, 5, NULL), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "cache"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_llm_session_free(s);
    fc_llm_model_free(m);

    /* a file that is not a qwen3 model: the error names the file and the architecture */
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", "mamba"), FC_OK);
    snprintf(path, sizeof path, "%s/mamba.gguf", dir);
    cr_assert_eq(fc_gguf_writer_save(w, path), FC_OK);
    fc_gguf_writer_free(w);
    cr_assert_null(fc_llm_model_load(ctx, path));
    cr_assert(strstr(fc_ctx_error(ctx), "mamba") && strstr(fc_ctx_error(ctx), "mamba.gguf"), "%s",
              fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);

    /* qwen3 without its hyperparameters: the error names the missing key */
    w = fc_gguf_writer_new(ctx);
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", "qwen3"), FC_OK);
    snprintf(path, sizeof path, "%s/bare.gguf", dir);
    cr_assert_eq(fc_gguf_writer_save(w, path), FC_OK);
    fc_gguf_writer_free(w);
    cr_assert_null(fc_llm_model_load(ctx, path));
    cr_assert(strstr(fc_ctx_error(ctx), "qwen3.block_count"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);

    /* a real model with one tensor of the wrong shape: the error names it */
    char good[512];
    make("good.gguf", FC_F32, 0, good, sizeof good);
    snprintf(path, sizeof path, "%s/misshaped.gguf", dir);
    lp_gguf_rewrite(ctx, good, path, NULL, 0, "blk.1.attn_k_norm.weight"); /* 16 instead of 32 */
    cr_assert_null(fc_llm_model_load(ctx, path));
    cr_assert(strstr(fc_ctx_error(ctx), "blk.1.attn_k_norm.weight"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
}
