/* SPDX-License-Identifier: MIT */
/* Structure ops: concat, stack, split, pad, repeat, flip, set_slice; and the
 * strided byte copies they share with index_ops.c and sort.c. */
#include <string.h>

#include "fucina/shape_ops.h"
#include "tensor/grad_record.h"
#include "tensor/shape_internal.h"
#include "tensor/quant_tensor.h"

/* ---- shared helpers ---------------------------------------------------- */

typedef struct bcopy_arg { size_t es; } bcopy_arg;

static void bcopy_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const size_t es = ((const bcopy_arg *)arg)->es;
    char *d = p[0];
    const char *s = p[1];
    if (st[0] == (int64_t)es && st[1] == (int64_t)es) {
        memcpy(d, s, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1: for (int64_t i = 0; i < n; i++) d[i * st[0]] = s[i * st[1]]; break;
    case 2: for (int64_t i = 0; i < n; i++) memcpy(d + i * st[0], s + i * st[1], 2); break;
    case 4: for (int64_t i = 0; i < n; i++) memcpy(d + i * st[0], s + i * st[1], 4); break;
    case 8: for (int64_t i = 0; i < n; i++) memcpy(d + i * st[0], s + i * st[1], 8); break;
    default: for (int64_t i = 0; i < n; i++) memcpy(d + i * st[0], s + i * st[1], es); break;
    }
}

void fcs_copy(fc_ctx *ctx, int rank, const int64_t *dim, char *dst, const int64_t *dst_st, const char *src,
              const int64_t *src_st, size_t es, int serial)
{
    int64_t strides[2][FC_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        strides[0][i] = dst_st[i];
        strides[1][i] = src_st[i];
    }
    char *base[2] = {dst, (char *)src};
    fct_loop L;
    fct_loop_init(&L, rank, dim, 2, base, strides);
    bcopy_arg a = {es};
    fct_loop_run(ctx, &L, bcopy_row, &a, serial ? INT64_MAX : FCT_PARALLEL_MIN_ELEMWISE);
}

typedef struct bfill_arg { size_t es; unsigned char v[8]; } bfill_arg;

static void bfill_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const bfill_arg *f = arg;
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * st[0], f->v, f->es);
}

void fcs_fill(fc_ctx *ctx, int rank, const int64_t *dim, char *dst, const int64_t *dst_st, const void *value,
              size_t es)
{
    int64_t strides[1][FC_MAX_RANK];
    for (int i = 0; i < rank; i++) strides[0][i] = dst_st[i];
    char *base[1] = {dst};
    fct_loop L;
    fct_loop_init(&L, rank, dim, 1, base, strides);
    bfill_arg f = {es, {0}};
    memcpy(f.v, value, es);
    fct_loop_run(ctx, &L, bfill_row, &f, FCT_PARALLEL_MIN_ELEMWISE);
}

typedef struct idx_arg { fc_dtype dt; } idx_arg;

static void load_index_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    fc_dtype dt = ((const idx_arg *)arg)->dt;
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (dt == FC_I32) {
            int32_t x;
            memcpy(&x, p[1] + i * st[1], 4);
            v = x;
        } else {
            memcpy(&v, p[1] + i * st[1], 8);
        }
        memcpy(p[0] + i * st[0], &v, 8);
    }
}

fc_storage *fcs_load_index(fc_ctx *ctx, const char *op, const char *what, const fc_tensor *idx)
{
    char d[FCT_DESC_MAX];
    if (!fcs_is_index_dtype(idx->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: %s is %s; indices must be i32 or i64", op, what,
                       fct_describe(idx, d, sizeof d));
    int64_t n = fct_numel(idx);
    fc_storage *s = fc_storage_new(ctx, (size_t)n * 8);
    if (!s) return NULL;
    int64_t strides[2][FC_MAX_RANK];
    int64_t st = 8;
    for (int i = idx->rank - 1; i >= 0; i--) {
        strides[0][i] = st;
        st *= idx->dim[i];
    }
    fcs_byte_strides(idx, strides[1]);
    char *base[2] = {s->data, fct_ptr(idx)};
    fct_loop L;
    fct_loop_init(&L, idx->rank, idx->dim, 2, base, strides);
    idx_arg a = {idx->dtype};
    fct_loop_run(ctx, &L, load_index_row, &a, FCT_PARALLEL_MIN_ELEMWISE);
    return s;
}

int fcs_check_range(fc_ctx *ctx, const char *op, const int64_t *v, int64_t n, int64_t limit, const char *axis,
                    const fc_tensor *t)
{
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= limit) {
            char d[FCT_DESC_MAX];
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: index %lld (element %lld of the indices) is outside axis \"%s\" (size %lld) of %s",
                    op, (long long)v[i], (long long)i, axis, (long long)limit, fct_describe(t, d, sizeof d));
            return 0;
        }
    }
    return 1;
}

/* Does t have `first`'s axes by name with the same sizes, except that the
 * axis at index `skip` of first (-1: none) may differ in size? Records an
 * error naming op and the axis otherwise. */
static int same_named_shape(fc_ctx *ctx, const char *op, const fc_tensor *first, const fc_tensor *t, int ti, int skip)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (t->dtype != first->dtype) {
        fc_fail(ctx, FC_ERR_DTYPE, "%s: tensor %d is %s but tensor 0 is %s%s%s%s; dtypes must match", op, ti,
                fct_describe(t, d1, sizeof d1), fct_describe(first, d2, sizeof d2), skip >= 0 ? " (axis \"" : "",
                skip >= 0 ? first->axis[skip] : "", skip >= 0 ? "\")" : "");
        return 0;
    }
    for (int i = 0; i < first->rank; i++) {
        int j = -1;
        for (int k = 0; k < t->rank; k++)
            if (t->axis[k] == first->axis[i]) j = k;
        if (j < 0) {
            fc_fail(ctx, FC_ERR_AXIS, "%s: tensor %d %s has no axis \"%s\" of tensor 0 %s", op, ti,
                    fct_describe(t, d1, sizeof d1), first->axis[i], fct_describe(first, d2, sizeof d2));
            return 0;
        }
        if (i != skip && t->dim[j] != first->dim[i]) {
            fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" has size %lld in tensor %d %s but %lld in tensor 0 %s", op,
                    first->axis[i], (long long)t->dim[j], ti, fct_describe(t, d1, sizeof d1), (long long)first->dim[i],
                    fct_describe(first, d2, sizeof d2));
            return 0;
        }
    }
    if (t->rank != first->rank) {
        for (int k = 0; k < t->rank; k++) {
            int found = 0;
            for (int i = 0; i < first->rank; i++)
                if (first->axis[i] == t->axis[k]) found = 1;
            if (!found) {
                fc_fail(ctx, FC_ERR_AXIS, "%s: axis \"%s\" of tensor %d %s is not in tensor 0 %s", op, t->axis[k], ti,
                        fct_describe(t, d1, sizeof d1), fct_describe(first, d2, sizeof d2));
                return 0;
            }
        }
    }
    return 1;
}

/* Copy src (aligned by name) into the block of dst that starts `off`
 * elements in and spans `dim` (dst's axis order). */
static void copy_block(fc_ctx *ctx, fc_tensor *dst, int64_t off, const int64_t *dim, const fc_tensor *src)
{
    int64_t dst_st[FC_MAX_RANK], src_st[FC_MAX_RANK];
    size_t es = fc_dtype_size(dst->dtype);
    fcs_byte_strides(dst, dst_st);
    fct_strides_for(src, dst->rank, dst->axis, src_st);
    fcs_copy(ctx, dst->rank, dim, fct_ptr(dst) + off * (int64_t)es, dst_st, fct_ptr(src), src_st, es, 0);
}

/* ---- concat, stack, split ------------------------------------------------ */

fc_tensor *fc_concat(fc_ctx *ctx, fc_tensor *const *tensors, int n, const char *axis)
{
    for (int q_ = 0; ctx && tensors && q_ < n; q_++)
        if (fct_block_refuse(ctx, "fc_concat", tensors[q_])) return NULL; /* block tensors: tensor/quant_tensor.h */
    if (!ctx) return NULL;
    if (!tensors || n < 1)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_concat: no tensors given to join along axis \"%s\"",
                       axis ? axis : "(null)");
    for (int i = 0; i < n; i++)
        if (!tensors[i]) return NULL;
    const fc_tensor *first = tensors[0];
    int a = fct_axis(ctx, "fc_concat", first, axis);
    if (a < 0) return NULL;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!same_named_shape(ctx, "fc_concat", first, tensors[i], i, a)) return NULL;
        total += tensors[i]->dim[fc_tensor_axis_index(tensors[i], first->axis[a])];
    }
    int64_t dim[FC_MAX_RANK];
    memcpy(dim, first->dim, sizeof dim);
    dim[a] = total;
    fc_tensor *out = fct_alloc(ctx, first->dtype, first->rank, dim, first->axis);
    if (!out) return NULL;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        dim[a] = tensors[i]->dim[fc_tensor_axis_index(tensors[i], first->axis[a])];
        copy_block(ctx, out, off * out->stride[a], dim, tensors[i]);
        off += dim[a];
    }
    /* p.i[0] = 0: each operand's gradient is its stretch of the axis. */
    fcg_node *nd = fcg_record(ctx, out, FCG_CONCAT, "fc_concat", tensors, n);
    if (nd) {
        nd->p.i[0] = 0;
        fcg_set_axes(nd, &first->axis[a], 1);
    }
    return out;
}

fc_tensor *fc_stack(fc_ctx *ctx, fc_tensor *const *tensors, int n, const char *new_axis, int pos)
{
    for (int q_ = 0; ctx && tensors && q_ < n; q_++)
        if (fct_block_refuse(ctx, "fc_stack", tensors[q_])) return NULL; /* block tensors: tensor/quant_tensor.h */
    if (!ctx) return NULL;
    if (!tensors || n < 1)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_stack: no tensors given to stack along axis \"%s\"",
                       new_axis ? new_axis : "(null)");
    for (int i = 0; i < n; i++)
        if (!tensors[i]) return NULL;
    const fc_tensor *first = tensors[0];
    char d[FCT_DESC_MAX];
    const char *nm = fct_name(ctx, "fc_stack", new_axis);
    if (!nm) return NULL;
    if (first->rank >= FC_MAX_RANK)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_stack: adding axis \"%s\" to %s exceeds rank %d", new_axis,
                       fct_describe(first, d, sizeof d), FC_MAX_RANK);
    if (pos < 0 || pos > first->rank)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_stack: position %d for axis \"%s\" is outside 0..%d for %s", pos,
                       new_axis, first->rank, fct_describe(first, d, sizeof d));
    for (int i = 0; i < first->rank; i++)
        if (first->axis[i] == nm)
            return fc_fail(ctx, FC_ERR_AXIS, "fc_stack: %s already has an axis \"%s\"", fct_describe(first, d, sizeof d),
                           new_axis);
    for (int i = 0; i < n; i++)
        if (!same_named_shape(ctx, "fc_stack", first, tensors[i], i, -1)) return NULL;
    int64_t dim[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    for (int i = 0, r = 0; i <= first->rank; i++) {
        if (i == pos) {
            dim[r] = n;
            names[r++] = nm;
        }
        if (i < first->rank) {
            dim[r] = first->dim[i];
            names[r++] = first->axis[i];
        }
    }
    fc_tensor *out = fct_alloc(ctx, first->dtype, first->rank + 1, dim, names);
    if (!out) return NULL;
    size_t es = fc_dtype_size(out->dtype);
    int64_t dst_st[FC_MAX_RANK], src_st[FC_MAX_RANK];
    for (int i = 0, r = 0; i < out->rank; i++)
        if (i != pos) dst_st[r++] = out->stride[i] * (int64_t)es;
    for (int i = 0; i < n; i++) {
        fct_strides_for(tensors[i], first->rank, first->axis, src_st);
        fcs_copy(ctx, first->rank, first->dim, fct_ptr(out) + (int64_t)i * out->stride[pos] * (int64_t)es, dst_st,
                 fct_ptr(tensors[i]), src_st, es, 0);
    }
    /* Shares concat's record: p.i[0] = 1 means operand i's gradient is
     * index i of the new axis. */
    fcg_node *nd = fcg_record(ctx, out, FCG_CONCAT, "fc_stack", tensors, n);
    if (nd) {
        nd->p.i[0] = 1;
        fcg_set_axes(nd, &nm, 1);
    }
    return out;
}

fc_status fc_split(fc_ctx *ctx, fc_tensor *t, const char *axis, const int64_t *sizes, int n, fc_tensor **out)
{
    FCT_NO_BLOCKS(ctx, "fc_split", FC_ERR_DTYPE, t);
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (out)
        for (int i = 0; i < n; i++) out[i] = NULL;
    if (!t) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    int a = fct_axis(ctx, "fc_split", t, axis);
    if (a < 0) return fc_ctx_status(ctx);
    char d[FCT_DESC_MAX];
    if (n < 1 || !sizes || !out) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_split: splitting axis \"%s\" of %s needs n >= 1 sizes and an output array",
                axis, fct_describe(t, d, sizeof d));
        return FC_ERR_INVALID_ARG;
    }
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 1) {
            fc_fail(ctx, FC_ERR_SHAPE, "fc_split: part %d of axis \"%s\" of %s has size %lld; sizes must be >= 1", i,
                    axis, fct_describe(t, d, sizeof d), (long long)sizes[i]);
            return FC_ERR_SHAPE;
        }
        sum += sizes[i];
    }
    if (sum != t->dim[a]) {
        fc_fail(ctx, FC_ERR_SHAPE, "fc_split: parts sum to %lld but axis \"%s\" of %s has size %lld", (long long)sum,
                axis, fct_describe(t, d, sizeof d), (long long)t->dim[a]);
        return FC_ERR_SHAPE;
    }
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        fc_tensor *v = fct_view(ctx, t);
        if (!v) {
            for (int j = 0; j < i; j++) {
                fc_discard(ctx, out[j]);
                out[j] = NULL;
            }
            return fc_ctx_status(ctx);
        }
        v->offset += start * t->stride[a];
        v->dim[a] = sizes[i];
        /* Each part is a narrow view of t: the view record's gradient puts
         * it back into its stretch of zeros. */
        fcg_node *nd = fcg_record(ctx, v, FCG_VIEW, "fc_split", &t, 1);
        if (nd) {
            nd->p.i[0] = FCG_V_NARROW;
            nd->p.i[1] = start;
            nd->p.i[2] = sizes[i];
            fcg_set_axes(nd, &t->axis[a], 1);
            nd->work = 0;
        }
        out[i] = v;
        start += sizes[i];
    }
    return FC_OK;
}

/* ---- pad, repeat, flip --------------------------------------------------- */

fc_tensor *fc_pad(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t before, int64_t after, double value)
{
    FCT_NO_BLOCKS(ctx, "fc_pad", NULL, t);
    FCS_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_pad", t, axis);
    if (a < 0) return NULL;
    if (before < 0 || after < 0 || before > INT64_MAX / 16 - t->dim[a] || after > INT64_MAX / 16 - t->dim[a] - before) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_pad: padding (%lld, %lld) of axis \"%s\" of %s must be >= 0",
                       (long long)before, (long long)after, axis, fct_describe(t, d, sizeof d));
    }
    int64_t dim[FC_MAX_RANK];
    memcpy(dim, t->dim, sizeof dim);
    dim[a] = t->dim[a] + before + after;
    fc_tensor *out = fct_alloc(ctx, t->dtype, t->rank, dim, t->axis);
    if (!out) return NULL;
    size_t es = fc_dtype_size(t->dtype);
    unsigned char v[8];
    fct_store(t->dtype, v, value);
    int64_t st[FC_MAX_RANK];
    fcs_byte_strides(out, st);
    if (before > 0) {
        dim[a] = before;
        fcs_fill(ctx, out->rank, dim, fct_ptr(out), st, v, es);
    }
    if (after > 0) {
        dim[a] = after;
        fcs_fill(ctx, out->rank, dim, fct_ptr(out) + (before + t->dim[a]) * out->stride[a] * (int64_t)es, st, v, es);
    }
    dim[a] = t->dim[a];
    copy_block(ctx, out, before * out->stride[a], dim, t);
    fcg_node *nd = fcg_record(ctx, out, FCG_PAD, "fc_pad", &t, 1);
    if (nd) {
        nd->p.i[0] = before;
        fcg_set_axes(nd, &t->axis[a], 1);
    }
    return out;
}

fc_tensor *fc_repeat(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t times)
{
    FCT_NO_BLOCKS(ctx, "fc_repeat", NULL, t);
    FCS_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_repeat", t, axis);
    if (a < 0) return NULL;
    if (times < 1 || times > INT64_MAX / 16 / fct_numel(t)) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_repeat: %lld repeats of axis \"%s\" of %s; the count must be >= 1",
                       (long long)times, axis, fct_describe(t, d, sizeof d));
    }
    int64_t dim[FC_MAX_RANK];
    memcpy(dim, t->dim, sizeof dim);
    dim[a] = t->dim[a] * times;
    fc_tensor *out = fct_alloc(ctx, t->dtype, t->rank, dim, t->axis);
    if (!out) return NULL;
    dim[a] = t->dim[a];
    for (int64_t i = 0; i < times; i++) copy_block(ctx, out, i * t->dim[a] * out->stride[a], dim, t);
    fcg_node *nd = fcg_record(ctx, out, FCG_REPEAT, "fc_repeat", &t, 1);
    if (nd) {
        nd->p.i[0] = times;
        fcg_set_axes(nd, &t->axis[a], 1);
    }
    return out;
}

fc_tensor *fc_flip(fc_ctx *ctx, fc_tensor *t, const char *axis)
{
    FCT_NO_BLOCKS(ctx, "fc_flip", NULL, t);
    FCS_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_flip", t, axis);
    if (a < 0) return NULL;
    fc_tensor *out = fct_alloc_like(ctx, t->dtype, t);
    if (!out) return NULL;
    size_t es = fc_dtype_size(t->dtype);
    int64_t dst_st[FC_MAX_RANK], src_st[FC_MAX_RANK];
    fcs_byte_strides(out, dst_st);
    fcs_byte_strides(t, src_st);
    const char *src = fct_ptr(t) + (t->dim[a] - 1) * src_st[a];
    src_st[a] = -src_st[a];
    fcs_copy(ctx, t->rank, t->dim, fct_ptr(out), dst_st, src, src_st, es, 0);
    fcg_node *nd = fcg_record(ctx, out, FCG_FLIP, "fc_flip", &t, 1);
    if (nd) fcg_set_axes(nd, &t->axis[a], 1);
    return out;
}

/* ---- set_slice ----------------------------------------------------------- */

static int same_storage_overlap(const fc_tensor *a, const fc_tensor *b) { return a->storage == b->storage; }

fc_status fc_set_slice(fc_ctx *ctx, fc_tensor *dst, const char *axis, int64_t start, const fc_tensor *src)
{
    FCT_NO_BLOCKS(ctx, "fc_set_slice", FC_ERR_DTYPE, dst, src);
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!dst || !src) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    int a = fct_axis(ctx, "fc_set_slice", dst, axis);
    if (a < 0) return fc_ctx_status(ctx);
    if (src->dtype != dst->dtype) {
        fc_fail(ctx, FC_ERR_DTYPE, "fc_set_slice: src %s and dst %s (axis \"%s\") differ in dtype",
                fct_describe(src, d1, sizeof d1), fct_describe(dst, d2, sizeof d2), axis);
        return FC_ERR_DTYPE;
    }
    int sa = -1;
    for (int i = 0; i < src->rank; i++)
        if (src->axis[i] == dst->axis[a]) sa = i;
    int64_t len = sa >= 0 ? src->dim[sa] : 1;
    if (start < 0) start += dst->dim[a];
    if (start < 0 || start > dst->dim[a] - len) {
        fc_fail(ctx, FC_ERR_SHAPE, "fc_set_slice: [%lld, %lld) is outside axis \"%s\" of dst %s (src %s)",
                (long long)start, (long long)(start + len), axis, fct_describe(dst, d2, sizeof d2),
                fct_describe(src, d1, sizeof d1));
        return FC_ERR_SHAPE;
    }
    for (int i = 0; i < src->rank; i++) {
        if (i == sa) continue;
        int found = -1;
        for (int j = 0; j < dst->rank; j++)
            if (dst->axis[j] == src->axis[i]) found = j;
        if ((found < 0 && src->dim[i] != 1) || (found >= 0 && src->dim[i] != 1 && src->dim[i] != dst->dim[found])) {
            fc_fail(ctx, FC_ERR_SHAPE, "fc_set_slice: src %s does not broadcast to dst %s (axis \"%s\"; slicing axis \"%s\")",
                    fct_describe(src, d1, sizeof d1), fct_describe(dst, d2, sizeof d2), src->axis[i], axis);
            return FC_ERR_SHAPE;
        }
    }
    /* An aliasing src is copied first so the write cannot read its own output. */
    fc_tensor *tmp = NULL;
    if (same_storage_overlap(dst, src)) {
        tmp = fct_alloc_like(ctx, src->dtype, src);
        if (!tmp) return fc_ctx_status(ctx);
        int64_t st[FC_MAX_RANK], ss[FC_MAX_RANK];
        fcs_byte_strides(tmp, st);
        fcs_byte_strides(src, ss);
        fcs_copy(ctx, src->rank, src->dim, fct_ptr(tmp), st, fct_ptr(src), ss, fc_dtype_size(src->dtype), 0);
        src = tmp;
    }
    int64_t dim[FC_MAX_RANK], dst_st[FC_MAX_RANK], src_st[FC_MAX_RANK];
    memcpy(dim, dst->dim, sizeof dim);
    dim[a] = len;
    size_t es = fc_dtype_size(dst->dtype);
    fcs_byte_strides(dst, dst_st);
    fct_strides_for(src, dst->rank, dst->axis, src_st);
    fcs_copy(ctx, dst->rank, dim, fct_ptr(dst) + start * dst_st[a], dst_st, fct_ptr(src), src_st, es, 0);
    if (tmp) fc_discard(ctx, tmp);
    fc_storage_touch(dst->storage);
    return FC_OK;
}
