/* SPDX-License-Identifier: MIT */
/* Session state files (fucina/llm.h: fc_llm_session_save / _load /
 * _load_prefix) on random-weight tiny models (fc_llm_make_model).
 *
 * - Continuation: a prompt evaluated, the state saved, loaded into a fresh
 *   session (of another n_ctx too), then greedy decode steps: the tokens
 *   and every step's logits equal those of the session that was never
 *   saved, bit for bit; for f16, f32 and q8_0 caches, f32 and q8_0 weights,
 *   and two sequences at different positions.
 * - Prefix reuse: load_prefix keeps the longest common token prefix of the
 *   file and a new prompt; evaluating the rest gives the bits of the saving
 *   session truncated to that prefix and given the rest.
 * - Refusals, each naming the file and the reason, the session left as it
 *   was (its position and the logits of its next step): a missing file,
 *   wrong magic, another version, truncations at several lengths, trailing
 *   bytes, a flipped byte (checksum), another model of the same shape
 *   (another seed), another family, another KV type, another number of
 *   sequences, positions that do not fit the cache; save's token count; a
 *   FIFO (without blocking) and a directory. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"

FCT_SUITE_WITH_TMPDIR(llm_state, 1, "fc_state_");

static const char *path_in(const char *name)
{
    static char p[8][512];
    static int k;
    char *b = p[k++ & 7];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

static const char *make(const char *arch, const char *name, uint64_t seed, fc_dtype dt)
{
    const char *p = path_in(name);
    const fc_make_model_options mo = {.arch = arch, .seed = seed, .dtype = dt, .untied = 1};
    cr_assert_eq(fc_llm_make_model(ctx, p, &mo), FC_OK, "%s", fc_ctx_error(ctx));
    return p;
}

static fc_llm_model *load_model(const char *path)
{
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    return m;
}

static fc_llm_session *session(fc_llm_model *m, fc_dtype kv, int64_t n_ctx, int n_seq)
{
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = n_ctx;
    so.kv_type = kv;
    so.n_seq = n_seq;
    fc_llm_session *s = fc_llm_session_new_ex(ctx, m, &so);
    cr_assert_not_null(s, "%s", fc_ctx_error(ctx));
    return s;
}

static const char *const k_prompt = "Hello world, the model is a tensor. 12 + 3 =";

static fc_token *tokens(fc_llm_model *m, const char *text, size_t *n)
{
    fc_token *t = NULL;
    cr_assert_eq(fc_tokenize(ctx, fc_llm_model_tokenizer(m), text, strlen(text), FC_TOKENIZE_ADD_SPECIAL, &t, n), FC_OK,
                 "%s", fc_ctx_error(ctx));
    cr_assert_gt(*n, 4);
    return t;
}

static fc_token argmax(const float *l, int64_t nv)
{
    int64_t b = 0;
    for (int64_t i = 1; i < nv; i++)
        if (l[i] > l[b]) b = i;
    return (fc_token)b;
}

#define STEPS 8

/* Greedy steps from `next` on sequence seq of s: the tokens and logits. */
static void decode(fc_llm_session *s, int seq, fc_token next, int64_t nv, fc_token *toks, float *logits)
{
    for (int k = 0; k < STEPS; k++) {
        toks[k] = next;
        cr_assert_eq(fc_llm_session_eval_seq(ctx, s, seq, &next, 1, FC_LLM_LOGITS_LAST, logits + k * nv), FC_OK, "%s",
                     fc_ctx_error(ctx));
        next = argmax(logits + k * nv, nv);
    }
}

static void continuation(const char *arch, fc_dtype wt, fc_dtype kv)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s.gguf", arch, fc_dtype_name(wt));
    fc_llm_model *m = load_model(make(arch, name, 7, wt));
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    size_t n;
    fc_token *p = tokens(m, k_prompt, &n);
    float *last = malloc((size_t)nv * sizeof *last);
    float *la = malloc(STEPS * (size_t)nv * sizeof *la), *lb = malloc(STEPS * (size_t)nv * sizeof *lb);
    fc_token ta[STEPS], tb[STEPS];
    /* the uninterrupted run; its state saved after the prompt */
    fc_llm_session *a = session(m, kv, 64, 1);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, a, p, n, FC_LLM_LOGITS_LAST, last), FC_OK, "%s", fc_ctx_error(ctx));
    const char *file = path_in("state.bin");
    cr_assert_eq(fc_llm_session_save(ctx, a, file, p, n), FC_OK, "%s", fc_ctx_error(ctx));
    const fc_token first = argmax(last, nv);
    decode(a, 0, first, nv, ta, la);
    /* a fresh session of another size, loaded, continues with the same bits */
    fc_llm_session *b = session(m, kv, 40, 1);
    fc_token *saved = NULL;
    size_t n_saved = 0;
    cr_assert_eq(fc_llm_session_load(ctx, b, file, &saved, &n_saved), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(n_saved, n);
    cr_assert_arr_eq(saved, p, n * sizeof *p);
    cr_assert_eq(fc_llm_session_pos(b), (int64_t)n);
    decode(b, 0, first, nv, tb, lb);
    cr_assert_arr_eq(ta, tb, sizeof ta, "%s %s kv %s: tokens differ after a reload", arch, fc_dtype_name(wt),
                     fc_dtype_name(kv));
    cr_assert_arr_eq(la, lb, STEPS * (size_t)nv * sizeof *la, "%s %s kv %s: logits differ after a reload", arch,
                     fc_dtype_name(wt), fc_dtype_name(kv));
    fc_tokens_free(saved);
    fc_llm_session_free(a);
    fc_llm_session_free(b);
    free(last), free(la), free(lb);
    fc_tokens_free(p);
    fc_llm_model_free(m);
}

Test(llm_state, continuation_f16_cache)
{
    continuation("qwen3", FC_F32, FC_F16);
}
Test(llm_state, continuation_f32_cache)
{
    continuation("llama", FC_F32, FC_F32);
}
Test(llm_state, continuation_q8_0_cache)
{
    continuation("qwen3", FC_Q8_0, FC_Q8_0);
}
Test(llm_state, continuation_gemma3_q8_0_weights)
{
    continuation("gemma3", FC_Q8_0, FC_F16);
}

/* Two sequences at different positions: both continue bit for bit. */
Test(llm_state, two_sequences)
{
    fc_llm_model *m = load_model(make("qwen3", "two.gguf", 3, FC_F32));
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    size_t n0, n1;
    fc_token *p0 = tokens(m, k_prompt, &n0), *p1 = tokens(m, "Another prompt, longer than the first one is.", &n1);
    float *last = malloc((size_t)nv * sizeof *last);
    float *la = malloc(STEPS * (size_t)nv * sizeof *la), *lb = malloc(STEPS * (size_t)nv * sizeof *lb);
    fc_token ta[STEPS], tb[STEPS];
    fc_llm_session *a = session(m, FC_F16, 64, 2);
    cr_assert_eq(fc_llm_session_eval_seq(ctx, a, 0, p0, n0, FC_LLM_LOGITS_LAST, last), FC_OK);
    const fc_token f0 = argmax(last, nv);
    cr_assert_eq(fc_llm_session_eval_seq(ctx, a, 1, p1, n1, FC_LLM_LOGITS_LAST, last), FC_OK);
    const fc_token f1 = argmax(last, nv);
    const char *file = path_in("two.bin");
    cr_assert_eq(fc_llm_session_save(ctx, a, file, p0, n0), FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_session *b = session(m, FC_F16, 64, 2);
    cr_assert_eq(fc_llm_session_load(ctx, b, file, NULL, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_llm_session_seq_pos(b, 1), (int64_t)n1);
    for (int q = 0; q < 2; q++) {
        decode(a, q, q ? f1 : f0, nv, ta, la);
        decode(b, q, q ? f1 : f0, nv, tb, lb);
        cr_assert_arr_eq(ta, tb, sizeof ta, "sequence %d", q);
        cr_assert_arr_eq(la, lb, STEPS * (size_t)nv * sizeof *la, "sequence %d", q);
    }
    fc_llm_session_free(a);
    fc_llm_session_free(b);
    free(last), free(la), free(lb);
    fc_tokens_free(p0);
    fc_tokens_free(p1);
    fc_llm_model_free(m);
}

/* load_prefix: the common prefix with a new prompt, then its rest. */
Test(llm_state, prefix_reuse)
{
    fc_llm_model *m = load_model(make("qwen3", "pre.gguf", 9, FC_F32));
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    size_t n, n2, n3;
    fc_token *p = tokens(m, k_prompt, &n);
    fc_token *q = tokens(m, "Hello world, the model is a matrix of numbers.", &n2);
    fc_token *z = tokens(m, "Something else entirely, no shared start.", &n3);
    size_t common = 0;
    while (common < n && common < n2 && p[common] == q[common]) common++;
    cr_assert_gt(common, 2);
    cr_assert_lt(common, n2);
    fc_llm_session *a = session(m, FC_F16, 64, 1);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, a, p, n, FC_LLM_LOGITS_NONE, NULL), FC_OK);
    const char *file = path_in("pre.bin");
    cr_assert_eq(fc_llm_session_save(ctx, a, file, p, n), FC_OK, "%s", fc_ctx_error(ctx));
    /* the reference: the saving session rewound to the prefix, then the rest */
    float *la = malloc((n2 - common) * (size_t)nv * sizeof *la), *lb = malloc((n2 - common) * (size_t)nv * sizeof *lb);
    cr_assert_eq(fc_llm_session_truncate(ctx, a, (int64_t)common), FC_OK);
    cr_assert_eq(fc_llm_session_eval(ctx, a, q + common, n2 - common, la), FC_OK);
    /* a small cache: the file's sequence holds more than fits, its shared prefix does */
    fc_llm_session *b = session(m, FC_F16, (int64_t)n2, 1);
    size_t reused = 99;
    cr_assert_eq(fc_llm_session_load_prefix(ctx, b, file, q, n2, &reused), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(reused, common);
    cr_assert_eq(fc_llm_session_pos(b), (int64_t)common);
    cr_assert_eq(fc_llm_session_eval(ctx, b, q + common, n2 - common, lb), FC_OK);
    cr_assert_arr_eq(la, lb, (n2 - common) * (size_t)nv * sizeof *la);
    /* the same prompt: all of it; another prompt: nothing (but the file is still checked) */
    fc_llm_session *c = session(m, FC_F16, 64, 1);
    cr_assert_eq(fc_llm_session_load_prefix(ctx, c, file, p, n, &reused), FC_OK);
    cr_assert_eq(reused, n);
    cr_assert_eq(fc_llm_session_load_prefix(ctx, c, file, z, n3, &reused), FC_OK);
    cr_assert_eq(reused, 0);
    cr_assert_eq(fc_llm_session_pos(c), 0);
    fc_llm_session_free(a);
    fc_llm_session_free(b);
    fc_llm_session_free(c);
    free(la), free(lb);
    fc_tokens_free(p);
    fc_tokens_free(q);
    fc_tokens_free(z);
    fc_llm_model_free(m);
}

/* ---- refusals ----------------------------------------------------------------------- */

static unsigned char *slurp(const char *path, size_t *n)
{
    return fct_read_file(path, n);
}

static const char *write_bytes(const char *name, const unsigned char *b, size_t n)
{
    const char *p = path_in(name);
    fct_write_file(p, b, n);
    return p;
}

/* The session refuses path with both needles in the message, and is left
 * as it was: its position, and the logits of its next step. */
static void refused(fc_llm_session *s, const char *path, const char *why, const float *ref, fc_token next, int64_t nv)
{
    const int64_t pos = fc_llm_session_pos(s);
    fc_token *t = NULL;
    size_t nt = 7;
    cr_assert_neq(fc_llm_session_load(ctx, s, path, &t, &nt), FC_OK, "%s was accepted", path);
    const char *msg = fc_ctx_error(ctx);
    cr_assert(strstr(msg, path) && strstr(msg, why), "loading %s: '%s' should name it and say '%s'", path, msg, why);
    fc_ctx_clear_error(ctx);
    cr_assert_null(t);
    cr_assert_eq(nt, 0);
    cr_assert_eq(fc_llm_session_pos(s), pos, "a refused load moved the session");
    float *l = malloc((size_t)nv * sizeof *l);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, &next, 1, FC_LLM_LOGITS_LAST, l), FC_OK);
    cr_assert_arr_eq(l, ref, (size_t)nv * sizeof *l, "a refused load changed the cache");
    cr_assert_eq(fc_llm_session_truncate(ctx, s, pos), FC_OK);
    free(l);
}

Test(llm_state, refusals)
{
    fc_llm_model *m = load_model(make("qwen3", "m.gguf", 7, FC_F32));
    fc_llm_model *other = load_model(make("qwen3", "other.gguf", 8, FC_F32));
    fc_llm_model *fam = load_model(make("llama", "fam.gguf", 7, FC_F32));
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    size_t n;
    fc_token *p = tokens(m, k_prompt, &n);
    char good[512]; /* path_in's buffers rotate */
    snprintf(good, sizeof good, "%s", path_in("good.bin"));
    {
        fc_llm_session *a = session(m, FC_F16, 64, 1);
        cr_assert_eq(fc_llm_session_eval_ex(ctx, a, p, n, FC_LLM_LOGITS_NONE, NULL), FC_OK);
        cr_assert_eq(fc_llm_session_save(ctx, a, good, p, n), FC_OK, "%s", fc_ctx_error(ctx));
        /* save: the token count must be the position */
        cr_assert_eq(fc_llm_session_save(ctx, a, path_in("bad.bin"), p, n - 1), FC_ERR_INVALID_ARG);
        cr_assert(strstr(fc_ctx_error(ctx), "holds"), "%s", fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
        fc_llm_session_free(a);
    }
    /* the victim: a session holding 3 tokens of its own, and the logits of its next step */
    fc_llm_session *s = session(m, FC_F16, 64, 1);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, p + 2, 3, FC_LLM_LOGITS_NONE, NULL), FC_OK);
    float *ref = malloc((size_t)nv * sizeof *ref);
    const fc_token next = p[0];
    cr_assert_eq(fc_llm_session_eval_ex(ctx, s, &next, 1, FC_LLM_LOGITS_LAST, ref), FC_OK);
    cr_assert_eq(fc_llm_session_truncate(ctx, s, 3), FC_OK);

    size_t len;
    unsigned char *b = slurp(good, &len);
    unsigned char *c = malloc(len + 16);
    refused(s, path_in("missing.bin"), "cannot read", ref, next, nv);
    /* a FIFO is refused without blocking in open() for a writer (it hung), a directory as well */
    cr_assert_eq(mkfifo(path_in("state.fifo"), 0600), 0);
    refused(s, path_in("state.fifo"), "not a regular file", ref, next, nv);
    refused(s, dir, "not a regular file", ref, next, nv);
    memcpy(c, b, len), c[0] = 'X';
    refused(s, write_bytes("magic.bin", c, len), "not a Fucina session state file", ref, next, nv);
    memcpy(c, b, len), c[8] = 2;
    refused(s, write_bytes("version.bin", c, len), "version 2", ref, next, nv);
    const size_t cuts[] = {0, 5, 50, 100, 120, len / 2, len - 9, len - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "cut%zu.bin", cuts[k]);
        refused(s, write_bytes(nm, b, cuts[k]), cuts[k] < 12 ? "not a Fucina" : "truncated", ref, next, nv);
    }
    memcpy(c, b, len), memset(c + len, 0, 16);
    refused(s, write_bytes("long.bin", c, len + 16), "trailing bytes", ref, next, nv);
    memcpy(c, b, len), c[len - 100] ^= 0x40;
    refused(s, write_bytes("flip.bin", c, len), "checksum", ref, next, nv);
    /* any one changed byte, header or rows, is refused (and nothing crashes) */
    uint64_t r = 12345;
    for (int k = 0; k < 300; k++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const size_t at = k < 150 ? (size_t)(r >> 33) % 200 : (size_t)(r >> 33) % len;
        memcpy(c, b, len);
        c[at] ^= (unsigned char)(1 + (r >> 20) % 255);
        const char *mp = write_bytes("mut.bin", c, len);
        cr_assert_neq(fc_llm_session_load(ctx, s, mp, NULL, NULL), FC_OK, "byte %zu changed, still loaded", at);
        cr_assert(strstr(fc_ctx_error(ctx), "mut.bin"), "%s", fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
    }
    cr_assert_eq(fc_llm_session_pos(s), 3);
    /* other models, KV types and geometries */
    fc_llm_session *o = session(other, FC_F16, 64, 1);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, o, p, n, FC_LLM_LOGITS_NONE, NULL), FC_OK);
    cr_assert_eq(fc_llm_session_save(ctx, o, path_in("other.bin"), p, n), FC_OK);
    refused(s, path_in("other.bin"), "another model", ref, next, nv);
    size_t nf;
    fc_token *pf = tokens(fam, k_prompt, &nf);
    fc_llm_session *f = session(fam, FC_F16, 64, 1);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, f, pf, nf, FC_LLM_LOGITS_NONE, NULL), FC_OK);
    cr_assert_eq(fc_llm_session_save(ctx, f, path_in("fam.bin"), pf, nf), FC_OK);
    refused(s, path_in("fam.bin"), "saved from a llama model, this one is qwen3", ref, next, nv);
    fc_llm_session *q8 = session(m, FC_Q8_0, 64, 1), *f32 = session(m, FC_F32, 64, 1);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, q8, p, n, FC_LLM_LOGITS_NONE, NULL), FC_OK);
    cr_assert_eq(fc_llm_session_save(ctx, q8, path_in("q8.bin"), p, n), FC_OK);
    refused(s, path_in("q8.bin"), "KV cache type q8_0 in the file, f16 in this session", ref, next, nv);
    refused(s, path_in("q8.bin"), "KV cache type", ref, next, nv);
    cr_assert_eq(fc_llm_session_load(ctx, f32, good, NULL, NULL), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "KV cache type f16 in the file, f32"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_llm_session *two = session(m, FC_F16, 64, 2);
    cr_assert_eq(fc_llm_session_save(ctx, two, path_in("two.bin"), NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    refused(s, path_in("two.bin"), "sequences 2 in the file, 1 in this session", ref, next, nv);
    fc_llm_session *small = session(m, FC_F16, 4, 1);
    cr_assert_eq(fc_llm_session_load(ctx, small, good, NULL, NULL), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "cache has 4"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_llm_session_pos(small), 0);
    /* still loads where it fits */
    cr_assert_eq(fc_llm_session_load(ctx, s, good, NULL, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_llm_session_pos(s), (int64_t)n);
    fc_llm_session_free(s);
    fc_llm_session_free(o);
    fc_llm_session_free(f);
    fc_llm_session_free(q8);
    fc_llm_session_free(f32);
    fc_llm_session_free(two);
    fc_llm_session_free(small);
    free(b), free(c), free(ref);
    fc_tokens_free(p);
    fc_tokens_free(pf);
    fc_llm_model_free(m);
    fc_llm_model_free(other);
    fc_llm_model_free(fam);
}

/* A LoRA adapter on blk.0.attn_v (rank 4, f32): a cache computed with it is
 * another model's for the base alone or another scale. */
static void write_adapter(const char *path, const char *base)
{
    fc_gguf *g = fc_gguf_open(ctx, base, 0);
    cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
    const char *arch;
    cr_assert_eq(fc_gguf_get_str(g, "general.architecture", &arch, NULL), FC_OK);
    const int64_t ti = fc_gguf_find_tensor(g, "blk.0.attn_v.weight");
    fc_gguf_tensor_info info;
    cr_assert(ti >= 0 && fc_gguf_tensor_info_at(g, ti, &info));
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", arch), FC_OK);
    cr_assert_eq(fc_gguf_set_str(w, "general.type", "adapter"), FC_OK);
    cr_assert_eq(fc_gguf_set_str(w, "adapter.type", "lora"), FC_OK);
    const int64_t n_in = info.ne[0], n_out = info.ne[1], r = 4;
    fc_tensor *a = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"r", r}, {"c", n_in}), 1, 0, 0.2);
    fc_tensor *b = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"r", n_out}, {"c", r}), 2, 0, 0.2);
    cr_assert(a && b, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_writer_add_tensor(w, "blk.0.attn_v.weight.lora_a", a), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_writer_add_tensor(w, "blk.0.attn_v.weight.lora_b", b), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_writer_save(w, path), FC_OK, "%s", fc_ctx_error(ctx));
    fc_release(a);
    fc_release(b);
    fc_gguf_writer_free(w);
    fc_gguf_close(g);
}

Test(llm_state, lora_adapters_are_part_of_the_model)
{
    const char *base = make("qwen3", "lb.gguf", 7, FC_F32);
    char ap[512];
    snprintf(ap, sizeof ap, "%s", path_in("a.gguf"));
    write_adapter(ap, base);
    fc_llm_model *m = load_model(base);
    fc_llm_lora *ad = fc_llm_lora_load(ctx, m, ap);
    cr_assert_not_null(ad, "%s", fc_ctx_error(ctx));
    size_t n;
    fc_token *p = tokens(m, k_prompt, &n);
    const float one = 1.0f, half = 0.5f;
    cr_assert_eq(fc_llm_model_set_loras(ctx, m, &ad, &one, 1), FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_session *a = session(m, FC_F16, 64, 1);
    cr_assert_eq(fc_llm_session_eval_ex(ctx, a, p, n, FC_LLM_LOGITS_NONE, NULL), FC_OK);
    char file[512];
    snprintf(file, sizeof file, "%s", path_in("lora.bin"));
    cr_assert_eq(fc_llm_session_save(ctx, a, file, p, n), FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_session *b = session(m, FC_F16, 64, 1);
    cr_assert_eq(fc_llm_session_load(ctx, b, file, NULL, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_llm_model_set_loras(ctx, m, &ad, &half, 1), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_llm_session_load(ctx, b, file, NULL, NULL), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "another model"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_llm_model_set_loras(ctx, m, NULL, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_llm_session_load(ctx, b, file, NULL, NULL), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "LoRA adapters differ"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_llm_session_free(a);
    fc_llm_session_free(b);
    fc_tokens_free(p);
    fc_llm_model_free(m);
    fc_llm_lora_free(ad);
}
