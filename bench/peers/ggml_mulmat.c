/* SPDX-License-Identifier: MIT */
/* The `quant` suite's peer: ggml_mul_mat on ggml's CPU backend, loaded at run
 * time through the oracle (oracle/ggml_oracle.h). The prototypes and the two
 * structs passed by value or filled by ggml are mirrored from the matching
 * llama.cpp headers (ggml/include/ggml.h, ggml-backend.h, ggml-alloc.h,
 * ggml-cpu.h); everything else is opaque.
 *
 * Setup as llama.cpp runs a weight matmul: W in a backend buffer (the plain
 * CPU buffer type, or the CPU "repack" extra buffer type that interleaves
 * q4_0 / q4_K / iq4_nl / ... rows at load time), X and Y in a CPU buffer, a
 * graph of one GGML_OP_MUL_MAT computed by a CPU backend that owns a
 * persistent ggml threadpool (so thread start-up is not timed; llama.cpp's
 * tools attach one the same way). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_oracle.h"
#include "peers/ggml_mulmat.h"

/* ---- mirrored ABI --------------------------------------------------------- */
#define GGML_TYPE_F32 0
#define GGML_MAX_N_THREADS 512

struct ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};

struct ggml_threadpool_params {
    bool cpumask[GGML_MAX_N_THREADS];
    int n_threads;
    int prio; /* enum ggml_sched_priority */
    uint32_t poll;
    bool strict_cpu;
    bool paused;
};

typedef struct ggml_context ggml_context;
typedef struct ggml_tensor ggml_tensor;
typedef struct ggml_cgraph ggml_cgraph;
typedef void *ggml_backend_t, *ggml_buft_t, *ggml_buffer_t, *ggml_threadpool_t;

static struct {
    int ok;
    const char *why;
    size_t (*quantize_chunk)(int, const float *, void *, int64_t, int64_t, int64_t, const float *);
    ggml_context *(*init)(struct ggml_init_params);
    void (*free)(ggml_context *);
    size_t (*tensor_overhead)(void);
    size_t (*graph_overhead)(void);
    ggml_tensor *(*new_tensor_2d)(ggml_context *, int, int64_t, int64_t);
    ggml_tensor *(*mul_mat)(ggml_context *, ggml_tensor *, ggml_tensor *);
    ggml_cgraph *(*new_graph)(ggml_context *);
    void (*build_forward_expand)(ggml_cgraph *, ggml_tensor *);
    size_t (*nbytes)(const ggml_tensor *);
    int (*cpu_has_avx2)(void), (*cpu_has_avx512)(void);
    ggml_buft_t (*cpu_buffer_type)(void), (*repack_buffer_type)(void);
    ggml_buffer_t (*alloc_ctx_tensors_from_buft)(ggml_context *, ggml_buft_t);
    void (*buffer_free)(ggml_buffer_t);
    void (*tensor_set)(ggml_tensor *, const void *, size_t, size_t);
    void (*tensor_get)(const ggml_tensor *, void *, size_t, size_t);
    ggml_backend_t (*cpu_init)(void);
    void (*cpu_set_n_threads)(ggml_backend_t, int);
    void (*cpu_set_threadpool)(ggml_backend_t, ggml_threadpool_t);
    int (*graph_compute)(ggml_backend_t, ggml_cgraph *); /* enum ggml_status: 0 success */
    void (*backend_free)(ggml_backend_t);
    void (*threadpool_params_init)(struct ggml_threadpool_params *, int);
    ggml_threadpool_t (*threadpool_new)(struct ggml_threadpool_params *);
    void (*threadpool_free)(ggml_threadpool_t);
    void (*threadpool_pause)(ggml_threadpool_t);
    void (*log_set)(void (*)(int, const char *, void *), void *);
} G;

/* ggml logs every repacked tensor at INFO level: keep warnings and errors
 * (enum ggml_log_level: 3 WARN, 4 ERROR) only. */
static void quiet_log(int level, const char *text, void *user)
{
    (void)user;
    if (level == 3 || level == 4) fputs(text, stderr);
}

#define LOAD(field, name)                                                  \
    do {                                                                   \
        void *p_ = fco_ggml_sym(name);                                     \
        if (!p_) {                                                         \
            G.why = "the ggml oracle does not export " name;               \
            return 0;                                                      \
        }                                                                  \
        memcpy(&G.field, &p_, sizeof p_);                                  \
    } while (0)

static int load(void)
{
    if (!fco_ggml_available(&G.why)) return 0;
    LOAD(quantize_chunk, "ggml_quantize_chunk");
    LOAD(init, "ggml_init");
    LOAD(free, "ggml_free");
    LOAD(tensor_overhead, "ggml_tensor_overhead");
    LOAD(graph_overhead, "ggml_graph_overhead");
    LOAD(new_tensor_2d, "ggml_new_tensor_2d");
    LOAD(mul_mat, "ggml_mul_mat");
    LOAD(new_graph, "ggml_new_graph");
    LOAD(build_forward_expand, "ggml_build_forward_expand");
    LOAD(nbytes, "ggml_nbytes");
    LOAD(cpu_has_avx2, "ggml_cpu_has_avx2");
    LOAD(cpu_has_avx512, "ggml_cpu_has_avx512");
    LOAD(cpu_buffer_type, "ggml_backend_cpu_buffer_type");
    LOAD(repack_buffer_type, "_Z35ggml_backend_cpu_repack_buffer_typev"); /* C++ linkage in ggml-cpu */
    LOAD(alloc_ctx_tensors_from_buft, "ggml_backend_alloc_ctx_tensors_from_buft");
    LOAD(buffer_free, "ggml_backend_buffer_free");
    LOAD(tensor_set, "ggml_backend_tensor_set");
    LOAD(tensor_get, "ggml_backend_tensor_get");
    LOAD(cpu_init, "ggml_backend_cpu_init");
    LOAD(cpu_set_n_threads, "ggml_backend_cpu_set_n_threads");
    LOAD(cpu_set_threadpool, "ggml_backend_cpu_set_threadpool");
    LOAD(graph_compute, "ggml_backend_graph_compute");
    LOAD(backend_free, "ggml_backend_free");
    LOAD(threadpool_params_init, "ggml_threadpool_params_init");
    LOAD(threadpool_new, "ggml_threadpool_new");
    LOAD(threadpool_free, "ggml_threadpool_free");
    LOAD(threadpool_pause, "ggml_threadpool_pause");
    LOAD(log_set, "ggml_log_set");
    G.log_set(quiet_log, NULL);
    return 1;
}

int fcb_ggml_mm_available(const char **why)
{
    static int tried;
    if (!tried) {
        tried = 1;
        G.ok = load();
    }
    if (!G.ok && why) *why = G.why;
    return G.ok;
}

size_t fcb_ggml_quantize(uint32_t type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row)
{
    if (!fcb_ggml_mm_available(NULL)) return 0;
    return G.quantize_chunk((int)type, src, dst, 0, n_rows, n_per_row, NULL);
}

/* ggml_repack_get_optimal_repack_type (ggml-cpu/repack.cpp) on x86: with
 * AVX2, q4_0 / q4_K / iq4_nl / mxfp4 when ne[1] % 8 == 0; q2_K with AVX-512.
 * Its set_tensor dereferences the traits unchecked, so a type it would not
 * repack must never be put in that buffer. */
int fcb_ggml_mm_repackable(uint32_t type, int64_t n)
{
    if (!fcb_ggml_mm_available(NULL) || n % 8 != 0) return 0;
    switch (type) {
    case 2:  /* q4_0 */
    case 12: /* q4_K */
    case 20: /* iq4_nl */
    case 39: /* mxfp4 */
        return G.cpu_has_avx2();
    case 10: /* q2_K */
        return G.cpu_has_avx512();
    default:
        return 0;
    }
}

#define MAX_COPIES 256

struct fcb_ggml_mm {
    ggml_context *cw, *cx;
    int copies, next;
    ggml_tensor *w[MAX_COPIES], *x, *y[MAX_COPIES];
    ggml_cgraph *gf[MAX_COPIES];
    ggml_buffer_t bw, bx;
    ggml_backend_t be;
    ggml_threadpool_t tp;
};

fcb_ggml_mm *fcb_ggml_mm_new(uint32_t type, int64_t m, int64_t n, int64_t k, const void *w, const float *x,
                             int n_threads, int repack, int copies, int poll, const char **why)
{
    if (!fcb_ggml_mm_available(why)) return NULL;
    if (copies < 1 || copies > MAX_COPIES) {
        *why = "copies out of range";
        return NULL;
    }
    if (repack && !fcb_ggml_mm_repackable(type, n)) {
        *why = "llama.cpp does not repack this type on this CPU";
        return NULL;
    }
    fcb_ggml_mm *p = calloc(1, sizeof *p);
    if (!p) {
        *why = "out of memory";
        return NULL;
    }
    p->copies = copies;
    size_t ov = (size_t)(copies + 4) * (G.tensor_overhead() + G.graph_overhead());
    struct ggml_init_params ip = {ov, NULL, true};
    *why = "ggml setup failed";
    if (!(p->cw = G.init(ip)) || !(p->cx = G.init(ip))) goto fail;
    p->x = G.new_tensor_2d(p->cx, GGML_TYPE_F32, k, m);
    for (int c = 0; c < copies; c++) {
        p->w[c] = G.new_tensor_2d(p->cw, (int)type, k, n);
        p->y[c] = G.mul_mat(p->cx, p->w[c], p->x);
        p->gf[c] = G.new_graph(p->cx);
        G.build_forward_expand(p->gf[c], p->y[c]);
    }
    p->bw = G.alloc_ctx_tensors_from_buft(p->cw, repack ? G.repack_buffer_type() : G.cpu_buffer_type());
    p->bx = G.alloc_ctx_tensors_from_buft(p->cx, G.cpu_buffer_type());
    if (!p->bw || !p->bx) goto fail;
    for (int c = 0; c < copies; c++) G.tensor_set(p->w[c], w, 0, G.nbytes(p->w[c])); /* repack buffer: interleaves here */
    G.tensor_set(p->x, x, 0, G.nbytes(p->x));
    struct ggml_threadpool_params tpp;
    G.threadpool_params_init(&tpp, n_threads);
    if (poll >= 0) tpp.poll = (uint32_t)poll; /* 0: workers sleep instead of spinning between graphs */
    if (!(p->be = G.cpu_init()) || !(p->tp = G.threadpool_new(&tpp))) goto fail;
    G.cpu_set_n_threads(p->be, n_threads);
    G.cpu_set_threadpool(p->be, p->tp);
    if (fcb_ggml_mm_run(p) != 0) goto fail;
    *why = NULL;
    return p;
fail:
    fcb_ggml_mm_free(p);
    return NULL;
}

int fcb_ggml_mm_run(fcb_ggml_mm *p)
{
    int c = p->next;
    p->next = c + 1 == p->copies ? 0 : c + 1;
    return G.graph_compute(p->be, p->gf[c]) == 0 ? 0 : -1;
}

void fcb_ggml_mm_result(fcb_ggml_mm *p, float *y)
{
    int c = p->next == 0 ? p->copies - 1 : p->next - 1; /* the last one run */
    G.tensor_get(p->y[c], y, 0, G.nbytes(p->y[c]));
}

void fcb_ggml_mm_pause(fcb_ggml_mm *p) { G.threadpool_pause(p->tp); }

void fcb_ggml_mm_free(fcb_ggml_mm *p)
{
    if (!p) return;
    if (p->be) G.backend_free(p->be);
    if (p->tp) G.threadpool_free(p->tp);
    if (p->bw) G.buffer_free(p->bw);
    if (p->bx) G.buffer_free(p->bx);
    if (p->cx) G.free(p->cx);
    if (p->cw) G.free(p->cw);
    free(p);
}
