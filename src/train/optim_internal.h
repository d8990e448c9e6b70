/* SPDX-License-Identifier: MIT */
/* The optimizer's internal layout, shared by optim.c (groups, stepping),
 * optim_state.c (export / import) and the update rules (optim_sgd.c,
 * optim_adam.c, optim_muon.c). */
#ifndef FC_TRAIN_OPTIM_INTERNAL_H
#define FC_TRAIN_OPTIM_INTERNAL_H

#include <stdint.h>

#include "fucina/optim.h"

#define FCO_NAME_MAX 127

/* How one parameter is updated: fixed when it is added (Muon picks by
 * rank). */
typedef enum fco_rule {
    FCO_RULE_SGD = 0,
    FCO_RULE_ADAM,   /* L2 decay in the gradient */
    FCO_RULE_ADAMW,  /* decoupled decay */
    FCO_RULE_MUON,   /* 2-D, orthogonalised */
} fco_rule;

/* State entries a parameter may have, in export order. */
typedef enum fco_slot {
    FCO_SLOT_MOMENTUM = 0, /* "momentum_buffer" */
    FCO_SLOT_STEP,         /* "step" (no tensor: fco_param.step) */
    FCO_SLOT_EXP_AVG,      /* "exp_avg" */
    FCO_SLOT_EXP_AVG_SQ,   /* "exp_avg_sq" */
    FCO_SLOT_MASTER,       /* "master" */
} fco_slot;
#define FCO_SLOT_COUNT 5

typedef struct fco_param {
    fc_tensor *p;        /* a reference the optimizer owns */
    char *name;
    int group;
    fco_rule rule;
    /* 1 once the parameter has taken a step (or loaded state): its slots
     * exist. */
    int has_state;
    int64_t step;        /* steps taken (Adam rules) */
    /* Per slot, a contiguous f32 tensor with p's named shape, owned; NULL
     * when the slot is unused or there is no state yet. The STEP slot has
     * no tensor (its value is `step`; export makes a scalar). */
    fc_tensor *slot[FCO_SLOT_COUNT];
} fco_param;

typedef struct fco_group {
    double lr;
    double weight_decay;
} fco_group;

/* Resolved hyper-parameters (defaults applied). */
typedef struct fco_hyper {
    double lr, weight_decay, momentum, dampening, beta1, beta2, eps;
    int nesterov;
    int ns_steps;
} fco_hyper;

struct fc_optim {
    fc_ctx *ctx;
    fc_optim_kind kind;
    fco_hyper hp;
    int64_t steps;
    fco_group *groups;
    int n_groups;
    fco_param *params;
    int n_params;
    /* The name fc_optim_state_get returned last. */
    char entry_name[FCO_NAME_MAX + 32];
};

/* Is slot s used by a parameter with this rule and dtype? */
int fco_slot_used(const fc_optim *opt, const fco_param *par, fco_slot s);
const char *fco_slot_name(fco_slot s);
/* A new zero-filled contiguous f32 tensor with t's named shape that no
 * scope holds (the caller owns it); NULL after recording an error. */
fc_tensor *fco_owned_f32_like(fc_ctx *ctx, const fc_tensor *t);
/* Drop a parameter's state (its slots), as before its first step. */
void fco_clear_state(fco_param *par);

/* One parameter's update on contiguous f32 data of n elements: p (the
 * parameter or its master), g (its gradient), the slots (already allocated;
 * `first` when they were just made). lr and wd are the group's. */
void fco_sgd_update(float *p, const float *g, float *buf, int64_t n, const fco_hyper *hp, double lr, double wd,
                    int first);
void fco_adam_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t n,
                     int64_t step, double beta1, double beta2, double eps, double lr, double wd, int decoupled);
/* Muon's update of a [rows, cols] parameter; an error status after
 * recording it. Its temporaries live in the caller's scope. */
fc_status fco_muon_update(fc_ctx *ctx, float *p, const float *g, float *buf, int64_t rows, int64_t cols,
                          const fco_hyper *hp, double lr, double wd);

#endif
