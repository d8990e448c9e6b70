/* SPDX-License-Identifier: MIT */
/* Comparisons, where, masked fill, clamp and casts. */
#include <math.h>
#include <string.h>

#include "fucina/ops.h"
#include "fucina/qtensor.h"
#include "tensor/broadcast.h"
#include "tensor/grad_record.h"
#include "tensor/quant_tensor.h"

static const char *compare_name(fc_compare_op op)
{
    switch (op) {
    case FC_EQ: return "fc_eq";
    case FC_NE: return "fc_ne";
    case FC_LT: return "fc_lt";
    case FC_LE: return "fc_le";
    case FC_GT: return "fc_gt";
    case FC_GE: return "fc_ge";
    }
    return "fc_compare";
}

typedef struct cmp_arg { fc_compare_op op; fc_dtype dt; int has_scalar; double s; } cmp_arg;

/* One comparison per element type: i64 compares directly, because values
 * beyond 2^53 would collide as doubles. */
#define DEFINE_CMP(NAME, T)                      \
    static int NAME(fc_compare_op op, T x, T y)  \
    {                                            \
        switch (op) {                            \
        case FC_EQ: return x == y;               \
        case FC_NE: return x != y;               \
        case FC_LT: return x < y;                \
        case FC_LE: return x <= y;               \
        case FC_GT: return x > y;                \
        case FC_GE: return x >= y;               \
        }                                        \
        return 0;                                \
    }
DEFINE_CMP(cmp1, double)
DEFINE_CMP(cmp_i64, int64_t)

static void cmp_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const cmp_arg *c = arg;
    if (c->dt == FC_F32) {
        float s = (float)c->s;
        for (int64_t i = 0; i < n; i++) {
            float x, y = s;
            memcpy(&x, p[1] + i * st[1], 4);
            if (!c->has_scalar) memcpy(&y, p[2] + i * st[2], 4);
            p[0][i * st[0]] = (char)cmp1(c->op, x, y);
        }
        return;
    }
    if (c->dt == FC_I64) {
        int64_t s = 0;
        if (c->has_scalar) fct_store(FC_I64, &s, c->s);
        for (int64_t i = 0; i < n; i++) {
            int64_t x, y = s;
            memcpy(&x, p[1] + i * st[1], 8);
            if (!c->has_scalar) memcpy(&y, p[2] + i * st[2], 8);
            p[0][i * st[0]] = (char)cmp_i64(c->op, x, y);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double x = fct_load(c->dt, p[1] + i * st[1]);
        double y = c->has_scalar ? c->s : fct_load(c->dt, p[2] + i * st[2]);
        p[0][i * st[0]] = (char)cmp1(c->op, x, y);
    }
}

static fc_tensor *compare_impl(fc_ctx *ctx, fc_compare_op op, fc_tensor *a, fc_tensor *b, double s)
{
    FCT_NO_BLOCKS(ctx, "fc_compare", NULL, a, b);
    const char *name = compare_name(op);
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if ((unsigned)op > FC_GE) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_compare: unknown op %d", (int)op);
    if (b && a->dtype != b->dtype)
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: operands differ in dtype: %s and %s", name, fct_describe(a, d1, sizeof d1),
                       fct_describe(b, d2, sizeof d2));
    fct_bcast bc;
    fc_tensor *ops[2] = {a, b};
    if (!fct_broadcast(ctx, name, ops, b ? 2 : 1, &bc)) return NULL;
    fc_tensor *y = fct_alloc(ctx, FC_BOOL, bc.rank, bc.dim, bc.axis);
    if (!y) return NULL;
    int64_t strides[3][FC_MAX_RANK];
    for (int i = 0; i < bc.rank; i++) {
        strides[0][i] = y->stride[i];
        strides[1][i] = bc.stride[0][i];
        strides[2][i] = b ? bc.stride[1][i] : 0;
    }
    char *base[3] = {fct_ptr(y), fct_ptr(a), b ? fct_ptr(b) : fct_ptr(a)};
    fct_loop L;
    fct_loop_init(&L, bc.rank, bc.dim, 3, base, strides);
    /* f32 compares against the scalar rounded to f32, as the tensor would hold it. */
    cmp_arg c = {op, a->dtype, b == NULL, a->dtype == FC_F32 ? (double)(float)s : s};
    fct_loop_run(ctx, &L, cmp_row, &c, FCT_PARALLEL_MIN_ELEMWISE);
    return y;
}

fc_tensor *fc_compare(fc_ctx *ctx, fc_compare_op op, fc_tensor *a, fc_tensor *b)
{
    if (!ctx || !a || !b) return NULL;
    return compare_impl(ctx, op, a, b, 0);
}

fc_tensor *fc_compare_scalar(fc_ctx *ctx, fc_compare_op op, fc_tensor *a, double s)
{
    if (!ctx || !a) return NULL;
    return compare_impl(ctx, op, a, NULL, s);
}

/* --- where --- */
typedef struct where_arg { size_t es; int scalar_a; unsigned char av[8]; } where_arg;

static void where_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const where_arg *w = arg;
    for (int64_t i = 0; i < n; i++) {
        const char *src = p[1][i * st[1]] ? (w->scalar_a ? (const char *)w->av : p[2] + i * st[2]) : p[3] + i * st[3];
        memcpy(p[0] + i * st[0], src, w->es);
    }
}

static fc_tensor *where_impl(fc_ctx *ctx, const char *name, fc_tensor *cond, fc_tensor *a, fc_tensor *b, int scalar_a,
                             double av)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (cond->dtype != FC_BOOL)
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: the condition must be bool, not %s", name, fct_describe(cond, d1, sizeof d1));
    if (a && a->dtype != b->dtype)
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: operands differ in dtype: %s and %s", name, fct_describe(a, d1, sizeof d1),
                       fct_describe(b, d2, sizeof d2));
    fct_bcast bc;
    fc_tensor *ops[3] = {b, cond, a}; /* b first: the result keeps x's axis order */
    if (!fct_broadcast(ctx, name, ops, a ? 3 : 2, &bc)) return NULL;
    fc_tensor *y = fct_alloc(ctx, b->dtype, bc.rank, bc.dim, bc.axis);
    if (!y) return NULL;
    size_t es = fc_dtype_size(b->dtype);
    int64_t strides[4][FC_MAX_RANK];
    for (int i = 0; i < bc.rank; i++) {
        strides[0][i] = y->stride[i] * (int64_t)es;
        strides[1][i] = bc.stride[1][i];
        strides[2][i] = a ? bc.stride[2][i] : 0;
        strides[3][i] = bc.stride[0][i];
    }
    char *base[4] = {fct_ptr(y), fct_ptr(cond), a ? fct_ptr(a) : fct_ptr(b), fct_ptr(b)};
    where_arg w = {es, scalar_a, {0}};
    if (scalar_a) fct_store(b->dtype, w.av, av);
    fct_loop L;
    fct_loop_init(&L, bc.rank, bc.dim, 4, base, strides);
    fct_loop_run(ctx, &L, where_row, &w, FCT_PARALLEL_MIN_ELEMWISE);
    if (a) {
        fc_tensor *in[3] = {cond, a, b};
        fcg_record(ctx, y, FCG_WHERE, name, in, 3);
    } else {
        fc_tensor *in[2] = {b, cond};
        fcg_record(ctx, y, FCG_MASKED_FILL, name, in, 2);
    }
    return y;
}

fc_tensor *fc_where(fc_ctx *ctx, fc_tensor *cond, fc_tensor *a, fc_tensor *b)
{
    FCT_NO_BLOCKS(ctx, "fc_where", NULL, a, b);
    if (!ctx || !cond || !a || !b) return NULL;
    return where_impl(ctx, "fc_where", cond, a, b, 0, 0);
}

fc_tensor *fc_masked_fill(fc_ctx *ctx, fc_tensor *x, fc_tensor *mask, double value)
{
    FCT_NO_BLOCKS(ctx, "fc_masked_fill", NULL, x);
    if (!ctx || !x || !mask) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    for (int i = 0; i < mask->rank; i++) {
        int found = 0;
        for (int j = 0; j < x->rank; j++) found |= x->axis[j] == mask->axis[i];
        if (!found && mask->dim[i] != 1)
            return fc_fail(ctx, FC_ERR_AXIS, "fc_masked_fill: the mask's axis \"%s\" is not in x: %s and %s", mask->axis[i],
                           fct_describe(mask, d1, sizeof d1), fct_describe(x, d2, sizeof d2));
    }
    return where_impl(ctx, "fc_masked_fill", mask, NULL, x, 1, value);
}

/* --- clamp --- */
typedef struct clamp_arg { fc_dtype dt; double lo, hi; } clamp_arg;

static void clamp_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const clamp_arg *c = arg;
    if (c->dt == FC_F32) {
        float lo = (float)c->lo, hi = (float)c->hi;
        for (int64_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, p[1] + i * st[1], 4);
            if (v < lo) v = lo;
            if (v > hi) v = hi;
            memcpy(p[0] + i * st[0], &v, 4);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = fct_load(c->dt, p[1] + i * st[1]);
        if (c->dt == FC_I64) { /* direct, beyond 2^53 */
            int64_t x, lo = 0, hi = 0;
            memcpy(&x, p[1] + i * st[1], 8);
            fct_store(FC_I64, &lo, c->lo);
            fct_store(FC_I64, &hi, c->hi);
            x = x < lo ? lo : x > hi ? hi : x;
            memcpy(p[0] + i * st[0], &x, 8);
            continue;
        }
        if (v < c->lo) v = c->lo;
        if (v > c->hi) v = c->hi;
        fct_store(c->dt, p[0] + i * st[0], v);
    }
}

fc_tensor *fc_clamp(fc_ctx *ctx, fc_tensor *x, double lo, double hi)
{
    FCT_NO_BLOCKS(ctx, "fc_clamp", NULL, x);
    if (!ctx || !x) return NULL;
    char d[FCT_DESC_MAX];
    if (!(lo <= hi))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_clamp: lo %g is not <= hi %g (%s)", lo, hi, fct_describe(x, d, sizeof d));
    if (x->dtype == FC_BOOL)
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_clamp: bool is not a number (%s)", fct_describe(x, d, sizeof d));
    fc_tensor *y = fct_alloc_like(ctx, x->dtype, x);
    if (!y) return NULL;
    fct_loop L;
    fct_loop_unary(&L, y, x);
    /* Bounds rounded to the storage type (f16 bounds to f16 values). */
    clamp_arg c = {x->dtype, lo, hi};
    if (x->dtype == FC_F16 || x->dtype == FC_BF16) {
        unsigned char t[2];
        fct_store(x->dtype, t, lo); c.lo = fct_load(x->dtype, t);
        fct_store(x->dtype, t, hi); c.hi = fct_load(x->dtype, t);
    }
    fct_loop_run(ctx, &L, clamp_row, &c, FCT_PARALLEL_MIN_ELEMWISE);
    fcg_node *n = fcg_record(ctx, y, FCG_CLAMP, "fc_clamp", &x, 1);
    if (n) {
        n->p.d[0] = c.lo;
        n->p.d[1] = c.hi;
    }
    return y;
}

fc_tensor *fc_cast(fc_ctx *ctx, fc_tensor *x, fc_dtype to)
{
    if (!ctx || !x) return NULL;
    /* Block dtypes are not cast element by element: decoding to f32 is
     * fc_dequantize; encoding (lossy, per block) only by fc_quantize. */
    if (fc_dtype_is_block(x->dtype) && to == FC_F32) return fc_dequantize(ctx, x);
    if (fc_dtype_is_block(x->dtype) || fc_dtype_is_block(to)) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_cast: %s to %s: a block-quantized dtype only converts to f32 "
                       "(fc_dequantize) or from f32 (fc_quantize)", fct_describe(x, d, sizeof d), fc_dtype_name(to));
    }
    if (fc_dtype_size(to) == 0) return fc_fail(ctx, FC_ERR_DTYPE, "fc_cast: invalid dtype %d", (int)to);
    fc_tensor *y = fct_alloc_like(ctx, to, x);
    if (!y) return NULL;
    if (fc_copy_into(ctx, y, x) != FC_OK) {
        fc_discard(ctx, y);
        return NULL;
    }
    fcg_record(ctx, y, FCG_CAST, "fc_cast", &x, 1);
    return y;
}
