/* SPDX-License-Identifier: MIT */
/* The training model (fucina/lm_train.h) against independent references:
 *   - PyTorch 1.13 (tests/goldens/gen_lm_goldens.py): the logits, loss and
 *     every gradient of a tiny qwen3 model, and its parameters after two
 *     optimizer steps of the recipe (Muon + AdamW groups);
 *   - the inference forward (src/llm/forward.c) on the same weights, for
 *     each trainable family, and after a GGUF export and reload;
 *   - llama.cpp (the oracle) on an exported model, f32 and quantized to Q8_0:
 *     logits and greedy tokens;
 *   - finite differences (fc_gradcheck) on a tiny configuration;
 * and the loop's promises: activation checkpointing gives the same bits,
 * the loss falls, a resumed run is bitwise the uninterrupted one, and bad
 * inputs get errors naming the thing. */
#define _GNU_SOURCE

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fct.h"
#include "fct_golden.h"
#include "fucina/fucina.h"
#include "fucina/lm_train.h"
#include "llm_parity.h"
#include "lm_fixtures.h"

FCT_SUITE_WITH_TMPDIR(lm_train, 1, "fc_lm_train_");

/* ---- against PyTorch ------------------------------------------------------------------- */

static double max_abs(const double *v, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
    return m;
}

/* |t - e| <= tol * max(1, max|e|) elementwise. */
static void expect_close(const fc_tensor *t, const fct_golden *e, double tol, const char *what)
{
    cr_assert_not_null(t, "%s: %s", what, fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_numel(t), e->n, "%s: %lld elements, golden %lld", what, (long long)fc_tensor_numel(t),
                 (long long)e->n);
    double *v = fct_values(t);
    const double scale = fmax(1.0, max_abs(e->v, e->n));
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < e->n; i++) {
        const double d = fabs(v[i] - e->v[i]);
        if (d > worst) worst = d, at = i;
    }
    cr_expect_leq(worst, tol * scale, "%s: element %lld is %.9g, PyTorch %.9g (|diff| %.3g > %.3g)", what,
                  (long long)at, v[at], e->v[at], worst, tol * scale);
    free(v);
}

static fc_tensor *golden_tokens(const fct_goldens *g, const char *name)
{
    return fct_golden_tensor(ctx, fct_golden_get(g, name), FC_I32, (const char *const[]){"b", "seq"});
}

static int64_t count_targets(const fct_golden *y)
{
    int64_t n = 0;
    for (int64_t i = 0; i < y->n; i++) n += y->v[i] != -100;
    return n;
}

Test(lm_train, two_steps_match_pytorch)
{
    fct_goldens g = fct_golden_load("lm_goldens.txt");
    const fct_golden *c = fct_golden_get(&g, "config");
    const fct_golden *o = fct_golden_get(&g, "optim");
    fc_lm *lm = fc_lm_new(ctx, NULL,
                          &(fc_lm_config){.n_vocab = (int64_t)c->v[0], .n_embd = (int64_t)c->v[1],
                                          .n_layer = (int64_t)c->v[2], .n_head = (int64_t)c->v[3],
                                          .n_head_kv = (int64_t)c->v[4], .head_dim = (int64_t)c->v[5],
                                          .n_ff = (int64_t)c->v[6], .n_ctx = 64, .rms_eps = 1e-6,
                                          .rope_theta = 10000});
    cr_assert_not_null(lm, "%s", fc_ctx_error(ctx));
    const int np = fc_lm_param_count(lm);
    cr_assert_eq(np, 25, "%d parameters", np);
    char key[160];
    for (int i = 0; i < np; i++) {
        const char *name;
        fc_tensor *p = fc_lm_param(lm, i, &name);
        snprintf(key, sizeof key, "init.%s", name);
        const char *axes[2] = {fc_tensor_axis(p, 0), fc_tensor_rank(p) > 1 ? fc_tensor_axis(p, 1) : NULL};
        fc_scope s = fc_scope_begin(ctx);
        fc_tensor *v = fct_golden_tensor(ctx, fct_golden_get(&g, key), FC_F32, axes);
        cr_assert_eq(fc_copy_into(ctx, fc_detach(ctx, p), v), FC_OK, "%s: %s", key, fc_ctx_error(ctx));
        fc_scope_end(ctx, s);
    }
    /* the recipe's optimizer at the golden's learning rates: matrices, embeddings, head, norms */
    fc_optim *opt = fc_lm_optimizer(ctx, lm, &(fc_lm_train_options){.matrix_lr = o->v[0], .embed_lr = o->v[9],
                                                                     .head_lr = o->v[10], .scalar_lr = o->v[11]});
    cr_assert_not_null(opt, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_optim_group_count(opt), 4);
    for (int step = 1; step <= 2; step++) {
        char xn[8], yn[8], ln[16];
        snprintf(xn, sizeof xn, "x%d", step), snprintf(yn, sizeof yn, "y%d", step), snprintf(ln, sizeof ln, "loss%d", step);
        fc_scope s = fc_scope_begin(ctx);
        fc_tensor *x = golden_tokens(&g, xn), *y = golden_tokens(&g, yn);
        if (step == 1) expect_close(fc_lm_logits(ctx, lm, x, NULL), fct_golden_get(&g, "logits1"), 2e-6, "logits1");
        const double n = (double)count_targets(fct_golden_get(&g, yn));
        fc_tensor *loss = fc_mul_scalar(ctx, fc_lm_loss(ctx, lm, x, y, NULL), 1.0 / n);
        expect_close(loss, fct_golden_get(&g, ln), 2e-6, ln);
        cr_assert_eq(fc_backward(ctx, loss), FC_OK, "%s", fc_ctx_error(ctx));
        fc_scope_end(ctx, s);
        s = fc_scope_begin(ctx); /* fc_grad's handles */
        for (int i = 0; i < np && step == 1; i++) {
            const char *name;
            fc_tensor *p = fc_lm_param(lm, i, &name);
            snprintf(key, sizeof key, "grad1.%s", name);
            expect_close(fc_grad(ctx, p), fct_golden_get(&g, key), 2e-5, key);
        }
        fc_scope_end(ctx, s);
        cr_assert_eq(fc_optim_step(opt), FC_OK, "%s", fc_ctx_error(ctx));
        fc_optim_zero_grad(opt);
        for (int i = 0; i < np; i++) {
            const char *name;
            fc_tensor *p = fc_lm_param(lm, i, &name);
            snprintf(key, sizeof key, "step%d.%s", step, name);
            expect_close(p, fct_golden_get(&g, key), 2e-5, key);
        }
    }
    fc_optim_free(opt);
    fc_lm_free(lm);
    fct_golden_free(&g);
}

/* ---- against the inference forward ---------------------------------------------------------- */

static void graph_equals_inference(const char *arch, int untied)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s.gguf", arch, untied ? "_untied" : "");
    fc_lm *lm = fc_lm_load(ctx, lf_make_model(ctx, dir, arch, name, untied));
    cr_assert_not_null(lm, "%s", fc_ctx_error(ctx));
    float *ref = lf_session_logits(ctx, fc_lm_model(lm));
    double worst, scale;
    lf_graph_vs(ctx, lm, ref, &worst, &scale);
    /* f32 both ways: rounding differs (fused kernels, summation order) */
    cr_expect_leq(worst, 1e-5 * scale, "%s: training graph vs inference: max|diff| %.3g, max|logit| %.3g", name,
                  worst, scale);
    cr_log_info("%s: training graph vs inference max|diff|/max|logit| = %.3g", name, worst / scale);
    free(ref);
    fc_lm_free(lm);
}

Test(lm_train, qwen3_graph_equals_inference) { graph_equals_inference("qwen3", 1); }
Test(lm_train, qwen3_tied_graph_equals_inference) { graph_equals_inference("qwen3", 0); }
Test(lm_train, llama_graph_equals_inference) { graph_equals_inference("llama", 1); }
Test(lm_train, qwen2_graph_equals_inference) { graph_equals_inference("qwen2", 0); }

/* Export then reload: the same weights through the same forward, so the
 * logits are the same bits; f16 loads too. */
Test(lm_train, export_reloads_bitwise)
{
    fc_lm *lm = fc_lm_load(ctx, lf_make_model(ctx, dir, "qwen3", "src.gguf", 1));
    cr_assert_not_null(lm, "%s", fc_ctx_error(ctx));
    const char *out = fct_path(dir, "exported.gguf");
    cr_assert_eq(fc_lm_save_gguf(ctx, lm, out, FC_F32), FC_OK, "%s", fc_ctx_error(ctx));
    fc_llm_model *m = fc_llm_model_load(ctx, out);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    float *a = lf_session_logits(ctx, fc_lm_model(lm)), *b = lf_session_logits(ctx, m);
    cr_expect(!memcmp(a, b, (size_t)(LF_ROW * nv) * sizeof *a), "exported model's logits differ");
    free(a), free(b);
    fc_llm_model_free(m);
    const char *h = fct_path(dir, "exported_f16.gguf");
    cr_assert_eq(fc_lm_save_gguf(ctx, lm, h, FC_F16), FC_OK, "%s", fc_ctx_error(ctx));
    m = fc_llm_model_load(ctx, h);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    fc_llm_model_free(m);
    cr_assert_eq(fc_lm_save_gguf(ctx, lm, h, FC_Q8_0), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_save_gguf", "q8_0");
    fc_lm_free(lm);
}

/* ---- gradients ------------------------------------------------------------------------------- */

static fc_tensor *grads_of(fc_lm *lm, fc_tensor *x, fc_tensor *y, int checkpoint)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *loss = fc_lm_loss(ctx, lm, x, y, &(fc_lm_forward_options){.checkpoint = checkpoint});
    cr_assert_eq(fc_backward(ctx, loss), FC_OK, "%s", fc_ctx_error(ctx));
    fc_scope_end(ctx, s);
    /* every gradient, flattened into one vector */
    const int np = fc_lm_param_count(lm);
    fc_tensor **gs = malloc((size_t)np * sizeof *gs);
    for (int i = 0; i < np; i++) {
        fc_tensor *g = fc_grad(ctx, fc_lm_param(lm, i, NULL));
        cr_assert_not_null(g);
        gs[i] = fc_reshape(ctx, g, FC_SHAPE({"n", fc_tensor_numel(g)}));
    }
    fc_tensor *all = fc_concat(ctx, gs, np, "n");
    free(gs);
    for (int i = 0; i < np; i++) fc_zero_grad(ctx, fc_lm_param(lm, i, NULL));
    return all;
}

Test(lm_train, activation_checkpointing_same_bits)
{
    fc_lm *lm = fc_lm_load(ctx, lf_make_model(ctx, dir, "qwen3", "ckpt.gguf", 1));
    cr_assert_not_null(lm, "%s", fc_ctx_error(ctx));
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *x = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", 2}, {"seq", LF_ROW / 2}), lf_row, sizeof lf_row);
    fc_tensor *y = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", 2}, {"seq", LF_ROW / 2}), lf_row, sizeof lf_row);
    fc_tensor *a = grads_of(lm, x, y, 0), *b = grads_of(lm, x, y, 1);
    fct_expect_bits(ctx, a, ctx, b, "gradients with and without activation checkpointing");
    fc_scope_end(ctx, s);
    fc_lm_free(lm);
}

/* Finite differences on a tiny model, every parameter kind (embedding,
 * norms, projections, Q/K norms, FFN, head), for qwen3 and qwen2 (biases). */
static void gradcheck_family(const char *arch)
{
    fc_lm *lm = fc_lm_new(ctx, NULL,
                          &(fc_lm_config){.arch = arch, .n_vocab = 11, .n_embd = 8, .n_layer = 1, .n_head = 2,
                                          .n_head_kv = 1, .n_ff = 12, .n_ctx = 8, .seed = 3});
    cr_assert_not_null(lm, "%s", fc_ctx_error(ctx));
    /* zero-initialised projections would hide their inputs' gradients: randomise every parameter */
    const fc_status st = lf_gradcheck_params(ctx, lm, 100, 0.9);
    cr_expect_eq(st, FC_OK, "%s: %s", arch, fc_ctx_error(ctx));
    fc_lm_free(lm);
}

Test(lm_train, gradcheck_qwen3) { gradcheck_family("qwen3"); }
Test(lm_train, gradcheck_qwen2) { gradcheck_family("qwen2"); }

/* ---- the loop ---------------------------------------------------------------------------------- */

static fc_lm *small_model(const char *tok)
{
    fc_lm *lm = fc_lm_new(ctx, tok, &(fc_lm_config){.n_embd = 64, .n_layer = 2, .n_head = 2, .n_ctx = 64, .seed = 5});
    cr_assert_not_null(lm, "%s", fc_ctx_error(ctx));
    return lm;
}

Test(lm_train, loss_falls_and_resume_is_bitwise)
{
    const char *tok = lf_make_model(ctx, dir, "qwen3", "tok.gguf", 0);
    const char *train = lf_write_corpus(dir, "train.jsonl", 200, 1), *val = lf_write_corpus(dir, "val.jsonl", 20, 2);
    const char *ckpt = lf_path(dir, "run.safetensors"), *ckpt10 = lf_path(dir, "run10.safetensors");
    lf_steps a = {.ckpt = ckpt, .copy_to = ckpt10, .copy_at = 10}, b = {0};
    fc_lm_train_options o = {.train_files = &train, .n_train_files = 1, .val_files = &val, .n_val_files = 1,
                             .steps = 30, .seq = 32, .batch = 4, .warmup = 0.1, .save_path = ckpt, .save_every = 10,
                             .on_step = lf_on_step, .user = &a};
    fc_lm *lm = small_model(tok);
    cr_assert_eq(fc_lm_train(ctx, lm, &o), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(a.n, 30);
    cr_expect_lt(a.loss[29], 0.5 * a.loss[0], "loss %.4f -> %.4f: it should at least halve", a.loss[0], a.loss[29]);
    cr_log_info("loss %.4f -> %.4f in 30 steps", a.loss[0], a.loss[29]);
    /* a fresh model resumed from step 10 ends with the same bits */
    fc_lm *lm2 = small_model(tok);
    o.resume_path = ckpt10;
    o.save_path = NULL, o.save_every = 0;
    o.user = &b;
    cr_assert_eq(fc_lm_train(ctx, lm2, &o), FC_OK, "%s", fc_ctx_error(ctx));
    lf_expect_resumed(ctx, &a, &b, 10, 20, lm, lm2);
    /* the same checkpoint with another batch size is refused: the rows would differ */
    o.batch = 8;
    cr_expect_eq(fc_lm_train(ctx, lm2, &o), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "run10.safetensors", "fucina.lm.batch");
    fc_lm_free(lm2);
    fc_lm_free(lm);
}

/* Gradient accumulation: the global batch in 1 or 4 micro-batches gives the
 * same losses up to float summation order. */
Test(lm_train, accumulation_matches_one_batch)
{
    const char *tok = lf_make_model(ctx, dir, "qwen3", "tok.gguf", 0);
    const char *train = lf_write_corpus(dir, "train.jsonl", 100, 3);
    lf_steps a = {0}, b = {0};
    fc_lm_train_options o = {.train_files = &train, .n_train_files = 1, .steps = 5, .seq = 16, .batch = 8,
                             .on_step = lf_on_step, .user = &a};
    fc_lm *lm = small_model(tok), *lm2 = small_model(tok);
    cr_assert_eq(fc_lm_train(ctx, lm, &o), FC_OK, "%s", fc_ctx_error(ctx));
    o.accum = 4, o.user = &b, o.checkpoint_layers = 1;
    cr_assert_eq(fc_lm_train(ctx, lm2, &o), FC_OK, "%s", fc_ctx_error(ctx));
    for (int i = 0; i < 5; i++)
        cr_expect_leq(fabs(a.loss[i] - b.loss[i]), 1e-4 * a.loss[i], "step %d: loss %.9g in one batch, %.9g in four",
                      i + 1, a.loss[i], b.loss[i]);
    fc_lm_free(lm2);
    fc_lm_free(lm);
}

/* ---- data parallelism ---------------------------------------------------------------- */

/* Two ranks in two processes joined by a socket pair: the byte transport
 * fc_lm_parallel asks for, with no MPI (cli_mpi runs the same through
 * OpenMPI). */
typedef struct pair_link {
    int fd;
} pair_link;

static int pair_send(void *user, int to, const void *data, size_t bytes)
{
    (void)to;
    const char *p = data;
    while (bytes) {
        const ssize_t k = write(((pair_link *)user)->fd, p, bytes);
        if (k <= 0) return -1;
        p += k, bytes -= (size_t)k;
    }
    return 0;
}

static int pair_recv(void *user, int from, void *data, size_t bytes)
{
    (void)from;
    char *p = data;
    while (bytes) {
        const ssize_t k = read(((pair_link *)user)->fd, p, bytes);
        if (k <= 0) return -1;
        p += k, bytes -= (size_t)k;
    }
    return 0;
}

static int pair_rank; /* this process's rank: broadcast sends from the root, receives elsewhere */

static int pair_broadcast(void *user, int root, void *data, size_t bytes)
{
    return root == pair_rank ? pair_send(user, 1 - root, data, bytes) : pair_recv(user, root, data, bytes);
}

/* 2 ranks x 2 micro-batches of 2 rows give the parameters and losses of one
 * process running the batch of 8 in 4 micro-batches, bit for bit (each rank
 * one thread, like the suite's context). */
Test(lm_train, two_ranks_equal_one_process)
{
    const char *tok = lf_make_model(ctx, dir, "qwen3", "tok.gguf", 0);
    const char *train = lf_write_corpus(dir, "train.jsonl", 100, 7);
    const char *one = lf_path(dir, "one.gguf"), *rank1 = lf_path(dir, "rank1.gguf"),
               *rank0 = lf_path(dir, "rank0.gguf");
    lf_steps a = {0}, b = {0};
    fc_lm_train_options o = {.train_files = &train, .n_train_files = 1, .steps = 6, .seq = 16, .batch = 8,
                             .accum = 4, .on_step = lf_on_step, .user = &a};
    fc_lm *lm = small_model(tok);
    cr_assert_eq(fc_lm_train(ctx, lm, &o), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(fc_lm_save_gguf(ctx, lm, one, FC_F32), FC_OK, "%s", fc_ctx_error(ctx));
    fc_lm_free(lm);

    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert_neq(pid, -1);
    pair_rank = pid == 0;
    pair_link link = {.fd = sv[pid == 0]};
    close(sv[pid != 0]);
    const fc_lm_parallel par = {.rank = pair_rank, .size = 2, .send = pair_send, .recv = pair_recv,
                                .broadcast = pair_broadcast, .user = &link};
    o.parallel = &par;
    o.user = &b;
    if (pid == 0) { /* rank 1: its own context (the parent's worker threads are not in this process) */
        fc_ctx *c = fc_ctx_new(&(fc_ctx_options){.threads = 1}, NULL, 0);
        fc_lm *l = c ? fc_lm_new(c, tok, &(fc_lm_config){.n_embd = 64, .n_layer = 2, .n_head = 2, .n_ctx = 64,
                                                          .seed = 5})
                     : NULL;
        const int ok = l && fc_lm_train(c, l, &o) == FC_OK && fc_lm_save_gguf(c, l, rank1, FC_F32) == FC_OK;
        if (!ok && c) fprintf(stderr, "rank 1: %s\n", fc_ctx_error(c));
        _exit(ok ? 0 : 1);
    }
    lm = small_model(tok);
    const fc_status st = fc_lm_train(ctx, lm, &o);
    close(link.fd);
    int wst = 0;
    waitpid(pid, &wst, 0);
    cr_assert_eq(st, FC_OK, "rank 0: %s", fc_ctx_error(ctx));
    cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "rank 1 failed (status %d)", wst);
    cr_assert_eq(fc_lm_save_gguf(ctx, lm, rank0, FC_F32), FC_OK, "%s", fc_ctx_error(ctx));
    fc_lm_free(lm);
    cr_assert_eq(b.n, 6);
    for (int i = 0; i < 6; i++)
        cr_expect(a.loss[i] == b.loss[i], "step %d: loss %.9g in one process, %.9g on two ranks", i + 1, a.loss[i],
                  b.loss[i]);
    size_t n1, n0, nr;
    unsigned char *f1 = fct_read_file(one, &n1), *f0 = fct_read_file(rank0, &n0), *fr = fct_read_file(rank1, &nr);
    cr_expect(n1 == n0 && !memcmp(f1, f0, n1), "rank 0's model differs from one process's");
    cr_expect(n1 == nr && !memcmp(f1, fr, n1), "rank 1's model differs from one process's");
    free(f1), free(f0), free(fr);

    /* the ranks must share the micro-batches equally */
    o.accum = 3, o.batch = 6, o.parallel = &par, o.user = NULL, o.on_step = NULL;
    lm = small_model(tok);
    cr_expect_eq(fc_lm_train(ctx, lm, &o), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "accum (3)", "number of ranks (2)");
    fc_lm_free(lm);
}

/* An exported trained model in llama.cpp: logits within the f32 bound and
 * greedy continuations equal to ours. */
Test(lm_train, exported_model_matches_llama_cpp)
{
    lp_oracle o = lp_get_oracle();
    const char *tok = lf_make_model(ctx, dir, "qwen3", "tok.gguf", 0);
    const char *train = lf_write_corpus(dir, "train.jsonl", 100, 4);
    fc_lm *lm = small_model(tok);
    fc_lm_train_options to = {.train_files = &train, .n_train_files = 1, .steps = 10, .seq = 32, .batch = 4};
    cr_assert_eq(fc_lm_train(ctx, lm, &to), FC_OK, "%s", fc_ctx_error(ctx));
    char path[512];
    snprintf(path, sizeof path, "%s", fct_path(dir, "trained.gguf"));
    cr_assert_eq(fc_lm_save_gguf(ctx, lm, path, FC_F32), FC_OK, "%s", fc_ctx_error(ctx));
    fc_lm_free(lm);
    fc_llm_model *m = fc_llm_model_load(ctx, path);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    fc_token *toks;
    size_t nt;
    cr_assert_eq(fc_tokenize(ctx, fc_llm_model_tokenizer(m), lp_prompt, strlen(lp_prompt), FC_TOKENIZE_PARSE_SPECIAL,
                             &toks, &nt), FC_OK, "%s", fc_ctx_error(ctx));
    const int n = (int)nt;
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    float *ref = lp_oracle_logits(&o, path, toks, n, n - 3, nv);
    float *ours = lp_our_logits(ctx, m, toks, n, n - 3);
    lp_compare(ours, ref, n, nv, 1e-5, 0.0, 0, "trained qwen3");
    const int steps = lp_greedy(ctx, &o, path, m, toks, n, 24, 1e-5, "trained qwen3");
    cr_log_info("trained model: greedy %d/24 identical to llama.cpp", steps);
    free(ref), free(ours);
    fc_llm_model_free(m);

    /* then `fucina quantize`'s Q8_0: the bound of the Q8_0 parity tests */
    char qpath[512];
    snprintf(qpath, sizeof qpath, "%s", fct_path(dir, "trained-q8_0.gguf"));
    fc_quantize_options qo = fc_quantize_default_options();
    qo.type = "Q8_0";
    cr_assert_eq(fc_gguf_quantize(ctx, path, qpath, &qo, NULL), FC_OK, "%s", fc_ctx_error(ctx));
    m = fc_llm_model_load(ctx, qpath);
    cr_assert_not_null(m, "%s", fc_ctx_error(ctx));
    ref = lp_oracle_logits(&o, qpath, toks, n, n - 3, nv);
    ours = lp_our_logits(ctx, m, toks, n, n - 3);
    lp_compare(ours, ref, n, nv, 2e-2, 0.0, 0, "trained qwen3 Q8_0");
    const int qsteps = lp_greedy(ctx, &o, qpath, m, toks, n, 24, 2e-2, "trained qwen3 Q8_0");
    cr_log_info("trained model in Q8_0: greedy %d/24 identical to llama.cpp", qsteps);
    free(ref), free(ours);
    fc_tokens_free(toks);
    fc_llm_model_free(m);
}

/* ---- bad inputs -------------------------------------------------------------------------------- */

Test(lm_train, refuses_untrainable_models)
{
    static const struct {
        const char *arch, *why;
    } k[] = {{"qwen3moe", "qwen3moe"}, {"gemma3", "gemma3"}, {"phi3", "phi3"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.gguf", k[i].arch);
        cr_expect_null(fc_lm_load(ctx, lf_make_model(ctx, dir, k[i].arch, name, 0)));
        fct_expect_error(ctx, FC_ERR_UNSUPPORTED, name, k[i].why);
    }
    const char *q = fct_path(dir, "q8.gguf");
    cr_assert_eq(fc_llm_make_model(ctx, q, &(fc_make_model_options){.dtype = FC_Q8_0}), FC_OK);
    cr_expect_null(fc_lm_load(ctx, q));
    fct_expect_error(ctx, FC_ERR_UNSUPPORTED, "q8.gguf", "q8_0");
    cr_expect_null(fc_lm_new(ctx, NULL, &(fc_lm_config){.n_vocab = 10, .n_embd = 30, .n_head = 4}));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_new", "head dim");
    cr_expect_null(fc_lm_new(ctx, NULL, NULL));
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_new", "n_vocab");
}

Test(lm_train, bad_data_and_options)
{
    const char *tok = lf_make_model(ctx, dir, "qwen3", "tok.gguf", 0);
    fc_lm *lm = small_model(tok);
    const char *bad = fct_path(dir, "bad.jsonl");
    fct_write_file(bad, "{\"text\": \"ok\"}\n{\"text\": 3}\n", 27);
    fc_lm_train_options o = {.train_files = &bad, .n_train_files = 1, .steps = 1};
    cr_expect_eq(fc_lm_train(ctx, lm, &o), FC_ERR_FORMAT);
    fct_expect_error(ctx, FC_ERR_FORMAT, "bad.jsonl:2", "text");
    fct_write_file(bad, "{\"text\": \"ok\"\n", 14);
    cr_expect_eq(fc_lm_train(ctx, lm, &o), FC_ERR_FORMAT);
    fct_expect_error(ctx, FC_ERR_FORMAT, "bad.jsonl:1", "JSON");
    const char *missing = fct_path(dir, "missing.jsonl");
    o.train_files = &missing;
    cr_expect_eq(fc_lm_train(ctx, lm, &o), FC_ERR_IO);
    fct_expect_error(ctx, FC_ERR_IO, "missing.jsonl", "open");
    const char *train = lf_write_corpus(dir, "train.jsonl", 10, 1);
    o.train_files = &train;
    o.batch = 6, o.accum = 4;
    cr_expect_eq(fc_lm_train(ctx, lm, &o), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_train", "accum");
    o.batch = 0, o.accum = 0, o.warmup = 0.7, o.warmdown = 0.5;
    cr_expect_eq(fc_lm_train(ctx, lm, &o), FC_ERR_INVALID_ARG);
    fct_expect_error(ctx, FC_ERR_INVALID_ARG, "fc_lm_train", "warmup");
    o.warmup = 0, o.warmdown = 0, o.data = FC_LM_DATA_CHAT;
    cr_expect_eq(fc_lm_train(ctx, lm, &o), FC_ERR_FORMAT);
    fct_expect_error(ctx, FC_ERR_FORMAT, "train.jsonl:1", "messages");
    o.resume_path = fct_path(dir, "nothing.safetensors");
    o.data = FC_LM_DATA_TEXT;
    cr_expect_neq(fc_lm_train(ctx, lm, &o), FC_OK);
    fct_expect_error(ctx, fc_ctx_status(ctx), "nothing.safetensors", NULL);
    fc_lm_free(lm);
}
