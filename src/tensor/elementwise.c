/* SPDX-License-Identifier: MIT */
/* Elementwise unary and binary ops over the generated kernels.
 *
 * A row whose operands are all contiguous goes straight to the kernel (vv,
 * or vs when one operand is a broadcast scalar); any other row is gathered
 * into stack scratch in chunks, computed, and scattered. f16/bf16 rows use
 * their own kernels (computed in f32, rounded once). Integer dtypes use
 * plain C loops: wrapping arithmetic (done in unsigned, as two's complement
 * hardware does), integer division truncating toward zero, x / 0 = 0. */
#include <math.h>
#include <string.h>

#include "fucina/ops.h"
#include "dispatch/dispatch.h"
#include "tensor/grad_record.h"
#include "tensor/broadcast.h"

#define CHUNK 256

static void gather(void *dst, const char *src, int64_t n, int64_t st, size_t es)
{
    char *d = dst;
    if (st == 0) {
        for (int64_t i = 0; i < n; i++) memcpy(d + i * (int64_t)es, src, es);
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(d + i * (int64_t)es, src + i * st, es);
}

static void scatter(char *dst, int64_t st, const void *src, int64_t n, size_t es)
{
    const char *s = src;
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * st, s + i * (int64_t)es, es);
}

/* ------------------------------------------------------------------ unary */

const char *fc_unary_name(fc_unary_op op)
{
    switch (op) {
    case FC_NEG: return "neg";
    case FC_ABS: return "abs";
    case FC_SQR: return "sqr";
    case FC_SQRT: return "sqrt";
    case FC_RSQRT: return "rsqrt";
    case FC_RECIP: return "recip";
    case FC_EXP: return "exp";
    case FC_LOG: return "log";
    case FC_SIN: return "sin";
    case FC_COS: return "cos";
    case FC_TANH: return "tanh";
    case FC_SIGMOID: return "sigmoid";
    case FC_SILU: return "silu";
    case FC_GELU: return "gelu";
    case FC_GELU_ERF: return "gelu_erf";
    case FC_RELU: return "relu";
    case FC_SOFTPLUS: return "softplus";
    }
    return "?";
}

typedef void (*u32_fn)(size_t, const float *, float *);
typedef void (*u16_fn)(size_t, const fc_f16 *, fc_f16 *);
typedef void (*ub16_fn)(size_t, const fc_bf16 *, fc_bf16 *);
typedef void (*u64_fn)(size_t, const double *, double *);

#define UNARY_PICK(T, k, op)                                                                                  \
    switch (op) {                                                                                             \
    case FC_NEG: return k->T##_neg;                                                                           \
    case FC_ABS: return k->T##_abs;                                                                           \
    case FC_SQR: return k->T##_sqr;                                                                           \
    case FC_SQRT: return k->T##_sqrt;                                                                         \
    case FC_RSQRT: return k->T##_rsqrt;                                                                       \
    case FC_RECIP: return k->T##_recip;                                                                       \
    case FC_EXP: return k->T##_exp;                                                                           \
    case FC_LOG: return k->T##_log;                                                                           \
    case FC_SIN: return k->T##_sin;                                                                           \
    case FC_COS: return k->T##_cos;                                                                           \
    case FC_TANH: return k->T##_tanh;                                                                         \
    case FC_SIGMOID: return k->T##_sigmoid;                                                                   \
    case FC_SILU: return k->T##_silu;                                                                         \
    case FC_GELU: return k->T##_gelu;                                                                         \
    case FC_GELU_ERF: return k->T##_gelu_erf;                                                                 \
    case FC_RELU: return k->T##_relu;                                                                         \
    case FC_SOFTPLUS: return k->T##_softplus;                                                                 \
    }                                                                                                         \
    return NULL

static u32_fn pick_u32(fc_unary_op op) { const fck_table *k = fck_kernels(); UNARY_PICK(f32, k, op); }
static u16_fn pick_u16(fc_unary_op op) { const fck_table *k = fck_kernels(); UNARY_PICK(f16, k, op); }
static ub16_fn pick_ub16(fc_unary_op op) { const fck_table *k = fck_kernels(); UNARY_PICK(bf16, k, op); }

/* f64 has kernels for the ops that are exact or nearly so; the rest use libm. */
static u64_fn pick_u64(fc_unary_op op)
{
    const fck_table *k = fck_kernels();
    switch (op) {
    case FC_NEG: return k->f64_neg;
    case FC_ABS: return k->f64_abs;
    case FC_SQR: return k->f64_sqr;
    case FC_SQRT: return k->f64_sqrt;
    case FC_RSQRT: return k->f64_rsqrt;
    case FC_RECIP: return k->f64_recip;
    case FC_RELU: return k->f64_relu;
    case FC_EXP: case FC_LOG: case FC_SIN: case FC_COS: case FC_TANH: case FC_SIGMOID: case FC_SILU:
    case FC_GELU: case FC_GELU_ERF: case FC_SOFTPLUS: return NULL;
    }
    return NULL;
}

static double unary_f64_libm(fc_unary_op op, double x)
{
    switch (op) {
    case FC_EXP: return exp(x);
    case FC_LOG: return log(x);
    case FC_SIN: return sin(x);
    case FC_COS: return cos(x);
    case FC_TANH: return tanh(x);
    case FC_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case FC_SILU: return x / (1.0 + exp(-x));
    case FC_GELU: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case FC_GELU_ERF: return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    case FC_SOFTPLUS: return x > 20.0 ? x : log1p(exp(x));
    case FC_NEG: return -x;
    case FC_ABS: return fabs(x);
    case FC_SQR: return x * x;
    case FC_SQRT: return sqrt(x);
    case FC_RSQRT: return 1.0 / sqrt(x);
    case FC_RECIP: return 1.0 / x;
    case FC_RELU: return x > 0 ? x : 0.0;
    }
    return x;
}

typedef struct unary_arg { fc_unary_op op; fc_dtype dt; } unary_arg;

/* Integer unary ops (neg, abs, sqr, relu), wrapping. */
#define INT_UNARY(T, UT)                                                                                      \
    static void unary_##T(fc_unary_op op, int64_t n, const char *x, int64_t sx, char *y, int64_t sy)          \
    {                                                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                                     \
            T v;                                                                                              \
            memcpy(&v, x + i * sx, sizeof v);                                                                 \
            T r = v;                                                                                          \
            switch (op) {                                                                                     \
            case FC_NEG: r = (T)(UT)(0u - (UT)v); break;                                                      \
            case FC_ABS: r = v < 0 ? (T)(UT)(0u - (UT)v) : v; break;                                          \
            case FC_SQR: r = (T)(UT)((UT)v * (UT)v); break;                                                   \
            case FC_RELU: r = v > 0 ? v : 0; break;                                                           \
            case FC_SQRT: case FC_RSQRT: case FC_RECIP: case FC_EXP: case FC_LOG: case FC_SIN: case FC_COS:   \
            case FC_TANH: case FC_SIGMOID: case FC_SILU: case FC_GELU: case FC_GELU_ERF: case FC_SOFTPLUS:    \
                break;                                                                                        \
            }                                                                                                 \
            memcpy(y + i * sy, &r, sizeof r);                                                                 \
        }                                                                                                     \
    }
INT_UNARY(int8_t, uint8_t)
INT_UNARY(int16_t, uint16_t)
INT_UNARY(int32_t, uint32_t)
INT_UNARY(int64_t, uint64_t)

static void unary_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    const unary_arg *u = arg;
    size_t es = fc_dtype_size(u->dt);
    char *y = p[0];
    const char *x = p[1];
    int contiguous = st[0] == (int64_t)es && st[1] == (int64_t)es;
    _Alignas(64) double xs[CHUNK], ys[CHUNK]; /* 8 bytes per element covers every dtype */
    switch (u->dt) {
    case FC_F32: case FC_F16: case FC_BF16: case FC_F64: {
        u64_fn f64 = u->dt == FC_F64 ? pick_u64(u->op) : NULL;
        if (u->dt == FC_F64 && !f64) {
            for (int64_t i = 0; i < n; i++) {
                double v;
                memcpy(&v, x + i * st[1], 8);
                v = unary_f64_libm(u->op, v);
                memcpy(y + i * st[0], &v, 8);
            }
            return;
        }
        for (int64_t i0 = 0; i0 < n; i0 += contiguous ? n : CHUNK) {
            int64_t m = contiguous ? n : (n - i0 < CHUNK ? n - i0 : CHUNK);
            const void *src = contiguous ? (const void *)x : (const void *)xs;
            void *dst = contiguous ? (void *)y : (void *)ys;
            if (!contiguous) gather(xs, x + i0 * st[1], m, st[1], es);
            if (u->dt == FC_F32) pick_u32(u->op)((size_t)m, src, dst);
            else if (u->dt == FC_F16) pick_u16(u->op)((size_t)m, src, dst);
            else if (u->dt == FC_BF16) pick_ub16(u->op)((size_t)m, src, dst);
            else f64((size_t)m, src, dst);
            if (!contiguous) scatter(y + i0 * st[0], st[0], ys, m, es);
        }
        return;
    }
    case FC_I8: unary_int8_t(u->op, n, x, st[1], y, st[0]); return;
    case FC_I16: unary_int16_t(u->op, n, x, st[1], y, st[0]); return;
    case FC_I32: unary_int32_t(u->op, n, x, st[1], y, st[0]); return;
    case FC_I64: unary_int64_t(u->op, n, x, st[1], y, st[0]); return;
    case FC_BOOL: case FC_U8: return;
    FC_CASE_BLOCK_DTYPES: return; /* refused by unary_supported */
    }
}

static int unary_supported(fc_unary_op op, fc_dtype dt)
{
    switch (dt) {
    case FC_F32: case FC_F16: case FC_BF16: case FC_F64: return 1;
    case FC_I8: case FC_I16: case FC_I32: case FC_I64:
        return op == FC_NEG || op == FC_ABS || op == FC_SQR || op == FC_RELU;
    case FC_BOOL: case FC_U8: return 0;
    FC_CASE_BLOCK_DTYPES: return 0;
    }
    return 0;
}

fc_tensor *fc_unary(fc_ctx *ctx, fc_unary_op op, fc_tensor *x)
{
    if (!ctx || !x) return NULL;
    if ((unsigned)op >= FC_UNARY_COUNT) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_unary: unknown op %d", (int)op);
    if (!unary_supported(op, x->dtype)) {
        char d[FCT_DESC_MAX];
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_%s: dtype %s is not supported (%s)", fc_unary_name(op),
                       fc_dtype_name(x->dtype), fct_describe(x, d, sizeof d));
    }
    fc_tensor *y = fct_alloc_like(ctx, x->dtype, x);
    if (!y) return NULL;
    fct_loop L;
    fct_loop_unary(&L, y, x);
    unary_arg a = {op, x->dtype};
    fct_loop_run(ctx, &L, unary_row, &a, FCT_PARALLEL_MIN_ELEMWISE);
    fcg_node *n = fcg_record(ctx, y, FCG_UNARY, "fc_unary", &x, 1);
    if (n) {
        n->p.i[0] = op;
        /* Ops whose derivative is cheapest from the output keep it. */
        if (op == FC_EXP || op == FC_SQRT || op == FC_RSQRT || op == FC_RECIP || op == FC_TANH || op == FC_SIGMOID)
            fcg_save_output(ctx, n, 0, y);
    }
    return y;
}

#define UNARY_WRAPPER(name, OP) \
    fc_tensor *fc_##name(fc_ctx *ctx, fc_tensor *x) { return fc_unary(ctx, OP, x); }
UNARY_WRAPPER(neg, FC_NEG)
UNARY_WRAPPER(abs, FC_ABS)
UNARY_WRAPPER(sqr, FC_SQR)
UNARY_WRAPPER(sqrt, FC_SQRT)
UNARY_WRAPPER(rsqrt, FC_RSQRT)
UNARY_WRAPPER(recip, FC_RECIP)
UNARY_WRAPPER(exp, FC_EXP)
UNARY_WRAPPER(log, FC_LOG)
UNARY_WRAPPER(sin, FC_SIN)
UNARY_WRAPPER(cos, FC_COS)
UNARY_WRAPPER(tanh, FC_TANH)
UNARY_WRAPPER(sigmoid, FC_SIGMOID)
UNARY_WRAPPER(silu, FC_SILU)
UNARY_WRAPPER(gelu, FC_GELU)
UNARY_WRAPPER(gelu_erf, FC_GELU_ERF)
UNARY_WRAPPER(relu, FC_RELU)
UNARY_WRAPPER(softplus, FC_SOFTPLUS)

/* --- relu's gradient: g where x > 0 (PyTorch's threshold_backward) --- */
static void relu_grad_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)arg;
    (void)worker;
    if (st[0] == 4 && st[1] == 4 && st[2] == 4) {
        fck_kernels()->f32_relu_bwd((size_t)n, (const float *)p[1], (const float *)p[2], (float *)p[0]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float x, g, y;
        memcpy(&x, p[1] + i * st[1], 4);
        memcpy(&g, p[2] + i * st[2], 4);
        y = x <= 0 ? 0.0f : g;
        memcpy(p[0] + i * st[0], &y, 4);
    }
}

fc_tensor *fct_relu_grad(fc_ctx *ctx, fc_tensor *x, fc_tensor *g)
{
    if (!ctx || !x || !g || x->dtype != FC_F32 || g->dtype != FC_F32) return NULL;
    fc_tensor *y = fct_alloc_like(ctx, FC_F32, x);
    if (!y) return NULL;
    int64_t strides[3][FC_MAX_RANK];
    for (int i = 0; i < y->rank; i++) {
        strides[0][i] = y->stride[i] * 4;
        strides[1][i] = x->stride[i] * 4;
    }
    fct_strides_for(g, y->rank, y->axis, strides[2]);
    char *base[3] = {fct_ptr(y), fct_ptr(x), fct_ptr(g)};
    fct_loop L;
    fct_loop_init(&L, y->rank, y->dim, 3, base, strides);
    fct_loop_run(ctx, &L, relu_grad_row, NULL, FCT_PARALLEL_MIN_ELEMWISE);
    return y;
}

/* --- activation derivatives for the VJPs: gelu'(x), silu'(x) in f32 --- */
typedef void (*f32_map_fn)(size_t, const float *, float *);

static void act_grad_row(void *arg, int64_t n, char *const *p, const int64_t *st, int worker)
{
    (void)worker;
    f32_map_fn f = *(const f32_map_fn *)arg;
    if (st[0] == 4 && st[1] == 4) {
        f((size_t)n, (const float *)p[1], (float *)p[0]);
        return;
    }
    _Alignas(64) float xs[CHUNK], ys[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        gather(xs, p[1] + i0 * st[1], m, st[1], 4);
        f((size_t)m, xs, ys);
        scatter(p[0] + i0 * st[0], st[0], ys, m, 4);
    }
}

fc_tensor *fct_act_grad(fc_ctx *ctx, int op, fc_tensor *x)
{
    const fck_table *k = fck_kernels();
    f32_map_fn f = op == FC_GELU ? k->f32_gelu_grad : op == FC_SILU ? k->f32_silu_grad : NULL;
    if (!ctx || !x || !f || x->dtype != FC_F32) return NULL;
    fc_tensor *y = fct_alloc_like(ctx, FC_F32, x);
    if (!y) return NULL;
    fct_loop L;
    fct_loop_unary(&L, y, x);
    fct_loop_run(ctx, &L, act_grad_row, &f, FCT_PARALLEL_MIN_ELEMWISE);
    return y;
}
