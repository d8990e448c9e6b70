/* SPDX-License-Identifier: MIT */
/* Fucina: optimizers, gradient clipping and learning-rate schedules.
 *
 * An fc_optim updates a set of variables (fc_requires_grad leaves) in place
 * from their accumulated gradients, with PyTorch 1.13's order of operations
 * (torch.optim.SGD, Adam, AdamW; Muon as in the reference implementation):
 *
 *     fc_optim *opt = fc_optim_new(ctx, FC_OPTIM_ADAMW, &(fc_optim_options){.lr = 3e-4});
 *     fc_optim_add_group(opt, FC_PARAMS(w1, w2), FC_NAMES("w1", "w2"), NULL);
 *     fc_optim_add_group(opt, FC_PARAMS(b1), FC_NAMES("b1"),
 *                        &(fc_optim_group){.weight_decay = FC_OPTIM_ZERO});
 *     for (int64_t step = 0; step < n; step++) {
 *         ... forward, fc_backward ...
 *         fc_optim_clip_grad_norm(opt, 1.0);
 *         fc_optim_set_lr(opt, -1, fc_lr_at(&sched, step));
 *         fc_optim_step(opt);
 *         fc_optim_zero_grad(opt);
 *     }
 *     fc_optim_free(opt);
 *
 * Options structs follow nn.h: designated initializers, NULL means every
 * default, a field left zero takes the default documented next to it. Where
 * zero is a meaningful value but not the default (beta1 = 0, AdamW without
 * weight decay, a group with lr 0), write FC_OPTIM_ZERO: it is -0.0, which
 * compares equal to 0 but is told apart by its sign bit.
 *
 * Parameters: f32 variables are updated in place. f16 and bf16 variables
 * (their gradients are f32) are updated through an f32 master copy made at
 * their first step; the parameter then holds the master rounded once. f64
 * parameters are an FC_ERR_DTYPE error.
 *
 * Numerics: every element is updated by one thread in a fixed order (Muon's
 * products go through fc_einsum, which is thread-count independent), so
 * results do not depend on the thread count, bit for bit. Each arithmetic
 * step rounds to f32 as PyTorch's does; hyper-parameters are combined in
 * double (1 - beta1^t, lr / bias_correction) and rounded to f32 where
 * PyTorch passes them to a kernel.
 *
 * Errors name the function, the argument and the reason; the optimizer's
 * context keeps them (fc_ctx_error). An fc_optim belongs to one context and
 * must be freed before it. */
#ifndef FUCINA_OPTIM_H
#define FUCINA_OPTIM_H

#include <stdint.h>

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An explicit zero for an option whose default is not zero. */
#define FC_OPTIM_ZERO (-0.0)

/* FC_PARAMS(w, b) and FC_NAMES("w", "b") expand to an array and its count;
 * fc_optim_add_group takes the count once (from FC_NAMES). */
#define FC_PARAMS(...) ((fc_tensor *const[]){__VA_ARGS__})
#define FC_NAMES(...) ((const char *const[]){__VA_ARGS__}), \
    ((int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

typedef enum fc_optim_kind {
    FC_OPTIM_SGD = 0,
    FC_OPTIM_ADAM,   /* L2 weight decay added to the gradient */
    FC_OPTIM_ADAMW,  /* decoupled weight decay: p *= 1 - lr * wd first */
    FC_OPTIM_MUON,   /* 2-D parameters orthogonalised; the others by AdamW */
} fc_optim_kind;
#define FC_OPTIM_KIND_COUNT 4
/* "sgd", "adam", "adamw", "muon"; "?" for an invalid value. */
FC_API const char *fc_optim_kind_name(fc_optim_kind kind);

typedef struct fc_optim_options {
    /* Learning rate. 0: 1e-3 (Adam, AdamW), 0.02 (Muon); SGD needs one
     * (as torch.optim.SGD). */
    double lr;
    /* 0: none, except AdamW: 1e-2 (PyTorch's default). */
    double weight_decay;
    /* SGD: momentum (0: none) and dampening. Muon: the momentum of its
     * buffer, in [0, 1) (0: 0.95). */
    double momentum;
    double dampening;
    /* 1 on, -1 off, 0 the default: off for SGD (which then needs momentum
     * > 0 and no dampening), on for Muon. */
    int nesterov;
    /* Adam, AdamW, and the AdamW that Muon runs on its non-2-D parameters:
     * betas in [0, 1) (0: 0.9 and 0.999; Muon 0.9 and 0.95) and eps (0: 1e-8). */
    double betas[2];
    double eps;
    /* Muon: Newton-Schulz iterations (0: 5). */
    int ns_steps;
} fc_optim_options;

/* Per-group overrides: 0 keeps the optimizer's value. */
typedef struct fc_optim_group {
    double lr;
    double weight_decay;
    /* Muon: 1 updates this group's 2-D parameters by its AdamW too (the
     * embeddings and the output head, as nanochat and the reference
     * implementation keep them); 0 orthogonalises every 2-D parameter. */
    int adamw;
} fc_optim_group;

typedef struct fc_optim fc_optim;

/* A new optimizer with no parameters; NULL after recording an error (bad
 * kind or hyper-parameter). `opts` may be NULL (SGD then fails: no lr). */
FC_API fc_optim *fc_optim_new(fc_ctx *ctx, fc_optim_kind kind, const fc_optim_options *opts);
/* Releases the parameters and the state. NULL is a no-op. */
FC_API void fc_optim_free(fc_optim *opt);

/* Add a group of n parameters with their names (unique within the
 * optimizer; 1..127 bytes; they name the state entries). Each parameter
 * must be a variable (a leaf that requires grad) of dtype f32, f16 or bf16,
 * in no other group. The optimizer keeps a reference to each. `g` may be
 * NULL. Returns the group's index, or -1 after recording an error (nothing
 * is added then). */
FC_API int fc_optim_add_group(fc_optim *opt, fc_tensor *const *params, const char *const *names, int n,
                              const fc_optim_group *g);

FC_API fc_optim_kind fc_optim_get_kind(const fc_optim *opt);
FC_API int fc_optim_group_count(const fc_optim *opt);
FC_API int fc_optim_param_count(const fc_optim *opt);
/* Parameter i in the order added (a borrowed pointer; NULL when out of
 * range) and, when name is not NULL, its name. */
FC_API fc_tensor *fc_optim_param(const fc_optim *opt, int i, const char **name);
/* The number of fc_optim_step calls that succeeded (restored by
 * fc_optim_load_state). */
FC_API int64_t fc_optim_steps(const fc_optim *opt);

/* A group's lr (NaN when out of range); set it, or every group's with
 * group = -1. lr must be finite and >= 0. */
FC_API double fc_optim_lr(const fc_optim *opt, int group);
FC_API fc_status fc_optim_set_lr(fc_optim *opt, int group, double lr);

/* One update of every parameter whose gradient (fc_grad) is not NULL, in the
 * order added, with recording off. A parameter without a gradient is
 * skipped, and its state (step count, moments) does not advance.
 *
 * SGD:   d = g + wd p;  with momentum: buf = d at the first step, else
 *        buf = momentum buf + (1 - dampening) d;  d = nesterov ? d +
 *        momentum buf : buf;  p = p - lr d.
 * Adam:  g += wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
 *        p = p - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * AdamW: p *= 1 - lr wd, then Adam without the L2 term.
 * Muon (2-D parameters, rows x cols = the first and second axis):
 *        buf = lerp(buf, g, 1 - momentum) (buf starts at 0);
 *        u = nesterov ? lerp(g, buf, momentum) : buf;
 *        X = u / (|u|_F + 1e-7), on the transpose when rows > cols;
 *        ns_steps times: A = X X^T, B = b A + (c A) A, X = a X + B X with
 *        (a, b, c) = (3.4445, -4.7750, 2.0315);
 *        p *= 1 - lr wd;  p -= lr sqrt(max(1, rows / cols)) X.
 *        Other ranks: AdamW with the group's lr and weight decay and the
 *        options' betas and eps (give them their own group for their own lr).
 * A failure part-way (out of memory) leaves earlier parameters updated. */
FC_API fc_status fc_optim_step(fc_optim *opt);
/* Forget every parameter's gradient (fc_zero_grad). */
FC_API void fc_optim_zero_grad(fc_optim *opt);

/* --- state, for checkpoints ---
 * The state is a list of named tensors, in a fixed order:
 *   "step"                  i64 scalar: fc_optim_steps
 *   "group.<g>.lr"          f64 scalar: group g's lr
 * and, for each parameter <p> that has taken a step:
 *   "<p>.momentum_buffer"   SGD with momentum, Muon (2-D)     f32, p's shape
 *   "<p>.step"              Adam, AdamW, Muon's AdamW          i64 scalar
 *   "<p>.exp_avg"           "                                  f32, p's shape
 *   "<p>.exp_avg_sq"        "                                  f32, p's shape
 *   "<p>.master"            f16 and bf16 parameters            f32, p's shape
 * The f32 entries are the live tensors (a step changes them in place):
 * clone one to keep a snapshot; the scalars are made on each call. The list
 * grows when a parameter takes its first step. An optimizer that loads the
 * state another one exported (and has the same parameter values) then
 * steps bit for bit as the other does. */
FC_API int fc_optim_state_count(const fc_optim *opt);
/* Entry i: a new reference to its tensor (owned like any result: by the
 * innermost open scope, else by the caller), and its name in *name (valid
 * until the next fc_optim_state_get or fc_optim_free). NULL after recording
 * an error when i is out of range. */
FC_API fc_tensor *fc_optim_state_get(fc_optim *opt, int i, const char **name);
/* Replace the whole state by n named tensors (values are copied). Every
 * name must be an entry of this optimizer (same kind, parameter names and
 * dtypes), once; "step" and each group's lr are required, and a parameter's
 * entries are all present (it has taken a step) or all absent (it has not).
 * Tensors must have the entry's dtype (f64 is accepted for the i64 steps
 * when it holds a whole number) and named shape (axis order may differ).
 * Any violation is an error naming the entry, and nothing is changed. */
FC_API fc_status fc_optim_load_state(fc_optim *opt, const char *const *names, fc_tensor *const *tensors, int n);

/* --- gradient clipping ---
 * By global norm (torch.nn.utils.clip_grad_norm_): total = sqrt(sum over
 * the parameters of |g|^2), each |g| summed in double in element order and
 * rounded to the gradient's dtype; coef = max_norm / (total + 1e-6) (in f32
 * when every gradient is f32, as PyTorch); when coef < 1 every gradient is
 * multiplied by it, in place. Parameters without a gradient are skipped.
 * Returns the total norm (0 when no parameter has a gradient; NaN or inf
 * for non-finite gradients, which are then left as they are unless inf
 * makes coef 0), or -1 after recording an error (a NULL parameter,
 * max_norm negative or not finite). */
FC_API double fc_clip_grad_norm(fc_ctx *ctx, fc_tensor *const *params, int n, double max_norm);
/* Clamp every gradient to [-clip, clip] in place (clip_grad_value_); NaN
 * stays NaN. clip must be finite and >= 0. */
FC_API fc_status fc_clip_grad_value(fc_ctx *ctx, fc_tensor *const *params, int n, double clip);
/* The same over an optimizer's parameters, in the order added. */
FC_API double fc_optim_clip_grad_norm(fc_optim *opt, double max_norm);
FC_API fc_status fc_optim_clip_grad_value(fc_optim *opt, double clip);

/* --- learning-rate schedules ---
 * fc_lr_at(s, step) is the lr for optimizer step `step` (0 for the first),
 * i.e. torch's lr after `step` scheduler.step() calls:
 *   CONSTANT       lr
 *   WARMUP         lr (start + (1 - start) step / warmup_steps) while step <
 *                  warmup_steps, then lr (LinearLR with start_factor = start;
 *                  start 0 ramps from 0, as LambdaLR(step / warmup))
 *   COSINE         min_lr + (lr - min_lr) (1 + cos(pi t / T)) / 2 with
 *                  t = min(step, T), T = total_steps (CosineAnnealingLR,
 *                  eta_min = min_lr; it stays at min_lr after T)
 *   STEP           lr gamma^floor(step / step_size) (StepLR)
 *   WARMUP_COSINE  WARMUP for step < warmup_steps, then COSINE over the
 *                  remaining total_steps - warmup_steps steps
 * A negative step or a schedule that fc_lr_schedule_check rejects gives NaN
 * (which fc_optim_set_lr rejects). */
typedef enum fc_lr_kind {
    FC_LR_CONSTANT = 0,
    FC_LR_WARMUP,
    FC_LR_COSINE,
    FC_LR_STEP,
    FC_LR_WARMUP_COSINE,
} fc_lr_kind;

typedef struct fc_lr_schedule {
    fc_lr_kind kind;
    double lr;             /* the base (peak) lr, finite and >= 0 */
    int64_t warmup_steps;  /* WARMUP, WARMUP_COSINE: > 0 */
    double warmup_start;   /* the lr factor at step 0, in [0, 1] */
    int64_t total_steps;   /* COSINE: > 0; WARMUP_COSINE: > warmup_steps */
    double min_lr;         /* cosine's floor, in [0, lr] */
    int64_t step_size;     /* STEP: > 0 */
    double gamma;          /* STEP: 0 means 0.1 (StepLR's default); > 0 */
} fc_lr_schedule;

FC_API double fc_lr_at(const fc_lr_schedule *s, int64_t step);
/* FC_OK, or an FC_ERR_INVALID_ARG error naming the field and the reason. */
FC_API fc_status fc_lr_schedule_check(fc_ctx *ctx, const fc_lr_schedule *s);

#ifdef __cplusplus
}
#endif
#endif
