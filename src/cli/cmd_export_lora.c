/* SPDX-License-Identifier: MIT */
/* fucina export-lora: merge LoRA adapters into a model (fc_llm_lora_merge;
 * llama-export-lora's flags, plus --outtype). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gen_args.h"
#include "fucina/fucina.h"
#include "fucina/lora.h"
#include "io/atomic_file.h"

static void help(FILE *f)
{
    fprintf(f, "usage: fucina export-lora -m BASE.gguf (--lora FILE | --lora-scaled FILE SCALE)... -o OUT.gguf\n"
               "                          [--outtype TYPE] [--threads N]\n\n"
               "Writes OUT.gguf: BASE.gguf with every weight the adapters adapt replaced by\n"
               "W + scale * B A (scale = SCALE x adapter.lora.alpha / rank, or SCALE when alpha is 0;\n"
               "a quantized W is decoded to f32 first), the adapters added in the order given; every\n"
               "other tensor and the metadata are copied as they are (general.file_type set to the\n"
               "output type). The adapters are checked against the model as `fucina run --lora` checks\n"
               "them; OUT.gguf appears only when complete and must not be an input.\n\n"
               "  -m, --model FILE       the base model\n"
               "  --lora FILE            an adapter, scale 1 (repeatable)\n"
               "  --lora-scaled FILE S   an adapter with the user scale S (repeatable)\n"
               "  -o, --output FILE      the merged model\n"
               "  --outtype TYPE         the merged tensors' type: f32, f16, bf16 or a block type (q8_0,\n"
               "                         q4_0, q4_k, q6_k, ...); default as llama-export-lora: f32 for an\n"
               "                         f32 base tensor, else f16\n"
               "  -t, --threads N        worker threads (default: FUCINA_THREADS or the cores)\n"
               "Exit status: 0 done, 1 failure (I/O, memory), 2 bad usage or bad input.\n");
}

int fc_cmd_export_lora(int argc, char **argv)
{
    const char *base = NULL, *out = NULL;
    fc_cli_gen_args g = fc_cli_gen_args_default(0); /* its --lora / --lora-scaled / --threads parsing */
    fc_llm_lora_merge_options mo = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        if (fc_cli_help_arg(a, help)) return 0;
        if (!strcmp(a, "--lora") || !strcmp(a, "--lora-scaled") || !strcmp(a, "--threads")) {
            if (fc_cli_gen_arg("export-lora", argc, argv, &i, &g) < 0) goto usage;
            continue;
        }
        const int is_m = !strcmp(a, "-m") || !strcmp(a, "--model"), is_o = !strcmp(a, "-o") || !strcmp(a, "--output");
        const int is_t = !strcmp(a, "-t"), is_type = !strcmp(a, "--outtype");
        if ((is_m || is_o || is_t || is_type) && !has) {
            fprintf(stderr, "fucina export-lora: %s needs a value\n", a);
            goto usage;
        }
        if (is_m) {
            base = argv[++i];
        } else if (is_o) {
            out = argv[++i];
        } else if (is_t) {
            long v;
            if (fc_cli_parse_long(argv[++i], 1, 1024, &v)) {
                fprintf(stderr, "fucina export-lora: -t '%s' is not an integer in 1..1024\n", argv[i]);
                goto usage;
            }
            g.threads = (int)v;
        } else if (is_type) {
            const char *t = argv[++i];
            fc_dtype dt;
            const int ok =
                fc_dtype_parse(t, &dt) && (dt == FC_F32 || dt == FC_F16 || dt == FC_BF16 || fc_dtype_is_block(dt));
            if (!ok) {
                fprintf(stderr,
                        "fucina export-lora: --outtype '%s' is not f32, f16, bf16 or a block type "
                        "(q8_0, ...)\n",
                        t);
                goto usage;
            }
            mo.outtype = dt;
        } else {
            fprintf(stderr, "fucina export-lora: unknown argument '%s'\n", a);
            goto usage;
        }
    }
    if (!base || !out || g.n_lora == 0) {
        fprintf(stderr, "fucina export-lora: %s\n",
                !base  ? "no base model (-m BASE.gguf)"
                : !out ? "no output (-o OUT.gguf)"
                       : "no adapter (--lora FILE or --lora-scaled FILE S)");
        goto usage;
    }
    /* an input that cannot be read is bad input (2); an I/O failure later is a failure (1).
     * stat and access, not fopen: opening a FIFO blocks until a writer comes */
    for (int i = -1; i < g.n_lora; i++) {
        const char *p = i < 0 ? base : g.lora[i].path;
        const char *what = i < 0 ? "the base model" : "the adapter";
        const char *kind = fc_io_nonregular_kind(p);
        if (kind) {
            fprintf(stderr, "fucina export-lora: %s '%s' is %s, not a regular file\n", what, p, kind);
            return 2;
        }
        if (access(p, R_OK) != 0) {
            fprintf(stderr, "fucina export-lora: cannot open %s '%s': %s\n", what, p, strerror(errno));
            return 2;
        }
    }
    /* a destination that cannot be replaced fails now, not after the merge */
    const char *out_kind = fc_io_nonregular_kind(out);
    if (out_kind) {
        fprintf(stderr, "fucina export-lora: -o '%s' is %s; refusing to replace it with a regular file\n", out,
                out_kind);
        return 2;
    }
    fc_ctx *ctx = fc_cli_ctx_new("export-lora", &g);
    if (!ctx) return 1;
    const char *paths[FC_CLI_MAX_LORA];
    float scales[FC_CLI_MAX_LORA];
    for (int i = 0; i < g.n_lora; i++) paths[i] = g.lora[i].path, scales[i] = g.lora[i].scale;
    const fc_status st = fc_llm_lora_merge(ctx, base, paths, scales, (size_t)g.n_lora, out, &mo);
    int rc = 0;
    if (st != FC_OK) {
        fprintf(stderr, "fucina export-lora: %s\n", fc_ctx_error(ctx));
        rc = st == FC_ERR_IO || st == FC_ERR_OOM ? 1 : 2;
    } else {
        printf("fucina export-lora: wrote %s (%d adapter%s merged into %s)\n", out, g.n_lora, g.n_lora == 1 ? "" : "s",
               base);
    }
    fc_ctx_free(ctx);
    return rc;
usage:
    help(stderr);
    return 2;
}
