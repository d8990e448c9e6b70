/* SPDX-License-Identifier: MIT */
/* Block-quantized tensors (fucina/qtensor.h): creation over raw blocks,
 * fc_quantize / fc_dequantize, get_rows on a block table, and the refusal
 * every other op gives them.
 *
 * The codecs are src/quant's reference encoders and decoders, found by the
 * dtype's ggml type id (fc_dtype_ggml_type); every row is encoded or decoded
 * on its own, so the bytes and floats never depend on the thread count. */
#include <string.h>

#include "core/dtype_table.h"
#include "exec/workers.h"
#include "fucina/ops.h"
#include "fucina/qtensor.h"
#include "quant/quant.h"
#include "tensor/grad_record.h"
#include "tensor/quant_tensor.h"
#include "tensor/shape_internal.h"

/* Core's table (core/dtype_table.h) must agree with src/quant, which core
 * cannot include: the ggml id of every dtype is quant's id, and the block
 * bytes are the size of quant's block struct. (Elements per block are
 * checked against fcq_traits_of at run time by test_quant_tensor.) */
#define AGREE(U, l, id, be, bb)                                                  \
    _Static_assert((int)FCQ_##U == (id), "ggml type id of " #l " differs");     \
    _Static_assert(sizeof(fcq_block_##l) == (bb), "block bytes of " #l " differ");
FC_BLOCK_DTYPE_TABLE(AGREE)
#undef AGREE

/* Slices below this many elements are decoded or encoded on one thread. */
#define PARALLEL_MIN 65536

static const fcq_traits *traits_of(fc_dtype dt)
{
    int id = fc_dtype_ggml_type(dt);
    return fc_dtype_is_block(dt) && id >= 0 ? fcq_traits_of((uint32_t)id) : NULL;
}

int fct_block_refuse(fc_ctx *ctx, const char *op, const fc_tensor *t)
{
    if (!t || !fc_dtype_is_block(t->dtype)) return 0;
    char d[FCT_DESC_MAX];
    fc_fail(ctx, FC_ERR_DTYPE, "%s: %s is a block-quantized dtype: dequantize it first (fc_dequantize): %s", op,
            fc_dtype_name(t->dtype), fct_describe(t, d, sizeof d));
    return 1;
}

int fct_block_refuse_n(fc_ctx *ctx, const char *op, int n, const fc_tensor *const *ts)
{
    for (int i = 0; i < n; i++)
        if (fct_block_refuse(ctx, op, ts[i])) return 1;
    return 0;
}

int fct_block_refuse_dtype(fc_ctx *ctx, const char *op, fc_dtype dt)
{
    if (!fc_dtype_is_block(dt)) return 0;
    fc_fail(ctx, FC_ERR_DTYPE, "%s: %s is a block-quantized dtype: block tensors are made by fc_quantize, "
            "fc_from_data or fc_wrap over encoded blocks", op, fc_dtype_name(dt));
    return 1;
}

static int64_t cols_of(const fc_tensor *t) { return t->rank ? t->dim[t->rank - 1] : 1; }
static int64_t rows_of(const fc_tensor *t) { return fct_numel(t) / cols_of(t); }

size_t fct_nbytes(const fc_tensor *t)
{
    if (!fc_dtype_is_block(t->dtype)) return (size_t)fct_numel(t) * fc_dtype_size(t->dtype);
    return (size_t)rows_of(t) * fc_dtype_row_bytes(t->dtype, cols_of(t));
}

/* ---- creation ------------------------------------------------------------------------- */

/* Shape checks of a block tensor; 0 after an error naming op. */
static int block_shape(fc_ctx *ctx, const char *op, fc_dtype dt, int rank, const int64_t *sizes, const char **names)
{
    size_t be = fc_dtype_block_elems(dt);
    if (rank < 1)
        return fc_fail(ctx, FC_ERR_SHAPE, "%s: a %s tensor needs rank >= 1 (its last axis holds the blocks)", op,
                       fc_dtype_name(dt)), 0;
    if (sizes[rank - 1] % (int64_t)be != 0)
        return fc_fail(ctx, FC_ERR_SHAPE, "%s: the last axis \"%s\" has size %lld, not a multiple of the %s block "
                       "size %zu", op, names[rank - 1], (long long)sizes[rank - 1], fc_dtype_name(dt), be), 0;
    return 1;
}

/* A header over storage s (adopted by the current scope). */
static fc_tensor *header(fc_ctx *ctx, fc_dtype dt, int rank, const int64_t *sizes, const char *const *names,
                         fc_storage *s, int borrowed)
{
    fc_tensor *t = fc_tensor_header(ctx);
    if (!t) {
        if (borrowed) s->user_release = NULL; /* the caller keeps its memory on failure */
        fc_storage_release(s);
        return NULL;
    }
    fct_set_row_major(t, dt, rank, sizes, names, s);
    return t;
}

/* An uninitialized block tensor (for fc_quantize). */
static fc_tensor *block_alloc(fc_ctx *ctx, fc_dtype dt, int rank, const int64_t *sizes, const char *const *names)
{
    int64_t rows = 1;
    for (int i = 0; i + 1 < rank; i++) rows *= sizes[i];
    fc_storage *s = fc_storage_new(ctx, (size_t)rows * fc_dtype_row_bytes(dt, sizes[rank - 1]));
    return s ? header(ctx, dt, rank, sizes, names, s, 0) : NULL;
}

fc_tensor *fct_block_new(fc_ctx *ctx, const char *op, fc_dtype dt, const fc_dim *dims, int rank, void *data,
                         size_t nbytes, void (*release)(void *user, void *data), void *user, int copy)
{
    int64_t sizes[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    if (!ctx) return NULL;
    if (!fct_shape(ctx, op, dims, rank, sizes, names) || !block_shape(ctx, op, dt, rank, sizes, names)) return NULL;
    int64_t rows = 1;
    for (int i = 0; i + 1 < rank; i++) rows *= sizes[i];
    size_t need = (size_t)rows * fc_dtype_row_bytes(dt, sizes[rank - 1]);
    if (!data) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: data is NULL", op);
    if (copy ? nbytes != need : nbytes < need)
        return fc_fail(ctx, FC_ERR_SHAPE, "%s: %zu bytes given, %lld rows of %lld %s elements need %zu", op, nbytes,
                       (long long)rows, (long long)sizes[rank - 1], fc_dtype_name(dt), need);
    fc_storage *s;
    if (copy) {
        s = fc_storage_new(ctx, need);
        if (!s) return NULL;
        memcpy(s->data, data, need);
    } else {
        /* No alignment needed: the codecs read blocks bytewise. */
        s = fc_storage_borrow(ctx, data, nbytes, release, user);
        if (!s) return NULL;
    }
    return header(ctx, dt, rank, sizes, names, s, !copy);
}

/* ---- row codecs over the worker pool ------------------------------------------------------ */

typedef struct row_job {
    const fcq_traits *tr;
    int64_t cols, rows, per;
    size_t row_bytes;
    const char *src;        /* decode: block rows; encode: f32 rows */
    char *dst;
    const int64_t *pick;    /* decode: source row of output row r (NULL: r0 + r) */
    int64_t r0;
    int encode;
} row_job;

static void row_chunk(void *arg, int64_t c, int worker)
{
    (void)worker;
    const row_job *j = arg;
    int64_t a = c * j->per, b = a + j->per < j->rows ? a + j->per : j->rows;
    for (int64_t r = a; r < b; r++) {
        if (j->encode) {
            j->tr->encode((const float *)(const void *)(j->src + (size_t)r * (size_t)j->cols * sizeof(float)),
                          j->dst + (size_t)r * j->row_bytes, (size_t)j->cols);
        } else {
            int64_t s = j->pick ? j->pick[r] : j->r0 + r;
            j->tr->decode(j->src + (size_t)s * j->row_bytes,
                          (float *)(void *)(j->dst + (size_t)r * (size_t)j->cols * sizeof(float)), (size_t)j->cols);
        }
    }
}

static void run_rows(fc_ctx *ctx, row_job *j)
{
    int threads = fc_ctx_threads(ctx);
    if (threads <= 1 || j->rows < 2 || j->rows * j->cols < PARALLEL_MIN) {
        j->per = j->rows;
        row_chunk(j, 0, 0);
        return;
    }
    int64_t chunks = (int64_t)threads * 4;
    if (chunks > j->rows) chunks = j->rows;
    j->per = (j->rows + chunks - 1) / chunks;
    fc_workers_run(fc_ctx_workers(ctx), (j->rows + j->per - 1) / j->per, row_chunk, j);
}

void fct_block_decode_rows(fc_ctx *ctx, const fc_tensor *t, int64_t r0, int64_t r1, float *dst)
{
    row_job j = {.tr = traits_of(t->dtype), .cols = cols_of(t), .rows = r1 - r0,
                 .row_bytes = fc_dtype_row_bytes(t->dtype, cols_of(t)), .src = fct_ptr(t), .dst = (char *)dst,
                 .r0 = r0};
    if (j.rows > 0) run_rows(ctx, &j);
}

/* ---- fc_dequantize / fc_quantize -------------------------------------------------------------- */

fc_tensor *fc_dequantize(fc_ctx *ctx, fc_tensor *t)
{
    if (!ctx || !t) return NULL;
    if (!fc_dtype_is_block(t->dtype)) return fc_cast(ctx, t, FC_F32);
    if (!traits_of(t->dtype))
        return fc_fail(ctx, FC_ERR_UNSUPPORTED, "fc_dequantize: no decoder for %s", fc_dtype_name(t->dtype));
    fc_tensor *y = fct_alloc_like(ctx, FC_F32, t);
    if (y) fct_block_decode_rows(ctx, t, 0, rows_of(t), (float *)(void *)fct_ptr(y));
    return y;
}

fc_tensor *fc_quantize(fc_ctx *ctx, fc_tensor *x, fc_dtype dt)
{
    if (!ctx || !x) return NULL;
    char d[FCT_DESC_MAX];
    if (!fc_dtype_is_block(dt))
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_quantize: %s is not a block-quantized dtype (use fc_cast)",
                       fc_dtype_name(dt));
    if (x->dtype != FC_F32)
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_quantize: x must be f32 (fc_cast it first), not %s",
                       fct_describe(x, d, sizeof d));
    const fcq_traits *tr = traits_of(dt);
    if (!tr || !tr->encode)
        return fc_fail(ctx, FC_ERR_UNSUPPORTED, "fc_quantize: %s has no reference encoder yet (its blocks can be "
                       "read, e.g. from GGUF files, but not made)", fc_dtype_name(dt));
    if (!block_shape(ctx, "fc_quantize", dt, x->rank, x->dim, (const char **)x->axis)) return NULL;
    fc_tensor *y = block_alloc(ctx, dt, x->rank, x->dim, x->axis);
    if (!y) return NULL;
    /* A row-major view of x: x itself when contiguous, else a private copy
     * (no gradient record: the result is a constant anyway). */
    fcg_disable();
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *xc = fc_contiguous(ctx, x);
    if (xc) {
        row_job j = {.tr = tr, .cols = cols_of(x), .rows = rows_of(x), .row_bytes = fc_dtype_row_bytes(dt, cols_of(x)),
                     .src = fct_ptr(xc), .dst = fct_ptr(y), .encode = 1};
        run_rows(ctx, &j);
    }
    fc_scope_end(ctx, sc);
    fcg_enable();
    if (!xc) {
        fc_discard(ctx, y);
        return NULL;
    }
    return y;
}

/* ---- get_rows ------------------------------------------------------------------------------ */

fc_tensor *fct_block_get_rows(fc_ctx *ctx, fc_tensor *table, fc_tensor *ids)
{
    static const char *op = "fc_get_rows";
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (table->rank < 2)
        return fc_fail(ctx, FC_ERR_SHAPE, "%s: a block table needs rank >= 2 (rows, then the blocked axis): %s", op,
                       fct_describe(table, d1, sizeof d1));
    if (!traits_of(table->dtype))
        return fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: no decoder for %s", op, fc_dtype_name(table->dtype));
    if (!fcs_is_index_dtype(ids->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: ids %s must be i32 or i64 (rows axis \"%s\" of %s)", op,
                       fct_describe(ids, d1, sizeof d1), table->axis[0], fct_describe(table, d2, sizeof d2));
    int rank = ids->rank + table->rank - 1;
    if (rank > FC_MAX_RANK)
        return fc_fail(ctx, FC_ERR_SHAPE, "%s: ids %s and table %s give rank %d > %d", op,
                       fct_describe(ids, d1, sizeof d1), fct_describe(table, d2, sizeof d2), rank, FC_MAX_RANK);
    int64_t dim[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    for (int i = 0; i < ids->rank; i++) {
        dim[i] = ids->dim[i];
        names[i] = ids->axis[i];
        for (int k = 1; k < table->rank; k++)
            if (table->axis[k] == ids->axis[i])
                return fc_fail(ctx, FC_ERR_AXIS, "%s: axis \"%s\" is in both ids %s and table %s", op, ids->axis[i],
                               fct_describe(ids, d1, sizeof d1), fct_describe(table, d2, sizeof d2));
    }
    for (int k = 1; k < table->rank; k++) {
        dim[ids->rank + k - 1] = table->dim[k];
        names[ids->rank + k - 1] = table->axis[k];
    }
    fc_storage *is = fcs_load_index(ctx, op, "ids", ids);
    if (!is) return NULL;
    int64_t n = fct_numel(ids);
    fc_tensor *out = NULL;
    if (fcs_check_range(ctx, op, is->data, n, table->dim[0], table->axis[0], table))
        out = fct_alloc(ctx, FC_F32, rank, dim, names);
    if (out) {
        /* A table "row" is everything after the rows axis: whole rows of
         * the blocked last axis, contiguous. Decode just the picked ones. */
        int64_t per = fct_numel(table) / table->dim[0];
        int64_t cols = cols_of(table);
        int64_t sub = per / cols; /* block rows per table row */
        if (sub == 1) {
            row_job j = {.tr = traits_of(table->dtype), .cols = cols, .rows = n,
                         .row_bytes = fc_dtype_row_bytes(table->dtype, cols), .src = fct_ptr(table),
                         .dst = fct_ptr(out), .pick = is->data};
            run_rows(ctx, &j);
        } else {
            const int64_t *v = is->data;
            for (int64_t i = 0; i < n; i++)
                fct_block_decode_rows(ctx, table, v[i] * sub, (v[i] + 1) * sub,
                                      (float *)(void *)fct_ptr(out) + i * per);
        }
    }
    fc_storage_release(is);
    return out; /* no record: a block table is a constant, ids never need a gradient */
}
