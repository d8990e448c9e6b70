/* SPDX-License-Identifier: MIT */
/* fucina chat: an interactive conversation with a model through its chat
 * template (include/fucina/chat.h). One user message per input line, on a
 * terminal or piped; each turn reuses the KV cache of the earlier ones. */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gen_args.h"
#include "fucina/chat.h"
#include "fucina/fucina.h"
#include "fucina/grammar.h"
#include "fucina/llm.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: fucina chat MODEL.gguf [-sys TEXT] [--no-think] [--chat-template NAME] [-n N]\n"
            "                   [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
            "                   [--presence-penalty P] [--frequency-penalty F] [--repeat-last-n N]\n"
            "                   [-s S] [-t N] [-c N] [-ctk f16|q8_0|f32] [--stop STR]... [-r STR]...\n"
            "                   [--special-in-content] [--mmap | --no-mmap] [--verbose]\n"
            "                   [--no-display-prompt]\n"
            "                   [--grammar GBNF | --grammar-file F | -j SCHEMA | -jf F]\n"
            "                   [--lora FILE]... [--lora-scaled FILE SCALE]...\n\n"
            "Chats with the model through its chat template (tokenizer.chat_template, whose family\n"
            "is detected as llama.cpp does and rendered as llama.cpp renders it; a model without\n"
            "one gets chatml, with a warning). Reads one user message per line of standard input\n"
            "(a terminal or a pipe) and prints the reply as it is generated; a reply ends at the\n"
            "family's end-of-turn token (<|im_end|>, <|eot_id|>, <end_of_turn>, <|end|>, </s>).\n"
            "Each turn evaluates only what the KV cache does not already hold. What you type (and\n"
            "what the model replied) is text: control-token strings in it such as <|im_end|> stay\n"
            "text, so a message cannot open or close a turn; only the template's markup is tokens.\n"
            "Commands:\n"
            "  /reset   forget the conversation (the system prompt stays)\n"
            "  /exit    quit (as does the end of the input)\n"
            "Ctrl-C during a reply ends the reply. At the end, llama-cli's perf report on stderr\n"
            "(load time; prompt eval time / tokens evaluated; eval time / generated tokens; total),\n"
            "summed over the turns.\n\n"
            "  -sys, --system-prompt TEXT  a system message opening the conversation (--system)\n"
            "  --no-think           Qwen3: disable thinking (an empty <think></think> is pre-filled)\n"
            "  --chat-template NAME render with this family instead of the model's template\n"
            "                       (--template is the same); NAME is one of:\n"
            "                       %s\n"
            "  --stop STR           end a reply before STR (repeatable; never printed)\n"
            "  -r, --reverse-prompt STR  llama-cli's user-turn marker: the reply ends where the model\n"
            "                       writes STR and the turn is yours (as --stop: the template's turn\n"
            "                       markup, not STR, separates the turns; repeatable)\n"
            "  --no-display-prompt  do not echo piped messages as '> MESSAGE'\n"
            "  --special-in-content read control-token strings in messages as those tokens, as\n"
            "                       llama.cpp does (a typed <|im_end|> then really ends the turn)\n"
            "  --verbose            per turn, print token counts and speed to stderr\n"
            "%s"
            "  (-n defaults to 512 tokens per reply, -1: until the end of turn or a full context;\n"
            "  -c to min(4096, the model's))\n"
            "\nWhen the input is not a terminal each message is echoed as '> MESSAGE' before its reply.\n"
            "Exit status: 0 done, 1 failure, 2 bad usage or input.\n",
            fc_chat_template_names(), fc_cli_gen_args_help);
}

/* Ctrl-C during a reply ends the reply (the REPL goes on); at the prompt
 * it quits as usual: the handler is installed only while generating. */
static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

static int on_text(const char *text, size_t len, void *user) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return g_interrupted != 0;
}

static const char *stop_name(fc_chat_stop s) {
    switch (s) {
    case FC_CHAT_STOP_EOG: return "end of generation";
    case FC_CHAT_STOP_STRING: return "stop string";
    case FC_CHAT_STOP_MAX_TOKENS: return "max tokens";
    case FC_CHAT_STOP_CONTEXT: return "context full";
    case FC_CHAT_STOP_CALLBACK: return "interrupted";
    }
    return "?";
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A family by its name only (not a template text): the values run from 0
 * while fc_chat_template_name knows them. */
static int template_by_name(const char *name, fc_chat_template *out) {
    for (int t = 0; fc_chat_template_name((fc_chat_template)t); t++)
        if (!strcmp(name, fc_chat_template_name((fc_chat_template)t))) {
            *out = (fc_chat_template)t;
            return 1;
        }
    return 0;
}

int fc_cmd_chat(int argc, char **argv) {
    const char *path = NULL, *system = NULL, *tmpl_name = NULL;
    int no_think = 0, verbose = 0, special_in_content = 0, echo = 1;
    const double t_start = fc_cli_now_ms();
    fc_cli_gen_args g = fc_cli_gen_args_default(512);
    const char **stop = calloc((size_t)argc, sizeof *stop);
    size_t n_stop = 0;
    if (!stop) {
        fprintf(stderr, "fucina chat: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        const int is_sys = !strcmp(a, "--system") || !strcmp(a, "-sys") || !strcmp(a, "--system-prompt");
        /* -r: llama-cli's reverse prompt; in a chat the reply ends there and the user speaks */
        const int is_stop = !strcmp(a, "--stop") || !strcmp(a, "-r") || !strcmp(a, "--reverse-prompt");
        int r;
        if (fc_cli_help_arg(a, help)) {
            free(stop);
            return 0;
        } else if ((r = fc_cli_gen_arg("chat", argc, argv, &i, &g)) != 0) {
            if (r < 0) goto usage;
        } else if (!strcmp(a, "--no-think")) {
            no_think = 1;
        } else if (!strcmp(a, "--special-in-content")) {
            special_in_content = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            verbose = 1;
        } else if (!strcmp(a, "--no-display-prompt")) {
            echo = 0;
        } else if ((is_sys || !strcmp(a, "--template") || !strcmp(a, "--chat-template") || is_stop) && !has) {
            fprintf(stderr, "fucina chat: %s needs a value (see --help)\n", a);
            goto usage;
        } else if (is_sys) {
            system = argv[++i];
        } else if (!strcmp(a, "--template") || !strcmp(a, "--chat-template")) {
            tmpl_name = argv[++i];
        } else if (is_stop) {
            stop[n_stop++] = argv[++i];
        } else if (fc_cli_model_arg("chat", a, &path)) {
            goto usage;
        }
    }
    if (fc_cli_gen_args_finish("chat", &g, &path)) goto usage;
    if (!path) {
        fprintf(stderr, "fucina chat: no MODEL.gguf given (see --help)\n");
        goto usage;
    }
    fc_chat_template tmpl = FC_CHAT_TEMPLATE_CHATML;
    if (tmpl_name && !template_by_name(tmpl_name, &tmpl)) {
        fprintf(stderr, "fucina chat: unknown --chat-template '%s' (supported: %s)\n", tmpl_name,
                fc_chat_template_names());
        free(stop);
        return 2;
    }

    fc_ctx *ctx = fc_cli_ctx_new("chat", &g);
    if (!ctx) {
        free(stop);
        return 1;
    }
    int rc = 1;
    fc_llm_model *m = NULL;
    fc_llm_session *s = NULL;
    fc_chat *c = NULL;
    fc_grammar *gram = NULL;
    char *line = NULL;
    size_t line_cap = 0;
    if (!tmpl_name) {
        int found = 0;
        const fc_status ts = fc_chat_template_load(ctx, path, &tmpl, &found);
        if (ts != FC_OK) {
            /* the hint only where it helps: a template we do not render (its message names the
             * text, so the file is named here), not a file we cannot read (named by the reader) */
            if (ts == FC_ERR_UNSUPPORTED)
                fprintf(stderr, "fucina chat: %s: %s (choose one with --chat-template)\n", path, fc_ctx_error(ctx));
            else
                fprintf(stderr, "fucina chat: %s\n", fc_ctx_error(ctx));
            rc = 2;
            goto done;
        }
        if (!found)
            fprintf(stderr, "fucina chat: warning: %s has no tokenizer.chat_template; using chatml\n", path);
    }
    m = fc_cli_model_load(ctx, path, &g);
    if (!m) {
        rc = 2;
        goto fail;
    }
    const int64_t train = fc_llm_model_hparams(m)->n_ctx_train;
    const int64_t n_ctx = g.n_ctx ? g.n_ctx : (train < 4096 ? train : 4096);
    const double load_ms = fc_cli_now_ms() - t_start;
    s = fc_cli_session_new(ctx, m, &g, n_ctx);
    if (!s) goto fail;
    fc_cli_gen_args_set_ctx(&g, n_ctx);
    fc_cli_seed_resolve("chat", &g);
    int gfail = 0;
    gram = fc_cli_grammar_load("chat", ctx, &g, &gfail);
    if (gfail) {
        rc = 2;
        goto done;
    }
    fc_chat_options o = fc_chat_default_options();
    o.grammar = gram;
    o.tmpl = tmpl;
    o.flags = (no_think ? FC_CHAT_NO_THINK : 0u) | (special_in_content ? FC_CHAT_SPECIAL_IN_CONTENT : 0u);
    o.sampling = g.sp;
    o.max_tokens = g.n_gen < 0 ? 0 : (int32_t)g.n_gen; /* 0: until the end of turn or the context */
    o.stop = stop;
    o.n_stop = n_stop;
    if (g.n_gen == 0) {
        fprintf(stderr, "fucina chat: -n 0 would generate nothing\n");
        rc = 2;
        goto done;
    }
    c = fc_chat_new(ctx, m, s, &o);
    if (!c) goto fail;
    if (system && fc_chat_add(ctx, c, FC_CHAT_SYSTEM, system) != FC_OK) goto fail;
    const int tty = isatty(STDIN_FILENO);
    double prompt_ms = 0, gen_ms = 0; /* the perf report's sums over the turns */
    long n_prompt_eval = 0, n_generated = 0;
    if (tty)
        fprintf(stderr, "fucina chat: %s, template %s, context %lld; /reset, /exit\n", path,
                fc_chat_template_name(tmpl), (long long)n_ctx);
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        const ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        size_t n = (size_t)got;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (!n) continue;
        if (!tty && echo) {
            printf("> %s\n", line);
            fflush(stdout); /* before any status line on stderr */
        }
        if (memchr(line, 0, n)) {
            /* a message is a C string: a NUL would cut it where nobody sees */
            fprintf(stderr, "fucina chat: the line holds a NUL byte: not sent\n");
            continue;
        }
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            fc_chat_clear(c);
            if (system && fc_chat_add(ctx, c, FC_CHAT_SYSTEM, system) != FC_OK) goto fail;
            fprintf(stderr, "fucina chat: conversation reset\n");
            continue;
        }
        if (fc_chat_add(ctx, c, FC_CHAT_USER, line) != FC_OK) goto fail;
        fc_chat_stats st;
        const double t0 = now_s();
        struct sigaction sa = {0}, old_sa;
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        g_interrupted = 0;
        sigaction(SIGINT, &sa, &old_sa);
        const fc_status gst = fc_chat_generate(ctx, c, on_text, NULL, NULL, &st);
        sigaction(SIGINT, &old_sa, NULL);
        if (gst != FC_OK) {
            /* typically a conversation grown past the context: start over */
            fprintf(stderr, "\nfucina chat: %s; the conversation is reset\n", fc_ctx_error(ctx));
            fc_ctx_clear_error(ctx);
            fc_chat_clear(c);
            if (system && fc_chat_add(ctx, c, FC_CHAT_SYSTEM, system) != FC_OK) goto fail;
            continue;
        }
        printf("\n");
        fflush(stdout);
        prompt_ms += st.prompt_ms, gen_ms += st.gen_ms;
        n_prompt_eval += (long)st.n_eval, n_generated += (long)st.n_gen;
        if (verbose) {
            const double dt = now_s() - t0;
            fprintf(stderr,
                    "[prompt %lld tokens: %lld reused, %lld evaluated; %lld generated; %.2f s, %.1f tokens/s; %s]\n",
                    (long long)st.n_prompt, (long long)st.n_reused, (long long)st.n_eval, (long long)st.n_gen, dt,
                    dt > 0 ? (double)(st.n_eval + st.n_gen) / dt : 0.0, stop_name(st.stop));
        }
    }
    fc_cli_perf_print("chat", load_ms, prompt_ms, n_prompt_eval, gen_ms, n_generated, fc_cli_now_ms() - t_start);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "fucina chat: %s\n", fc_ctx_error(ctx));
done:
    free(line);
    fc_chat_free(c);
    fc_grammar_free(gram);
    fc_llm_session_free(s);
    fc_llm_model_free(m);
    fc_ctx_free(ctx);
    free(stop);
    return rc;
usage: /* the message said what is wrong; --help says the rest */
    free(stop);
    return 2;
}
