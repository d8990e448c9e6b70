/* SPDX-License-Identifier: MIT */
/* Fucina llm: a weight's LoRA deltas applied after its product (the
 * forward's project() step calls this only when the model has adapters).
 *
 * For each delta, in the order set: t = a · Aᵀ [rows, rank] into scratch,
 * t *= scale, y += t · Bᵀ. llama.cpp scales B(A x) after the second product
 * instead; scaling the rank-wide t first keeps the scratch rows x rank
 * (rows x n_out would be the vocabulary wide for output.weight) and differs
 * by one rounding of the scale. Both products are fc_gemm_f32 with the
 * arguments project() uses for float weights, so a row computes the same
 * bits in a one-row step as in a small batch wherever the base product does. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/ctx.h"
#include "exec/gemm.h"
#include "llm/model.h"

const fc_llm_lora_delta *fc_llm_lora_find(const fc_llm_lora_set *s, const fc_tensor *w)
{
    for (size_t i = fc_llm_lora_slot(w, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->keys[i] == w) return s->first[i];
        if (!s->keys[i]) return NULL;
    }
}

int fc_llm_lora_apply(fc_ctx *ctx, const fc_llm_lora_delta *d, const float *a, int64_t n_rows, int64_t cols, float *y,
                      int64_t n_out)
{
    fc_workers *wk = fc_ctx_workers(ctx);
    int64_t rank = 0;
    for (const fc_llm_lora_delta *e = d; e; e = e->next) rank = e->rank > rank ? e->rank : rank;
    float *t = malloc((size_t)(n_rows * rank) * sizeof *t);
    if (!t) return -1;
    int rc = 0;
    for (; d && rc == 0; d = d->next) {
        const int64_t r = d->rank;
        /* t[rows, r] = a[rows, cols] · Aᵀ: A is [r, cols] row-major */
        const fc_gemm_args ga = {.m = n_rows,
                                 .n = r,
                                 .k = cols,
                                 .a = a,
                                 .rsa = cols,
                                 .csa = 1,
                                 .b = fc_tensor_data(d->a),
                                 .btype = fc_gemm_btype_of(fc_tensor_dtype(d->a)),
                                 .rsb = 1,
                                 .csb = cols,
                                 .c = t,
                                 .ldc = r,
                                 .accumulate = 0};
        if ((rc = fc_gemm_f32(wk, &ga)) != 0) break;
        fck_kernels()->f32_scale((size_t)(n_rows * r), t, d->scale, t);
        /* y[rows, n_out] += t · Bᵀ: B is [n_out, r] row-major */
        const fc_gemm_args gb = {.m = n_rows,
                                 .n = n_out,
                                 .k = r,
                                 .a = t,
                                 .rsa = r,
                                 .csa = 1,
                                 .b = fc_tensor_data(d->b),
                                 .btype = fc_gemm_btype_of(fc_tensor_dtype(d->b)),
                                 .rsb = 1,
                                 .csb = r,
                                 .c = y,
                                 .ldc = n_out,
                                 .accumulate = 1};
        rc = fc_gemm_f32(wk, &gb);
    }
    free(t);
    return rc;
}

int fc_llm_lora_embd(fc_ctx *ctx, const fc_llm_lora_delta *d, const int32_t *tok, int64_t n, float *x, int64_t embd)
{
    const fck_table *K = fck_kernels();
    int64_t rank = 0;
    for (const fc_llm_lora_delta *e = d; e; e = e->next) rank = e->rank > rank ? e->rank : rank;
    float *t = malloc((size_t)(n * rank) * sizeof *t);
    if (!t) return -1;
    int rc = 0;
    for (; d && rc == 0; d = d->next) {
        const int64_t r = d->rank;
        const fc_dtype dt = fc_tensor_dtype(d->a);
        const char *rows = fc_tensor_data(d->a);
        const size_t row_bytes = (size_t)r * fc_dtype_size(dt);
        /* t[i] = A's row for token i (ggml_get_rows), as f32 */
        for (int64_t i = 0; i < n; i++) {
            const void *src = rows + (size_t)tok[i] * row_bytes;
            float *dst = t + i * r;
            if (dt == FC_F16) K->f16_to_f32((size_t)r, src, dst);
            else if (dt == FC_BF16) K->bf16_to_f32((size_t)r, src, dst);
            else memcpy(dst, src, row_bytes); /* f32: the load admits no other type */
        }
        K->f32_scale((size_t)(n * r), t, d->scale, t);
        /* x[n, embd] += t · Bᵀ: B is [embd, r] row-major */
        const fc_gemm_args g = {.m = n, .n = embd, .k = r, .a = t, .rsa = r, .csa = 1, .b = fc_tensor_data(d->b),
                                .btype = fc_gemm_btype_of(fc_tensor_dtype(d->b)), .rsb = 1, .csb = r, .c = x, .ldc = embd, .accumulate = 1};
        rc = fc_gemm_f32(fc_ctx_workers(ctx), &g);
    }
    free(t);
    return rc;
}
