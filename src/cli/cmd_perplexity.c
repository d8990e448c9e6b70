/* SPDX-License-Identifier: MIT */
/* fucina perplexity: a text's perplexity by llama-perplexity's method
 * (include/fucina/perplexity.h; docs/LLM.md "Perplexity") and the KL
 * divergence of a model against a base model's saved log-probabilities.
 *
 * llama-perplexity's flags and its two-step KL mode are kept:
 * --kl-divergence-base FILE without --kl-divergence runs the perplexity and
 * saves the tokens and the scored positions' log-probabilities to FILE; with
 * --kl-divergence it reads FILE back (the tokens come from it, -f is not
 * needed) and reports the statistics. The file is ours (KLD_MAGIC below;
 * docs/LLM.md): full f32 log-probabilities rather than llama.cpp's 16-bit
 * codes, so the divergence is exact and a file of one tool does not load in
 * the other. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/text_chunks.h"
#include "fucina/fucina.h"
#include "fucina/perplexity.h"
#include "io/atomic_file.h"
#include "io/read_all.h"

#define CMD "fucina perplexity"
/* the base file: magic, then u32 version, n_vocab, n_ctx, n_chunk; i32 tokens
 * [n_chunk * n_ctx]; per chunk f32 log-probabilities [n_scored * n_vocab];
 * all little-endian (the host's order: x86-64 and arm64) */
#define KLD_MAGIC   "FCKLDBAS"
#define KLD_VERSION 1u
#define KLD_HEADER  24

static void help(FILE *f)
{
    fprintf(f, "usage: fucina perplexity -m MODEL.gguf -f FILE [-c N] [--chunks N] [-t N]\n"
               "                         [--kl-divergence-base BASE.kld [--kl-divergence]]\n\n"
               "The perplexity of a text as llama.cpp's llama-perplexity computes it: the text is tokenized\n"
               "(BOS added when the vocabulary asks for it) and cut into chunks of N tokens, each evaluated\n"
               "from an empty cache with its first token replaced by BOS (when the vocabulary adds BOS); the\n"
               "second half of each chunk is scored. Prints the running estimate per chunk ([1]12.3456,...)\n"
               "and 'Final estimate: PPL = X +/- Y'.\n\n"
               "  -m, --model FILE          the model (or give it as the first argument)\n"
               "  -f, --file FILE           the text ('-': standard input); at least 2*N tokens\n"
               "  -c, --ctx-size N          tokens per chunk (default 512, or the model's context if smaller)\n"
               "  --chunks N                at most N chunks (default: all)\n"
               "  -t, --threads N           threads (default: FUCINA_THREADS, else the usable cores)\n"
               "  --kl-divergence-base F    without --kl-divergence: also save the tokens and log-probabilities\n"
               "                            to F (the base model's run); with it: read them from F\n"
               "  --kl-divergence           compare the model against F: PPL of both, mean KLD, Same top p\n"
               "                            (the tokens and N come from F; -f, when given, must match them)\n"
               "  -h, --help                this help\n\n"
               "Exit status: 0 done, 1 failure, 2 bad usage or input (a text too short, a base file of\n"
               "another vocabulary or other tokens).\n");
}

static int usage_error(const char *what, const char *arg) { return fc_cli_usage_error(CMD, what, arg); }

typedef struct opts {
    fc_cli_chunk_opts c; /* -m -f -c --chunks -t (cli/text_chunks.h) */
    const char *kld_file;
    int kld;
} opts;

static int parse(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int r = fc_cli_chunk_arg(CMD, argc, argv, &i, &o->c);
        if (r == 2) return 2;
        if (r) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--kl-divergence-base")) {
            if (!v) return usage_error("--kl-divergence-base needs a file", NULL);
            o->kld_file = argv[++i];
        } else if (!strcmp(a, "--kl-divergence")) {
            o->kld = 1;
        } else {
            return usage_error("unknown option", a);
        }
    }
    if (!o->c.model) return usage_error("no model (-m MODEL.gguf)", NULL);
    if (o->kld && !o->kld_file) return usage_error("--kl-divergence needs --kl-divergence-base FILE", NULL);
    if (!o->kld && !o->c.file) return usage_error("no text (-f FILE)", NULL);
    return -1;
}

typedef struct kld_base {
    uint32_t n_vocab, n_ctx, n_chunk;
    fc_token *tokens;
    FILE *f; /* positioned at the first chunk's log-probabilities */
} kld_base;

static int read_u32s(FILE *f, uint32_t *v, size_t n)
{
    return fread(v, sizeof *v, n, f) == n;
}

/* Open and check a base file against the model; 2 with the reason printed. */
static int base_open(const char *path, int64_t n_vocab, kld_base *b)
{
    b->f = fopen(path, "rb");
    if (!b->f) {
        fprintf(stderr, CMD ": cannot open the KL base '%s': %s\n", path, strerror(errno));
        return 2;
    }
    char magic[8];
    uint32_t h[4];
    if (fread(magic, 1, 8, b->f) != 8 || memcmp(magic, KLD_MAGIC, 8) || !read_u32s(b->f, h, 4)) {
        fprintf(stderr, CMD ": '%s' is not a KL base file of fucina perplexity (no " KLD_MAGIC " header)\n", path);
        return 2;
    }
    if (h[0] != KLD_VERSION) {
        fprintf(stderr, CMD ": the KL base '%s' has version %u; this build reads version %u\n", path, h[0],
                KLD_VERSION);
        return 2;
    }
    b->n_vocab = h[1], b->n_ctx = h[2], b->n_chunk = h[3];
    if ((int64_t)b->n_vocab != n_vocab) {
        fprintf(stderr, CMD ": the KL base '%s' is of a vocabulary of %u ids; the model's has %lld\n", path, b->n_vocab,
                (long long)n_vocab);
        return 2;
    }
    if (b->n_ctx < 3 || b->n_ctx > (1u << 20) || b->n_chunk < 1 || b->n_chunk > (1u << 20)) {
        fprintf(stderr, CMD ": the KL base '%s' has a bad header (n_ctx %u, %u chunks)\n", path, b->n_ctx, b->n_chunk);
        return 2;
    }
    /* the size first, so a truncated file is refused before any work */
    const uint64_t nt = (uint64_t)b->n_ctx * b->n_chunk;
    const uint64_t want =
        KLD_HEADER + nt * 4 + (uint64_t)b->n_chunk * (uint64_t)fc_ppl_n_scored(b->n_ctx) * b->n_vocab * sizeof(float);
    if (fseeko(b->f, 0, SEEK_END) || (uint64_t)ftello(b->f) != want || fseeko(b->f, KLD_HEADER, SEEK_SET)) {
        fprintf(stderr, CMD ": the KL base '%s' is not %llu bytes as its header says (truncated or not ours)\n", path,
                (unsigned long long)want);
        return 2;
    }
    b->tokens = malloc((size_t)nt * sizeof *b->tokens);
    if (!b->tokens || fread(b->tokens, sizeof *b->tokens, (size_t)nt, b->f) != nt) {
        fprintf(stderr, CMD ": cannot read the tokens of the KL base '%s'\n", path);
        return 2;
    }
    for (uint64_t i = 0; i < nt; i++)
        if (b->tokens[i] < 0 || (int64_t)b->tokens[i] >= n_vocab) {
            fprintf(stderr, CMD ": the KL base '%s' has token %lld = %d, outside the vocabulary\n", path, (long long)i,
                    (int)b->tokens[i]);
            return 2;
        }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The KL mode: the model against the base's log-probabilities. */
static int run_kld(fc_ctx *ctx, const fc_llm_model *m, const opts *o)
{
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    kld_base b = {0};
    int rc = base_open(o->kld_file, nv, &b);
    fc_token *text = NULL;
    size_t nt = 0;
    if (!rc && o->c.n_ctx && o->c.n_ctx != (long long)b.n_ctx) {
        fprintf(stderr, CMD ": -c %lld differs from the KL base's context of %u ('%s')\n", o->c.n_ctx, b.n_ctx,
                o->kld_file);
        rc = 2;
    }
    if (!rc && o->c.file && !(rc = fc_cli_chunk_text(ctx, CMD, m, o->c.file, &text, &nt))) {
        const size_t used = (size_t)b.n_ctx * b.n_chunk;
        for (size_t i = 0; i < used && !rc; i++)
            if (i >= nt || text[i] != b.tokens[i]) {
                fprintf(stderr, CMD ": the KL base '%s' was computed on other tokens than '%s' (token %zu)\n",
                        o->kld_file, o->c.file, i);
                rc = 2;
            }
    }
    const int64_t n_ctx = b.n_ctx, ns = fc_ppl_n_scored(n_ctx);
    int64_t n_chunk = b.n_chunk;
    if (o->c.chunks > 0 && o->c.chunks < n_chunk) n_chunk = o->c.chunks;
    float *base = NULL, *q = NULL;
    double *klds = NULL, *dps = NULL;
    fc_llm_session *s = NULL;
    if (!rc) {
        fc_llm_session_options so = fc_llm_session_default_options();
        so.n_ctx = n_ctx;
        s = fc_llm_session_new_ex(ctx, m, &so);
        base = malloc((size_t)(ns * nv) * sizeof *base);
        q = malloc((size_t)(ns * nv) * sizeof *q);
        klds = malloc((size_t)(ns * n_chunk) * sizeof *klds);
        dps = malloc((size_t)(ns * n_chunk) * sizeof *dps);
        if (!s || !base || !q || !klds || !dps) {
            fprintf(stderr, CMD ": %s\n", s ? "out of memory" : fc_ctx_error(ctx));
            rc = 1;
        }
    }
    fc_kld_acc acc = {0};
    if (!rc) {
        fprintf(stderr, CMD ": %lld chunks of %lld tokens from '%s'\n", (long long)n_chunk, (long long)n_ctx,
                o->kld_file);
        printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS"
               "            Same top p\n");
    }
    for (int64_t c = 0; c < n_chunk && !rc; c++) {
        if (fread(base, sizeof *base, (size_t)(ns * nv), b.f) != (size_t)(ns * nv)) {
            fprintf(stderr, CMD ": cannot read chunk %lld of the KL base '%s'\n", (long long)c + 1, o->kld_file);
            rc = 2;
            break;
        }
        const fc_token *ct = b.tokens + c * n_ctx;
        if (fc_ppl_eval_chunk(ctx, s, ct, n_ctx, NULL, q) != FC_OK) {
            fprintf(stderr, CMD ": chunk %lld: %s\n", (long long)c + 1, fc_ctx_error(ctx));
            rc = 1;
            break;
        }
        const int64_t first = fc_ppl_first(n_ctx);
        for (int64_t j = 0; j < ns; j++)
            klds[c * ns + j] = fc_kld_add(&acc, base + j * nv, q + j * nv, nv, ct[first + 1 + j], &dps[c * ns + j]);
        const fc_kld_stats st = fc_kld_summary(&acc);
        printf("%4lld    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
               (long long)c + 1, st.ppl, st.ppl_err, st.ln_ratio, st.ln_ratio_err, st.kld, st.kld_err,
               100 * st.p_diff_rms, 100 * st.p_diff_rms_err, 100 * st.same_top, 100 * st.same_top_err);
    }
    if (!rc) {
        /* llama-perplexity's report, line for line (its percentiles, its medians) */
        const fc_kld_stats st = fc_kld_summary(&acc);
        const size_t n = (size_t)acc.count;
        qsort(klds, n, sizeof *klds, cmp_double);
        qsort(dps, n, sizeof *dps, cmp_double);
        const double kld_median = n % 2 ? klds[n / 2] : 0.5 * (klds[n / 2] + klds[n / 2 - 1]);
        const double dp_median = n % 2 ? dps[n / 2] : 0.5 * (dps[n / 2] + dps[n / 2 - 1]);
        printf("\n====== Perplexity statistics ======\n");
        printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", st.ppl, st.ppl_err);
        printf("Mean PPL(base)                : %10.6f ± %10.6f\n", st.ppl_base, st.ppl_base_err);
        printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * st.ln_ppl_cor);
        printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", st.ln_ratio, st.ln_ratio_err);
        printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", st.ratio, st.ratio_err);
        printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", st.diff, st.diff_err);
        printf("\n====== KL divergence statistics ======\n");
        printf("Mean    KLD: %10.6f ± %10.6f\n", st.kld, st.kld_err);
        printf("Maximum KLD: %10.6f\n", klds[n - 1]);
        static const struct {
            const char *name;
            float f;
        } kq[] = {{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}},
          kl[] = {{"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}},
          dq[] = {{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}, {"75.0%", 0.750f}},
          dl[] = {{"25.0%", 0.250f}, {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}};
        for (size_t k = 0; k < sizeof kq / sizeof kq[0]; k++)
            printf("%s   KLD: %10.6f\n", kq[k].name, fc_kld_percentile(klds, n, kq[k].f));
        printf("Median  KLD: %10.6f\n", kld_median);
        for (size_t k = 0; k < sizeof kl / sizeof kl[0]; k++)
            printf("%s   KLD: %10.6f\n", kl[k].name, fc_kld_percentile(klds, n, kl[k].f));
        printf("Minimum KLD: %10.6f\n", klds[0]);
        printf("\n====== Token probability statistics ======\n");
        printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * st.p_diff, 100 * st.p_diff_err);
        printf("Maximum Δp: %6.3f%%\n", 100 * dps[n - 1]);
        for (size_t k = 0; k < sizeof dq / sizeof dq[0]; k++)
            printf("%s   Δp: %6.3f%%\n", dq[k].name, 100 * fc_kld_percentile(dps, n, dq[k].f));
        printf("Median  Δp: %6.3f%%\n", 100 * dp_median);
        for (size_t k = 0; k < sizeof dl / sizeof dl[0]; k++)
            printf("%s   Δp: %6.3f%%\n", dl[k].name, 100 * fc_kld_percentile(dps, n, dl[k].f));
        printf("Minimum Δp: %6.3f%%\n", 100 * dps[0]);
        printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * st.p_diff_rms, 100 * st.p_diff_rms_err);
        printf("Same top p: %6.3f ± %5.3f %%\n", 100 * st.same_top, 100 * st.same_top_err);
    }
    fc_llm_session_free(s);
    free(base);
    free(q);
    free(klds);
    free(dps);
    free(b.tokens);
    fc_tokens_free(text);
    if (b.f) fclose(b.f);
    return rc;
}

/* The perplexity run; with o->kld_file, the base file written as it goes. */
static int run_ppl(fc_ctx *ctx, const fc_llm_model *m, const opts *o)
{
    const fc_llm_hparams *hp = fc_llm_model_hparams(m);
    const int64_t nv = hp->n_vocab;
    const int64_t n_ctx = fc_cli_chunk_ctx(CMD, m, o->c.n_ctx);
    fc_token *toks = NULL;
    size_t nt = 0;
    int rc = fc_cli_chunk_text(ctx, CMD, m, o->c.file, &toks, &nt);
    if (rc) return rc;
    const int64_t n_chunk = fc_cli_chunk_count(CMD, o->c.file, nt, 0, n_ctx, o->c.chunks);
    if (!n_chunk) {
        fc_tokens_free(toks);
        return 2;
    }
    const int64_t ns = fc_ppl_n_scored(n_ctx);
    fc_atomic_file af = {0};
    int writing = 0;
    float *lp = NULL;
    if (o->kld_file) {
        if (!fc_atomic_open(&af, ctx, CMD, o->kld_file)) {
            fprintf(stderr, CMD ": %s\n", fc_ctx_error(ctx));
            fc_tokens_free(toks);
            return 2;
        }
        writing = 1;
        const uint32_t h[4] = {KLD_VERSION, (uint32_t)nv, (uint32_t)n_ctx, (uint32_t)n_chunk};
        lp = malloc((size_t)(ns * nv) * sizeof *lp);
        if (!lp || !fc_atomic_write(&af, KLD_MAGIC, 8) || !fc_atomic_write(&af, h, sizeof h) ||
            !fc_atomic_write(&af, toks, (size_t)(n_chunk * n_ctx) * sizeof *toks))
            rc = 1;
    }
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = n_ctx;
    fc_llm_session *s = rc ? NULL : fc_llm_session_new_ex(ctx, m, &so);
    if (!rc && !s) rc = 1;
    if (!rc)
        fprintf(stderr, CMD ": %zu tokens, %lld chunks of %lld, %lld scored per chunk\n", nt, (long long)n_chunk,
                (long long)n_ctx, (long long)ns);
    fc_ppl_acc acc = {0};
    for (int64_t c = 0; c < n_chunk && !rc; c++) {
        if (fc_ppl_eval_chunk(ctx, s, toks + c * n_ctx, n_ctx, &acc, lp) != FC_OK ||
            (writing && !fc_atomic_write(&af, lp, (size_t)(ns * nv) * sizeof *lp))) {
            rc = 1;
            break;
        }
        printf("[%lld]%.4f,", (long long)c + 1, fc_ppl_estimate(&acc, NULL));
        fflush(stdout);
    }
    if (!rc) {
        printf("\n");
        double err;
        const double ppl = fc_ppl_estimate(&acc, &err);
        if (err > 0)
            printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
        else
            fprintf(stderr, CMD ": unexpected non-positive variance of log(prob) (PPL %.4f)\n", ppl);
    }
    if (writing && !rc && !fc_atomic_commit(&af)) rc = 1;
    if (writing && rc) fc_atomic_abort(&af);
    if (rc) fprintf(stderr, CMD ": %s\n", fc_ctx_error(ctx));
    fc_llm_session_free(s);
    free(lp);
    fc_tokens_free(toks);
    return rc;
}

int fc_cmd_perplexity(int argc, char **argv)
{
    opts o = {0};
    const int pr = parse(argc, argv, &o);
    if (pr >= 0) return pr;
    fc_ctx *ctx = fc_cli_chunk_ctx_new(CMD, &o.c);
    if (!ctx) return 1;
    /* a bad destination fails before the model loads */
    if (o.kld_file && !o.kld && !fc_atomic_check_dest(ctx, CMD, o.kld_file)) {
        fprintf(stderr, CMD ": cannot write the KL base: %s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 2;
    }
    fc_llm_model *m = fc_cli_chunk_model(ctx, CMD, &o.c);
    if (!m) {
        fc_ctx_free(ctx);
        return 2;
    }
    const int rc = o.kld ? run_kld(ctx, m, &o) : run_ppl(ctx, m, &o);
    fc_llm_model_free(m);
    fc_ctx_free(ctx);
    return rc;
}
