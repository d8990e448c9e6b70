/* SPDX-License-Identifier: MIT */
/* Views (share storage) and axis-name operations, plus copies. */
#include <string.h>

#include "tensor/grad_record.h"
#include "tensor/internal.h"
#include "tensor/quant_tensor.h"

/* Attach a view record (kind) from t to v; returns v. */
static fc_tensor *rec_view(fc_ctx *ctx, fc_tensor *v, fc_tensor *t, fcg_view_kind kind, const char *name,
                           int64_t a, int64_t b, int64_t c, const char *axis)
{
    fcg_node *n = fcg_record(ctx, v, FCG_VIEW, name, &t, 1);
    if (n) {
        n->p.i[0] = kind;
        n->p.i[1] = a;
        n->p.i[2] = b;
        n->p.i[3] = c;
        if (axis) fcg_set_axes(n, &axis, 1);
        n->work = 0;
    }
    return v;
}

#define FCT_NULLCHK(ctx, t) do { if (!(ctx) || !(t)) return NULL; } while (0)

fc_tensor *fc_narrow(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t start, int64_t len)
{
    FCT_NO_BLOCKS(ctx, "fc_narrow", NULL, t);
    FCT_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_narrow", t, axis);
    if (a < 0) return NULL;
    if (start < 0) start += t->dim[a];
    if (start < 0 || len < 1 || start > t->dim[a] - len) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_narrow: [%lld, %lld) is outside axis \"%s\" of %s", (long long)start,
                       (long long)(start + len), t->axis[a], fct_describe(t, d, sizeof d));
    }
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    v->offset += start * t->stride[a];
    v->dim[a] = len;
    return rec_view(ctx, v, t, FCG_V_NARROW, "fc_narrow", start, len, 0, t->axis[a]);
}

fc_tensor *fc_select(fc_ctx *ctx, fc_tensor *t, const char *axis, int64_t index)
{
    FCT_NO_BLOCKS(ctx, "fc_select", NULL, t);
    FCT_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_select", t, axis);
    if (a < 0) return NULL;
    if (index < 0) index += t->dim[a];
    if (index < 0 || index >= t->dim[a]) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_select: index %lld is outside axis \"%s\" of %s", (long long)index,
                       t->axis[a], fct_describe(t, d, sizeof d));
    }
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    v->offset += index * t->stride[a];
    for (int i = a; i < t->rank - 1; i++) {
        v->dim[i] = t->dim[i + 1];
        v->stride[i] = t->stride[i + 1];
        v->axis[i] = t->axis[i + 1];
    }
    v->rank = t->rank - 1;
    return rec_view(ctx, v, t, FCG_V_SELECT, "fc_select", index, 0, 0, t->axis[a]);
}

fc_tensor *fc_permute(fc_ctx *ctx, fc_tensor *t, const char *const *order, int n)
{
    FCT_NO_BLOCKS(ctx, "fc_permute", NULL, t);
    FCT_NULLCHK(ctx, t);
    char d[FCT_DESC_MAX];
    if (n != t->rank)
        return fc_fail(ctx, FC_ERR_AXIS, "fc_permute: %d axes given for %s; name every axis once", n,
                       fct_describe(t, d, sizeof d));
    if (n > 0 && !order) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_permute: the axis order is NULL (n = %d)", n);
    int src[FC_MAX_RANK];
    for (int i = 0; i < n; i++) {
        src[i] = fct_axis(ctx, "fc_permute", t, order[i]);
        if (src[i] < 0) return NULL;
        for (int j = 0; j < i; j++)
            if (src[j] == src[i])
                return fc_fail(ctx, FC_ERR_AXIS, "fc_permute: axis \"%s\" is named twice for %s", order[i],
                               fct_describe(t, d, sizeof d));
    }
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    for (int i = 0; i < n; i++) {
        v->dim[i] = t->dim[src[i]];
        v->stride[i] = t->stride[src[i]];
        v->axis[i] = t->axis[src[i]];
    }
    return rec_view(ctx, v, t, FCG_V_PERMUTE, "fc_permute", 0, 0, 0, NULL);
}

fc_tensor *fc_transpose(fc_ctx *ctx, fc_tensor *t, const char *a, const char *b)
{
    FCT_NO_BLOCKS(ctx, "fc_transpose", NULL, t);
    FCT_NULLCHK(ctx, t);
    int ia = fct_axis(ctx, "fc_transpose", t, a), ib = ia < 0 ? -1 : fct_axis(ctx, "fc_transpose", t, b);
    if (ia < 0 || ib < 0) return NULL;
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    v->dim[ia] = t->dim[ib]; v->stride[ia] = t->stride[ib]; v->axis[ia] = t->axis[ib];
    v->dim[ib] = t->dim[ia]; v->stride[ib] = t->stride[ia]; v->axis[ib] = t->axis[ia];
    return rec_view(ctx, v, t, FCG_V_PERMUTE, "fc_transpose", 0, 0, 0, NULL);
}

fc_tensor *fc_broadcast_to(fc_ctx *ctx, fc_tensor *t, const fc_dim *dims, int rank)
{
    FCT_NO_BLOCKS(ctx, "fc_broadcast_to", NULL, t);
    FCT_NULLCHK(ctx, t);
    int64_t sizes[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    if (!fct_shape(ctx, "fc_broadcast_to", dims, rank, sizes, names)) return NULL;
    char d[FCT_DESC_MAX];
    for (int i = 0; i < t->rank; i++) {
        int found = -1;
        for (int j = 0; j < rank; j++)
            if (names[j] == t->axis[i]) found = j;
        if (found < 0 && t->dim[i] != 1)
            return fc_fail(ctx, FC_ERR_AXIS, "fc_broadcast_to: axis \"%s\" of %s is not in the target shape",
                           t->axis[i], fct_describe(t, d, sizeof d));
        if (found >= 0 && t->dim[i] != 1 && t->dim[i] != sizes[found])
            return fc_fail(ctx, FC_ERR_SHAPE, "fc_broadcast_to: axis \"%s\" has size %lld in %s and %lld in the target",
                           t->axis[i], (long long)t->dim[i], fct_describe(t, d, sizeof d), (long long)sizes[found]);
    }
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    v->rank = rank;
    for (int j = 0; j < rank; j++) {
        v->dim[j] = sizes[j];
        v->axis[j] = names[j];
        v->stride[j] = 0;
        for (int i = 0; i < t->rank; i++)
            if (t->axis[i] == names[j] && t->dim[i] != 1) v->stride[j] = t->stride[i];
    }
    return rec_view(ctx, v, t, FCG_V_BROADCAST, "fc_broadcast_to", 0, 0, 0, NULL);
}

static void set_contiguous_strides(fc_tensor *v)
{
    int64_t st = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        v->stride[i] = st;
        st *= v->dim[i];
    }
}

fc_tensor *fc_reshape(fc_ctx *ctx, fc_tensor *t, const fc_dim *dims, int rank)
{
    FCT_NO_BLOCKS(ctx, "fc_reshape", NULL, t);
    FCT_NULLCHK(ctx, t);
    int64_t sizes[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    if (!fct_shape(ctx, "fc_reshape", dims, rank, sizes, names)) return NULL;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= sizes[i];
    if (n != fct_numel(t)) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_reshape: %s has %lld elements, the new shape %lld",
                       fct_describe(t, d, sizeof d), (long long)fct_numel(t), (long long)n);
    }
    fc_tensor *src = fct_is_contiguous(t) ? fc_retain(t) : fc_clone(ctx, t);
    if (!src) return NULL;
    fc_tensor *v = fct_view(ctx, src);
    if (src == t) fc_release(src);
    else fc_discard(ctx, src);
    if (!v) return NULL;
    v->rank = rank;
    for (int i = 0; i < rank; i++) {
        v->dim[i] = sizes[i];
        v->axis[i] = names[i];
    }
    set_contiguous_strides(v);
    return rec_view(ctx, v, t, FCG_V_RESHAPE, "fc_reshape", 0, 0, 0, NULL);
}

fc_tensor *fc_as_strided(fc_ctx *ctx, fc_tensor *t, const fc_dim *dims, int rank, const int64_t *strides, int64_t offset)
{
    FCT_NO_BLOCKS(ctx, "fc_as_strided", NULL, t);
    FCT_NULLCHK(ctx, t);
    int64_t sizes[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    if (!fct_shape(ctx, "fc_as_strided", dims, rank, sizes, names)) return NULL;
    if (fcg_enabled() && fcg_requires(t)) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_STATE,
                       "fc_as_strided: not differentiable, and %s requires a gradient (use narrow/select/permute, "
                       "or fc_detach it)", fct_describe(t, d, sizeof d));
    }
    /* The lowest and highest element offsets reachable must stay inside the storage. */
    int64_t es = (int64_t)fc_dtype_size(t->dtype);
    int64_t lo = t->offset + offset, hi = t->offset + offset;
    for (int i = 0; i < rank; i++) {
        if (rank > 0 && !strides) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_as_strided: strides is NULL");
        int64_t span = (sizes[i] - 1) * strides[i];
        if (strides[i] > 0) hi += span;
        else lo += span;
    }
    int64_t cap = (int64_t)t->storage->nbytes / es;
    if (lo < 0 || hi >= cap)
        return fc_fail(ctx, FC_ERR_SHAPE,
                       "fc_as_strided: the view reaches elements [%lld, %lld] but the storage holds [0, %lld)",
                       (long long)lo, (long long)hi, (long long)cap);
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    v->rank = rank;
    v->offset = t->offset + offset;
    for (int i = 0; i < rank; i++) {
        v->dim[i] = sizes[i];
        v->axis[i] = names[i];
        v->stride[i] = strides[i];
    }
    return v;
}

fc_tensor *fc_clone(fc_ctx *ctx, fc_tensor *t)
{
    FCT_NO_BLOCKS(ctx, "fc_clone", NULL, t);
    FCT_NULLCHK(ctx, t);
    fc_tensor *c = fct_alloc_like(ctx, t->dtype, t);
    if (!c) return NULL;
    if (fc_copy_into(ctx, c, t) != FC_OK) {
        fc_discard(ctx, c);
        return NULL;
    }
    fcg_node *n = fcg_record(ctx, c, FCG_COPY, "fc_clone", &t, 1);
    if (n) n->work = 0;
    return c;
}

fc_tensor *fc_contiguous(fc_ctx *ctx, fc_tensor *t)
{
    FCT_NO_BLOCKS(ctx, "fc_contiguous", NULL, t);
    FCT_NULLCHK(ctx, t);
    if (!fct_is_contiguous(t)) return fc_clone(ctx, t);
    fc_tensor *v = fct_view(ctx, t);
    fcg_node *n = fcg_record(ctx, v, FCG_COPY, "fc_contiguous", &t, 1);
    if (n) n->work = 0;
    return v;
}

/* --- names --- */
fc_tensor *fc_rename(fc_ctx *ctx, fc_tensor *t, const char *from, const char *to)
{
    FCT_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_rename", t, from);
    if (a < 0) return NULL;
    const char *n = fct_name(ctx, "fc_rename", to);
    if (!n) return NULL;
    for (int i = 0; i < t->rank; i++) {
        if (i != a && t->axis[i] == n) {
            char d[FCT_DESC_MAX];
            return fc_fail(ctx, FC_ERR_AXIS, "fc_rename: %s already has an axis \"%s\"", fct_describe(t, d, sizeof d), to);
        }
    }
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    v->axis[a] = n;
    return rec_view(ctx, v, t, FCG_V_RENAME, "fc_rename", 0, 0, 0, NULL);
}

fc_tensor *fc_rename_all(fc_ctx *ctx, fc_tensor *t, const char *const *names, int n)
{
    FCT_NULLCHK(ctx, t);
    char d[FCT_DESC_MAX];
    if (n != t->rank)
        return fc_fail(ctx, FC_ERR_AXIS, "fc_rename_all: %d names given for %s", n, fct_describe(t, d, sizeof d));
    if (n > 0 && !names) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_rename_all: the name list is NULL (n = %d)", n);
    const char *in[FC_MAX_RANK];
    for (int i = 0; i < n; i++) {
        in[i] = fct_name(ctx, "fc_rename_all", names[i]);
        if (!in[i]) return NULL;
        for (int j = 0; j < i; j++)
            if (in[j] == in[i]) return fc_fail(ctx, FC_ERR_AXIS, "fc_rename_all: name \"%s\" given twice", names[i]);
    }
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    for (int i = 0; i < n; i++) v->axis[i] = in[i];
    return rec_view(ctx, v, t, FCG_V_RENAME, "fc_rename_all", 0, 0, 0, NULL);
}

fc_tensor *fc_split_axis(fc_ctx *ctx, fc_tensor *t, const char *axis, const fc_dim *parts, int n)
{
    FCT_NO_BLOCKS(ctx, "fc_split_axis", NULL, t);
    FCT_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_split_axis", t, axis);
    if (a < 0) return NULL;
    char d[FCT_DESC_MAX];
    if (n < 1 || t->rank - 1 + n > FC_MAX_RANK)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_split_axis: splitting \"%s\" of %s into %d parts exceeds rank %d", axis,
                       fct_describe(t, d, sizeof d), n, FC_MAX_RANK);
    int64_t sizes[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    if (!fct_shape(ctx, "fc_split_axis", parts, n, sizes, names)) return NULL;
    int64_t prod = 1;
    for (int i = 0; i < n; i++) prod *= sizes[i];
    if (prod != t->dim[a])
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_split_axis: parts multiply to %lld but axis \"%s\" of %s has %lld",
                       (long long)prod, axis, fct_describe(t, d, sizeof d), (long long)t->dim[a]);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < t->rank; j++)
            if (j != a && t->axis[j] == names[i])
                return fc_fail(ctx, FC_ERR_AXIS, "fc_split_axis: %s already has an axis \"%s\"", fct_describe(t, d, sizeof d),
                               names[i]);
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    int r = 0;
    for (int i = 0; i < t->rank; i++) {
        if (i != a) {
            v->dim[r] = t->dim[i]; v->stride[r] = t->stride[i]; v->axis[r] = t->axis[i]; r++;
            continue;
        }
        int64_t st = t->stride[a];
        for (int k = n - 1; k >= 0; k--) {
            v->dim[r + k] = sizes[k];
            v->axis[r + k] = names[k];
            v->stride[r + k] = st;
            st *= sizes[k];
        }
        r += n;
    }
    v->rank = r;
    return rec_view(ctx, v, t, FCG_V_RESHAPE, "fc_split_axis", 0, 0, 0, NULL);
}

fc_tensor *fc_merge_axes(fc_ctx *ctx, fc_tensor *t, const char *const *axes, int n, const char *into)
{
    FCT_NO_BLOCKS(ctx, "fc_merge_axes", NULL, t);
    FCT_NULLCHK(ctx, t);
    char d[FCT_DESC_MAX];
    if (n < 1) return fc_fail(ctx, FC_ERR_AXIS, "fc_merge_axes: no axes given");
    if (!axes) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_merge_axes: the axis list is NULL (n = %d)", n);
    int first = fct_axis(ctx, "fc_merge_axes", t, axes[0]);
    if (first < 0) return NULL;
    for (int i = 1; i < n; i++) {
        int a = fct_axis(ctx, "fc_merge_axes", t, axes[i]);
        if (a < 0) return NULL;
        if (a != first + i)
            return fc_fail(ctx, FC_ERR_AXIS, "fc_merge_axes: axes to merge must be adjacent and in order; \"%s\" is not after \"%s\" in %s",
                           axes[i], axes[i - 1], fct_describe(t, d, sizeof d));
    }
    const char *nm = fct_name(ctx, "fc_merge_axes", into);
    if (!nm) return NULL;
    for (int i = 0; i < t->rank; i++)
        if ((i < first || i >= first + n) && t->axis[i] == nm)
            return fc_fail(ctx, FC_ERR_AXIS, "fc_merge_axes: %s already has an axis \"%s\"", fct_describe(t, d, sizeof d), into);
    int viewable = 1;
    for (int i = first; i < first + n - 1; i++)
        if (t->dim[i + 1] != 1 && t->dim[i] != 1 && t->stride[i] != t->stride[i + 1] * t->dim[i + 1]) viewable = 0;
    fc_tensor *src = viewable ? fc_retain(t) : fc_clone(ctx, t);
    if (!src) return NULL;
    fc_tensor *v = fct_view(ctx, src);
    if (src == t) fc_release(src);
    else fc_discard(ctx, src);
    if (!v) return NULL;
    int64_t size = 1, inner_stride = src->stride[first + n - 1];
    for (int i = first; i < first + n; i++) size *= src->dim[i];
    if (viewable) { /* innermost non-unit axis gives the stride */
        for (int i = first + n - 1; i >= first; i--)
            if (src->dim[i] != 1) { inner_stride = src->stride[i]; break; }
    }
    int r = 0;
    for (int i = 0; i < src->rank; i++) {
        if (i > first && i < first + n) continue;
        if (i == first) {
            v->dim[r] = size; v->stride[r] = inner_stride; v->axis[r] = nm;
        } else {
            v->dim[r] = src->dim[i]; v->stride[r] = src->stride[i]; v->axis[r] = src->axis[i];
        }
        r++;
    }
    v->rank = r;
    return rec_view(ctx, v, t, FCG_V_RESHAPE, "fc_merge_axes", 0, 0, 0, NULL);
}

fc_tensor *fc_unsqueeze(fc_ctx *ctx, fc_tensor *t, const char *name, int pos)
{
    FCT_NO_BLOCKS(ctx, "fc_unsqueeze", NULL, t);
    FCT_NULLCHK(ctx, t);
    char d[FCT_DESC_MAX];
    if (t->rank >= FC_MAX_RANK)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_unsqueeze: %s already has rank %d", fct_describe(t, d, sizeof d), FC_MAX_RANK);
    if (pos < 0 || pos > t->rank)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_unsqueeze: position %d is outside 0..%d for %s", pos, t->rank,
                       fct_describe(t, d, sizeof d));
    const char *nm = fct_name(ctx, "fc_unsqueeze", name);
    if (!nm) return NULL;
    for (int i = 0; i < t->rank; i++)
        if (t->axis[i] == nm)
            return fc_fail(ctx, FC_ERR_AXIS, "fc_unsqueeze: %s already has an axis \"%s\"", fct_describe(t, d, sizeof d), name);
    fc_tensor *v = fct_view(ctx, t);
    if (!v) return NULL;
    for (int i = t->rank; i > pos; i--) {
        v->dim[i] = t->dim[i - 1]; v->stride[i] = t->stride[i - 1]; v->axis[i] = t->axis[i - 1];
    }
    v->dim[pos] = 1;
    v->stride[pos] = pos < t->rank ? t->stride[pos] * t->dim[pos] : 1;
    v->axis[pos] = nm;
    v->rank = t->rank + 1;
    return rec_view(ctx, v, t, FCG_V_RESHAPE, "fc_unsqueeze", 0, 0, 0, NULL);
}

fc_tensor *fc_squeeze(fc_ctx *ctx, fc_tensor *t, const char *name)
{
    FCT_NO_BLOCKS(ctx, "fc_squeeze", NULL, t);
    FCT_NULLCHK(ctx, t);
    int a = fct_axis(ctx, "fc_squeeze", t, name);
    if (a < 0) return NULL;
    if (t->dim[a] != 1) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_squeeze: axis \"%s\" of %s has size %lld, not 1", name,
                       fct_describe(t, d, sizeof d), (long long)t->dim[a]);
    }
    return fc_select(ctx, t, name, 0);
}

/* --- copies --- */
typedef struct copy_arg { fc_dtype sd, dd; } copy_arg;

static void copy_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const copy_arg *c = arg;
    size_t ss = fc_dtype_size(c->sd), ds = fc_dtype_size(c->dd);
    if (st[0] == (int64_t)ds && st[1] == (int64_t)ss) {
        fct_convert(c->sd, p[1], c->dd, p[0], n);
        return;
    }
    if (c->sd == c->dd) {
        for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * st[0], p[1] + i * st[1], ss);
        return;
    }
    for (int64_t i = 0; i < n; i++) fct_convert(c->sd, p[1] + i * st[1], c->dd, p[0] + i * st[0], 1);
}

fc_status fc_copy_into(fc_ctx *ctx, fc_tensor *dst, const fc_tensor *src)
{
    FCT_NO_BLOCKS(ctx, "fc_copy_into", FC_ERR_DTYPE, dst, src);
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!dst || !src) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    for (int i = 0; i < src->rank; i++) {
        int found = -1;
        for (int j = 0; j < dst->rank; j++)
            if (dst->axis[j] == src->axis[i]) found = j;
        if ((found < 0 && src->dim[i] != 1) || (found >= 0 && src->dim[i] != 1 && src->dim[i] != dst->dim[found])) {
            fc_fail(ctx, FC_ERR_SHAPE, "fc_copy_into: %s does not broadcast to %s (axis \"%s\")",
                    fct_describe(src, d1, sizeof d1), fct_describe(dst, d2, sizeof d2), src->axis[i]);
            return FC_ERR_SHAPE;
        }
    }
    int64_t strides[2][FC_MAX_RANK];
    int64_t es = (int64_t)fc_dtype_size(dst->dtype);
    for (int i = 0; i < dst->rank; i++) strides[0][i] = dst->stride[i] * es;
    fct_strides_for(src, dst->rank, dst->axis, strides[1]);
    char *base[2] = {fct_ptr(dst), fct_ptr(src)};
    fct_loop L;
    fct_loop_init(&L, dst->rank, dst->dim, 2, base, strides);
    copy_arg a = {src->dtype, dst->dtype};
    fct_loop_run(ctx, &L, copy_row, &a, FCT_PARALLEL_MIN_ELEMWISE);
    fc_storage_touch(dst->storage);
    return FC_OK;
}

typedef struct fill_arg { fc_dtype dt; unsigned char v[8]; } fill_arg;

static void fill_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const fill_arg *f = arg;
    size_t es = fc_dtype_size(f->dt);
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * st[0], f->v, es);
}

fc_status fc_fill(fc_ctx *ctx, fc_tensor *dst, double value)
{
    FCT_NO_BLOCKS(ctx, "fc_fill", FC_ERR_DTYPE, dst);
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!dst) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    fill_arg f = {dst->dtype, {0}};
    fct_store(dst->dtype, f.v, value);
    int64_t strides[1][FC_MAX_RANK];
    int64_t es = (int64_t)fc_dtype_size(dst->dtype);
    for (int i = 0; i < dst->rank; i++) strides[0][i] = dst->stride[i] * es;
    char *base[1] = {fct_ptr(dst)};
    fct_loop L;
    fct_loop_init(&L, dst->rank, dst->dim, 1, base, strides);
    fct_loop_run(ctx, &L, fill_row, &f, FCT_PARALLEL_MIN_ELEMWISE);
    fc_storage_touch(dst->storage);
    return FC_OK;
}

fc_status fc_tensor_read(fc_ctx *ctx, const fc_tensor *t, void *dst, size_t nbytes)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!t || !dst) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    size_t need = fct_nbytes(t); /* block tensors: their raw blocks (always contiguous) */
    if (nbytes != need) {
        char d[FCT_DESC_MAX];
        fc_fail(ctx, FC_ERR_SHAPE, "fc_tensor_read: %zu bytes given, %s has %zu", nbytes, fct_describe(t, d, sizeof d), need);
        return FC_ERR_SHAPE;
    }
    if (fct_is_contiguous(t)) {
        memcpy(dst, fct_ptr(t), need);
        return FC_OK;
    }
    int64_t strides[2][FC_MAX_RANK];
    int64_t es = (int64_t)fc_dtype_size(t->dtype), st = es;
    for (int i = t->rank - 1; i >= 0; i--) {
        strides[0][i] = st;
        st *= t->dim[i];
        strides[1][i] = t->stride[i] * es;
    }
    char *base[2] = {dst, fct_ptr(t)};
    fct_loop L;
    fct_loop_init(&L, t->rank, t->dim, 2, base, strides);
    copy_arg a = {t->dtype, t->dtype};
    fct_loop_run(ctx, &L, copy_row, &a, FCT_PARALLEL_MIN_ELEMWISE);
    return FC_OK;
}
