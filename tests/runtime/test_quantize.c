/* SPDX-License-Identifier: MIT */
/* GGUF quantization (fc_gguf_quantize, `fucina quantize`, `fucina info FILE`).
 *
 * The reference is llama.cpp itself: the same input files (tiny qwen3 and
 * qwen3moe models with every hparam and tensor llama.cpp's loader needs,
 * written with our GGUF writer) are quantized by the oracle's
 * llama_model_quantize and by us; the per-tensor types of the two outputs
 * (read back with our reader) must agree for every mix, and the bytes must
 * agree for the formats whose encoders are byte-identical to ggml's
 * (float mixes always; block mixes once their encoders exist, else those
 * checks are skipped with a message). Also: metadata carried over, output
 * dequantized close to the input, thread-count independence, streaming
 * writer == in-memory writer, errors leaving no file, and the CLI. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/half.h"
#include "fucina/quantize.h"
#include "ggml_oracle.h"
#include "llama_quantize_abi.h"
#include "io/gguf_internal.h"
#include "quant/quant.h"

FCT_SUITE_WITH_TMPDIR(quantize, 2, "fc_quantize_");

static const char *P(const char *name) { return fct_path(dir, name); }

/* ---- the oracle (include/llama.h of the matching llama.cpp) ----------------------- */

typedef llama_quantize_default_params_fn default_params_fn;
typedef llama_quantize_fn quantize_fn;
typedef llama_log_set_fn log_set_fn;

static void quiet_log(int level, const char *text, void *user)
{
    (void)level, (void)text, (void)user;
}

/* llama_model_quantize, or a skip naming what is missing. */
static quantize_fn oracle(default_params_fn *defaults)
{
    const char *why = NULL;
    if (!fco_ggml_available(&why)) cr_skip_test("%s", why);
    quantize_fn q = (quantize_fn)fco_llama_sym("llama_model_quantize");
    *defaults = (default_params_fn)fco_llama_sym("llama_model_quantize_default_params");
    log_set_fn ls = (log_set_fn)fco_llama_sym("llama_log_set");
    if (!q || !*defaults) cr_skip_test("libllama (llama_model_quantize) is not available in %s", fco_ggml_dir());
    if (ls) ls(quiet_log, NULL);
    return q;
}

static void llama_quantize_types(const char *in, const char *out, int ftype, int pure, int out_type, int embd_type)
{
    default_params_fn defaults;
    quantize_fn q = oracle(&defaults);
    llama_model_quantize_params p = defaults();
    p.nthread = 1;
    p.ftype = ftype;
    p.pure = pure;
    if (out_type >= 0) p.output_tensor_type = out_type;
    if (embd_type >= 0) p.token_embedding_type = embd_type;
    cr_assert_eq(q(in, out, &p), 0u, "llama_model_quantize %s -> %s (ftype %d) failed", in, out, ftype);
}

static void llama_quantize(const char *in, const char *out, int ftype, int pure)
{
    llama_quantize_types(in, out, ftype, pure, -1, -1);
}

/* ---- test models ------------------------------------------------------------------ */

typedef struct model_cfg {
    const char *arch;      /* "qwen3" or "qwen3moe" */
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    int tied;              /* no output.weight */
    int n_expert, n_ff_exp;
    uint32_t wtype;        /* FC_GGML_F32 / F16 / BF16 for the 2-D weights */
} model_cfg;

static const model_cfg QWEN3 = {"qwen3", 2, 256, 4, 1, 64, 512, 320, 0, 0, 0, FC_GGML_F32};

typedef struct model_buf {
    void *p[512];
    int n;
} model_buf;

static void add(fc_gguf_writer *w, model_buf *mb, uint64_t *seed, const char *name, uint32_t type, int n_dims,
                int64_t ne0, int64_t ne1, int64_t ne2, int norm)
{
    int64_t ne[3] = {ne0, ne1, ne2}, n = ne0 * ne1 * ne2;
    fct_rng r = {*seed += 0x9e3779b97f4a7c15ull};
    size_t es = type == FC_GGML_F32 ? 4 : 2;
    unsigned char *p = malloc((size_t)n * es);
    cr_assert(p);
    for (int64_t i = 0; i < n; i++) {
        /* weights ~ U(-0.1, 0.1) with a few larger ones (outliers move block scales) */
        float v = norm ? (float)fct_uniform(&r, 0.8, 1.2) : (float)fct_uniform(&r, -0.1, 0.1);
        if (!norm && fct_next(&r) % 97 == 0) v *= 6.0f;
        if (type == FC_GGML_F32) memcpy(p + 4 * i, &v, 4);
        else if (type == FC_GGML_F16) { fc_f16 h = fc_f32_to_f16(v); memcpy(p + 2 * i, &h, 2); }
        else { fc_bf16 h = fc_f32_to_bf16(v); memcpy(p + 2 * i, &h, 2); }
    }
    cr_assert_eq(fc_gguf_writer_add_raw(w, name, type, n_dims, ne, p, (uint64_t)n * es), FC_OK, "%s",
                 fc_ctx_error(ctx));
    mb->p[mb->n++] = p;
}

/* A model in convert_hf_to_gguf's tensor order (token_embd, the layers,
 * output_norm, output): not llama.cpp's output order, so reordering shows. */
static void write_model(const char *path, const model_cfg *c)
{
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert(w);
    model_buf mb = {.n = 0};
    char k[128];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", c->arch, suffix), k)
    cr_assert_eq(fc_gguf_set_str(w, "general.architecture", c->arch), FC_OK);
    cr_assert_eq(fc_gguf_set_str(w, "general.name", "fucina test model"), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, "general.file_type", 0), FC_OK); /* replaced by the mix's */
    cr_assert_eq(fc_gguf_set_u32(w, KEY("context_length"), 4096), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, KEY("embedding_length"), (uint32_t)c->n_embd), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, KEY("block_count"), (uint32_t)c->n_layer), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)c->n_ff), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)c->n_head), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_head_kv), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim), FC_OK);
    cr_assert_eq(fc_gguf_set_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim), FC_OK);
    cr_assert_eq(fc_gguf_set_f32(w, KEY("rope.freq_base"), 1000000.0f), FC_OK);
    cr_assert_eq(fc_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f), FC_OK);
    if (c->n_expert) {
        cr_assert_eq(fc_gguf_set_u32(w, KEY("expert_count"), (uint32_t)c->n_expert), FC_OK);
        cr_assert_eq(fc_gguf_set_u32(w, KEY("expert_used_count"), 2), FC_OK);
        cr_assert_eq(fc_gguf_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)c->n_ff_exp), FC_OK);
    }
    const char *toks[] = {"<s>", "</s>", "a", "b\"c"};
    cr_assert_eq(fc_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 4), FC_OK);
    int32_t types[] = {3, 3, 1, 1};
    cr_assert_eq(fc_gguf_set_arr(w, "tokenizer.ggml.token_type", FC_GGUF_I32, types, 4), FC_OK);
#undef KEY
    uint64_t seed = 42;
    const int E = c->n_embd, Q = c->n_head * c->head_dim, KV = c->n_head_kv * c->head_dim;
    add(w, &mb, &seed, "token_embd.weight", c->wtype, 2, E, c->n_vocab, 1, 0);
    for (int l = 0; l < c->n_layer; l++) {
        char n[64];
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        add(w, &mb, &seed, T("attn_norm.weight"), FC_GGML_F32, 1, E, 1, 1, 1);
        add(w, &mb, &seed, T("attn_q.weight"), c->wtype, 2, E, Q, 1, 0);
        add(w, &mb, &seed, T("attn_k.weight"), c->wtype, 2, E, KV, 1, 0);
        add(w, &mb, &seed, T("attn_v.weight"), c->wtype, 2, E, KV, 1, 0);
        add(w, &mb, &seed, T("attn_output.weight"), c->wtype, 2, Q, E, 1, 0);
        add(w, &mb, &seed, T("attn_k_norm.weight"), FC_GGML_F32, 1, c->head_dim, 1, 1, 1);
        add(w, &mb, &seed, T("attn_q_norm.weight"), FC_GGML_F32, 1, c->head_dim, 1, 1, 1);
        add(w, &mb, &seed, T("ffn_norm.weight"), FC_GGML_F32, 1, E, 1, 1, 1);
        if (c->n_expert) {
            add(w, &mb, &seed, T("ffn_gate_inp.weight"), FC_GGML_F32, 2, E, c->n_expert, 1, 0);
            add(w, &mb, &seed, T("ffn_gate_exps.weight"), c->wtype, 3, E, c->n_ff_exp, c->n_expert, 0);
            add(w, &mb, &seed, T("ffn_down_exps.weight"), c->wtype, 3, c->n_ff_exp, E, c->n_expert, 0);
            add(w, &mb, &seed, T("ffn_up_exps.weight"), c->wtype, 3, E, c->n_ff_exp, c->n_expert, 0);
        } else {
            add(w, &mb, &seed, T("ffn_gate.weight"), c->wtype, 2, E, c->n_ff, 1, 0);
            add(w, &mb, &seed, T("ffn_down.weight"), c->wtype, 2, c->n_ff, E, 1, 0);
            add(w, &mb, &seed, T("ffn_up.weight"), c->wtype, 2, E, c->n_ff, 1, 0);
        }
#undef T
    }
    add(w, &mb, &seed, "output_norm.weight", FC_GGML_F32, 1, E, 1, 1, 1);
    if (!c->tied) add(w, &mb, &seed, "output.weight", c->wtype, 2, E, c->n_vocab, 1, 0);
    cr_assert_eq(fc_gguf_writer_save(w, path), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);
    for (int i = 0; i < mb.n; i++) free(mb.p[i]);
}

/* ---- helpers ------------------------------------------------------------------------ */

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Only the named files in dir (no temporaries left behind). */
static int dir_entries(void)
{
    DIR *d = opendir(dir);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static fc_status ours(const char *in, const char *out, const char *type, int threads, int pure)
{
    fc_quantize_options o = fc_quantize_default_options();
    o.type = type;
    o.n_threads = threads;
    o.pure = pure;
    fc_ctx_clear_error(ctx);
    return fc_gguf_quantize(ctx, in, out, &o, NULL);
}

/* Every target type of the plan has an encoder; else the name of one that does not. */
typedef struct plan {
    int n;
    char names[512][64];
    uint32_t types[512];
} plan;

static void on_plan(void *user, const fc_quantize_progress *p)
{
    plan *pl = user;
    cr_assert_lt(pl->n, 512);
    snprintf(pl->names[pl->n], 64, "%s", p->name);
    pl->types[pl->n] = p->dst_type;
    pl->n++;
}

static void our_plan(const char *in, const char *type, int pure, plan *pl)
{
    fc_quantize_options o = fc_quantize_default_options();
    o.type = type;
    o.pure = pure;
    o.dry_run = 1;
    o.progress = on_plan;
    o.progress_user = pl;
    pl->n = 0;
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_gguf_quantize(ctx, in, NULL, &o, NULL), FC_OK, "%s", fc_ctx_error(ctx));
}

static const char *missing_encoder(const plan *pl)
{
    for (int i = 0; i < pl->n; i++) {
        uint32_t t = pl->types[i];
        if (t == FC_GGML_F32 || t == FC_GGML_F16 || t == FC_GGML_BF16) continue;
        const fcq_traits *tr = fcq_traits_of(t);
        if (!tr || !tr->encode) return fc_ggml_type_name(t);
    }
    return NULL;
}

/* Our plan (names in output order and types) == the tensors of llama.cpp's file. */
static void expect_plan_matches(const plan *pl, const char *llama_out, const char *what)
{
    fc_gguf *g = fc_gguf_open(ctx, llama_out, 0);
    cr_assert(g, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_tensor_count(g), pl->n, "%s: tensor counts differ", what);
    for (int i = 0; i < pl->n; i++) {
        fc_gguf_tensor_info ti;
        cr_assert(fc_gguf_tensor_info_at(g, i, &ti));
        cr_expect_str_eq(ti.name, pl->names[i], "%s: tensor %d is %s in llama.cpp's file, %s in ours", what, i,
                         ti.name, pl->names[i]);
        cr_expect_eq(ti.type, pl->types[i], "%s: %s is %s in llama.cpp's file, %s in our plan", what, ti.name,
                     ti.type_name, fc_ggml_type_name(pl->types[i]));
    }
    fc_gguf_close(g);
}

/* Files equal byte for byte; else the first differing tensor is named. */
static void expect_same_file(const char *a, const char *b, const char *what)
{
    size_t na, nb;
    unsigned char *pa = fct_read_file(a, &na), *pb = fct_read_file(b, &nb);
    if (na == nb && !memcmp(pa, pb, na)) {
        free(pa);
        free(pb);
        return;
    }
    fc_gguf *ga = fc_gguf_open(ctx, a, 0), *gb = fc_gguf_open(ctx, b, 0);
    cr_assert(ga && gb, "%s", fc_ctx_error(ctx));
    const char *first = "(the header)";
    for (int64_t i = 0; i < fc_gguf_tensor_count(ga) && i < fc_gguf_tensor_count(gb); i++) {
        fc_gguf_tensor_info x, y;
        fc_gguf_tensor_info_at(ga, i, &x);
        fc_gguf_tensor_info_at(gb, i, &y);
        if (x.nbytes != y.nbytes || memcmp(x.data, y.data, x.nbytes)) {
            first = x.name;
            break;
        }
    }
    cr_expect_fail("%s: files differ (%zu vs %zu bytes); first differing tensor: %s", what, na, nb, first);
    fc_gguf_close(ga);
    fc_gguf_close(gb);
    free(pa);
    free(pb);
}

/* The mixes and their llama_ftype (include/llama.h), independent of our table. */
static const struct { const char *name; int ftype; } MIXES[] = {
    {"Q4_0", 2}, {"Q4_1", 3}, {"Q8_0", 7}, {"Q5_0", 8}, {"Q5_1", 9}, {"Q2_K", 10}, {"Q3_K_S", 11},
    {"Q3_K_M", 12}, {"Q3_K_L", 13}, {"Q4_K_S", 14}, {"Q4_K_M", 15}, {"Q5_K_S", 16}, {"Q5_K_M", 17},
    {"Q6_K", 18}, {"IQ4_NL", 25}, {"IQ4_XS", 30}, {"TQ1_0", 36}, {"TQ2_0", 37}, {"MXFP4_MOE", 38},
    {"F16", 1}, {"BF16", 32}, {"F32", 0},
};
#define N_MIXES (sizeof MIXES / sizeof MIXES[0])

/* Every mix (and with pure, every mix with --pure too). */
static void plans_match_llama(const model_cfg *c, const char *tag, int with_pure)
{
    char in[64], out[64], what[160];
    snprintf(in, sizeof in, "%s.gguf", tag);
    write_model(P(in), c);
    for (size_t m = 0; m < N_MIXES; m++)
        for (int pure = 0; pure < 1 + with_pure; pure++) {
            snprintf(out, sizeof out, "%s-%s-%d.gguf", tag, MIXES[m].name, pure);
            cr_assert_eq(fc_quantize_mix_ftype(MIXES[m].name), MIXES[m].ftype, "%s", MIXES[m].name);
            llama_quantize(P(in), P(out), MIXES[m].ftype, pure);
            plan pl;
            our_plan(P(in), MIXES[m].name, pure, &pl);
            snprintf(what, sizeof what, "%s %s%s", tag, MIXES[m].name, pure ? " --pure" : "");
            expect_plan_matches(&pl, P(out), what);
            unlink(P(out));
        }
}

/* ---- the per-tensor types agree with llama.cpp's, every mix ------------------------ */

Test(quantize, plan_matches_llama_cpp_dense)
{
    plans_match_llama(&QWEN3, "dense2", 1);
}

/* --output-tensor-type / --token-embedding-type, tied and untied */
Test(quantize, plan_matches_llama_cpp_tensor_type_options)
{
    model_cfg c = QWEN3;
    for (int tied = 0; tied < 2; tied++) {
        c.tied = tied;
        write_model(P("in.gguf"), &c);
        llama_quantize_types(P("in.gguf"), P("l.gguf"), 15, 0, FC_GGML_Q8_0, FC_GGML_F16);
        fc_quantize_options o = fc_quantize_default_options();
        plan pl = {.n = 0};
        o.type = "q4_k_m";
        o.dry_run = 1;
        o.output_tensor_type = FC_GGML_Q8_0;
        o.token_embedding_type = FC_GGML_F16;
        o.progress = on_plan;
        o.progress_user = &pl;
        cr_assert_eq(fc_gguf_quantize(ctx, P("in.gguf"), NULL, &o, NULL), FC_OK, "%s", fc_ctx_error(ctx));
        expect_plan_matches(&pl, P("l.gguf"), tied ? "tied, types given" : "types given");
    }
}

/* 10 layers: blk.10 sorts between blk.1 and blk.2 by name, but llama.cpp
 * orders by layer number; the use_more_bits layers differ from 2 layers. */
Test(quantize, plan_matches_llama_cpp_ten_layers_tied_f16)
{
    model_cfg c = QWEN3;
    c.n_layer = 10;
    c.tied = 1;
    c.wtype = FC_GGML_F16;
    c.n_head_kv = 4; /* n_gqa 1 */
    plans_match_llama(&c, "dense10", 0);
}

/* ne[0] = 96 everywhere: 256-blocks fall back (Q4_K -> Q5_0, Q6_K -> Q8_0, ...). */
Test(quantize, plan_matches_llama_cpp_fallbacks)
{
    model_cfg c = QWEN3;
    c.n_embd = 96;
    c.head_dim = 32;
    c.n_head = 3;
    c.n_head_kv = 1;
    c.n_ff = 160;
    plans_match_llama(&c, "odd", 1);
}

Test(quantize, plan_matches_llama_cpp_moe)
{
    model_cfg c = QWEN3;
    c.arch = "qwen3moe";
    c.n_layer = 3;
    c.n_expert = 4;
    c.n_ff_exp = 256;
    plans_match_llama(&c, "moe4", 0);
    c.n_expert = 8; /* the 8-expert bumps (attn_v / attn_k to Q8_0, attn_output to Q5_K) */
    c.n_ff_exp = 224;
    plans_match_llama(&c, "moe8", 0);
}

/* --allow-requantize: a model already in a block format is refused by
 * default, as llama_model_quantize refuses it (allow_requantize false), and
 * re-encoded with the option; --leave-output-tensor: output.weight keeps
 * its type, as llama.cpp's quantize_output_tensor = false keeps it. */
Test(quantize, requantize_refused_unless_allowed_as_llama_cpp)
{
    write_model(P("in.gguf"), &QWEN3);
    cr_assert_eq(ours(P("in.gguf"), P("q8.gguf"), "Q8_0", 1, 0), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(ours(P("q8.gguf"), P("q4.gguf"), "Q4_0", 1, 0), FC_ERR_INVALID_ARG);
    cr_assert(strstr(fc_ctx_error(ctx), "is already Q8_0") && strstr(fc_ctx_error(ctx), "--allow-requantize"), "%s",
              fc_ctx_error(ctx));
    struct stat st;
    cr_assert(stat(P("q4.gguf"), &st) != 0, "a refused requantization wrote a file");
    /* llama.cpp refuses it too */
    default_params_fn defaults;
    quantize_fn q = oracle(&defaults);
    llama_model_quantize_params lp = defaults();
    lp.nthread = 1;
    lp.ftype = 2; /* LLAMA_FTYPE_MOSTLY_Q4_0 */
    cr_assert_neq(q(P("q8.gguf"), P("lq4.gguf"), &lp), 0u, "llama_model_quantize requantized without allow_requantize");
    fc_quantize_options o = fc_quantize_default_options();
    o.type = "Q4_0";
    o.n_threads = 1;
    o.allow_requantize = 1;
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_gguf_quantize(ctx, P("q8.gguf"), P("q4.gguf"), &o, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    lp.allow_requantize = true;
    cr_assert_eq(q(P("q8.gguf"), P("lq4.gguf"), &lp), 0u);
    expect_same_file(P("q4.gguf"), P("lq4.gguf"), "Q8_0 -> Q4_0 with allow_requantize");
}

Test(quantize, leave_output_tensor_plan_matches_llama_cpp)
{
    model_cfg c = QWEN3; /* untied: output.weight exists */
    write_model(P("in.gguf"), &c);
    default_params_fn defaults;
    quantize_fn q = oracle(&defaults);
    llama_model_quantize_params lp = defaults();
    lp.nthread = 1;
    lp.ftype = 15; /* Q4_K_M */
    lp.quantize_output_tensor = false;
    cr_assert_eq(q(P("in.gguf"), P("l.gguf"), &lp), 0u);
    fc_quantize_options o = fc_quantize_default_options();
    plan pl = {.n = 0};
    o.type = "Q4_K_M";
    o.dry_run = 1;
    o.leave_output_tensor = 1;
    o.progress = on_plan;
    o.progress_user = &pl;
    cr_assert_eq(fc_gguf_quantize(ctx, P("in.gguf"), NULL, &o, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    int found = 0;
    for (int i = 0; i < pl.n; i++)
        if (!strcmp(pl.names[i], "output.weight")) {
            found = 1;
            cr_assert_eq(pl.types[i], FC_GGML_F32, "output.weight became type %u", pl.types[i]);
        }
    cr_assert(found, "the model has no output.weight");
    expect_plan_matches(&pl, P("l.gguf"), "Q4_K_M, output left");
}

/* ---- files: byte-identical to llama.cpp's where the encoders are -------------------- */

static void same_as_llama(const model_cfg *c, const char *mix, int ftype)
{
    write_model(P("in.gguf"), c);
    plan pl;
    our_plan(P("in.gguf"), mix, 0, &pl);
    const char *miss = missing_encoder(&pl);
    if (miss) cr_skip_test("mix %s needs %s, which has no encoder yet", mix, miss);
    llama_quantize(P("in.gguf"), P("llama.gguf"), ftype, 0);
    cr_assert_eq(ours(P("in.gguf"), P("ours.gguf"), mix, 2, 0), FC_OK, "%s", fc_ctx_error(ctx));
    expect_plan_matches(&pl, P("ours.gguf"), mix);
    expect_same_file(P("ours.gguf"), P("llama.gguf"), mix);
}

Test(quantize, f16_bf16_f32_files_identical_to_llama_cpp)
{
    same_as_llama(&QWEN3, "F16", 1);
    same_as_llama(&QWEN3, "bf16", 32);
    same_as_llama(&QWEN3, "F32", 0);
}

/* Every mix whose encoders exist, on a model whose rows also force the
 * fallbacks (ne[0] = 96 and 160): our file == llama.cpp's, byte for byte.
 * Mixes needing a missing encoder are listed, not counted. */
Test(quantize, every_mix_file_identical_to_llama_cpp)
{
    model_cfg c = QWEN3;
    c.wtype = FC_GGML_F16;
    for (int shape = 0; shape < 2; shape++) {
        if (shape) {
            c.n_embd = 96, c.head_dim = 32, c.n_head = 3, c.n_head_kv = 1, c.n_ff = 160;
        }
        write_model(P("in.gguf"), &c);
        char skipped[512] = "";
        int done = 0;
        for (size_t m = 0; m < N_MIXES; m++) {
            plan pl;
            our_plan(P("in.gguf"), MIXES[m].name, 0, &pl);
            const char *miss = missing_encoder(&pl);
            if (miss) {
                size_t l = strlen(skipped);
                snprintf(skipped + l, sizeof skipped - l, " %s (%s)", MIXES[m].name, miss);
                continue;
            }
            llama_quantize(P("in.gguf"), P("llama.gguf"), MIXES[m].ftype, 0);
            cr_assert_eq(ours(P("in.gguf"), P("ours.gguf"), MIXES[m].name, 2, 0), FC_OK, "%s", fc_ctx_error(ctx));
            char what[96];
            snprintf(what, sizeof what, "%s, ne[0] %d", MIXES[m].name, c.n_embd);
            expect_same_file(P("ours.gguf"), P("llama.gguf"), what);
            done++;
        }
        if (skipped[0]) cr_log_info("mixes not compared (no encoder yet):%s", skipped);
        if (!done) cr_skip_test("no mix has all its encoders yet:%s", skipped);
    }
}

Test(quantize, q8_0_file_identical_to_llama_cpp) { same_as_llama(&QWEN3, "Q8_0", 7); }
Test(quantize, q4_0_file_identical_to_llama_cpp) { same_as_llama(&QWEN3, "Q4_0", 2); }
Test(quantize, q4_k_m_file_identical_to_llama_cpp) { same_as_llama(&QWEN3, "Q4_K_M", 15); }

Test(quantize, q4_k_m_moe_f16_file_identical_to_llama_cpp)
{
    model_cfg c = QWEN3;
    c.arch = "qwen3moe";
    c.n_expert = 4;
    c.n_ff_exp = 256;
    c.wtype = FC_GGML_F16;
    same_as_llama(&c, "Q4_K_M", 15);
    same_as_llama(&c, "MXFP4_MOE", 38); /* expert tensors MXFP4, the rest Q8_0 */
}

/* ---- metadata, values, threads -------------------------------------------------------- */

static double rel_rms(const float *a, const float *b, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(e / (s > 0 ? s : 1));
}

static void decode_all(const fc_gguf_tensor_info *ti, float *out, size_t n)
{
    if (ti->type == FC_GGML_F32) memcpy(out, ti->data, n * 4);
    else if (ti->type == FC_GGML_F16)
        for (size_t i = 0; i < n; i++) out[i] = fc_f16_to_f32(((const fc_f16 *)ti->data)[i]);
    else if (ti->type == FC_GGML_BF16)
        for (size_t i = 0; i < n; i++) out[i] = fc_bf16_to_f32(((const fc_bf16 *)ti->data)[i]);
    else fcq_traits_of(ti->type)->decode(ti->data, out, n);
}

static void check_output(const char *in, const char *out, const char *mix, int ftype)
{
    fc_gguf *gi = fc_gguf_open(ctx, in, 0), *go = fc_gguf_open(ctx, out, 0);
    cr_assert(gi && go, "%s", fc_ctx_error(ctx));
    /* every input KV but general.file_type is carried over, in order, then the two set */
    int64_t j = 0;
    for (int64_t i = 0; i < fc_gguf_kv_count(gi); i++) {
        const char *k = fc_gguf_kv_key(gi, i);
        if (!strcmp(k, "general.file_type")) continue;
        cr_expect_str_eq(fc_gguf_kv_key(go, j), k);
        const gguf_kv *a = fc_gguf_kv_at(gi, i), *b = fc_gguf_kv_at(go, j);
        cr_expect_eq(a->type, b->type, "%s", k);
        cr_expect(!memcmp(a->raw, b->raw, 8) && a->n == b->n, "%s", k);
        j++;
    }
    uint32_t v = 99;
    cr_expect_eq(fc_gguf_get_u32(go, "general.quantization_version", &v), FC_OK);
    cr_expect_eq(v, 2u);
    cr_expect_eq(fc_gguf_get_u32(go, "general.file_type", &v), FC_OK);
    cr_expect_eq(v, (uint32_t)ftype, "%s", mix);
    const char *s;
    cr_expect_eq(fc_gguf_get_arr_str(go, "tokenizer.ggml.tokens", 3, &s, NULL), FC_OK);
    cr_expect_str_eq(s, "b\"c");
    cr_expect_eq(fc_gguf_find_kv(go, "general.quantization_version"), fc_gguf_kv_count(go) - 2);
    /* values: dequantized output close to the input */
    cr_assert_eq(fc_gguf_tensor_count(go), fc_gguf_tensor_count(gi));
    for (int64_t i = 0; i < fc_gguf_tensor_count(go); i++) {
        fc_gguf_tensor_info to, ti;
        fc_gguf_tensor_info_at(go, i, &to);
        int64_t k = fc_gguf_find_tensor(gi, to.name);
        cr_assert_geq(k, 0, "%s", to.name);
        fc_gguf_tensor_info_at(gi, k, &ti);
        size_t n = 1;
        for (int d = 0; d < ti.n_dims; d++) {
            n *= (size_t)ti.ne[d];
            cr_expect_eq(ti.ne[d], to.ne[d]);
        }
        float *a = malloc(n * 4), *b = malloc(n * 4);
        decode_all(&to, a, n);
        decode_all(&ti, b, n);
        uint32_t be, bb;
        fc_ggml_type_block(to.type, &be, &bb);
        double bits = 8.0 * bb / be;
        /* ~ 2^-(bits-1) of the rms for uniform data, with room for outliers */
        double bound = bits >= 16 ? 4e-3 : bits >= 8 ? 0.02 : bits >= 6 ? 0.06 : bits >= 4.5 ? 0.15 : 0.3;
        double e = rel_rms(a, b, n);
        cr_expect_leq(e, bound, "%s %s (%s): relative rms error %.4g > %.4g", mix, to.name, to.type_name, e, bound);
        free(a);
        free(b);
    }
    fc_gguf_close(gi);
    fc_gguf_close(go);
}

static void metadata_and_values(const char *mix, int ftype)
{
    write_model(P("in.gguf"), &QWEN3);
    plan pl;
    our_plan(P("in.gguf"), mix, 0, &pl);
    const char *miss = missing_encoder(&pl);
    if (miss) cr_skip_test("mix %s needs %s, which has no encoder yet", mix, miss);
    cr_assert_eq(ours(P("in.gguf"), P("out.gguf"), mix, 0, 0), FC_OK, "%s", fc_ctx_error(ctx));
    check_output(P("in.gguf"), P("out.gguf"), mix, ftype);
}

Test(quantize, metadata_and_values_f16) { metadata_and_values("F16", 1); }
Test(quantize, metadata_and_values_q8_0) { metadata_and_values("Q8_0", 7); }
Test(quantize, metadata_and_values_q4_0) { metadata_and_values("Q4_0", 2); }
Test(quantize, metadata_and_values_q4_k_m) { metadata_and_values("Q4_K_M", 15); }

Test(quantize, thread_count_does_not_change_bytes)
{
    model_cfg c = QWEN3;
    c.wtype = FC_GGML_BF16;
    write_model(P("in.gguf"), &c);
    const char *mix = "Q8_0";
    plan pl;
    our_plan(P("in.gguf"), mix, 0, &pl);
    if (missing_encoder(&pl)) mix = "F16";
    cr_assert_eq(ours(P("in.gguf"), P("t1.gguf"), mix, 1, 0), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(ours(P("in.gguf"), P("t3.gguf"), mix, 3, 0), FC_OK, "%s", fc_ctx_error(ctx));
    expect_same_file(P("t1.gguf"), P("t3.gguf"), mix);
}

/* ---- the streaming writer writes what save writes ------------------------------------ */

Test(quantize, streaming_writer_matches_save)
{
    fc_gguf_writer *a = fc_gguf_writer_new(ctx), *b = fc_gguf_writer_new(ctx);
    float x[3 * 40];
    for (int i = 0; i < 120; i++) x[i] = (float)i * 0.25f;
    int64_t ne1[2] = {40, 3}, ne2[1] = {7};
    for (int k = 0; k < 2; k++) {
        fc_gguf_writer *w = k ? b : a;
        cr_assert_eq(fc_gguf_set_str(w, "general.name", "s"), FC_OK);
        cr_assert_eq(fc_gguf_set_u32(w, "general.alignment", 64), FC_OK);
    }
    cr_assert_eq(fc_gguf_writer_add_raw(a, "m", FC_GGML_F32, 2, ne1, x, sizeof x), FC_OK);
    cr_assert_eq(fc_gguf_writer_add_raw(a, "v", FC_GGML_F32, 1, ne2, x, 28), FC_OK);
    cr_assert_eq(fc_gguf_writer_save(a, P("a.gguf")), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_gguf_writer_add_info(b, "m", FC_GGML_F32, 2, ne1), FC_OK);
    cr_assert_eq(fc_gguf_writer_add_info(b, "v", FC_GGML_F32, 1, ne2), FC_OK);
    cr_assert_neq(fc_gguf_writer_save(b, P("bad.gguf")), FC_OK); /* no data: save refuses */
    fc_ctx_clear_error(ctx);
    cr_assert_eq(fc_gguf_writer_begin(b, P("b.gguf")), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert(!exists(P("b.gguf"))); /* only the temporary until finish */
    unsigned char cat[sizeof x + 28];
    memcpy(cat, x, sizeof x);
    memcpy(cat + sizeof x, x, 28);
    cr_assert_eq(fc_gguf_writer_write(b, cat, 100), FC_OK);
    cr_assert_eq(fc_gguf_writer_write(b, cat + 100, sizeof cat - 100), FC_OK); /* crosses tensors */
    cr_assert_eq(fc_gguf_writer_finish(b), FC_OK, "%s", fc_ctx_error(ctx));
    expect_same_file(P("a.gguf"), P("b.gguf"), "streaming");
    fc_gguf_writer_free(a);
    fc_gguf_writer_free(b);
    /* an unfinished stream leaves nothing */
    fc_gguf_writer *c = fc_gguf_writer_new(ctx);
    cr_assert_eq(fc_gguf_writer_add_info(c, "m", FC_GGML_F32, 2, ne1), FC_OK);
    cr_assert_eq(fc_gguf_writer_begin(c, P("c.gguf")), FC_OK);
    cr_assert_eq(fc_gguf_writer_write(c, x, 16), FC_OK);
    cr_assert_neq(fc_gguf_writer_finish(c), FC_OK);
    cr_expect(strstr(fc_ctx_error(ctx), "only 0 of 1 tensors"), "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(c);
    cr_expect(!exists(P("c.gguf")));
    cr_expect_eq(dir_entries(), 2, "a temporary was left behind");
}

/* ---- errors leave no file ------------------------------------------------------------ */

static void expect_error(fc_status st, const char *needle, const char *out)
{
    cr_expect_neq(st, FC_OK);
    cr_expect(strstr(fc_ctx_error(ctx), needle), "expected \"%s\" in: %s", needle, fc_ctx_error(ctx));
    cr_expect(!exists(out), "%s exists after a failure", out);
}

Test(quantize, errors_leave_no_file)
{
    write_model(P("in.gguf"), &QWEN3);
    expect_error(ours(P("in.gguf"), P("o.gguf"), "Q4_K_X", 0, 0), "unknown quantization type \"Q4_K_X\"", P("o.gguf"));
    expect_error(ours(P("missing.gguf"), P("o.gguf"), "Q8_0", 0, 0), "missing.gguf", P("o.gguf"));
    expect_error(ours(P("in.gguf"), P("in.gguf"), "Q8_0", 0, 0), "is the input file", P("o.gguf"));
    /* a truncated input: the reader's message */
    size_t n;
    unsigned char *p = fct_read_file(P("in.gguf"), &n);
    FILE *f = fopen(P("cut.gguf"), "wb");
    fwrite(p, 1, n / 2, f);
    fclose(f);
    expect_error(ours(P("cut.gguf"), P("o.gguf"), "F16", 0, 0), "truncated", P("o.gguf"));
    f = fopen(P("junk.gguf"), "wb");
    fwrite("GGML not a gguf file at all", 1, 27, f);
    fclose(f);
    expect_error(ours(P("junk.gguf"), P("o.gguf"), "F16", 0, 0), "not \"GGUF\"", P("o.gguf"));
    free(p);
    /* an output directory that does not exist */
    expect_error(ours(P("in.gguf"), P("nodir/o.gguf"), "F16", 0, 0), "nodir", P("nodir/o.gguf"));
    /* a bad tensor-type option */
    fc_quantize_options o = fc_quantize_default_options();
    o.type = "Q8_0";
    o.output_tensor_type = 31; /* a removed ggml id */
    fc_ctx_clear_error(ctx);
    expect_error(fc_gguf_quantize(ctx, P("in.gguf"), P("o.gguf"), &o, NULL), "output tensor type 31", P("o.gguf"));
    /* a mix whose encoder does not exist yet: a clear error naming it */
    for (size_t m = 0; m < N_MIXES; m++) {
        plan pl;
        our_plan(P("in.gguf"), MIXES[m].name, 0, &pl);
        const char *miss = missing_encoder(&pl);
        if (!miss) continue;
        char want[64];
        snprintf(want, sizeof want, "which has no encoder yet");
        expect_error(ours(P("in.gguf"), P("o.gguf"), MIXES[m].name, 0, 0), want, P("o.gguf"));
        break;
    }
    /* an existing destination is untouched by a failure */
    f = fopen(P("keep.gguf"), "wb");
    fwrite("old", 1, 3, f);
    fclose(f);
    cr_expect_neq(ours(P("cut.gguf"), P("keep.gguf"), "F16", 0, 0), FC_OK);
    unsigned char *k = fct_read_file(P("keep.gguf"), &n);
    cr_expect(n == 3 && !memcmp(k, "old", 3));
    free(k);
    cr_expect_eq(dir_entries(), 4, "a temporary was left behind"); /* in cut junk keep */
}

/* Damaged inputs (every prefix of the header region, byte flips in it):
 * an error or a valid output, never a crash, never a stray file. */
Test(quantize, damaged_inputs_never_crash)
{
    model_cfg c = QWEN3;
    c.n_embd = 64, c.head_dim = 32, c.n_head = 2, c.n_head_kv = 1, c.n_ff = 64, c.n_vocab = 32;
    write_model(P("in.gguf"), &c);
    size_t n;
    unsigned char *p = fct_read_file(P("in.gguf"), &n);
    fc_gguf *g = fc_gguf_open(ctx, P("in.gguf"), 0);
    cr_assert(g);
    size_t header = (size_t)fc_gguf_data_offset(g);
    fc_gguf_close(g);
    for (size_t cut = 0; cut < header + 64; cut += 5) {
        FILE *f = fopen(P("d.gguf"), "wb");
        fwrite(p, 1, cut, f);
        fclose(f);
        cr_expect_neq(ours(P("d.gguf"), P("o.gguf"), "Q8_0", 1, 0), FC_OK, "prefix %zu", cut);
        cr_expect(!exists(P("o.gguf")));
    }
    for (size_t at = 0; at < header; at += 3) {
        unsigned char save = p[at];
        p[at] ^= (unsigned char)(0x5a + at);
        FILE *f = fopen(P("d.gguf"), "wb");
        fwrite(p, 1, n, f);
        fclose(f);
        p[at] = save;
        if (ours(P("d.gguf"), P("o.gguf"), "Q4_K_M", 1, 0) == FC_OK) unlink(P("o.gguf"));
        else cr_expect(!exists(P("o.gguf")), "flip at %zu left a file", at);
    }
    free(p);
    cr_expect_eq(dir_entries(), 2); /* in, d */
}

/* ---- the CLI ---------------------------------------------------------------------------- */

Test(quantize, cli_quantize_and_info)
{
    const char *cli = getenv("FUCINA_FUCINA_CLI");
    if (!cli) cr_skip_test("FUCINA_FUCINA_CLI is not set (run through ctest)");
    write_model(P("in.gguf"), &QWEN3);
    static char out[1 << 16];
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' f16 --threads 2 --progress 2>&1", cli, P("in.gguf"),
             P("o.gguf"));
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "blk.1.ffn_down.weight") && strstr(out, "F32 -> F16"), "%s", out);
    cr_expect(strstr(out, "; tensor data ") && strstr(out, "general.file_type 1"), "%s", out);
    cr_expect(exists(P("o.gguf")));
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' q4_k_m --dry-run 2>&1", cli, P("in.gguf"), P("d.gguf"));
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "output.weight") && strstr(out, "-> Q6_K") && !exists(P("d.gguf")), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' Q9_9 2>&1", cli, P("in.gguf"), P("x.gguf"));
    cr_expect_eq(fct_run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "unknown type 'Q9_9'") && !exists(P("x.gguf")), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' Q8_0 2>&1", cli, P("none.gguf"), P("x.gguf"));
    cr_expect_eq(fct_run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "none.gguf") && !exists(P("x.gguf")), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' Q8_0 2>&1", cli, P("in.gguf"), P("in.gguf"));
    cr_expect_eq(fct_run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "is the input file"), "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' quantize --help", cli);
    cr_expect_eq(fct_run(cmd, out, sizeof out), 0);
    cr_expect(strstr(out, "Q4_K_M") && strstr(out, "--output-tensor-type"), "%s", out);

    /* the summary by default (tests/check_cli_info_progress.py), the whole listing with --slots */
    snprintf(cmd, sizeof cmd, "'%s' info '%s' --slots 2>&1", cli, P("o.gguf"));
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "GGUF version 3"), "%s", out);
    cr_expect(strstr(out, "general.file_type") && strstr(out, "[STRING x 4] \"<s>\", \"</s>\", \"a\", \"b\\\"c\""),
              "%s", out);
    cr_expect(strstr(out, "blk.0.attn_q.weight") && strstr(out, "256 x 256"), "%s", out);
    /* per layer q o (256x256), k v (256x64), gate up down (256x512), 2 norms of 256, 2 of 64;
     * token_embd and output 256x320, output_norm 256 */
    long params = 2L * (256 * 256 * 2 + 256 * 64 * 2 + 512 * 256 * 3 + 256 * 2 + 64 * 2) + 256 * 320 * 2 + 256;
    char want[64];
    snprintf(want, sizeof want, "%ld parameters", params);
    cr_expect(strstr(out, want), "want %s in %s", want, out);
    cr_expect(strstr(out, "F16 ") && strstr(out, "F32 "), "%s", out);
    snprintf(cmd, sizeof cmd, "head -c 100 '%s' > '%s'; '%s' info '%s' 2>&1", P("o.gguf"), P("cut.gguf"), cli,
             P("cut.gguf"));
    cr_expect_eq(fct_run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "fc_gguf_open") && strstr(out, "cut.gguf"), "%s", out);
}
