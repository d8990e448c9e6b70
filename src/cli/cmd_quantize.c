/* SPDX-License-Identifier: MIT */
/* fucina quantize: re-encode a GGUF model to a quantization mix
 * (fc_gguf_quantize; llama-quantize's rules and type names). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/quantize.h"
#include "io/atomic_file.h"
#include "io/gguf_quantize_policy.h"
#include "quant/quant.h"

static void help(FILE *f)
{
    fprintf(f, "usage: fucina quantize IN.gguf OUT.gguf TYPE [options]\n\n"
               "Writes OUT.gguf with every weight tensor of IN.gguf re-encoded to the type llama.cpp's\n"
               "rules pick for the mix TYPE (as llama-quantize does: norms and 1-D tensors stay, output\n"
               "and token_embd get their own types, attn_v / ffn_down get more bits in some layers,\n"
               "rows whose length is not a multiple of the block fall back to a smaller block). The\n"
               "metadata is copied, general.file_type and general.quantization_version are set.\n"
               "The input is streamed; OUT.gguf appears only when complete.\n\n"
               "TYPE (any case), with the bits per weight of its base type (a mix gives some tensors more):\n");
    for (size_t i = 0; fc_quant_mix_at(i); i++) {
        const fc_quant_mix *m = fc_quant_mix_at(i);
        const fcq_traits *t = fcq_traits_of(m->base);
        const double bpw = m->base == FC_GGML_F32                          ? 32.0
                           : m->base == FC_GGML_F16 || m->base == FC_GGML_BF16 ? 16.0
                           : t ? 8.0 * t->block_bytes / t->block_elems : 0.0;
        fprintf(f, "%s  %-10s %-7s %6.4g bpw", i == 0 ? "" : i % 3 ? "   " : "\n", m->name, fc_ggml_type_name(m->base), bpw);
    }
    fprintf(f, "\n\nOptions:\n"
               "  --pure                        every quantizable tensor gets TYPE's base type\n"
               "  --output-tensor-type T        type of output.weight (a ggml type: q8_0, q6_K, f16, ...)\n"
               "  --token-embedding-type T      type of token_embd.weight\n"
               "  --leave-output-tensor         output.weight keeps its type\n"
               "  --allow-requantize            re-encode tensors that are already quantized (refused\n"
               "                                otherwise: a second quantization loses what the first kept)\n"
               "  --imatrix FILE                importance matrix (llama-imatrix's GGUF, or `fucina imatrix`):\n"
               "                                tensors with an entry are encoded with its weights (q4_0..q5_1,\n"
               "                                q2_K..q6_K, iq4_nl, iq4_xs; the others take none), as llama-quantize\n"
               "  --threads N                   worker threads (default: FUCINA_THREADS or the cores)\n"
               "  --dry-run                     print the plan (tensor, type, size) and write nothing\n"
               "  --progress / --quiet          per-tensor lines on stderr (default: when it is a terminal)\n"
               "The IQ1/IQ2/IQ3 mixes (which need an imatrix in llama.cpp) are not offered: their grid\n"
               "encoders are not in Fucina.\n"
               "Exit status: 0 done, 1 failure (I/O, missing encoder), 2 bad usage or bad input.\n");
}

static int parse_type(const char *s, int *out)
{
    for (uint32_t id = 0; id < 64; id++) {
        const char *n = fc_ggml_type_name(id);
        if (n && !strcasecmp(n, s)) {
            *out = (int)id;
            return 1;
        }
    }
    return 0;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

typedef struct prog {
    FILE *f;
    int dry, show;            /* show: print a line per tensor */
    char *missing;            /* tensors the imatrix has no entry for, comma-separated */
    size_t missing_len;
    long n_missing;
} prog;

static void shape(char *buf, size_t cap, const fc_quantize_progress *p)
{
    size_t l = 0;
    buf[0] = 0;
    for (int d = 0; d < p->n_dims; d++)
        l += (size_t)snprintf(buf + l, l < cap ? cap - l : 0, "%s%lld", d ? " x " : "", (long long)p->ne[d]);
}

static void on_tensor(void *user, const fc_quantize_progress *p)
{
    prog *pg = user;
    if (p->imatrix_missing) {
        size_t l = strlen(p->name);
        char *grown = realloc(pg->missing, pg->missing_len + l + 3);
        if (grown) {
            pg->missing = grown;
            pg->missing_len += (size_t)snprintf(grown + pg->missing_len, l + 3, "%s%s", pg->n_missing ? ", " : "",
                                                p->name);
            pg->n_missing++;
        }
    }
    if (!pg->show) return;
    char sh[96];
    shape(sh, sizeof sh, p);
    fprintf(pg->f, "[%4lld/%4lld] %-40s %-22s %6s -> %-6s %9.2f -> %9.2f MiB%s%s\n", (long long)p->index + 1,
            (long long)p->count, p->name, sh, fc_ggml_type_name(p->src_type), fc_ggml_type_name(p->dst_type),
            mib(p->src_bytes), mib(p->dst_bytes), p->fallback ? " (fallback: ne[0] vs block)" : "",
            p->imatrix ? " (imatrix)" : p->imatrix_missing ? " (no imatrix entry)" : "");
    fflush(pg->f);
}

int fc_cmd_quantize(int argc, char **argv)
{
    const char *pos[3] = {0};
    int npos = 0, progress = -1;
    fc_quantize_options o = fc_quantize_default_options();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--pure")) {
            o.pure = 1;
        } else if (!strcmp(a, "--allow-requantize")) {
            o.allow_requantize = 1;
        } else if (!strcmp(a, "--leave-output-tensor")) {
            o.leave_output_tensor = 1;
        } else if (!strcmp(a, "--dry-run")) {
            o.dry_run = 1;
        } else if (!strcmp(a, "--progress")) {
            progress = 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            progress = 0;
        } else if (!strcmp(a, "--imatrix")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "fucina quantize: --imatrix needs a file\n");
                return 2;
            }
            o.imatrix_path = argv[++i];
        } else if (!strcmp(a, "--output-tensor-type") || !strcmp(a, "--token-embedding-type") ||
                   !strcmp(a, "--threads")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "fucina quantize: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--threads")) {
                char *end;
                long t = strtol(v, &end, 10);
                if (*v == 0 || *end || t < 1 || t > 1024) {
                    fprintf(stderr, "fucina quantize: --threads '%s' is not an integer in 1..1024\n", v);
                    return 2;
                }
                o.n_threads = (int)t;
            } else {
                int t;
                if (!parse_type(v, &t)) {
                    fprintf(stderr, "fucina quantize: %s '%s' is not a ggml type name (q8_0, q6_K, f16, ...)\n", a, v);
                    return 2;
                }
                if (!strcmp(a, "--output-tensor-type")) o.output_tensor_type = t;
                else o.token_embedding_type = t;
            }
        } else if (a[0] == '-' && a[1] != 0) {
            fprintf(stderr, "fucina quantize: unknown option '%s'\n", a);
            help(stderr);
            return 2;
        } else if (npos < 3) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "fucina quantize: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (npos != 3) {
        fprintf(stderr, "fucina quantize: expected IN.gguf OUT.gguf TYPE (got %d argument%s)\n", npos,
                npos == 1 ? "" : "s");
        help(stderr);
        return 2;
    }
    o.type = pos[2];
    /* llama-quantize's mixes that Fucina cannot make: say why, not "unknown" */
    static const char *const iq_mixes[] = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S",  "IQ1_M",
                                           "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M", "Q2_K_S"};
    for (size_t i = 0; i < sizeof iq_mixes / sizeof iq_mixes[0]; i++)
        if (!strcasecmp(o.type, iq_mixes[i])) {
            if (!strcmp(iq_mixes[i], "Q2_K_S"))
                fprintf(stderr, "fucina quantize: Q2_K_S is a llama-quantize mix Fucina cannot make yet: its "
                                "per-tensor rules are not implemented (Q2_K, with or without --imatrix, is)\n");
            else
                fprintf(stderr, "fucina quantize: %s is a llama-quantize mix Fucina cannot make: llama.cpp needs an "
                                "importance matrix for it, and ggml's grid-search encoders of the IQ1/IQ2/IQ3 "
                                "types are not in Fucina\n", iq_mixes[i]);
            return 2;
        }
    if (fc_quantize_mix_ftype(o.type) < 0) {
        fprintf(stderr, "fucina quantize: unknown type '%s'; one of:", o.type);
        for (int i = 0; fc_quantize_mix_name(i); i++) fprintf(stderr, " %s", fc_quantize_mix_name(i));
        fprintf(stderr, "\n");
        return 2;
    }
    prog pg = {.f = o.dry_run ? stdout : stderr, .dry = o.dry_run};
    pg.show = o.dry_run || (progress < 0 ? isatty(STDERR_FILENO) : progress);
    if (pg.show || o.imatrix_path) { /* the tensors without an entry are always reported */
        o.progress = on_tensor;
        o.progress_user = &pg;
    }
    char err[256];
    fc_ctx_options co = {0};
    co.threads = o.n_threads; /* the context's pool does the work */
    o.n_threads = 0;
    fc_ctx *ctx = fc_ctx_new(co.threads > 0 ? &co : NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina quantize: %s\n", err);
        return 1;
    }
    /* a destination that cannot be replaced fails now, not after the work */
    if (!o.dry_run && !fc_atomic_check_dest(ctx, "fucina quantize", pos[1])) {
        fprintf(stderr, "%s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 2;
    }
    fc_atomic_cleanup_on_signals(); /* ^C must not leave a large temporary behind */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fc_quantize_summary s;
    fc_status st = fc_gguf_quantize(ctx, pos[0], pos[1], &o, &s);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (pg.n_missing)
        fprintf(stderr, "fucina quantize: %s has no entry for %ld tensor%s, encoded without importance weights: %s\n",
                o.imatrix_path, pg.n_missing, pg.n_missing == 1 ? "" : "s", pg.missing);
    free(pg.missing);
    if (st != FC_OK) {
        fprintf(stderr, "fucina quantize: %s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        /* the input's fault (missing, malformed, unknown type): 2; the rest 1 */
        return st == FC_ERR_FORMAT || st == FC_ERR_INVALID_ARG || st == FC_ERR_DTYPE ||
                       (st == FC_ERR_IO && (access(pos[0], R_OK) != 0 ||
                                            (o.imatrix_path && access(o.imatrix_path, R_OK) != 0)))
                   ? 2
                   : 1;
    }
    fc_ctx_free(ctx);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double ne = s.n_elements > 0 ? (double)s.n_elements : 1.0;
    /* one summary line (a log's, a script's); the per-tensor lines are --progress's */
    printf("%s %s: %lld tensors (%lld re-encoded, %lld by fallback), %.3g M parameters; tensor data %.2f MiB "
           "(%.2f bits/weight) -> %.2f MiB (%.2f bits/weight), %.1f%%",
           o.dry_run ? "plan for" : "quantized", o.type, (long long)s.n_tensors, (long long)s.n_changed,
           (long long)s.n_fallback, ne / 1e6, mib(s.bytes_in), 8.0 * (double)s.bytes_in / ne, mib(s.bytes_out),
           8.0 * (double)s.bytes_out / ne, s.bytes_in ? 100.0 * (double)s.bytes_out / (double)s.bytes_in : 0.0);
    if (o.imatrix_path) printf("; %lld tensors with importance weights", (long long)s.n_imatrix);
    if (!o.dry_run) {
        struct stat a, b;
        if (stat(pos[0], &a) == 0 && stat(pos[1], &b) == 0)
            printf("; files: %s %.2f MiB -> %s %.2f MiB in %.2f s (general.file_type %d)", pos[0],
                   mib((uint64_t)a.st_size), pos[1], mib((uint64_t)b.st_size), secs, s.ftype);
    }
    printf("\n");
    return 0;
}
