/* SPDX-License-Identifier: MIT */
/* fucina run --prompt-cache FILE [--prompt-cache-ro], as llama-cli's: the
 * prompt's longest common token prefix with the one FILE recorded is taken
 * from FILE's session state (fc_llm_session_load_prefix) and only the rest
 * is evaluated; then the state after the prompt is saved to FILE (not with
 * --prompt-cache-ro). */
#ifndef FC_CLI_PROMPT_CACHE_H
#define FC_CLI_PROMPT_CACHE_H

#include <stddef.h>

#include "fucina/llm.h"

typedef struct fc_cli_prompt_cache {
    const char *path; /* --prompt-cache FILE; NULL: none */
    int ro;           /* --prompt-cache-ro: read it, never write it */
    int all;          /* --prompt-cache-all: save the generated tokens too, after the generation */
} fc_cli_prompt_cache;

/* If argv[*i] is --prompt-cache (with its value), --prompt-cache-ro or
 * --prompt-cache-all, consume it (advancing *i) and return 1; 0 when it is neither; -1 after
 * printing "fucina CMD: ..." (a missing value, a second file). */
int fc_cli_prompt_cache_arg(const char *cmd, int argc, char **argv, int *i, fc_cli_prompt_cache *pc);

/* After the options: 0, or -1 after printing why (--prompt-cache-ro without
 * --prompt-cache, the cache being the model file, --logits-out, which needs
 * every prompt row evaluated). */
int fc_cli_prompt_cache_check(const char *cmd, const fc_cli_prompt_cache *pc, const char *model,
                              const char *logits_out);

/* The prefill of toks[0..nt) into the empty session s with the logits
 * `which` asks for (FC_LLM_LOGITS_LAST) into logits: through the cache when
 * pc has one (a line on stderr says how many tokens were reused), else a
 * plain eval; *n_eval receives the tokens evaluated (nt less those reused),
 * what the perf report counts. A cache file that exists but is not valid for
 * this model and session is an error naming it and the reason (the caller
 * exits 1). */
fc_status fc_cli_prompt_cache_prefill(fc_ctx *ctx, const char *cmd, const fc_cli_prompt_cache *pc, fc_llm_session *s,
                                      const fc_token *toks, size_t nt, fc_llm_logits which, float *logits,
                                      size_t *n_eval);

/* With --prompt-cache-all: save the state after the generation, toks[0..n)
 * being the prompt and the generated tokens evaluated (the session's
 * positions), as llama-cli's --prompt-cache-all does; FC_OK otherwise. */
fc_status fc_cli_prompt_cache_save_all(fc_ctx *ctx, const fc_cli_prompt_cache *pc, fc_llm_session *s,
                                       const fc_token *toks, size_t n);

#endif
