/* SPDX-License-Identifier: MIT */
/* Options shared by `fucina run` and `fucina chat`: the sampler's, --threads,
 * --ctx, the KV type, --mmap / --no-mmap and the LoRA adapters (--lora,
 * --lora-scaled, as llama.cpp's), parsed strictly (a number must
 * be the whole argument: "12x" and "" are errors, as are out-of-range
 * values). */
#ifndef FC_CLI_GEN_ARGS_H
#define FC_CLI_GEN_ARGS_H

#include <stdio.h>

#include "fucina/llm.h"
#include "fucina/sampler.h"

#define FC_CLI_MAX_LORA 32 /* --lora / --lora-scaled adapters per command */

typedef struct fc_cli_gen_args {
    fc_sampler_params sp; /* starts greedy (temp 0) with llama.cpp's other defaults, seed 0 */
    long n_gen;           /* -n */
    long n_ctx;           /* --ctx; 0: the model's */
    int threads;          /* --threads; 0: the default */
    fc_dtype kv_type;     /* -ctk / --cache-type: FC_F16 (default), FC_Q8_0, FC_F32 */
    int mmap;             /* fc_llm_load_options.mmap: 1 --mmap, -1 --no-mmap, 0 (default) by size */
    /* constrained output, at most one of them (llama.cpp's names):
     * --grammar TEXT, --grammar-file FILE, -j/--json-schema TEXT, -jf/--json-schema-file FILE */
    const char *grammar_opt; /* the option given, for messages */
    const char *grammar_arg; /* its value */
    /* --lora FILE (scale 1) and --lora-scaled FILE SCALE, in the order given */
    struct {
        const char *path;
        float scale;
    } lora[FC_CLI_MAX_LORA];
    int n_lora;
} fc_cli_gen_args;

/* Defaults: greedy, n_gen as given, n_ctx 0, threads 0, mmap 0. */
fc_cli_gen_args fc_cli_gen_args_default(long n_gen);

/* If argv[*i] is one of the shared options, consume it and its value
 * (advancing *i) and return 1; 0 when it is not one; -1 after printing
 * "fucina CMD: ..." naming the option and the bad value (or the missing
 * one, or the switch it contradicts: --mmap with --no-mmap) to stderr. */
int fc_cli_gen_arg(const char *cmd, int argc, char **argv, int *i, fc_cli_gen_args *g);

/* In a command's option loop (run, chat, export-lora): 1 when a is -h or
 * --help, after printing the command's help to stdout; else 0. */
int fc_cli_help_arg(const char *a, void (*help)(FILE *));

/* After the command's own options: a is the model path if it is the first
 * positional argument (stored in *path, returns 0); -1 after printing
 * "fucina CMD: ..." for an unknown option or a second positional argument. */
int fc_cli_model_arg(const char *cmd, const char *a, const char **path);

/* A context with g's --threads; NULL after printing "fucina CMD: WHY". */
fc_ctx *fc_cli_ctx_new(const char *cmd, const fc_cli_gen_args *g);

/* Loads the model as g's --mmap / --no-mmap say, with a progress bar on a
 * terminal, and sets g's LoRA adapters on it; NULL + error in ctx (an
 * adapter's names its file, the key or tensor and the reason). */
fc_llm_model *fc_cli_model_load(fc_ctx *ctx, const char *path, const fc_cli_gen_args *g);

/* A session of n_ctx positions with the KV type of g; NULL + error in ctx. */
fc_llm_session *fc_cli_session_new(fc_ctx *ctx, const fc_llm_model *m, const fc_cli_gen_args *g, int64_t n_ctx);

/* The grammar the options ask for (NULL + *failed 0 when none); NULL +
 * *failed 1 after printing "fucina CMD: OPTION: WHY" (an unreadable file, a
 * malformed grammar or schema, with its line and column or keyword). */
struct fc_grammar;
struct fc_grammar *fc_cli_grammar_load(const char *cmd, fc_ctx *ctx, const fc_cli_gen_args *g, int *failed);

/* The help lines of the shared options. */
extern const char fc_cli_gen_args_help[];

/* Strict number parsing: 0 on success. */
int fc_cli_parse_long(const char *s, long lo, long hi, long *out);
int fc_cli_parse_float(const char *s, double lo, double hi, float *out);

#endif
