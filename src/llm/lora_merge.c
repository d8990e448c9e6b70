/* SPDX-License-Identifier: MIT */
/* Fucina llm: merging LoRA adapters into a model (fucina export-lora, as
 * llama.cpp's tools/export-lora/export-lora.cpp).
 *
 * The base is loaded as a model and each adapter checked against it exactly
 * as for inference (fc_llm_lora_load), so a merge refuses what a run would.
 * Then, tensor by tensor in the base file's order: an adapted weight is
 * decoded to f32 (dequantized when it is a block format, as export-lora
 * does), each adapter's delta scale * B·A added in adapter order (the f32
 * GEMM; the delta scaled, then added, as export-lora's graph), and the sum
 * stored in the output type; every other tensor is copied as its bytes.
 * Metadata is copied key for key, general.file_type set to the output type.
 * The file is built in memory and saved atomically (fc_gguf_writer_save). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/ctx.h"
#include "exec/gemm.h"
#include "fucina/gguf.h"
#include "fucina/ops.h"
#include "fucina/qtensor.h"
#include "fucina/quantize.h"
#include "io/atomic_file.h"
#include "llm/lora_internal.h"

/* general.file_type of the output: llama.cpp's export-lora writes MOSTLY_F16
 * whatever it merged; an explicit type gives its own llama_ftype. -1: keep. */
static int out_ftype(fc_dtype outtype)
{
    if (!outtype) return 1;
    char up[16];
    const char *n = fc_dtype_name(outtype);
    size_t i = 0;
    for (; n[i] && i + 1 < sizeof up; i++) up[i] = (char)(n[i] >= 'a' && n[i] <= 'z' ? n[i] - 'a' + 'A' : n[i]);
    up[i] = 0;
    return fc_quantize_mix_ftype(up);
}

static fc_status check_args(fc_ctx *ctx, const char *base_path, const char *const *lora_paths, const float *scales,
                            size_t n, const char *out_path, fc_dtype outtype)
{
    const char *why = NULL;
    if (!base_path || !out_path)
        why = "NULL base or output path";
    else if (n == 0 || !lora_paths)
        why = "no adapters";
    for (size_t i = 0; !why && i < n; i++)
        if (!lora_paths[i])
            why = "a NULL adapter path";
        else if (scales && !isfinite(scales[i]))
            why = "a non-finite scale";
    if (why) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_lora_merge: %s", why);
        return FC_ERR_INVALID_ARG;
    }
    if (outtype && outtype != FC_F32 && outtype != FC_F16 && outtype != FC_BF16 && !fc_dtype_is_block(outtype)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_lora_merge: output type %s is not f32, f16, bf16 or a block format",
                fc_dtype_name(outtype));
        return FC_ERR_INVALID_ARG;
    }
    if (fc_same_file(out_path, base_path)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: the output is the base model itself; give another path", out_path);
        return FC_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++)
        if (fc_same_file(out_path, lora_paths[i])) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: the output is the adapter %s itself; give another path", out_path,
                    lora_paths[i]);
            return FC_ERR_INVALID_ARG;
        }
    return FC_OK;
}

/* The metadata of g with general.file_type set to ft (kept when ft < 0). */
static fc_status copy_kvs(fc_gguf_writer *w, const fc_gguf *g, int ft)
{
    int seen = 0;
    for (int64_t i = 0; i < fc_gguf_kv_count(g); i++) {
        const int is_ft = ft >= 0 && !strcmp(fc_gguf_kv_key(g, i), "general.file_type");
        const fc_status st =
            is_ft ? fc_gguf_set_u32(w, "general.file_type", (uint32_t)ft) : fc_gguf_writer_copy_kv(w, g, i);
        if (st != FC_OK) return st;
        seen |= is_ft;
    }
    return ft >= 0 && !seen ? fc_gguf_set_u32(w, "general.file_type", (uint32_t)ft) : FC_OK;
}

/* W [n_out, n_in] += scale * B·A of one pair (B [n_out, rank] made f32 for
 * the GEMM's A operand; A read as f32/f16/bf16 by the GEMM); d is n_out x
 * n_in floats of scratch. token_embd's pair is the other layout (A [vocab,
 * rank], B [embd, rank]): W += scale * A·Bᵀ, as export-lora's
 * mul_mat(lora_b, lora_a) for it. 0, or -1 with the error set. */
static int add_delta(fc_ctx *ctx, const fc_llm_lora_pair *p, float scale, float *W, float *d, int64_t n_out,
                     int64_t n_in)
{
    fc_tensor *left = p->embd ? p->a : p->b, *right = p->embd ? p->b : p->a;
    fc_tensor *lf = fc_tensor_dtype(left) == FC_F32 ? left : fc_cast(ctx, left, FC_F32); /* in the caller's scope */
    if (!lf) return -1;
    const int64_t r = p->rank;
    /* the right factor as the GEMM's B[k, j]: A [r, n_in] row-major, or token_embd's B [n_in, r] transposed */
    const fc_gemm_args g = {.m = n_out, .n = n_in, .k = r, .a = fc_tensor_data(lf), .rsa = r, .csa = 1,
                            .b = fc_tensor_data(right), .btype = fc_gemm_btype_of(fc_tensor_dtype(right)), .rsb = p->embd ? 1 : n_in,
                            .csb = p->embd ? r : 1, .c = d, .ldc = n_in, .accumulate = 0};
    if (fc_gemm_f32(fc_ctx_workers(ctx), &g) != 0) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_lora_merge: out of memory for the product of %s", p->name);
        return -1;
    }
    const fck_table *K = fck_kernels();
    const size_t n = (size_t)(n_out * n_in);
    K->f32_scale(n, d, scale, d);
    K->f32_add(n, d, W, W);
    return 0;
}

/* The merged tensor `name` (ne [n_in, n_out]) added to w: the base decoded
 * to f32, each adapter's delta, then the output type. */
static fc_status merge_one(fc_ctx *ctx, fc_gguf *g, fc_gguf_writer *w, const fc_gguf_tensor_info *ti,
                           fc_llm_lora *const *ad, const float *scales, size_t n, fc_dtype outtype)
{
    const int64_t n_in = ti->ne[0], n_out = ti->ne[1];
    const size_t bytes = (size_t)(n_in * n_out) * sizeof(float);
    float *W = malloc(bytes), *d = malloc(bytes);
    fc_status st = FC_OK;
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *base = W && d ? fc_gguf_tensor(g, ti->name) : NULL;
    fc_tensor *f = base ? fc_dequantize(ctx, base) : NULL; /* f32 as it is, or decoded */
    if (f) f = fc_contiguous(ctx, f);
    if (!W || !d) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_lora_merge: out of memory for %s", ti->name);
        goto done;
    }
    if (!f) goto done;
    memcpy(W, fc_tensor_data(f), bytes); /* a copy: an f32 base is the mapped file's bytes */
    for (size_t i = 0; i < n; i++) {
        const fc_llm_lora_pair *p = fc_llm_lora_pair_of(ad[i], ti->name);
        if (p &&
            add_delta(ctx, p, fc_llm_lora_scale(scales ? scales[i] : 1.0f, ad[i]->alpha, p->rank), W, d, n_out, n_in))
            goto done;
    }
    const fc_dtype to = outtype ? outtype : fc_tensor_dtype(base) == FC_F32 ? FC_F32 : FC_F16;
    fc_tensor *r = fc_wrap(ctx, FC_F32, FC_SHAPE({"out", n_out}, {"in", n_in}), W, bytes, NULL, NULL);
    if (r && to != FC_F32) r = fc_dtype_is_block(to) ? fc_quantize(ctx, r, to) : fc_cast(ctx, r, to);
    if (r) st = fc_gguf_writer_add_tensor(w, ti->name, r); /* copied now */
done:
    if (st == FC_OK) st = fc_ctx_status(ctx);
    fc_scope_end(ctx, sc);
    free(W);
    free(d);
    return st;
}

fc_status fc_llm_lora_merge(fc_ctx *ctx, const char *base_path, const char *const *lora_paths, const float *scales,
                            size_t n, const char *out_path, const fc_llm_lora_merge_options *opt)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    const fc_dtype outtype = opt ? opt->outtype : (fc_dtype)0;
    fc_status st = check_args(ctx, base_path, lora_paths, scales, n, out_path, outtype);
    if (st != FC_OK) return st;
    const fc_llm_load_options lo = {.mmap = 1}; /* the weights are read once each: map, do not copy */
    fc_llm_model *m = fc_llm_model_load_ex(ctx, base_path, &lo);
    if (!m) return fc_ctx_status(ctx);
    fc_llm_lora **ad = calloc(n, sizeof *ad);
    fc_gguf *g = NULL;
    fc_gguf_writer *w = NULL;
    if (!ad) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_lora_merge: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (!(ad[i] = fc_llm_lora_load(ctx, m, lora_paths[i]))) goto done;
    if (!(g = fc_gguf_open(ctx, base_path, 0)) || !(w = fc_gguf_writer_new(ctx))) goto done;
    if (copy_kvs(w, g, out_ftype(outtype)) != FC_OK) goto done;
    for (int64_t i = 0; i < fc_gguf_tensor_count(g); i++) {
        fc_gguf_tensor_info ti;
        if (!fc_gguf_tensor_info_at(g, i, &ti)) continue;
        int adapted = 0;
        for (size_t k = 0; k < n && !adapted; k++) adapted = fc_llm_lora_pair_of(ad[k], ti.name) != NULL;
        st = adapted ? merge_one(ctx, g, w, &ti, ad, scales, n, outtype)
                     : fc_gguf_writer_add_raw(w, ti.name, ti.type, ti.n_dims, ti.ne, ti.data, ti.nbytes);
        if (st != FC_OK) goto done;
    }
    fc_gguf_writer_save(w, out_path);
done:
    st = fc_ctx_status(ctx);
    fc_gguf_writer_free(w);
    fc_gguf_close(g); /* after the save: the copied tensors point into its mapping */
    for (size_t i = 0; ad && i < n; i++) fc_llm_lora_free(ad[i]);
    free(ad);
    fc_llm_model_free(m);
    return st;
}
