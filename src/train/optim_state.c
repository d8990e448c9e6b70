/* SPDX-License-Identifier: MIT */
/* The optimizer's state as named tensors, for checkpoints: enumeration
 * (fc_optim_state_count / fc_optim_state_get) and loading
 * (fc_optim_load_state). The list is derived from the parameters each time
 * (it changes when a parameter takes its first step), in a fixed order:
 * "step", each group's lr, then each parameter's slots in fco_slot order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/ops.h"
#include "tensor/internal.h"
#include "train/optim_internal.h"

/* One entry: the global step, a group's lr, or a parameter's slot. Targets
 * are numbered 0 (step), 1..G (groups), then 1 + G + param * SLOTS + slot,
 * so loading can mark what it has seen in one array. */
typedef enum entry_kind { ENTRY_STEP = 0, ENTRY_LR, ENTRY_SLOT } entry_kind;
typedef struct entry {
    entry_kind kind;
    int index; /* group or parameter */
    fco_slot slot;
} entry;

static int target_of(const fc_optim *opt, const entry *e)
{
    int t = 0; /* ENTRY_STEP */
    switch (e->kind) {
    case ENTRY_STEP: break;
    case ENTRY_LR: t = 1 + e->index; break;
    case ENTRY_SLOT: t = 1 + opt->n_groups + e->index * FCO_SLOT_COUNT + (int)e->slot; break;
    }
    return t;
}

static void entry_name(const fc_optim *opt, const entry *e, char *buf, size_t len)
{
    switch (e->kind) {
    case ENTRY_STEP: snprintf(buf, len, "step"); return;
    case ENTRY_LR: snprintf(buf, len, "group.%d.lr", e->index); return;
    case ENTRY_SLOT: snprintf(buf, len, "%s.%s", opt->params[e->index].name, fco_slot_name(e->slot)); return;
    }
}

int fc_optim_state_count(const fc_optim *opt)
{
    if (!opt) return 0;
    int n = 1 + opt->n_groups;
    for (int i = 0; i < opt->n_params; i++) {
        if (!opt->params[i].has_state) continue;
        for (int s = 0; s < FCO_SLOT_COUNT; s++) n += fco_slot_used(opt, &opt->params[i], (fco_slot)s);
    }
    return n;
}

static int entry_at(const fc_optim *opt, int i, entry *e)
{
    if (i == 0) {
        *e = (entry){ENTRY_STEP, 0, FCO_SLOT_MOMENTUM};
        return 1;
    }
    if (i <= opt->n_groups) {
        *e = (entry){ENTRY_LR, i - 1, FCO_SLOT_MOMENTUM};
        return 1;
    }
    int k = 1 + opt->n_groups;
    for (int p = 0; p < opt->n_params; p++) {
        if (!opt->params[p].has_state) continue;
        for (int s = 0; s < FCO_SLOT_COUNT; s++) {
            if (!fco_slot_used(opt, &opt->params[p], (fco_slot)s)) continue;
            if (k++ == i) {
                *e = (entry){ENTRY_SLOT, p, (fco_slot)s};
                return 1;
            }
        }
    }
    return 0;
}

static fc_tensor *i64_scalar(fc_ctx *ctx, int64_t v)
{
    return fc_from_data(ctx, FC_I64, FC_SCALAR, &v, sizeof v);
}

fc_tensor *fc_optim_state_get(fc_optim *opt, int i, const char **name)
{
    if (name) *name = NULL;
    if (!opt) return NULL;
    entry e;
    if (i < 0 || !entry_at(opt, i, &e))
        return fc_fail(opt->ctx, FC_ERR_INVALID_ARG, "fc_optim_state_get: i = %d: the state has %d entries", i,
                       fc_optim_state_count(opt));
    entry_name(opt, &e, opt->entry_name, sizeof opt->entry_name);
    if (name) *name = opt->entry_name;
    switch (e.kind) {
    case ENTRY_STEP: return i64_scalar(opt->ctx, opt->steps);
    case ENTRY_LR: return fc_scalar(opt->ctx, FC_F64, opt->groups[e.index].lr);
    case ENTRY_SLOT:
        if (e.slot == FCO_SLOT_STEP) return i64_scalar(opt->ctx, opt->params[e.index].step);
        /* A view: the live tensor, owned like any other result. */
        return fct_view(opt->ctx, opt->params[e.index].slot[e.slot]);
    }
    return NULL;
}

/* The entry a name stands for; 0 when it names none of this optimizer's. */
static int resolve(const fc_optim *opt, const char *name, entry *e)
{
    if (strcmp(name, "step") == 0) {
        *e = (entry){ENTRY_STEP, 0, FCO_SLOT_MOMENTUM};
        return 1;
    }
    if (strncmp(name, "group.", 6) == 0) {
        const char *q = name + 6;
        int g = 0, digits = 0;
        /* Canonical numbers only ("group.01.lr" is not an entry). */
        while (*q >= '0' && *q <= '9' && digits < 9) {
            g = g * 10 + (*q++ - '0');
            digits++;
        }
        if (digits && (digits == 1 || name[6] != '0') && strcmp(q, ".lr") == 0 && g < opt->n_groups) {
            *e = (entry){ENTRY_LR, g, FCO_SLOT_MOMENTUM};
            return 1;
        }
    }
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    size_t plen = (size_t)(dot - name);
    for (int p = 0; p < opt->n_params; p++) {
        const fco_param *par = &opt->params[p];
        if (strlen(par->name) != plen || strncmp(par->name, name, plen) != 0) continue;
        for (int s = 0; s < FCO_SLOT_COUNT; s++)
            if (strcmp(dot + 1, fco_slot_name((fco_slot)s)) == 0 && fco_slot_used(opt, par, (fco_slot)s)) {
                *e = (entry){ENTRY_SLOT, p, (fco_slot)s};
                return 1;
            }
        return 0;
    }
    return 0;
}

/* A step count from a rank-0 i64 tensor, or f64 holding a whole number. */
static int read_count(const fc_tensor *t, int64_t *out)
{
    if (t->rank != 0) return 0;
    if (t->dtype == FC_I64) {
        memcpy(out, fct_ptr(t), sizeof *out);
        return *out >= 0;
    }
    if (t->dtype == FC_F64) {
        double v;
        memcpy(&v, fct_ptr(t), sizeof v);
        if (!(v >= 0 && v <= 9007199254740992.0 && v == floor(v))) return 0;
        *out = (int64_t)v;
        return 1;
    }
    return 0;
}

/* Check tensor t against entry e; 0 after recording an error naming it. */
static int check_entry(fc_optim *opt, const entry *e, const char *name, const fc_tensor *t)
{
    static const char *fn = "fc_optim_load_state";
    fc_ctx *ctx = opt->ctx;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    int64_t c;
    if (e->kind == ENTRY_STEP || (e->kind == ENTRY_SLOT && e->slot == FCO_SLOT_STEP)) {
        if (read_count(t, &c)) return 1;
        fc_fail(ctx, FC_ERR_DTYPE, "%s: entry \"%s\" is %s: a step count is an i64 scalar >= 0 (or f64 holding one)",
                fn, name, fct_describe(t, d1, sizeof d1));
        return 0;
    }
    if (e->kind == ENTRY_LR) {
        double v = (t->rank == 0 && fc_dtype_is_float(t->dtype)) ? fc_tensor_item(t) : NAN;
        if (isfinite(v) && v >= 0) return 1;
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: entry \"%s\" is %s: an lr is a float scalar, finite and >= 0", fn, name,
                fct_describe(t, d1, sizeof d1));
        return 0;
    }
    const fc_tensor *p = opt->params[e->index].p;
    if (t->dtype != FC_F32) {
        fc_fail(ctx, FC_ERR_DTYPE, "%s: entry \"%s\" is %s: it must be f32", fn, name, fct_describe(t, d1, sizeof d1));
        return 0;
    }
    int ok = t->rank == p->rank;
    for (int i = 0; ok && i < p->rank; i++) {
        int j = fc_tensor_axis_index(t, p->axis[i]);
        ok = j >= 0 && t->dim[j] == p->dim[i];
    }
    if (!ok) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: entry \"%s\" is %s but the parameter \"%s\" is %s", fn, name,
                fct_describe(t, d1, sizeof d1), opt->params[e->index].name, fct_describe(p, d2, sizeof d2));
        return 0;
    }
    return 1;
}

fc_status fc_optim_load_state(fc_optim *opt, const char *const *names, fc_tensor *const *tensors, int n)
{
    static const char *fn = "fc_optim_load_state";
    if (!opt) return FC_ERR_INVALID_ARG;
    fc_ctx *ctx = opt->ctx;
    if (n < 0 || (n > 0 && (!names || !tensors))) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: n = %d with names %s and tensors %s", fn, n, names ? "given" : "NULL",
                tensors ? "given" : "NULL");
        return FC_ERR_INVALID_ARG;
    }
    const int n_targets = 1 + opt->n_groups + opt->n_params * FCO_SLOT_COUNT;
    /* seen[target] = 1 + the index of the name that set it. */
    int *seen = calloc((size_t)n_targets, sizeof *seen);
    fc_tensor **fresh = calloc((size_t)opt->n_params * FCO_SLOT_COUNT + 1, sizeof *fresh);
    fc_status st = FC_OK;
    char nm[FCO_NAME_MAX + 32];
    if (!seen || !fresh) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
        st = FC_ERR_OOM;
        goto done;
    }
    for (int i = 0; i < n && st == FC_OK; i++) {
        entry e;
        if (!names[i]) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: names[%d] is NULL", fn, i);
            st = FC_ERR_INVALID_ARG;
        } else if (!resolve(opt, names[i], &e)) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: names[%d] = \"%s\" is not a state entry of this %s optimizer", fn, i,
                    names[i], fc_optim_kind_name(opt->kind));
            st = FC_ERR_INVALID_ARG;
        } else if (seen[target_of(opt, &e)]) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: entry \"%s\" is given twice (names[%d] and names[%d])", fn, names[i],
                    seen[target_of(opt, &e)] - 1, i);
            st = FC_ERR_INVALID_ARG;
        } else if (!tensors[i]) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: entry \"%s\" (tensors[%d]) is NULL", fn, names[i], i);
            st = FC_ERR_INVALID_ARG;
        } else if (!check_entry(opt, &e, names[i], tensors[i])) {
            st = fc_ctx_status(ctx);
        } else {
            seen[target_of(opt, &e)] = 1 + i;
        }
    }
    /* Completeness: the step, every group's lr, and each parameter's
     * entries all or none. */
    if (st == FC_OK && !seen[0]) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: entry \"step\" is missing", fn);
        st = FC_ERR_INVALID_ARG;
    }
    for (int g = 0; g < opt->n_groups && st == FC_OK; g++)
        if (!seen[1 + g]) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: entry \"group.%d.lr\" is missing", fn, g);
            st = FC_ERR_INVALID_ARG;
        }
    for (int p = 0; p < opt->n_params && st == FC_OK; p++) {
        int used = 0, present = 0, missing = -1;
        for (int s = 0; s < FCO_SLOT_COUNT; s++) {
            if (!fco_slot_used(opt, &opt->params[p], (fco_slot)s)) continue;
            used++;
            if (seen[1 + opt->n_groups + p * FCO_SLOT_COUNT + s]) present++;
            else if (missing < 0) missing = s;
        }
        if (present && present < used) {
            entry e = {ENTRY_SLOT, p, (fco_slot)missing};
            entry_name(opt, &e, nm, sizeof nm);
            fc_fail(ctx, FC_ERR_INVALID_ARG,
                    "%s: entry \"%s\" is missing (a parameter's entries are all present or all absent)", fn, nm);
            st = FC_ERR_INVALID_ARG;
        }
    }
    /* Copy into new tensors first, so a failure changes nothing. */
    for (int p = 0; p < opt->n_params && st == FC_OK; p++)
        for (int s = 0; s < FCO_SLOT_COUNT && st == FC_OK; s++) {
            int k = seen[1 + opt->n_groups + p * FCO_SLOT_COUNT + s];
            if (!k || s == FCO_SLOT_STEP) continue;
            fc_tensor *t = fco_owned_f32_like(ctx, opt->params[p].p);
            fresh[p * FCO_SLOT_COUNT + s] = t;
            st = t ? fc_copy_into(ctx, t, tensors[k - 1]) : fc_ctx_status(ctx);
        }
    if (st != FC_OK) goto done;
    int64_t c = 0;
    read_count(tensors[seen[0] - 1], &c);
    opt->steps = c;
    for (int g = 0; g < opt->n_groups; g++) opt->groups[g].lr = fc_tensor_item(tensors[seen[1 + g] - 1]);
    for (int p = 0; p < opt->n_params; p++) {
        fco_param *par = &opt->params[p];
        fco_clear_state(par);
        int any = 0;
        for (int s = 0; s < FCO_SLOT_COUNT; s++) {
            int k = seen[1 + opt->n_groups + p * FCO_SLOT_COUNT + s];
            if (!k) continue;
            any = 1;
            if (s == FCO_SLOT_STEP) read_count(tensors[k - 1], &par->step);
            par->slot[s] = fresh[p * FCO_SLOT_COUNT + s];
            fresh[p * FCO_SLOT_COUNT + s] = NULL;
        }
        par->has_state = any;
    }
done:
    if (fresh)
        for (int k = 0; k < opt->n_params * FCO_SLOT_COUNT; k++) fc_release(fresh[k]);
    free(fresh);
    free(seen);
    return st;
}
