/* Counter-based random tensors: element i is a pure function of (seed, i),
 * so a tensor's values do not depend on threads or chunking, and a dropout
 * mask can be regenerated instead of stored. The mixer is SplitMix64's
 * finalizer (passes BigCrush as a counter-mode generator). */
#include <math.h>

#include "tensor/internal.h"

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
