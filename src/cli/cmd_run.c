/* SPDX-License-Identifier: MIT */
/* fucina run: tokenize a prompt, prefill, then decode greedily or with the
 * sampler, streaming the text; stop strings end the text early (nothing of
 * a stop string is printed: text that may start one is held back until it
 * cannot); --logits-out dumps the prompt's logits. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gen_args.h"
#include "cli/prompt_cache.h"
#include "fucina/chat.h"
#include "fucina/fucina.h"
#include "fucina/llm.h"
#include "fucina/grammar.h"
#include "fucina/sampler.h"
#include "io/atomic_file.h"
#include "io/read_all.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: fucina run MODEL.gguf (-p TEXT | -f FILE) [-n N] [--temp T] [--top-k K] [--top-p P]\n"
            "                  [--min-p P] [--repeat-penalty R] [--presence-penalty P]\n"
            "                  [--frequency-penalty F] [--repeat-last-n N] [-s S] [-t N] [-c N]\n"
            "                  [-ctk f16|q8_0|f32] [--mmap | --no-mmap] [--stop STR]... [-r STR]...\n"
            "                  [--no-display-prompt] [--verbose-prompt] [--logits-out FILE]\n"
            "                  [--prompt-cache FILE [--prompt-cache-ro | --prompt-cache-all]]\n"
            "                  [--grammar GBNF | --grammar-file F | -j SCHEMA | -jf F]\n"
            "                  [--lora FILE]... [--lora-scaled FILE SCALE]...\n\n"
            "Tokenizes the prompt (control-token strings such as <|im_start|> are parsed), evaluates\n"
            "it and generates N tokens (default 16; 0: prefill only; -1: no limit), printing the prompt\n"
            "and then the text as it comes, and a newline. Generation ends at the end-of-sequence\n"
            "token, at N tokens, at a full context, before the first occurrence of a --stop string\n"
            "(never printed) or after a -r string (printed). Then llama-cli's perf report on stderr:\n"
            "load time; prompt eval time / tokens; eval time / generated tokens; total time / tokens.\n"
            "The prompt is used as given: no chat template (-sys and --chat-template are fucina chat's).\n\n"
            "  -p, --prompt TEXT    the prompt\n"
            "  -f, --file FILE      read the prompt from FILE (exactly its bytes; -: standard input)\n"
            "  --stop STR           stop before STR (repeatable)\n"
            "  -r, --reverse-prompt STR  stop after STR, printed (llama-cli's reverse prompt: it hands\n"
            "                       the turn to the user; run is not interactive, so it ends; repeatable)\n"
            "  --no-display-prompt  do not print the prompt, only the generated text\n"
            "  --verbose-prompt     print the prompt's tokens on stderr (id -> 'piece', as llama-cli)\n"
            "  --logits-out FILE    write n_prompt_tokens x n_vocab float32 little-endian logits,\n"
            "                       one row per prompt position (with an f32 KV cache)\n"
            "  --prompt-cache FILE  reuse the prompt's longest common token prefix with the session\n"
            "                       state in FILE (same model and -ctk; stderr says how many tokens),\n"
            "                       evaluate the rest, then save the state after the prompt to FILE\n"
            "  --prompt-cache-ro    ... but never write FILE\n"
            "  --prompt-cache-all   ... and save the generated tokens too, after the generation\n"
            "%s"
            "  (-n defaults to 16; -c to the prompt's tokens + N, at most the model's context; with\n"
            "  -n -1 to min(4096, the model's context))\n"
            "\nExit status: 0 done, 1 failure, 2 bad usage or input.\n",
            fc_cli_gen_args_help);
}

/* Print pend[0..) up to what the stop strings allow; returns 1 on a stop.
 * A stop string marked in shown (-r, a reverse prompt) is printed with the
 * text before it, as llama-cli shows the reverse prompt it stopped at. */
static int flush_text(char *pend, size_t *n, const char *const *stop, const char *shown, size_t n_stop, int final) {
    size_t e;
    const int hit = fc_chat_stop_scan(pend, *n, stop, n_stop, &e);
    if (final && !hit) e = *n;
    if (hit) /* the earliest match at e; among strings matching there, the first given */
        for (size_t j = 0; j < n_stop; j++) {
            const size_t l = strlen(stop[j]);
            if (l && e + l <= *n && !memcmp(pend + e, stop[j], l)) {
                if (shown[j]) e += l;
                break;
            }
        }
    fwrite(pend, 1, e, stdout);
    fflush(stdout);
    memmove(pend, pend + e, *n - e);
    *n -= e;
    return hit;
}

/* Append a streamed piece to the text held back for stop strings; -1
 * (after saying so) when out of memory. */
static int pend_append(char **pend, size_t *n, size_t *cap, const char *piece, size_t len) {
    if (*n + len > *cap) {
        size_t want = *cap ? *cap : 64;
        while (*n + len > want) want *= 2;
        char *q = realloc(*pend, want);
        if (!q) {
            fprintf(stderr, "fucina run: out of memory\n");
            return -1;
        }
        *pend = q;
        *cap = want;
    }
    memcpy(*pend + *n, piece, len);
    *n += len;
    return 0;
}

int fc_cmd_run(int argc, char **argv) {
    const char *path = NULL, *prompt_arg = NULL, *prompt_file = NULL, *logits_out = NULL;
    fc_cli_gen_args g = fc_cli_gen_args_default(16);
    const char **stop = calloc((size_t)argc, sizeof *stop); /* at most one per argument */
    char *shown = calloc((size_t)argc, 1);                  /* stop[i] is a -r string, printed */
    size_t n_stop = 0;
    int display_prompt = 1, verbose_prompt = 0;
    fc_cli_prompt_cache pc = {0};
    const double t_start = fc_cli_now_ms();
    if (!stop || !shown) {
        free(shown);
        fprintf(stderr, "fucina run: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        int r;
        const int is_p = !strcmp(a, "-p") || !strcmp(a, "--prompt"), is_f = !strcmp(a, "-f") || !strcmp(a, "--file");
        const int is_r = !strcmp(a, "-r") || !strcmp(a, "--reverse-prompt");
        if (fc_cli_help_arg(a, help)) {
            free(shown);
            free(stop);
            return 0;
        } else if ((r = fc_cli_gen_arg("run", argc, argv, &i, &g)) != 0) {
            if (r < 0) goto usage;
        } else if ((r = fc_cli_prompt_cache_arg("run", argc, argv, &i, &pc)) != 0) {
            if (r < 0) goto usage;
        } else if (!strcmp(a, "--no-display-prompt")) {
            display_prompt = 0;
        } else if (!strcmp(a, "--verbose-prompt")) {
            verbose_prompt = 1;
        } else if (!strcmp(a, "-sys") || !strcmp(a, "--system-prompt") || !strcmp(a, "--chat-template")) {
            /* llama-cli applies a chat template here; run is a plain completion */
            fprintf(stderr,
                    "fucina run: %s: run applies no chat template (the prompt is used as given); "
                    "use fucina chat %s (see --help)\n",
                    a, a);
            goto usage;
        } else if ((is_p || is_f || is_r || !strcmp(a, "--stop") || !strcmp(a, "--logits-out")) && !has) {
            fprintf(stderr, "fucina run: %s needs a value (see --help)\n", a);
            goto usage;
        } else if (is_p) {
            prompt_arg = argv[++i];
        } else if (is_f) {
            prompt_file = argv[++i];
        } else if (!strcmp(a, "--stop") || is_r) {
            shown[n_stop] = (char)is_r;
            stop[n_stop++] = argv[++i];
        } else if (!strcmp(a, "--logits-out")) {
            logits_out = argv[++i];
        } else if (fc_cli_model_arg("run", a, &path)) {
            goto usage;
        }
    }
    if (fc_cli_gen_args_finish("run", &g, &path)) goto usage;
    if (!path || (!prompt_arg == !prompt_file)) {
        fprintf(stderr, "fucina run: %s (see --help)\n",
                !path ? "no MODEL.gguf given" : "give one of -p TEXT or -f FILE");
        goto usage;
    }
    if (fc_cli_prompt_cache_check("run", &pc, path, logits_out)) goto usage;
    if (logits_out) {
        /* writing the logits onto the model being run would replace it (and
         * with --mmap pull the mapped pages from under the forward pass) */
        if (fc_same_file(path, logits_out)) {
            fprintf(stderr, "fucina run: --logits-out '%s' is the model file itself; give another path\n", logits_out);
            free(shown);
            free(stop);
            return 2;
        }
        /* a directory or device fails now, not after the whole prompt was evaluated */
        const char *kind = fc_io_nonregular_kind(logits_out);
        if (kind) {
            fprintf(stderr, "fucina run: --logits-out '%s' is %s; refusing to replace it with a regular file\n",
                    logits_out, kind);
            free(shown);
            free(stop);
            return 2;
        }
    }
    char *prompt_buf = NULL;
    size_t prompt_len = 0;
    if (prompt_file && !(prompt_buf = fc_read_path(prompt_file, 0, &prompt_len))) {
        fprintf(stderr, "fucina run: cannot read the prompt file '%s': %s\n", prompt_file, strerror(errno));
        free(shown);
        free(stop);
        return 2;
    }
    const char *prompt = prompt_file ? prompt_buf : prompt_arg;
    if (!prompt_file) prompt_len = strlen(prompt_arg);
    fc_ctx *ctx = fc_cli_ctx_new("run", &g);
    if (!ctx) {
        free(prompt_buf);
        free(shown);
        free(stop);
        return 1;
    }
    int rc = 1;
    fc_token *toks = NULL;
    size_t nt = 0;
    float *logits = NULL;
    fc_llm_session *s = NULL;
    fc_sampler *smp = NULL;
    fc_grammar *gram = NULL;
    fc_grammar_matcher *gm = NULL;
    fc_detok_stream *ds = NULL;
    char *pend = NULL;
    fc_token *seen = NULL; /* --prompt-cache-all's tokens */
    size_t n_seen = 0;
    size_t n_pend = 0, cap_pend = 256;
    fc_llm_model *m = fc_cli_model_load(ctx, path, &g);
    if (!m) {
        rc = 2; /* a missing or bad file is bad input */
        goto fail;
    }
    const double load_ms = fc_cli_now_ms() - t_start;
    const fc_tokenizer *tk = fc_llm_model_tokenizer(m);
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    int gfail = 0;
    gram = fc_cli_grammar_load("run", ctx, &g, &gfail);
    if (gfail) {
        rc = 2;
        goto done;
    }
    if (gram && !(gm = fc_grammar_matcher_new(ctx, gram, tk, NULL, 0))) goto fail;
    const int64_t train = fc_llm_model_hparams(m)->n_ctx_train;
    if (fc_tokenize(ctx, tk, prompt, prompt_len, FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL, &toks,
                    &nt) != FC_OK)
        goto fail;
    if (verbose_prompt) { /* llama-cli's --verbose-prompt lines */
        fprintf(stderr, "fucina run: prompt: '%.*s'\n", (int)prompt_len, prompt);
        fprintf(stderr, "fucina run: number of tokens in prompt = %zu\n", nt);
        for (size_t i = 0; i < nt; i++) {
            const char *piece;
            size_t len;
            if (fc_token_piece(ctx, tk, toks[i], 1, &piece, &len) != FC_OK) goto fail;
            fprintf(stderr, "%6d -> '%.*s'\n", (int)toks[i], (int)len, piece);
        }
    }
    if (nt == 0) {
        fprintf(stderr, "fucina run: the prompt has no tokens\n");
        rc = 2;
        goto done;
    }
    /* by default the cache holds just the prompt and the generation (a
     * model's full training context can take gigabytes); -n -1 runs to the
     * end token or the context: llama-cli's default context, 4096 */
    const int64_t want = g.n_gen < 0 ? ((int64_t)nt + 1 > 4096 ? (int64_t)nt + 1 : 4096) : (int64_t)nt + g.n_gen;
    const int64_t n_ctx = g.n_ctx ? g.n_ctx : (want < train ? want : train);
    const long n_gen = g.n_gen < 0 ? 1L << 30 : g.n_gen; /* -1: the context ends it */
    if ((int64_t)nt > n_ctx) {
        fprintf(stderr, "fucina run: the prompt (%zu tokens) does not fit the context (%lld)\n", nt, (long long)n_ctx);
        rc = 2;
        goto done;
    }
    /* logits written for parity checks come from the exact (f32) cache, the
     * one the parity tests give llama.cpp */
    s = logits_out ? fc_llm_session_new(ctx, m, n_ctx) : fc_cli_session_new(ctx, m, &g, n_ctx);
    logits = malloc((logits_out ? nt : 1) * (size_t)nv * sizeof *logits);
    pend = malloc(cap_pend);
    fc_cli_gen_args_set_ctx(&g, n_ctx);
    fc_cli_seed_resolve("run", &g);
    smp = s ? fc_sampler_new(ctx, &g.sp) : NULL;
    ds = smp ? fc_detok_stream_new(ctx, tk, 0) : NULL;
    if (!s || !logits || !pend || !smp || !ds) {
        if (!logits || !pend) fprintf(stderr, "fucina run: out of memory\n");
        goto fail;
    }
    /* every row's logits only when they are written out */
    const fc_llm_logits which = logits_out ? FC_LLM_LOGITS_ALL : FC_LLM_LOGITS_LAST;
    const double t_prompt = fc_cli_now_ms();
    size_t n_eval = nt;
    if (fc_cli_prompt_cache_prefill(ctx, "run", &pc, s, toks, nt, which, logits, &n_eval) != FC_OK) goto fail;
    const double prompt_ms = fc_cli_now_ms() - t_prompt;
    if (logits_out) {
        /* temporary + rename: a reader never sees a torn file, a failure
         * leaves the old one; the host is little-endian (x86-64, aarch64):
         * floats are written as they are */
        fc_atomic_file af;
        if (!fc_atomic_open(&af, ctx, "fucina run: --logits-out", logits_out) ||
            !fc_atomic_write(&af, logits, nt * (size_t)nv * sizeof *logits) || !fc_atomic_commit(&af)) {
            fprintf(stderr, "%s\n", fc_ctx_error(ctx));
            goto done;
        }
    }
    if (display_prompt) fwrite(prompt, 1, prompt_len, stdout);
    /* the prompt is the penalties' history too, as in llama-cli */
    for (size_t i = 0; i < nt; i++) fc_sampler_accept(smp, toks[i]);
    const float *last = logits_out ? logits + (nt - 1) * (size_t)nv : logits;
    /* --prompt-cache-all: the tokens in the session, the prompt's and each generated one evaluated */
    seen = pc.all ? malloc(((size_t)n_ctx + 1) * sizeof *seen) : NULL; /* the session holds at most n_ctx */
    n_seen = nt;
    if (pc.all && !seen) {
        fprintf(stderr, "fucina run: out of memory\n");
        goto done;
    }
    if (seen) memcpy(seen, toks, nt * sizeof *seen);
    int stopped = 0;
    long n_out = 0; /* tokens generated (the end token included) */
    const double t_gen = fc_cli_now_ms();
    for (long k = 0; k < n_gen && !stopped; k++) {
        const fc_token_filter filt = gm ? fc_grammar_matcher_filter(gm) : (fc_token_filter){0};
        fc_token t = fc_sampler_sample_filtered(smp, last, (int32_t)nv, gm ? &filt : NULL);
        if (t == FC_TOKEN_NONE) goto fail;
        if (gm && fc_grammar_matcher_accept(gm, t) != FC_OK) goto fail;
        fc_sampler_accept(smp, t);
        n_out++;
        if (t == fc_tokenizer_eos(tk)) break;
        const char *piece;
        size_t len;
        if (fc_detok_stream_push(ctx, ds, t, &piece, &len) != FC_OK) goto fail;
        if (pend_append(&pend, &n_pend, &cap_pend, piece, len)) goto done;
        if (flush_text(pend, &n_pend, stop, shown, n_stop, 0)) stopped = 1;
        /* a finished grammar allows nothing but the end token: stop here */
        if (stopped || k + 1 == n_gen || fc_llm_session_pos(s) >= n_ctx || (gm && fc_grammar_matcher_done(gm)))
            break;
        if (fc_llm_session_eval_ex(ctx, s, &t, 1, FC_LLM_LOGITS_LAST, logits) != FC_OK) goto fail;
        if (seen) seen[n_seen++] = t;
        last = logits;
    }
    if (!stopped) {
        const char *piece;
        size_t len;
        if (fc_detok_stream_flush(ctx, ds, &piece, &len) != FC_OK) goto fail;
        if (pend_append(&pend, &n_pend, &cap_pend, piece, len)) goto done;
        flush_text(pend, &n_pend, stop, shown, n_stop, 1);
    }
    printf("\n"); /* a terminal's line buffer prints the text before the report */
    if (fc_cli_prompt_cache_save_all(ctx, &pc, s, seen, n_seen) != FC_OK) goto fail;
    const double t_end = fc_cli_now_ms();
    fc_cli_perf_print("run", load_ms, prompt_ms, (long)n_eval, t_end - t_gen, n_out, t_end - t_start);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "fucina run: %s\n", fc_ctx_error(ctx));
done:
    free(seen);
    free(pend);
    fc_detok_stream_free(ds);
    fc_sampler_free(smp);
    fc_grammar_matcher_free(gm);
    fc_grammar_free(gram);
    free(logits);
    fc_llm_session_free(s);
    fc_tokens_free(toks);
    fc_llm_model_free(m);
    fc_ctx_free(ctx);
    free(prompt_buf);
    free(shown);
    free(stop);
    return rc;
usage: /* the message said what is wrong; --help says the rest */
    free(shown);
    free(stop);
    return 2;
}
