/* SPDX-License-Identifier: MIT */
/* Tensor creation, inspection and shape checking. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/internal.h"
#include "tensor/quant_tensor.h"

int fct_shape(fc_ctx *ctx, const char *op, const fc_dim *dims, int rank,
              int64_t *sizes, const char **names)
{
    if (rank < 0 || rank > FC_MAX_RANK) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: rank %d is out of range (0..%d)", op, rank, FC_MAX_RANK);
        return 0;
    }
    if (rank > 0 && !dims) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: the shape is NULL", op);
        return 0;
    }
    int64_t total = 1;
    for (int i = 0; i < rank; i++) {
        const char *why = NULL;
        names[i] = dims[i].name ? fc_axis_intern(dims[i].name, &why) : fc_axis_positional(i);
        if (!names[i]) {
            fc_fail(ctx, FC_ERR_AXIS, "%s: axis %d name \"%s\" is invalid: %s", op, i, dims[i].name, why);
            return 0;
        }
        if (dims[i].size < 1) {
            fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" has size %lld; sizes must be >= 1", op, names[i],
                    (long long)dims[i].size);
            return 0;
        }
        if (total > INT64_MAX / 16 / dims[i].size) {
            fc_fail(ctx, FC_ERR_SHAPE, "%s: the shape has too many elements (overflow at axis \"%s\")", op, names[i]);
            return 0;
        }
        total *= dims[i].size;
        sizes[i] = dims[i].size;
        for (int j = 0; j < i; j++) {
            if (names[j] == names[i]) {
                fc_fail(ctx, FC_ERR_AXIS, "%s: axis name \"%s\" appears twice in the shape", op, names[i]);
                return 0;
            }
        }
    }
    return 1;
}

void fct_set_row_major(fc_tensor *t, fc_dtype dt, int rank, const int64_t *sizes, const char *const *names,
                          fc_storage *s)
{
    t->dtype = dt;
    t->rank = rank;
    t->storage = s;
    t->offset = 0;
    int64_t st = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t->dim[i] = sizes[i];
        t->stride[i] = st;
        t->axis[i] = names[i];
        st *= sizes[i];
    }
}

fc_tensor *fct_alloc(fc_ctx *ctx, fc_dtype dt, int rank, const int64_t *sizes, const char *const *names)
{
    size_t es = fc_dtype_size(dt);
    if (es == 0 && fc_dtype_is_block(dt)) /* ops refuse block operands before they get here */
        return fc_fail(ctx, FC_ERR_DTYPE, "%s is a block-quantized dtype: no op makes one element by element",
                       fc_dtype_name(dt));
    if (es == 0) return fc_fail(ctx, FC_ERR_DTYPE, "invalid dtype %d", (int)dt);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= sizes[i];
    fc_storage *s = fc_storage_new(ctx, (size_t)n * es);
    if (!s) return NULL;
    fc_tensor *t = fc_tensor_header(ctx);
    if (!t) {
        fc_storage_release(s);
        return NULL;
    }
    fct_set_row_major(t, dt, rank, sizes, names, s);
    return t;
}

fc_tensor *fct_alloc_like(fc_ctx *ctx, fc_dtype dt, const fc_tensor *like)
{
    return fct_alloc(ctx, dt, like->rank, like->dim, like->axis);
}

fc_tensor *fct_view(fc_ctx *ctx, const fc_tensor *t)
{
    fc_tensor *v = fc_tensor_header(ctx);
    if (!v) return NULL;
    v->dtype = t->dtype;
    v->rank = t->rank;
    memcpy(v->dim, t->dim, sizeof v->dim);
    memcpy(v->stride, t->stride, sizeof v->stride);
    memcpy(v->axis, t->axis, sizeof v->axis);
    v->offset = t->offset;
    v->storage = t->storage;
    fc_storage_retain(t->storage);
    return v;
}

char *fct_describe(const fc_tensor *t, char *buf, size_t len)
{
    if (!t) {
        snprintf(buf, len, "(null)");
        return buf;
    }
    size_t o = (size_t)snprintf(buf, len, "%s[", fc_dtype_name(t->dtype));
    for (int i = 0; i < t->rank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s=%lld", i ? ", " : "", t->axis[i], (long long)t->dim[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

char *fc_tensor_describe(const fc_tensor *t, char *buf, size_t len)
{
    if (!buf || !len) return buf; /* nowhere to write */
    return fct_describe(t, buf, len);
}

const char *fct_name(fc_ctx *ctx, const char *op, const char *name)
{
    const char *why = NULL;
    const char *n = fc_axis_intern(name, &why);
    if (!n) fc_fail(ctx, FC_ERR_AXIS, "%s: axis name \"%s\" is invalid: %s", op, name ? name : "(null)", why);
    return n;
}

int fct_axis(fc_ctx *ctx, const char *op, const fc_tensor *t, const char *name)
{
    const char *n = fct_name(ctx, op, name);
    if (!n) return -1;
    for (int i = 0; i < t->rank; i++)
        if (t->axis[i] == n) return i;
    char d[FCT_DESC_MAX];
    fc_fail(ctx, FC_ERR_AXIS, "%s: no axis \"%s\" in %s", op, name, fct_describe(t, d, sizeof d));
    return -1;
}

int fct_is_contiguous(const fc_tensor *t)
{
    int64_t st = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->dim[i] != 1 && t->stride[i] != st) return 0;
        st *= t->dim[i];
    }
    return 1;
}

/* --- public creation --- */
fc_tensor *fc_empty(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank)
{
    int64_t sizes[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    if (!ctx || fct_block_refuse_dtype(ctx, "fc_empty", dt)) return NULL;
    if (!fct_shape(ctx, "fc_empty", dims, rank, sizes, names)) return NULL;
    return fct_alloc(ctx, dt, rank, sizes, names);
}

fc_tensor *fc_zeros(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank)
{
    if (ctx && fct_block_refuse_dtype(ctx, "fc_zeros", dt)) return NULL;
    fc_tensor *t = fc_empty(ctx, dt, dims, rank);
    if (t) memset(fct_ptr(t), 0, (size_t)fct_numel(t) * fc_dtype_size(dt));
    return t;
}

fc_tensor *fc_full(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank, double value)
{
    if (ctx && fct_block_refuse_dtype(ctx, "fc_full", dt)) return NULL;
    fc_tensor *t = fc_empty(ctx, dt, dims, rank);
    if (t) fc_fill(ctx, t, value);
    return t;
}

fc_tensor *fc_empty_pos(fc_ctx *ctx, fc_dtype dt, int rank, const int64_t *sizes)
{
    fc_dim dims[FC_MAX_RANK];
    if (!ctx || fct_block_refuse_dtype(ctx, "fc_empty_pos", dt)) return NULL;
    if (rank < 0 || rank > FC_MAX_RANK)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_empty_pos: rank %d is out of range (0..%d)", rank, FC_MAX_RANK);
    if (rank > 0 && !sizes) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_empty_pos: the sizes are NULL (rank %d)", rank);
    for (int i = 0; i < rank; i++) dims[i] = (fc_dim){NULL, sizes[i]};
    return fc_empty(ctx, dt, dims, rank);
}

fc_tensor *fc_scalar(fc_ctx *ctx, fc_dtype dt, double value)
{
    if (!ctx || fct_block_refuse_dtype(ctx, "fc_scalar", dt)) return NULL;
    fc_tensor *t = fct_alloc(ctx, dt, 0, NULL, NULL);
    if (t) fct_store(dt, fct_ptr(t), value);
    return t;
}

fc_tensor *fc_from_data(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank, const void *data, size_t nbytes)
{
    if (fc_dtype_is_block(dt)) /* raw blocks: quant_tensor.c */
        return fct_block_new(ctx, "fc_from_data", dt, dims, rank, (void *)(uintptr_t)data, nbytes, NULL, NULL, 1);
    fc_tensor *t = fc_empty(ctx, dt, dims, rank);
    if (!t) return NULL;
    size_t need = (size_t)fct_numel(t) * fc_dtype_size(dt);
    if (nbytes != need) {
        char d[FCT_DESC_MAX];
        fc_fail(ctx, FC_ERR_SHAPE, "fc_from_data: %zu bytes given, %s needs %zu", nbytes, fct_describe(t, d, sizeof d), need);
        fc_discard(ctx, t);
        return NULL;
    }
    if (!data) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_from_data: data is NULL");
        fc_discard(ctx, t);
        return NULL;
    }
    memcpy(fct_ptr(t), data, need);
    return t;
}

fc_tensor *fc_wrap(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank, void *data, size_t nbytes,
                   void (*release)(void *user, void *data), void *user)
{
    int64_t sizes[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    if (!ctx) return NULL;
    if (fc_dtype_is_block(dt)) return fct_block_new(ctx, "fc_wrap", dt, dims, rank, data, nbytes, release, user, 0);
    if (!fct_shape(ctx, "fc_wrap", dims, rank, sizes, names)) return NULL;
    size_t es = fc_dtype_size(dt);
    if (!es) return fc_fail(ctx, FC_ERR_DTYPE, "fc_wrap: invalid dtype %d", (int)dt);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= sizes[i];
    if (!data) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_wrap: data is NULL");
    if ((uintptr_t)data % es != 0)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_wrap: data %p is not aligned to the %zu-byte %s element", data, es,
                       fc_dtype_name(dt));
    if ((size_t)n * es > nbytes)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_wrap: %zu bytes given, the shape needs %zu", nbytes, (size_t)n * es);
    fc_storage *s = fc_storage_borrow(ctx, data, nbytes, release, user);
    if (!s) return NULL;
    fc_tensor *t = fc_tensor_header(ctx);
    if (!t) {
        s->user_release = NULL; /* the caller keeps its memory on failure */
        fc_storage_release(s);
        return NULL;
    }
    fct_set_row_major(t, dt, rank, sizes, names, s);
    return t;
}

fc_tensor *fc_arange(fc_ctx *ctx, fc_dtype dt, const char *axis, int64_t n)
{
    if (ctx && fct_block_refuse_dtype(ctx, "fc_arange", dt)) return NULL;
    fc_dim d = {axis, n};
    fc_tensor *t = fc_empty(ctx, dt, &d, 1);
    if (!t) return NULL;
    size_t es = fc_dtype_size(dt);
    char *p = fct_ptr(t);
    for (int64_t i = 0; i < n; i++) fct_store(dt, p + (size_t)i * es, (double)i);
    return t;
}

/* --- inspection --- */
fc_dtype fc_tensor_dtype(const fc_tensor *t) { return t ? t->dtype : FC_F32; }
int fc_tensor_rank(const fc_tensor *t) { return t ? t->rank : -1; }
int64_t fc_tensor_dim(const fc_tensor *t, int i) { return t && i >= 0 && i < t->rank ? t->dim[i] : 0; }
const char *fc_tensor_axis(const fc_tensor *t, int i) { return t && i >= 0 && i < t->rank ? t->axis[i] : NULL; }
int64_t fc_tensor_stride(const fc_tensor *t, int i) { return t && i >= 0 && i < t->rank ? t->stride[i] : 0; }

int fc_tensor_axis_index(const fc_tensor *t, const char *name)
{
    if (!t) return -1;
    const char *n = fc_axis_intern(name, NULL);
    for (int i = 0; n && i < t->rank; i++)
        if (t->axis[i] == n) return i;
    return -1;
}

int64_t fc_tensor_size(const fc_tensor *t, const char *name)
{
    int i = fc_tensor_axis_index(t, name);
    return i < 0 ? 0 : t->dim[i];
}

int64_t fc_tensor_numel(const fc_tensor *t) { return t ? fct_numel(t) : 0; }
size_t fc_tensor_nbytes(const fc_tensor *t) { return t ? fct_nbytes(t) : 0; }
int fc_tensor_is_contiguous(const fc_tensor *t) { return t ? fct_is_contiguous(t) : 0; }
void *fc_tensor_data(const fc_tensor *t) { return t ? fct_ptr(t) : NULL; }

double fc_tensor_get(const fc_tensor *t, const int64_t *idx)
{
    if (!t || (t->rank > 0 && !idx)) return NAN;
    int64_t off = 0;
    for (int i = 0; i < t->rank; i++) {
        if (idx[i] < 0 || idx[i] >= t->dim[i]) return NAN;
        off += idx[i] * t->stride[i];
    }
    return fct_load(t->dtype, fct_ptr(t) + off * (int64_t)fc_dtype_size(t->dtype));
}

double fc_tensor_item(const fc_tensor *t)
{
    if (!t || fct_numel(t) != 1) return NAN;
    return fct_load(t->dtype, fct_ptr(t));
}
