/* SPDX-License-Identifier: MIT */
/* `fucina-bench quantize`: quantizing a GGUF model file, Fucina's
 * fc_gguf_quantize against llama.cpp's llama_model_quantize (the oracle's
 * libllama, loaded at run time), same input, same thread count.
 *
 * The input is a qwen3-shaped model with random f16 weights, written once
 * into a temporary directory with our streaming GGUF writer: Qwen3-0.6B's
 * dimensions (d 1024, 16 heads of 128, 8 KV heads, FFN 3072, vocabulary
 * 151936, tied embeddings) with the layer count set so the file is about
 * --size MiB (default 1024); below 256 MiB the dimensions shrink (d 256,
 * FFN 768, vocabulary 8192) so tiny sizes still have several layers. Each
 * round runs ours then llama.cpp's (alternating, each output deleted after
 * it is timed); the table gives the medians and the ratio llama / ours
 * (above 1: Fucina is faster). After the first round the two outputs are
 * compared byte for byte (equal when our encoders match ggml's). */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/workers.h"
#include "fcb.h"
#include "fucina/fucina.h"
#include "fucina/gguf.h"
#include "fucina/half.h"
#include "fucina/quantize.h"
#include "ggml_oracle.h"
#include "llama_quantize_abi.h"
#include "io/gguf_internal.h"

#define MAX_ROUNDS 50

typedef llama_quantize_default_params_fn default_params_fn;
typedef llama_quantize_fn quantize_fn;
typedef llama_log_set_fn log_set_fn;

static void quiet_log(int level, const char *text, void *user)
{
    (void)user;
    if (level == FCO_GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

typedef struct qopts {
    long size_mib, rounds, threads;
    const char *type, *dir;
    int peer, keep;
} qopts;

static void usage(FILE *f)
{
    fprintf(f, "usage: fucina-bench quantize [--size MIB] [--type MIX] [--threads N] [--rounds N] [--dir DIR]\n"
               "                             [--keep] [--no-peer]\n\n"
               "Times quantizing a qwen3-shaped random-weight f16 GGUF of about --size MiB (default 1024)\n"
               "to --type (default Q4_K_M) with fc_gguf_quantize and with llama.cpp's llama_model_quantize\n"
               "(oracle libllama; --no-peer skips it), alternating --rounds times (default 3) with\n"
               "--threads threads each (default: FUCINA_THREADS or the cores). Files go to a new\n"
               "directory under --dir (default $TMPDIR or /tmp), removed at the end unless --keep.\n");
}

/* ---- the input model ------------------------------------------------------------------- */

typedef struct shape {
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
} shape;

static uint64_t layer_params(const shape *s)
{
    uint64_t E = (uint64_t)s->n_embd, Q = (uint64_t)s->n_head * s->head_dim, KV = (uint64_t)s->n_head_kv * s->head_dim;
    return E * Q * 2 + E * KV * 2 + E * (uint64_t)s->n_ff * 3 + 2 * E + 2 * (uint64_t)s->head_dim;
}

static shape pick_shape(long size_mib)
{
    shape s = size_mib >= 256 ? (shape){0, 1024, 16, 8, 128, 3072, 151936} : (shape){0, 256, 4, 2, 64, 768, 8192};
    double bytes = (double)size_mib * 1048576.0;
    double fixed = 2.0 * s.n_embd * s.n_vocab + 4.0 * s.n_embd;
    double per = 2.0 * (double)layer_params(&s);
    long n = (long)((bytes - fixed) / per + 0.5);
    s.n_layer = n < 1 ? 1 : (int)n;
    return s;
}

typedef struct wtensor {
    char name[64];
    uint32_t type;
    int n_dims;
    int64_t ne[2];
} wtensor;

static int write_model(fc_ctx *ctx, const char *path, const shape *s)
{
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    if (!w) return -1;
    int ok = fc_gguf_set_str(w, "general.architecture", "qwen3") == FC_OK &&
             fc_gguf_set_str(w, "general.name", "fucina-bench random qwen3") == FC_OK &&
             fc_gguf_set_u32(w, "general.file_type", 1) == FC_OK &&
             fc_gguf_set_u32(w, "qwen3.context_length", 40960) == FC_OK &&
             fc_gguf_set_u32(w, "qwen3.embedding_length", (uint32_t)s->n_embd) == FC_OK &&
             fc_gguf_set_u32(w, "qwen3.block_count", (uint32_t)s->n_layer) == FC_OK &&
             fc_gguf_set_u32(w, "qwen3.feed_forward_length", (uint32_t)s->n_ff) == FC_OK &&
             fc_gguf_set_u32(w, "qwen3.attention.head_count", (uint32_t)s->n_head) == FC_OK &&
             fc_gguf_set_u32(w, "qwen3.attention.head_count_kv", (uint32_t)s->n_head_kv) == FC_OK &&
             fc_gguf_set_u32(w, "qwen3.attention.key_length", (uint32_t)s->head_dim) == FC_OK &&
             fc_gguf_set_u32(w, "qwen3.attention.value_length", (uint32_t)s->head_dim) == FC_OK &&
             fc_gguf_set_f32(w, "qwen3.rope.freq_base", 1000000.0f) == FC_OK &&
             fc_gguf_set_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f) == FC_OK;
    int nt = 2 + 11 * s->n_layer, k = 0;
    wtensor *t = calloc((size_t)nt, sizeof *t);
    if (!t) ok = 0;
    const int E = s->n_embd, Q = s->n_head * s->head_dim, KV = s->n_head_kv * s->head_dim, D = s->head_dim;
#define ADD(nm, ty, nd, a, b) \
    (snprintf(t[k].name, 64, "%s", nm), t[k].type = ty, t[k].n_dims = nd, t[k].ne[0] = a, t[k].ne[1] = b, k++)
    if (ok) {
        ADD("token_embd.weight", FC_GGML_F16, 2, E, s->n_vocab);
        for (int l = 0; l < s->n_layer; l++) {
            char n[64];
#define L(x) (snprintf(n, sizeof n, "blk.%d.%s", l, x), n)
            ADD(L("attn_norm.weight"), FC_GGML_F32, 1, E, 1);
            ADD(L("attn_q.weight"), FC_GGML_F16, 2, E, Q);
            ADD(L("attn_k.weight"), FC_GGML_F16, 2, E, KV);
            ADD(L("attn_v.weight"), FC_GGML_F16, 2, E, KV);
            ADD(L("attn_output.weight"), FC_GGML_F16, 2, Q, E);
            ADD(L("attn_q_norm.weight"), FC_GGML_F32, 1, D, 1);
            ADD(L("attn_k_norm.weight"), FC_GGML_F32, 1, D, 1);
            ADD(L("ffn_norm.weight"), FC_GGML_F32, 1, E, 1);
            ADD(L("ffn_gate.weight"), FC_GGML_F16, 2, E, s->n_ff);
            ADD(L("ffn_down.weight"), FC_GGML_F16, 2, s->n_ff, E);
            ADD(L("ffn_up.weight"), FC_GGML_F16, 2, E, s->n_ff);
#undef L
        }
        ADD("output_norm.weight", FC_GGML_F32, 1, E, 1);
    }
#undef ADD
    for (int i = 0; ok && i < k; i++) ok = fc_gguf_writer_add_info(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne) == FC_OK;
    /* 8 MiB of random values, reused at a different offset per tensor (the
     * encoders' cost does not depend on the values being unique) */
    const size_t pool_n = (size_t)4 << 20;
    uint16_t *pool = ok ? malloc((pool_n + 65536) * 2) : NULL;
    float *f = ok ? malloc(((size_t)1 << 20) * 4) : NULL;
    ok = ok && pool && f && fc_gguf_writer_begin(w, path) == FC_OK;
    if (ok) {
        for (size_t i = 0; i < pool_n + 65536; i += (size_t)1 << 20) {
            size_t m = pool_n + 65536 - i < ((size_t)1 << 20) ? pool_n + 65536 - i : ((size_t)1 << 20);
            fcb_fill("f32", f, m, -0.08, 0.08, 1234 + i);
            for (size_t j = 0; j < m; j++) pool[i + j] = fc_f32_to_f16(f[j]).bits;
        }
    }
    for (int i = 0; ok && i < k; i++) {
        uint64_t n = (uint64_t)t[i].ne[0] * (uint64_t)t[i].ne[1];
        if (t[i].type == FC_GGML_F32) { /* norms: around 1 */
            for (uint64_t j = 0; j < n; j++) f[j] = 1.0f + 0.1f * ((float)(j % 17) - 8.0f) / 8.0f;
            ok = fc_gguf_writer_write(w, f, n * 4) == FC_OK;
            continue;
        }
        size_t off = ((size_t)i * 7919) % 65536;
        for (uint64_t done = 0; ok && done < n;) {
            uint64_t m = n - done < pool_n ? n - done : pool_n;
            ok = fc_gguf_writer_write(w, pool + off, m * 2) == FC_OK;
            done += m;
        }
    }
    if (ok) ok = fc_gguf_writer_finish(w) == FC_OK;
    free(pool);
    free(f);
    free(t);
    fc_gguf_writer_free(w);
    return ok ? 0 : -1;
}

/* ---- runs -------------------------------------------------------------------------------- */

static double file_mib(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (double)st.st_size / 1048576.0 : 0.0;
}

static int files_equal(const char *a, const char *b)
{
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    int eq = x && y;
    static char bx[1 << 20], by[1 << 20];
    while (eq) {
        size_t n = fread(bx, 1, sizeof bx, x), m = fread(by, 1, sizeof by, y);
        if (n != m || memcmp(bx, by, n)) eq = 0;
        if (n == 0) break;
    }
    if (x) fclose(x);
    if (y) fclose(y);
    return eq;
}

/* CPU seconds of this process, all threads (user + system): the work done,
 * less sensitive than wall time to other load on a shared machine. */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int fcb_cmd_quantize(int argc, char **argv)
{
    qopts o = {.size_mib = 1024, .rounds = 3, .threads = 0, .type = "Q4_K_M", .dir = NULL, .peer = 1, .keep = 0};
    fcb_argv a = {.argc = argc, .i = 1, .argv = argv, .cmd = "quantize"};
    while (a.i < argc) {
        const char *v;
        if (!strcmp(argv[a.i], "--help") || !strcmp(argv[a.i], "-h")) {
            usage(stdout);
            return FCB_EXIT_OK;
        } else if (fcb_arg_is(&a, "--size", &v)) {
            if (!fcb_parse_int("quantize", "--size", v, 1, 1 << 20, &o.size_mib)) return FCB_EXIT_USAGE;
        } else if (fcb_arg_is(&a, "--rounds", &v)) {
            if (!fcb_parse_int("quantize", "--rounds", v, 1, MAX_ROUNDS, &o.rounds)) return FCB_EXIT_USAGE;
        } else if (fcb_arg_is(&a, "--threads", &v)) {
            if (!fcb_parse_int("quantize", "--threads", v, 1, 1024, &o.threads)) return FCB_EXIT_USAGE;
        } else if (fcb_arg_is(&a, "--type", &v)) {
            o.type = v;
        } else if (fcb_arg_is(&a, "--dir", &v)) {
            o.dir = v;
        } else if (!strcmp(argv[a.i], "--no-peer")) {
            o.peer = 0;
            a.i++;
        } else if (!strcmp(argv[a.i], "--keep")) {
            o.keep = 1;
            a.i++;
        } else {
            fprintf(stderr, "fucina-bench quantize: unknown option '%s'\n", argv[a.i]);
            usage(stderr);
            return FCB_EXIT_USAGE;
        }
    }
    int ftype = fc_quantize_mix_ftype(o.type);
    if (ftype < 0) {
        fprintf(stderr, "fucina-bench quantize: unknown --type '%s'\n", o.type);
        return FCB_EXIT_USAGE;
    }
    if (!o.threads) {
        char err[128];
        o.threads = fc_default_threads(err, sizeof err);
        if (o.threads < 1) {
            fprintf(stderr, "fucina-bench quantize: %s\n", err);
            return FCB_EXIT_USAGE;
        }
    }
    quantize_fn lq = NULL;
    default_params_fn ldef = NULL;
    const char *why = "--no-peer";
    if (o.peer) {
        if (fco_ggml_available(&why)) {
            lq = (quantize_fn)fco_llama_sym("llama_model_quantize");
            ldef = (default_params_fn)fco_llama_sym("llama_model_quantize_default_params");
            log_set_fn ls = (log_set_fn)fco_llama_sym("llama_log_set");
            if (ls) ls(quiet_log, NULL);
            if (!lq || !ldef) {
                lq = NULL;
                why = "libllama has no llama_model_quantize";
            }
        }
    }
    fcb_machine mach;
    fcb_machine_probe(&mach);
    fcb_machine_print(stdout, &mach);

    char dir[512], in[600], ours[600], theirs[600];
    const char *base = o.dir ? o.dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/fcb_quantize_XXXXXX", base);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "fucina-bench quantize: cannot create a directory under %s\n", base);
        return FCB_EXIT_FAIL;
    }
    snprintf(in, sizeof in, "%s/model-f16.gguf", dir);
    snprintf(ours, sizeof ours, "%s/ours.gguf", dir);
    snprintf(theirs, sizeof theirs, "%s/llama.gguf", dir);
    fc_ctx_options co = {.threads = (int)o.threads};
    fc_ctx *ctx = fc_ctx_new(&co, NULL, 0);
    if (!ctx) return FCB_EXIT_FAIL;
    shape s = pick_shape(o.size_mib);
    double t0 = fcb_now();
    int rc = FCB_EXIT_OK;
    if (write_model(ctx, in, &s) != 0) {
        fprintf(stderr, "fucina-bench quantize: writing %s: %s\n", in, fc_ctx_error(ctx));
        rc = FCB_EXIT_FAIL;
        goto out;
    }
    printf("input: %s, qwen3 shape d %d, %d layers, ffn %d, vocab %d, f16: %.1f MiB (written in %.1f s)\n", in,
           s.n_embd, s.n_layer, s.n_ff, s.n_vocab, file_mib(in), fcb_now() - t0);
    printf("quantize to %s (llama_ftype %d), %ld threads, %ld rounds alternating; peer: %s\n", o.type, ftype,
           o.threads, o.rounds, lq ? "llama_model_quantize (oracle libllama)" : why);
    fflush(stdout);

    double tf[MAX_ROUNDS], tl[MAX_ROUNDS], cf[MAX_ROUNDS], cl[MAX_ROUNDS];
    double out_mib = 0, llama_mib = 0;
    int same = -1;
    for (int r = 0; r < o.rounds; r++) {
        fc_quantize_options qo = fc_quantize_default_options();
        qo.type = o.type;
        double a0 = fcb_now(), c0 = cpu_s();
        fc_status st = fc_gguf_quantize(ctx, in, ours, &qo, NULL);
        tf[r] = fcb_now() - a0;
        cf[r] = cpu_s() - c0;
        if (st != FC_OK) {
            fprintf(stderr, "fucina-bench quantize: fc_gguf_quantize: %s\n", fc_ctx_error(ctx));
            rc = FCB_EXIT_FAIL;
            goto out;
        }
        out_mib = file_mib(ours);
        if (lq) {
            llama_model_quantize_params p = ldef();
            p.nthread = (int32_t)o.threads;
            p.ftype = ftype;
            double b0 = fcb_now(), c1 = cpu_s();
            uint32_t lr = lq(in, theirs, &p);
            tl[r] = fcb_now() - b0;
            cl[r] = cpu_s() - c1;
            if (lr != 0) {
                printf("llama_model_quantize refused the model (status %u); peer skipped\n", lr);
                lq = NULL;
            } else {
                llama_mib = file_mib(theirs);
                if (same < 0) same = files_equal(ours, theirs);
                unlink(theirs);
            }
        }
        unlink(ours);
        printf("round %d: fucina %.3f s (cpu %.3f s)%s", r + 1, tf[r], cf[r], lq ? "" : "\n");
        if (lq) printf(", llama.cpp %.3f s (cpu %.3f s)\n", tl[r], cl[r]);
        fflush(stdout);
    }
    double mf = median(tf, (int)o.rounds), mcf = median(cf, (int)o.rounds);
    printf("\n%-10s %12s %12s %12s\n", "", "median s", "median cpu s", "output MiB");
    printf("%-10s %12.3f %12.3f %12.1f\n", "fucina", mf, mcf, out_mib);
    if (lq) {
        double ml = median(tl, (int)o.rounds), mcl = median(cl, (int)o.rounds);
        printf("%-10s %12.3f %12.3f %12.1f\n", "llama.cpp", ml, mcl, llama_mib);
        printf("ratio llama.cpp / fucina: wall %.2f, cpu %.2f (above 1: fucina is faster); outputs byte-identical: "
               "%s\n", ml / mf, mcl / mcf, same ? "yes" : "no");
    }
out:
    if (!o.keep) {
        unlink(in);
        unlink(ours);
        unlink(theirs);
        rmdir(dir);
    } else {
        printf("kept %s\n", dir);
    }
    fc_ctx_free(ctx);
    return rc;
}
