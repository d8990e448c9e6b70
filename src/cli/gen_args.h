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
    long n_gen;           /* -n / --n-predict; -1: until the end token or a full context */
    long n_ctx;           /* -c / --ctx-size / --ctx; 0: the command's default */
    int threads;          /* -t / --threads; 0: the default */
    fc_dtype kv_type;     /* -ctk / --cache-type(-k): FC_F16 (default), FC_Q8_0, FC_F32 */
    fc_dtype kv_type_v;   /* -ctv / --cache-type-v when kv_v_set: must equal kv_type (one cache type) */
    int kv_v_set;
    int seed_random;      /* -s -1: draw a seed (fc_cli_seed_resolve prints it) */
    int last_n_ctx;       /* --repeat-last-n -1: the context size (fc_cli_gen_args_set_ctx) */
    const char *model;    /* -m / --model (or the positional argument) */
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

/* After the option loop: -m against a positional model (one model only:
 * *path is the one given, NULL when none) and -ctv against -ctk (K and V
 * share one cache type); -1 after printing "fucina CMD: WHY (see --help)". */
int fc_cli_gen_args_finish(const char *cmd, fc_cli_gen_args *g, const char **path);

/* Once the context size is known: --repeat-last-n -1 becomes n_ctx. */
void fc_cli_gen_args_set_ctx(fc_cli_gen_args *g, int64_t n_ctx);

/* -s -1: draws a seed and prints "fucina CMD: seed N (random; -s N repeats
 * this run)" on stderr, so that a random run can be reproduced. */
void fc_cli_seed_resolve(const char *cmd, fc_cli_gen_args *g);

/* Milliseconds on the monotonic clock (the perf reports). */
double fc_cli_now_ms(void);

/* llama-cli's perf report (llama_perf_context_print's lines and widths) on
 * stderr, each line prefixed "fucina CMD:": load time; prompt eval time /
 * tokens; eval time / generated tokens; total time / tokens. */
void fc_cli_perf_print(const char *cmd, double load_ms, double prompt_ms, long n_prompt, double gen_ms, long n_gen,
                       double total_ms);

/* If argv[*i] is one of the shared options, consume it and its value
 * (advancing *i) and return 1; 0 when it is not one; -1 after printing
 * "fucina CMD: ..." naming the option and the bad value (or the missing
 * one, or the switch it contradicts: --mmap with --no-mmap) to stderr.
 * llama-cli's names are accepted beside ours: -m/--model, -t/--threads,
 * -c/--ctx-size, -s/--seed (-1: random), -n/--n-predict (-1: no limit),
 * --repeat-last-n (-1: the context), --presence-penalty,
 * --frequency-penalty, -ctk/--cache-type-k, -ctv/--cache-type-v. */
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
