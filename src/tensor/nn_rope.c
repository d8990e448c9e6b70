/* SPDX-License-Identifier: MIT */
/* fc_rope: rotary position embedding over named axes, a wrapper of the
 * exec layer's table builder and rotation (src/exec/rope.h).
 *
 * f32 x whose dim axis is its last (contiguous) axis is rotated straight
 * into the result, any strides on the other axes. Anything else (f16/bf16,
 * the dim axis elsewhere or strided) is copied to an f32 [batch..., token,
 * head, dim] temporary, rotated in place and copied into the result in x's
 * order (rounding once for f16/bf16). Other axes of x are batch axes that
 * share the positions; each batch index is one call of the rotation. */
#include <math.h>
#include <string.h>

#include "exec/rope.h"
#include "fucina/nn.h"
#include "tensor/grad_record.h"
#include "tensor/internal.h"
#include "tensor/quant_tensor.h"

#define OP "fc_rope"

/* The last tables this thread built, with their whole input as the key:
 * decode rotates q and k of every layer at the same position with the same
 * parameters, and each table costs n_rot sin/cos per position (~2 us per
 * call at n_rot = 128). Thread-local, so no lock and nothing shared between
 * threads; small tables only, and not with freq_factors (their values would
 * have to join the key). */
#define ROPE_MEMO_POS 16
#define ROPE_MEMO_FLOATS 1024
static _Thread_local struct rope_memo {
    int valid;
    fc_rope_params p; /* freq_factors NULL */
    int64_t n_tok, pos[ROPE_MEMO_POS];
    float cos_tab[ROPE_MEMO_FLOATS], sin_tab[ROPE_MEMO_FLOATS];
} rope_memo;

static int memo_matches(const struct rope_memo *m, const fc_rope_params *p, const int64_t *pos, int64_t n_tok)
{
    /* field by field (the struct has padding); the floats are finite */
    if (!m->valid || m->n_tok != n_tok || m->p.n_rot != p->n_rot || m->p.theta_base != p->theta_base ||
        m->p.freq_scale != p->freq_scale || m->p.n_ctx_orig != p->n_ctx_orig || m->p.ext_factor != p->ext_factor ||
        m->p.attn_factor != p->attn_factor || m->p.beta_fast != p->beta_fast || m->p.beta_slow != p->beta_slow ||
        m->p.f64_angles != p->f64_angles)
        return 0;
    return memcmp(m->pos, pos, (size_t)n_tok * sizeof *pos) == 0;
}

/* fc_rope_cache_f32 through the memo: 0, or -2 on invalid parameters */
static int rope_tables(const fc_rope_params *p, const int64_t *pos, int64_t n_tok, float *cos_tab, float *sin_tab)
{
    const int64_t half = p->n_rot / 2;
    struct rope_memo *m = &rope_memo;
    const int memo = !p->freq_factors && n_tok <= ROPE_MEMO_POS && n_tok * half <= ROPE_MEMO_FLOATS;
    const size_t bytes = (size_t)(n_tok * half) * sizeof(float);
    if (memo && memo_matches(m, p, pos, n_tok)) {
        memcpy(cos_tab, m->cos_tab, bytes);
        memcpy(sin_tab, m->sin_tab, bytes);
        return 0;
    }
    const int rc = fc_rope_cache_f32(p, pos, n_tok, cos_tab, sin_tab, half);
    if (rc == 0 && memo) {
        m->p = *p;
        m->n_tok = n_tok;
        memcpy(m->pos, pos, (size_t)n_tok * sizeof *pos);
        memcpy(m->cos_tab, cos_tab, bytes);
        memcpy(m->sin_tab, sin_tab, bytes);
        m->valid = 1;
    }
    return rc;
}

_Static_assert(sizeof(fc_rope_options) <= sizeof(((fcg_params *)0)->raw), "fc_rope_options fits a record");

/* The backward record: operands x, positions and freq_factors (the user's
 * tensors; only x is differentiable), and the options with the axis names
 * replaced by x's interned ones (the caller's strings need not outlive the
 * call) and freq_factors by NULL (the VJP takes operand 2). The VJP is this
 * op with `backward` flipped: the transposed rotation, same tables. */
static void record(fc_ctx *ctx, fc_tensor *y, fc_tensor *x, fc_tensor *positions, const fc_rope_options *opt, int ta,
                   int ha, int da)
{
    fc_tensor *in[3] = {x, positions, opt->freq_factors};
    fcg_node *n = fcg_record(ctx, y, FCG_ROPE, OP, in, 3);
    if (!n) return;
    fc_rope_options o = *opt;
    o.token_axis = x->axis[ta];
    o.head_axis = ha >= 0 ? x->axis[ha] : NULL;
    o.dim_axis = x->axis[da];
    o.freq_factors = NULL;
    memcpy(n->p.raw, &o, sizeof o);
}

fc_tensor *fc_rope(fc_ctx *ctx, fc_tensor *x, fc_tensor *positions, const fc_rope_options *opt)
{
    FCT_NO_BLOCKS(ctx, "fc_rope", NULL, x, positions);
    if (!ctx || !x || !positions) return NULL;
    static const fc_rope_options defaults = {0};
    if (!opt) opt = &defaults;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (x->dtype != FC_F32 && x->dtype != FC_F16 && x->dtype != FC_BF16)
        return fc_fail(ctx, FC_ERR_DTYPE, OP ": x is %s; it takes f32, f16 or bf16", fct_describe(x, d1, sizeof d1));
    int ta = fct_axis(ctx, OP, x, opt->token_axis ? opt->token_axis : "seq");
    if (ta < 0) return NULL;
    int da = fct_axis(ctx, OP, x, opt->dim_axis ? opt->dim_axis : "d");
    if (da < 0) return NULL;
    int ha = -1;
    if (opt->head_axis) {
        ha = fct_axis(ctx, OP, x, opt->head_axis);
        if (ha < 0) return NULL;
    } else {
        ha = fc_tensor_axis_index(x, "head");
    }
    if (ha == ta || ha == da || ta == da)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": the token, head and dim axes of %s must differ (\"%s\")",
                       fct_describe(x, d1, sizeof d1), x->axis[ta == da ? ta : ha]);
    const int64_t n_tok = x->dim[ta], n_head = ha >= 0 ? x->dim[ha] : 1, head_dim = x->dim[da];

    if (positions->dtype != FC_I32 && positions->dtype != FC_I64)
        return fc_fail(ctx, FC_ERR_DTYPE, OP ": positions %s for axis \"%s\" must be i32 or i64",
                       fct_describe(positions, d1, sizeof d1), x->axis[ta]);
    if (positions->rank != 1 || positions->axis[0] != x->axis[ta] || positions->dim[0] != n_tok)
        return fc_fail(ctx, FC_ERR_SHAPE, OP ": positions %s must be rank 1 over axis \"%s\" of size %lld (x is %s)",
                       fct_describe(positions, d1, sizeof d1), x->axis[ta], (long long)n_tok,
                       fct_describe(x, d2, sizeof d2));

    fc_rope_mode mode;
    switch (opt->style) {
    case FC_ROPE_STYLE_NORMAL: mode = FC_ROPE_NORMAL; break;
    case FC_ROPE_STYLE_NEOX: mode = FC_ROPE_NEOX; break;
    default:
        return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": style %d is not FC_ROPE_STYLE_NORMAL or FC_ROPE_STYLE_NEOX",
                       (int)opt->style);
    }
    const int64_t n_rot = opt->n_rot ? opt->n_rot : head_dim;
    if (n_rot < 2 || n_rot % 2 || n_rot > head_dim)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": n_rot %lld must be even and in [2, %lld] (axis \"%s\" of %s)",
                       (long long)n_rot, (long long)head_dim, x->axis[da], fct_describe(x, d1, sizeof d1));
    fc_rope_params p;
    fc_rope_params_default(&p, n_rot);
    if (opt->theta != 0.0) p.theta_base = (float)opt->theta;
    if (opt->freq_scale != 0.0) p.freq_scale = (float)opt->freq_scale;
    if (opt->attn_factor != 0.0) p.attn_factor = (float)opt->attn_factor;
    if (opt->beta_fast != 0.0) p.beta_fast = (float)opt->beta_fast;
    if (opt->beta_slow != 0.0) p.beta_slow = (float)opt->beta_slow;
    p.ext_factor = (float)opt->ext_factor;
    p.n_ctx_orig = opt->n_ctx_orig;
    p.f64_angles = opt->f64_angles != 0;
    if (!(p.theta_base > 0.0f) || !isfinite(p.theta_base) || !(p.freq_scale > 0.0f) || !isfinite(p.freq_scale) ||
        !isfinite(p.attn_factor) || !isfinite(p.ext_factor) || !isfinite(p.beta_fast) || !isfinite(p.beta_slow))
        return fc_fail(ctx, FC_ERR_INVALID_ARG,
                       OP ": theta %g and freq_scale %g must be finite and > 0, the YaRN factors finite (axis \"%s\")",
                       opt->theta, opt->freq_scale, x->axis[da]);
    if (p.ext_factor != 0.0f && p.n_ctx_orig <= 0)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": YaRN (ext_factor %g) needs n_ctx_orig > 0 (axis \"%s\")",
                       opt->ext_factor, x->axis[da]);
    const fc_tensor *ff = opt->freq_factors;
    if (ff && (ff->dtype != FC_F32 || ff->rank != 1 || ff->dim[0] != n_rot / 2))
        return fc_fail(ctx, FC_ERR_SHAPE, OP ": freq_factors %s must be f32 rank 1 of size n_rot/2 = %lld (axis \"%s\")",
                       fct_describe(ff, d1, sizeof d1), (long long)(n_rot / 2), x->axis[da]);

    /* Batch axes: x's others, in x's order. */
    int bax[FC_MAX_RANK], nb = 0;
    int64_t nbatch = 1;
    for (int i = 0; i < x->rank; i++)
        if (i != ta && i != ha && i != da) {
            bax[nb++] = i;
            nbatch *= x->dim[i];
        }

    /* Scratch: positions, cos and sin tables, freq factors. */
    const int64_t half = n_rot / 2;
    size_t bytes = (size_t)n_tok * sizeof(int64_t) + (size_t)(2 * n_tok * half + half) * sizeof(float);
    fc_storage *st = fc_storage_new(ctx, bytes);
    if (!st) return NULL;
    int64_t *pos = st->data;
    float *cos_tab = (float *)(pos + n_tok), *sin_tab = cos_tab + n_tok * half, *ffv = sin_tab + n_tok * half;
    const char *pp = fct_ptr(positions);
    for (int64_t t = 0; t < n_tok; t++) {
        const char *e = pp + t * positions->stride[0] * (int64_t)fc_dtype_size(positions->dtype);
        pos[t] = positions->dtype == FC_I32 ? (int64_t)*(const int32_t *)e : *(const int64_t *)e;
    }
    if (ff) {
        const float *fp = (const float *)fct_ptr(ff);
        for (int64_t i = 0; i < half; i++) ffv[i] = fp[i * ff->stride[0]];
        p.freq_factors = ffv;
    }
    if (rope_tables(&p, pos, n_tok, cos_tab, sin_tab) != 0) {
        fc_storage_release(st);
        return fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": the rope parameters were rejected (axis \"%s\" of %s)",
                       x->axis[da], fct_describe(x, d1, sizeof d1));
    }

    fc_tensor *y = fct_alloc_like(ctx, x->dtype, x);
    fc_tensor *tmp = NULL;
    if (!y) goto fail;
    const fc_tensor *src = x, *dst = y;
    int direct = x->dtype == FC_F32 && (x->stride[da] == 1 || head_dim == 1) && y->stride[da] == 1;
    for (int i = 0; i < x->rank; i++)
        if (x->stride[i] < 0) direct = 0;
    if (!direct) {
        int64_t sizes[FC_MAX_RANK];
        const char *names[FC_MAX_RANK];
        int r = 0;
        for (int b = 0; b < nb; b++) {
            sizes[r] = x->dim[bax[b]];
            names[r++] = x->axis[bax[b]];
        }
        sizes[r] = n_tok; names[r++] = x->axis[ta];
        if (ha >= 0) { sizes[r] = n_head; names[r++] = x->axis[ha]; }
        sizes[r] = head_dim; names[r++] = x->axis[da];
        tmp = fct_alloc(ctx, FC_F32, r, sizes, names);
        if (!tmp || fc_copy_into(ctx, tmp, x) != FC_OK) goto fail;
        src = dst = tmp;
    }

    fc_rope_apply_args a;
    memset(&a, 0, sizeof a);
    a.n_tok = n_tok;
    a.n_head = n_head;
    a.head_dim = head_dim;
    a.n_rot = n_rot;
    a.mode = mode;
    a.backward = opt->backward != 0;
    a.cos_tab = cos_tab;
    a.sin_tab = sin_tab;
    a.cs_ts = half;
    int sta = fc_tensor_axis_index(src, x->axis[ta]), sha = ha >= 0 ? fc_tensor_axis_index(src, x->axis[ha]) : -1;
    int dta = fc_tensor_axis_index(dst, x->axis[ta]), dha = ha >= 0 ? fc_tensor_axis_index(dst, x->axis[ha]) : -1;
    a.x_ts = src->stride[sta];
    a.x_hs = sha >= 0 ? src->stride[sha] : 0;
    a.y_ts = dst->stride[dta];
    a.y_hs = dha >= 0 ? dst->stride[dha] : 0;
    int64_t idx[FC_MAX_RANK] = {0};
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t xo = 0, yo = 0;
        for (int b = 0; b < nb; b++) {
            const char *nm = x->axis[bax[b]];
            xo += idx[b] * src->stride[fc_tensor_axis_index(src, nm)];
            yo += idx[b] * dst->stride[fc_tensor_axis_index(dst, nm)];
        }
        a.x = (const float *)fct_ptr(src) + xo;
        a.y = (float *)fct_ptr(dst) + yo;
        if (fc_rope_apply_f32(fc_ctx_workers(ctx), &a) != 0) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": the rotation was rejected for %s (axis \"%s\")",
                    fct_describe(x, d1, sizeof d1), x->axis[da]);
            goto fail;
        }
        for (int b = nb - 1; b >= 0; b--) {
            if (++idx[b] < x->dim[bax[b]]) break;
            idx[b] = 0;
        }
    }
    if (tmp) {
        if (fc_copy_into(ctx, y, tmp) != FC_OK) goto fail;
        fc_discard(ctx, tmp);
    }
    fc_storage_release(st);
    record(ctx, y, x, positions, opt, ta, ha, da);
    return y;

fail:
    if (tmp) fc_discard(ctx, tmp);
    if (y) fc_discard(ctx, y);
    fc_storage_release(st);
    return NULL;
}
