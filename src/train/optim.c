/* SPDX-License-Identifier: MIT */
/* The optimizer object: hyper-parameters and their defaults, parameter
 * groups, the learning rate, and the step loop that hands each parameter's
 * contiguous f32 data to its update rule (optim_sgd.c, optim_adam.c,
 * optim_muon.c). State export / import is in optim_state.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/autograd.h"
#include "fucina/ops.h"
#include "tensor/internal.h"
#include "train/optim_internal.h"

const char *fc_optim_kind_name(fc_optim_kind kind)
{
    switch (kind) {
    case FC_OPTIM_SGD: return "sgd";
    case FC_OPTIM_ADAM: return "adam";
    case FC_OPTIM_ADAMW: return "adamw";
    case FC_OPTIM_MUON: return "muon";
    }
    return "?";
}

/* A field left zero takes the default; FC_OPTIM_ZERO (-0.0) is an explicit
 * zero. */
static double pick(double v, double def)
{
    if (v != 0) return v;
    return signbit(v) ? 0.0 : def;
}

static int bad_nonneg(fc_ctx *ctx, const char *fn, const char *what, double v)
{
    if (isfinite(v) && v >= 0) return 0;
    fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %s = %g: must be finite and >= 0", fn, what, v);
    return 1;
}

static int bad_unit(fc_ctx *ctx, const char *fn, const char *what, double v)
{
    if (v >= 0 && v < 1) return 0;
    fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %s = %g: must be in [0, 1)", fn, what, v);
    return 1;
}

fc_optim *fc_optim_new(fc_ctx *ctx, fc_optim_kind kind, const fc_optim_options *opts)
{
    static const char *fn = "fc_optim_new";
    if (!ctx) return NULL;
    int known = 0;
    switch (kind) {
    case FC_OPTIM_SGD:
    case FC_OPTIM_ADAM:
    case FC_OPTIM_ADAMW:
    case FC_OPTIM_MUON: known = 1; break;
    }
    if (!known) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: kind = %d is not an fc_optim_kind", fn, (int)kind);
    fc_optim_options o;
    if (opts) o = *opts;
    else memset(&o, 0, sizeof o);
    fco_hyper hp = {0};
    int muon = kind == FC_OPTIM_MUON;
    if (kind == FC_OPTIM_SGD && o.lr == 0 && !signbit(o.lr))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: opts->lr is required for SGD (FC_OPTIM_ZERO for a zero lr)", fn);
    hp.lr = pick(o.lr, muon ? 0.02 : 1e-3);
    hp.weight_decay = pick(o.weight_decay, kind == FC_OPTIM_ADAMW ? 1e-2 : 0.0);
    hp.momentum = pick(o.momentum, muon ? 0.95 : 0.0);
    hp.dampening = o.dampening;
    hp.beta1 = pick(o.betas[0], 0.9);
    hp.beta2 = pick(o.betas[1], muon ? 0.95 : 0.999);
    hp.eps = pick(o.eps, 1e-8);
    hp.ns_steps = o.ns_steps ? o.ns_steps : 5;
    if (bad_nonneg(ctx, fn, "opts->lr", hp.lr) || bad_nonneg(ctx, fn, "opts->weight_decay", hp.weight_decay) ||
        bad_nonneg(ctx, fn, "opts->momentum", hp.momentum) || bad_nonneg(ctx, fn, "opts->dampening", hp.dampening) ||
        bad_nonneg(ctx, fn, "opts->eps", hp.eps) || bad_unit(ctx, fn, "opts->betas[0]", hp.beta1) ||
        bad_unit(ctx, fn, "opts->betas[1]", hp.beta2))
        return NULL;
    if (o.nesterov < -1 || o.nesterov > 1)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: opts->nesterov = %d: must be 1 (on), -1 (off) or 0 (default)", fn,
                       o.nesterov);
    hp.nesterov = o.nesterov == 0 ? muon : o.nesterov == 1;
    if (kind == FC_OPTIM_SGD && hp.nesterov && (hp.momentum <= 0 || hp.dampening != 0))
        return fc_fail(ctx, FC_ERR_INVALID_ARG,
                       "%s: opts->nesterov: Nesterov momentum needs opts->momentum > 0 and opts->dampening = 0 "
                       "(momentum %g, dampening %g)", fn, hp.momentum, hp.dampening);
    if (muon && bad_unit(ctx, fn, "opts->momentum", hp.momentum)) return NULL;
    /* More than a few dozen iterations is a mistake (the quintic converges
     * in ~5), and the bound keeps a typo from running for minutes. */
    if (hp.ns_steps < 0 || hp.ns_steps > 100)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: opts->ns_steps = %d: must be in 1..100 (0: 5)", fn, o.ns_steps);
    fc_optim *opt = calloc(1, sizeof *opt);
    if (!opt) return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
    opt->ctx = ctx;
    opt->kind = kind;
    opt->hp = hp;
    return opt;
}

void fco_clear_state(fco_param *par)
{
    for (int s = 0; s < FCO_SLOT_COUNT; s++) {
        fc_release(par->slot[s]);
        par->slot[s] = NULL;
    }
    par->has_state = 0;
    par->step = 0;
}

void fc_optim_free(fc_optim *opt)
{
    if (!opt) return;
    for (int i = 0; i < opt->n_params; i++) {
        fco_clear_state(&opt->params[i]);
        fc_release(opt->params[i].p);
        free(opt->params[i].name);
    }
    free(opt->params);
    free(opt->groups);
    free(opt);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int find_param(const fc_optim *opt, const char *name)
{
    for (int i = 0; i < opt->n_params; i++)
        if (strcmp(opt->params[i].name, name) == 0) return i;
    return -1;
}

int fc_optim_add_group(fc_optim *opt, fc_tensor *const *params, const char *const *names, int n,
                       const fc_optim_group *g)
{
    static const char *fn = "fc_optim_add_group";
    if (!opt) return -1;
    fc_ctx *ctx = opt->ctx;
    char d[FCT_DESC_MAX];
    if (n < 1 || !params || !names) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: n = %d%s: a group needs at least one parameter and its name", fn, n,
                !params ? ", params = NULL" : !names ? ", names = NULL" : "");
        return -1;
    }
    fco_group grp = {opt->hp.lr, opt->hp.weight_decay};
    if (g) {
        grp.lr = pick(g->lr, grp.lr);
        grp.weight_decay = pick(g->weight_decay, grp.weight_decay);
        if (bad_nonneg(ctx, fn, "g->lr", grp.lr) || bad_nonneg(ctx, fn, "g->weight_decay", grp.weight_decay)) return -1;
    }
    for (int i = 0; i < n; i++) {
        const char *nm = names[i];
        fc_tensor *p = params[i];
        if (!nm || !nm[0] || strlen(nm) > FCO_NAME_MAX) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: names[%d] is %s: a name has 1..%d bytes", fn, i,
                    !nm ? "NULL" : !nm[0] ? "empty" : "too long", FCO_NAME_MAX);
            return -1;
        }
        int dup = find_param(opt, nm) >= 0;
        for (int j = 0; j < i && !dup; j++) dup = strcmp(names[j], nm) == 0;
        if (dup) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: names[%d] = \"%s\" is already a parameter's name", fn, i, nm);
            return -1;
        }
        if (!p) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: params[%d] (\"%s\") is NULL", fn, i, nm);
            return -1;
        }
        if (!fc_tensor_is_leaf(p)) {
            fc_fail(ctx, FC_ERR_STATE, "%s: params[%d] (\"%s\") %s is not a variable (fc_requires_grad a leaf)", fn, i,
                    nm, fct_describe(p, d, sizeof d));
            return -1;
        }
        if (p->dtype != FC_F32 && p->dtype != FC_F16 && p->dtype != FC_BF16) {
            fc_fail(ctx, FC_ERR_DTYPE, "%s: params[%d] (\"%s\") is %s: parameters are f32, f16 or bf16", fn, i, nm,
                    fct_describe(p, d, sizeof d));
            return -1;
        }
        int twice = 0;
        for (int j = 0; j < opt->n_params && !twice; j++) twice = opt->params[j].p == p;
        for (int j = 0; j < i && !twice; j++) twice = params[j] == p;
        if (twice) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: params[%d] (\"%s\") is already in the optimizer", fn, i, nm);
            return -1;
        }
    }
    fco_group *gs = realloc(opt->groups, (size_t)(opt->n_groups + 1) * sizeof *gs);
    if (gs) opt->groups = gs;
    fco_param *ps = gs ? realloc(opt->params, (size_t)(opt->n_params + n) * sizeof *ps) : NULL;
    if (ps) opt->params = ps;
    char **nms = ps ? calloc((size_t)n, sizeof *nms) : NULL;
    for (int i = 0; nms && i < n; i++) {
        nms[i] = dup_str(names[i]);
        if (!nms[i]) {
            for (int j = 0; j < i; j++) free(nms[j]);
            free(nms);
            nms = NULL;
        }
    }
    if (!nms) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
        return -1;
    }
    int gi = opt->n_groups++;
    opt->groups[gi] = grp;
    for (int i = 0; i < n; i++) {
        fco_param *par = &opt->params[opt->n_params++];
        memset(par, 0, sizeof *par);
        par->p = fc_retain(params[i]);
        par->name = nms[i];
        par->group = gi;
        switch (opt->kind) {
        case FC_OPTIM_SGD: par->rule = FCO_RULE_SGD; break;
        case FC_OPTIM_ADAM: par->rule = FCO_RULE_ADAM; break;
        case FC_OPTIM_ADAMW: par->rule = FCO_RULE_ADAMW; break;
        case FC_OPTIM_MUON:
            par->rule = params[i]->rank == 2 && !(g && g->adamw) ? FCO_RULE_MUON : FCO_RULE_ADAMW;
            break;
        }
    }
    free(nms);
    return gi;
}

fc_optim_kind fc_optim_get_kind(const fc_optim *opt) { return opt ? opt->kind : FC_OPTIM_SGD; }
int fc_optim_group_count(const fc_optim *opt) { return opt ? opt->n_groups : 0; }
int fc_optim_param_count(const fc_optim *opt) { return opt ? opt->n_params : 0; }
int64_t fc_optim_steps(const fc_optim *opt) { return opt ? opt->steps : 0; }

fc_tensor *fc_optim_param(const fc_optim *opt, int i, const char **name)
{
    if (!opt || i < 0 || i >= opt->n_params) {
        if (name) *name = NULL;
        return NULL;
    }
    if (name) *name = opt->params[i].name;
    return opt->params[i].p;
}

double fc_optim_lr(const fc_optim *opt, int group)
{
    if (!opt || group < 0 || group >= opt->n_groups) return NAN;
    return opt->groups[group].lr;
}

fc_status fc_optim_set_lr(fc_optim *opt, int group, double lr)
{
    if (!opt) return FC_ERR_INVALID_ARG;
    if (group < -1 || group >= opt->n_groups) {
        fc_fail(opt->ctx, FC_ERR_INVALID_ARG, "fc_optim_set_lr: group = %d: the optimizer has %d group(s) (-1: all)",
                group, opt->n_groups);
        return FC_ERR_INVALID_ARG;
    }
    if (bad_nonneg(opt->ctx, "fc_optim_set_lr", "lr", lr)) return FC_ERR_INVALID_ARG;
    for (int gi = 0; gi < opt->n_groups; gi++)
        if (group == -1 || gi == group) opt->groups[gi].lr = lr;
    return FC_OK;
}

const char *fco_slot_name(fco_slot s)
{
    switch (s) {
    case FCO_SLOT_MOMENTUM: return "momentum_buffer";
    case FCO_SLOT_STEP: return "step";
    case FCO_SLOT_EXP_AVG: return "exp_avg";
    case FCO_SLOT_EXP_AVG_SQ: return "exp_avg_sq";
    case FCO_SLOT_MASTER: return "master";
    }
    return "?";
}

int fco_slot_used(const fc_optim *opt, const fco_param *par, fco_slot s)
{
    int adam = par->rule == FCO_RULE_ADAM || par->rule == FCO_RULE_ADAMW;
    switch (s) {
    case FCO_SLOT_MOMENTUM:
        return par->rule == FCO_RULE_MUON || (par->rule == FCO_RULE_SGD && opt->hp.momentum != 0);
    case FCO_SLOT_STEP:
    case FCO_SLOT_EXP_AVG:
    case FCO_SLOT_EXP_AVG_SQ: return adam;
    case FCO_SLOT_MASTER: return par->p->dtype != FC_F32;
    }
    return 0;
}

fc_tensor *fco_owned_f32_like(fc_ctx *ctx, const fc_tensor *t)
{
    /* Made inside a scope of our own and retained: the scope's reference
     * goes when it ends, whatever scopes the caller has open, and ours
     * stays with the optimizer. */
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *x = fct_alloc_like(ctx, FC_F32, t);
    if (x) {
        memset(fct_ptr(x), 0, (size_t)fct_numel(x) * sizeof(float));
        fc_retain(x);
    }
    fc_scope_end(ctx, s);
    return x;
}

/* The gradient as contiguous f32 data laid out as p (row-major in p's axis
 * order), in the current scope. */
static fc_tensor *grad_f32(fc_ctx *ctx, const fc_tensor *p, fc_tensor *g)
{
    int same = g->rank == p->rank;
    for (int i = 0; same && i < p->rank; i++) same = g->axis[i] == p->axis[i];
    if (!same) g = fc_permute(ctx, g, (const char *const *)p->axis, p->rank);
    if (g && g->dtype != FC_F32) g = fc_cast(ctx, g, FC_F32);
    if (g && !fc_tensor_is_contiguous(g)) g = fc_contiguous(ctx, g);
    return g;
}

/* Elementwise updates of large parameters run in chunks on the worker pool:
 * each element is still updated by one thread with the same arithmetic, so
 * the bits do not depend on the thread count. */
#define FCO_CHUNK 8192

typedef struct update_job {
    const fc_optim *opt;
    const fco_param *par;
    const fco_group *grp;
    float *w, *s0, *m, *v;
    const float *g;
    int64_t n;
    int first;
} update_job;

static void update_chunk(void *arg, int64_t c, int worker)
{
    (void)worker;
    const update_job *j = arg;
    int64_t i0 = c * FCO_CHUNK, len = j->n - i0 < FCO_CHUNK ? j->n - i0 : FCO_CHUNK;
    const fco_hyper *hp = &j->opt->hp;
    switch (j->par->rule) {
    case FCO_RULE_SGD:
        fco_sgd_update(j->w + i0, j->g + i0, j->s0 ? j->s0 + i0 : NULL, len, hp, j->grp->lr, j->grp->weight_decay,
                       j->first);
        return;
    case FCO_RULE_ADAM:
    case FCO_RULE_ADAMW:
        fco_adam_update(j->w + i0, j->g + i0, j->m + i0, j->v + i0, len, j->par->step, hp->beta1, hp->beta2, hp->eps,
                        j->grp->lr, j->grp->weight_decay, j->par->rule == FCO_RULE_ADAMW);
        return;
    case FCO_RULE_MUON: return; /* not elementwise: never chunked */
    }
}

static void run_update(fc_ctx *ctx, const update_job *j)
{
    int64_t chunks = (j->n + FCO_CHUNK - 1) / FCO_CHUNK;
    if (chunks >= 4 && fc_ctx_threads(ctx) > 1) fc_workers_run(fc_ctx_workers(ctx), chunks, update_chunk, (void *)j);
    else
        for (int64_t c = 0; c < chunks; c++) update_chunk((void *)j, c, 0);
}

static fc_status step_param(fc_optim *opt, fco_param *par, fc_tensor *g)
{
    fc_ctx *ctx = opt->ctx;
    fc_tensor *p = par->p;
    int64_t n = fct_numel(p);
    fc_tensor *gc = grad_f32(ctx, p, g);
    if (!gc) return fc_ctx_status(ctx);
    int first = !par->has_state;
    if (first) {
        for (int s = 0; s < FCO_SLOT_COUNT; s++) {
            if (s == FCO_SLOT_STEP || !fco_slot_used(opt, par, (fco_slot)s)) continue;
            par->slot[s] = fco_owned_f32_like(ctx, p);
            if (!par->slot[s]) {
                fco_clear_state(par);
                return fc_ctx_status(ctx);
            }
        }
        if (par->slot[FCO_SLOT_MASTER]) {
            fc_status st = fc_copy_into(ctx, par->slot[FCO_SLOT_MASTER], p);
            if (st != FC_OK) {
                fco_clear_state(par);
                return st;
            }
        }
        par->has_state = 1;
    }
    /* The f32 data the rule updates: the master copy, the parameter itself,
     * or a contiguous copy of a strided f32 parameter written back after. */
    fc_tensor *work = par->slot[FCO_SLOT_MASTER];
    if (!work && !fc_tensor_is_contiguous(p)) {
        work = fc_clone(ctx, p);
        if (!work) return fc_ctx_status(ctx);
    }
    float *w = work ? (float *)fct_ptr(work) : (float *)fct_ptr(p);
    const float *gd = (const float *)fct_ptr(gc);
    float *s0 = par->slot[FCO_SLOT_MOMENTUM] ? (float *)fct_ptr(par->slot[FCO_SLOT_MOMENTUM]) : NULL;
    float *m = par->slot[FCO_SLOT_EXP_AVG] ? (float *)fct_ptr(par->slot[FCO_SLOT_EXP_AVG]) : NULL;
    float *v = par->slot[FCO_SLOT_EXP_AVG_SQ] ? (float *)fct_ptr(par->slot[FCO_SLOT_EXP_AVG_SQ]) : NULL;
    const fco_group *grp = &opt->groups[par->group];
    fc_status st = FC_OK;
    update_job job = {opt, par, grp, w, s0, m, v, gd, n, first};
    switch (par->rule) {
    case FCO_RULE_SGD: run_update(ctx, &job); break;
    case FCO_RULE_ADAM:
    case FCO_RULE_ADAMW:
        par->step++;
        run_update(ctx, &job);
        break;
    case FCO_RULE_MUON:
        st = fco_muon_update(ctx, w, gd, s0, p->dim[0], p->dim[1], &opt->hp, grp->lr, grp->weight_decay);
        break;
    }
    if (st != FC_OK) return st;
    if (!work) {
        /* Written through the pointer: tell autograd the values changed. */
        fc_storage_touch(p->storage);
        return FC_OK;
    }
    return fc_copy_into(ctx, p, work);
}

fc_status fc_optim_step(fc_optim *opt)
{
    if (!opt) return FC_ERR_INVALID_ARG;
    fc_ctx *ctx = opt->ctx;
    fc_status st = FC_OK;
    fc_no_grad_begin();
    for (int i = 0; i < opt->n_params && st == FC_OK; i++) {
        /* A scope per parameter: its temporaries go before the next one's. */
        fc_scope s = fc_scope_begin(ctx);
        fc_tensor *g = fc_grad(ctx, opt->params[i].p);
        if (g) st = step_param(opt, &opt->params[i], g);
        fc_scope_end(ctx, s);
    }
    fc_no_grad_end();
    if (st == FC_OK) opt->steps++;
    return st;
}

void fc_optim_zero_grad(fc_optim *opt)
{
    if (!opt) return;
    for (int i = 0; i < opt->n_params; i++) fc_zero_grad(opt->ctx, opt->params[i].p);
}
