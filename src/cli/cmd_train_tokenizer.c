/* SPDX-License-Identifier: MIT */
/* fucina train-tokenizer: a byte-level BPE tokenizer trained on files and
 * written as a GGUF (fc_tokenizer_train, include/fucina/tokenizer_train.h).
 * A file ending in .jsonl is one document per non-blank line, the string
 * field --jsonl-field (default "text") of the line's JSON object; any other
 * file is one document. Usage errors and unreadable or malformed inputs exit
 * 2, other failures (memory, writing the file) 1, as every command does
 * (cli/cli.h). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/grow.h"
#include "core/str.h"
#include "fucina/fucina.h"
#include "fucina/tokenizer_train.h"
#include "io/atomic_file.h"
#include "io/json_value.h"
#include "io/read_all.h"

#define CMD          "fucina train-tokenizer"
#define MAX_SPECIALS 1024

static void help(FILE *f)
{
    fprintf(f, "usage: fucina train-tokenizer -o OUT.gguf [--vocab-size N] [--pre NAME] [--special TOKEN]...\n"
               "                              [--arch NAME] [--min-pair-count N] [--jsonl-field NAME] FILE...\n\n"
               "Trains a byte-level BPE tokenizer (GPT-2 / tiktoken style) on the files and writes it as a\n"
               "GGUF holding only the tokenizer (fucina tokenize -m and llama.cpp's vocab-only load read it).\n"
               "A FILE ending in .jsonl is one document per line (a JSON object's string field); any other\n"
               "file is one document. No word crosses two documents.\n\n"
               "  -o, --output PATH     the GGUF to write (required; replaced atomically)\n"
               "  --vocab-size N        total ids: 256 bytes + merges + specials (default 4096)\n"
               "  --pre NAME            pre-tokenizer: llama-bpe (default; GPT-4's split, digits in threes),\n"
               "                        qwen2 (single digits), gpt2\n"
               "  --special TOKEN       a special (control) token; repeatable, replaces the default set\n"
               "                        <|endoftext|> <|im_start|> <|im_end|>; BOS = PAD = the first, EOS = the last\n"
               "  --arch NAME           general.architecture of the file (default qwen3)\n"
               "  --min-pair-count N    stop when the best pair occurs fewer than N times (default 2)\n"
               "  --jsonl-field NAME    the field holding a .jsonl line's text (default text)\n"
               "  -h, --help            this help\n\n"
               "Prints one line: the vocabulary size, merges, documents, bytes and seconds.\n"
               "Exit status: 0 done, 1 failure, 2 bad usage or input.\n");
}

static int usage_error(const char *what, const char *arg) { return fc_cli_usage_error(CMD, what, arg); }

/* The documents: bytes in one arena, found by offset (the arena moves). */
typedef struct docs {
    char *bytes;
    size_t n_bytes, bytes_cap;
    size_t *off, *len;
    size_t n, cap, len_cap;
} docs;

static int doc_add(docs *d, const char *s, size_t n)
{
    if (fc_grow((void **)&d->bytes, &d->bytes_cap, d->n_bytes + n + 1, 1)) return -1;
    if (fc_grow((void **)&d->off, &d->cap, d->n + 1, sizeof *d->off)) return -1;
    if (fc_grow((void **)&d->len, &d->len_cap, d->n + 1, sizeof *d->len)) return -1;
    memcpy(d->bytes + d->n_bytes, s, n);
    d->off[d->n] = d->n_bytes;
    d->len[d->n] = n;
    d->n_bytes += n;
    d->n++;
    return 0;
}

/* Each non-blank line's string field. 0, 1 out of memory, 2 bad input (said). */
static int add_jsonl(docs *d, const char *path, const char *text, size_t n, const char *field)
{
    size_t line = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(text + i, '\n', n - i);
        const size_t end = nl ? (size_t)(nl - text) : n;
        line++;
        size_t a = i;
        while (a < end && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r')) a++;
        if (a < end) {
            char err[256];
            const fj_limits lim = {.max_bytes = end - i + 1};
            fj_doc *j = fj_parse(text + i, end - i, &lim, err, sizeof err);
            if (!j) {
                fprintf(stderr, CMD ": %s line %zu: not JSON: %s\n", path, line, err);
                return 2;
            }
            const fj_val *v = fj_get(fj_root(j), field);
            if (!v || v->type != FJ_STR) {
                fprintf(stderr, CMD ": %s line %zu: %s '%s'%s%s\n", path, line,
                        fj_root(j)->type != FJ_OBJ ? "not an object, so no field"
                        : v                        ? "the field"
                                                   : "no field",
                        field, v ? " is not a string but " : "", v ? fj_type_name(v->type) : "");
                fj_free(j);
                return 2;
            }
            const int r = doc_add(d, v->str, v->len);
            fj_free(j);
            if (r) return 1;
        }
        i = end + 1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A positive integer option value; 0 on a bad one. */
static long long parse_count(const char *s)
{
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v <= 0) return 0;
    return v;
}

int fc_cmd_train_tokenizer(int argc, char **argv)
{
    const char *out = NULL, *pre = NULL, *arch = NULL, *field = "text";
    long long vocab = 0, min_count = 0;
    const char *specials[MAX_SPECIALS];
    int n_specials = 0, custom_specials = 0;
    char **files = calloc((size_t)argc, sizeof *files);
    int n_files = 0;
    if (!files) {
        fprintf(stderr, CMD ": out of memory\n");
        return 1;
    }
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            free(files);
            return 0;
        }
        const int valued = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--vocab-size") ||
                           !strcmp(a, "--pre") || !strcmp(a, "--special") || !strcmp(a, "--arch") ||
                           !strcmp(a, "--jsonl-field") || !strcmp(a, "--min-pair-count");
        if (valued) {
            if (i + 1 >= argc) {
                rc = usage_error("a value is missing after", a);
                goto done;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
                if (out) {
                    rc = usage_error("the output is given twice; the second is", v);
                    goto done;
                }
                out = v;
            } else if (!strcmp(a, "--vocab-size") || !strcmp(a, "--min-pair-count")) {
                const long long n = parse_count(v);
                if (!n) {
                    fprintf(stderr, CMD ": %s '%s' is not a positive integer\n", a, v);
                    goto done;
                }
                *(a[2] == 'v' ? &vocab : &min_count) = n;
            } else if (!strcmp(a, "--pre")) {
                pre = v;
            } else if (!strcmp(a, "--arch")) {
                arch = v;
            } else if (!strcmp(a, "--jsonl-field")) {
                field = v;
            } else {
                if (n_specials == MAX_SPECIALS) {
                    rc = usage_error("too many --special tokens (at most 1024); the extra one is", v);
                    goto done;
                }
                specials[n_specials++] = v;
                custom_specials = 1;
            }
        } else if (a[0] == '-' && a[1]) {
            rc = usage_error("unknown option", a);
            goto done;
        } else {
            files[n_files++] = argv[i];
        }
    }
    if (!out) {
        rc = usage_error("no output given: -o OUT.gguf", NULL);
        goto done;
    }
    if (!n_files) {
        rc = usage_error("no input files given", NULL);
        goto done;
    }
    /* a destination that cannot be replaced fails now, not after the training */
    const char *kind = fc_io_nonregular_kind(out);
    if (kind) {
        fprintf(stderr, CMD ": -o '%s' is %s; refusing to replace it with a regular file\n", out, kind);
        rc = 2;
        goto done;
    }

    docs d = {0};
    char err[256];
    const fc_ctx_options co = {.threads = 1};
    fc_ctx *ctx = NULL;
    const double t0 = now_s();
    for (int f = 0; f < n_files; f++) {
        size_t n = 0;
        char *text = fc_read_path(files[f], 0, &n);
        if (!text) {
            const int e = errno;
            fprintf(stderr, CMD ": cannot read '%s': %s\n", files[f], strerror(e));
            rc = e == ENOMEM ? 1 : 2;
            goto fail;
        }
        int r = fc_str_ends_with(files[f], ".jsonl") ? add_jsonl(&d, files[f], text, n, field) : doc_add(&d, text, n);
        free(text);
        if (r) {
            if (r == 1) fprintf(stderr, CMD ": out of memory reading '%s'\n", files[f]);
            rc = r;
            goto fail;
        }
    }
    const char **ptr = malloc((d.n ? d.n : 1) * sizeof *ptr);
    if (!ptr) {
        fprintf(stderr, CMD ": out of memory\n");
        rc = 1;
        goto fail;
    }
    for (size_t k = 0; k < d.n; k++) ptr[k] = d.bytes + d.off[k];
    if (!(ctx = fc_ctx_new(&co, err, sizeof err))) {
        fprintf(stderr, CMD ": %s\n", err);
        rc = 1;
        free(ptr);
        goto fail;
    }
    fc_atomic_cleanup_on_signals();
    const fc_tokenizer_train_options opt = {
        .vocab_size = vocab,
        .pre = pre,
        .specials = custom_specials ? specials : NULL,
        .n_specials = n_specials,
        .arch = arch,
        .min_pair_count = min_count,
    };
    fc_tokenizer_train_stats st = {0};
    const fc_status s = fc_tokenizer_train_ex(ctx, (const char *const *)ptr, d.len, d.n, out, &opt, &st);
    free(ptr);
    if (s != FC_OK) {
        fprintf(stderr, CMD ": %s\n", fc_ctx_error(ctx));
        rc = s == FC_ERR_INVALID_ARG ? 2 : 1;
        goto fail;
    }
    printf("train-tokenizer: wrote %s: vocab %lld (%lld merges, %lld specials), %zu documents, %zu bytes, "
           "%lld unique words, %.2f s",
           out, (long long)st.n_vocab, (long long)st.n_merges, (long long)(st.n_vocab - 256 - st.n_merges), d.n,
           d.n_bytes, (long long)st.n_unique_words, now_s() - t0);
    if (st.n_skipped) printf(" (%lld pairs skipped: spelled like an existing token)", (long long)st.n_skipped);
    putchar('\n');
    rc = 0;
fail:
    fc_ctx_free(ctx);
    free(d.bytes);
    free(d.off);
    free(d.len);
done:
    free(files);
    return rc;
}
