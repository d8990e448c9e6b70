/* SPDX-License-Identifier: MIT */
/* Perplexity and KL divergence (fucina/perplexity.h) against llama.cpp.
 *
 * Random-weight tiny models (fc_llm_make_model, seed 11: qwen3, whose
 * vocabulary adds no BOS, and llama, whose does, so the BOS replacement of
 * each chunk's first token is exercised) and the first 3000 bytes of
 * tests/runtime/data/bpe_corpus.txt, 8 chunks of 64 tokens.
 *
 * - PPL: the library's estimate against one computed here from llama.cpp's
 *   logits of the same chunks (each decoded from an empty cache, BOS first
 *   when the vocabulary adds it), with llama-perplexity's scoring written out
 *   again in this file (positions n_ctx/2 .. n_ctx-2, NLL in double): the
 *   ln PPL agree within 2e-5 x max |logit| + 1e-6 (the logits of the f32
 *   models agree to ~1e-5 x max |logit|; an NLL moves by at most twice a
 *   logit's error). The tokens are checked equal to llama.cpp's tokenization.
 * - KLD: a model against itself is exactly 0 with 100% the same top token;
 *   a Q8_0 quantization (fc_gguf_quantize) against the f32 base is small and
 *   positive and within 5% + 1e-5 of the KLD from llama.cpp's logits of both
 *   files (its own q8 activations: the two engines' quantized logits differ by
 *   more than the f32 ones); the Same-top fractions agree within 2 positions.
 * - The CLI (FUCINA_FUCINA_CLI, set by ctest): the printed final estimate is
 *   the library's (f16 cache, as the command runs) to its 4 printed decimals. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/perplexity.h"
#include "llm_parity.h"

FCT_SUITE_WITH_TMPDIR(perplexity, 1, "fc_ppl_");

#define CORPUS     FC_GOLDEN_DIR "/../runtime/data/bpe_corpus.txt"
#define N_CTX      64
#define N_CHUNK    8
#define TEXT_BYTES 3000

static const char *path_in(const char *name)
{
    static char p[8][512];
    static int k;
    char *b = p[k++ & 7];
    snprintf(b, 512, "%s", fct_path(dir, name));
    return b;
}

static const char *make(const char *arch, const char *name)
{
    const char *p = path_in(name);
    const fc_make_model_options mo = {.arch = arch, .seed = 11};
    cr_assert_eq(fc_llm_make_model(ctx, p, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    return p;
}

/* The text: the corpus's first TEXT_BYTES bytes, also written to dir/text.txt for the CLI. */
static char *text(size_t *n)
{
    size_t len;
    unsigned char *t = fct_read_file(CORPUS, &len);
    cr_assert_gt(len, TEXT_BYTES);
    t[TEXT_BYTES] = 0;
    *n = TEXT_BYTES;
    fct_write_file(path_in("text.txt"), t, TEXT_BYTES);
    return (char *)t;
}

/* The model's tokens of the text (special tokens added, as llama-perplexity), checked against llama.cpp's. */
static fc_token *tokens_of(const lp_oracle *o, const char *path, fc_llm_model *m, size_t *nt)
{
    size_t n;
    char *t = text(&n);
    fc_token *toks = NULL;
    cr_assert_eq(fc_tokenize(ctx, fc_llm_model_tokenizer(m), t, n, FC_TOKENIZE_ADD_SPECIAL, &toks, nt), FC_OK, "%s",
                 fc_ctx_error(ctx));
    cr_assert_geq(*nt, (size_t)(N_CHUNK * N_CTX), "the text is too short: %zu tokens", *nt);
    if (o) {
        struct llama_model *lm = o->load(path, o->model_defaults());
        cr_assert_not_null(lm, "llama.cpp cannot load %s", path);
        llama_token *lt = malloc((*nt + 16) * sizeof *lt);
        const int32_t ln = o->tokenize(o->get_vocab(lm), t, (int32_t)n, lt, (int32_t)(*nt + 16), true, false);
        cr_assert_eq(ln, (int32_t)*nt, "llama.cpp tokenizes the text into %d tokens, we into %zu", ln, *nt);
        for (size_t i = 0; i < *nt; i++)
            cr_assert_eq(lt[i], toks[i], "token %zu: llama.cpp %d, ours %d", i, lt[i], toks[i]);
        free(lt);
        o->model_free(lm);
    }
    free(t);
    return toks;
}

/* llama.cpp's logits of one chunk (n_ctx rows), decoded in one batch from an empty cache (f32 K/V). */
static float *llama_chunk(const lp_oracle *o, const char *path, const fc_token *chunk, int64_t nv)
{
    lp_llama r;
    r.model = o->load(path, o->model_defaults());
    cr_assert_not_null(r.model, "llama.cpp cannot load %s", path);
    struct llama_context_params cp = o->ctx_defaults();
    cp.n_ctx = N_CTX;
    cp.n_batch = cp.n_ubatch = N_CTX;
    cp.n_outputs_max = 0;
    cp.n_outputs_max_per_seq = 0;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = FCO_LLAMA_FLASH_ATTN_DISABLED;
    cp.type_k = cp.type_v = FCO_GGML_TYPE_F32;
    r.lc = o->init(r.model, cp);
    cr_assert_not_null(r.lc, "llama_init_from_model failed for %s", path);
    float *out = malloc((size_t)N_CTX * (size_t)nv * sizeof *out);
    lp_llama_decode(o, &r, chunk, N_CTX, 0, nv, out, NULL);
    lp_llama_close(o, &r);
    return out;
}

/* log softmax of a row in double, written independently of the library's */
static void ref_log_softmax(const float *l, int64_t n, double *out)
{
    double mx = l[0];
    for (int64_t i = 1; i < n; i++) mx = fmax(mx, l[i]);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp(l[i] - mx);
    for (int64_t i = 0; i < n; i++) out[i] = l[i] - mx - log(s);
}

/* chunk c of toks with llama-perplexity's BOS replacement */
static void chunk_of(const fc_llm_model *m, const fc_token *toks, int c, fc_token *out)
{
    memcpy(out, toks + (size_t)c * N_CTX, N_CTX * sizeof *out);
    const fc_tokenizer *t = fc_llm_model_tokenizer(m);
    if (fc_tokenizer_add_bos(t)) out[0] = fc_tokenizer_bos(t);
}

/* the library's PPL over N_CHUNK chunks; logprobs (may be NULL) receives every chunk's */
static double our_ppl(fc_llm_model *m, const fc_token *toks, fc_dtype kv, double *err, float *logprobs)
{
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab, ns = fc_ppl_n_scored(N_CTX);
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = N_CTX;
    so.kv_type = kv;
    fc_llm_session *s = fc_llm_session_new_ex(ctx, m, &so);
    cr_assert_not_null(s, "%s", fc_ctx_error(ctx));
    fc_ppl_acc acc = {0};
    for (int c = 0; c < N_CHUNK; c++)
        cr_assert_eq(fc_ppl_eval_chunk(ctx, s, toks + (size_t)c * N_CTX, N_CTX, &acc,
                                       logprobs ? logprobs + (size_t)c * (size_t)(ns * nv) : NULL),
                     FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_session_free(s);
    cr_assert_eq(acc.count, N_CHUNK * ns);
    return fc_ppl_estimate(&acc, err);
}

Test(perplexity, chunking)
{
    cr_assert_eq(fc_ppl_first(512), 256);
    cr_assert_eq(fc_ppl_n_scored(512), 255);
    cr_assert_eq(fc_ppl_n_scored(65), 32);
    cr_assert_eq(fc_ppl_n_chunks(1023, 512, 0), 0, "fewer than 2 * n_ctx tokens are refused");
    cr_assert_eq(fc_ppl_n_chunks(1024, 512, 0), 2);
    cr_assert_eq(fc_ppl_n_chunks(5000, 512, 0), 9);
    cr_assert_eq(fc_ppl_n_chunks(5000, 512, 3), 3);
    const fc_ppl_acc empty = {0};
    cr_assert(isnan(fc_ppl_estimate(&empty, NULL)));
    const float l[4] = {1, 2, 3, 4};
    const double want = -(1.0 - 4.0 - log(exp(-3.0) + exp(-2.0) + exp(-1.0) + 1.0));
    cr_assert_float_eq(fc_ppl_nll(l, 4, 0), want, 1e-6);
}

Test(perplexity, matches_llama)
{
    lp_oracle o = lp_get_oracle();
    const char *arch[] = {"qwen3", "llama"};
    for (int a = 0; a < 2; a++) {
        char name[64];
        snprintf(name, sizeof name, "%s.gguf", arch[a]);
        const char *path = make(arch[a], name);
        fc_llm_model *m = fc_llm_model_load(ctx, path);
        cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
        const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
        size_t nt;
        fc_token *toks = tokens_of(&o, path, m, &nt);
        double err;
        const double ppl = our_ppl(m, toks, FC_F32, &err, NULL);

        /* llama-perplexity's sums, here, from llama.cpp's logits */
        double nll = 0, nll2 = 0, scale = 0;
        int64_t count = 0;
        double *ls = malloc((size_t)nv * sizeof *ls);
        fc_token chunk[N_CTX];
        for (int c = 0; c < N_CHUNK; c++) {
            chunk_of(m, toks, c, chunk);
            float *l = llama_chunk(&o, path, chunk, nv);
            for (int64_t i = 0; i < N_CTX * nv; i++) scale = fmax(scale, fabs(l[i]));
            for (int p = N_CTX / 2; p < N_CTX - 1; p++) {
                ref_log_softmax(l + (size_t)p * (size_t)nv, nv, ls);
                const double v = -ls[chunk[p + 1]];
                nll += v;
                nll2 += v * v;
                count++;
            }
            free(l);
        }
        const double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
        const double ref_ppl = exp(mean), ref_err = ref_ppl * sqrt(var / (double)(count - 1));
        const double tol = 2e-5 * scale + 1e-6;
        cr_assert_leq(fabs(log(ppl) - log(ref_ppl)), tol,
                      "%s: PPL %.6g, from llama.cpp's logits %.6g (ln diff %.3g > %.3g)", arch[a], ppl, ref_ppl,
                      fabs(log(ppl) - log(ref_ppl)), tol);
        cr_assert_leq(fabs(err - ref_err), 1e-3 * ref_err + tol * ref_ppl, "%s: error %.6g, llama.cpp's %.6g", arch[a],
                      err, ref_err);
        cr_log_info("%s: PPL %.6g +/- %.4g, from llama.cpp's logits %.6g +/- %.4g (ln diff %.3g, max |logit| %.3g)",
                    arch[a], ppl, err, ref_ppl, ref_err, fabs(log(ppl) - log(ref_ppl)), scale);
        free(ls);
        fc_tokens_free(toks);
        fc_llm_model_free(m);
    }
}

Test(perplexity, kld_self_is_zero)
{
    const char *path = make("qwen3", "self.gguf");
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab, ns = fc_ppl_n_scored(N_CTX);
    size_t nt;
    fc_token *toks = tokens_of(NULL, path, m, &nt);
    float *lp = malloc((size_t)(N_CHUNK * ns * nv) * sizeof *lp);
    const double ppl = our_ppl(m, toks, FC_F32, NULL, lp);
    fc_kld_acc acc = {0};
    for (int c = 0; c < N_CHUNK; c++)
        for (int64_t j = 0; j < ns; j++) {
            const float *row = lp + (size_t)((c * ns + j) * nv);
            double dp = 1;
            cr_assert_eq(fc_kld_add(&acc, row, row, nv, toks[c * N_CTX + N_CTX / 2 + 1 + j], &dp), 0.0);
            cr_assert_eq(dp, 0.0);
        }
    const fc_kld_stats st = fc_kld_summary(&acc);
    cr_assert_eq(st.kld, 0.0);
    cr_assert_eq(st.p_diff, 0.0);
    cr_assert_eq(st.p_diff_rms, 0.0);
    cr_assert_eq(st.ln_ratio, 0.0);
    cr_assert_eq(st.ratio, 1.0);
    cr_assert_eq(st.diff, 0.0);
    cr_assert_float_eq(st.ln_ppl_cor, 1.0, 1e-9, "a model against itself: correlation %g", st.ln_ppl_cor);
    cr_assert_eq(st.same_top, 1.0);
    cr_assert_eq(st.ppl, st.ppl_base);
    /* the log-probabilities are rounded to f32, the direct estimate is not */
    cr_assert_leq(fabs(log(st.ppl) - log(ppl)), 1e-5 * fabs(log(ppl)), "PPL %.9g from log-probs, %.9g direct", st.ppl,
                  ppl);
    free(lp);
    fc_tokens_free(toks);
    fc_llm_model_free(m);
}

Test(perplexity, kld_q8_0_matches_llama)
{
    lp_oracle o = lp_get_oracle();
    const char *f32 = make("qwen3", "base.gguf"), *q8 = path_in("q8.gguf");
    fc_quantize_options qo = fc_quantize_default_options();
    qo.type = "Q8_0";
    cr_assert_eq(fc_gguf_quantize(ctx, f32, q8, &qo, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_model *mb = fc_llm_model_load(ctx, f32), *mq = fc_llm_model_load(ctx, q8);
    cr_assert(mb && mq, "%s", fc_ctx_error(ctx));
    const int64_t nv = fc_llm_model_hparams(mb)->n_vocab, ns = fc_ppl_n_scored(N_CTX);
    size_t nt;
    fc_token *toks = tokens_of(NULL, f32, mb, &nt);
    float *lb = malloc((size_t)(N_CHUNK * ns * nv) * sizeof *lb),
          *lq = malloc((size_t)(N_CHUNK * ns * nv) * sizeof *lq);
    our_ppl(mb, toks, FC_F32, NULL, lb);
    our_ppl(mq, toks, FC_F32, NULL, lq);
    fc_kld_acc acc = {0};
    for (int c = 0; c < N_CHUNK; c++)
        for (int64_t j = 0; j < ns; j++) {
            const size_t off = (size_t)((c * ns + j) * nv);
            fc_kld_add(&acc, lb + off, lq + off, nv, toks[c * N_CTX + N_CTX / 2 + 1 + j], NULL);
        }
    const fc_kld_stats st = fc_kld_summary(&acc);

    double kld = 0, dp = 0, dp2 = 0;
    int64_t same = 0, count = 0;
    double *pb = malloc((size_t)nv * sizeof *pb), *pq = malloc((size_t)nv * sizeof *pq);
    fc_token chunk[N_CTX];
    for (int c = 0; c < N_CHUNK; c++) {
        chunk_of(mb, toks, c, chunk);
        float *l0 = llama_chunk(&o, f32, chunk, nv), *l1 = llama_chunk(&o, q8, chunk, nv);
        for (int p = N_CTX / 2; p < N_CTX - 1; p++) {
            ref_log_softmax(l0 + (size_t)p * (size_t)nv, nv, pb);
            ref_log_softmax(l1 + (size_t)p * (size_t)nv, nv, pq);
            double k = 0;
            int64_t ab = 0, aq = 0;
            for (int64_t i = 0; i < nv; i++) {
                k += exp(pb[i]) * (pb[i] - pq[i]);
                if (pb[i] > pb[ab]) ab = i;
                if (pq[i] > pq[aq]) aq = i;
            }
            kld += k;
            same += ab == aq;
            const fc_token next = chunk[p + 1];
            const double d = exp(pq[next]) - exp(pb[next]); /* dp of the token that followed */
            dp += d, dp2 += d * d;
            count++;
        }
        free(l0);
        free(l1);
    }
    kld /= (double)count;
    dp /= (double)count;
    const double rms = sqrt(dp2 / (double)count);
    cr_assert_eq(st.count, count);
    /* dp and its RMS against llama.cpp's logits (the model's own logits differ from llama.cpp's
     * by rounding, so by a tolerance), and the derived figures as their definitions give them */
    cr_assert_leq(fabs(st.p_diff - dp), 0.05 * fabs(dp) + 1e-5, "mean dp %.6g, from llama.cpp's logits %.6g", st.p_diff, dp);
    cr_assert_leq(fabs(st.p_diff_rms - rms), 0.05 * rms + 1e-5, "RMS dp %.6g, from llama.cpp's logits %.6g", st.p_diff_rms, rms);
    cr_assert_float_eq(st.ratio, st.ppl / st.ppl_base, 1e-9 * st.ratio);
    cr_assert_float_eq(st.diff, st.ppl - st.ppl_base, 1e-9);
    cr_assert(st.ln_ppl_cor > 0.9 && st.ln_ppl_cor <= 1.0 + 1e-9, "Q8_0 vs f32: ln PPL correlation %g", st.ln_ppl_cor);
    cr_assert_gt(st.kld, 0.0, "a Q8_0 model's KLD is not positive: %g", st.kld);
    cr_assert_lt(st.kld, 0.05, "a Q8_0 model's KLD is not small: %g", st.kld);
    cr_assert_leq(fabs(st.kld - kld), 0.05 * kld + 1e-5, "KLD %.6g, from llama.cpp's logits %.6g", st.kld, kld);
    cr_assert_leq(llabs(acc.same_top - same), 2, "same top %lld, llama.cpp's %lld of %lld", (long long)acc.same_top,
                  (long long)same, (long long)count);
    cr_log_info("Q8_0 vs f32: KLD %.6g +/- %.3g (llama.cpp's logits: %.6g), same top %.2f%% (%.2f%%)", st.kld,
                st.kld_err, kld, 100 * st.same_top, 100.0 * (double)same / (double)count);
    free(pb);
    free(pq);
    free(lb);
    free(lq);
    fc_tokens_free(toks);
    fc_llm_model_free(mb);
    fc_llm_model_free(mq);
}

Test(perplexity, cli_prints_the_library_estimate)
{
    const char *cli = getenv("FUCINA_FUCINA_CLI");
    if (!cli) cr_skip_test("FUCINA_FUCINA_CLI is not set (run through ctest)");
    const char *path = make("qwen3", "cli.gguf");
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    size_t nt;
    fc_token *toks = tokens_of(NULL, path, m, &nt);
    double err;
    const double ppl = our_ppl(m, toks, FC_F16, &err, NULL);
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f '%s' -c %d --chunks %d -t 1 2>/dev/null", cli, path,
             path_in("text.txt"), N_CTX, N_CHUNK);
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0, "%s\n%s", cmd, out);
    const char *f = strstr(out, "Final estimate: PPL = ");
    cr_assert_not_null(f, "no final estimate in:\n%s", out);
    double cp, ce;
    cr_assert_eq(sscanf(f, "Final estimate: PPL = %lf +/- %lf", &cp, &ce), 2, "%s", f);
    char want[64], got[64];
    snprintf(want, sizeof want, "%.4f +/- %.5f", ppl, err);
    snprintf(got, sizeof got, "%.4f +/- %.5f", cp, ce);
    cr_assert_str_eq(got, want, "the CLI's estimate is not the library's");
    fc_tokens_free(toks);
    fc_llm_model_free(m);
}

/* llama-perplexity's percentile: linear between the neighbours of
 * fraction * (n - 1), the ends for fractions outside (0, 1). */
Test(perplexity, percentile_interpolates_as_llama_perplexity)
{
    const double v[] = {0.0, 1.0, 2.0, 4.0, 8.0};
    cr_assert_eq(fc_kld_percentile(v, 5, 0.0f), 0.0);
    cr_assert_eq(fc_kld_percentile(v, 5, 1.0f), 8.0);
    cr_assert_eq(fc_kld_percentile(v, 5, 0.5f), 2.0);            /* position 2 */
    cr_assert_float_eq(fc_kld_percentile(v, 5, 0.875f), 6.0, 1e-6); /* position 3.5: between 4 and 8 */
    cr_assert_float_eq(fc_kld_percentile(v, 5, 0.1f), 0.4, 1e-6);   /* position 0.4 */
    const double one[] = {3.0};
    cr_assert_eq(fc_kld_percentile(one, 1, 0.99f), 3.0);
}
