/* SPDX-License-Identifier: MIT */
/* Fucina: losses.
 *
 * Inputs are f32, f16 or bf16 (computed in f32, sums in double); results are
 * f32. Reductions are deterministic: per-element losses are computed in
 * parallel and summed in index order on one thread.
 *
 * Options structs take designated initializers; every zero field means the
 * default, and a NULL options pointer means all defaults:
 *
 *     fc_tensor *loss = fc_cross_entropy(ctx, logits, targets, "vocab",
 *         &(fc_ce_options){.label_smoothing = 0.1f, .reduction = FC_REDUCE_SUM});
 */
#ifndef FUCINA_LOSS_H
#define FUCINA_LOSS_H

#include <stdint.h>

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fc_reduction {
    FC_REDUCE_MEAN = 0, /* a scalar: the mean (see each loss for over what) */
    FC_REDUCE_SUM,      /* a scalar: the sum */
    FC_REDUCE_NONE,     /* one loss per element (per target) */
} fc_reduction;

/* PyTorch's default ignore_index. */
#define FC_CE_IGNORE_DEFAULT (-100)

typedef struct fc_ce_options {
    fc_reduction reduction;   /* default FC_REDUCE_MEAN */
    float label_smoothing;    /* in [0, 1]; default 0 */
    /* Targets equal to the ignore index contribute nothing and are not
     * counted by the mean. Because 0 is a class, the index is only read
     * when set_ignore_index is nonzero; otherwise it is -100 as in PyTorch:
     *     &(fc_ce_options){.ignore_index = 0, .set_ignore_index = 1} */
    int64_t ignore_index;
    int set_ignore_index;
} fc_ce_options;

/* torch.nn.functional.cross_entropy with class-index targets.
 *
 * logits: float, with the class axis `class_axis` (C classes) and any other
 * axes; targets: i32/i64 with exactly the logits' other axes (by name, any
 * order, equal sizes; rank 0 for a single row). A target must be in [0, C)
 * or equal the ignore index.
 *
 * Per row, with lp = log_softmax(logits row) and eps = label_smoothing:
 *     nll = -lp[target],  smooth = -sum_c lp[c]
 *     loss = (1 - eps) * nll + (eps / C) * smooth   (0 for an ignored row)
 * MEAN divides the sums of nll and smooth by the number of rows that are not
 * ignored (all ignored: NaN, as PyTorch); SUM adds them; NONE returns the
 * per-row losses as f32 with the logits' axes minus the class axis, in the
 * logits' order. */
FC_API fc_tensor *fc_cross_entropy(fc_ctx *ctx, fc_tensor *logits, fc_tensor *targets, const char *class_axis,
                                   const fc_ce_options *opt);

/* Mean squared error (a - b)^2: a and b have one float dtype and broadcast
 * by name as the binary ops do (ops.h). MEAN divides by the broadcast
 * element count; NONE returns the broadcast shape as f32. */
FC_API fc_tensor *fc_mse(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, fc_reduction reduction);

#ifdef __cplusplus
}
#endif
#endif
