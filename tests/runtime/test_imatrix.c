/* SPDX-License-Identifier: MIT */
/* Importance matrices (include/fucina/imatrix.h): collecting, the file, and
 * quantizing with one.
 *
 *   - the collector against independent recomputations on random-weight
 *     models: output.weight's sums equal, bit for bit, the squares of the
 *     hidden states the embeddings API returns (the LM head's input) summed
 *     in row order; layer 0's attn_q sums equal a double-precision RMS norm
 *     of the token embeddings times attn_norm (within f32 rounding); Q, K
 *     and V (gate and up) share an input and so their sums, bit for bit;
 *     every count is the number of positions, in prefill and decode alike;
 *     an MoE model's expert counts add up to tokens x experts used, gate
 *     and up agree per expert, and the experts' sums add up to k times the
 *     router's; a freed collector stops collecting;
 *   - against llama.cpp: llama-imatrix's collection written as a libllama
 *     eval callback (cb_eval) over the same tokens and model, all outputs
 *     on as llama-imatrix asks: the same entries, the same counts (expert
 *     routing included) and sums within 1e-3 relative (measured: 2e-6
 *     dense, 1.2e-4 MoE: the activations' own agreement);
 *   - the file: a round trip keeps every value and key; each malformed
 *     file (not GGUF, legacy .dat, no or another general.type, sums without
 *     counts and the reverse, counts of the wrong shape, F16 data, a
 *     negative or NaN sum, no entries) is refused naming the file and the
 *     reason; our file is byte-identical to the one llama-imatrix's
 *     save_imatrix makes with ggml's gguf writer (the oracle), and loads it;
 *   - the mix rules an imatrix changes (Q4_0 / Q5_0 ffn_down of the first
 *     eighth -> Q4_1 / Q5_1, no Q5_K bump for IQ4_NL / IQ4_XS);
 *   - fc_gguf_quantize with an imatrix against the oracle: every tensor of
 *     the output equals ggml_quantize_chunk of the input's rows with the
 *     weights llama-quantize computes (in_sum2 / counts, 1 for an expert
 *     that saw no token; per expert for 3-D tensors), or without weights for
 *     the tensors without an entry, for nine mixes on a dense and an MoE
 *     model; the quantize.imatrix.* keys; the entry/tensor shape mismatch
 *     error. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fct_golden.h"
#include "fucina/embed.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/imatrix.h"
#include "fucina/quantize.h"
#include "ggml_oracle.h"
#include "llama_abi.h"

FCT_SUITE_WITH_TMPDIR(imatrix, 2, "fc_imatrix_");

/* fct_path's buffers rotate: the model paths are kept in their own */
static char paths[8][300];
static int n_paths;

static const char *make(const char *name, const char *arch, const char *preset, int untied)
{
    char *p = paths[n_paths++ % 8];
    snprintf(p, sizeof paths[0], "%s", fct_path(dir, name));
    const fc_make_model_options mo = {.arch = arch, .preset = preset, .seed = 7, .untied = untied};
    cr_assert_eq(fc_llm_make_model(ctx, p, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    return p;
}

static void some_tokens(fc_token *t, int64_t n, int64_t n_vocab, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (fc_token)((seed >> 33) % (uint64_t)(n_vocab - 8));
    }
}

static const fc_imatrix_entry *entry(const fc_imatrix *m, const char *name)
{
    const fc_imatrix_entry *e = fc_imatrix_find(m, name);
    cr_assert(e, "no entry for %s", name);
    return e;
}

static void same_sums(const fc_imatrix *m, const char *a, const char *b)
{
    const fc_imatrix_entry *x = entry(m, a), *y = entry(m, b);
    cr_assert_eq(x->n_cols, y->n_cols);
    cr_assert_eq(x->n_mat, y->n_mat);
    cr_assert(!memcmp(x->in_sum2, y->in_sum2, (size_t)(x->n_cols * x->n_mat) * sizeof(float)), "%s != %s", a, b);
    cr_assert(!memcmp(x->counts, y->counts, (size_t)x->n_mat * sizeof(float)), "%s counts != %s", a, b);
}

/* ---- collecting ------------------------------------------------------------------- */

Test(imatrix, collect_dense)
{
    const char *path = make("dense.gguf", "qwen3", "small", 1);
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert(m, "%s", fc_ctx_error(ctx));
    const fc_llm_hparams *hp = fc_llm_model_hparams(m);
    const int64_t E = hp->n_embd, N = 40, D = 20;
    fc_imatrix *im = fc_imatrix_new();
    fc_imatrix_collector *c = fc_imatrix_collector_new(ctx, m, im, 1);
    cr_assert(c, "%s", fc_ctx_error(ctx));
    cr_assert_eq(im->n_entries, 7 * hp->n_layer + 1, "7 matrices a layer and output.weight");
    cr_assert_null(fc_imatrix_collector_new(ctx, m, im, 1), "a second collector on one model");
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = 128;
    fc_llm_session *s = fc_llm_session_new_ex(ctx, m, &so);
    cr_assert(s);
    fc_token t[64];
    some_tokens(t, N + D, hp->n_vocab, 3);
    float *hidden = malloc((size_t)((N + D) * E) * sizeof *hidden);
    float *lg = malloc((size_t)(N * hp->n_vocab) * sizeof *lg);
    /* with logits: the head runs (an embeddings-only eval skips it, and so its sums) */
    cr_assert_eq(fc_llm_session_eval_hidden(ctx, s, 0, t, (size_t)N, FC_LLM_LOGITS_ALL, lg, hidden), FC_OK, "%s",
                 fc_ctx_error(ctx));
    /* decode steps: one row each, the other product path */
    for (int64_t i = 0; i < D; i++)
        cr_assert_eq(fc_llm_session_eval_hidden(ctx, s, 0, t + N + i, 1, FC_LLM_LOGITS_ALL, lg, hidden + (N + i) * E),
                     FC_OK);
    for (int64_t i = 0; i < im->n_entries; i++)
        cr_assert_eq(im->entries[i].counts[0], (float)(N + D), "%s: count %g", im->entries[i].name,
                     (double)im->entries[i].counts[0]);
    char a[64], b[64], v[64];
    for (int64_t l = 0; l < hp->n_layer; l++) {
        snprintf(a, sizeof a, "blk.%lld.attn_q.weight", (long long)l);
        snprintf(b, sizeof b, "blk.%lld.attn_k.weight", (long long)l);
        snprintf(v, sizeof v, "blk.%lld.attn_v.weight", (long long)l);
        same_sums(im, a, b);
        same_sums(im, a, v);
        snprintf(a, sizeof a, "blk.%lld.ffn_gate.weight", (long long)l);
        snprintf(b, sizeof b, "blk.%lld.ffn_up.weight", (long long)l);
        same_sums(im, a, b);
        snprintf(a, sizeof a, "blk.%lld.ffn_down.weight", (long long)l);
        cr_assert_eq(entry(im, a)->n_cols, hp->n_ff);
    }
    /* output.weight: the hidden states, squared and summed in row order */
    const fc_imatrix_entry *o = entry(im, "output.weight");
    cr_assert_eq(o->n_cols, E);
    for (int64_t j = 0; j < E; j++) {
        float want = 0;
        for (int64_t r = 0; r < N + D; r++) want += hidden[r * E + j] * hidden[r * E + j];
        cr_assert_eq(o->in_sum2[j], want, "output.weight column %lld: %a, hidden states give %a", (long long)j,
                     (double)o->in_sum2[j], (double)want);
    }
    /* layer 0's attention input: rmsnorm(token_embd[t]) * attn_norm, in double */
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    cr_assert(g);
    fc_gguf_tensor_info te, tn;
    cr_assert(fc_gguf_tensor_info_at(g, fc_gguf_find_tensor(g, "token_embd.weight"), &te));
    cr_assert(fc_gguf_tensor_info_at(g, fc_gguf_find_tensor(g, "blk.0.attn_norm.weight"), &tn));
    cr_assert_eq(te.type, FC_GGML_F32);
    const float *emb = te.data, *nw = tn.data;
    const fc_imatrix_entry *q0 = entry(im, "blk.0.attn_q.weight");
    for (int64_t j = 0; j < E; j++) {
        double want = 0;
        for (int64_t r = 0; r < N + D; r++) {
            const float *x = emb + (int64_t)t[r] * E;
            double ss = 0;
            for (int64_t k = 0; k < E; k++) ss += (double)x[k] * x[k];
            const double y = x[j] / sqrt(ss / (double)E + hp->rms_eps) * nw[j];
            want += y * y;
        }
        cr_assert(fabs(q0->in_sum2[j] - want) <= 2e-5 * want + 1e-30, "attn_q column %lld: %.9g, recomputed %.9g",
                  (long long)j, (double)q0->in_sum2[j], want);
    }
    fc_gguf_close(g);
    /* detached: no more sums */
    fc_imatrix_collector_free(c);
    const float before = o->in_sum2[0], cb = o->counts[0];
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, t, 4, FC_LLM_LOGITS_LAST, lg), FC_OK);
    cr_assert_eq(o->in_sum2[0], before);
    cr_assert_eq(o->counts[0], cb);
    free(lg);
    free(hidden);
    fc_llm_session_free(s);
    fc_imatrix_free(im);
    fc_llm_model_free(m);
}

Test(imatrix, collect_tied_without_output)
{
    /* a tied head is token_embd's product: llama-imatrix does not collect it */
    fc_llm_model *m = fc_llm_model_load(ctx, make("tied.gguf", "qwen3", "tiny", 0));
    cr_assert(m);
    fc_imatrix *im = fc_imatrix_new();
    fc_imatrix_collector *c = fc_imatrix_collector_new(ctx, m, im, 1);
    cr_assert(c);
    cr_assert_null(fc_imatrix_find(im, "output.weight"));
    cr_assert_null(fc_imatrix_find(im, "token_embd.weight"));
    fc_imatrix_collector_free(c);
    fc_imatrix_free(im);
    fc_llm_model_free(m);
}

Test(imatrix, collect_moe)
{
    fc_llm_model *m = fc_llm_model_load(ctx, make("moe.gguf", "qwen3moe", "tiny", 0));
    cr_assert(m, "%s", fc_ctx_error(ctx));
    const fc_llm_hparams *hp = fc_llm_model_hparams(m);
    const int64_t N = 30, NX = hp->n_expert, K = hp->n_expert_used;
    fc_imatrix *im = fc_imatrix_new();
    fc_imatrix_collector *c = fc_imatrix_collector_new(ctx, m, im, 0);
    cr_assert(c);
    fc_llm_session *s = fc_llm_session_new(ctx, m, 64);
    fc_token t[32];
    some_tokens(t, N, hp->n_vocab, 11);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, t, (size_t)N - 2, FC_LLM_LOGITS_LAST, NULL), FC_OK, "%s",
                 fc_ctx_error(ctx));
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, t + N - 2, 1, FC_LLM_LOGITS_LAST, NULL), FC_OK);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, t + N - 1, 1, FC_LLM_LOGITS_LAST, NULL), FC_OK);
    char a[64], b[64], r[64];
    for (int64_t l = 0; l < hp->n_layer; l++) {
        snprintf(a, sizeof a, "blk.%lld.ffn_gate_exps.weight", (long long)l);
        snprintf(b, sizeof b, "blk.%lld.ffn_up_exps.weight", (long long)l);
        snprintf(r, sizeof r, "blk.%lld.ffn_gate_inp.weight", (long long)l);
        same_sums(im, a, b);
        const fc_imatrix_entry *ge = entry(im, a), *gi = entry(im, r);
        cr_assert_eq(ge->n_mat, NX);
        cr_assert_eq(gi->n_mat, 1);
        cr_assert_eq(gi->counts[0], (float)N, "the router sees every token");
        float total = 0;
        for (int64_t e = 0; e < NX; e++) total += ge->counts[e];
        cr_assert_eq(total, (float)(N * K), "each token goes to %lld experts", (long long)K);
        for (int64_t j = 0; j < ge->n_cols; j++) {
            double sum = 0;
            for (int64_t e = 0; e < NX; e++) sum += ge->in_sum2[e * ge->n_cols + j];
            cr_assert(fabs(sum - (double)K * gi->in_sum2[j]) <= 1e-5 * sum, "column %lld: experts %g, router x k %g",
                      (long long)j, sum, (double)K * gi->in_sum2[j]);
        }
        snprintf(a, sizeof a, "blk.%lld.ffn_down_exps.weight", (long long)l);
        cr_assert_eq(entry(im, a)->n_cols, hp->n_ff_exp);
    }
    fc_imatrix_collector_free(c);
    fc_llm_session_free(s);
    fc_imatrix_free(im);
    fc_llm_model_free(m);
}

/* ---- the file --------------------------------------------------------------------- */

static fc_imatrix *sample(void)
{
    fc_imatrix *m = fc_imatrix_new();
    fc_imatrix_entry *a = fc_imatrix_entry_get(ctx, m, "blk.1.ffn_down.weight", 8, 1);
    fc_imatrix_entry *b = fc_imatrix_entry_get(ctx, m, "blk.0.ffn_up_exps.weight", 4, 3);
    cr_assert(a && b);
    a = (fc_imatrix_entry *)fc_imatrix_find(m, "blk.1.ffn_down.weight");
    for (int j = 0; j < 8; j++) a->in_sum2[j] = (float)j * 0.5f;
    a->counts[0] = 10;
    for (int j = 0; j < 12; j++) b->in_sum2[j] = (float)j;
    b->counts[0] = 3, b->counts[1] = 0, b->counts[2] = 7;
    cr_assert_eq(fc_imatrix_add_dataset(m, "calib.txt"), FC_OK);
    m->chunk_count = 5;
    m->chunk_size = 512;
    return m;
}

Test(imatrix, file_round_trip)
{
    fc_imatrix *m = sample();
    cr_assert_eq(m->n_entries, 2);
    cr_assert_str_eq(m->entries[0].name, "blk.0.ffn_up_exps.weight", "sorted by name");
    const char *p = fct_path(dir, "rt.imatrix.gguf");
    cr_assert_eq(fc_imatrix_save(ctx, m, p), FC_OK, "%s", fc_ctx_error(ctx));
    fc_imatrix *r = fc_imatrix_load(ctx, p);
    cr_assert(r, "%s", fc_ctx_error(ctx));
    cr_assert_eq(r->n_entries, 2);
    cr_assert_eq(r->chunk_count, 5);
    cr_assert_eq(r->chunk_size, 512);
    cr_assert_eq(r->n_datasets, 1);
    cr_assert_str_eq(r->datasets[0], "calib.txt");
    for (int i = 0; i < 2; i++) {
        const fc_imatrix_entry *x = &m->entries[i], *y = &r->entries[i];
        cr_assert_str_eq(x->name, y->name);
        cr_assert_eq(x->n_cols, y->n_cols);
        cr_assert_eq(x->n_mat, y->n_mat);
        cr_assert_arr_eq(x->in_sum2, y->in_sum2, (size_t)(x->n_cols * x->n_mat) * sizeof(float));
        cr_assert_arr_eq(x->counts, y->counts, (size_t)x->n_mat * sizeof(float));
    }
    /* llama-imatrix's layout: the keys in its order, in_sum2 [cols, mats], counts [1, mats]
     * (1-D for one matrix) */
    fc_gguf *g = fc_gguf_open(ctx, p, 0);
    cr_assert(g);
    static const char *const keys[] = {"general.type", "imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"};
    cr_assert_eq(fc_gguf_kv_count(g), 4);
    for (int i = 0; i < 4; i++) cr_assert_str_eq(fc_gguf_kv_key(g, i), keys[i]);
    fc_gguf_tensor_info ti;
    cr_assert(fc_gguf_tensor_info_at(g, 0, &ti));
    cr_assert_str_eq(ti.name, "blk.0.ffn_up_exps.weight.in_sum2");
    cr_assert(ti.n_dims == 2 && ti.ne[0] == 4 && ti.ne[1] == 3);
    cr_assert(fc_gguf_tensor_info_at(g, 1, &ti));
    cr_assert_str_eq(ti.name, "blk.0.ffn_up_exps.weight.counts");
    cr_assert(ti.n_dims == 2 && ti.ne[0] == 1 && ti.ne[1] == 3);
    fc_gguf_close(g);
    /* the quantizer's weights: sum / count, 1 for the expert that saw nothing */
    float w[4];
    fc_imatrix_weights(&r->entries[0], 1, w);
    for (int j = 0; j < 4; j++) cr_assert_eq(w[j], 1.0f);
    fc_imatrix_weights(&r->entries[0], 2, w);
    for (int j = 0; j < 4; j++) cr_assert_eq(w[j], (float)(8 + j) / 7.0f);
    /* an entry of another shape is refused by name */
    cr_assert_null(fc_imatrix_entry_get(ctx, r, "blk.1.ffn_down.weight", 9, 1));
    cr_assert(strstr(fc_ctx_error(ctx), "blk.1.ffn_down.weight"), "%s", fc_ctx_error(ctx));
    fc_imatrix_free(r);
    fc_imatrix_free(m);
}

/* A GGUF with the given KVs and F32 tensors, built with the writer. */
typedef struct ftensor {
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[2];
    float v; /* every element */
} ftensor;

static const char *write_file(const char *name, const char *gtype, const ftensor *t, int n)
{
    const char *p = fct_path(dir, name);
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    if (gtype) cr_assert_eq(fc_gguf_set_str(w, "general.type", gtype), FC_OK);
    static float buf[8][64];
    static uint16_t hbuf[64];
    for (int i = 0; i < n; i++) {
        int64_t cnt = t[i].ne[0] * (t[i].n_dims > 1 ? t[i].ne[1] : 1);
        cr_assert(cnt <= 64);
        for (int64_t k = 0; k < cnt; k++) buf[i][k] = t[i].v;
        const void *data = buf[i];
        uint64_t nb = (uint64_t)cnt * 4;
        if (t[i].type == FC_GGML_F16) {
            for (int64_t k = 0; k < cnt; k++) hbuf[k] = 0x3c00;
            data = hbuf, nb = (uint64_t)cnt * 2;
        }
        cr_assert_eq(fc_gguf_writer_add_raw(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, data, nb), FC_OK, "%s",
                     fc_ctx_error(ctx));
    }
    cr_assert_eq(fc_gguf_writer_save(w, p), FC_OK);
    fc_gguf_writer_free(w);
    return p;
}

static void refused(const char *p, const char *why)
{
    fc_ctx_clear_error(ctx);
    fc_imatrix *m = fc_imatrix_load(ctx, p);
    cr_assert_null(m, "%s was accepted", p);
    const char *e = fc_ctx_error(ctx);
    const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
    cr_assert(strstr(e, base), "the message names the file: %s", e);
    cr_assert(strstr(e, why), "the message says \"%s\": %s", why, e);
}

Test(imatrix, file_errors)
{
    const ftensor ok_s = {"w.in_sum2", FC_GGML_F32, 2, {4, 1}, 1.0f}, ok_c = {"w.counts", FC_GGML_F32, 2, {1, 1}, 2.0f};
    fc_imatrix *m = fc_imatrix_load(ctx, write_file("ok.gguf", "imatrix", (ftensor[]){ok_s, ok_c}, 2));
    cr_assert(m, "%s", fc_ctx_error(ctx));
    fc_imatrix_free(m);
    const char *legacy = fct_path(dir, "legacy.dat");
    fct_write_file(legacy, "\x02\x00\x00\x00\x05\x00\x00\x00", 8);
    refused(legacy, "legacy .dat");
    refused(fct_path(dir, "absent.gguf"), "absent.gguf");
    refused(write_file("notype.gguf", NULL, (ftensor[]){ok_s, ok_c}, 2), "no general.type");
    refused(write_file("model.gguf", "model", (ftensor[]){ok_s, ok_c}, 2), "not \"imatrix\"");
    refused(write_file("nocounts.gguf", "imatrix", (ftensor[]){ok_s}, 1), "has no \"w.counts\"");
    refused(write_file("nosums.gguf", "imatrix", (ftensor[]){ok_s, ok_c, {"v.counts", FC_GGML_F32, 2, {1, 1}, 1}}, 3),
            "no \"v.in_sum2\"");
    refused(write_file("shape.gguf", "imatrix", (ftensor[]){{"w.in_sum2", FC_GGML_F32, 2, {4, 2}, 1}, ok_c}, 2),
            "1 counts for 2 matrices");
    refused(write_file("f16.gguf", "imatrix", (ftensor[]){{"w.in_sum2", FC_GGML_F16, 2, {4, 1}, 1}, ok_c}, 2), "F16");
    refused(write_file("neg.gguf", "imatrix", (ftensor[]){{"w.in_sum2", FC_GGML_F32, 2, {4, 1}, -1}, ok_c}, 2),
            "finite and >= 0");
    refused(write_file("nan.gguf", "imatrix", (ftensor[]){{"w.in_sum2", FC_GGML_F32, 2, {4, 1}, NAN}, ok_c}, 2),
            "finite and >= 0");
    refused(write_file("empty.gguf", "imatrix", (ftensor[]){{"x.weight", FC_GGML_F32, 2, {4, 1}, 1}}, 1), "no data");
}

/* ---- quantizing with an imatrix, against ggml ------------------------------------------ */

typedef size_t (*ggml_chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows, int64_t n_per_row,
                                const float *imatrix);

/* An imatrix for every matrix of the model at path but the first layer's
 * attn_q (left out to exercise "no entry"): random sums over six decades,
 * some exactly 0, counts 1..1000, one expert with no tokens. */
static fc_imatrix *random_imatrix(const char *path, uint64_t seed)
{
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    cr_assert(g);
    fc_imatrix *m = fc_imatrix_new();
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        fc_gguf_tensor_info_at(g, i, &ti);
        if (ti.n_dims < 2 || !strncmp(ti.name, "token_embd", 10) || !strcmp(ti.name, "blk.0.attn_q.weight")) continue;
        const int64_t n_mat = ti.n_dims > 2 ? ti.ne[2] : 1;
        fc_imatrix_entry *e = fc_imatrix_entry_get(ctx, m, ti.name, ti.ne[0], n_mat);
        cr_assert(e);
        for (int64_t k = 0; k < ti.ne[0] * n_mat; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const double u = (double)(seed >> 11) * 0x1p-53;
            e->in_sum2[k] = (seed >> 7) % 9 == 0 ? 0.0f : (float)pow(10.0, 6.0 * u - 2.0);
        }
        for (int64_t k = 0; k < n_mat; k++) e->counts[k] = (float)(1 + (seed >> (k % 40)) % 1000);
        if (n_mat > 1) e->counts[n_mat - 1] = 0;
    }
    fc_gguf_close(g);
    return m;
}

static void check_against_ggml(const char *in, const char *out, const fc_imatrix *im)
{
    ggml_chunk_fn chunk = (ggml_chunk_fn)fco_ggml_sym("ggml_quantize_chunk");
    cr_assert(chunk, "the oracle has no ggml_quantize_chunk");
    fc_gguf *gi = fc_gguf_open(ctx, in, 0), *go = fc_gguf_open(ctx, out, 0);
    cr_assert(gi && go, "%s", fc_ctx_error(ctx));
    int weighted = 0, plain = 0;
    for (int64_t i = 0; i < fc_gguf_tensor_count(go); i++) {
        fc_gguf_tensor_info to, ti;
        fc_gguf_tensor_info_at(go, i, &to);
        cr_assert(fc_gguf_tensor_info_at(gi, fc_gguf_find_tensor(gi, to.name), &ti));
        if (to.type == ti.type || to.type == FC_GGML_F16 || to.type == FC_GGML_BF16) continue;
        cr_assert_eq(ti.type, FC_GGML_F32);
        const int64_t ne0 = ti.ne[0], ne1 = ti.n_dims > 1 ? ti.ne[1] : 1, n_mat = ti.n_dims > 2 ? ti.ne[2] : 1;
        const fc_imatrix_entry *e = fc_imatrix_find(im, to.name);
        unsigned char *want = malloc(to.nbytes);
        float *w = malloc((size_t)ne0 * sizeof *w);
        size_t off = 0;
        for (int64_t k = 0; k < n_mat; k++) {
            if (e) fc_imatrix_weights(e, k, w);
            off += chunk((int)to.type, (const float *)ti.data + k * ne0 * ne1, want + off, 0, ne1, ne0, e ? w : NULL);
        }
        cr_assert_eq(off, to.nbytes);
        for (uint64_t b = 0; b < to.nbytes; b++)
            if (want[b] != ((const unsigned char *)to.data)[b])
                cr_assert_fail("%s (%s, %s): byte %llu differs from ggml_quantize_chunk's", to.name, to.type_name,
                               e ? "with the imatrix" : "no entry", (unsigned long long)b);
        e ? weighted++ : plain++;
        free(want);
        free(w);
    }
    cr_assert_gt(weighted, 0);
    cr_assert_gt(plain, 0, "the tensors without an entry are compared too");
    fc_gguf_close(gi);
    fc_gguf_close(go);
}

Test(imatrix, quantize_matches_ggml)
{
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("%s", why);
    struct {
        const char *file, *arch, *preset;
    } models[] = {{"qd.gguf", "qwen3", "small"}, {"qm.gguf", "qwen3moe", "tiny"}};
    static const char *const mixes[] = {"Q4_K_M", "Q2_K", "Q3_K_S", "Q5_K_M", "Q6_K",
                                        "Q4_0",   "Q5_1", "IQ4_XS", "IQ4_NL"};
    int64_t n_weighted = 0;
    for (size_t k = 0; k < 2; k++) {
        const char *in = make(models[k].file, models[k].arch, models[k].preset, 1);
        fc_imatrix *im = random_imatrix(in, 17 + k);
        char ip[300];
        snprintf(ip, sizeof ip, "%s", fct_path(dir, "q.imatrix.gguf"));
        cr_assert_eq(fc_imatrix_save(ctx, im, ip), FC_OK);
        for (size_t x = 0; x < sizeof mixes / sizeof mixes[0]; x++) {
            char out[300];
            snprintf(out, sizeof out, "%s", fct_path(dir, "q-out.gguf"));
            fc_quantize_options o = fc_quantize_default_options();
            o.type = mixes[x];
            o.imatrix_path = ip;
            fc_quantize_summary s;
            cr_assert_eq(fc_gguf_quantize(ctx, in, out, &o, &s), FC_OK, "%s %s: %s", models[k].arch, mixes[x],
                         fc_ctx_error(ctx));
            /* (Q6_K on the tiny MoE model falls back to Q8_0 everywhere, which takes no weights) */
            if (s.n_imatrix > 0) check_against_ggml(in, out, im);
            n_weighted += s.n_imatrix;
            fc_gguf *g = fc_gguf_open(ctx, out, 0);
            const char *v = NULL;
            uint32_t n = 0;
            cr_assert_eq(fc_gguf_get_str(g, "quantize.imatrix.file", &v, NULL), FC_OK);
            cr_assert_str_eq(v, ip);
            cr_assert_eq(fc_gguf_get_u32(g, "quantize.imatrix.entries_count", &n), FC_OK);
            cr_assert_eq(n, (uint32_t)im->n_entries);
            fc_gguf_close(g);
        }
        fc_imatrix_free(im);
    }
    cr_assert_gt(n_weighted, 20);
}

Test(imatrix, quantize_shape_mismatch)
{
    const char *in = make("mm.gguf", "qwen3", "tiny", 1);
    fc_imatrix *im = fc_imatrix_new();
    cr_assert(fc_imatrix_entry_get(ctx, im, "blk.1.ffn_up.weight", 32, 1)); /* the model's rows are 64 wide */
    cr_assert(fc_imatrix_entry_get(ctx, im, "token_embd.weight", 3, 1));    /* ignored, as llama-quantize */
    char ip[300], out[300];
    snprintf(ip, sizeof ip, "%s", fct_path(dir, "mm.imatrix.gguf"));
    cr_assert_eq(fc_imatrix_save(ctx, im, ip), FC_OK);
    fc_imatrix_free(im);
    fc_quantize_options o = fc_quantize_default_options();
    o.type = "Q8_0";
    o.imatrix_path = ip;
    snprintf(out, sizeof out, "%s", fct_path(dir, "mm-out.gguf"));
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_gguf_quantize(ctx, in, out, &o, NULL), FC_ERR_INVALID_ARG);
    const char *e = fc_ctx_error(ctx);
    cr_assert(strstr(e, "blk.1.ffn_up.weight") && strstr(e, "32 x 1") && strstr(e, "64 x 1"), "%s", e);
    FILE *f = fopen(out, "rb");
    cr_assert_null(f, "no output after the error");
    fc_ctx_clear_error(ctx);
    o.imatrix_path = fct_path(dir, "none.gguf");
    fc_ctx_clear_error(ctx);
    cr_assert_neq(fc_gguf_quantize(ctx, in, out, &o, NULL), FC_OK);
    cr_assert(strstr(fc_ctx_error(ctx), "none.gguf"), "%s", fc_ctx_error(ctx));
}

/* ---- the file against ggml's GGUF writer ------------------------------------------------ */

/* llama-imatrix's save_imatrix, step for step through the oracle's ggml and
 * gguf calls (gguf_set_val_str general.type, gguf_set_arr_str datasets, the
 * two u32, then per entry in name order in_sum2 [cols, mats] and counts
 * [1, mats] via ggml_new_tensor_2d and gguf_add_tensor, gguf_write_to_file):
 * its file and ours have the same bytes, and ours loads its. */
struct ggml_context;
struct ggml_tensor;
struct gguf_context;
struct ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};

Test(imatrix, file_equals_llama_imatrix_layout)
{
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("%s", why);
    struct ggml_context *(*init)(struct ggml_init_params) =
        (struct ggml_context * (*)(struct ggml_init_params)) fco_ggml_sym("ggml_init");
    void (*gfree_ctx)(struct ggml_context *) = (void (*)(struct ggml_context *))fco_ggml_sym("ggml_free");
    struct ggml_tensor *(*new2d)(struct ggml_context *, int, int64_t, int64_t) =
        (struct ggml_tensor * (*)(struct ggml_context *, int, int64_t, int64_t)) fco_ggml_sym("ggml_new_tensor_2d");
    struct ggml_tensor *(*set_name)(struct ggml_tensor *, const char *) =
        (struct ggml_tensor * (*)(struct ggml_tensor *, const char *)) fco_ggml_sym("ggml_set_name");
    void *(*get_data)(const struct ggml_tensor *) =
        (void *(*)(const struct ggml_tensor *))fco_ggml_sym("ggml_get_data");
    struct gguf_context *(*empty)(void) = (struct gguf_context * (*)(void)) fco_ggml_sym("gguf_init_empty");
    void (*gguf_free_)(struct gguf_context *) = (void (*)(struct gguf_context *))fco_ggml_sym("gguf_free");
    void (*set_str)(struct gguf_context *, const char *, const char *) =
        (void (*)(struct gguf_context *, const char *, const char *))fco_ggml_sym("gguf_set_val_str");
    void (*set_arr_str)(struct gguf_context *, const char *, const char **, size_t) =
        (void (*)(struct gguf_context *, const char *, const char **, size_t))fco_ggml_sym("gguf_set_arr_str");
    void (*set_u32)(struct gguf_context *, const char *, uint32_t) =
        (void (*)(struct gguf_context *, const char *, uint32_t))fco_ggml_sym("gguf_set_val_u32");
    void (*add_tensor)(struct gguf_context *, const struct ggml_tensor *) =
        (void (*)(struct gguf_context *, const struct ggml_tensor *))fco_ggml_sym("gguf_add_tensor");
    bool (*write)(const struct gguf_context *, const char *, bool) =
        (bool (*)(const struct gguf_context *, const char *, bool))fco_ggml_sym("gguf_write_to_file");
    cr_assert(init && gfree_ctx && new2d && set_name && get_data && empty && gguf_free_ && set_str && set_arr_str &&
              set_u32 && add_tensor && write);

    fc_imatrix *m = sample();
    char ours[300], theirs[300];
    snprintf(ours, sizeof ours, "%s", fct_path(dir, "ours.imatrix.gguf"));
    snprintf(theirs, sizeof theirs, "%s", fct_path(dir, "theirs.imatrix.gguf"));
    cr_assert_eq(fc_imatrix_save(ctx, m, ours), FC_OK, "%s", fc_ctx_error(ctx));

    struct ggml_context *gc = init((struct ggml_init_params){1 << 20, NULL, false});
    struct gguf_context *g = empty();
    set_str(g, "general.type", "imatrix");
    const char *ds[] = {"calib.txt"};
    set_arr_str(g, "imatrix.datasets", ds, 1);
    set_u32(g, "imatrix.chunk_count", 5);
    set_u32(g, "imatrix.chunk_size", 512);
    char name[128];
    for (int64_t i = 0; i < m->n_entries; i++) {
        const fc_imatrix_entry *e = &m->entries[i];
        struct ggml_tensor *s = new2d(gc, 0 /* F32 */, e->n_cols, e->n_mat), *c = new2d(gc, 0, 1, e->n_mat);
        snprintf(name, sizeof name, "%s.in_sum2", e->name);
        set_name(s, name);
        snprintf(name, sizeof name, "%s.counts", e->name);
        set_name(c, name);
        memcpy(get_data(s), e->in_sum2, (size_t)(e->n_cols * e->n_mat) * sizeof(float));
        memcpy(get_data(c), e->counts, (size_t)e->n_mat * sizeof(float));
        add_tensor(g, s);
        add_tensor(g, c);
    }
    cr_assert(write(g, theirs, false));
    gguf_free_(g);
    gfree_ctx(gc);

    size_t na, nb;
    unsigned char *a = fct_read_file(ours, &na), *b = fct_read_file(theirs, &nb);
    cr_assert_eq(na, nb, "ours %zu bytes, llama-imatrix's way %zu", na, nb);
    size_t first = 0;
    while (first < na && a[first] == b[first]) first++;
    cr_assert_eq(first, na, "the bytes differ from llama-imatrix's layout at byte %zu: ours %02x, theirs %02x", first,
                 first < na ? a[first] : 0, first < na ? b[first] : 0);
    free(a);
    free(b);
    fc_imatrix *r = fc_imatrix_load(ctx, theirs);
    cr_assert(r, "%s", fc_ctx_error(ctx));
    cr_assert_eq(r->n_entries, m->n_entries);
    fc_imatrix_free(r);
    fc_imatrix_free(m);
}

/* ---- the mix rules that look at the imatrix ------------------------------------------ */

typedef struct plan {
    char names[16][48];
    uint32_t types[16];
    int n;
} plan;

static void on_plan(void *user, const fc_quantize_progress *p)
{
    plan *pl = user;
    if (pl->n < 16) {
        snprintf(pl->names[pl->n], sizeof pl->names[0], "%s", p->name);
        pl->types[pl->n++] = p->dst_type;
    }
}

static uint32_t planned(const char *model, const char *mix, const char *imatrix, const char *tensor)
{
    plan pl = {.n = 0};
    fc_quantize_options o = fc_quantize_default_options();
    o.type = mix;
    o.dry_run = 1;
    o.imatrix_path = imatrix;
    o.progress = on_plan;
    o.progress_user = &pl;
    cr_assert_eq(fc_gguf_quantize(ctx, model, NULL, &o, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    for (int i = 0; i < pl.n; i++)
        if (!strcmp(pl.names[i], tensor)) return pl.types[i];
    cr_assert_fail("%s is not in the plan", tensor);
    return 0;
}

/* llama.cpp's has_imatrix rules (llama_tensor_get_type_impl, ffn_down): with
 * an imatrix, Q4_0 / Q5_0 put the first eighth of the layers' ffn_down in
 * Q4_1 / Q5_1, and IQ4_NL / IQ4_XS stop bumping them to Q5_K. */
Test(imatrix, mix_rules_with_imatrix)
{
    char model[300], im[300];
    snprintf(model, sizeof model, "%s", fct_path(dir, "eight.gguf"));
    snprintf(im, sizeof im, "%s", fct_path(dir, "eight.imatrix.gguf"));
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", "qwen3"), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, "qwen3.block_count", 16), FC_OK);
    static float data[256 * 32];
    char name[64];
    for (int l = 0; l < 16; l++) {
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        cr_assert_eq(fc_gguf_writer_add_raw(w, name, FC_GGML_F32, 2, (const int64_t[]){256, 32}, data, sizeof data),
                     FC_OK);
    }
    cr_assert_eq(fc_gguf_writer_save(w, model), FC_OK);
    fc_gguf_writer_free(w);
    fc_imatrix *m = fc_imatrix_new();
    cr_assert(fc_imatrix_entry_get(ctx, m, "blk.0.ffn_down.weight", 256, 1));
    cr_assert_eq(fc_imatrix_save(ctx, m, im), FC_OK);
    fc_imatrix_free(m);
    /* 16 layers: layers 0 and 1 are the first eighth */
    cr_assert_eq(planned(model, "Q4_0", NULL, "blk.1.ffn_down.weight"), FC_GGML_Q4_0);
    cr_assert_eq(planned(model, "Q4_0", im, "blk.1.ffn_down.weight"), FC_GGML_Q4_1);
    cr_assert_eq(planned(model, "Q4_0", im, "blk.2.ffn_down.weight"), FC_GGML_Q4_0);
    cr_assert_eq(planned(model, "Q5_0", im, "blk.0.ffn_down.weight"), FC_GGML_Q5_1);
    cr_assert_eq(planned(model, "Q5_0", NULL, "blk.0.ffn_down.weight"), FC_GGML_Q5_0);
    cr_assert_eq(planned(model, "IQ4_NL", NULL, "blk.0.ffn_down.weight"), FC_GGML_Q5_K);
    cr_assert_eq(planned(model, "IQ4_NL", im, "blk.0.ffn_down.weight"), FC_GGML_IQ4_NL);
    cr_assert_eq(planned(model, "IQ4_XS", im, "blk.1.ffn_down.weight"), FC_GGML_IQ4_XS);
    cr_assert_eq(planned(model, "Q4_K_M", im, "blk.0.ffn_down.weight"),
                 planned(model, "Q4_K_M", NULL, "blk.0.ffn_down.weight"));
}

/* ---- the sums against llama.cpp's own activations ---------------------------------------- */

/* llama-imatrix's collect_imatrix, in C, as a libllama eval callback
 * (llama_context_params.cb_eval: the graph scheduler shows every node, asks
 * first, then hands it over computed): MUL_MAT nodes of a "blk." weight,
 * in_sum2 += x^2 over src1's rows, count += rows; MUL_MAT_ID nodes per
 * expert over the rows its ids route to it. ggml_tensor's layout is
 * ggml.h's (checked on every node through ggml_get_name / ggml_get_data
 * before a field is read; a mismatch skips the test). */
struct lt_tensor {
    int type;
    void *buffer;
    int64_t ne[4];
    size_t nb[4];
    int op;
    int32_t op_params[16];
    int32_t flags;
    struct lt_tensor *src[10];
    struct lt_tensor *view_src;
    size_t view_offs;
    void *data;
    char name[64];
    void *extra;
    char padding[8];
};

typedef struct lt_collect {
    fc_imatrix *m;
    const char *(*get_name)(const struct lt_tensor *);
    void *(*get_data)(const struct lt_tensor *);
    const char *(*op_desc)(const struct lt_tensor *);
    int bad_layout, n_seen;
} lt_collect;

static int lt_layout_ok(const lt_collect *c, const struct lt_tensor *t)
{
    return c->get_name(t) == t->name && c->get_data(t) == t->data;
}

static bool lt_observe(struct lt_tensor *t, bool ask, void *user)
{
    lt_collect *c = user;
    if (!lt_layout_ok(c, t)) {
        c->bad_layout = 1;
        return ask ? false : true;
    }
    const char *op = c->op_desc(t);
    const int mm = !strcmp(op, "MUL_MAT"), mid = !strcmp(op, "MUL_MAT_ID");
    if (ask) return mm || mid;
    const struct lt_tensor *w = t->src[0], *x = t->src[1];
    if (!lt_layout_ok(c, w) || !lt_layout_ok(c, x) || (mid && !lt_layout_ok(c, t->src[2]))) {
        c->bad_layout = 1;
        return true;
    }
    if (strncmp(w->name, "blk.", 4) != 0 || x->type != 0 /* F32 */) return true;
    char name[64];
    snprintf(name, sizeof name, "%s", w->name);
    char *hash = strchr(name, '#'); /* CUDA0#blk.0... never on the CPU, but llama-imatrix filters it */
    if (hash) *hash = 0;
    const int64_t cols = x->ne[0];
    if (mm) {
        fc_imatrix_entry *e = fc_imatrix_entry_get(ctx, c->m, name, cols, 1);
        cr_assert(e);
        for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < x->ne[2]; i2++)
                for (int64_t r = 0; r < x->ne[1]; r++) {
                    const float *v =
                        (const float *)((const char *)x->data + r * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3]);
                    for (int64_t j = 0; j < cols; j++) e->in_sum2[j] += v[j] * v[j];
                }
        e->counts[0] += (float)(x->ne[1] * x->ne[2] * x->ne[3]);
    } else {
        const struct lt_tensor *ids = t->src[2];
        const int64_t n_as = w->ne[2], n_ids = ids->ne[0];
        fc_imatrix_entry *e = fc_imatrix_entry_get(ctx, c->m, name, cols, n_as);
        cr_assert(e);
        for (int64_t ex = 0; ex < n_as; ex++)
            for (int64_t idx = 0; idx < n_ids; idx++)
                for (int64_t row = 0; row < x->ne[2]; row++) {
                    const int32_t cur =
                        *(const int32_t *)((const char *)ids->data + row * ids->nb[1] + idx * ids->nb[0]);
                    if (cur != ex) continue;
                    const float *v =
                        (const float *)((const char *)x->data + (idx % x->ne[1]) * x->nb[1] + row * x->nb[2]);
                    e->counts[ex] += 1;
                    for (int64_t j = 0; j < cols; j++) e->in_sum2[ex * cols + j] += v[j] * v[j];
                }
    }
    c->n_seen++;
    return true;
}

static void compare_with_llama(const char *arch, const char *preset)
{
    const fco_llama_api *api = NULL;
    const char *why = NULL;
    if (!(api = fco_llama_load(&why))) cr_skip_test("llama.cpp oracle unavailable: %s", why);
    lt_collect lc = {.m = fc_imatrix_new()};
    *(void **)&lc.get_name = fco_ggml_sym("ggml_get_name");
    *(void **)&lc.get_data = fco_ggml_sym("ggml_get_data");
    *(void **)&lc.op_desc = fco_ggml_sym("ggml_op_desc");
    cr_assert(lc.get_name && lc.get_data && lc.op_desc);
    const char *path = make(arch, arch, preset, 1);
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert(m, "%s", fc_ctx_error(ctx));
    const int64_t N = 48;
    fc_token t[48];
    some_tokens(t, N, fc_llm_model_hparams(m)->n_vocab, 29);

    struct llama_model *lm = api->load(path, api->model_defaults());
    cr_assert(lm, "llama.cpp cannot load %s", path);
    struct llama_context_params cp = api->ctx_defaults();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 64;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = FCO_LLAMA_FLASH_ATTN_DISABLED;
    cp.type_k = cp.type_v = FCO_GGML_TYPE_F32;
    cp.cb_eval = (void *)lt_observe;
    cp.cb_eval_user_data = &lc;
    struct llama_context *lctx = api->init(lm, cp);
    cr_assert(lctx);
    llama_batch b = api->batch_init((int32_t)N, 0, 1);
    for (int64_t i = 0; i < N; i++) {
        b.token[i] = t[i];
        b.pos[i] = (llama_pos)i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1; /* as llama-imatrix: else the last layer's FFN runs on the output rows only */
    }
    b.n_tokens = (int32_t)N;
    cr_assert_eq(api->decode(lctx, b), 0);
    api->batch_free(b);
    api->free_ctx(lctx);
    api->model_free(lm);
    if (lc.bad_layout) cr_skip_test("ggml_tensor's layout differs from ggml.h's as declared here");
    cr_assert_gt(lc.n_seen, 0, "llama.cpp showed no product");

    fc_imatrix *ours = fc_imatrix_new();
    fc_imatrix_collector *col = fc_imatrix_collector_new(ctx, m, ours, 0);
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = 64;
    so.kv_type = FC_F32;
    fc_llm_session *s = fc_llm_session_new_ex(ctx, m, &so);
    cr_assert(col && s);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, t, (size_t)N, FC_LLM_LOGITS_LAST, NULL), FC_OK);
    fc_imatrix_collector_free(col);
    cr_assert_eq(ours->n_entries, lc.m->n_entries, "%s: %lld entries, llama.cpp's products %lld", arch,
                 (long long)ours->n_entries, (long long)lc.m->n_entries);
    double worst = 0;
    for (int64_t i = 0; i < ours->n_entries; i++) {
        const fc_imatrix_entry *a = &ours->entries[i], *r = fc_imatrix_find(lc.m, a->name);
        cr_assert(r, "%s: llama.cpp has no product of %s", arch, a->name);
        cr_assert(a->n_cols == r->n_cols && a->n_mat == r->n_mat, "%s shape", a->name);
        cr_assert_arr_eq(a->counts, r->counts, (size_t)a->n_mat * sizeof(float), "%s: the counts differ", a->name);
        for (int64_t k = 0; k < a->n_cols * a->n_mat; k++) {
            const double d = fabs((double)a->in_sum2[k] - r->in_sum2[k]) / ((double)r->in_sum2[k] + 1e-30);
            if (d > worst) worst = d;
            cr_assert(d < 1e-3, "%s %s[%lld]: ours %.9g, llama.cpp %.9g", arch, a->name, (long long)k,
                      (double)a->in_sum2[k], (double)r->in_sum2[k]);
        }
    }
    cr_log_info("%s: %lld entries, worst relative difference of a sum %.3g", arch, (long long)ours->n_entries, worst);
    fc_llm_session_free(s);
    fc_imatrix_free(ours);
    fc_imatrix_free(lc.m);
    fc_llm_model_free(m);
}

Test(imatrix, sums_equal_llama_dense)
{
    compare_with_llama("qwen3", "small");
}
Test(imatrix, sums_equal_llama_moe)
{
    compare_with_llama("qwen3moe", "tiny");
}
