/* fucina make-model: write a random-weight model (llama.cpp's names and
 * keys) for tests and demos. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "fucina/fucina.h"
#include "fucina/llm.h"

static void help(FILE *f)
{
    fprintf(f, "usage: fucina make-model [--arch qwen3] [--preset tiny] [--dtype f32|f16|q8_0] [--seed S]\n"
               "                          [--untied] OUT.gguf\n\n"
               "Writes a random-weight model with llama.cpp's tensor names and metadata keys and a real\n"
               "byte-level BPE vocabulary (it loads in llama.cpp). Defaults: qwen3, tiny, f32, seed 1,\n"
               "output tied to token_embd (--untied writes output.weight).\n"
               "Exit status: 0 done, 1 failure, 2 bad usage.\n");
}

int fc_cmd_make_model(int argc, char **argv)
{
    fc_make_model_options o = {.dtype = FC_F32, .seed = 1};
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--arch") && has) {
            o.arch = argv[++i];
        } else if (!strcmp(a, "--preset") && has) {
            o.preset = argv[++i];
        } else if (!strcmp(a, "--seed") && has) {
            o.seed = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--untied")) {
            o.untied = 1;
        } else if (!strcmp(a, "--dtype") && has) {
            const char *d = argv[++i];
            if (!strcmp(d, "f32")) o.dtype = FC_F32;
            else if (!strcmp(d, "f16")) o.dtype = FC_F16;
            else if (!strcmp(d, "q8_0")) o.dtype = FC_Q8_0;
            else {
                fprintf(stderr, "fucina make-model: unknown --dtype '%s' (f32, f16, q8_0)\n", d);
                return 2;
            }
        } else if (a[0] == '-' || out) {
            fprintf(stderr, "fucina make-model: unexpected argument '%s'\n", a);
            help(stderr);
            return 2;
        } else {
            out = a;
        }
    }
    if (!out) {
        help(stderr);
        return 2;
    }
    char err[256];
    fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina make-model: %s\n", err);
        return 1;
    }
    fc_status st = fc_llm_make_model(ctx, out, &o);
    if (st != FC_OK) fprintf(stderr, "fucina make-model: %s\n", fc_ctx_error(ctx));
    fc_ctx_free(ctx);
    return st == FC_OK ? 0 : st == FC_ERR_INVALID_ARG ? 2 : 1;
}
