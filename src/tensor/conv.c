/* SPDX-License-Identifier: MIT */
/* 1-D convolution and transposed convolution (f32) by im2col / col2im and
 * the f32 GEMM. Per batch element and group:
 *   conv1d:    Y_g[Cout_g, Lout] = W_g[Cout_g, Cin_g*K] . col[Cin_g*K, Lout]
 *   transpose: col[Cout_g*K, L] = W_g^T[Cout_g*K, Cin_g] . X_g[Cin_g, L],
 *              then col2im adds col into Y in a fixed order.
 * The result is computed as [batch..., c, t] and permuted to x's axis order
 * when that differs. */
#include <string.h>

#include "fucina/conv.h"
#include "exec/gemm.h"
#include "tensor/grad_record.h"
#include "tensor/shape_internal.h"
#include "tensor/quant_tensor.h"

typedef struct conv_geom {
    const char *cname, *tname, *oname, *kname;
    int xc, xt, wc, wo, wk;
    int nbat;                       /* batch axes of x, in x's order */
    int bax[FC_MAX_RANK];
    int64_t nb;                     /* product of the batch sizes */
    int64_t cin, cout, k, len, lout;
    int64_t stride, pad_l, pad_r, dil, groups, out_pad;
} conv_geom;

static const char *or_default(const char *s, const char *def) { return s ? s : def; }

/* Shared checks; fills g. `transpose` picks the weight layout and length rule. */
static int conv_setup(fc_ctx *ctx, const char *op, const fc_tensor *x, const fc_tensor *w, const fc_tensor *bias,
                      int transpose, conv_geom *g)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (!(g->cname = fct_name(ctx, op, g->cname)) || !(g->tname = fct_name(ctx, op, g->tname)) ||
        !(g->oname = fct_name(ctx, op, g->oname)) || !(g->kname = fct_name(ctx, op, g->kname)))
        return 0;
    if (g->cname == g->tname || g->cname == g->oname || g->cname == g->kname || g->oname == g->kname) {
        fc_fail(ctx, FC_ERR_AXIS, "%s: the channel axis \"%s\", time axis \"%s\", out axis \"%s\" and kernel axis \"%s\" must be distinct names",
                op, g->cname, g->tname, g->oname, g->kname);
        return 0;
    }
    if (x->dtype != FC_F32 || w->dtype != FC_F32 || (bias && bias->dtype != FC_F32)) {
        fc_fail(ctx, FC_ERR_DTYPE, "%s: x %s, w %s%s%s must be f32 (channel axis \"%s\")", op,
                fct_describe(x, d1, sizeof d1), fct_describe(w, d2, sizeof d2), bias ? " and bias " : "",
                bias ? fc_dtype_name(bias->dtype) : "", g->cname);
        return 0;
    }
    if ((g->xc = fct_axis(ctx, op, x, g->cname)) < 0 || (g->xt = fct_axis(ctx, op, x, g->tname)) < 0) return 0;
    if (w->rank != 3) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: the weight %s must have 3 axes: \"%s\", \"%s\" and \"%s\"", op,
                fct_describe(w, d1, sizeof d1), g->oname, g->cname, g->kname);
        return 0;
    }
    if ((g->wc = fct_axis(ctx, op, w, g->cname)) < 0 || (g->wo = fct_axis(ctx, op, w, g->oname)) < 0 ||
        (g->wk = fct_axis(ctx, op, w, g->kname)) < 0)
        return 0;
    if (g->stride < 1 || g->dil < 1 || g->groups < 1 || g->pad_l < 0 || g->pad_r < 0 || g->out_pad < 0) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "%s: stride %lld, dilation %lld and groups %lld must be >= 1 and padding (%lld, %lld) >= 0 (time axis \"%s\")",
                op, (long long)g->stride, (long long)g->dil, (long long)g->groups, (long long)g->pad_l,
                (long long)g->pad_r, g->tname);
        return 0;
    }
    g->cin = x->dim[g->xc];
    g->len = x->dim[g->xt];
    g->k = w->dim[g->wk];
    if (g->cin % g->groups != 0) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: %lld groups do not divide the %lld input channels (axis \"%s\") of %s", op,
                (long long)g->groups, (long long)g->cin, g->cname, fct_describe(x, d1, sizeof d1));
        return 0;
    }
    int64_t want_wc = transpose ? g->cin : g->cin / g->groups;
    if (w->dim[g->wc] != want_wc) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" of the weight %s has size %lld; x %s with %lld groups needs %lld", op,
                g->cname, fct_describe(w, d1, sizeof d1), (long long)w->dim[g->wc], fct_describe(x, d2, sizeof d2),
                (long long)g->groups, (long long)want_wc);
        return 0;
    }
    if (transpose) {
        g->cout = w->dim[g->wo] * g->groups;
    } else {
        g->cout = w->dim[g->wo];
        if (g->cout % g->groups != 0) {
            fc_fail(ctx, FC_ERR_SHAPE, "%s: %lld groups do not divide the %lld output channels (axis \"%s\") of %s", op,
                    (long long)g->groups, (long long)g->cout, g->oname, fct_describe(w, d1, sizeof d1));
            return 0;
        }
    }
    if (bias && (bias->rank != 1 || bias->axis[0] != g->oname || bias->dim[0] != g->cout)) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: bias %s must be [%s=%lld]", op, fct_describe(bias, d1, sizeof d1), g->oname,
                (long long)g->cout);
        return 0;
    }
    if (transpose) {
        int64_t mx = g->stride > g->dil ? g->stride : g->dil;
        if (g->out_pad >= mx) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: output_padding %lld must be smaller than stride %lld or dilation %lld (time axis \"%s\")",
                    op, (long long)g->out_pad, (long long)g->stride, (long long)g->dil, g->tname);
            return 0;
        }
        g->lout = (g->len - 1) * g->stride - g->pad_l - g->pad_r + g->dil * (g->k - 1) + g->out_pad + 1;
    } else {
        int64_t span = g->len + g->pad_l + g->pad_r - g->dil * (g->k - 1) - 1;
        g->lout = span < 0 ? 0 : span / g->stride + 1;
    }
    if (g->lout < 1) {
        fc_fail(ctx, FC_ERR_SHAPE, "%s: time axis \"%s\" of %s gives output length %lld (kernel %lld, stride %lld, padding (%lld, %lld), dilation %lld)",
                op, g->tname, fct_describe(x, d1, sizeof d1), (long long)g->lout, (long long)g->k, (long long)g->stride,
                (long long)g->pad_l, (long long)g->pad_r, (long long)g->dil);
        return 0;
    }
    g->nbat = 0;
    g->nb = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i == g->xc || i == g->xt) continue;
        g->bax[g->nbat++] = i;
        g->nb *= x->dim[i];
    }
    return 1;
}

/* The canonical result [batch..., c, t]. */
static fc_tensor *alloc_canonical(fc_ctx *ctx, const fc_tensor *x, const conv_geom *g)
{
    int64_t dim[FC_MAX_RANK];
    const char *names[FC_MAX_RANK];
    for (int i = 0; i < g->nbat; i++) {
        dim[i] = x->dim[g->bax[i]];
        names[i] = x->axis[g->bax[i]];
    }
    dim[g->nbat] = g->cout;
    names[g->nbat] = x->axis[g->xc];
    dim[g->nbat + 1] = g->lout;
    names[g->nbat + 1] = x->axis[g->xt];
    return fct_alloc(ctx, FC_F32, g->nbat + 2, dim, names);
}

/* y in x's axis order (y itself when the orders agree). */
static fc_tensor *to_x_order(fc_ctx *ctx, const fc_tensor *x, fc_tensor *y, const conv_geom *g)
{
    if (g->xc == x->rank - 2 && g->xt == x->rank - 1) return y;
    int64_t dim[FC_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dim[i] = x->dim[i];
    dim[g->xc] = g->cout;
    dim[g->xt] = g->lout;
    fc_tensor *r = fct_alloc(ctx, FC_F32, x->rank, dim, x->axis);
    if (r) {
        int64_t dst_st[FC_MAX_RANK], src_st[FC_MAX_RANK];
        fcs_byte_strides(r, dst_st);
        fct_strides_for(y, r->rank, r->axis, src_st);
        fcs_copy(ctx, r->rank, r->dim, fct_ptr(r), dst_st, fct_ptr(y), src_st, 4, 0);
    }
    fc_discard(ctx, y);
    return r;
}

/* Element offset of batch element b in x. */
static int64_t batch_offset(const fc_tensor *x, const conv_geom *g, int64_t b)
{
    int64_t off = 0;
    for (int i = g->nbat - 1; i >= 0; i--) {
        int64_t n = x->dim[g->bax[i]];
        off += (b % n) * x->stride[g->bax[i]];
        b /= n;
    }
    return off;
}

static void add_bias(float *y, const fc_tensor *bias, int64_t cout, int64_t lout)
{
    const float *bp = (const float *)(const void *)fct_ptr(bias);
    for (int64_t c = 0; c < cout; c++) {
        float bv = bp[c * bias->stride[0]];
        for (int64_t j = 0; j < lout; j++) y[c * lout + j] += bv;
    }
}

static void fill_geom_names(conv_geom *g, const char *c, const char *t, const char *o, const char *k)
{
    g->cname = or_default(c, "c");
    g->tname = or_default(t, "t");
    g->oname = or_default(o, "c_out");
    g->kname = or_default(k, "k");
}

_Static_assert(sizeof(fc_conv_transpose1d_options) <= sizeof(((fcg_params *)0)->raw) &&
                   sizeof(fc_conv1d_options) <= sizeof(((fcg_params *)0)->raw),
               "conv options must fit a backward record's raw parameters");

/* Record y = op(x, w, bias) with the resolved options `opt` (copied into
 * p.raw) and `flops` of work. bias may be NULL (an empty operand slot). */
static void record_conv(fc_ctx *ctx, fc_tensor *y, fcg_op id, const char *op, fc_tensor *x, fc_tensor *w,
                        fc_tensor *bias, const void *opt, size_t size, double flops)
{
    fc_tensor *in[3] = {x, w, bias};
    fcg_node *nd = fcg_record(ctx, y, id, op, in, 3);
    if (!nd) return;
    memcpy(nd->p.raw, opt, size);
    nd->work = flops;
}

fc_tensor *fc_conv1d(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias, const fc_conv1d_options *opt)
{
    FCT_NO_BLOCKS(ctx, "fc_conv1d", NULL, x, w, bias);
    if (!ctx || !x || !w) return NULL;
    static const fc_conv1d_options defaults = {0};
    if (!opt) opt = &defaults;
    const char *op = "fc_conv1d";
    conv_geom g = {0};
    fill_geom_names(&g, opt->channel_axis, opt->time_axis, opt->out_axis, opt->kernel_axis);
    g.stride = opt->stride ? opt->stride : 1;
    g.dil = opt->dilation ? opt->dilation : 1;
    g.groups = opt->groups ? opt->groups : 1;
    g.pad_l = opt->padding[0];
    g.pad_r = opt->padding[1];
    if (!conv_setup(ctx, op, x, w, bias, 0, &g)) return NULL;

    const int64_t G = g.groups, cin_g = g.cin / G, cout_g = g.cout / G, K = g.k, KK = cin_g * K;
    const int64_t L = g.len, Lout = g.lout;
    /* Weights packed [cout][cin_g][k]; im2col only when a tap reads padding
     * or K > 1 (otherwise the GEMM reads x through its strides). */
    int direct = K == 1 && g.pad_l == 0 && g.pad_r == 0;
    size_t wbytes = (size_t)(g.cout * KK) * 4, cbytes = direct ? 0 : (size_t)(KK * Lout) * 4;
    fc_storage *sc = fc_storage_new(ctx, wbytes + cbytes);
    if (!sc) return NULL;
    float *wp = sc->data, *col = (float *)(void *)((char *)sc->data + wbytes);
    {
        const float *wb = (const float *)(const void *)fct_ptr(w);
        int64_t so = w->stride[g.wo], si = w->stride[g.wc], sk = w->stride[g.wk];
        for (int64_t o = 0; o < g.cout; o++)
            for (int64_t i = 0; i < cin_g; i++)
                for (int64_t kk = 0; kk < K; kk++) wp[(o * cin_g + i) * K + kk] = wb[o * so + i * si + kk * sk];
    }
    fc_tensor *y = alloc_canonical(ctx, x, &g);
    if (!y) {
        fc_storage_release(sc);
        return NULL;
    }
    float *yp = (float *)(void *)fct_ptr(y);
    const float *xp = (const float *)(const void *)fct_ptr(x);
    const int64_t sc_x = x->stride[g.xc], st_x = x->stride[g.xt];
    fc_workers *wk = fc_ctx_workers(ctx);
    for (int64_t b = 0; b < g.nb; b++) {
        const float *xb = xp + batch_offset(x, &g, b);
        for (int64_t gi = 0; gi < G; gi++) {
            const float *xg = xb + gi * cin_g * sc_x;
            fc_gemm_args ga = {.m = cout_g, .n = Lout, .k = KK, .a = wp + gi * cout_g * KK, .rsa = KK, .csa = 1,
                               .btype = FC_GEMM_B_F32, .c = yp + (b * g.cout + gi * cout_g) * Lout, .ldc = Lout};
            if (direct) {
                ga.b = xg;
                ga.rsb = sc_x;
                ga.csb = g.stride * st_x;
            } else {
                for (int64_t i = 0; i < cin_g; i++) {
                    for (int64_t kk = 0; kk < K; kk++) {
                        float *row = col + (i * K + kk) * Lout;
                        int64_t p0 = kk * g.dil - g.pad_l;
                        for (int64_t j = 0; j < Lout; j++) {
                            int64_t p = p0 + j * g.stride;
                            row[j] = p >= 0 && p < L ? xg[i * sc_x + p * st_x] : 0.0f;
                        }
                    }
                }
                ga.b = col;
                ga.rsb = Lout;
                ga.csb = 1;
            }
            if (fc_gemm_f32(wk, &ga) != 0) {
                fc_storage_release(sc);
                fc_discard(ctx, y);
                return fc_fail(ctx, FC_ERR_OOM, "%s: GEMM scratch for %lldx%lldx%lld (time axis \"%s\") could not be allocated",
                               op, (long long)cout_g, (long long)Lout, (long long)KK, g.tname);
            }
        }
        if (bias) add_bias(yp + b * g.cout * Lout, bias, g.cout, Lout);
    }
    fc_storage_release(sc);
    y = to_x_order(ctx, x, y, &g);
    /* The record keeps the options with every default filled in and the
     * names interned (the caller's strings need not outlive the graph). */
    fc_conv1d_options ro = {g.cname, g.tname, g.oname, g.kname, g.stride, {g.pad_l, g.pad_r}, g.dil, g.groups};
    record_conv(ctx, y, FCG_CONV1D, op, x, w, bias, &ro, sizeof ro, (double)(g.nb * g.cout * Lout * KK) * 2.0);
    return y;
}

fc_tensor *fc_conv_transpose1d(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias,
                               const fc_conv_transpose1d_options *opt)
{
    FCT_NO_BLOCKS(ctx, "fc_conv_transpose1d", NULL, x, w, bias);
    if (!ctx || !x || !w) return NULL;
    static const fc_conv_transpose1d_options defaults = {0};
    if (!opt) opt = &defaults;
    const char *op = "fc_conv_transpose1d";
    conv_geom g = {0};
    fill_geom_names(&g, opt->channel_axis, opt->time_axis, opt->out_axis, opt->kernel_axis);
    g.stride = opt->stride ? opt->stride : 1;
    g.dil = opt->dilation ? opt->dilation : 1;
    g.groups = opt->groups ? opt->groups : 1;
    g.pad_l = opt->padding[0];
    g.pad_r = opt->padding[1];
    g.out_pad = opt->output_padding;
    if (!conv_setup(ctx, op, x, w, bias, 1, &g)) return NULL;

    const int64_t G = g.groups, cin_g = g.cin / G, cout_g = g.cout / G, K = g.k, M = cout_g * K;
    const int64_t L = g.len, Lout = g.lout;
    /* Weights packed per group as [cout_g*K][cin_g] (the transposed A). */
    size_t wbytes = (size_t)(G * M * cin_g) * 4, cbytes = (size_t)(M * L) * 4;
    fc_storage *sc = fc_storage_new(ctx, wbytes + cbytes);
    if (!sc) return NULL;
    float *wp = sc->data, *col = (float *)(void *)((char *)sc->data + wbytes);
    {
        const float *wb = (const float *)(const void *)fct_ptr(w);
        int64_t si = w->stride[g.wc], so = w->stride[g.wo], sk = w->stride[g.wk];
        for (int64_t gi = 0; gi < G; gi++)
            for (int64_t o = 0; o < cout_g; o++)
                for (int64_t kk = 0; kk < K; kk++)
                    for (int64_t i = 0; i < cin_g; i++)
                        wp[(gi * M + o * K + kk) * cin_g + i] = wb[(gi * cin_g + i) * si + o * so + kk * sk];
    }
    fc_tensor *y = alloc_canonical(ctx, x, &g);
    if (!y) {
        fc_storage_release(sc);
        return NULL;
    }
    float *yp = (float *)(void *)fct_ptr(y);
    memset(yp, 0, (size_t)(g.nb * g.cout * Lout) * 4);
    const float *xp = (const float *)(const void *)fct_ptr(x);
    const int64_t sc_x = x->stride[g.xc], st_x = x->stride[g.xt];
    fc_workers *wk = fc_ctx_workers(ctx);
    for (int64_t b = 0; b < g.nb; b++) {
        const float *xb = xp + batch_offset(x, &g, b);
        for (int64_t gi = 0; gi < G; gi++) {
            fc_gemm_args ga = {.m = M, .n = L, .k = cin_g, .a = wp + gi * M * cin_g, .rsa = cin_g, .csa = 1,
                               .b = xb + gi * cin_g * sc_x, .btype = FC_GEMM_B_F32, .rsb = sc_x, .csb = st_x,
                               .c = col, .ldc = L};
            if (fc_gemm_f32(wk, &ga) != 0) {
                fc_storage_release(sc);
                fc_discard(ctx, y);
                return fc_fail(ctx, FC_ERR_OOM, "%s: GEMM scratch for %lldx%lldx%lld (time axis \"%s\") could not be allocated",
                               op, (long long)M, (long long)L, (long long)cin_g, g.tname);
            }
            /* col2im: output o = j*stride + kk*dilation - pad_l. */
            float *yg = yp + (b * g.cout + gi * cout_g) * Lout;
            for (int64_t o = 0; o < cout_g; o++) {
                float *yrow = yg + o * Lout;
                for (int64_t kk = 0; kk < K; kk++) {
                    const float *crow = col + (o * K + kk) * L;
                    int64_t p0 = kk * g.dil - g.pad_l;
                    for (int64_t j = 0; j < L; j++) {
                        int64_t p = p0 + j * g.stride;
                        if (p >= 0 && p < Lout) yrow[p] += crow[j];
                    }
                }
            }
        }
        if (bias) add_bias(yp + b * g.cout * Lout, bias, g.cout, Lout);
    }
    fc_storage_release(sc);
    y = to_x_order(ctx, x, y, &g);
    fc_conv_transpose1d_options ro = {g.cname, g.tname, g.oname, g.kname, g.stride, {g.pad_l, g.pad_r}, g.out_pad,
                                      g.dil, g.groups};
    record_conv(ctx, y, FCG_CONV_TRANSPOSE1D, op, x, w, bias, &ro, sizeof ro,
                (double)(g.nb * M * L * cin_g * G) * 2.0);
    return y;
}
