/* SPDX-License-Identifier: MIT */
/* fucina run --prompt-cache (src/cli/prompt_cache.h). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/prompt_cache.h"
#include "exec/ctx.h" /* fc_fail: the message the command prints on failure */
#include "fucina/fucina.h"
#include "io/atomic_file.h"

int fc_cli_prompt_cache_arg(const char *cmd, int argc, char **argv, int *i, fc_cli_prompt_cache *pc)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--prompt-cache-ro")) {
        pc->ro = 1;
        return 1;
    }
    if (!strcmp(a, "--prompt-cache-all")) {
        pc->all = 1;
        return 1;
    }
    if (strcmp(a, "--prompt-cache")) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "fucina %s: --prompt-cache needs a value (see --help)\n", cmd);
        return -1;
    }
    if (pc->path) {
        fprintf(stderr, "fucina %s: --prompt-cache '%s': the cache is already '%s' (one file only)\n", cmd,
                argv[*i + 1], pc->path);
        return -1;
    }
    pc->path = argv[++*i];
    if (!*pc->path) {
        fprintf(stderr, "fucina %s: --prompt-cache needs a file name, not '' (see --help)\n", cmd);
        return -1;
    }
    return 1;
}

int fc_cli_prompt_cache_check(const char *cmd, const fc_cli_prompt_cache *pc, const char *model, const char *logits_out)
{
    if ((pc->ro || pc->all) && !pc->path) {
        fprintf(stderr, "fucina %s: %s needs --prompt-cache FILE (see --help)\n", cmd,
                pc->ro ? "--prompt-cache-ro" : "--prompt-cache-all");
        return -1;
    }
    if (pc->ro && pc->all) {
        fprintf(stderr, "fucina %s: --prompt-cache-all saves the generation to the file, which --prompt-cache-ro "
                        "never writes: give one\n",
                cmd);
        return -1;
    }
    if (!pc->path) return 0;
    if (logits_out) {
        /* a reused prefix has no logits rows to write */
        fprintf(stderr,
                "fucina %s: --prompt-cache and --logits-out do not go together: the logits of every prompt "
                "position need the whole prompt evaluated\n",
                cmd);
        return -1;
    }
    if (fc_same_file(model, pc->path)) {
        fprintf(stderr, "fucina %s: --prompt-cache '%s' is the model file itself; give another path\n", cmd, pc->path);
        return -1;
    }
    /* a session state is a regular file: a FIFO would block its read, a
     * device has no state, and the save would replace either after the run */
    const char *kind = fc_io_nonregular_kind(pc->path);
    if (kind) {
        fprintf(stderr, "fucina %s: --prompt-cache '%s' is %s, not a regular file\n", cmd, pc->path, kind);
        return -1;
    }
    return 0;
}

fc_status fc_cli_prompt_cache_prefill(fc_ctx *ctx, const char *cmd, const fc_cli_prompt_cache *pc, fc_llm_session *s,
                                      const fc_token *toks, size_t nt, fc_llm_logits which, float *logits,
                                      size_t *n_eval)
{
    *n_eval = nt;
    if (!pc->path) return fc_llm_session_eval_ex(ctx, s, toks, nt, which, logits);
    struct stat st;
    size_t reused = 0;
    fc_status rc;
    if (stat(pc->path, &st) == 0) {
        if ((rc = fc_llm_session_load_prefix(ctx, s, pc->path, toks, nt, &reused)) != FC_OK) return rc;
        /* the last prompt token is evaluated again for its logits, as llama-cli does */
        if (reused == nt && (rc = fc_llm_session_truncate(ctx, s, (int64_t)--reused)) != FC_OK) return rc;
        fprintf(stderr, "fucina %s: prompt cache '%s': reused %zu of %zu prompt tokens\n", cmd, pc->path, reused, nt);
    } else if (errno == ENOENT) {
        fprintf(stderr, "fucina %s: prompt cache '%s' does not exist yet%s\n", cmd, pc->path,
                pc->ro ? " (read-only: it will not be written)" : ": it will be written after the prompt");
    } else {
        fc_fail(ctx, FC_ERR_IO, "prompt cache '%s': %s", pc->path, strerror(errno));
        return FC_ERR_IO;
    }
    if ((rc = fc_llm_session_eval_ex(ctx, s, toks + reused, nt - reused, which, logits)) != FC_OK) return rc;
    *n_eval = nt - reused;
    if (pc->ro) return FC_OK;
    return fc_llm_session_save(ctx, s, pc->path, toks, nt);
}

fc_status fc_cli_prompt_cache_save_all(fc_ctx *ctx, const fc_cli_prompt_cache *pc, fc_llm_session *s,
                                       const fc_token *toks, size_t n)
{
    if (!pc->path || !pc->all) return FC_OK;
    return fc_llm_session_save(ctx, s, pc->path, toks, n);
}
