/* SPDX-License-Identifier: MIT */
/* LoRA fine-tuning (fucina/lm_lora.h) against the base model, finite
 * differences and llama.cpp.
 *
 * - Step 0: with B = 0 the LoRA model's training logits are the base's
 *   inference logits (f32: the bound of the graph-vs-inference tests, 1e-5;
 *   and llama f16; Q8_0: the same quantized products, 1e-4), and fc_lm_model's session
 *   (the pairs attached as an adapter) gives the base's bits.
 * - Gradients: fc_gradcheck of every A and B (B made non-zero) on a tiny
 *   f32 base with every target and the output head; activation
 *   checkpointing gives the same gradient bits.
 * - Training: 20 AdamW steps on the templated corpus lower the loss by a
 *   third on an f32 base and on its Q8_0 (fc_gguf_quantize), whose
 *   weights stay the quantized tensors; a resumed run is bitwise the
 *   uninterrupted one (the resumed half with activation checkpointing).
 * - The adapter file: loaded by fc_llm_lora_load and by llama.cpp
 *   (llama_adapter_lora_init), logits within test_lora.c's 2e-3 and greedy
 *   equal; our adapted inference equals the training graph (1e-5); f16
 *   pairs load too. The merged model (fc_llm_lora_merge) quantized to Q8_0:
 *   llama.cpp's greedy tokens are ours on that file, logits within 2e-2.
 * - Refused, naming the thing: an untrainable family, rank < 0, an unknown
 *   target, a target the model lacks (phi3's fused attn_qkv, the head of a
 *   tied model), a LoRA model through fc_lm_save_gguf. */
#define _GNU_SOURCE

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/lm_lora.h"
#include "fucina/lm_train.h"
#include "fucina/lora.h"
#include "llm_parity.h"
#include "lm_fixtures.h"

FCT_SUITE_WITH_TMPDIR(lm_lora, 1, "fc_lm_lora_");

static const char *quantize_q8(const char *in, const char *name)
{
    const char *out = lf_path(dir, name);
    fc_quantize_options qo = fc_quantize_default_options();
    qo.type = "Q8_0";
    cr_assert_eq(fc_gguf_quantize(ctx, in, out, &qo, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    return out;
}

static fc_lm *lora_model(const char *base, const fc_lm_lora_config *cfg)
{
    fc_lm *lm = fc_lm_lora_new(ctx, base, cfg);
    cr_assert_not_null(lm, "%s", fc_ctx_error(ctx));
    return lm;
}

/* ---- step 0 is the base ---------------------------------------------------------------------- */

static void step0_is_base(const char *base, double bound, const char *what)
{
    fc_llm_model *m = fc_llm_model_load(ctx, base);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    float *ref = lf_session_logits(ctx, m);
    fc_lm *lm = lora_model(base, &(fc_lm_lora_config){.rank = 4, .seed = 3});
    cr_assert_eq(fc_lm_param_count(lm), 2 * 7 * (int)fc_lm_hparams(lm)->n_layer, "the seven projections by default");
    const double d = lf_graph_vs(ctx, lm, ref, NULL, NULL);
    cr_expect_leq(d, bound, "%s: LoRA graph at step 0 vs the base's inference: %.3g > %.3g", what, d, bound);
    cr_log_info("%s: step-0 LoRA graph vs base inference max|diff|/max|logit| = %.3g", what, d);
    float *mine = lf_session_logits(ctx, fc_lm_model(lm)); /* B = 0: the attached adapter adds zeros */
    cr_expect(!memcmp(mine, ref, (size_t)(LF_ROW * nv) * sizeof *ref), "%s: the LoRA model's session is not the base's",
              what);
    free(mine);
    free(ref);
    fc_lm_free(lm);
    fc_llm_model_free(m);
}

Test(lm_lora, step0_equals_base_f32)
{
    step0_is_base(lf_make_model(ctx, dir, "qwen3", "base.gguf", 1), 1e-5, "f32");
}
Test(lm_lora, step0_equals_base_f16)
{
    const char *path = lf_path(dir, "base_f16.gguf");
    fc_make_model_options mo = {.arch = "llama", .seed = 11, .untied = 1, .dtype = FC_F16};
    cr_assert_eq(fc_llm_make_model(ctx, path, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    step0_is_base(path, 1e-5, "llama f16");
}
Test(lm_lora, step0_equals_base_q8_0)
{
    step0_is_base(quantize_q8(lf_make_model(ctx, dir, "qwen3", "base.gguf", 1), "base_q8.gguf"), 1e-4, "q8_0");
}

/* ---- gradients ------------------------------------------------------------------------------- */

/* A tiny f32 base (embd 16, one layer) with every weight random (the zero-initialised projections of
 * fc_lm_new would hide gradients), written as GGUF. */
static const char *tiny_base(void)
{
    const char *tok = lf_make_model(ctx, dir, "qwen3", "tok.gguf", 0);
    fc_lm *b = fc_lm_new(
        ctx, tok,
        &(fc_lm_config){.n_embd = 16, .n_layer = 1, .n_head = 2, .n_head_kv = 1, .n_ff = 24, .n_ctx = 16, .seed = 9});
    cr_assert_not_null(b, "%s", fc_ctx_error(ctx));
    for (int i = 0; i < fc_lm_param_count(b); i++) lf_randomize(ctx, fc_lm_param(b, i, NULL), 200 + (uint64_t)i, 0.5);
    const char *path = lf_path(dir, "tiny.gguf");
    cr_assert_eq(fc_lm_save_gguf(ctx, b, path, FC_F32), FC_OK, "%s", fc_ctx_error(ctx));
    fc_lm_free(b);
    return path;
}

static const char *const k_all[] = {"q", "k", "v", "o", "gate", "up", "down", "output"};

Test(lm_lora, gradcheck_pairs)
{
    fc_lm *lm = lora_model(tiny_base(), &(fc_lm_lora_config){.rank = 2, .alpha = 3, .targets = k_all, .n_targets = 8});
    const int np = fc_lm_param_count(lm);
    cr_assert_eq(np, 16);
    /* B = 0 would make A's gradient zero: randomise both */
    const fc_status st = lf_gradcheck_params(ctx, lm, 300, 0.6);
    cr_expect_eq(st, FC_OK, "%s", fc_ctx_error(ctx));
    fc_lm_free(lm);
}

/* ---- training ---------------------------------------------------------------------------------- */

static fc_lm_train_options train_opts(const char **train, lf_steps *log)
{
    return (fc_lm_train_options){.data = FC_LM_DATA_TEXT,
                                 .train_files = train,
                                 .n_train_files = 1,
                                 .steps = 20,
                                 .seq = 32,
                                 .batch = 4,
                                 .lora_lr = 1e-2,
                                 .on_step = lf_on_step,
                                 .user = log};
}

/* Train 20 steps on base; the loss falls by a third. The model is returned trained. */
static fc_lm *train_on(const char *base, const char *what)
{
    const char *train = lf_write_corpus(dir, "train.jsonl", 100, 1);
    lf_steps a = {0};
    fc_lm_train_options o = train_opts(&train, &a);
    fc_lm *lm = lora_model(base, &(fc_lm_lora_config){.rank = 8, .alpha = 16, .seed = 1});
    cr_assert_eq(fc_lm_train(ctx, lm, &o), FC_OK, "%s: %s", what, fc_ctx_error(ctx));
    cr_assert_eq(a.n, 20);
    cr_expect_lt(a.loss[19], 0.67 * a.loss[0], "%s: loss %.4f -> %.4f: it should fall by a third", what, a.loss[0],
                 a.loss[19]);
    cr_log_info("%s: loss %.4f -> %.4f in 20 LoRA steps", what, a.loss[0], a.loss[19]);
    return lm;
}

Test(lm_lora, loss_falls_f32_and_q8_0)
{
    const char *base = lf_make_model(ctx, dir, "qwen3", "base.gguf", 1);
    fc_lm_free(train_on(base, "f32"));
    const char *q8 = quantize_q8(base, "base_q8.gguf");
    fc_lm *lm = train_on(q8, "q8_0");
    const char *name;
    fc_lm_param(lm, 0, &name);
    cr_expect_str_eq(name, "blk.0.attn_q.weight.lora_a");
    fc_lm_free(lm);
}

Test(lm_lora, resume_is_bitwise)
{
    const char *base = lf_make_model(ctx, dir, "qwen3", "base.gguf", 1);
    const char *train = lf_write_corpus(dir, "train.jsonl", 100, 1);
    const char *ckpt = lf_path(dir, "run.safetensors"), *ckpt6 = lf_path(dir, "run6.safetensors");
    lf_steps a = {.ckpt = ckpt, .copy_to = ckpt6, .copy_at = 6}, b = {0};
    fc_lm_train_options o = train_opts(&train, &a);
    o.steps = 12, o.save_path = ckpt, o.save_every = 6, o.warmup = 0.1;
    const fc_lm_lora_config lc = {.rank = 4, .seed = 2};
    fc_lm *lm = lora_model(base, &lc);
    cr_assert_eq(fc_lm_train(ctx, lm, &o), FC_OK, "%s", fc_ctx_error(ctx));
    fc_lm *lm2 = lora_model(base, &lc);
    o.resume_path = ckpt6, o.save_path = NULL, o.save_every = 0, o.user = &b;
    o.checkpoint_layers = 1; /* recomputed layers give the same gradient bits */
    cr_assert_eq(fc_lm_train(ctx, lm2, &o), FC_OK, "%s", fc_ctx_error(ctx));
    lf_expect_resumed(ctx, &a, &b, 6, 6, lm, lm2);
    fc_lm_free(lm2);
    fc_lm_free(lm);
}

/* ---- the adapter in llama.cpp ------------------------------------------------------------------ */

Test(lm_lora, adapter_and_merge_match_llama)
{
    lp_oracle o = lp_get_oracle();
    const char *base = lf_make_model(ctx, dir, "qwen3", "base.gguf", 1);
    fc_lm *lm = train_on(base, "f32");
    const char *ad = lf_path(dir, "adapter.gguf"), *ad16 = lf_path(dir, "adapter_f16.gguf");
    cr_assert_eq(fc_lm_save_lora(ctx, lm, ad, FC_F32), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_lm_save_lora(ctx, lm, ad16, FC_F16), FC_OK, "%s", fc_ctx_error(ctx));

    /* ours: the base with the adapter file, against the training graph and against llama.cpp */
    fc_llm_model *m = fc_llm_model_load(ctx, base);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    float *plain = lf_session_logits(ctx, m);
    fc_llm_lora *a = fc_llm_lora_load(ctx, m, ad);
    cr_assert_not_null(a, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_llm_lora_alpha(a), 16.0f);
    cr_expect_eq(fc_llm_lora_n_weights(a), 14);
    const float one = 1.0f;
    cr_assert_eq(fc_llm_model_set_loras(ctx, m, &a, &one, 1), FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_lora_free(a);
    float *adapted = lf_session_logits(ctx, m);
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    const double moved = lp_rel_diff(plain, adapted, LF_ROW * nv), g = lf_graph_vs(ctx, lm, adapted, NULL, NULL);
    cr_expect_gt(moved, 1e-2, "the trained adapter changes the logits by only %.3g", moved);
    cr_expect_leq(g, 1e-5, "the adapter file applied vs the training graph: %.3g", g);
    fc_llm_lora *a16 = fc_llm_lora_load(ctx, m, ad16);
    cr_expect_not_null(a16, "%s", fc_ctx_error(ctx));
    fc_llm_lora_free(a16);

    size_t nt;
    fc_token *toks = lp_prompt_tokens(ctx, m, &nt);
    const int len = (int)nt, split = len - 3;
    float *ours = lp_our_logits(ctx, m, toks, len, split);
    float *ref = lp_oracle_logits_lora(&o, base, toks, len, split, nv, &ad, &one, 1);
    lp_stats st = lp_compare(ours, ref, len, nv, 2e-3, 0.0, 0, "trained adapter");
    const int steps = lp_greedy_lora(ctx, &o, base, m, toks, len, 24, 2e-3, "trained adapter", &ad, &one, 1);
    cr_log_info("trained adapter: changes the logits by %.3g; vs the training graph %.3g; vs llama.cpp worst %.3g; "
                "greedy %d/24",
                moved, g, st.worst_rel, steps);
    free(ours), free(ref), free(plain), free(adapted);

    /* merged (f32), then Q8_0: llama.cpp and we on that file */
    const char *merged = lf_path(dir, "merged.gguf");
    cr_assert_eq(fc_llm_lora_merge(ctx, base, &ad, &one, 1, merged, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    const char *mq = quantize_q8(merged, "merged_q8.gguf");
    fc_llm_model *mm = fc_llm_model_load(ctx, mq);
    cr_assert_not_null(mm, "%s", fc_ctx_error(ctx));
    ours = lp_our_logits(ctx, mm, toks, len, split);
    ref = lp_oracle_logits(&o, mq, toks, len, split, nv);
    lp_stats sq = lp_compare(ours, ref, len, nv, 2e-2, 0.0, 0, "merged Q8_0");
    const int qsteps = lp_greedy(ctx, &o, mq, mm, toks, len, 24, 2e-2, "merged Q8_0");
    cr_log_info("merged then Q8_0: vs llama.cpp worst %.3g; greedy %d/24", sq.worst_rel, qsteps);
    free(ours), free(ref);
    fc_llm_model_free(mm);
    fc_tokens_free(toks);
    fc_llm_model_free(m);
    fc_lm_free(lm);
}

/* ---- bad inputs -------------------------------------------------------------------------------- */

Test(lm_lora, bad_inputs_are_refused)
{
    const char *moe = lf_make_model(ctx, dir, "qwen3moe", "moe.gguf", 0);
    cr_expect_null(fc_lm_lora_new(ctx, moe, NULL));
    fct_expect_error(ctx, FC_ERR_UNSUPPORTED, "moe.gguf", "qwen3moe");
    const char *base = lf_make_model(ctx, dir, "qwen3", "base.gguf", 0); /* tied: no output.weight */
    cr_expect_null(fc_lm_lora_new(ctx, base, &(fc_lm_lora_config){.rank = -1}));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_lora_new", "rank -1");
    static const char *const unknown[] = {"q", "attn_z"};
    cr_expect_null(fc_lm_lora_new(ctx, base, &(fc_lm_lora_config){.targets = unknown, .n_targets = 2}));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_lora_new", "attn_z");
    static const char *const fused[] = {"attn_qkv"};
    cr_expect_null(fc_lm_lora_new(ctx, base, &(fc_lm_lora_config){.targets = fused, .n_targets = 1}));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "base.gguf", "blk.0.attn_qkv.weight");
    static const char *const head[] = {"output"};
    cr_expect_null(fc_lm_lora_new(ctx, base, &(fc_lm_lora_config){.targets = head, .n_targets = 1}));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "output.weight", "tied");
    cr_expect_null(fc_lm_lora_new(ctx, base, &(fc_lm_lora_config){.alpha = NAN}));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_lora_new", "alpha");
    fc_lm *lm = lora_model(base, NULL);
    cr_expect_eq(fc_lm_lora_rank(lm), 8);
    cr_expect_eq(fc_lm_lora_alpha(lm), 8.0);
    cr_expect_eq(fc_lm_save_gguf(ctx, lm, fct_path(dir, "x.gguf"), FC_F32), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_save_gguf", "fc_lm_save_lora");
    cr_expect_eq(fc_lm_save_lora(ctx, lm, fct_path(dir, "x.gguf"), FC_Q8_0), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_save_lora", "q8_0");
    fc_lm_free(lm);
    fc_lm *plain = fc_lm_load(ctx, base);
    cr_assert_not_null(plain, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_lm_save_lora(ctx, plain, fct_path(dir, "x.gguf"), FC_F32), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_save_lora", "no LoRA");
    fc_lm_free(plain);
}
