/* SPDX-License-Identifier: MIT */
/* VJPs of the losses and the 1-D convolutions.
 *
 * cross_entropy: per row, d loss / d logits = softmax(logits) - target
 * distribution, where the target distribution puts 1 - eps on the target
 * class and eps / C on every class (label smoothing eps); times the row's
 * output gradient (NONE), the scalar one (SUM) or that over the number of
 * rows not ignored (MEAN); ignored rows get zeros. f16/bf16 logits are
 * read as f32, as the forward reads them; the gradient is f32.
 * mse: 2 (a - b) times the output gradient (over the element count for
 * MEAN), reduced back to each operand by the forward's broadcasting rule.
 *
 * Convolutions: the gradient of x is the other convolution of the output
 * gradient with the same weights (their two channel axes swapped), the
 * gradient of w a correlation of the output gradient with windows of the
 * input (a strided view contracted by einsum, per group), and the gradient
 * of the bias the output gradient summed over everything but the channels. */
#include <string.h>

#include "autograd/vjp.h"
#include "dispatch/dispatch.h"
#include "tensor/shape_internal.h"


/* One pass over the logits, a row at a time: the row's softmax (the f32
 * row kernel) and the row's gradient written straight into the result, so
 * the backward allocates nothing logits-sized besides the gradient itself
 * (an LLM's logits are the largest tensor of a step). Rows are independent,
 * so the bits do not depend on the thread count. */
typedef struct ce_bw_job {
    fc_dtype dt;
    int orank;                                 /* the axes other than the classes, logits' order */
    int64_t odim[FC_MAX_RANK];
    int64_t lst[FC_MAX_RANK], gst[FC_MAX_RANK]; /* byte strides of logits and gradient along them */
    int64_t lst_c, gst_c;                      /* byte strides along the classes */
    int64_t C;
    const char *logits;
    char *grad;                                /* f32 */
    const int64_t *target;                     /* per row (row-major over the other axes) */
    const float *w;                            /* the row weight: w[r * w_step] */
    int64_t w_step;
    double scale;                              /* times w (MEAN: 1 / rows kept) */
    int64_t ignore;
    double on, off;                            /* 1 - eps on the target class, eps / C on every class */
    float *scratch;                            /* 2C floats per worker */
    int64_t rows, per_chunk;
} ce_bw_job;

static void ce_bw_chunk(void *arg, int64_t c, int worker)
{
    const ce_bw_job *j = arg;
    int64_t r0 = c * j->per_chunk, r1 = r0 + j->per_chunk;
    if (r1 > j->rows) r1 = j->rows;
    if (r0 >= r1) return;
    float *xbuf = j->scratch + (int64_t)worker * 2 * j->C, *p = xbuf + j->C;
    const fck_table *k = fck_kernels();
    int64_t mi[FC_MAX_RANK];
    fcs_unravel(r0, j->orank, j->odim, mi);
    for (int64_t r = r0; r < r1; r++) {
        int64_t lo = 0, go = 0;
        for (int d = 0; d < j->orank; d++) {
            lo += mi[d] * j->lst[d];
            go += mi[d] * j->gst[d];
        }
        fcs_next(j->orank, j->odim, mi);
        char *grow = j->grad + go;
        int64_t t = j->target[r];
        if (t == j->ignore) { /* an ignored row contributes nothing: exact zeros */
            for (int64_t i = 0; i < j->C; i++) memset(grow + i * j->gst_c, 0, 4);
            continue;
        }
        const char *row = j->logits + lo;
        const float *x = fct_row_f32(j->dt, row, j->C, j->lst_c, xbuf);
        k->f32_softmax((size_t)j->C, x, NULL, 1.0f, p);
        double w = (double)j->w[r * j->w_step] * j->scale;
        for (int64_t i = 0; i < j->C; i++) {
            float v = (float)(w * ((double)p[i] - j->off - (i == t ? j->on : 0.0)));
            memcpy(grow + i * j->gst_c, &v, 4);
        }
    }
}

int fca_vjp_cross_entropy(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *logits = n->in[0], *targets = n->in[1];
    const char *cls = n->p.axes[0];
    int64_t kept = n->p.i[2];
    double eps = n->p.d[0];
    int c = fc_tensor_axis_index(logits, cls);
    int64_t C = logits->dim[c];
    ce_bw_job j = {.dt = logits->dtype, .orank = logits->rank - 1, .C = C, .logits = fct_ptr(logits), .w_step = 0,
                   .scale = 1.0, .ignore = n->p.i[1], .on = 1.0 - eps, .off = eps / (double)C, .rows = 1};
    /* The gradient: f32, the logits' named shape and order. */
    fc_tensor *gr = fct_alloc_like(ctx, FC_F32, logits);
    if (!gr) return 0;
    j.grad = fct_ptr(gr);
    size_t es = fc_dtype_size(logits->dtype);
    const char *onames[FC_MAX_RANK];
    for (int i = 0, r = 0; i < logits->rank; i++) {
        if (i == c) continue;
        j.odim[r] = logits->dim[i];
        j.lst[r] = logits->stride[i] * (int64_t)es;
        j.gst[r] = gr->stride[i] * 4;
        onames[r++] = logits->axis[i];
        j.rows *= logits->dim[i];
    }
    j.lst_c = logits->stride[c] * (int64_t)es;
    j.gst_c = gr->stride[c] * 4;
    /* Targets and row weights in the rows' order (the logits' order of the
     * other axes; g of a NONE loss already has it). */
    fc_tensor *t = fca_as(ctx, targets, FC_I64);
    if (t && j.orank > 0) t = fc_permute(ctx, t, onames, j.orank);
    t = fc_contiguous(ctx, t);
    fc_tensor *w = fc_contiguous(ctx, g);
    if (!t || !w) return 0;
    j.target = (const int64_t *)(const void *)fct_ptr(t);
    j.w = (const float *)(const void *)fct_ptr(w);
    switch ((fc_reduction)n->p.i[0]) {
    case FC_REDUCE_NONE: j.w_step = 1; break;
    case FC_REDUCE_SUM: break;
    case FC_REDUCE_MEAN:
        /* Every row ignored: the loss is NaN and, as in PyTorch, the
         * gradient zero (every row takes the ignored branch). */
        j.scale = kept ? 1.0 / (double)kept : 0.0;
        break;
    }
    int threads = fc_ctx_threads(ctx);
    int parallel = threads > 1 && j.rows > 1 && j.rows * C >= FCT_PARALLEL_MIN_ELEMWISE / 4;
    int workers = parallel ? fc_workers_count(fc_ctx_workers(ctx)) : 1;
    fc_storage *sc = fc_storage_new(ctx, (size_t)workers * 2 * (size_t)C * sizeof(float));
    if (!sc) return 0;
    j.scratch = sc->data;
    if (!parallel) {
        j.per_chunk = j.rows;
        ce_bw_chunk(&j, 0, 0);
    } else {
        int64_t chunks = (int64_t)threads * 4;
        if (chunks > j.rows) chunks = j.rows;
        j.per_chunk = (j.rows + chunks - 1) / chunks;
        fc_workers_run(fc_ctx_workers(ctx), (j.rows + j.per_chunk - 1) / j.per_chunk, ce_bw_chunk, &j);
    }
    fc_storage_release(sc);
    gin[0] = gr;
    return 1;
}

int fca_vjp_mse(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *a = n->in[0], *b = n->in[1];
    fc_dtype gd = g->dtype;
    double scale = (fc_reduction)n->p.i[0] == FC_REDUCE_MEAN ? 2.0 / (double)n->p.i[1] : 2.0;
    /* The forward subtracted in f32 too, broadcasting by the same rule. */
    fc_tensor *r = fc_mul(ctx, fc_mul_scalar(ctx, fc_sub(ctx, fca_as(ctx, a, gd), fca_as(ctx, b, gd)), scale), g);
    if (n->needs[0] && !(gin[0] = fca_reduce_to(ctx, r, a))) return 0;
    if (n->needs[1] && !(gin[1] = fca_reduce_to(ctx, fc_neg(ctx, r), b))) return 0;
    return 1;
}

/* ---- convolutions ------------------------------------------------------------ */

/* The names and numbers both convolutions share (defaults resolved and names
 * interned at record time). */
typedef struct conv_p {
    const char *c, *t, *o, *k;
    int64_t stride, pad_l, pad_r, out_pad, dil, groups;
} conv_p;

/* t as [fc.b, ch_new, fc.t]: its axes other than `ch` and `time` merged (in
 * t's order) into fc.b (size 1 when there are none), then the channels, then
 * time. The fixed scratch names cannot clash with the user's. */
static fc_tensor *canon3(fc_ctx *ctx, fc_tensor *t, const char *ch, const char *time, const char *ch_new)
{
    const char *order[FC_MAX_RANK];
    int k = 0;
    int64_t nb = 1;
    for (int i = 0; i < t->rank; i++)
        if (t->axis[i] != ch && t->axis[i] != time) {
            order[k++] = t->axis[i];
            nb *= t->dim[i];
        }
    order[k++] = ch;
    order[k++] = time;
    fc_dim dims[3] = {{"fc.b", nb}, {ch_new, fc_tensor_size(t, ch)}, {"fc.t", fc_tensor_size(t, time)}};
    return fc_reshape(ctx, fc_permute(ctx, t, order, k), dims, 3);
}

/* The weight gradient both convolutions share:
 *   r[P, W, k] = sum over batch and j of plain[P, j] * win[W, j*s + k*d - pad_l]
 * per group (P and W of one group), where j runs over plain's time axis and
 * win reads zeros outside its time axis. conv1d: plain = output gradient,
 * win = x; conv_transpose1d: plain = x, win = output gradient. The result is
 * [fc.p: P (all channels), fc.w: W / groups, fc.k: K]. */
static fc_tensor *conv_wgrad(fc_ctx *ctx, fc_tensor *plain, fc_tensor *win, const conv_p *cp, int64_t K)
{
    fc_tensor *P = canon3(ctx, plain, cp->c, cp->t, "fc.p");
    fc_tensor *W = canon3(ctx, win, cp->c, cp->t, "fc.w");
    if (!P || !W) return NULL;
    int64_t nb = P->dim[0], cw = W->dim[1], lp = P->dim[2], lw = W->dim[2];
    /* Padded so that every window reads inside: the last one ends at
     * (lp - 1) * s + (K - 1) * d. */
    int64_t need = (lp - 1) * cp->stride + (K - 1) * cp->dil + 1;
    int64_t pad_r = need - cp->pad_l - lw;
    fc_tensor *wp = fc_pad(ctx, W, "fc.t", cp->pad_l, pad_r > 0 ? pad_r : 0, 0.0);
    if (!wp) return NULL;
    int64_t lpad = wp->dim[2];
    fc_dim dims[4] = {{"fc.b", nb}, {"fc.w", cw}, {"fc.k", K}, {"fc.t", lp}};
    int64_t strides[4] = {cw * lpad, lpad, cp->dil, cp->stride};
    fc_tensor *col = fc_as_strided(ctx, wp, dims, 4, strides, 0);
    if (cp->groups == 1) return fc_einsum(ctx, P, col, FC_AXES("fc.p", "fc.w", "fc.k"));
    int64_t G = cp->groups;
    P = fc_split_axis(ctx, P, "fc.p", FC_SHAPE({"fc.g", G}, {"fc.p", P->dim[1] / G}));
    col = fc_split_axis(ctx, col, "fc.w", FC_SHAPE({"fc.g", G}, {"fc.w", cw / G}));
    fc_tensor *r = fc_einsum(ctx, P, col, FC_AXES("fc.g", "fc.p", "fc.w", "fc.k"));
    return fc_merge_axes(ctx, r, FC_AXES("fc.g", "fc.p"), "fc.p");
}

/* w with its channel axis and out axis names swapped: the weight of the
 * other convolution. */
static fc_tensor *swap_channels(fc_ctx *ctx, fc_tensor *w, const conv_p *cp)
{
    const char *names[FC_MAX_RANK];
    for (int i = 0; i < w->rank; i++)
        names[i] = w->axis[i] == cp->c ? cp->o : w->axis[i] == cp->o ? cp->c : w->axis[i];
    return fc_rename_all(ctx, w, names, w->rank);
}

/* The bias gradient: g summed over every axis but the channels, named like
 * the bias. */
static fc_tensor *conv_bgrad(fc_ctx *ctx, fc_tensor *g, const conv_p *cp)
{
    const char *axes[FC_MAX_RANK];
    int k = 0;
    for (int i = 0; i < g->rank; i++)
        if (g->axis[i] != cp->c) axes[k++] = g->axis[i];
    return fc_rename_all(ctx, fc_sum(ctx, g, axes, k), &cp->o, 1);
}

int fca_vjp_conv1d(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0], *w = n->in[1];
    fc_conv1d_options o;
    memcpy(&o, n->p.raw, sizeof o);
    conv_p cp = {o.channel_axis, o.time_axis, o.out_axis, o.kernel_axis, o.stride, o.padding[0], o.padding[1], 0,
                 o.dilation, o.groups};
    int64_t K = fc_tensor_size(w, cp.k), L = fc_tensor_size(x, cp.t);
    if (n->needs[0]) {
        /* x's position p fed output j through tap k when p = j*s + k*d - pad_l:
         * the transposed convolution with the same geometry. The forward
         * dropped the last (L + pads - d*(K-1) - 1) mod s inputs' windows;
         * output_padding puts that many samples back so the length is L. */
        int64_t rem = (L + cp.pad_l + cp.pad_r - cp.dil * (K - 1) - 1) % cp.stride;
        fc_conv_transpose1d_options t = {cp.c, cp.t, cp.o, cp.k, cp.stride, {cp.pad_l, cp.pad_r}, rem, cp.dil,
                                         cp.groups};
        if (!(gin[0] = fca_sum_to(ctx, fc_conv_transpose1d(ctx, g, swap_channels(ctx, w, &cp), NULL, &t), x)))
            return 0;
    }
    if (n->needs[1]) {
        fc_tensor *r = conv_wgrad(ctx, g, x, &cp, K);
        if (!(gin[1] = fca_sum_to(ctx, fc_rename_all(ctx, r, ((const char *const[]){cp.o, cp.c, cp.k}), 3), w)))
            return 0;
    }
    if (n->needs[2] && !(gin[2] = fca_sum_to(ctx, conv_bgrad(ctx, g, &cp), n->in[2]))) return 0;
    return 1;
}

int fca_vjp_conv_transpose1d(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0], *w = n->in[1];
    fc_conv_transpose1d_options o;
    memcpy(&o, n->p.raw, sizeof o);
    conv_p cp = {o.channel_axis, o.time_axis, o.out_axis, o.kernel_axis, o.stride, o.padding[0], o.padding[1],
                 o.output_padding, o.dilation, o.groups};
    int64_t K = fc_tensor_size(w, cp.k), L = fc_tensor_size(x, cp.t);
    if (n->needs[0]) {
        /* Output p received x[j] through tap k when p = j*s + k*d - pad_l: the
         * plain convolution with the same geometry reads it back. Its length
         * is at least L (more when output_padding >= stride, possible with
         * dilation); the windows past L are not x's. */
        fc_conv1d_options c = {cp.c, cp.t, cp.o, cp.k, cp.stride, {cp.pad_l, cp.pad_r}, cp.dil, cp.groups};
        fc_tensor *r = fc_conv1d(ctx, g, swap_channels(ctx, w, &cp), NULL, &c);
        if (r && fc_tensor_size(r, cp.t) != L) r = fc_narrow(ctx, r, cp.t, 0, L);
        if (!(gin[0] = fca_sum_to(ctx, r, x))) return 0;
    }
    if (n->needs[1]) {
        fc_tensor *r = conv_wgrad(ctx, x, g, &cp, K);
        if (!(gin[1] = fca_sum_to(ctx, fc_rename_all(ctx, r, ((const char *const[]){cp.c, cp.o, cp.k}), 3), w)))
            return 0;
    }
    if (n->needs[2] && !(gin[2] = fca_sum_to(ctx, conv_bgrad(ctx, g, &cp), n->in[2]))) return 0;
    return 1;
}
