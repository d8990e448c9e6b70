/* SPDX-License-Identifier: MIT */
/* Counter-based random tensors: element i is a pure function of (seed, i),
 * so a tensor's values do not depend on threads or chunking, and a dropout
 * mask can be regenerated instead of stored. The mixer is SplitMix64's
 * finalizer (passes BigCrush as a counter-mode generator). */
#include <math.h>

#include "fucina/nn.h"
#include "tensor/grad_record.h"
#include "tensor/internal.h"
#include "tensor/quant_tensor.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A double in [0, 1) with 53 random bits, for counter i of stream `seed`. */
static double unit(uint64_t seed, uint64_t i)
{
    uint64_t r = mix64(seed * 0x9e3779b97f4a7c15ull + mix64(i + 0x632be59bd9b4e019ull));
    return (double)(r >> 11) * 0x1p-53;
}

typedef struct rand_arg { uint64_t seed; double a, b; fc_dtype dt; int normal; } rand_arg;

static fc_tensor *make(fc_ctx *ctx, const char *op, fc_dtype dt, const fc_dim *dims, int rank, const rand_arg *r)
{
    int64_t sizes[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    if (!ctx) return NULL;
    if (!fct_shape(ctx, op, dims, rank, sizes, names)) return NULL;
    if (!fc_dtype_is_float(dt)) return fc_fail(ctx, FC_ERR_DTYPE, "%s: dtype %s is not a float type", op, fc_dtype_name(dt));
    fc_tensor *t = fct_alloc(ctx, dt, rank, sizes, names);
    if (!t) return NULL;
    int64_t n = fct_numel(t);
    size_t es = fc_dtype_size(dt);
    char *p = fct_ptr(t);
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (r->normal) { /* Box-Muller on counters 2i and 2i+1; 1 - u avoids log(0) */
            double u1 = 1.0 - unit(r->seed, 2 * (uint64_t)i), u2 = unit(r->seed, 2 * (uint64_t)i + 1);
            v = r->a + r->b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        } else {
            v = r->a + (r->b - r->a) * unit(r->seed, (uint64_t)i);
        }
        fct_store(dt, p + (size_t)i * es, v);
    }
    return t;
}

fc_tensor *fc_rand_uniform(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank, uint64_t seed, double lo, double hi)
{
    rand_arg r = {seed, lo, hi, dt, 0};
    return make(ctx, "fc_rand_uniform", dt, dims, rank, &r);
}

fc_tensor *fc_rand_normal(fc_ctx *ctx, fc_dtype dt, const fc_dim *dims, int rank, uint64_t seed, double mean, double std)
{
    rand_arg r = {seed, mean, std, dt, 1};
    return make(ctx, "fc_rand_normal", dt, dims, rank, &r);
}

/* Dropout: element i (row-major over x's axes) is kept when
 * unit(seed, i) >= p and then scaled by 1/(1-p) (in the compute type). The
 * mask is never stored: the VJP regenerates it from (seed, i). */
fc_tensor *fc_dropout(fc_ctx *ctx, fc_tensor *x, double p, uint64_t seed)
{
    FCT_NO_BLOCKS(ctx, "fc_dropout", NULL, x);
    if (!ctx || !x) return NULL;
    char d[FCT_DESC_MAX];
    if (!fc_dtype_is_float(x->dtype))
        return fc_fail(ctx, FC_ERR_DTYPE, "fc_dropout: float input only, not %s", fct_describe(x, d, sizeof d));
    if (!(p >= 0.0 && p < 1.0))
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_dropout: p = %g is outside [0, 1)", p);
    fcg_disable();
    fc_tensor *c = fc_contiguous(ctx, x);
    fcg_enable();
    if (!c) return NULL;
    fc_tensor *y = fct_alloc_like(ctx, x->dtype, x);
    if (!y) return NULL;
    int64_t n = fct_numel(x);
    size_t es = fc_dtype_size(x->dtype);
    const char *src = fct_ptr(c);
    char *dst = fct_ptr(y);
    double scale = 1.0 / (1.0 - p);
    for (int64_t i = 0; i < n; i++) {
        double v = 0.0;
        if (unit(seed, (uint64_t)i) >= p) {
            v = fct_load(x->dtype, src + (size_t)i * es);
            v = x->dtype == FC_F64 ? v * scale : (double)((float)v * (float)scale);
        }
        fct_store(x->dtype, dst + (size_t)i * es, v);
    }
    fc_discard(ctx, c);
    fcg_node *nd = fcg_record(ctx, y, FCG_DROPOUT, "fc_dropout", &x, 1);
    if (nd) {
        nd->p.d[0] = p;
        nd->p.i[0] = (int64_t)seed;
    }
    return y;
}
