/* fucina run: tokenize a prompt, prefill, then decode greedily or with the
 * sampler, streaming the text; --logits-out dumps the prompt's logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "fucina/fucina.h"
#include "fucina/llm.h"
#include "fucina/sampler.h"

static void help(FILE *f)
{
    fprintf(f, "usage: fucina run MODEL.gguf -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]\n"
               "                  [--ctx N] [--logits-out FILE]\n\n"
               "Tokenizes TEXT (control-token strings are parsed), evaluates it and generates N tokens\n"
               "(default 16; 0: prefill only), printing the text as it comes. --temp 0 is greedy\n"
               "(default). --logits-out writes n_prompt_tokens x n_vocab float32 little-endian logits,\n"
               "one row per prompt position. Exit status: 0 done, 1 failure, 2 bad usage or input.\n");
}

int fc_cmd_run(int argc, char **argv)
{
    const char *path = NULL, *prompt = NULL, *logits_out = NULL;
    long n_gen = 16, n_ctx = 0;
    fc_sampler_params sp = fc_sampler_default_params();
    sp.temp = 0.0f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "-p") && has) {
            prompt = argv[++i];
        } else if (!strcmp(a, "-n") && has) {
            n_gen = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--ctx") && has) {
            n_ctx = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--temp") && has) {
            sp.temp = strtof(argv[++i], NULL);
        } else if (!strcmp(a, "--top-k") && has) {
            sp.top_k = (int32_t)strtol(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--top-p") && has) {
            sp.top_p = strtof(argv[++i], NULL);
        } else if (!strcmp(a, "--seed") && has) {
            sp.seed = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--logits-out") && has) {
            logits_out = argv[++i];
        } else if (a[0] == '-' || path) {
            fprintf(stderr, "fucina run: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path || !prompt || n_gen < 0 || n_ctx < 0) {
        help(stderr);
        return 2;
    }
    char err[256];
    fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina run: %s\n", err);
        return 1;
    }
    int rc = 1;
    fc_token *toks = NULL;
    size_t nt = 0;
    float *logits = NULL;
    fc_llm_session *s = NULL;
    fc_sampler *smp = NULL;
    fc_detok_stream *ds = NULL;
    fc_cli_progress bar;
    fc_cli_progress_init(&bar, "loading");
    const fc_llm_load_options lo = {.progress = fc_cli_progress_update, .progress_user = &bar};
    fc_llm_model *m = fc_llm_model_load_ex(ctx, path, &lo);
    fc_cli_progress_done(&bar);
    if (!m) goto fail;
    const fc_tokenizer *tk = fc_llm_model_tokenizer(m);
    const int64_t nv = fc_llm_model_hparams(m)->n_vocab;
    if (fc_tokenize(ctx, tk, prompt, strlen(prompt), FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL, &toks,
                    &nt) != FC_OK)
        goto fail;
    if (nt == 0) {
        fprintf(stderr, "fucina run: the prompt has no tokens\n");
        rc = 2;
        goto done;
    }
    s = fc_llm_session_new(ctx, m, n_ctx);
    logits = malloc(nt * (size_t)nv * sizeof *logits);
    smp = fc_sampler_new(ctx, &sp);
    ds = fc_detok_stream_new(ctx, tk, 0);
    if (!s || !logits || !smp || !ds) {
        if (!logits) fprintf(stderr, "fucina run: out of memory\n");
        goto fail;
    }
    /* every row's logits only when they are written out */
    const fc_llm_logits which = logits_out ? FC_LLM_LOGITS_ALL : FC_LLM_LOGITS_LAST;
    if (fc_llm_session_eval_ex(ctx, s, toks, nt, which, logits) != FC_OK) goto fail;
    if (logits_out) {
        FILE *f = fopen(logits_out, "wb");
        /* the host is little-endian (x86-64, aarch64): floats are written as they are */
        if (!f || fwrite(logits, sizeof *logits, nt * (size_t)nv, f) != nt * (size_t)nv || fclose(f)) {
            fprintf(stderr, "fucina run: cannot write %s\n", logits_out);
            goto done;
        }
    }
    fwrite(prompt, 1, strlen(prompt), stdout);
    for (size_t i = 0; i < nt; i++) fc_sampler_accept(smp, toks[i]);
    const float *last = logits_out ? logits + (nt - 1) * (size_t)nv : logits;
    for (long g = 0; g < n_gen; g++) {
        fc_token t = fc_sampler_sample(smp, last, (int32_t)nv);
        fc_sampler_accept(smp, t);
        if (t == fc_tokenizer_eos(tk)) break;
        const char *piece;
        size_t len;
        if (fc_detok_stream_push(ctx, ds, t, &piece, &len) != FC_OK) goto fail;
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
        if (g + 1 == n_gen) break;
        if (fc_llm_session_pos(s) >= (n_ctx ? n_ctx : fc_llm_model_hparams(m)->n_ctx_train)) break;
        if (fc_llm_session_eval(ctx, s, &t, 1, logits) != FC_OK) goto fail;
        last = logits;
    }
    {
        const char *piece;
        size_t len;
        if (fc_detok_stream_flush(ctx, ds, &piece, &len) != FC_OK) goto fail;
        fwrite(piece, 1, len, stdout);
    }
    printf("\n");
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "fucina run: %s\n", fc_ctx_error(ctx));
done:
    fc_detok_stream_free(ds);
    fc_sampler_free(smp);
    free(logits);
    fc_llm_session_free(s);
    fc_tokens_free(toks);
    fc_llm_model_free(m);
    fc_ctx_free(ctx);
    return rc;
}
