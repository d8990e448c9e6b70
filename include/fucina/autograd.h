/* SPDX-License-Identifier: MIT */
/* Fucina: reverse-mode automatic differentiation.
 *
 * The graph lives in the values. A tensor marked with fc_requires_grad is a
 * variable (a leaf). An op with at least one operand that requires a
 * gradient attaches a backward record to its result: which op, its operands
 * (kept alive by the record) and what the op saved. No tape, no graph
 * object: fc_backward walks those records from the output, counts how many
 * consumers each record has, and runs each record's vector-Jacobian product
 * when its counter drains, on the context's worker pool (independent branches
 * concurrently). Gradients are accumulated in a fixed order, so results do
 * not depend on the thread count, bit for bit.
 *
 * Gradient dtype: f64 for f64 tensors, f32 for every other float dtype (an
 * f16 or bf16 variable gets an f32 gradient). Integer and bool tensors never
 * require gradients.
 *
 * A graph is consumed by its backward pass: the records free what they saved
 * as they run, and a second fc_backward through them is an FC_ERR_STATE
 * error. So is a backward pass after a tensor a record saved was modified in
 * place (fc_copy_into, fc_fill, fc_axpy_, fc_set_slice on it or on any view
 * of its storage). Those checks run before anything is computed, so a pass
 * that fails them leaves the graph as it was.
 *
 * Graphs and exec scopes: results made inside a scope are owned by it, and
 * each result keeps the part of the graph behind it alive; ending the scope
 * frees the step's graph (iteratively: a 50,000-op chain frees without deep
 * recursion). */
#ifndef FUCINA_AUTOGRAD_H
#define FUCINA_AUTOGRAD_H

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Make t a variable (on = 1) or a constant again (on = 0). t must be a float
 * tensor that no op produced (a leaf). */
FC_API fc_status fc_requires_grad(fc_ctx *ctx, fc_tensor *t, int on);
/* 1 when t is a variable or the result of a recorded op. */
FC_API int fc_tensor_requires_grad(const fc_tensor *t);
/* 1 when t is a variable (requires grad, made by no op). */
FC_API int fc_tensor_is_leaf(const fc_tensor *t);

/* The gradient accumulated in variable t so far, or NULL when none was
 * accumulated yet (or t is no variable). A new tensor, adopted by the open
 * scope like any op's result, viewing the gradient's memory as of this
 * call; same named shape as t. Later passes do not add into that memory:
 * a pass, fc_set_grad and fc_zero_grad replace t's gradient (by a new
 * tensor, or none), so the returned one keeps this call's values (call
 * fc_grad again after a pass). Writing through it changes t's gradient
 * until that is replaced. */
FC_API fc_tensor *fc_grad(fc_ctx *ctx, fc_tensor *t);
/* Forget t's accumulated gradient. */
FC_API void fc_zero_grad(fc_ctx *ctx, fc_tensor *t);
/* Replace t's gradient by g (cast to the gradient dtype; same named shape).
 * For gradient clipping and tests. */
FC_API fc_status fc_set_grad(fc_ctx *ctx, fc_tensor *t, fc_tensor *g);

/* Back-propagate from `out`. A one-element output is seeded with 1; any
 * other output needs fc_backward_with. */
FC_API fc_status fc_backward(fc_ctx *ctx, fc_tensor *out);
/* Back-propagate `seed` (same named shape as out) from out. */
FC_API fc_status fc_backward_with(fc_ctx *ctx, fc_tensor *out, fc_tensor *seed);

/* A view of t that records nothing and requires no gradient. */
FC_API fc_tensor *fc_detach(fc_ctx *ctx, fc_tensor *t);

/* No-grad regions, per thread and nestable: ops inside record nothing. */
FC_API void fc_no_grad_begin(void);
FC_API void fc_no_grad_end(void);
/* 1 when ops on this thread record (no no-grad region is open). */
FC_API int fc_grad_enabled(void);

/* --- custom differentiable ops ---
 * `forward` computes the outputs from the inputs (with recording off);
 * `backward` gets the output gradient and returns one gradient per input
 * (NULL for an input that needs none), shaped like that input. Both get the
 * user pointer. `save` tensors the forward wants in backward are passed back
 * in the same order. */
typedef struct fc_custom_op {
    const char *name;
    fc_tensor *(*forward)(fc_ctx *ctx, void *user, fc_tensor *const *in, int n_in);
    /* Fill grad_in[0..n_in); return 0 after recording an error. */
    int (*backward)(fc_ctx *ctx, void *user, fc_tensor *const *in, int n_in, fc_tensor *out,
                    fc_tensor *grad_out, fc_tensor **grad_in);
    void *user;
} fc_custom_op;
FC_API fc_tensor *fc_custom(fc_ctx *ctx, const fc_custom_op *op, fc_tensor *const *in, int n_in);

/* --- activation checkpointing ---
 * Runs `block(ctx, user, in, n_in)` with recording off and keeps only the
 * inputs; backward runs the block again with recording on and
 * back-propagates through the recomputed graph. Gradients are bitwise the
 * same as without checkpointing. The block must be deterministic. */
typedef fc_tensor *(*fc_block_fn)(fc_ctx *ctx, void *user, fc_tensor *const *in, int n_in);
FC_API fc_tensor *fc_checkpoint(fc_ctx *ctx, fc_block_fn block, void *user, fc_tensor *const *in, int n_in);

/* --- gradient checking ---
 * Compares the gradients fc_backward gives for f(inputs) (a one-element
 * result) with central finite differences: (f(x + eps) - f(x - eps)) / 2eps
 * per element, evaluated in f64 when the inputs are f64. An element passes
 * when |analytic - numeric| <= atol + rtol * |numeric|. Inputs must be
 * variables; their gradients are cleared before and after. Returns FC_OK
 * when every element passes; otherwise an FC_ERR_STATE error whose message
 * names the input, the element and both values. */
typedef fc_tensor *(*fc_loss_fn)(fc_ctx *ctx, void *user, fc_tensor *const *in, int n_in);
typedef struct fc_gradcheck_opts {
    double eps;   /* 0: 1e-6 for f64 inputs, 1e-3 otherwise */
    double atol;  /* 0: 1e-5 for f64, 1e-3 otherwise */
    double rtol;  /* 0: 1e-4 for f64, 1e-2 otherwise */
} fc_gradcheck_opts;
FC_API fc_status fc_gradcheck(fc_ctx *ctx, fc_loss_fn f, void *user, fc_tensor *const *in, int n_in,
                              const fc_gradcheck_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
