/* SPDX-License-Identifier: MIT */
/* Training checkpoints: parameters and optimizer state in one safetensors
 * file (see fucina/checkpoint.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fucina/checkpoint.h"
#include "fucina/safetensors.h"
#include "tensor/internal.h"

#define PARAM_PREFIX "param."
#define OPTIM_PREFIX "optim."
#define KIND_KEY "fucina.optim.kind"
#define NAME_MAX_BYTES 256

/* "<prefix><name>" into a new string (NULL after recording an error). */
static char *prefixed(fc_ctx *ctx, const char *prefix, const char *name)
{
    size_t a = strlen(prefix), b = strlen(name);
    char *s = malloc(a + b + 1);
    if (!s) return fc_fail(ctx, FC_ERR_OOM, "fc_checkpoint: out of memory");
    memcpy(s, prefix, a);
    memcpy(s + a, name, b + 1);
    return s;
}

fc_status fc_checkpoint_save(fc_ctx *ctx, const char *path, fc_optim *opt, const char *const *meta_kv, int n_meta)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!path || !opt || n_meta < 0 || (n_meta > 0 && !meta_kv)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_checkpoint_save: needs a path, an optimizer and n_meta >= 0 pairs");
        return FC_ERR_INVALID_ARG;
    }
    int np = fc_optim_param_count(opt), ns = fc_optim_state_count(opt), n = np + ns;
    fc_named_tensor *ts = calloc((size_t)(n > 0 ? n : 1), sizeof *ts);
    const char **meta = calloc((size_t)(2 * n_meta + 2), sizeof *meta);
    fc_status st = FC_OK;
    if (!ts || !meta) {
        fc_fail(ctx, FC_ERR_OOM, "fc_checkpoint_save: out of memory");
        st = FC_ERR_OOM;
        goto done;
    }
    for (int i = 0; i < np && st == FC_OK; i++) {
        const char *name = NULL;
        ts[i].tensor = fc_retain(fc_optim_param(opt, i, &name));
        ts[i].name = prefixed(ctx, PARAM_PREFIX, name);
        if (!ts[i].name) st = fc_ctx_status(ctx);
    }
    for (int i = 0; i < ns && st == FC_OK; i++) {
        const char *name = NULL;
        ts[np + i].tensor = fc_optim_state_get(opt, i, &name);
        ts[np + i].name = ts[np + i].tensor ? prefixed(ctx, OPTIM_PREFIX, name) : NULL;
        if (!ts[np + i].name) st = fc_ctx_status(ctx);
    }
    if (st == FC_OK) {
        meta[0] = KIND_KEY;
        meta[1] = fc_optim_kind_name(fc_optim_get_kind(opt));
        for (int i = 0; i < 2 * n_meta; i++) meta[2 + i] = meta_kv[i];
        st = fc_safetensors_save(ctx, path, ts, n, meta, n_meta + 1);
    }
done:
    if (ts)
        for (int i = 0; i < n; i++) {
            free((char *)ts[i].name);
            fc_release(ts[i].tensor);
        }
    free(ts);
    free(meta);
    return st;
}

static int same_shape(const fc_safetensors_entry *e, const fc_tensor *t)
{
    if (e->rank != t->rank) return 0;
    for (int i = 0; i < e->rank; i++)
        if (e->dim[i] != t->dim[i]) return 0;
    return 1;
}

fc_status fc_checkpoint_load(fc_ctx *ctx, const char *path, fc_optim *opt)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!path || !opt) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_checkpoint_load: needs a path and an optimizer");
        return FC_ERR_INVALID_ARG;
    }
    fc_safetensors *f = fc_safetensors_open(ctx, path, 0);
    if (!f) return fc_ctx_status(ctx);
    char d[FCT_DESC_MAX];
    fc_status st = FC_OK;
    int np = fc_optim_param_count(opt), nf = fc_safetensors_count(f);
    fc_named_tensor *params = calloc((size_t)(np > 0 ? np : 1), sizeof *params);
    const char **snames = calloc((size_t)(nf > 0 ? nf : 1), sizeof *snames);
    fc_tensor **stensors = calloc((size_t)(nf > 0 ? nf : 1), sizeof *stensors);
    int ns = 0;
    if (!params || !snames || !stensors) {
        fc_fail(ctx, FC_ERR_OOM, "fc_checkpoint_load: out of memory");
        st = FC_ERR_OOM;
        goto done;
    }
    const char *kind = fc_safetensors_meta(f, KIND_KEY), *want = fc_optim_kind_name(fc_optim_get_kind(opt));
    if (!kind || strcmp(kind, want) != 0) {
        fc_fail(ctx, FC_ERR_FORMAT, "fc_checkpoint_load: %s holds the state of a%s %s optimizer, this one is %s", path,
                kind ? "n" : "", kind ? kind : "unknown (no " KIND_KEY ")", want);
        st = FC_ERR_FORMAT;
        goto done;
    }
    /* Every parameter is in the file with its dtype and shape. */
    for (int i = 0; i < np && st == FC_OK; i++) {
        const char *name = NULL;
        fc_tensor *p = fc_optim_param(opt, i, &name);
        params[i].tensor = p;
        params[i].name = prefixed(ctx, PARAM_PREFIX, name);
        if (!params[i].name) {
            st = fc_ctx_status(ctx);
            break;
        }
        fc_safetensors_entry e;
        int k = fc_safetensors_find(f, params[i].name);
        if (k < 0 || !fc_safetensors_info(f, k, &e)) {
            fc_fail(ctx, FC_ERR_FORMAT, "fc_checkpoint_load: %s has no parameter \"%s\"", path, name);
            st = FC_ERR_FORMAT;
        } else if (e.dtype != p->dtype || !same_shape(&e, p)) {
            fc_fail(ctx, FC_ERR_SHAPE, "fc_checkpoint_load: parameter \"%s\" is %s[%d axes] in %s, the model's is %s", name,
                    fc_dtype_name(e.dtype), e.rank, path, fct_describe(p, d, sizeof d));
            st = FC_ERR_SHAPE;
        }
    }
    /* No parameter the optimizer does not know; the optimizer entries. */
    for (int k = 0; k < nf && st == FC_OK; k++) {
        const char *name = fc_safetensors_name(f, k);
        if (!strncmp(name, PARAM_PREFIX, strlen(PARAM_PREFIX))) {
            int known = 0;
            for (int i = 0; i < np && !known; i++) known = !strcmp(params[i].name, name);
            if (!known) {
                fc_fail(ctx, FC_ERR_FORMAT, "fc_checkpoint_load: %s has a parameter \"%s\" the optimizer does not have",
                        path, name + strlen(PARAM_PREFIX));
                st = FC_ERR_FORMAT;
            }
        } else if (!strncmp(name, OPTIM_PREFIX, strlen(OPTIM_PREFIX))) {
            snames[ns] = name + strlen(OPTIM_PREFIX);
            stensors[ns] = fc_safetensors_get(f, name);
            if (!stensors[ns]) st = fc_ctx_status(ctx);
            ns++;
        } else {
            fc_fail(ctx, FC_ERR_FORMAT, "fc_checkpoint_load: %s has an entry \"%s\" that is neither param.* nor optim.*",
                    path, name);
            st = FC_ERR_FORMAT;
        }
    }
    /* The optimizer validates its whole state before taking it; the
     * parameters were checked above, so the copy below cannot fail on them. */
    if (st == FC_OK) st = fc_optim_load_state(opt, snames, stensors, ns);
    if (st == FC_OK) st = fc_safetensors_load_into(ctx, path, params, np, 0);
done:
    for (int i = 0; params && i < np; i++) free((char *)params[i].name);
    for (int i = 0; i < ns; i++) fc_release(stensors[i]);
    free(params);
    free(snames);
    free(stensors);
    fc_safetensors_close(f);
    return st;
}
