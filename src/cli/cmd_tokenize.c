/* SPDX-License-Identifier: MIT */
/* fucina tokenize: the tokens of a text under a model's vocabulary, printed
 * as llama.cpp's llama-tokenize prints them (tools/tokenize/tokenize.cpp):
 * one "%6d -> 'PIECE'" line per token, or --ids as a Python list, and
 * --show-count's "Total number of tokens: N". Only the vocabulary is loaded
 * (fc_tokenizer_load reads the GGUF's metadata, no tensor data), so any
 * architecture's file with a supported tokenizer works, large ones at once.
 *
 * llama-tokenize's choices kept here:
 * - escapes (\n \r \t \' \" \\ \xHH) in the text are processed whatever its
 *   source (-p, -f, stdin) unless --no-escape; an unknown escape stays as is;
 * - BOS/EOS are added only when the vocabulary asks for BOS
 *   (tokenizer.ggml.add_bos_token) and --no-bos is not given (llama-tokenize
 *   passes add_special = add_bos to llama_tokenize);
 * - control-token strings are parsed unless --no-parse-special;
 * - a piece is printed with special tokens rendered, as raw bytes up to its
 *   first NUL (llama-tokenize prints it with %s).
 * Ours besides: the model may be the first positional argument, `-f -` reads
 * standard input, usage errors exit 2. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "fucina/fucina.h"
#include "fucina/tokenizer.h"
#include "io/read_all.h"

#define CMD "fucina tokenize"

static void help(FILE *f) {
    fprintf(f,
            "usage: fucina tokenize MODEL.gguf (-p TEXT | -f FILE | --stdin) [--ids] [--show-count]\n"
            "                       [--no-bos] [--no-parse-special] [--no-escape] [--log-disable]\n\n"
            "Tokenizes a text with the model's vocabulary (only the vocabulary is read) and prints\n"
            "the tokens as llama.cpp's llama-tokenize does: one line per token, the id right-aligned\n"
            "in 6 columns, then -> and the token's text in single quotes ('   9707 -> 'Hello'').\n\n"
            "  -m, --model FILE      the model (or give it as the first argument)\n"
            "  -p, --prompt TEXT     the text\n"
            "  -f, --file FILE       read the text from FILE (exactly its bytes; '-': standard input)\n"
            "  --stdin               read the text from standard input\n"
            "  --ids                 print only the ids, as a Python list: [1, 2, 3]\n"
            "  --show-count          then print 'Total number of tokens: N'\n"
            "  --no-bos              never add BOS/EOS, even when the vocabulary asks for BOS\n"
            "  --no-parse-special    control-token strings (<|im_end|>, ...) are plain text\n"
            "  --no-escape           take \\n, \\t, \\xHH, ... literally (default: they are processed,\n"
            "                        whatever the text's source); --escape: the default\n"
            "  --log-disable         accepted (llama-tokenize's; nothing is logged anyway)\n"
            "  -h, --help            this help\n\n"
            "Exit status: 0 done, 1 failure, 2 bad usage or input (an unreadable file, a file that\n"
            "is not a GGUF with a supported tokenizer).\n");
}

/* llama.cpp's escape processing (common's string_process_escapes), in place:
 * returns the new length. \xHH takes the next two characters when strtol
 * reads both as one base-16 number (so "\x4" followed by a non-digit, or a
 * lone backslash at the end, stays as written). */
static size_t process_escapes(char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            s[o++] = s[i];
            continue;
        }
        const char c = s[++i];
        switch (c) {
        case 'n': s[o++] = '\n'; continue;
        case 'r': s[o++] = '\r'; continue;
        case 't': s[o++] = '\t'; continue;
        case '\'': s[o++] = '\''; continue;
        case '"': s[o++] = '"'; continue;
        case '\\': s[o++] = '\\'; continue;
        case 'x':
            if (i + 2 < n) {
                /* strtol over the two characters, as llama.cpp reads them:
                 * leading white space and a sign are taken too */
                char x[3] = {s[i + 1], s[i + 2], 0}, *end = NULL;
                const long v = strtol(x, &end, 16);
                if (end == x + 2) {
                    s[o++] = (char)(unsigned char)v;
                    i += 2;
                    continue;
                }
            }
            break;
        default: break;
        }
        s[o++] = '\\';
        s[o++] = c;
    }
    return o;
}

/* A usage error: the message, then the pointer to --help; exit status 2. */
static int usage_error(const char *what, const char *arg) {
    if (arg) fprintf(stderr, CMD ": %s '%s' (see --help)\n", what, arg);
    else fprintf(stderr, CMD ": %s (see --help)\n", what);
    return 2;
}

enum source { SRC_NONE, SRC_ARG, SRC_FILE, SRC_STDIN };

int fc_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt_arg = NULL, *prompt_file = NULL;
    enum source src = SRC_NONE;
    int ids = 0, show_count = 0, no_bos = 0, no_parse_special = 0, escape = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--ids")) {
            ids = 1;
        } else if (!strcmp(a, "--show-count")) {
            show_count = 1;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = 1;
        } else if (!strcmp(a, "--no-parse-special")) {
            no_parse_special = 1;
        } else if (!strcmp(a, "--no-escape")) {
            escape = 0;
        } else if (!strcmp(a, "--escape")) {
            escape = 1;
        } else if (!strcmp(a, "--log-disable")) {
            /* nothing is logged */
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "-p") || !strcmp(a, "--prompt") ||
                   !strcmp(a, "-f") || !strcmp(a, "--file") || !strcmp(a, "--stdin")) {
            const int is_model = a[1] == 'm' || !strcmp(a, "--model");
            if (strcmp(a, "--stdin") && !has) return usage_error("a value is missing after", a);
            if (is_model) {
                if (model) return usage_error("the model is given twice; the second is", argv[i + 1]);
                model = argv[++i];
                continue;
            }
            if (src != SRC_NONE)
                return usage_error("give only one of -p, -f and --stdin; the second source is", a);
            if (!strcmp(a, "--stdin")) {
                src = SRC_STDIN;
            } else if (a[1] == 'p' || !strcmp(a, "--prompt")) {
                src = SRC_ARG;
                prompt_arg = argv[++i];
            } else {
                prompt_file = argv[++i];
                src = strcmp(prompt_file, "-") ? SRC_FILE : SRC_STDIN;
            }
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option", a);
        } else if (model) {
            fprintf(stderr, CMD ": unexpected argument '%s' (the model is '%s'; see --help)\n", a, model);
            return 2;
        } else {
            model = a;
        }
    }
    if (!model) return usage_error("no model given: fucina tokenize MODEL.gguf -p TEXT", NULL);
    if (src == SRC_NONE) return usage_error("no text given: use -p TEXT, -f FILE or --stdin", NULL);

    /* the text: an argument or a file now, standard input after the model
     * loads (a bad model fails before anything is typed) */
    char *text = NULL;
    size_t n_text = 0;
    if (src == SRC_ARG) {
        n_text = strlen(prompt_arg);
        if (!(text = malloc(n_text + 1))) {
            fprintf(stderr, CMD ": out of memory\n");
            return 1;
        }
        memcpy(text, prompt_arg, n_text + 1);
    } else if (src == SRC_FILE) {
        FILE *f = fopen(prompt_file, "rb");
        if (!f) {
            fprintf(stderr, CMD ": cannot open the text file '%s': %s\n", prompt_file, strerror(errno));
            return 2;
        }
        errno = 0;
        text = fc_read_stream(f, 0, &n_text);
        const int e = errno;
        fclose(f);
        if (!text) {
            fprintf(stderr, CMD ": cannot read the text file '%s': %s\n", prompt_file, strerror(e));
            return e == ENOMEM ? 1 : 2;
        }
    }

    char err[256];
    const fc_ctx_options co = {.threads = 1}; /* tokenizing is single-threaded */
    fc_ctx *ctx = fc_ctx_new(&co, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, CMD ": %s\n", err);
        free(text);
        return 1;
    }
    int rc = 1;
    fc_token *toks = NULL;
    size_t nt = 0;
    fc_tokenizer *tk = fc_tokenizer_load(ctx, model);
    if (!tk) {
        fprintf(stderr, CMD ": cannot load the vocabulary of '%s': %s\n", model, fc_ctx_error(ctx));
        rc = fc_ctx_status(ctx) == FC_ERR_OOM ? 1 : 2;
        goto done;
    }
    if (src == SRC_STDIN) {
        errno = 0;
        if (!(text = fc_read_stream(stdin, 0, &n_text))) {
            const int e = errno;
            fprintf(stderr, CMD ": cannot read standard input: %s\n", strerror(e));
            rc = e == ENOMEM ? 1 : 2;
            goto done;
        }
    }
    if (escape) n_text = process_escapes(text, n_text);

    unsigned flags = no_parse_special ? 0u : FC_TOKENIZE_PARSE_SPECIAL;
    if (fc_tokenizer_add_bos(tk) && !no_bos) flags |= FC_TOKENIZE_ADD_SPECIAL;
    if (fc_tokenize(ctx, tk, text, n_text, flags, &toks, &nt) != FC_OK) {
        fprintf(stderr, CMD ": %s\n", fc_ctx_error(ctx));
        goto done;
    }

    if (ids) {
        putchar('[');
        for (size_t i = 0; i < nt; i++) printf(i ? ", %d" : "%d", (int)toks[i]);
        fputs("]\n", stdout);
    } else {
        for (size_t i = 0; i < nt; i++) {
            const char *piece;
            size_t len;
            if (fc_token_piece(ctx, tk, toks[i], 1, &piece, &len) != FC_OK) {
                fprintf(stderr, CMD ": %s\n", fc_ctx_error(ctx));
                goto done;
            }
            const char *nul = memchr(piece, 0, len);
            if (nul) len = (size_t)(nul - piece);
            printf("%6d -> '", (int)toks[i]);
            fwrite(piece, 1, len, stdout);
            fputs("'\n", stdout);
        }
    }
    if (show_count) printf("Total number of tokens: %zu\n", nt);
    if (fflush(stdout) || ferror(stdout)) {
        fprintf(stderr, CMD ": cannot write the output: %s\n", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    fc_tokens_free(toks);
    fc_tokenizer_free(tk);
    fc_ctx_free(ctx);
    free(text);
    return rc;
}
