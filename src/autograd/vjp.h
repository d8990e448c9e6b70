/* SPDX-License-Identifier: MIT */
/* Vector-Jacobian products: one function per op id of the tensor layer's
 * backward records (tensor/grad_record.h), and the helpers they share.
 *
 * A VJP gets the record and the gradient of its output (dtype f32, or f64
 * for f64 outputs; the output's named shape in the output's axis order) and
 * stores in gin[i] a gradient for every operand i with n->needs[i]: the
 * operand's named shape and axis order, dtype fcg_grad_dtype(operand). It
 * runs with recording off, inside a scope the engine opens, so temporaries
 * need no release. Returns 0 after recording an error in ctx. */
#ifndef FC_AUTOGRAD_VJP_H
#define FC_AUTOGRAD_VJP_H

#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "fucina/nn.h"
#include "fucina/loss.h"
#include "fucina/conv.h"
#include "fucina/autograd.h"
#include "tensor/grad_record.h"
#include "tensor/internal.h"

typedef int (*fca_vjp_fn)(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);

/* The VJP of a record (exhaustive over fcg_op). */
int fca_vjp(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);

/* Families (vjp_*.c). */
int fca_vjp_unary(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_binary(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_binary_scalar(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_scalar_binary(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_gated(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_cast(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_where(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_masked_fill(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_clamp(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_reduce(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_cumsum(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_einsum(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_view(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_copy(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
/* vjp_nn.c */
int fca_vjp_softmax(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_log_softmax(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_rmsnorm(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_rmsnorm_residual(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_layernorm(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_rope(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_attention(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
/* vjp_shape.c */
int fca_vjp_concat(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_pad(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_repeat(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_flip(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_get_rows(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_index_select(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_gather(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_scatter_add(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_topk(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
/* vjp_loss.c (losses and convolutions) */
int fca_vjp_cross_entropy(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_mse(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_conv1d(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_conv_transpose1d(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
/* vjp_special.c */
int fca_vjp_dropout(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_custom(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);
int fca_vjp_checkpoint(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin);

/* --- helpers (vjp_util.c) --- */
/* t in dtype dt (t itself when it already is). */
fc_tensor *fca_as(fc_ctx *ctx, fc_tensor *t, fc_dtype dt);
/* t in the gradient dtype of `like`. */
fc_tensor *fca_as_grad(fc_ctx *ctx, fc_tensor *t, const fc_tensor *like);
/* g matched to operand x by name: sum the axes x lacks and the axes where
 * x has size 1; x's axis order and gradient dtype. For every op whose
 * result keeps its operands' axes by name (views, reductions, copies...). */
fc_tensor *fca_sum_to(fc_ctx *ctx, fc_tensor *g, const fc_tensor *x);
/* The same for the result of a broadcasting op (binary, gated, where): when
 * both are positional the forward aligned them from the right by position,
 * so g's trailing axes are renamed to x's first. */
fc_tensor *fca_reduce_to(fc_ctx *ctx, fc_tensor *g, const fc_tensor *x);
/* g broadcast (a view) to x's named shape; g's axes must be among x's. */
fc_tensor *fca_expand_to(fc_ctx *ctx, fc_tensor *g, const fc_tensor *x);
/* Zeros in x's named shape and gradient dtype. */
fc_tensor *fca_zeros_like(fc_ctx *ctx, const fc_tensor *x);
/* A rank-0 constant of dtype dt. */
fc_tensor *fca_const(fc_ctx *ctx, fc_dtype dt, double v);
/* Product of the sizes of x's axes named in axes[0..n). */
int64_t fca_count(const fc_tensor *x, const char *const *axes, int n);
/* Elementwise f(x) by a scalar loop in double (for derivatives with no
 * kernel: erf, sign). Result in x's gradient dtype, x's named shape. */
fc_tensor *fca_map(fc_ctx *ctx, fc_tensor *x, double (*f)(double));
/* The error for an op whose VJP does not exist (yet). */
int fca_not_differentiable(fc_ctx *ctx, fcg_node *n);

#endif
