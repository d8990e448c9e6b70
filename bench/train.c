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
 *   gpt_small      one whole training step of the project's language model
 *   gpt_step       (fc_lm_new, qwen3: per-head Q/K norms, NeoX RoPE, SiLU-gated
 *                  FFN, untied output): forward, fc_lm_loss, backward of the
 *                  mean loss, and one step of fc_lm_optimizer (Muon on the
 *                  layers' matrices, AdamW on embeddings, head and norms, the
 *                  recipe's default hyper-parameters), as fc_lm_train's step
 *                  runs it (lr factor 1, no clipping, no accumulation).
 *                  Sizes in gpt_sizes[] below: gpt_step 4 layers, width 256,
 *                  4 heads of 64, FFN 768, vocabulary 4096, batch 4 x seq
 *                  256; gpt_small 2 layers, width 128, 2 heads of 64, FFN
 *                  384, vocabulary 4096, batch 4 x seq 128. Reported as
 *                  tokens/s (batch * seq / step time); the peer is the
 *                  PyTorch replica of tests/goldens/gen_lm_goldens.py. A
 *                  line under each gives both sides' mean loss at the first
 *                  and the last step of the first pass on the same tokens
 *                  (ln(vocab) at the first step: the head starts at zero),
 *                  and after the table the best thread setting of each side.
 *
 * For each thread count, Fucina's rounds and PyTorch's (bench/peers/
 * torch_train.py, run by the Python CMake found, with torch.set_num_threads
 * set to the same count) alternate `--passes` times; the table gives the
 * median of the per-pass medians and the ratio PyTorch time / Fucina time
 * (above 1: Fucina is faster). Without torch the peer column says n/a. The
 * peer sets OpenBLAS's thread count and, where OpenBLAS does not know the
 * CPU, its kernels before torch loads (torch_train.py says why), and tells
 * what it ran with on a "# peer:" line, shown once. */
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

/* The gpt cases' shapes; torch_train.py's GPT_SIZES holds the same. */
typedef struct gpt_size {
    const char *name;
    int64_t n_layer, n_embd, n_head, head_dim, n_ff, n_vocab, batch, seq;
} gpt_size;

static const gpt_size gpt_sizes[] = {
    {"gpt_small", 2, 128, 2, 64, 384, 4096, 4, 128},
    {"gpt_step", 4, 256, 4, 64, 768, 4096, 4, 256},
};

typedef struct gpt {
    fc_lm *lm;
    fc_optim *opt;
    fc_tensor *x, *y;
    double n_targets;
    double first_loss, last_loss; /* mean nats per target; NaN before a step */
} gpt;

static const gpt_size *gpt_size_of(const char *name)
{
    for (size_t i = 0; i < sizeof gpt_sizes / sizeof gpt_sizes[0]; i++)
        if (!strcmp(gpt_sizes[i].name, name)) return &gpt_sizes[i];
    return NULL;
}

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

/* The same tokens as torch_train.py's gpt_data: a 64-bit LCG, token =
 * (state >> 33) % vocab, `batch` rows of seq + 1 tokens; x the first seq
 * of a row, y the last seq. */
static void gpt_data(const gpt_size *z, int32_t *x, int32_t *y)
{
    uint64_t s = 12345;
    for (int64_t b = 0; b < z->batch; b++)
        for (int64_t t = 0; t <= z->seq; t++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            const int32_t tok = (int32_t)((s >> 33) % (uint64_t)z->n_vocab);
            if (t < z->seq) x[b * z->seq + t] = tok;
            if (t > 0) y[b * z->seq + t - 1] = tok;
        }
}

static int gpt_setup(fc_ctx *ctx, gpt *g, const gpt_size *z)
{
    const fc_lm_config cfg = {.arch = "qwen3", .n_vocab = z->n_vocab, .n_embd = z->n_embd, .n_layer = z->n_layer,
                              .n_head = z->n_head, .n_head_kv = z->n_head, .head_dim = z->head_dim,
                              .n_ff = z->n_ff, .n_ctx = z->seq, .seed = 1234};
    g->first_loss = g->last_loss = NAN;
    g->lm = fc_lm_new(ctx, NULL, &cfg);
    if (!g->lm) return fail(ctx, "gpt setup");
    g->opt = fc_lm_optimizer(ctx, g->lm, NULL); /* the recipe's defaults, as `fucina pretrain` */
    if (!g->opt) return fail(ctx, "gpt setup");
    const size_t n = (size_t)(z->batch * z->seq);
    int32_t *buf = malloc(2 * n * sizeof *buf);
    if (!buf) return fail(ctx, "gpt setup (out of memory)");
    gpt_data(z, buf, buf + n);
    g->x = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", z->batch}, {"seq", z->seq}), buf, n * sizeof *buf);
    g->y = fc_from_data(ctx, FC_I32, FC_SHAPE({"b", z->batch}, {"seq", z->seq}), buf + n, n * sizeof *buf);
    free(buf);
    g->n_targets = (double)n;
    return g->x && g->y ? 0 : fail(ctx, "gpt setup");
}

/* One optimizer step as fc_lm_train takes it (src/llm/lm_train.c,
 * train_step with one micro-batch): backward of the summed loss times
 * 1 / targets, the optimizer's step, gradients zeroed. */
static int gpt_step(fc_ctx *ctx, gpt *g)
{
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *loss = fc_lm_loss(ctx, g->lm, g->x, g->y, NULL);
    fc_status st = loss ? fc_backward(ctx, fc_mul_scalar(ctx, loss, 1.0 / g->n_targets)) : fc_ctx_status(ctx);
    if (st == FC_OK) {
        g->last_loss = fc_tensor_item(loss) / g->n_targets;
        if (isnan(g->first_loss)) g->first_loss = g->last_loss;
    }
    fc_scope_end(ctx, sc);
    if (st == FC_OK) st = fc_optim_step(g->opt);
    fc_optim_zero_grad(g->opt);
    return st == FC_OK ? 0 : fail(ctx, "gpt step");
}

static void gpt_free(gpt *g)
{
    fc_optim_free(g->opt);
    fc_lm_free(g->lm);
    fc_release(g->x);
    fc_release(g->y);
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

/* Median ms per step over `rounds` steps after 3 warm-up steps; for the
 * gpt cases also the first and last step's mean loss into loss[2]. */
static int ours(fc_ctx *ctx, const char *name, int rounds, double *ms, double loss[2])
{
    double t[MAX_ROUNDS];
    mlp m = {0};
    block b = {0};
    gpt g = {0};
    const gpt_size *z = gpt_size_of(name);
    int is_block = !strcmp(name, "block");
    int rc = z ? gpt_setup(ctx, &g, z)
                 : is_block ? block_setup(ctx, &b) : mlp_setup(ctx, &m, !strcmp(name, "mlp_b64") ? 64 : 256);
    for (int r = -3; r < rounds && rc == 0; r++) {
        double t0 = fcb_now();
        rc = z ? gpt_step(ctx, &g) : is_block ? block_step(ctx, &b) : mlp_step(ctx, &m);
        if (r >= 0) t[r] = (fcb_now() - t0) * 1e3;
    }
    if (z) {
        loss[0] = g.first_loss;
        loss[1] = g.last_loss;
        gpt_free(&g);
    } else if (is_block) block_free(&b);
    else mlp_free(&m);
    if (rc == 0) *ms = fcb_median(t, (size_t)rounds);
    return rc;
}

/* PyTorch's median ms per step (NAN when the peer cannot run); for the gpt
 * cases the first and last step's mean loss into loss[2] (NaN if absent). */
static double theirs(const char *name, int threads, int rounds, double loss[2])
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' '%s' --threads %d --rounds %d --warmup 3 %s 2>/dev/null", FCB_PYTHON,
             FCB_TORCH_SCRIPT, threads, rounds, name);
    FILE *p = popen(cmd, "r");
    if (!p) return NAN;
    /* "# peer: ..." (what the peer ran with: torch, threads, BLAS kernels),
     * shown once; then "<case> <ms> <steps> [<first loss> <last loss>]" */
    static int noted;
    char line[512], case_name[64];
    double ms = NAN;
    int n = 0, got = 0;
    loss[0] = loss[1] = NAN;
    while (fgets(line, sizeof line, p)) {
        if (line[0] == '#') {
            if (!noted++) printf("  %s", line);
            continue;
        }
        got = sscanf(line, "%63s %lf %d %lf %lf", case_name, &ms, &n, &loss[0], &loss[1]);
        break;
    }
    if (got < 3 || strcmp(case_name, name)) ms = NAN;
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
                   "Cases: node_overhead, mlp_b64, mlp_b256, block, gpt_small, gpt_step (see bench/train.c's\n"
                   "header and bench/README.md). A gpt_step step takes about a second a side: e.g.\n"
                   "  fucina-bench train --filter gpt --rounds 5 --passes 3\n");
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
    static const char *const cases[] = {"node_overhead", "mlp_b64", "mlp_b256", "block", "gpt_small", "gpt_step"};
    enum { NCASES = sizeof cases / sizeof cases[0] };
    /* the gpt cases' tokens/s per thread setting, for the best-of summary */
    double tps[NCASES][4][2];
    for (int c = 0; c < NCASES; c++)
        for (int ti = 0; ti < 4; ti++) tps[c][ti][0] = tps[c][ti][1] = NAN;
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
        for (size_t c = 0; c < NCASES; c++) {
            if (o.filter && !strstr(cases[c], o.filter)) continue;
            const gpt_size *z = gpt_size_of(cases[c]);
            if (c == 0) {
                double ns;
                if (node_overhead(ctx, o.rounds, &ns)) return FCB_EXIT_FAIL;
                printf("  %-14s %3d %11.1f ns %14s %12s\n", cases[c], o.threads[ti], ns, "-", "-");
                continue;
            }
            double mine[MAX_PASSES], peer[MAX_PASSES];
            double my_loss[2] = {NAN, NAN}, peer_loss[2] = {NAN, NAN}, l[2];
            int np = 0;
            for (int pass = 0; pass < o.passes; pass++) {
                if (ours(ctx, cases[c], o.rounds, &mine[pass], pass ? l : my_loss)) return FCB_EXIT_FAIL;
                double t = o.peer ? theirs(cases[c], o.threads[ti], o.rounds, l) : NAN;
                if (!isnan(t)) {
                    if (!np) memcpy(peer_loss, l, sizeof l);
                    peer[np++] = t;
                }
            }
            double a = fcb_median(mine, (size_t)o.passes), b = np ? fcb_median(peer, (size_t)np) : NAN;
            if (z) {
                /* tokens/s: targets per step over the step's median time */
                const double tok = (double)(z->batch * z->seq);
                tps[c][ti][0] = tok / (a * 1e-3);
                tps[c][ti][1] = np ? tok / (b * 1e-3) : NAN;
                if (np)
                    printf("  %-14s %3d %8.0f tok/s %8.0f tok/s %11.2fx  (%.1f ms vs %.1f ms per step)\n", cases[c],
                           o.threads[ti], tps[c][ti][0], tps[c][ti][1], b / a, a, b);
                else
                    printf("  %-14s %3d %8.0f tok/s %14s %12s  (%.1f ms per step)\n", cases[c], o.threads[ti],
                           tps[c][ti][0], "n/a", "n/a", a);
                printf("  %-14s     mean loss, step 1: fucina %.4f pytorch %.4f (ln %lld = %.4f); step %d: fucina "
                       "%.4f pytorch %.4f\n",
                       "", my_loss[0], peer_loss[0], (long long)z->n_vocab, log((double)z->n_vocab), o.rounds + 3,
                       my_loss[1], peer_loss[1]);
            } else if (np)
                printf("  %-14s %3d %11.3f ms %11.3f ms %11.2fx\n", cases[c], o.threads[ti], a, b, b / a);
            else printf("  %-14s %3d %11.3f ms %14s %12s\n", cases[c], o.threads[ti], a, "n/a", "n/a");
            fflush(stdout);
        }
        fc_ctx_free(ctx);
    }
    /* The measure: each side at its best thread setting. */
    for (int c = 0; c < NCASES; c++) {
        int bf = -1, bp = -1;
        for (int ti = 0; ti < o.nthreads; ti++) {
            if (!isnan(tps[c][ti][0]) && (bf < 0 || tps[c][ti][0] > tps[c][bf][0])) bf = ti;
            if (!isnan(tps[c][ti][1]) && (bp < 0 || tps[c][ti][1] > tps[c][bp][1])) bp = ti;
        }
        if (bf < 0) continue;
        if (bp < 0)
            printf("  %-14s best: fucina %.0f tok/s (%d thr); pytorch n/a\n", cases[c], tps[c][bf][0], o.threads[bf]);
        else
            printf("  %-14s best: fucina %.0f tok/s (%d thr), pytorch %.0f tok/s (%d thr): %.2fx\n", cases[c],
                   tps[c][bf][0], o.threads[bf], tps[c][bp][1], o.threads[bp], tps[c][bf][0] / tps[c][bp][1]);
    }
    return FCB_EXIT_OK;
}
