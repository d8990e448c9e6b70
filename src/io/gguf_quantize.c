/* SPDX-License-Identifier: MIT */
/* GGUF quantization (include/fucina/quantize.h): plan with llama.cpp's rules
 * (gguf_quantize_policy.c), then stream: the header goes out first (every
 * tensor's type and size is known from the plan), then each tensor's rows
 * are decoded to f32 and encoded to the target type, a slab at a time,
 * rows spread over the worker pool. Each row is encoded on its own, so the
 * bytes do not depend on the thread count. */
#define _DEFAULT_SOURCE /* madvise */
#define _POSIX_C_SOURCE 200809L

#include "fucina/quantize.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "exec/ctx.h"
#include "exec/workers.h"
#include "fucina/gguf.h"
#include "fucina/half.h"
#include "fucina/imatrix.h"
#include "io/atomic_file.h"
#include "io/gguf_internal.h"
#include "io/gguf_quantize_policy.h"
#include "quant/quant.h"

static const char *const OP = "fc_gguf_quantize";

/* Encoded bytes per slab: bounds memory whatever the tensor size. */
#define SLAB_BYTES ((size_t)32 << 20)

fc_quantize_options fc_quantize_default_options(void)
{
    fc_quantize_options o;
    memset(&o, 0, sizeof o);
    o.output_tensor_type = -1;
    o.token_embedding_type = -1;
    return o;
}

const char *fc_quantize_mix_name(int i)
{
    const fc_quant_mix *m = i >= 0 ? fc_quant_mix_at((size_t)i) : NULL;
    return m ? m->name : NULL;
}

int fc_quantize_mix_ftype(const char *name)
{
    const fc_quant_mix *m = fc_quant_mix_find(name);
    return m ? m->ftype : -1;
}

/* ---- hparams ------------------------------------------------------------------------ */

/* An integer KV of any integer type (or element 0 of an integer array, for
 * per-layer values); 0 when absent or not an integer. Checked by type first,
 * so an absent key records no error in the context. */
static int kv_int(fc_gguf *g, const char *key, int64_t *out)
{
    int64_t i = fc_gguf_find_kv(g, key);
    if (i < 0) return 0;
    const gguf_kv *kv = fc_gguf_kv_at(g, i);
    uint32_t type = kv->type;
    const unsigned char *p = kv->raw;
    if (type == FC_GGUF_ARR) {
        if (kv->n == 0 || !kv->data) return 0;
        type = kv->elem;
        p = kv->data;
    }
    switch ((fc_gguf_vtype)type) {
    case FC_GGUF_U8: *out = *(const uint8_t *)p; return 1;
    case FC_GGUF_I8: *out = *(const int8_t *)p; return 1;
    case FC_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 1; }
    case FC_GGUF_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return 1; }
    case FC_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 1; }
    case FC_GGUF_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return 1; }
    case FC_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); *out = v > INT32_MAX ? INT32_MAX : (int64_t)v; return 1; }
    case FC_GGUF_I64: { int64_t v; memcpy(&v, p, 8); *out = v; return 1; }
    case FC_GGUF_F32: case FC_GGUF_BOOL: case FC_GGUF_STR: case FC_GGUF_ARR: case FC_GGUF_F64: return 0;
    }
    return 0;
}

static int clamp_int(int64_t v) { return v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : (int)v; }

static void read_model(fc_gguf *g, const fc_quant_tensor *t, int64_t n, fc_quant_model *m)
{
    memset(m, 0, sizeof *m);
    const char *arch = "";
    int64_t ia = fc_gguf_find_kv(g, "general.architecture");
    if (ia >= 0 && fc_gguf_kv_type(g, ia) == FC_GGUF_STR) arch = fc_gguf_kv_at(g, ia)->str;
    char key[256];
    int64_t v;
    snprintf(key, sizeof key, "%.200s.block_count", arch);
    if (kv_int(g, key, &v)) {
        m->n_layer = clamp_int(v);
    } else { /* no hparams: count the layers from the names */
        for (int64_t i = 0; i < n; i++) {
            int l;
            if (sscanf(t[i].name, "blk.%d.", &l) == 1 && l + 1 > m->n_layer) m->n_layer = l + 1;
        }
    }
    snprintf(key, sizeof key, "%.200s.attention.head_count", arch);
    if (kv_int(g, key, &v)) m->n_head = clamp_int(v);
    snprintf(key, sizeof key, "%.200s.attention.head_count_kv", arch);
    m->n_head_kv = kv_int(g, key, &v) ? clamp_int(v) : m->n_head;
    snprintf(key, sizeof key, "%.200s.expert_count", arch);
    if (kv_int(g, key, &v)) m->n_expert = clamp_int(v);
    m->is_falcon = !strcmp(arch, "falcon");
    m->is_bailingmoe3 = !strcmp(arch, "bailingmoe3");
    m->is_70b = !strcmp(arch, "llama") && m->n_layer == 80 && m->n_head != m->n_head_kv;
}

/* ---- conversions -------------------------------------------------------------------- */

static int plain_float(uint32_t type) { return type == FC_GGML_F32 || type == FC_GGML_F16 || type == FC_GGML_BF16; }

static int can_decode(uint32_t type)
{
    const fcq_traits *tr = fcq_traits_of(type);
    return plain_float(type) || (tr && tr->decode);
}

static int can_encode(uint32_t type)
{
    const fcq_traits *tr = fcq_traits_of(type);
    return plain_float(type) || (tr && tr->encode);
}

static void decode_row(uint32_t type, const void *src, float *dst, size_t n)
{
    if (type == FC_GGML_F32) {
        memcpy(dst, src, n * sizeof(float));
    } else if (type == FC_GGML_F16) {
        const fc_f16 *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = fc_f16_to_f32(s[i]);
    } else if (type == FC_GGML_BF16) {
        const fc_bf16 *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = fc_bf16_to_f32(s[i]);
    } else {
        fcq_traits_of(type)->decode(src, dst, n);
    }
}

/* F16 and BF16 round to nearest even, as ggml's row converters do. qw: the
 * row's importance weights, NULL for none (only types that take them get
 * them: see weights_for). */
static void encode_row(uint32_t type, const float *src, void *dst, size_t n, const float *qw)
{
    if (qw) {
        fcq_weighted_encoder(type)(src, dst, n, qw);
    } else if (type == FC_GGML_F32) {
        memcpy(dst, src, n * sizeof(float));
    } else if (type == FC_GGML_F16) {
        fc_f16 *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = fc_f32_to_f16(src[i]);
    } else if (type == FC_GGML_BF16) {
        fc_bf16 *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = fc_f32_to_bf16(src[i]);
    } else if (type == FC_GGML_IQ4_NL) {
        fcq_encode_iq4_nl_search(src, dst, n); /* llama-quantize's iq4_nl, not the _ref one */
    } else {
        fcq_traits_of(type)->encode(src, dst, n);
    }
}

static uint64_t row_bytes(uint32_t type, int64_t ne0)
{
    uint32_t be = 1, bb = 0;
    fc_ggml_type_block(type, &be, &bb);
    return (uint64_t)ne0 / be * bb;
}

/* ---- the parallel slab --------------------------------------------------------------- */

typedef struct slab_job {
    const unsigned char *src;  /* first row of the slab */
    unsigned char *dst;
    uint32_t src_type, dst_type;
    int64_t ne0, rows, rows_per_chunk;
    uint64_t src_row, dst_row;
    float **scratch;           /* one row of f32 per worker */
    const float *qw;           /* importance weights, n_mat x ne0, or NULL */
    int64_t row0, rows_per_mat; /* the slab's first row in the tensor; rows of one expert */
} slab_job;

static void slab_chunk(void *arg, int64_t chunk, int worker)
{
    const slab_job *j = arg;
    int64_t r0 = chunk * j->rows_per_chunk, r1 = r0 + j->rows_per_chunk;
    if (r1 > j->rows) r1 = j->rows;
    float *f = j->scratch[worker];
    for (int64_t r = r0; r < r1; r++) {
        const void *s = j->src + (uint64_t)r * j->src_row;
        void *d = j->dst + (uint64_t)r * j->dst_row;
        /* an expert's rows share its weights, as llama-quantize slices them */
        const float *qw = j->qw ? j->qw + (j->row0 + r) / j->rows_per_mat * j->ne0 : NULL;
        if (j->src_type == FC_GGML_F32) { /* no copy: encode straight from the mapping */
            encode_row(j->dst_type, s, d, (size_t)j->ne0, qw);
        } else {
            decode_row(j->src_type, s, f, (size_t)j->ne0);
            encode_row(j->dst_type, f, d, (size_t)j->ne0, qw);
        }
    }
}

/* ---- driver ------------------------------------------------------------------------- */

typedef struct run {
    fc_ctx *ctx;
    fc_gguf *g;
    fc_gguf_writer *w;
    fc_workers *own_pool;
    fc_quant_tensor *qt;
    fc_gguf_tensor_info *info;
    size_t *perm;
    uint32_t *types;
    int *fallback;
    float **scratch;
    int n_scratch;
    unsigned char *slab;
    size_t slab_cap;
    fc_imatrix *imx;
    const fc_imatrix_entry **imx_of; /* per output tensor: the entry used, or NULL */
    float *qw;                       /* the current tensor's weights */
} run;

static void run_free(run *r)
{
    fc_gguf_writer_free(r->w); /* aborts a file still being written */
    if (r->g) fc_gguf_close(r->g);
    fc_workers_free(r->own_pool);
    if (r->scratch)
        for (int i = 0; i < r->n_scratch; i++) free(r->scratch[i]);
    free(r->scratch);
    free(r->qt);
    free(r->info);
    free(r->perm);
    free(r->types);
    free(r->fallback);
    free(r->slab);
    fc_imatrix_free(r->imx);
    free(r->imx_of);
    free(r->qw);
}

static fc_status fail(run *r, fc_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static fc_status fail(run *r, fc_status st, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fc_fail(r->ctx, st, "%s: %s", OP, msg);
    run_free(r);
    return st;
}

static int check_type_opt(int type)
{
    return type == -1 || (type >= 0 && fc_ggml_type_name((uint32_t)type) && (plain_float((uint32_t)type) ||
                                                                              fcq_traits_of((uint32_t)type)));
}

/* Drop the pages of a tensor we are done with: the mapping is only read
 * once, so keeping it resident would grow RSS to the model size. madvise,
 * not posix_madvise: glibc makes POSIX_MADV_DONTNEED a no-op. The mapping is
 * private and never written, so dropping pages loses nothing (a later read
 * would fault them in from the file again); with FC_GGUF_READ it would
 * discard heap bytes, but the quantizer always maps. */
static void release_pages(const void *p, uint64_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || n == 0) return;
    uintptr_t a = (uintptr_t)p, b = a + n;
    a = (a + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    b = b / (uintptr_t)pg * (uintptr_t)pg;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

static const char *split_keys[] = {"split.no", "split.count", "split.tensors.count"};

/* Tensor k takes importance weights but the imatrix has no entry for it. */
static int imatrix_missing(const run *r, int64_t k)
{
    const fc_gguf_tensor_info *ti = &r->info[r->perm[k]];
    return r->imx && !r->imx_of[k] && r->types[k] != ti->type && fcq_weighted_encoder(r->types[k]) != NULL;
}

/* What llama-quantize adds after the file type (its KV overrides): the
 * imatrix path and first dataset (each cut to 127 bytes, its buffer), the
 * entry count and the chunk count (u32, the chunks only when known). */
static fc_status imatrix_kvs(run *r, const char *path)
{
    fc_status st = fc_gguf_set_strn(r->w, "quantize.imatrix.file", path, strlen(path) < 127 ? strlen(path) : 127);
    if (st == FC_OK && r->imx->n_datasets > 0) {
        const char *d = r->imx->datasets[0];
        st = fc_gguf_set_strn(r->w, "quantize.imatrix.dataset", d, strlen(d) < 127 ? strlen(d) : 127);
    }
    if (st == FC_OK) st = fc_gguf_set_u32(r->w, "quantize.imatrix.entries_count", (uint32_t)r->imx->n_entries);
    if (st == FC_OK && r->imx->chunk_count > 0)
        st = fc_gguf_set_u32(r->w, "quantize.imatrix.chunks_count", r->imx->chunk_count);
    return st;
}

fc_status fc_gguf_quantize(fc_ctx *ctx, const char *in_path, const char *out_path, const fc_quantize_options *opt,
                           fc_quantize_summary *summary)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    if (summary) memset(summary, 0, sizeof *summary);
    if (!opt || !opt->type) return fail(&r, FC_ERR_INVALID_ARG, "no quantization type given");
    if (!in_path) return fail(&r, FC_ERR_INVALID_ARG, "the input path is NULL");
    const fc_quant_mix *mix = fc_quant_mix_find(opt->type);
    if (!mix) {
        char known[512] = "";
        for (size_t i = 0; fc_quant_mix_at(i); i++) {
            size_t l = strlen(known);
            snprintf(known + l, sizeof known - l, "%s%s", i ? " " : "", fc_quant_mix_at(i)->name);
        }
        return fail(&r, FC_ERR_INVALID_ARG, "unknown quantization type \"%.64s\" (known: %s)", opt->type, known);
    }
    if (!check_type_opt(opt->output_tensor_type))
        return fail(&r, FC_ERR_INVALID_ARG, "output tensor type %d is not a float or block ggml type",
                    opt->output_tensor_type);
    if (!check_type_opt(opt->token_embedding_type))
        return fail(&r, FC_ERR_INVALID_ARG, "token embedding type %d is not a float or block ggml type",
                    opt->token_embedding_type);
    char pb[160], pb2[160];
    if (!opt->dry_run) {
        if (!out_path) return fail(&r, FC_ERR_INVALID_ARG, "the output path is NULL");
        if (!strcmp(in_path, out_path) || fc_same_file(in_path, out_path))
            return fail(&r, FC_ERR_INVALID_ARG, "the output %s is the input file; write to another path",
                        fc_io_path_for_msg(out_path, pb, sizeof pb));
    }
    if (opt->imatrix_path && !(r.imx = fc_imatrix_load(ctx, opt->imatrix_path))) {
        fc_status st = fc_ctx_status(ctx); /* the loader named the file and the reason */
        run_free(&r);
        return st != FC_OK ? st : FC_ERR_IO;
    }
    r.g = fc_gguf_open(ctx, in_path, 0);
    if (!r.g) { /* the reader's message is in ctx */
        fc_status st = fc_ctx_status(ctx);
        run_free(&r);
        return st != FC_OK ? st : FC_ERR_IO;
    }

    /* the plan */
    int64_t n = fc_gguf_tensor_count(r.g);
    size_t nn = n > 0 ? (size_t)n : 1;
    r.qt = calloc(nn, sizeof *r.qt);
    r.info = calloc(nn, sizeof *r.info);
    r.perm = calloc(nn, sizeof *r.perm);
    r.types = calloc(nn, sizeof *r.types);
    r.fallback = calloc(nn, sizeof *r.fallback);
    r.imx_of = calloc(nn, sizeof *r.imx_of);
    fc_quant_tensor *ordered = calloc(nn, sizeof *ordered);
    if (!r.qt || !r.info || !r.perm || !r.types || !r.fallback || !r.imx_of || !ordered) {
        free(ordered);
        return fail(&r, FC_ERR_OOM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        fc_gguf_tensor_info_at(r.g, i, &r.info[i]);
        r.qt[i].name = r.info[i].name;
        r.qt[i].type = r.info[i].type;
        r.qt[i].n_dims = r.info[i].n_dims;
        memcpy(r.qt[i].ne, r.info[i].ne, sizeof r.qt[i].ne);
    }
    if (!fc_quant_order(r.qt, (size_t)n, r.perm)) {
        free(ordered);
        return fail(&r, FC_ERR_OOM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) ordered[i] = r.qt[r.perm[i]];
    fc_quant_model model;
    read_model(r.g, r.qt, n, &model);
    fc_quant_opts po = {.pure = opt->pure, .output_type = opt->output_tensor_type,
                        .token_embd_type = opt->token_embedding_type, .has_imatrix = r.imx != NULL};
    char why[512];
    int ok = fc_quant_policy(mix, &model, &po, ordered, (size_t)n, r.types, r.fallback, why, sizeof why);
    free(ordered);
    if (!ok) return fail(&r, FC_ERR_INVALID_ARG, "%s: %s", fc_io_path_for_msg(in_path, pb, sizeof pb), why);

    /* llama-quantize --leave-output-tensor: output.weight as it is */
    if (opt->leave_output_tensor)
        for (int64_t k = 0; k < n; k++)
            if (!strcmp(r.info[r.perm[k]].name, "output.weight")) {
                r.types[k] = r.info[r.perm[k]].type;
                r.fallback[k] = 0;
            }

    /* every conversion must be possible before a file is created */
    fc_quantize_summary sum;
    memset(&sum, 0, sizeof sum);
    sum.ftype = mix->ftype;
    sum.n_tensors = n;
    for (int64_t k = 0; k < n; k++) {
        const fc_gguf_tensor_info *ti = &r.info[r.perm[k]];
        uint32_t to = r.types[k];
        int64_t ne0 = ti->ne[0], elems = 1;
        for (int d = 0; d < ti->n_dims; d++) elems *= ti->ne[d];
        sum.n_elements += elems;
        sum.bytes_in += ti->nbytes;
        sum.bytes_out += row_bytes(to, ne0) * (uint64_t)(elems / ne0);
        sum.n_fallback += r.fallback[k];
        if (to == ti->type) continue;
        if (!opt->allow_requantize && ti->type != FC_GGML_F32 && ti->type != FC_GGML_F16 && ti->type != FC_GGML_BF16)
            return fail(&r, FC_ERR_INVALID_ARG,
                        "tensor \"%s\" is already %s: re-encoding it to %s loses what the first quantization kept "
                        "(allow it with --allow-requantize)",
                        ti->name, ti->type_name, fc_ggml_type_name(to));
        sum.n_changed++;
        if (r.imx) {
            /* llama-quantize: an entry is used when it has ne[0] x ne[2]
             * values (one row per expert); another size is an error, except
             * for token_embd (a get_rows, never in a real imatrix), which is
             * then encoded without */
            const fc_imatrix_entry *e = fc_imatrix_find(r.imx, ti->name);
            const int64_t n_mat = ti->n_dims > 2 ? ti->ne[2] : 1;
            int is_embd = !strcmp(ti->name, "token_embd.weight");
            if (e && (e->n_cols != ne0 || e->n_mat != n_mat) && !is_embd)
                return fail(&r, FC_ERR_INVALID_ARG,
                            "%s: the imatrix entry for \"%s\" has %lld x %lld values, the tensor needs %lld x %lld "
                            "(columns x experts): an imatrix of another model?",
                            fc_io_path_for_msg(opt->imatrix_path, pb, sizeof pb), ti->name, (long long)e->n_cols,
                            (long long)e->n_mat, (long long)ne0, (long long)n_mat);
            int takes = fcq_weighted_encoder(to) != NULL;
            if (e && (e->n_cols != ne0 || e->n_mat != n_mat)) e = NULL;
            if (takes && e) {
                r.imx_of[k] = e;
                sum.n_imatrix++;
            } else if (takes) {
                sum.n_imatrix_missing++;
            }
        }
        if (opt->dry_run) continue; /* the plan is printed whatever the encoders */
        if (!can_decode(ti->type))
            return fail(&r, FC_ERR_DTYPE, "tensor \"%s\": cannot convert type %s to %s (only float and block "
                        "types are decoded)", ti->name, ti->type_name, fc_ggml_type_name(to));
        if (!can_encode(to)) {
            const fcq_traits *tr = fcq_traits_of(to);
            return fail(&r, FC_ERR_UNSUPPORTED, "tensor \"%s\" needs type %s, which has no encoder yet (mix %s)",
                        ti->name, tr ? tr->name : fc_ggml_type_name(to), mix->name);
        }
    }

    fc_quantize_progress pr;
    if (opt->dry_run) {
        for (int64_t k = 0; k < n && opt->progress; k++) {
            const fc_gguf_tensor_info *ti = &r.info[r.perm[k]];
            int64_t rows = 1;
            for (int d = 1; d < ti->n_dims; d++) rows *= ti->ne[d];
            pr = (fc_quantize_progress){.index = k, .count = n, .name = ti->name, .src_type = ti->type,
                                        .dst_type = r.types[k], .n_dims = ti->n_dims, .src_bytes = ti->nbytes,
                                        .dst_bytes = row_bytes(r.types[k], ti->ne[0]) * (uint64_t)rows,
                                        .fallback = r.fallback[k], .imatrix = r.imx_of[k] != NULL,
                                        .imatrix_missing = imatrix_missing(&r, k)};
            memcpy(pr.ne, ti->ne, sizeof pr.ne);
            opt->progress(opt->progress_user, &pr);
        }
        if (summary) *summary = sum;
        run_free(&r);
        return FC_OK;
    }

    /* the header: llama.cpp copies every KV, drops the split keys, and
     * re-sets the two below (gguf_set_val_u32 removes then appends) */
    if (!(r.w = fc_gguf_writer_new(ctx))) return fail(&r, FC_ERR_OOM, "out of memory");
    for (int64_t i = 0; i < fc_gguf_kv_count(r.g); i++) {
        const char *key = fc_gguf_kv_key(r.g, i);
        int skip = !strcmp(key, "general.quantization_version") || !strcmp(key, "general.file_type");
        for (size_t s = 0; s < sizeof split_keys / sizeof split_keys[0]; s++) skip |= !strcmp(key, split_keys[s]);
        if (!skip && fc_gguf_writer_copy_kv(r.w, r.g, i) != FC_OK) return fail(&r, fc_ctx_status(ctx), "copying KVs");
    }
    if (fc_gguf_set_u32(r.w, "general.quantization_version", 2) != FC_OK ||
        fc_gguf_set_u32(r.w, "general.file_type", (uint32_t)mix->ftype) != FC_OK)
        return fail(&r, fc_ctx_status(ctx), "setting the file type");
    if (r.imx && imatrix_kvs(&r, opt->imatrix_path) != FC_OK) return fail(&r, fc_ctx_status(ctx), "imatrix keys");
    int64_t max_ne0 = 1;
    for (int64_t k = 0; k < n; k++) {
        const fc_gguf_tensor_info *ti = &r.info[r.perm[k]];
        if (ti->ne[0] > max_ne0) max_ne0 = ti->ne[0];
        if (fc_gguf_writer_add_info(r.w, ti->name, r.types[k], ti->n_dims, ti->ne) != FC_OK)
            return fail(&r, fc_ctx_status(ctx), "tensor \"%s\"", ti->name);
    }

    fc_workers *pool = fc_ctx_workers(ctx);
    if (opt->n_threads > 0) {
        if (!(r.own_pool = fc_workers_new(opt->n_threads)))
            return fail(&r, FC_ERR_OOM, "cannot start %d threads", opt->n_threads);
        pool = r.own_pool;
    }
    r.n_scratch = fc_workers_count(pool);
    if (r.n_scratch < 1) r.n_scratch = 1;
    r.scratch = calloc((size_t)r.n_scratch, sizeof *r.scratch);
    if (!r.scratch) return fail(&r, FC_ERR_OOM, "out of memory");
    for (int i = 0; i < r.n_scratch; i++)
        if (!(r.scratch[i] = malloc((size_t)max_ne0 * sizeof(float)))) return fail(&r, FC_ERR_OOM, "out of memory");

    if (fc_gguf_writer_begin(r.w, out_path) != FC_OK) {
        fc_status st = fc_ctx_status(ctx);
        run_free(&r);
        return st;
    }
    for (int64_t k = 0; k < n; k++) {
        const fc_gguf_tensor_info *ti = &r.info[r.perm[k]];
        uint32_t to = r.types[k];
        int64_t ne0 = ti->ne[0], rows = 1;
        for (int d = 1; d < ti->n_dims; d++) rows *= ti->ne[d];
        uint64_t dst_row = row_bytes(to, ne0), src_row = row_bytes(ti->type, ne0);
        if (to == ti->type) {
            for (uint64_t off = 0; off < ti->nbytes; off += SLAB_BYTES) {
                uint64_t m = ti->nbytes - off < SLAB_BYTES ? ti->nbytes - off : SLAB_BYTES;
                if (fc_gguf_writer_write(r.w, (const unsigned char *)ti->data + off, m) != FC_OK)
                    return fail(&r, fc_ctx_status(ctx), "writing %s", fc_io_path_for_msg(out_path, pb2, sizeof pb2));
                release_pages((const unsigned char *)ti->data + off, m);
            }
        } else {
            /* source rows read and encoded rows held per slab: both bounded */
            int64_t slab_rows = (int64_t)(SLAB_BYTES / (src_row + dst_row));
            if (slab_rows < 1) slab_rows = 1;
            if (slab_rows > rows) slab_rows = rows;
            size_t need = (size_t)((uint64_t)slab_rows * dst_row);
            if (need > r.slab_cap) {
                unsigned char *p = realloc(r.slab, need);
                if (!p) return fail(&r, FC_ERR_OOM, "out of memory");
                r.slab = p;
                r.slab_cap = need;
            }
            if (r.imx_of[k]) { /* the weights of every expert, once per tensor */
                const fc_imatrix_entry *e = r.imx_of[k];
                float *p = realloc(r.qw, (size_t)(e->n_cols * e->n_mat) * sizeof(float));
                if (!p) return fail(&r, FC_ERR_OOM, "out of memory");
                r.qw = p;
                for (int64_t m = 0; m < e->n_mat; m++) fc_imatrix_weights(e, m, r.qw + m * e->n_cols);
            }
            /* chunks of ~64 Ki elements: enough work per claim, many claims per slab */
            int64_t per_chunk = 65536 / ne0;
            if (per_chunk < 1) per_chunk = 1;
            for (int64_t r0 = 0; r0 < rows; r0 += slab_rows) {
                int64_t nr = rows - r0 < slab_rows ? rows - r0 : slab_rows;
                slab_job j = {.src = (const unsigned char *)ti->data + (uint64_t)r0 * src_row, .dst = r.slab,
                              .src_type = ti->type, .dst_type = to, .ne0 = ne0, .rows = nr,
                              .rows_per_chunk = per_chunk, .src_row = src_row, .dst_row = dst_row,
                              .scratch = r.scratch, .qw = r.imx_of[k] ? r.qw : NULL, .row0 = r0,
                              .rows_per_mat = ti->n_dims > 1 ? ti->ne[1] : 1};
                fc_workers_run(pool, (nr + per_chunk - 1) / per_chunk, slab_chunk, &j);
                if (fc_gguf_writer_write(r.w, r.slab, (uint64_t)nr * dst_row) != FC_OK)
                    return fail(&r, fc_ctx_status(ctx), "writing %s", fc_io_path_for_msg(out_path, pb2, sizeof pb2));
                release_pages(j.src, (uint64_t)nr * src_row);
            }
        }
        if (opt->progress) {
            pr = (fc_quantize_progress){.index = k, .count = n, .name = ti->name, .src_type = ti->type,
                                        .dst_type = to, .n_dims = ti->n_dims, .src_bytes = ti->nbytes,
                                        .dst_bytes = dst_row * (uint64_t)rows, .fallback = r.fallback[k],
                                        .imatrix = r.imx_of[k] != NULL, .imatrix_missing = imatrix_missing(&r, k)};
            memcpy(pr.ne, ti->ne, sizeof pr.ne);
            opt->progress(opt->progress_user, &pr);
        }
    }
    if (fc_gguf_writer_finish(r.w) != FC_OK) {
        fc_status st = fc_ctx_status(ctx);
        run_free(&r);
        return st;
    }
    if (summary) *summary = sum;
    run_free(&r);
    return FC_OK;
}
