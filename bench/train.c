/* SPDX-License-Identifier: MIT */
/* `fucina-bench train`: training workloads against PyTorch, measured in the
 * same run.
 *
 *   node_overhead  backward bookkeeping per record: a chain of 20,000
 *                  fc_add_scalar records on one element, whose VJPs pass the
 *                  gradient through (no arithmetic); ns per record
 *   mlp_b64        one AdamW training step of a 784-256-256-10 ReLU MLP,
 *   mlp_b256       cross-entropy, batch 64 / 256 (forward, backward, step)
 *   block          forward + backward of a pre-norm transformer block: d 256,
 *                  4 heads, seq 128, causal attention, GELU MLP of 1024,
 *                  loss sum(out * w)
 *
 * For each thread count, Fucina's rounds and PyTorch's (bench/peers/
 * torch_train.py, run by the Python CMake found, with torch.set_num_threads
 * set to the same count) alternate `--passes` times; the table gives the
 * median of the per-pass medians and the ratio PyTorch time / Fucina time
 * (above 1: Fucina is faster). Without torch the peer column says n/a. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fcb.h"

#ifndef FCB_PYTHON
#define FCB_PYTHON "python3"
#endif
#ifndef FCB_TORCH_SCRIPT
#define FCB_TORCH_SCRIPT "bench/peers/torch_train.py"
#endif

#define MAX_PASSES 16
#define MAX_ROUNDS 200

typedef struct train_opts {
    int threads[4];
    int nthreads;
    int rounds;
    int passes;
    int peer;
    const char *filter;
} train_opts;

typedef struct mlp {
    fc_tensor *p[6];
    fc_optim *opt;
    fc_tensor *x, *y;
} mlp;

typedef struct block {
    fc_tensor *p[11];
    fc_tensor *x, *wfix;
} block;

static int fail(fc_ctx *ctx, const char *what)
{
    fprintf(stderr, "fucina-bench train: %s: %s\n", what, fc_ctx_error(ctx));
    return -1;
}

static fc_tensor *param(fc_ctx *ctx, const fc_dim *dims, int rank, uint64_t seed, double k)
{
    fc_tensor *t = fc_rand_uniform(ctx, FC_F32, dims, rank, seed, -k, k);
    if (t) fc_requires_grad(ctx, t, 1);
    return t;
}

static int mlp_setup(fc_ctx *ctx, mlp *m, int64_t batch)
{
    m->p[0] = param(ctx, FC_SHAPE({"h1", 256}, {"in", 784}), 1, 1 / 28.0);
    m->p[1] = param(ctx, FC_SHAPE({"h1", 256}), 2, 1 / 28.0);
    m->p[2] = param(ctx, FC_SHAPE({"h2", 256}, {"h1", 256}), 3, 1 / 16.0);
    m->p[3] = param(ctx, FC_SHAPE({"h2", 256}), 4, 1 / 16.0);
    m->p[4] = param(ctx, FC_SHAPE({"cls", 10}, {"h2", 256}), 5, 1 / 16.0);
    m->p[5] = param(ctx, FC_SHAPE({"cls", 10}), 6, 1 / 16.0);
    m->x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"b", batch}, {"in", 784}), 7, 0, 1);
    m->y = fc_cast(ctx, fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"b", batch}), 8, 0, 9.999), FC_I64);
    m->opt = fc_optim_new(ctx, FC_OPTIM_ADAMW, &(fc_optim_options){.lr = 1e-3, .weight_decay = 0.01});
    if (!m->opt || fc_optim_add_group(m->opt, m->p, FC_NAMES("w1", "b1", "w2", "b2", "w3", "b3"), NULL) < 0)
        return fail(ctx, "mlp setup");
    return 0;
}

static int mlp_step(fc_ctx *ctx, mlp *m)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *h = fc_relu(ctx, fc_linear(ctx, m->x, m->p[0], m->p[1]));
    h = fc_relu(ctx, fc_linear(ctx, h, m->p[2], m->p[3]));
    fc_tensor *l = fc_cross_entropy(ctx, fc_linear(ctx, h, m->p[4], m->p[5]), m->y, "cls", NULL);
    fc_status st = l ? fc_backward(ctx, l) : fc_ctx_status(ctx);
    fc_scope_end(ctx, sc);
    if (st == FC_OK) st = fc_optim_step(m->opt);
    fc_optim_zero_grad(m->opt);
    return st == FC_OK ? 0 : fail(ctx, "mlp step");
}

static void mlp_free(mlp *m)
{
    fc_optim_free(m->opt);
    for (int i = 0; i < 6; i++) fc_release(m->p[i]);
    fc_release(m->x);
    fc_release(m->y);
}

static int block_setup(fc_ctx *ctx, block *b)
{
    b->p[0] = param(ctx, FC_SHAPE({"d", 256}), 11, 1.0);                    /* ln1 weight */
    b->p[1] = param(ctx, FC_SHAPE({"d", 256}), 12, 0.1);                    /* ln1 bias */
    b->p[2] = param(ctx, FC_SHAPE({"qkv", 768}, {"d", 256}), 13, 1 / 16.0); /* q, k, v projections */
    b->p[3] = param(ctx, FC_SHAPE({"d", 256}, {"dm", 256}), 14, 1 / 16.0);  /* output projection */
    b->p[4] = param(ctx, FC_SHAPE({"d", 256}), 15, 1.0);                    /* ln2 */
    b->p[5] = param(ctx, FC_SHAPE({"d", 256}), 16, 0.1);
    b->p[6] = param(ctx, FC_SHAPE({"ff", 1024}, {"d", 256}), 17, 1 / 16.0);
    b->p[7] = param(ctx, FC_SHAPE({"ff", 1024}), 18, 1 / 16.0);
    b->p[8] = param(ctx, FC_SHAPE({"d", 256}, {"ff", 1024}), 19, 1 / 32.0);
    b->p[9] = param(ctx, FC_SHAPE({"d", 256}), 20, 1 / 32.0);
    b->p[10] = NULL;
    b->x = param(ctx, FC_SHAPE({"seq", 128}, {"d", 256}), 21, 1.0);
    b->wfix = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"seq", 128}, {"d", 256}), 22, 0, 1);
    return fc_ctx_status(ctx) == FC_OK ? 0 : fail(ctx, "block setup");
}

static fc_tensor *heads(fc_ctx *ctx, fc_tensor *qkv, int which, const char *seq, const char *head)
{
    fc_tensor *t = fc_split_axis(ctx, fc_narrow(ctx, qkv, "qkv", which * 256, 256), "qkv",
                                 FC_SHAPE({head, 4}, {"hd", 64}));
    return strcmp(seq, "seq") ? fc_rename(ctx, t, "seq", seq) : t;
}

static int block_step(fc_ctx *ctx, block *b)
{
    fc_tensor **p = b->p;
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *h = fc_layernorm(ctx, b->x, p[0], p[1], "d", 1e-5);
    fc_tensor *qkv = fc_linear(ctx, h, p[2], NULL);
    fc_attention_options ao = {.causal = 1, .dim_axis = "hd"};
    fc_tensor *a = fc_attention(ctx, heads(ctx, qkv, 0, "seq", "head"), heads(ctx, qkv, 1, "kv_seq", "kv_head"),
                                heads(ctx, qkv, 2, "kv_seq", "kv_head"), &ao);
    a = fc_merge_axes(ctx, a, FC_AXES("head", "hd"), "dm");
    fc_tensor *x1 = fc_add(ctx, b->x, fc_linear(ctx, a, p[3], NULL));
    fc_tensor *u = fc_gelu(ctx, fc_linear(ctx, fc_layernorm(ctx, x1, p[4], p[5], "d", 1e-5), p[6], p[7]));
    fc_tensor *x2 = fc_add(ctx, x1, fc_linear(ctx, u, p[8], p[9]));
    fc_tensor *l = fc_sum(ctx, fc_mul(ctx, x2, b->wfix), FC_NO_AXES);
    fc_status st = l ? fc_backward(ctx, l) : fc_ctx_status(ctx);
    fc_scope_end(ctx, sc);
    for (int i = 0; i < 10; i++) fc_zero_grad(ctx, p[i]);
    fc_zero_grad(ctx, b->x);
    return st == FC_OK ? 0 : fail(ctx, "block step");
}

static void block_free(block *b)
{
    for (int i = 0; i < 10; i++) fc_release(b->p[i]);
    fc_release(b->x);
    fc_release(b->wfix);
}

/* Backward bookkeeping per record, in ns (median of `rounds`). */
static int node_overhead(fc_ctx *ctx, int rounds, double *ns)
{
    enum { N = 20000 };
    double t[MAX_ROUNDS];
    fc_tensor *x = param(ctx, FC_SHAPE({"i", 1}), 30, 1.0);
    if (!x) return fail(ctx, "node_overhead");
    for (int r = 0; r < rounds; r++) {
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *cur = x;
        for (int i = 0; i < N; i++) cur = fc_add_scalar(ctx, cur, 1.0);
        double t0 = fcb_now();
        fc_status st = fc_backward(ctx, cur);
        t[r] = (fcb_now() - t0) / N * 1e9;
        fc_scope_end(ctx, sc);
        fc_zero_grad(ctx, x);
        if (st != FC_OK) return fail(ctx, "node_overhead");
    }
    fc_release(x);
    *ns = fcb_median(t, (size_t)rounds);
    return 0;
}

/* Median ms per step over `rounds` steps after 3 warm-up steps. */
static int ours(fc_ctx *ctx, const char *name, int rounds, double *ms)
{
    double t[MAX_ROUNDS];
    mlp m = {0};
    block b = {0};
    int is_block = !strcmp(name, "block");
    int rc = is_block ? block_setup(ctx, &b) : mlp_setup(ctx, &m, !strcmp(name, "mlp_b64") ? 64 : 256);
    for (int r = -3; r < rounds && rc == 0; r++) {
        double t0 = fcb_now();
        rc = is_block ? block_step(ctx, &b) : mlp_step(ctx, &m);
        if (r >= 0) t[r] = (fcb_now() - t0) * 1e3;
    }
    if (is_block) block_free(&b);
    else mlp_free(&m);
    if (rc == 0) *ms = fcb_median(t, (size_t)rounds);
    return rc;
}

/* PyTorch's median ms per step (NAN when the peer cannot run). */
static double theirs(const char *name, int threads, int rounds)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' '%s' --threads %d --rounds %d --warmup 3 %s 2>/dev/null", FCB_PYTHON,
             FCB_TORCH_SCRIPT, threads, rounds, name);
    FILE *p = popen(cmd, "r");
    if (!p) return NAN;
    char case_name[64];
    double ms = NAN;
    int n = 0;
    if (fscanf(p, "%63s %lf %d", case_name, &ms, &n) != 3 || strcmp(case_name, name)) ms = NAN;
    if (pclose(p) != 0) ms = NAN;
    return ms;
}

static int parse(int argc, char **argv, train_opts *o)
{
    *o = (train_opts){{1, 2}, 2, 20, 3, 1, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: fucina-bench train [--threads 1,2] [--rounds N] [--passes N] [--filter NAME] [--no-peer]\n"
                   "Cases: node_overhead, mlp_b64, mlp_b256, block (see bench/README.md).\n");
            return 0;
        }
        if (!strcmp(a, "--no-peer")) { o->peer = 0; continue; }
        if (!v) { fprintf(stderr, "fucina-bench train: %s needs a value\n", a); return -1; }
        i++;
        if (!strcmp(a, "--filter")) o->filter = v;
        else if (!strcmp(a, "--rounds") || !strcmp(a, "--passes")) {
            char *end;
            long n = strtol(v, &end, 10);
            int max = !strcmp(a, "--rounds") ? MAX_ROUNDS : MAX_PASSES;
            if (*end || n < 1 || n > max) {
                fprintf(stderr, "fucina-bench train: %s must be 1..%d, not '%s'\n", a, max, v);
                return -1;
            }
            if (!strcmp(a, "--rounds")) o->rounds = (int)n;
            else o->passes = (int)n;
        } else if (!strcmp(a, "--threads")) {
            o->nthreads = 0;
            for (const char *s = v; *s && o->nthreads < 4;) {
                char *end;
                long n = strtol(s, &end, 10);
                if (end == s || n < 1 || n > 256 || (*end && *end != ',')) {
                    fprintf(stderr, "fucina-bench train: bad --threads '%s'\n", v);
                    return -1;
                }
                o->threads[o->nthreads++] = (int)n;
                s = *end ? end + 1 : end;
            }
        } else {
            fprintf(stderr, "fucina-bench train: unknown option '%s'\n", a);
            return -1;
        }
    }
    return 1;
}

int fcb_cmd_train(int argc, char **argv)
{
    train_opts o;
    int rc = parse(argc, argv, &o);
    if (rc <= 0) return rc == 0 ? FCB_EXIT_OK : FCB_EXIT_USAGE;
    fcb_machine mach;
    fcb_machine_probe(&mach);
    fcb_machine_print(stdout, &mach);
    static const char *const cases[] = {"node_overhead", "mlp_b64", "mlp_b256", "block"};
    printf("training steps vs PyTorch (%s); %d alternating passes of %d rounds; median of per-pass medians\n",
           o.peer ? FCB_TORCH_SCRIPT : "peer off", o.passes, o.rounds);
    printf("  %-14s %3s %14s %14s %12s\n", "case", "thr", "fucina", "pytorch", "pt/fucina");
    for (int ti = 0; ti < o.nthreads; ti++) {
        char err[256];
        fc_ctx *ctx = fc_ctx_new(&(fc_ctx_options){.threads = o.threads[ti]}, err, sizeof err);
        if (!ctx) {
            fprintf(stderr, "fucina-bench train: %s\n", err);
            return FCB_EXIT_FAIL;
        }
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            if (o.filter && !strstr(cases[c], o.filter)) continue;
            if (c == 0) {
                double ns;
                if (node_overhead(ctx, o.rounds, &ns)) return FCB_EXIT_FAIL;
                printf("  %-14s %3d %11.1f ns %14s %12s\n", cases[c], o.threads[ti], ns, "-", "-");
                continue;
            }
            double mine[MAX_PASSES], peer[MAX_PASSES];
            int np = 0;
            for (int pass = 0; pass < o.passes; pass++) {
                if (ours(ctx, cases[c], o.rounds, &mine[pass])) return FCB_EXIT_FAIL;
                double t = o.peer ? theirs(cases[c], o.threads[ti], o.rounds) : NAN;
                if (!isnan(t)) peer[np++] = t;
            }
            double a = fcb_median(mine, (size_t)o.passes), b = np ? fcb_median(peer, (size_t)np) : NAN;
            if (np) printf("  %-14s %3d %11.3f ms %11.3f ms %11.2fx\n", cases[c], o.threads[ti], a, b, b / a);
            else printf("  %-14s %3d %11.3f ms %14s %12s\n", cases[c], o.threads[ti], a, "n/a", "n/a");
            fflush(stdout);
        }
        fc_ctx_free(ctx);
    }
    return FCB_EXIT_OK;
}
