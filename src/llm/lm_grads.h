/* SPDX-License-Identifier: MIT */
/* Fucina llm: a global batch's gradient, summed over its micro-batches in
 * one fixed order, on one process or across ranks (fc_lm_parallel).
 *
 * Why not let autograd accumulate: a backward pass adds into a variable's
 * gradient in several places (the embedding's scatter, a tied head's two
 * uses), so g = ((G + c1) + c2) for the second micro-batch depends on the
 * gradient already there. Each micro-batch's gradient is therefore taken
 * on its own (from zeroed gradients) and the micro-batches are summed as
 * whole vectors, g0 + g1 + ... left to right: the one order a single
 * process and a chain of ranks can both follow exactly. */
#ifndef FUCINA_LM_GRADS_H
#define FUCINA_LM_GRADS_H

#include <stdint.h>

#include "fucina/lm_train.h"

typedef struct lm_grads {
    fc_tensor *const *params;
    int n;
    int64_t *off;        /* [n + 1]: each parameter's first element in the flat vector */
    int64_t total;       /* elements of the flat vector */
    int per_rank;        /* micro-batches this rank computes */
    int sums_as_it_goes; /* rank 0: slot 0 gathers the micro-batches as they come */
    /* [8 + 4 total] bytes per slot: the slot's loss sum (a double), then its
     * gradient; slot 0 is the running sum, slots 1..per_rank this rank's own
     * micro-batches (rank > 0 adds them after its predecessor's sum). */
    unsigned char *buf;
} lm_grads;

/* For rank `rank` computing per_rank micro-batches. 0, or -1 with an error
 * (OOM, a parameter that is not f32). */
int lm_grads_init(fc_ctx *ctx, lm_grads *g, fc_tensor *const *params, int n, int per_rank, int rank);
void lm_grads_free(lm_grads *g);
/* Take the parameters' gradients (a missing one reads as zeros) and the
 * micro-batch's loss sum as this rank's micro-batch i (0-based), then zero
 * the gradients. */
int lm_grads_take(fc_ctx *ctx, lm_grads *g, int i, double loss_sum);
/* Combine the ranks' micro-batches in order (par NULL: this process's
 * alone), set every parameter's gradient to the total, and return the
 * global loss sum in *loss_sum. 0, or -1 with an error naming the rank. */
int lm_grads_finish(fc_ctx *ctx, lm_grads *g, const fc_lm_parallel *par, double *loss_sum);

#endif
