/* SPDX-License-Identifier: MIT */
/* Binary elementwise ops with broadcasting by name, their scalar forms, the
 * gated activations and in-place axpy. See elementwise.c for the row
 * strategy and integer semantics. */
#include <math.h>
#include <string.h>

#include "fucina/ops.h"
#include "dispatch/dispatch.h"
#include "tensor/broadcast.h"
#include "tensor/grad_record.h"
#include "tensor/quant_tensor.h"

#define CHUNK 256

static const char *binary_name(fc_binary_op op)
{
    switch (op) {
    case FC_ADD: return "fc_add";
    case FC_SUB: return "fc_sub";
    case FC_MUL: return "fc_mul";
    case FC_DIV: return "fc_div";
    case FC_MAX: return "fc_maximum";
    case FC_MIN: return "fc_minimum";
    }
    return "fc_binary";
}

typedef struct binary_arg {
    fc_binary_op op;
    fc_dtype dt;
    int scalar_side;  /* 0: none; 1: a is the scalar; 2: b is the scalar */
    double scalar;    /* in the compute type (f32-rounded for f16/bf16/f32) */
} binary_arg;

static void gather(void *dst, const char *src, int64_t n, int64_t st, size_t es)
{
    char *d = dst;
    for (int64_t i = 0; i < n; i++) memcpy(d + i * (int64_t)es, src + i * st, es);
}
static void scatter(char *dst, int64_t st, const void *src, int64_t n, size_t es)
{
    const char *s = src;
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * st, s + i * (int64_t)es, es);
}

/* Float rows: T is the storage type, S the scalar type of the vs kernels. */
#define FLOAT_BINARY(PFX, T, S, LOADF)                                                                        \
    typedef void (*PFX##_vv_fn)(size_t, const T *, const T *, T *);                                           \
    typedef void (*PFX##_vs_fn)(size_t, const T *, S, T *);                                                   \
    static PFX##_vv_fn PFX##_vv(fc_binary_op op)                                                              \
    {                                                                                                         \
        const fck_table *k = fck_kernels();                                                                   \
        switch (op) {                                                                                         \
        case FC_ADD: return k->PFX##_add;                                                                     \
        case FC_SUB: return k->PFX##_sub;                                                                     \
        case FC_MUL: return k->PFX##_mul;                                                                     \
        case FC_DIV: return k->PFX##_div;                                                                     \
        case FC_MAX: return k->PFX##_max;                                                                     \
        case FC_MIN: return k->PFX##_min;                                                                     \
        }                                                                                                     \
        return NULL;                                                                                          \
    }                                                                                                         \
    static PFX##_vs_fn PFX##_vs(fc_binary_op op)                                                              \
    {                                                                                                         \
        const fck_table *k = fck_kernels();                                                                   \
        switch (op) {                                                                                         \
        case FC_ADD: return k->PFX##_add_vs;                                                                  \
        case FC_SUB: return k->PFX##_sub_vs;                                                                  \
        case FC_MUL: return k->PFX##_mul_vs;                                                                  \
        case FC_DIV: return k->PFX##_div_vs;                                                                  \
        case FC_MAX: return k->PFX##_max_vs;                                                                  \
        case FC_MIN: return k->PFX##_min_vs;                                                                  \
        }                                                                                                     \
        return NULL;                                                                                          \
    }                                                                                                         \
    static void PFX##_row(const binary_arg *B, int64_t n, char *y, int64_t sy, const char *a, int64_t sa,     \
                          const char *b, int64_t sb)                                                          \
    {                                                                                                         \
        const int64_t es = (int64_t)sizeof(T);                                                                \
        PFX##_vv_fn vv = PFX##_vv(B->op);                                                                     \
        PFX##_vs_fn vs = PFX##_vs(B->op);                                                                     \
        int commutative = B->op == FC_ADD || B->op == FC_MUL || B->op == FC_MAX || B->op == FC_MIN;           \
        int a_scalar = B->scalar_side == 1 || sa == 0, b_scalar = B->scalar_side == 2 || sb == 0;             \
        S as = B->scalar_side == 1 ? (S)B->scalar : a_scalar ? (S)LOADF(a) : 0;                                \
        S bs = B->scalar_side == 2 ? (S)B->scalar : b_scalar ? (S)LOADF(b) : 0;                                \
        if (!a_scalar && b_scalar && sy == es && sa == es) {                                                  \
            vs((size_t)n, (const T *)a, bs, (T *)y);                                                          \
            return;                                                                                           \
        }                                                                                                     \
        if (a_scalar && !b_scalar && sy == es && sb == es && (commutative || B->op == FC_SUB)) {              \
            vs((size_t)n, (const T *)b, as, (T *)y);                                                          \
            /* s - x = -(x - s) exactly: negation is exact and rounding symmetric. */                        \
            if (B->op == FC_SUB) fck_kernels()->PFX##_neg((size_t)n, (const T *)y, (T *)y);                   \
            return;                                                                                           \
        }                                                                                                     \
        if (!a_scalar && !b_scalar && sy == es && sa == es && sb == es) {                                     \
            vv((size_t)n, (const T *)a, (const T *)b, (T *)y);                                                \
            return;                                                                                           \
        }                                                                                                     \
        _Alignas(64) T xa[CHUNK], xb[CHUNK], ys[CHUNK];                                                       \
        for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {                                                           \
            int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;                                                      \
            if (b_scalar && !a_scalar) {                                                                      \
                gather(xa, a + i0 * sa, m, sa, sizeof(T));                                                    \
                vs((size_t)m, xa, bs, ys);                                                                    \
            } else {                                                                                          \
                if (a_scalar) {                                                                               \
                    if (B->scalar_side == 1) { T t1; fct_store(B->dt, &t1, (double)as);                        \
                        for (int64_t i = 0; i < m; i++) xa[i] = t1; }                                          \
                    else for (int64_t i = 0; i < m; i++) memcpy(&xa[i], a, sizeof(T));                         \
                } else gather(xa, a + i0 * sa, m, sa, sizeof(T));                                             \
                if (b_scalar) {                                                                               \
                    if (B->scalar_side == 2) { T t2; fct_store(B->dt, &t2, (double)bs);                        \
                        for (int64_t i = 0; i < m; i++) xb[i] = t2; }                                          \
                    else for (int64_t i = 0; i < m; i++) memcpy(&xb[i], b, sizeof(T));                         \
                } else gather(xb, b + i0 * sb, m, sb, sizeof(T));                                             \
                vv((size_t)m, xa, xb, ys);                                                                    \
            }                                                                                                 \
            scatter(y + i0 * sy, sy, ys, m, sizeof(T));                                                       \
        }                                                                                                     \
    }

static inline float load_f32(const char *p) { float v; memcpy(&v, p, 4); return v; }
static inline double load_f64(const char *p) { double v; memcpy(&v, p, 8); return v; }
static inline float load_f16(const char *p) { fc_f16 v; memcpy(&v, p, 2); return fc_f16_to_f32(v); }
static inline float load_bf16(const char *p) { fc_bf16 v; memcpy(&v, p, 2); return fc_bf16_to_f32(v); }

FLOAT_BINARY(f32, float, float, load_f32)
FLOAT_BINARY(f64, double, double, load_f64)
FLOAT_BINARY(f16, fc_f16, float, load_f16)
FLOAT_BINARY(bf16, fc_bf16, float, load_bf16)

/* Integer rows, wrapping; the scalar (if any) is already in T. */
#define INT_BINARY(T, UT, TMIN)                                                                               \
    static void int_##T(const binary_arg *B, int64_t n, char *y, int64_t sy, const char *a, int64_t sa,       \
                        const char *b, int64_t sb)                                                            \
    {                                                                                                         \
        T sv = 0;                                                                                             \
        if (B->scalar_side) fct_store(B->dt, &sv, B->scalar);                                                 \
        for (int64_t i = 0; i < n; i++) {                                                                     \
            T x, z, r = 0;                                                                                    \
            if (B->scalar_side == 1) x = sv; else memcpy(&x, a + i * sa, sizeof x);                           \
            if (B->scalar_side == 2) z = sv; else memcpy(&z, b + i * sb, sizeof z);                           \
            switch (B->op) {                                                                                  \
            case FC_ADD: r = (T)(UT)((UT)x + (UT)z); break;                                                   \
            case FC_SUB: r = (T)(UT)((UT)x - (UT)z); break;                                                   \
            case FC_MUL: r = (T)(UT)((UT)x * (UT)z); break;                                                   \
            case FC_DIV: r = z == 0 ? 0 : ((TMIN) != 0 && x == (T)(TMIN) && z == (T)-1) ? x : (T)(x / z); break; \
            case FC_MAX: r = x > z ? x : z; break;                                                            \
            case FC_MIN: r = x < z ? x : z; break;                                                            \
            }                                                                                                 \
            memcpy(y + i * sy, &r, sizeof r);                                                                 \
        }                                                                                                     \
    }
INT_BINARY(uint8_t, uint8_t, 0)
INT_BINARY(int8_t, uint8_t, INT8_MIN)
INT_BINARY(int16_t, uint16_t, INT16_MIN)
INT_BINARY(int32_t, uint32_t, INT32_MIN)
INT_BINARY(int64_t, uint64_t, INT64_MIN)

static void binary_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const binary_arg *B = arg;
    switch (B->dt) {
    case FC_F32: f32_row(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_F64: f64_row(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_F16: f16_row(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_BF16: bf16_row(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_U8: int_uint8_t(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_I8: int_int8_t(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_I16: int_int16_t(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_I32: int_int32_t(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_I64: int_int64_t(B, n, p[0], st[0], p[1], st[1], p[2], st[2]); return;
    case FC_BOOL: return;
    FC_CASE_BLOCK_DTYPES: return; /* refused by binary_impl */
    }
}

static fc_tensor *binary_impl(fc_ctx *ctx, const char *name, binary_arg *B, fc_tensor *a, fc_tensor *b)
{
    FCT_NO_BLOCKS(ctx, name, NULL, a, b);
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if ((unsigned)B->op >= FC_BINARY_COUNT) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_binary: unknown op %d", (int)B->op);
    if (b && a->dtype != b->dtype)
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: operands differ in dtype: %s and %s (cast one first)", name,
                       fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2));
    if (a->dtype == FC_BOOL)
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: bool operands are not numbers (%s)", name, fct_describe(a, d1, sizeof d1));
    B->dt = a->dtype;
    fct_bcast bc;
    fc_tensor *ops[2] = {a, b};
    if (!fct_broadcast(ctx, name, ops, b ? 2 : 1, &bc)) return NULL;
    fc_tensor *y = fct_alloc(ctx, a->dtype, bc.rank, bc.dim, bc.axis);
    if (!y) return NULL;
    int64_t strides[3][FC_MAX_RANK];
    int64_t es = (int64_t)fc_dtype_size(a->dtype);
    for (int i = 0; i < bc.rank; i++) {
        strides[0][i] = y->stride[i] * es;
        strides[1][i] = bc.stride[0][i];
        strides[2][i] = b ? bc.stride[1][i] : 0;
    }
    /* Scalar forms put the tensor in the slot the op needs and the scalar in the other. */
    char *base[3] = {fct_ptr(y), fct_ptr(a), b ? fct_ptr(b) : fct_ptr(a)};
    if (B->scalar_side == 1) { /* s op x: x is the b operand */
        base[2] = fct_ptr(a);
        for (int i = 0; i < bc.rank; i++) { strides[2][i] = strides[1][i]; strides[1][i] = 0; }
    }
    fct_loop L;
    fct_loop_init(&L, bc.rank, bc.dim, 3, base, strides);
    fct_loop_run(ctx, &L, binary_row, B, FCT_PARALLEL_MIN_ELEMWISE);
    fcg_node *n = fcg_record(ctx, y, B->scalar_side == 0 ? FCG_BINARY : B->scalar_side == 1 ? FCG_SCALAR_BINARY
                                                                                            : FCG_BINARY_SCALAR,
                             name, ops, b ? 2 : 1);
    if (n) {
        n->p.i[0] = B->op;
        n->p.d[0] = B->scalar;
    }
    return y;
}

fc_tensor *fc_binary(fc_ctx *ctx, fc_binary_op op, fc_tensor *a, fc_tensor *b)
{
    if (!ctx || !a || !b) return NULL;
    binary_arg B = {op, a->dtype, 0, 0};
    return binary_impl(ctx, binary_name(op), &B, a, b);
}

static double compute_scalar(fc_dtype dt, double s)
{
    switch (dt) {
    case FC_F16: case FC_BF16: case FC_F32: return (double)(float)s;
    case FC_F64: case FC_BOOL: case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: return s;
    FC_CASE_BLOCK_DTYPES: return s;
    }
    return s;
}

fc_tensor *fc_binary_scalar(fc_ctx *ctx, fc_binary_op op, fc_tensor *x, double s)
{
    if (!ctx || !x) return NULL;
    binary_arg B = {op, x->dtype, 2, compute_scalar(x->dtype, s)};
    return binary_impl(ctx, binary_name(op), &B, x, NULL);
}

fc_tensor *fc_scalar_binary(fc_ctx *ctx, fc_binary_op op, double s, fc_tensor *x)
{
    if (!ctx || !x) return NULL;
    binary_arg B = {op, x->dtype, 1, compute_scalar(x->dtype, s)};
    return binary_impl(ctx, binary_name(op), &B, x, NULL);
}

fc_tensor *fc_add(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) { return fc_binary(ctx, FC_ADD, a, b); }
fc_tensor *fc_sub(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) { return fc_binary(ctx, FC_SUB, a, b); }
fc_tensor *fc_mul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) { return fc_binary(ctx, FC_MUL, a, b); }
fc_tensor *fc_div(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) { return fc_binary(ctx, FC_DIV, a, b); }
fc_tensor *fc_maximum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) { return fc_binary(ctx, FC_MAX, a, b); }
fc_tensor *fc_minimum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) { return fc_binary(ctx, FC_MIN, a, b); }
fc_tensor *fc_add_scalar(fc_ctx *ctx, fc_tensor *x, double s) { return fc_binary_scalar(ctx, FC_ADD, x, s); }
fc_tensor *fc_mul_scalar(fc_ctx *ctx, fc_tensor *x, double s) { return fc_binary_scalar(ctx, FC_MUL, x, s); }

/* --- gated activations: same named shape (broadcast by name through a copy) --- */
typedef struct gated_arg { int geglu; fc_dtype dt; } gated_arg;

static void gated_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const gated_arg *g = arg;
    const fck_table *k = fck_kernels();
    size_t es = fc_dtype_size(g->dt);
    _Alignas(64) float xa[CHUNK], xb[CHUNK], ys[CHUNK]; /* f32-sized slots hold any float dtype */
    int contiguous = st[0] == (int64_t)es && st[1] == (int64_t)es && st[2] == (int64_t)es;
    for (int64_t i0 = 0; i0 < n; i0 += contiguous ? n : CHUNK) {
        int64_t m = contiguous ? n : (n - i0 < CHUNK ? n - i0 : CHUNK);
        const void *a = contiguous ? (const void *)p[1] : xa, *b = contiguous ? (const void *)p[2] : xb;
        void *y = contiguous ? (void *)p[0] : ys;
        if (!contiguous) {
            gather(xa, p[1] + i0 * st[1], m, st[1], es);
            gather(xb, p[2] + i0 * st[2], m, st[2], es);
        }
        switch (g->dt) {
        case FC_F32: (g->geglu ? k->f32_geglu : k->f32_swiglu)((size_t)m, a, b, y); break;
        case FC_F16: (g->geglu ? k->f16_geglu : k->f16_swiglu)((size_t)m, a, b, y); break;
        case FC_BF16: (g->geglu ? k->bf16_geglu : k->bf16_swiglu)((size_t)m, a, b, y); break;
        case FC_F64: case FC_BOOL: case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: break;
        FC_CASE_BLOCK_DTYPES: break;
        }
        if (!contiguous) scatter(p[0] + i0 * st[0], st[0], ys, m, es);
    }
}

static fc_tensor *gated(fc_ctx *ctx, const char *name, int geglu, fc_tensor *a, fc_tensor *b)
{
    if (!ctx || !a || !b) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (a->dtype != b->dtype || (a->dtype != FC_F32 && a->dtype != FC_F16 && a->dtype != FC_BF16))
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: operands must both be f32, f16 or bf16: %s and %s", name,
                       fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2));
    fct_bcast bc;
    fc_tensor *ops[2] = {a, b};
    if (!fct_broadcast(ctx, name, ops, 2, &bc)) return NULL;
    fc_tensor *y = fct_alloc(ctx, a->dtype, bc.rank, bc.dim, bc.axis);
    if (!y) return NULL;
    int64_t strides[3][FC_MAX_RANK];
    int64_t es = (int64_t)fc_dtype_size(a->dtype);
    for (int i = 0; i < bc.rank; i++) {
        strides[0][i] = y->stride[i] * es;
        strides[1][i] = bc.stride[0][i];
        strides[2][i] = bc.stride[1][i];
    }
    char *base[3] = {fct_ptr(y), fct_ptr(a), fct_ptr(b)};
    fct_loop L;
    fct_loop_init(&L, bc.rank, bc.dim, 3, base, strides);
    gated_arg g = {geglu, a->dtype};
    fct_loop_run(ctx, &L, gated_row, &g, FCT_PARALLEL_MIN_ELEMWISE);
    fcg_node *n = fcg_record(ctx, y, FCG_GATED, name, ops, 2);
    if (n) n->p.i[0] = geglu;
    return y;
}

fc_tensor *fc_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) { return gated(ctx, "fc_swiglu", 0, a, b); }
fc_tensor *fc_geglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b) { return gated(ctx, "fc_geglu", 1, a, b); }

/* --- y += alpha * x --- */
static void axpy_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    float alpha = *(const float *)arg;
    const fck_table *k = fck_kernels();
    if (st[0] == 4 && st[1] == 4) {
        k->f32_axpy((size_t)n, (const float *)p[1], alpha, (float *)p[0]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float x, y;
        memcpy(&x, p[1] + i * st[1], 4);
        memcpy(&y, p[0] + i * st[0], 4);
        /* The scalar arm's operation order: y + alpha * x, rounded twice
         * (-ffp-contract=off keeps it unfused). */
        y = y + alpha * x;
        memcpy(p[0] + i * st[0], &y, 4);
    }
}

fc_status fc_axpy_(fc_ctx *ctx, fc_tensor *y, float alpha, fc_tensor *x)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!y || !x) return fc_ctx_status(ctx) != FC_OK ? fc_ctx_status(ctx) : FC_ERR_INVALID_ARG;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (y->dtype != FC_F32 || x->dtype != FC_F32) {
        fc_fail(ctx, FC_ERR_DTYPE, "fc_axpy_: f32 operands only: %s and %s", fct_describe(y, d1, sizeof d1),
                fct_describe(x, d2, sizeof d2));
        return FC_ERR_DTYPE;
    }
    for (int i = 0; i < x->rank; i++) {
        int found = -1;
        for (int j = 0; j < y->rank; j++) if (y->axis[j] == x->axis[i]) found = j;
        if ((found < 0 && x->dim[i] != 1) || (found >= 0 && x->dim[i] != 1 && x->dim[i] != y->dim[found])) {
            fc_fail(ctx, FC_ERR_SHAPE, "fc_axpy_: %s does not broadcast to %s (axis \"%s\")",
                    fct_describe(x, d1, sizeof d1), fct_describe(y, d2, sizeof d2), x->axis[i]);
            return FC_ERR_SHAPE;
        }
    }
    int64_t strides[2][FC_MAX_RANK];
    for (int i = 0; i < y->rank; i++) strides[0][i] = y->stride[i] * 4;
    fct_strides_for(x, y->rank, y->axis, strides[1]);
    char *base[2] = {fct_ptr(y), fct_ptr(x)};
    fct_loop L;
    fct_loop_init(&L, y->rank, y->dim, 2, base, strides);
    fct_loop_run(ctx, &L, axpy_row, &alpha, FCT_PARALLEL_MIN_ELEMWISE);
    fc_storage_touch(y->storage);
    return FC_OK;
}
