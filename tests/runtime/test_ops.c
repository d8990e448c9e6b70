/* SPDX-License-Identifier: MIT */
/* Elementwise ops, broadcasting by name, comparisons, reductions and
 * contractions against independent references: libm in double precision,
 * direct loops, exact integer arithmetic, and the documented rounding
 * (f16/bf16 = cast up, op in f32, round once). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fucina/fucina.h"
#include "fucina/ops.h"

static fc_ctx *ctx, *ctx1;

static void setup(void)
{
    char err[256];
    fc_ctx_options o2 = {.threads = 2}, o1 = {.threads = 1};
    ctx = fc_ctx_new(&o2, err, sizeof err);
    ctx1 = fc_ctx_new(&o1, err, sizeof err);
    cr_assert(ctx && ctx1, "%s", err);
}
static void teardown(void)
{
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, 0, "leaked %llu", (unsigned long long)fc_ctx_pool_stats(ctx).tensors_live);
    fc_ctx_free(ctx);
    fc_ctx_free(ctx1);
}
TestSuite(ops, .init = setup, .fini = teardown);

static float ulp_diff(float a, float b)
{
    if (isnan(a) && isnan(b)) return 0;
    if (a == b) return 0;
    return fabsf(a - b) / fmaxf(nextafterf(fabsf(b), INFINITY) - fabsf(b), 1e-45f);
}

static double ref_unary(fc_unary_op op, double x)
{
    switch (op) {
    case FC_NEG: return -x;
    case FC_ABS: return fabs(x);
    case FC_SQR: return x * x;
    case FC_SQRT: return sqrt(x);
    case FC_RSQRT: return 1 / sqrt(x);
    case FC_RECIP: return 1 / x;
    case FC_EXP: return exp(x);
    case FC_LOG: return log(x);
    case FC_SIN: return sin(x);
    case FC_COS: return cos(x);
    case FC_TANH: return tanh(x);
    case FC_SIGMOID: return 1 / (1 + exp(-x));
    case FC_SILU: return x / (1 + exp(-x));
    case FC_GELU: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case FC_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case FC_RELU: return x > 0 ? x : 0;
    case FC_SOFTPLUS: return log1p(exp(x));
    }
    return NAN;
}

Test(ops, unary_f32_matches_libm_on_views)
{
    fc_tensor *base = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"r", 33}, {"c", 70}), 1, 0.05, 4.0);
    fc_tensor *x = fc_transpose(ctx, base, "r", "c"); /* non-contiguous */
    for (int op = 0; op < FC_UNARY_COUNT; op++) {
        fc_tensor *y = fc_unary(ctx, (fc_unary_op)op, x);
        fc_tensor *yc = fc_unary(ctx, (fc_unary_op)op, base);
        cr_assert(y && yc, "%s: %s", fc_unary_name((fc_unary_op)op), fc_ctx_error(ctx));
        float worst = 0;
        for (int64_t i = 0; i < 70; i++)
            for (int64_t j = 0; j < 33; j++) {
                int64_t iy[2] = {i, j}, ib[2] = {j, i};
                float got = (float)fc_tensor_get(y, iy);
                float want = (float)ref_unary((fc_unary_op)op, (double)(float)fc_tensor_get(base, ib));
                float d = ulp_diff(got, want);
                if (d > worst) worst = d;
                cr_assert_eq(got, (float)fc_tensor_get(yc, ib), "view and contiguous differ");
            }
        /* Loose bound (gelu/softplus compositions); the kernels' own tests pin ulps. */
        cr_expect(worst <= 8, "%s: %.1f ulp", fc_unary_name((fc_unary_op)op), worst);
        fc_release(y);
        fc_release(yc);
    }
    fc_release(x);
    fc_release(base);
}

Test(ops, half_types_round_once)
{
    fc_tensor *x32 = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"n", 1000}), 2, -3, 3);
    fc_dtype hs[2] = {FC_F16, FC_BF16};
    for (int h = 0; h < 2; h++) {
        fc_tensor *xh = fc_cast(ctx, x32, hs[h]);
        fc_tensor *up = fc_cast(ctx, xh, FC_F32);
        fc_unary_op ops[3] = {FC_EXP, FC_SILU, FC_TANH};
        for (int k = 0; k < 3; k++) {
            fc_tensor *yh = fc_unary(ctx, ops[k], xh);
            fc_tensor *y32 = fc_unary(ctx, ops[k], up);
            fc_tensor *want = fc_cast(ctx, y32, hs[h]);
            cr_expect_arr_eq(fc_tensor_data(yh), fc_tensor_data(want), 2000, "%s %s", fc_dtype_name(hs[h]),
                             fc_unary_name(ops[k]));
            fc_release(yh); fc_release(y32); fc_release(want);
        }
        fc_tensor *s = fc_add(ctx, xh, xh);
        fc_tensor *s32 = fc_add(ctx, up, up);
        fc_tensor *sw = fc_cast(ctx, s32, hs[h]);
        cr_expect_arr_eq(fc_tensor_data(s), fc_tensor_data(sw), 2000);
        fc_release(s); fc_release(s32); fc_release(sw); fc_release(xh); fc_release(up);
    }
    fc_release(x32);
}

Test(ops, binary_broadcasts_by_name)
{
    fc_tensor *a = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"b", 3}, {"d", 5}), 3, -2, 2);
    fc_tensor *b = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"d", 5}, {"h", 4}), 4, 0.5, 2);
    for (int op = 0; op < FC_BINARY_COUNT; op++) {
        fc_tensor *y = fc_binary(ctx, (fc_binary_op)op, a, b);
        cr_assert(y, "%s", fc_ctx_error(ctx));
        char buf[128];
        cr_expect_str_eq(fc_tensor_describe(y, buf, sizeof buf), "f32[b=3, d=5, h=4]");
        for (int64_t i = 0; i < 3; i++)
            for (int64_t j = 0; j < 5; j++)
                for (int64_t k = 0; k < 4; k++) {
                    int64_t ia[2] = {i, j}, ib[2] = {j, k}, iy[3] = {i, j, k};
                    float x = (float)fc_tensor_get(a, ia), z = (float)fc_tensor_get(b, ib), w;
                    switch ((fc_binary_op)op) {
                    case FC_ADD: w = x + z; break;
                    case FC_SUB: w = x - z; break;
                    case FC_MUL: w = x * z; break;
                    case FC_DIV: w = x / z; break;
                    case FC_MAX: w = x > z ? x : z; break;
                    case FC_MIN: w = x < z ? x : z; break;
                    default: w = NAN;
                    }
                    cr_assert_eq((float)fc_tensor_get(y, iy), w, "op %d at %lld,%lld,%lld", op, (long long)i,
                                 (long long)j, (long long)k);
                }
        fc_release(y);
    }
    /* Size conflict: the message names the op, the axis and both shapes. */
    fc_tensor *c = fc_zeros(ctx, FC_F32, FC_SHAPE({"d", 6}));
    cr_expect_null(fc_add(ctx, a, c));
    const char *e = fc_ctx_error(ctx);
    cr_expect(strstr(e, "fc_add") && strstr(e, "\"d\"") && strstr(e, "f32[b=3, d=5]") && strstr(e, "f32[d=6]"), "%s", e);
    fc_ctx_clear_error(ctx);
    fc_tensor *i = fc_zeros(ctx, FC_I32, FC_SHAPE({"d", 5}));
    cr_expect_null(fc_add(ctx, a, i));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    fc_release(a); fc_release(b); fc_release(c); fc_release(i);
}

Test(ops, positional_operands_broadcast_from_the_right)
{
    int64_t s1[2] = {3, 4}, s2[1] = {4};
    fc_tensor *a = fc_empty_pos(ctx, FC_F64, 2, s1), *b = fc_empty_pos(ctx, FC_F64, 1, s2);
    for (int k = 0; k < 12; k++) ((double *)fc_tensor_data(a))[k] = k;
    for (int k = 0; k < 4; k++) ((double *)fc_tensor_data(b))[k] = 100 * k;
    fc_tensor *y = fc_add(ctx, a, b);
    cr_assert(y, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_tensor_rank(y), 2);
    for (int k = 0; k < 12; k++) cr_expect_eq(((double *)fc_tensor_data(y))[k], k + 100 * (k % 4));
    fc_release(a); fc_release(b); fc_release(y);
}

Test(ops, scalar_forms_and_integers)
{
    fc_tensor *x = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"n", 300}), 5, -4, 4);
    fc_tensor *sub = fc_scalar_binary(ctx, FC_SUB, 1.5, x), *div = fc_scalar_binary(ctx, FC_DIV, 3.0, x);
    fc_tensor *mul = fc_mul_scalar(ctx, x, 0.1);
    for (int i = 0; i < 300; i++) {
        float v = ((float *)fc_tensor_data(x))[i];
        cr_assert_eq(((float *)fc_tensor_data(sub))[i], 1.5f - v);
        cr_assert_eq(((float *)fc_tensor_data(div))[i], 3.0f / v);
        cr_assert_eq(((float *)fc_tensor_data(mul))[i], v * 0.1f);
    }
    const int32_t iv[] = {INT32_MAX, INT32_MIN, 7, -7, 5};
    const int32_t jv[] = {1, -1, 2, 2, 0};
    fc_tensor *a = fc_from_data(ctx, FC_I32, FC_SHAPE({"n", 5}), iv, sizeof iv);
    fc_tensor *b = fc_from_data(ctx, FC_I32, FC_SHAPE({"n", 5}), jv, sizeof jv);
    fc_tensor *s = fc_add(ctx, a, b), *q = fc_div(ctx, a, b);
    const int32_t want_s[] = {INT32_MIN, INT32_MAX, 9, -5, 5};   /* wraps */
    const int32_t want_q[] = {INT32_MAX, INT32_MIN, 3, -3, 0};   /* truncates; /0 -> 0; MIN/-1 wraps */
    cr_expect_arr_eq(fc_tensor_data(s), want_s, sizeof want_s);
    cr_expect_arr_eq(fc_tensor_data(q), want_q, sizeof want_q);
    fc_release(x); fc_release(sub); fc_release(div); fc_release(mul);
    fc_release(a); fc_release(b); fc_release(s); fc_release(q);
}

Test(ops, compare_where_clamp)
{
    const float xv[] = {1, NAN, -2, 3, 0.5f};
    fc_tensor *x = fc_from_data(ctx, FC_F32, FC_SHAPE({"n", 5}), xv, sizeof xv);
    fc_tensor *gt = fc_compare_scalar(ctx, FC_GT, x, 0.75), *ne = fc_compare(ctx, FC_NE, x, x);
    const uint8_t want_gt[] = {1, 0, 0, 1, 0}, want_ne[] = {0, 1, 0, 0, 0};
    cr_expect_arr_eq(fc_tensor_data(gt), want_gt, 5);
    cr_expect_arr_eq(fc_tensor_data(ne), want_ne, 5);
    fc_tensor *z = fc_zeros(ctx, FC_F32, FC_SHAPE({"n", 5}));
    fc_tensor *w = fc_where(ctx, gt, x, z);
    fc_tensor *m = fc_masked_fill(ctx, x, ne, -1.0);
    fc_tensor *c = fc_clamp(ctx, x, -1, 2);
    const float want_w[] = {1, 0, 0, 3, 0}, want_m[] = {1, -1, -2, 3, 0.5f};
    cr_expect_arr_eq(fc_tensor_data(w), want_w, sizeof want_w);
    cr_expect_arr_eq(fc_tensor_data(m), want_m, sizeof want_m);
    const float *cv = fc_tensor_data(c);
    cr_expect(cv[0] == 1 && isnan(cv[1]) && cv[2] == -1 && cv[3] == 2 && cv[4] == 0.5f);
    cr_expect_null(fc_where(ctx, x, x, z));
    cr_expect(strstr(fc_ctx_error(ctx), "bool"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(x); fc_release(gt); fc_release(ne); fc_release(z); fc_release(w); fc_release(m); fc_release(c);
}

/* Reductions: double-precision references; bitwise equality across 1 and 2 threads. */
Test(ops, reductions)
{
    fc_tensor *x = fc_rand_normal(ctx, FC_F32, FC_SHAPE({"a", 7}, {"b", 300}, {"c", 90}), 6, 0.5, 2);
    const float *xv = fc_tensor_data(x);
    fc_tensor *sb = fc_sum(ctx, x, FC_AXES("b"));
    fc_tensor *sa = fc_sum(ctx, x, FC_AXES("a"));
    fc_tensor *mc = fc_mean(ctx, x, FC_AXES("c"));
    fc_tensor *vc = fc_var(ctx, x, FC_AXES("a", "c"), 1);
    fc_tensor *mx = fc_max(ctx, x, FC_AXES("b"));
    fc_tensor *nm = fc_norm(ctx, x, FC_NO_AXES);
    fc_tensor *ls = fc_logsumexp(ctx, x, FC_AXES("c"));
    fc_tensor *am = fc_argmax(ctx, x, "b");
    cr_assert(sb && sa && mc && vc && mx && nm && ls && am, "%s", fc_ctx_error(ctx));
    char buf[128];
    cr_expect_str_eq(fc_tensor_describe(sb, buf, sizeof buf), "f32[a=7, c=90]");
    cr_expect_str_eq(fc_tensor_describe(vc, buf, sizeof buf), "f32[b=300]");
    cr_expect_eq(fc_tensor_rank(nm), 0);
#define X(i, j, k) ((double)xv[((i) * 300 + (j)) * 90 + (k)])
    for (int i = 0; i < 7; i++)
        for (int k = 0; k < 90; k++) {
            double s = 0, m = -INFINITY;
            int arg = 0;
            for (int j = 0; j < 300; j++) {
                s += X(i, j, k);
                if (X(i, j, k) > m) { m = X(i, j, k); arg = j; }
            }
            int64_t ix[2] = {i, k};
            cr_assert(fabs(fc_tensor_get(sb, ix) - s) <= 1e-5 * 300 * 3, "sum %g vs %g", fc_tensor_get(sb, ix), s);
            cr_assert_eq(fc_tensor_get(mx, ix), m);
            cr_assert_eq(fc_tensor_get(am, ix), arg);
        }
    for (int j = 0; j < 300; j++) {
        double s = 0, q = 0;
        for (int i = 0; i < 7; i++) for (int k = 0; k < 90; k++) s += X(i, j, k);
        double mean = s / 630;
        for (int i = 0; i < 7; i++) for (int k = 0; k < 90; k++) q += (X(i, j, k) - mean) * (X(i, j, k) - mean);
        int64_t ix[1] = {j};
        cr_assert(fabs(fc_tensor_get(vc, ix) - q / 629) <= 1e-5 * q / 629, "var");
        for (int k = 0; k < 90; k++) {
            double ss = 0;
            for (int i = 0; i < 7; i++) ss += X(i, j, k);
            int64_t iy[2] = {j, k};
            cr_assert(fabs(fc_tensor_get(sa, iy) - ss) <= 1e-5 * 7 * 3);
        }
    }
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 300; j++) {
            double s = 0, m = -INFINITY, e = 0;
            for (int k = 0; k < 90; k++) { s += X(i, j, k); m = fmax(m, X(i, j, k)); }
            for (int k = 0; k < 90; k++) e += exp(X(i, j, k) - m);
            int64_t ix[2] = {i, j};
            cr_assert(fabs(fc_tensor_get(mc, ix) - s / 90) <= 1e-5 * 3);
            cr_assert(fabs(fc_tensor_get(ls, ix) - (m + log(e))) <= 2e-6 * fabs(m + log(e)) + 1e-6);
        }
    double q = 0;
    for (int64_t t = 0; t < 7 * 300 * 90; t++) q += (double)xv[t] * xv[t];
    cr_expect(fabs(fc_tensor_item(nm) - sqrt(q)) <= 1e-6 * sqrt(q));
#undef X
    /* The same bits on one thread. */
    fc_tensor *x1 = fc_from_data(ctx1, FC_F32, FC_SHAPE({"a", 7}, {"b", 300}, {"c", 90}), xv, fc_tensor_nbytes(x));
    fc_tensor *sb1 = fc_sum(ctx1, x1, FC_AXES("b")), *vc1 = fc_var(ctx1, x1, FC_AXES("a", "c"), 1);
    fc_tensor *sa1 = fc_sum(ctx1, x1, FC_AXES("a"));
    cr_expect_arr_eq(fc_tensor_data(sb1), fc_tensor_data(sb), fc_tensor_nbytes(sb));
    cr_expect_arr_eq(fc_tensor_data(vc1), fc_tensor_data(vc), fc_tensor_nbytes(vc));
    cr_expect_arr_eq(fc_tensor_data(sa1), fc_tensor_data(sa), fc_tensor_nbytes(sa));
    fc_release(x1); fc_release(sb1); fc_release(vc1); fc_release(sa1);
    cr_expect_null(fc_sum(ctx, x, FC_AXES("z")));
    cr_expect(strstr(fc_ctx_error(ctx), "fc_sum: no axis \"z\""), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(x); fc_release(sb); fc_release(sa); fc_release(mc); fc_release(vc);
    fc_release(mx); fc_release(nm); fc_release(ls); fc_release(am);
}

Test(ops, cumsum)
{
    fc_tensor *x = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"r", 4}, {"t", 50}), 8, -1, 1);
    fc_tensor *c = fc_cumsum(ctx, x, "t");
    cr_assert(c);
    for (int r = 0; r < 4; r++) {
        float s = 0;
        for (int t = 0; t < 50; t++) {
            int64_t i[2] = {r, t};
            s += (float)fc_tensor_get(x, i);
            cr_assert_eq((float)fc_tensor_get(c, i), s);
        }
    }
    fc_release(x); fc_release(c);
}

/* Contractions against a double-precision loop; bound ~ K * eps * sum|a||b|. */
static void check_contraction(fc_tensor *y, fc_tensor *a, fc_tensor *b, const char *k)
{
    /* Generic reference by enumerating y's index and the contracted axis. */
    int ry = fc_tensor_rank(y);
    int64_t n = fc_tensor_numel(y), K = fc_tensor_size(a, k);
    int64_t idx[8] = {0};
    for (int64_t e = 0; e < n; e++) {
        int64_t rem = e;
        for (int d = ry - 1; d >= 0; d--) { idx[d] = rem % fc_tensor_dim(y, d); rem /= fc_tensor_dim(y, d); }
        double s = 0, bound = 0;
        for (int64_t kk = 0; kk < K; kk++) {
            int64_t ia[8], ib[8];
            for (int d = 0; d < fc_tensor_rank(a); d++) {
                const char *nm = fc_tensor_axis(a, d);
                ia[d] = strcmp(nm, k) == 0 ? kk : idx[fc_tensor_axis_index(y, nm)];
            }
            for (int d = 0; d < fc_tensor_rank(b); d++) {
                const char *nm = fc_tensor_axis(b, d);
                ib[d] = strcmp(nm, k) == 0 ? kk : idx[fc_tensor_axis_index(y, nm)];
            }
            double p = fc_tensor_get(a, ia) * fc_tensor_get(b, ib);
            s += p;
            bound += fabs(p);
        }
        double got = fc_tensor_get(y, idx);
        cr_assert(fabs(got - s) <= 2 * (double)K * 0x1p-24 * bound + 1e-30, "element %lld: %g vs %g", (long long)e, got, s);
    }
}

Test(ops, dot_einsum_matmul_linear)
{
    fc_tensor *x = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"batch", 3}, {"seq", 5}, {"in", 37}), 9, -1, 1);
    fc_tensor *w = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"out", 29}, {"in", 37}), 10, -1, 1);
    fc_tensor *y = fc_dot(ctx, x, w, "in");
    cr_assert(y, "%s", fc_ctx_error(ctx));
    char buf[128];
    cr_expect_str_eq(fc_tensor_describe(y, buf, sizeof buf), "f32[batch=3, seq=5, out=29]");
    check_contraction(y, x, w, "in");
    /* f16 and bf16 weights: reference on the widened values. */
    fc_tensor *wh = fc_cast(ctx, w, FC_F16), *wb = fc_cast(ctx, w, FC_BF16);
    fc_tensor *yh = fc_linear(ctx, x, wh, NULL), *yb = fc_linear(ctx, x, wb, NULL);
    cr_assert(yh && yb, "%s", fc_ctx_error(ctx));
    check_contraction(yh, x, wh, "in");
    check_contraction(yb, x, wb, "in");
    /* Batched: attention-style scores, contracting d with head as batch. */
    fc_tensor *q = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"head", 4}, {"seq", 9}, {"d", 16}), 11, -1, 1);
    fc_tensor *kk = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"kv", 11}, {"head", 4}, {"d", 16}), 12, -1, 1);
    fc_tensor *s = fc_einsum(ctx, q, kk, FC_AXES("head", "seq", "kv"));
    cr_assert(s, "%s", fc_ctx_error(ctx));
    check_contraction(s, q, kk, "d");
    /* Output order other than natural. */
    fc_tensor *s2 = fc_einsum(ctx, q, kk, FC_AXES("kv", "head", "seq"));
    check_contraction(s2, q, kk, "d");
    /* Row axes listed in an order memory cannot merge: A is copied once. */
    fc_tensor *sw = fc_einsum(ctx, x, w, FC_AXES("seq", "batch", "out"));
    cr_assert(sw, "%s", fc_ctx_error(ctx));
    cr_expect_str_eq(fc_tensor_describe(sw, buf, sizeof buf), "f32[seq=5, batch=3, out=29]");
    check_contraction(sw, x, w, "in");
    fc_release(sw);
    /* A private axis dropped from the output is summed first. */
    fc_tensor *u = fc_einsum(ctx, x, w, FC_AXES("out"));
    fc_tensor *xs = fc_sum(ctx, x, FC_AXES("batch", "seq"));
    check_contraction(u, xs, w, "in");
    /* Positional matmul. */
    int64_t sa[2] = {6, 7}, sb[2] = {7, 5};
    fc_tensor *ma = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({NULL, 6}, {NULL, 7}), 13, -1, 1);
    fc_tensor *mb = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({NULL, 7}, {NULL, 5}), 14, -1, 1);
    (void)sa; (void)sb;
    fc_tensor *mm = fc_matmul(ctx, ma, mb);
    cr_assert(mm, "%s", fc_ctx_error(ctx));
    cr_expect_str_eq(fc_tensor_describe(mm, buf, sizeof buf), "f32[_0=6, _1=5]");
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 5; j++) {
            double r = 0;
            for (int t = 0; t < 7; t++) {
                int64_t ia[2] = {i, t}, ib[2] = {t, j};
                r += fc_tensor_get(ma, ia) * fc_tensor_get(mb, ib);
            }
            int64_t iy[2] = {i, j};
            cr_assert(fabs(fc_tensor_get(mm, iy) - r) < 1e-5);
        }
    /* Errors. */
    cr_expect_null(fc_dot(ctx, x, w, "out"));
    cr_expect(strstr(fc_ctx_error(ctx), "fc_dot") && strstr(fc_ctx_error(ctx), "\"out\""), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_tensor *bad = fc_zeros(ctx, FC_F32, FC_SHAPE({"out", 3}, {"in", 36}));
    cr_expect_null(fc_linear(ctx, x, bad, NULL));
    cr_expect(strstr(fc_ctx_error(ctx), "\"in\""), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
    fc_release(x); fc_release(w); fc_release(y); fc_release(wh); fc_release(wb); fc_release(yh); fc_release(yb);
    fc_release(q); fc_release(kk); fc_release(s); fc_release(s2); fc_release(u); fc_release(xs);
    fc_release(ma); fc_release(mb); fc_release(mm); fc_release(bad);
}

Test(ops, integer_reductions)
{
    const int16_t v[] = {3, -7, 9, 9, -32768, 32767, 1, 0};
    fc_tensor *x = fc_from_data(ctx, FC_I16, FC_SHAPE({"r", 2}, {"c", 4}), v, sizeof v);
    fc_tensor *s = fc_sum(ctx, x, FC_AXES("c")), *m = fc_max(ctx, x, FC_AXES("c")), *a = fc_argmax(ctx, x, "c");
    fc_tensor *n = fc_min(ctx, x, FC_NO_AXES);
    cr_assert(s && m && a && n, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_tensor_dtype(s), FC_I64);
    cr_expect_eq(fc_tensor_dtype(m), FC_I16);
    const int64_t ws[] = {14, 0}, wa[] = {2, 1};
    const int16_t wm[] = {9, 32767};
    cr_expect_arr_eq(fc_tensor_data(s), ws, sizeof ws);
    cr_expect_arr_eq(fc_tensor_data(m), wm, sizeof wm);
    cr_expect_arr_eq(fc_tensor_data(a), wa, sizeof wa);
    cr_expect_eq(fc_tensor_item(n), -32768);
    cr_expect_null(fc_mean(ctx, x, FC_AXES("c")));
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_DTYPE);
    fc_ctx_clear_error(ctx);
    fc_release(x); fc_release(s); fc_release(m); fc_release(a); fc_release(n);
}

/* A NULL axis list with a non-zero count is refused (FC_ERR_INVALID_ARG,
 * naming the op), as a NULL shape is elsewhere; it used to be dereferenced. */
static void expect_null_list(const char *op)
{
    cr_expect_eq(fc_ctx_status(ctx), FC_ERR_INVALID_ARG, "%s: got %s: %s", op, fc_status_name(fc_ctx_status(ctx)),
                 fc_ctx_error(ctx));
    cr_expect(strstr(fc_ctx_error(ctx), op) && strstr(fc_ctx_error(ctx), "NULL"), "%s", fc_ctx_error(ctx));
    fc_ctx_clear_error(ctx);
}

Test(ops, sum_null_axes_with_count)
{
    fc_tensor *x = fc_zeros(ctx, FC_F32, FC_SHAPE({"a", 2}, {"b", 3}));
    cr_expect_null(fc_sum(ctx, x, NULL, 1));
    expect_null_list("fc_sum");
    fc_release(x);
}

Test(ops, mean_null_axes_with_count)
{
    fc_tensor *x = fc_zeros(ctx, FC_F32, FC_SHAPE({"a", 2}, {"b", 3}));
    cr_expect_null(fc_mean(ctx, x, NULL, 2));
    expect_null_list("fc_mean");
    fc_release(x);
}

Test(ops, einsum_null_output_with_count)
{
    fc_tensor *a = fc_zeros(ctx, FC_F32, FC_SHAPE({"m", 2}, {"k", 3}));
    fc_tensor *b = fc_zeros(ctx, FC_F32, FC_SHAPE({"k", 3}, {"n", 4}));
    cr_expect_null(fc_einsum(ctx, a, b, NULL, 2));
    expect_null_list("fc_einsum");
    fc_release(a);
    fc_release(b);
}
