/* SPDX-License-Identifier: MIT */
/* Contractions with a block-quantized operand (called by fc_einsum, so by
 * fc_dot, fc_matmul and fc_linear too). Three layouts:
 *
 *   weights:  b's last (contiguous) axis is the only contracted axis, b's
 *             other axes are all output axes, a's other axes all output
 *             axes: C[M,N] = A[M,K] · W[N,K]^T on the quantized rows
 *             (exec/qmatmul.h, activations quantized to the q8 partner as
 *             ggml does). This is fc_linear(x, w[out, in]) and
 *             fc_dot(x, w, "in").
 *   rows:     b is [K, N] with K (its rows) contracted and N kept:
 *             C = A · B with B decoded a slab of rows at a time into f32
 *             and accumulated by the f32 GEMM (bounded scratch). This is
 *             fc_matmul(x, w[k, n]) and the gradient of fc_linear,
 *             dx = dy · w.
 *   anything else (a block left operand, batch axes, summed-out axes):
 *             the block operand is dequantized whole and the f32 einsum runs.
 * The caller (einsum_impl) has validated names and sizes and turned
 * gradient recording off. */
#include <stdlib.h>
#include <string.h>

#include "exec/gemm.h"
#include "exec/qmatmul.h"
#include "fucina/ops.h"
#include "fucina/qtensor.h"
#include "tensor/quant_tensor.h"

/* f32 elements of decoded B rows per slab on the rows layout (4 MiB). */
#define SLAB_ELEMS ((int64_t)1 << 20)

static int axis_of(const fc_tensor *t, const char *name)
{
    for (int i = 0; i < t->rank; i++) if (t->axis[i] == name) return i;
    return -1;
}
static int in_list(const char *const *l, int n, const char *x)
{
    for (int i = 0; i < n; i++) if (l[i] == x) return 1;
    return 0;
}

/* Every axis of a except k is an output axis and absent from b. */
static int a_is_rows_and_k(const fc_tensor *a, const fc_tensor *b, const char *k, const char *const *out, int n)
{
    for (int i = 0; i < a->rank; i++)
        if (a->axis[i] != k && (!in_list(out, n, a->axis[i]) || axis_of(b, a->axis[i]) >= 0)) return 0;
    return axis_of(a, k) >= 0 && !in_list(out, n, k);
}

static int weights_layout(const fc_tensor *a, const fc_tensor *b, const char *const *out, int n)
{
    const char *k = b->axis[b->rank - 1];
    for (int i = 0; i + 1 < b->rank; i++)
        if (!in_list(out, n, b->axis[i]) || axis_of(a, b->axis[i]) >= 0) return 0;
    return a_is_rows_and_k(a, b, k, out, n);
}

static int rows_layout(const fc_tensor *a, const fc_tensor *b, const char *const *out, int n)
{
    if (b->rank != 2) return 0;
    const char *nn = b->axis[1];
    return in_list(out, n, nn) && axis_of(a, nn) < 0 && a_is_rows_and_k(a, b, b->axis[0], out, n);
}

/* a as a contiguous [M..., K] matrix (a view when it already is one); the
 * M axes' sizes and names go to dim/names, their count to *nm. */
static fc_tensor *as_rows(fc_ctx *ctx, fc_tensor *a, const char *k, int64_t *dim, const char **names, int *nm)
{
    const char *order[FC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < a->rank; i++)
        if (a->axis[i] != k) {
            dim[r] = a->dim[i];
            names[r] = a->axis[i];
            order[r++] = a->axis[i];
        }
    *nm = r;
    order[r] = k;
    return fc_contiguous(ctx, fc_permute(ctx, a, order, r + 1));
}

/* Weights repacked for prefill (fc_qweights_prepare), cached with the
 * weight's storage the first time a product with M >= fc_qweights_min_m()
 * uses them: "chosen at load time" without a separate load step, and freed
 * with the weights. Keyed by the view's first byte, shape and format; an
 * in-place write to the storage makes the entry stale (storage version). */
#define QW_CACHE_KIND 0x71775031u /* "qwP1" */

typedef struct qw_entry {
    fc_storage_cache base; /* first: the cache hands back this pointer */
    fc_qweights *q;
    int64_t n, k;
    uint32_t wtype;
} qw_entry;

static void qw_entry_free(fc_storage_cache *e)
{
    qw_entry *q = (qw_entry *)e;
    fc_qweights_free(q->q);
    free(q);
}

/* The prepared weights of w, made and cached on first use; NULL when they
 * cannot be made (no memory): the caller takes the row-major path. */
static const fc_qweights *prepared_weights(const fc_tensor *w, const fc_qmatmul_args *g)
{
    fc_storage *s = w->storage;
    for (fc_storage_cache *e = fc_storage_cache_find(s, QW_CACHE_KIND, g->w); e; e = NULL) {
        const qw_entry *q = (const qw_entry *)e;
        if (q->n == g->n && q->k == g->k && q->wtype == g->wtype) return q->q;
    }
    qw_entry *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    char err[200];
    if (fc_qweights_prepare(&q->q, g->w, g->wtype, g->n, g->k, g->w_row_bytes, err, sizeof err) != 0) {
        free(q);
        return NULL;
    }
    q->n = g->n;
    q->k = g->k;
    q->wtype = g->wtype;
    q->base.kind = QW_CACHE_KIND;
    q->base.key = g->w;
    q->base.version = atomic_load_explicit(&s->version, memory_order_acquire);
    q->base.free = qw_entry_free;
    fc_storage_cache_push(s, &q->base);
    return q->q;
}

/* C = A · W^T on the quantized weights: the one place the quantized
 * product is called (exec/qmatmul.h), so a different kernel is one edit. */
int fct_block_linear(fc_ctx *ctx, const float *a, int64_t m, int64_t k, const fc_tensor *w, int64_t n, float *c)
{
    fc_qmatmul_args g = {.m = m, .n = n, .k = k, .a = a, .lda = k, .w = fct_ptr(w),
                         .wtype = (uint32_t)fc_dtype_ggml_type(w->dtype),
                         .w_row_bytes = fc_dtype_row_bytes(w->dtype, k), .c = c, .ldc = n};
    char err[200];
    if (fc_qmatmul_check(&g, err, sizeof err) != 0)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_einsum: quantized product: %s", err), 0;
    const fc_qweights *q = m >= fc_qweights_min_m() ? prepared_weights(w, &g) : NULL;
    int rc = q ? fc_qmatmul_prepared(fc_ctx_workers(ctx), q, m, a, k, c, n) : fc_qmatmul(fc_ctx_workers(ctx), &g);
    if (rc != 0) return fc_fail(ctx, FC_ERR_OOM, "fc_einsum: out of memory for the quantized product's scratch"), 0;
    return 1;
}

/* C[M,N] = A[M,K] · B[K,N], B a block tensor decoded SLAB_ELEMS at a time. */
static int rows_product(fc_ctx *ctx, const float *a, int64_t m, int64_t k, const fc_tensor *b, int64_t n, float *c)
{
    int64_t kc = SLAB_ELEMS / n;
    if (kc < 1) kc = 1;
    if (kc > k) kc = k;
    fc_storage *s = fc_storage_new(ctx, (size_t)(kc * n) * sizeof(float));
    if (!s) return 0;
    int ok = 1;
    for (int64_t k0 = 0; ok && k0 < k; k0 += kc) {
        int64_t k1 = k0 + kc < k ? k0 + kc : k;
        fct_block_decode_rows(ctx, b, k0, k1, s->data);
        fc_gemm_args g = {.m = m, .n = n, .k = k1 - k0, .a = a + k0, .rsa = k, .csa = 1, .b = s->data,
                          .btype = FC_GEMM_B_F32, .rsb = n, .csb = 1, .c = c, .ldc = n, .accumulate = k0 > 0};
        if (fc_gemm_f32(fc_ctx_workers(ctx), &g) != 0)
            ok = (fc_fail(ctx, FC_ERR_OOM, "fc_einsum: out of memory for GEMM scratch"), 0);
    }
    fc_storage_release(s);
    return ok;
}

static fc_tensor *matrix_form(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const char *const *out, int n, int weights)
{
    const char *k = weights ? b->axis[b->rank - 1] : b->axis[0];
    int64_t dim[2 * FC_MAX_RANK];
    const char *names[2 * FC_MAX_RANK];
    int nm = 0;
    fc_tensor *A = as_rows(ctx, a, k, dim, names, &nm);
    if (!A) return NULL;
    int64_t kk = a->dim[axis_of(a, k)], m = fct_numel(a) / kk, nn = fct_numel(b) / kk;
    int r = nm;
    for (int i = 0; i < b->rank; i++)
        if (b->axis[i] != k) {
            dim[r] = b->dim[i];
            names[r++] = b->axis[i];
        }
    fc_tensor *C = fct_alloc(ctx, FC_F32, r, dim, names);
    if (!C) return NULL;
    const float *pa = (const float *)(const void *)fct_ptr(A);
    float *pc = (float *)(void *)fct_ptr(C);
    if (!(weights ? fct_block_linear(ctx, pa, m, kk, b, nn, pc) : rows_product(ctx, pa, m, kk, b, nn, pc))) return NULL;
    int natural = 1;
    for (int i = 0; i < n; i++) natural &= C->axis[i] == out[i];
    return natural ? C : fc_clone(ctx, fc_permute(ctx, C, out, n));
}

fc_tensor *fct_einsum_block(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const char *const *out, int n)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    int qa = fc_dtype_is_block(a->dtype), qb = fc_dtype_is_block(b->dtype);
    if (qa && qb)
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_einsum: both operands are block-quantized (%s and %s): dequantize one",
                       fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2));
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *res = NULL;
    if (qb && a->dtype == FC_F32 && weights_layout(a, b, out, n)) {
        res = matrix_form(ctx, a, b, out, n, 1);
    } else if (qb && a->dtype == FC_F32 && rows_layout(a, b, out, n)) {
        res = matrix_form(ctx, a, b, out, n, 0);
    } else {
        fc_tensor *A = qa ? fc_dequantize(ctx, a) : a, *B = qb ? fc_dequantize(ctx, b) : b;
        if (A && B) res = fc_einsum(ctx, A, B, out, n);
    }
    /* Hand res to the caller's scope as a fresh header (no record to move:
     * recording is off here). */
    fc_retain(res);
    fc_scope_end(ctx, sc);
    if (!res) return NULL;
    fc_tensor *v = fct_view(ctx, res);
    fc_release(res);
    return v;
}
