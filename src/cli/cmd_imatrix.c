/* SPDX-License-Identifier: MIT */
/* fucina imatrix: an importance matrix of a model over a text, as llama.cpp's
 * llama-imatrix computes it (tools/imatrix/imatrix.cpp), written in its GGUF
 * format (include/fucina/imatrix.h) for `fucina quantize --imatrix` or
 * llama-quantize.
 *
 * The text is cut into chunks of N tokens as llama-imatrix (and
 * llama-perplexity) cut it: each chunk from an empty cache, its first token
 * replaced by BOS when the vocabulary adds BOS. Every position's input to
 * every weight matrix is collected (fc_imatrix_collector_new); the second
 * half of each chunk is scored for the running perplexity it prints. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/text_chunks.h"
#include "fucina/fucina.h"
#include "fucina/imatrix.h"
#include "fucina/perplexity.h"
#include "io/atomic_file.h"
#include "io/read_all.h"

#define CMD   "fucina imatrix"
#define PIECE 512 /* rows per forward call, and so rows of logits held at once */

static void help(FILE *f)
{
    fprintf(f, "usage: fucina imatrix MODEL.gguf -f TEXT -o OUT.gguf [-c N] [--chunks N] [--chunk K] [-t N]\n"
               "                      [--process-output]\n\n"
               "Computes an importance matrix as llama.cpp's llama-imatrix does: the text is tokenized and\n"
               "cut into chunks of N tokens, each evaluated from an empty cache with its first token\n"
               "replaced by BOS (when the vocabulary adds BOS); for every weight matrix W of a layer (y = W x)\n"
               "the squares of its input columns are summed over every token, in_sum2[j] += x_j^2, with the\n"
               "token count (for an expert tensor, per expert over the tokens routed to it). OUT.gguf is\n"
               "llama-imatrix's GGUF format (general.type = imatrix, <name>.in_sum2 and <name>.counts), read\n"
               "by `fucina quantize --imatrix` and by llama-quantize. Prints the running perplexity of each\n"
               "chunk's second half, as llama-imatrix does.\n\n"
               "  -m, --model FILE          the model (or give it as the first argument)\n"
               "  -f, --file FILE           the calibration text ('-': standard input); at least 2*N tokens\n"
               "  -o, --output FILE         the imatrix to write (default: imatrix.gguf)\n"
               "  -c, --ctx-size N          tokens per chunk (default 512, or the model's context if smaller)\n"
               "  --chunks N                at most N chunks (default: all)\n"
               "  --chunk K                 skip the first K chunks (llama-imatrix's --chunk)\n"
               "  --process-output          also collect output.weight (when not tied to token_embd)\n"
               "  -t, --threads N           threads (default: FUCINA_THREADS, else the usable cores)\n"
               "  -h, --help                this help\n\n"
               "Exit status: 0 done, 1 failure, 2 bad usage or input (a text too short, an unreadable model).\n");
}

static int usage_error(const char *what, const char *arg)
{
    return fc_cli_usage_error(CMD, what, arg);
}

typedef struct opts {
    fc_cli_chunk_opts c; /* -m -f -c --chunks -t (cli/text_chunks.h) */
    const char *out;
    long long skip;
    int process_output;
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
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--output-file")) {
            if (!v) return usage_error("-o needs a file", NULL);
            o->out = argv[++i];
        } else if (!strcmp(a, "--chunk")) {
            /* llama-imatrix's --chunk: start after this many chunks */
            if (v && !strcmp(v, "0"))
                o->skip = 0;
            else if ((o->skip = fc_cli_parse_count(v, INT32_MAX)) < 0)
                return usage_error("--chunk needs a count of chunks to skip, not", v ? v : "");
            i++;
        } else if (!strcmp(a, "--process-output")) {
            o->process_output = 1;
        } else {
            return usage_error("unknown option", a);
        }
    }
    if (!o->c.model) return usage_error("no model (-m MODEL.gguf)", NULL);
    if (!o->c.file) return usage_error("no calibration text (-f FILE)", NULL);
    if (!o->out) o->out = "imatrix.gguf";
    return -1;
}

/* One chunk: every position through the model (the collector sums), the
 * second half's NLL into acc. Logits are computed where they are scored,
 * and everywhere with --process-output (the output head's input is then
 * collected for every position, as llama-imatrix asks for all outputs). */
static fc_status eval_chunk(fc_ctx *ctx, fc_llm_session *s, const fc_llm_model *m, const fc_token *chunk, int64_t n_ctx,
                            int all_logits, float *rows, fc_ppl_acc *acc)
{
    const fc_tokenizer *tok = fc_llm_model_tokenizer(m);
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab, first = fc_ppl_first(n_ctx);
    fc_token *t = malloc((size_t)n_ctx * sizeof *t);
    if (!t) return FC_ERR_OOM;
    memcpy(t, chunk, (size_t)n_ctx * sizeof *t);
    if (tok && fc_tokenizer_add_bos(tok) && fc_tokenizer_bos(tok) != FC_TOKEN_NONE) t[0] = fc_tokenizer_bos(tok);
    fc_llm_session_reset(s);
    fc_status st = FC_OK;
    for (int64_t p0 = 0; p0 < n_ctx && st == FC_OK; p0 += PIECE) {
        const int64_t n = n_ctx - p0 < PIECE ? n_ctx - p0 : PIECE;
        const int scored = p0 + n > first && p0 < n_ctx - 1;
        const int want = scored || all_logits;
        st = fc_llm_session_eval_ex(ctx, s, t + p0, (size_t)n, want ? FC_LLM_LOGITS_ALL : FC_LLM_LOGITS_NONE,
                                    want ? rows : NULL);
        if (st != FC_OK || !scored) continue;
        for (int64_t p = p0 > first ? p0 : first; p < p0 + n && p < n_ctx - 1; p++) {
            const double v = fc_ppl_nll(rows + (size_t)(p - p0) * (size_t)nv, nv, t[p + 1]);
            acc->nll += v;
            acc->nll2 += v * v;
            acc->count++;
        }
    }
    free(t);
    return st;
}

static int run(fc_ctx *ctx, fc_llm_model *m, const opts *o)
{
    const fc_llm_hparams *hp = fc_llm_model_hparams(m);
    const int64_t n_ctx = fc_cli_chunk_ctx(CMD, m, o->c.n_ctx);
    size_t nt = 0;
    fc_token *toks = NULL;
    const int tr = fc_cli_chunk_text(ctx, CMD, m, o->c.file, &toks, &nt);
    if (tr) return tr;
    size_t skipped = 0;
    if (o->skip > 0) { /* as llama-imatrix: two chunks must remain after the skipped ones */
        if ((size_t)((o->skip + 2) * n_ctx) >= nt) {
            fprintf(stderr, CMD ": --chunk %lld leaves too few tokens: '%s' has %zu, %lld chunks of %lld are skipped\n",
                    o->skip, o->c.file, nt, o->skip, (long long)n_ctx);
            fc_tokens_free(toks);
            return 2;
        }
        skipped = (size_t)(o->skip * n_ctx);
    }
    const int64_t n_chunk = fc_cli_chunk_count(CMD, o->c.file, nt, skipped, n_ctx, o->c.chunks);
    if (!n_chunk) {
        fc_tokens_free(toks);
        return 2;
    }
    fc_imatrix *im = fc_imatrix_new();
    fc_llm_session_options so = fc_llm_session_default_options();
    so.n_ctx = n_ctx;
    fc_llm_session *s = im ? fc_llm_session_new_ex(ctx, m, &so) : NULL;
    float *rows = malloc((size_t)PIECE * (size_t)hp->n_vocab * sizeof *rows);
    fc_imatrix_collector *col = s && rows ? fc_imatrix_collector_new(ctx, m, im, o->process_output) : NULL;
    int rc = 0;
    if (!col) {
        fprintf(stderr, CMD ": %s\n", im && s && rows ? fc_ctx_error(ctx) : "out of memory");
        rc = 1;
    }
    if (!rc)
        fprintf(stderr, CMD ": %zu tokens, %lld chunks of %lld; collecting %lld matrices\n", nt, (long long)n_chunk,
                (long long)n_ctx, (long long)im->n_entries);
    fc_ppl_acc acc = {0};
    for (int64_t c = 0; c < n_chunk && !rc; c++) {
        if (eval_chunk(ctx, s, m, toks + skipped + c * n_ctx, n_ctx, o->process_output, rows, &acc) != FC_OK) {
            fprintf(stderr, CMD ": chunk %lld: %s\n", (long long)c + 1, fc_ctx_error(ctx));
            rc = 1;
            break;
        }
        printf("[%lld]%.4f,", (long long)c + 1, fc_ppl_estimate(&acc, NULL));
        fflush(stdout);
    }
    fc_imatrix_collector_free(col);
    if (!rc) {
        printf("\n");
        double err;
        const double ppl = fc_ppl_estimate(&acc, &err);
        printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
        /* llama-imatrix: the chunks seen, the chunk size, the text's path */
        im->chunk_count = (uint32_t)n_chunk;
        im->chunk_size = (uint32_t)n_ctx;
        if (fc_imatrix_add_dataset(im, o->c.file) != FC_OK || fc_imatrix_save(ctx, im, o->out) != FC_OK) {
            fprintf(stderr, CMD ": cannot write '%s': %s\n", o->out, fc_ctx_error(ctx));
            rc = 1;
        } else {
            fprintf(stderr, CMD ": %lld entries over %lld chunks written to %s\n", (long long)im->n_entries,
                    (long long)n_chunk, o->out);
        }
    }
    fc_llm_session_free(s);
    free(rows);
    fc_imatrix_free(im);
    fc_tokens_free(toks);
    return rc;
}

int fc_cmd_imatrix(int argc, char **argv)
{
    opts o = {0};
    const int pr = parse(argc, argv, &o);
    if (pr >= 0) return pr;
    fc_ctx *ctx = fc_cli_chunk_ctx_new(CMD, &o.c);
    if (!ctx) return 1;
    /* a bad destination fails before the model loads */
    if (!fc_atomic_check_dest(ctx, CMD, o.out)) {
        fprintf(stderr, "%s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 2;
    }
    fc_llm_model *m = fc_cli_chunk_model(ctx, CMD, &o.c);
    if (!m) {
        fc_ctx_free(ctx);
        return 2;
    }
    const int rc = run(ctx, m, &o);
    fc_llm_model_free(m);
    fc_ctx_free(ctx);
    return rc;
}
