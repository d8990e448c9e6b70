/* SPDX-License-Identifier: MIT */
/* The two-spirals demo: a small MLP trained from scratch on the classic
 * two-spirals problem, with any optimizer; used by `fucina demo spirals`
 * and by the training tests (accuracy, bit-identical resume). */
#ifndef FC_TRAIN_SPIRALS_H
#define FC_TRAIN_SPIRALS_H

#include <stdint.h>
#include <stdio.h>

#include "fucina/optim.h"

typedef struct fc_spirals_config {
    fc_optim_kind optim;
    int64_t steps;          /* 0: the optimizer's default step count */
    int points;             /* per class; 0: 200 */
    int hidden;             /* 0: 64 */
    double lr;              /* 0: the optimizer's default for this problem */
    double dropout;         /* on the hidden layers while training; 0: none */
    uint64_t seed;          /* weights and dropout */
    const char *save_path;  /* write a checkpoint after save_at steps (NULL: none) */
    int64_t save_at;
    const char *resume_path;/* start from this checkpoint (NULL: from scratch) */
    FILE *log;              /* progress lines (NULL: quiet) */
    int64_t log_every;
} fc_spirals_config;

typedef struct fc_spirals_result {
    int64_t steps;          /* optimizer steps taken in total (incl. resumed ones) */
    double loss;            /* final training loss */
    double accuracy;        /* final training accuracy, in [0, 1] */
    uint64_t param_hash;    /* FNV-1a over the parameters' bytes, for resume checks */
} fc_spirals_result;

/* Train; FC_OK or an error recorded in ctx. */
fc_status fc_spirals_train(fc_ctx *ctx, const fc_spirals_config *cfg, fc_spirals_result *res);

#endif
