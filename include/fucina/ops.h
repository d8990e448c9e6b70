/* SPDX-License-Identifier: MIT */
/* Fucina: elementwise ops, reductions, contractions.
 *
 * Broadcasting is by axis name: the result has a's axes in a's order, then
 * b's axes that a lacks, in b's order. An axis missing from one operand or
 * of size 1 in it is broadcast; two different sizes > 1 under one name are
 * an error naming the op, the axis and both shapes. When both operands have
 * only positional names (_0.._7), they align from the right as in NumPy.
 *
 * Numerics (docs/API.md): f16/bf16 are computed in f32 and rounded once;
 * reductions of f16/bf16 return f32; matmul accumulates in f32; operands of
 * a binary op must have the same dtype (no implicit promotion). */
#ifndef FUCINA_OPS_H
#define FUCINA_OPS_H

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- unary (float dtypes; neg/abs/sqr/relu also on signed integers) --- */
typedef enum fc_unary_op {
    FC_NEG = 0, FC_ABS, FC_SQR, FC_SQRT, FC_RSQRT, FC_RECIP, FC_EXP, FC_LOG, FC_SIN, FC_COS,
    FC_TANH, FC_SIGMOID, FC_SILU, FC_GELU, FC_GELU_ERF, FC_RELU, FC_SOFTPLUS,
} fc_unary_op;
#define FC_UNARY_COUNT 17
FC_API fc_tensor *fc_unary(fc_ctx *ctx, fc_unary_op op, fc_tensor *x);
FC_API const char *fc_unary_name(fc_unary_op op);
FC_API fc_tensor *fc_neg(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_abs(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_sqr(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_sqrt(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_rsqrt(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_recip(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_exp(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_log(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_sin(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_cos(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_tanh(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_sigmoid(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_silu(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_gelu(fc_ctx *ctx, fc_tensor *x);      /* tanh approximation */
FC_API fc_tensor *fc_gelu_erf(fc_ctx *ctx, fc_tensor *x);  /* exact (erf) form */
FC_API fc_tensor *fc_relu(fc_ctx *ctx, fc_tensor *x);
FC_API fc_tensor *fc_softplus(fc_ctx *ctx, fc_tensor *x);

/* --- binary (every numeric dtype; integer division truncates, /0 -> 0) --- */
typedef enum fc_binary_op { FC_ADD = 0, FC_SUB, FC_MUL, FC_DIV, FC_MAX, FC_MIN } fc_binary_op;
#define FC_BINARY_COUNT 6
FC_API fc_tensor *fc_binary(fc_ctx *ctx, fc_binary_op op, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_add(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_sub(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_mul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_div(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_maximum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_minimum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* x op s, with s converted to x's dtype's compute type (f32 for f16/bf16). */
FC_API fc_tensor *fc_binary_scalar(fc_ctx *ctx, fc_binary_op op, fc_tensor *x, double s);
FC_API fc_tensor *fc_add_scalar(fc_ctx *ctx, fc_tensor *x, double s);
FC_API fc_tensor *fc_mul_scalar(fc_ctx *ctx, fc_tensor *x, double s);
/* s op x (for the non-commutative ops). */
FC_API fc_tensor *fc_scalar_binary(fc_ctx *ctx, fc_binary_op op, double s, fc_tensor *x);
/* Gated activations of two same-shape operands: silu(a)*b and gelu(a)*b. */
FC_API fc_tensor *fc_swiglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_geglu(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* In place: y += alpha * x (x broadcasts to y by name). */
FC_API fc_status fc_axpy_(fc_ctx *ctx, fc_tensor *y, float alpha, fc_tensor *x);

/* --- comparisons, selection, clamp, cast --- */
typedef enum fc_compare_op { FC_EQ = 0, FC_NE, FC_LT, FC_LE, FC_GT, FC_GE } fc_compare_op;
/* A bool tensor; NaN compares unequal to everything (NE is true). */
FC_API fc_tensor *fc_compare(fc_ctx *ctx, fc_compare_op op, fc_tensor *a, fc_tensor *b);
FC_API fc_tensor *fc_compare_scalar(fc_ctx *ctx, fc_compare_op op, fc_tensor *a, double s);
/* cond ? a : b, broadcasting all three by name; cond is bool. */
FC_API fc_tensor *fc_where(fc_ctx *ctx, fc_tensor *cond, fc_tensor *a, fc_tensor *b);
/* x with `value` where mask (bool, broadcast to x) is true. */
FC_API fc_tensor *fc_masked_fill(fc_ctx *ctx, fc_tensor *x, fc_tensor *mask, double value);
/* min(max(x, lo), hi); NaN stays NaN. */
FC_API fc_tensor *fc_clamp(fc_ctx *ctx, fc_tensor *x, double lo, double hi);
/* Convert by the casting rules in dtype.h. */
FC_API fc_tensor *fc_cast(fc_ctx *ctx, fc_tensor *x, fc_dtype to);

/* --- reductions along named axes (the axes disappear; none = all) ---
 * Float inputs; f16/bf16 reduce into f32 and return f32. Integer and bool
 * inputs take sum (i64, wrapping), max/min (same dtype) and argmax/argmin.
 * Sums are computed
 * in fixed-size blocks combined pairwise, in an order that does not depend
 * on the thread count. */
FC_API fc_tensor *fc_sum(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n);
FC_API fc_tensor *fc_mean(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n);
FC_API fc_tensor *fc_max(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n);
FC_API fc_tensor *fc_min(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n);
/* Variance with `correction` (0: population, 1: sample/Bessel). */
FC_API fc_tensor *fc_var(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n, int correction);
/* Euclidean norm sqrt(sum x^2). */
FC_API fc_tensor *fc_norm(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n);
FC_API fc_tensor *fc_logsumexp(fc_ctx *ctx, fc_tensor *x, const char *const *axes, int n);
/* Index of the maximum along one axis (first on ties; NaN wins), as i64. */
FC_API fc_tensor *fc_argmax(fc_ctx *ctx, fc_tensor *x, const char *axis);
FC_API fc_tensor *fc_argmin(fc_ctx *ctx, fc_tensor *x, const char *axis);
/* Inclusive prefix sum along one axis (same shape; f16/bf16 accumulate in f32). */
FC_API fc_tensor *fc_cumsum(fc_ctx *ctx, fc_tensor *x, const char *axis);

/* --- contractions (f32; b may be f16 or bf16 with f32 accumulation) --- */
/* Contract the axis named `axis` of a and b; other shared axes are batch
 * axes; the result has a's remaining axes, then b's. */
FC_API fc_tensor *fc_dot(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const char *axis);
/* The output axis list is the whole equation: an axis in both operands and
 * in the output is a batch axis; in both and not in the output, contracted;
 * in one operand only and not in the output, summed first. */
FC_API fc_tensor *fc_einsum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const char *const *out, int n);
/* Positional matmul: a[..., m, k] x b[..., k, n] -> [..., m, n], contracting
 * a's last axis with b's second-to-last (b's only axis when b is rank 1). The
 * result's last axis takes b's last axis name; batch axes match by name. */
FC_API fc_tensor *fc_matmul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b);
/* x · wᵀ for a weight w[out, in] (the layout of every LLM weight): contracts
 * x's axis named like w's second axis; the result's axis gets w's first name. */
FC_API fc_tensor *fc_linear(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias);

#ifdef __cplusplus
}
#endif
#endif
