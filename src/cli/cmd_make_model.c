/* SPDX-License-Identifier: MIT */
/* fucina make-model: write a random-weight model (llama.cpp's names and
 * keys) for tests and demos. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/gen_args.h"
#include "cli/progress.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/llm.h"
#include "fucina/quantize.h"
#include "io/atomic_file.h"

/* "qwen3|qwen3moe|...": every family's name, from the library */
static const char *arch_list(void)
{
    static char buf[256];
    size_t n = 0;
    buf[0] = 0;
    for (int a = 0; fc_llm_arch_name((fc_llm_arch)a) && n + 32 < sizeof buf; a++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", a ? "|" : "", fc_llm_arch_name((fc_llm_arch)a));
    return buf;
}

static void help(FILE *f)
{
    fprintf(f, "usage: fucina make-model [--arch ARCH] [--preset NAME] [--dtype TYPE] [--mix MIX] [--moe]\n"
               "                          [--rope-freqs] [--rope-scaling linear|yarn] [--rope-scale F]\n"
               "                          [--n-vocab N] [--seed S] [--untied] [--chat-template NAME] OUT.gguf\n\n"
               "Writes a random-weight model with llama.cpp's tensor names and metadata keys and a real\n"
               "byte-level BPE vocabulary (it loads in llama.cpp). Defaults: qwen3, tiny, f32, seed 1,\n"
               "output tied to token_embd (--untied writes output.weight).\n"
               "--arch: %s (the family's tensors, keys\n"
               "and switches from Fucina's architecture table). --moe: llama as Mixtral (the preset's\n"
               "experts); --rope-freqs: llama with Llama 3.1's rope_freqs.weight. --rope-scaling linear|yarn\n"
               "[--rope-scale F]: RoPE scaling keys (factor F, default 4; original context = the preset's / F).\n"
               "Presets: tiny (embd 64, 2 layers), small (embd 256, 2 layers: K-quants apply to every\n"
               "matrix), 0.6b (Qwen3-0.6B's shapes and 151936-token vocabulary; qwen3moe: 16 experts of 768, 4 used),\n"
               "llama-1b (Llama-3.2-1B's shapes), gemma3-1b (Gemma-3-1B's shapes).\n"
               "--dtype: every matrix in one type: f32 f16 bf16 q8_0 q4_0 q4_K q5_K q6_K (a row width\n"
               "that is not a whole number of blocks falls back as llama-quantize does: q4_K->q5_0,\n"
               "q5_K->q5_1, q6_K->q8_0); or a llama-quantize mix with llama.cpp's per-tensor rules:\n"
               "Q4_K_M, Q4_K_S, Q5_K_M, ... (--mix NAME forces the mix reading, e.g. --mix Q6_K).\n"
               "--n-vocab N: Qwen3's vocabulary layout with N ids (>= 151669; 0.6b uses 151936) for any preset.\n"
               "--chat-template NAME: write that template family's text instead of the family's own\n"
               "(chatml, qwen3, llama3, mistral-v1, mistral-v3, mistral-v3-tekken, ...); llama with a mistral\n"
               "or llama2 template gets the SentencePiece vocabulary (Mistral 7B: --arch llama --chat-template\n"
               "mistral-v3).\n"
               "On a terminal a progress bar is drawn on stderr while the tensors are written\n"
               "(FUCINA_NO_PROGRESS=1: none); then one summary line on stdout (the file, family, preset,\n"
               "weight type, tensors, parameters, size, time).\n"
               "Exit status: 0 done, 1 failure, 2 bad usage.\n", arch_list());
}

/* The one-line summary: what was written, read back from the file's header
 * (the tensor count and parameters are the file's, not the plan's). */
static void summary(fc_ctx *ctx, const char *out, const fc_make_model_options *o, double secs)
{
    fc_gguf *g = fc_gguf_open(ctx, out, 0);
    if (!g) { /* written and renamed, but unreadable now: say so, the file is there */
        printf("wrote %s in %.2f s (its header could not be read back: %s)\n", out, secs, fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
        return;
    }
    int64_t nt = fc_gguf_tensor_count(g), params = 0;
    for (int64_t i = 0; i < nt; i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        int64_t e = 1;
        for (int d = 0; d < ti.n_dims; d++) e *= ti.ne[d];
        params += e;
    }
    fc_gguf_close(g);
    struct stat st;
    const double mib = stat(out, &st) == 0 ? (double)st.st_size / (1024.0 * 1024.0) : 0.0;
    printf("wrote %s: %s %s, %s, %" PRId64 " tensors, %.3f M parameters, %.2f MiB in %.2f s\n", out,
           o->arch ? o->arch : "qwen3", o->preset ? o->preset : "tiny", o->mix ? o->mix : fc_dtype_name(o->dtype), nt,
           (double)params / 1e6, mib, secs);
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
            /* strict: "abc" was seed 0, "12abc" seed 12 */
            const char *v = argv[++i];
            char *end = NULL;
            errno = 0;
            o.seed = strtoull(v, &end, 10);
            if (!(*v >= '0' && *v <= '9') || *end || errno) {
                fprintf(stderr, "fucina make-model: --seed '%s' is not an integer in 0..18446744073709551615\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--chat-template") && has) {
            o.chat_template = argv[++i];
        } else if (!strcmp(a, "--untied")) {
            o.untied = 1;
        } else if (!strcmp(a, "--moe")) {
            o.moe = 1;
        } else if (!strcmp(a, "--rope-freqs")) {
            o.rope_freqs = 1;
        } else if (!strcmp(a, "--rope-scaling") && has) {
            o.rope_scaling = argv[++i];
        } else if (!strcmp(a, "--rope-scale") && has) {
            char *end;
            o.rope_scaling_factor = strtod(argv[++i], &end);
            if (*end || !(o.rope_scaling_factor > 0)) {
                fprintf(stderr, "fucina make-model: --rope-scale '%s' is not a number > 0\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--n-vocab") && has) {
            long nv = 0;
            if (fc_cli_parse_long(argv[++i], 0, 2147483647L, &nv)) {
                fprintf(stderr, "fucina make-model: --n-vocab '%s' is not an integer in 0..2147483647\n", argv[i]);
                return 2;
            }
            o.n_vocab = nv;
        } else if (!strcmp(a, "--mix") && has) {
            o.mix = argv[++i];
        } else if (!strcmp(a, "--dtype") && has) {
            const char *d = argv[++i];
            fc_dtype dt;
            if (fc_dtype_parse(d, &dt) && (dt == FC_F32 || dt == FC_F16 || dt == FC_BF16 || dt == FC_Q8_0 ||
                                           dt == FC_Q4_0 || dt == FC_Q4_K || dt == FC_Q5_K || dt == FC_Q6_K)) {
                o.dtype = dt;
            } else if (fc_quantize_mix_ftype(d) >= 0) {
                o.mix = d;
            } else {
                fprintf(stderr, "fucina make-model: unknown --dtype '%s' (f32 f16 bf16 q8_0 q4_0 q4_K q5_K q6_K, "
                                "or a mix such as Q4_K_M)\n", d);
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
    /* a destination that cannot be replaced fails now, not after the work */
    if (!fc_atomic_check_dest(ctx, "fucina make-model", out)) {
        fprintf(stderr, "%s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 2;
    }
    fc_atomic_cleanup_on_signals(); /* ^C must not leave a large temporary behind */
    fc_cli_progress bar;            /* drawn only on a terminal */
    fc_cli_progress_init(&bar, "writing");
    o.progress = fc_cli_progress_update;
    o.progress_user = &bar;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fc_status st = fc_llm_make_model(ctx, out, &o);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fc_cli_progress_done(&bar);
    if (st != FC_OK)
        fprintf(stderr, "fucina make-model: %s\n", fc_ctx_error(ctx));
    else
        summary(ctx, out, &o, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    fc_ctx_free(ctx);
    return st == FC_OK ? 0 : st == FC_ERR_INVALID_ARG ? 2 : 1;
}
