/* SPDX-License-Identifier: MIT */
/* Broadcasting by name, or from the right when every operand is positional. */
#include <string.h>

#include "tensor/broadcast.h"

static int all_positional(const fc_tensor *t)
{
    for (int i = 0; i < t->rank; i++)
        if (!fc_axis_is_positional(t->axis[i])) return 0;
    return 1;
}

static int conflict(fc_ctx *ctx, const char *op, fc_tensor *const *ts, int n, const char *axis)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (n >= 2)
        fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" has different sizes in %s and %s", op, axis,
                fct_describe(ts[0], d1, sizeof d1), fct_describe(ts[1], d2, sizeof d2));
    else
        fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" conflicts in %s", op, axis, fct_describe(ts[0], d1, sizeof d1));
    return 0;
}

int fct_broadcast(fc_ctx *ctx, const char *op, fc_tensor *const *ts, int n, fct_bcast *out)
{
    memset(out, 0, sizeof *out);
    int positional = 1;
    for (int k = 0; k < n; k++) positional &= all_positional(ts[k]);
    if (positional) {
        int r = 0;
        for (int k = 0; k < n; k++) if (ts[k]->rank > r) r = ts[k]->rank;
        out->rank = r;
        /* The result is named _0.._{r-1}, unless every operand of rank r
         * has the same names in the same order (say a permuted [_1, _0]):
         * then it keeps them, so an elementwise op does not rename its
         * operand's axes (gradients rely on this to find their operand). */
        const fc_tensor *top = NULL;
        int keep = 1;
        for (int k = 0; k < n && keep; k++) {
            if (ts[k]->rank != r) continue;
            if (!top) top = ts[k];
            else keep = !memcmp(top->axis, ts[k]->axis, sizeof(const char *) * (size_t)r);
        }
        for (int d = 0; d < r; d++) {
            out->axis[d] = keep && top ? top->axis[d] : fc_axis_positional(d);
            out->dim[d] = 1;
        }
        for (int k = 0; k < n; k++) {
            const fc_tensor *t = ts[k];
            int64_t es = (int64_t)fc_dtype_size(t->dtype);
            for (int i = 0; i < t->rank; i++) {
                int d = r - t->rank + i;
                if (t->dim[i] == 1) continue;
                if (out->dim[d] != 1 && out->dim[d] != t->dim[i]) return conflict(ctx, op, ts, n, out->axis[d]);
                out->dim[d] = t->dim[i];
                out->stride[k][d] = t->stride[i] * es;
            }
        }
        return 1;
    }
    int r = 0;
    for (int k = 0; k < n; k++) {
        const fc_tensor *t = ts[k];
        for (int i = 0; i < t->rank; i++) {
            int d = -1;
            for (int j = 0; j < r; j++) if (out->axis[j] == t->axis[i]) d = j;
            if (d < 0) {
                if (r == FC_MAX_RANK) {
                    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
                    fc_fail(ctx, FC_ERR_SHAPE, "%s: broadcasting %s with %s needs more than %d axes", op,
                            fct_describe(ts[0], d1, sizeof d1), fct_describe(ts[n > 1 ? 1 : 0], d2, sizeof d2), FC_MAX_RANK);
                    return 0;
                }
                d = r++;
                out->axis[d] = t->axis[i];
                out->dim[d] = 1;
            }
            if (t->dim[i] == 1) continue;
            if (out->dim[d] != 1 && out->dim[d] != t->dim[i]) return conflict(ctx, op, ts, n, t->axis[i]);
            out->dim[d] = t->dim[i];
        }
    }
    out->rank = r;
    for (int k = 0; k < n; k++) fct_strides_for(ts[k], r, out->axis, out->stride[k]);
    return 1;
}
