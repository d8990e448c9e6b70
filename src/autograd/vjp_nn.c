/* SPDX-License-Identifier: MIT */
/* VJPs of the nn ops: softmax (scale, mask, causal, sinks), log_softmax,
 * rmsnorm, the fused residual rmsnorm, layernorm, rope and attention.
 *
 * Everything is written with the public ops in f32 (the nn ops take f32,
 * f16 and bf16, never f64; f16/bf16 operands are widened exactly). The row
 * ops recompute their statistics from the operands; softmax reads its saved
 * output; rope is its own transpose (the same op with `backward` flipped);
 * attention recomputes the probability matrix with einsum and softmax
 * (O(seq^2) memory per head) and runs the textbook backward:
 *   dV = Pᵀ·dO,  dP = dO·Vᵀ,  dZ = P ∘ (dP − rowsum(dP ∘ P)),
 * then back through softcap and scale to dQ = dS·K and dK = dSᵀ·Q. */
#include <math.h>
#include <string.h>

#include "autograd/vjp.h"

/* --- softmax ---
 * y = softmax(z), z = scale*x + mask (+ causal -inf), with an optional sink
 * logit per row that joins the denominator only. For any such y,
 * dz = y ∘ (g − rowsum(g ∘ y)); masked entries have y = 0 and get 0. The
 * sink s (PyTorch-style: an extra logit whose probability p_s = 1 − rowsum(y)
 * is dropped) gets ds = −p_s · rowsum(g ∘ y). */
int fca_vjp_softmax(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    const char *a = n->p.axes[0];
    fc_tensor *Y = fca_as(ctx, n->saved[0], g->dtype);
    fc_tensor *gy = fc_mul(ctx, g, Y);
    fc_tensor *dot = fc_sum(ctx, gy, &a, 1);
    fc_tensor *dz = fc_sub(ctx, gy, fc_mul(ctx, Y, dot));
    if (!dz) return 0;
    if (n->needs[0]) {
        double scale = n->p.d[0];
        gin[0] = fca_sum_to(ctx, scale == 1.0 ? dz : fc_mul_scalar(ctx, dz, scale), n->in[0]);
        if (!gin[0]) return 0;
    }
    /* the mask is added to the scaled logits: its gradient is dz, summed
     * over the axes it broadcasts along */
    if (n->needs[1] && !(gin[1] = fca_sum_to(ctx, dz, n->in[1]))) return 0;
    if (n->needs[2]) {
        fc_tensor *p_sink = fc_scalar_binary(ctx, FC_SUB, 1.0, fc_sum(ctx, Y, &a, 1));
        gin[2] = fca_sum_to(ctx, fc_neg(ctx, fc_mul(ctx, p_sink, dot)), n->in[2]);
        if (!gin[2]) return 0;
    }
    return 1;
}

/* y = z − logsumexp(z): dx = g − exp(y) · rowsum(g). */
int fca_vjp_log_softmax(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    const char *a = n->p.axes[0];
    fc_tensor *Y = fca_as(ctx, n->saved[0], g->dtype);
    fc_tensor *dx = fc_sub(ctx, g, fc_mul(ctx, fc_exp(ctx, Y), fc_sum(ctx, g, &a, 1)));
    gin[0] = fca_sum_to(ctx, dx, n->in[0]);
    return gin[0] != NULL;
}

/* --- normalization ---
 * With r = 1/sqrt(stat + eps), x̂ the normalized row and gw = g ∘ weight
 * (or g), per row along axis a:
 *   rmsnorm   x̂ = x r,          dx = r (gw − x̂ mean(gw ∘ x̂))
 *   layernorm x̂ = (x − mean) r, dx = r (gw − mean(gw) − x̂ mean(gw ∘ x̂))
 * and d weight = Σ g ∘ x̂, d bias = Σ g over every other axis. */
typedef struct norm_grads {
    fc_tensor *dx;
    fc_tensor *xhat;
} norm_grads;

static norm_grads norm_backward(fc_ctx *ctx, fc_tensor *X, fc_tensor *weight, fc_tensor *g, const char *a, double eps,
                                int centered)
{
    norm_grads r = {NULL, NULL};
    fc_tensor *xc = centered ? fc_sub(ctx, X, fc_mean(ctx, X, &a, 1)) : X;
    fc_tensor *rs = fc_rsqrt(ctx, fc_add_scalar(ctx, fc_mean(ctx, fc_sqr(ctx, xc), &a, 1), eps));
    fc_tensor *xhat = fc_mul(ctx, xc, rs);
    fc_tensor *gw = weight ? fc_mul(ctx, g, fca_as(ctx, weight, g->dtype)) : g;
    fc_tensor *inner = fc_sub(ctx, gw, fc_mul(ctx, xhat, fc_mean(ctx, fc_mul(ctx, gw, xhat), &a, 1)));
    if (centered) inner = fc_sub(ctx, inner, fc_mean(ctx, gw, &a, 1));
    r.dx = fc_mul(ctx, inner, rs);
    r.xhat = xhat;
    return r;
}

/* Gradients of the norm's weight (in[wi]) and bias (in[wi + 1], layernorm). */
static int param_grads(fc_ctx *ctx, fcg_node *n, int wi, int has_bias, fc_tensor *g, fc_tensor *xhat, fc_tensor **gin)
{
    if (n->needs[wi] && !(gin[wi] = fca_sum_to(ctx, fc_mul(ctx, g, xhat), n->in[wi]))) return 0;
    if (has_bias && n->needs[wi + 1] && !(gin[wi + 1] = fca_sum_to(ctx, g, n->in[wi + 1]))) return 0;
    return 1;
}

int fca_vjp_rmsnorm(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0];
    norm_grads r = norm_backward(ctx, fca_as(ctx, x, g->dtype), n->in[1], g, n->p.axes[0], n->p.d[0], 0);
    if (!r.dx) return 0;
    if (n->needs[0] && !(gin[0] = fca_sum_to(ctx, r.dx, x))) return 0;
    return param_grads(ctx, n, 1, 0, g, r.xhat, gin);
}

/* y = rmsnorm(s) * weight with s = x + residual: s is recomputed from the
 * operands exactly as the forward rounded it (x's dtype), and ds goes to
 * both. The sum the op hands out has its own FC_ADD record. */
int fca_vjp_rmsnorm_residual(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0], *res = n->in[1];
    fc_tensor *S = fca_as(ctx, fc_add(ctx, x, res), g->dtype);
    norm_grads r = norm_backward(ctx, S, n->in[2], g, n->p.axes[0], n->p.d[0], 0);
    if (!r.dx) return 0;
    if (n->needs[0] && !(gin[0] = fca_sum_to(ctx, r.dx, x))) return 0;
    if (n->needs[1] && !(gin[1] = fca_sum_to(ctx, r.dx, res))) return 0;
    return param_grads(ctx, n, 2, 0, g, r.xhat, gin);
}

int fca_vjp_layernorm(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_tensor *x = n->in[0];
    norm_grads r = norm_backward(ctx, fca_as(ctx, x, g->dtype), n->in[1], g, n->p.axes[0], n->p.d[0], 1);
    if (!r.dx) return 0;
    if (n->needs[0] && !(gin[0] = fca_sum_to(ctx, r.dx, x))) return 0;
    return param_grads(ctx, n, 1, 1, g, r.xhat, gin);
}

/* --- rope ---
 * Each pair is rotated by a fixed (position-dependent, x-independent)
 * matrix m·R(θ); its transpose m·R(−θ) is the same op with `backward`
 * flipped over the same tables (partial rotary, YaRN, linear scaling and
 * freq_factors included). Positions are integers; freq_factors get no
 * gradient. */
int fca_vjp_rope(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    if (n->needs[2]) {
        fc_fail(ctx, FC_ERR_STATE,
                "fc_backward: fc_rope has no gradient for freq_factors (only x is differentiable); "
                "pass freq_factors as a constant (fc_detach)");
        return 0;
    }
    fc_rope_options o;
    memcpy(&o, n->p.raw, sizeof o);
    o.backward = !o.backward;
    o.freq_factors = n->in[2];
    gin[0] = fca_sum_to(ctx, fc_rope(ctx, g, n->in[1], &o), n->in[0]);
    return gin[0] != NULL;
}

/* --- attention ---
 * The operands are first renamed to private axis names, so that one
 * contraction list serves every naming and layout:
 *   q, dO  [batch..., Q, H, G, D|E]   (the head axis split into kv head H and
 *                                      group G, h = H*G + g as the forward)
 *   k, v   [batch'..., K, H, D|E]     (size-1 axes other than these dropped:
 *                                      the forward broadcasts them)
 * H and G exist only when larger than 1 (so MHA/MQA cost no extra rank). */
typedef struct attn_ax {
    const char *q, *k, *h, *g, *d, *e;
    int use_h, use_g;
    int64_t n_kvh, grp;
} attn_ax;

static int attn_names(fc_ctx *ctx, attn_ax *A)
{
    A->q = fc_axis_intern("fc.attn.q", NULL);
    A->k = fc_axis_intern("fc.attn.k", NULL);
    A->h = fc_axis_intern("fc.attn.h", NULL);
    A->g = fc_axis_intern("fc.attn.g", NULL);
    A->d = fc_axis_intern("fc.attn.d", NULL);
    A->e = fc_axis_intern("fc.attn.e", NULL);
    if (A->q && A->k && A->h && A->g && A->d && A->e) return 1;
    fc_fail(ctx, FC_ERR_OOM, "fc_backward: fc_attention: out of memory (axis names)");
    return 0;
}

/* t's query-head axis `head` (NULL: absent) as the used ones of (H, G). */
static fc_tensor *split_head(fc_ctx *ctx, fc_tensor *t, const char *head, const attn_ax *A)
{
    if (!t || !head || fc_tensor_axis_index(t, head) < 0) return t;
    if (A->use_h && A->use_g)
        return fc_split_axis(ctx, t, head, (fc_dim[]){{A->h, A->n_kvh}, {A->g, A->grp}}, 2);
    if (A->use_h || A->use_g) return fc_rename(ctx, t, head, A->use_h ? A->h : A->g);
    return fc_squeeze(ctx, t, head);
}

/* The inverse: the used ones of (H, G) (adjacent, in that order) back into
 * `head`; a missing head axis is restored later by fca_sum_to. */
static fc_tensor *merge_head(fc_ctx *ctx, fc_tensor *t, const char *head, const attn_ax *A)
{
    if (!t || !head) return t;
    if (A->use_h && A->use_g) return fc_merge_axes(ctx, t, (const char *const[]){A->h, A->g}, 2, head);
    if (A->use_h || A->use_g) return fc_rename(ctx, t, A->use_h ? A->h : A->g, head);
    return t;
}

static fc_tensor *rename_if(fc_ctx *ctx, fc_tensor *t, const char *from, const char *to)
{
    if (!t || !from || fc_tensor_axis_index(t, from) < 0) return t;
    return fc_rename(ctx, t, from, to);
}

/* Drop t's size-1 axes other than keep[0..3) (NULL entries allowed). */
static fc_tensor *squeeze_others(fc_ctx *ctx, fc_tensor *t, const char *const *keep, int nkeep)
{
    for (int i = 0; t && i < t->rank; i++) {
        int kept = 0;
        for (int j = 0; j < nkeep; j++) kept |= keep[j] && t->axis[i] == keep[j];
        if (t->dim[i] != 1 || kept) continue;
        t = fc_squeeze(ctx, t, t->axis[i]);
        i = -1; /* axes moved: start over */
    }
    return t;
}

static fc_tensor *canon_q(fc_ctx *ctx, fc_tensor *t, const fc_attention_options *o, const char *dim, const attn_ax *A)
{
    t = fc_rename(ctx, t, o->seq_axis, A->q);
    t = fc_rename(ctx, t, o->dim_axis, dim);
    return split_head(ctx, t, o->head_axis, A);
}

static fc_tensor *canon_kv(fc_ctx *ctx, fc_tensor *t, const fc_attention_options *o, const char *dim, const attn_ax *A)
{
    const char *core[3] = {o->kv_seq_axis, o->dim_axis, A->use_h ? o->kv_head_axis : NULL};
    t = squeeze_others(ctx, t, core, 3);
    t = fc_rename(ctx, t, o->kv_seq_axis, A->k);
    t = fc_rename(ctx, t, o->dim_axis, dim);
    return A->use_h ? fc_rename(ctx, t, o->kv_head_axis, A->h) : t;
}

/* The mask: size-1 axes dropped (the add broadcasts), the rest renamed. A
 * mask axis named like the key axis is the key axis (as the forward). */
static fc_tensor *canon_mask(fc_ctx *ctx, fc_tensor *m, const fc_attention_options *o, const attn_ax *A)
{
    m = squeeze_others(ctx, m, NULL, 0);
    m = rename_if(ctx, m, o->kv_seq_axis, A->k);
    m = rename_if(ctx, m, o->seq_axis, A->q);
    return split_head(ctx, m, o->head_axis, A);
}

/* Additive f32 [Q, K] mask of the causal and window rules (0 or -inf). */
static fc_tensor *visibility(fc_ctx *ctx, const fc_attention_options *o, int64_t n_q, int64_t n_kv, const attn_ax *A)
{
    fc_tensor *m = fc_zeros(ctx, FC_F32, (fc_dim[]){{A->q, n_q}, {A->k, n_kv}}, 2);
    if (!m) return NULL;
    float *p = fc_tensor_data(m);
    for (int64_t t = 0; t < n_q; t++)
        for (int64_t s = 0; s < n_kv; s++) {
            int64_t pos = o->q_pos0 + t;
            int hidden = (o->causal && s > pos) || (o->window > 0 && pos - s >= o->window);
            if (hidden) p[t * n_kv + s] = -INFINITY;
        }
    return m;
}

/* Axis list of t. */
static int axes_of(const fc_tensor *t, const char **out)
{
    for (int i = 0; i < t->rank; i++) out[i] = t->axis[i];
    return t->rank;
}

typedef struct attn_fwd {
    fc_tensor *Q, *K, *V, *dO;
    fc_tensor *T;       /* tanh(S / softcap), or NULL */
    fc_tensor *P;       /* probabilities [batch..., Q, H, G, K] */
    fc_tensor *sinks;   /* [H, G] or NULL */
    const char *sax[FC_MAX_RANK];
    int ns;
} attn_fwd;

/* Recompute the probabilities as the kernel defines them (exec/attention.h):
 * softcap(scale q·k) + mask, hidden keys -inf, softmax with the sink. */
static int attn_recompute(fc_ctx *ctx, fcg_node *n, const fc_attention_options *o, const attn_ax *A, attn_fwd *F)
{
    fc_tensor *mask = n->in[3], *sinks = n->in[4];
    int ns = 0;
    for (int i = 0; i < F->Q->rank; i++) {
        const char *nm = F->Q->axis[i];
        if (nm != A->q && nm != A->h && nm != A->g && nm != A->d) F->sax[ns++] = nm;
    }
    F->sax[ns++] = A->q;
    if (A->use_h) F->sax[ns++] = A->h;
    if (A->use_g) F->sax[ns++] = A->g;
    F->sax[ns++] = A->k;
    F->ns = ns;
    fc_tensor *S = fc_mul_scalar(ctx, fc_einsum(ctx, F->Q, F->K, F->sax, ns), o->scale);
    if (o->softcap > 0) {
        F->T = fc_tanh(ctx, fc_binary_scalar(ctx, FC_DIV, S, o->softcap));
        S = fc_mul_scalar(ctx, F->T, o->softcap);
    }
    if (mask) S = fc_add(ctx, S, canon_mask(ctx, mask, o, A));
    if (o->causal || o->window > 0) S = fc_add(ctx, S, visibility(ctx, o, F->Q->dim[fc_tensor_axis_index(F->Q, A->q)],
                                                                   F->K->dim[fc_tensor_axis_index(F->K, A->k)], A));
    if (sinks) {
        fc_dim dims[2];
        int r = 0;
        if (A->use_h) dims[r++] = (fc_dim){A->h, A->n_kvh};
        if (A->use_g) dims[r++] = (fc_dim){A->g, A->grp};
        F->sinks = fc_reshape(ctx, sinks, dims, r);
        if (!F->sinks) return 0;
    }
    F->P = fc_softmax(ctx, S, A->k, &(fc_softmax_options){.sinks = F->sinks});
    return F->P != NULL;
}

/* dQ (needs[0]) and dK (needs[1]) from dZ, the gradient of the logits after
 * the mask: back through softcap (d tanh = 1 − tanh²) and the scale. */
static int attn_qk_grads(fc_ctx *ctx, fcg_node *n, const fc_attention_options *o, const attn_ax *A, attn_fwd *F,
                         fc_tensor *dZ, fc_tensor **gin)
{
    fc_tensor *dS = dZ;
    if (F->T) dS = fc_mul(ctx, dS, fc_scalar_binary(ctx, FC_SUB, 1.0, fc_sqr(ctx, F->T)));
    dS = fc_mul_scalar(ctx, dS, o->scale);
    const char *ax[FC_MAX_RANK];
    if (n->needs[0]) {
        fc_tensor *dq = fc_einsum(ctx, dS, F->K, ax, axes_of(F->Q, ax));
        dq = fc_rename(ctx, fc_rename(ctx, merge_head(ctx, dq, o->head_axis, A), A->q, o->seq_axis), A->d, o->dim_axis);
        if (!(gin[0] = fca_sum_to(ctx, dq, n->in[0]))) return 0;
    }
    if (n->needs[1]) {
        fc_tensor *dk = fc_einsum(ctx, dS, F->Q, ax, axes_of(F->K, ax));
        dk = fc_rename(ctx, fc_rename(ctx, dk, A->k, o->kv_seq_axis), A->d, o->dim_axis);
        if (A->use_h) dk = fc_rename(ctx, dk, A->h, o->kv_head_axis);
        if (!(gin[1] = fca_sum_to(ctx, dk, n->in[1]))) return 0;
    }
    return 1;
}

/* The mask's gradient is dZ (it is added after softcap), in the user's
 * names, summed over the axes the mask broadcasts along. */
static fc_tensor *attn_mask_grad(fc_ctx *ctx, const fc_attention_options *o, const attn_ax *A, fc_tensor *dZ,
                                 fc_tensor *mask)
{
    fc_tensor *dm = merge_head(ctx, dZ, o->head_axis, A);
    dm = fc_rename(ctx, fc_rename(ctx, dm, A->q, o->seq_axis), A->k, o->kv_seq_axis);
    return fca_sum_to(ctx, dm, mask);
}

/* The sink of head h is an extra logit per row whose probability
 * p_s = 1 − rowsum(P) is dropped: d sink = −Σ_rows p_s · rowsum(dP ∘ P). */
static fc_tensor *attn_sink_grad(fc_ctx *ctx, const fc_attention_options *o, const attn_ax *A, attn_fwd *F,
                                 fc_tensor *rowdot, fc_tensor *sinks)
{
    fc_tensor *p_sink = fc_scalar_binary(ctx, FC_SUB, 1.0, fc_sum(ctx, F->P, &A->k, 1));
    fc_tensor *ds = fc_neg(ctx, fc_mul(ctx, p_sink, rowdot));
    if (!ds) return NULL;
    const char *drop[FC_MAX_RANK];
    int nd = 0;
    for (int i = 0; i < ds->rank; i++)
        if (ds->axis[i] != A->h && ds->axis[i] != A->g) drop[nd++] = ds->axis[i];
    if (nd) ds = fc_sum(ctx, ds, drop, nd);
    ds = merge_head(ctx, ds, o->head_axis ? o->head_axis : sinks->axis[0], A);
    return fca_sum_to(ctx, ds, sinks);
}

int fca_vjp_attention(fc_ctx *ctx, fcg_node *n, fc_tensor *g, fc_tensor **gin)
{
    fc_attention_options o;
    memcpy(&o, n->p.raw, sizeof o);
    fc_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    attn_ax A;
    if (!attn_names(ctx, &A)) return 0;
    int64_t n_head = o.head_axis ? fc_tensor_size(q, o.head_axis) : 1;
    A.n_kvh = o.kv_head_axis ? fc_tensor_size(k, o.kv_head_axis) : 1;
    A.grp = n_head / A.n_kvh;
    A.use_h = A.n_kvh > 1;
    A.use_g = A.grp > 1;

    /* q's head axis becomes (H, G): one more axis when both are used */
    int rank = q->rank - (o.head_axis ? 1 : 0) + A.use_h + A.use_g;
    if (rank > FC_MAX_RANK) {
        char d[FCT_DESC_MAX];
        fc_fail(ctx, FC_ERR_SHAPE,
                "fc_backward: fc_attention: q %s with grouped heads (%lld per kv head) needs rank %d for the "
                "gradient (max %d)", fct_describe(q, d, sizeof d), (long long)A.grp, rank, FC_MAX_RANK);
        return 0;
    }
    attn_fwd F;
    memset(&F, 0, sizeof F);
    F.Q = canon_q(ctx, q, &o, A.d, &A);
    F.K = canon_kv(ctx, k, &o, A.d, &A);
    F.V = canon_kv(ctx, v, &o, A.e, &A);
    F.dO = canon_q(ctx, g, &o, A.e, &A);
    if (!F.Q || !F.K || !F.V || !F.dO || !attn_recompute(ctx, n, &o, &A, &F)) return 0;

    const char *ax[FC_MAX_RANK];
    if (n->needs[2]) {
        fc_tensor *dv = fc_einsum(ctx, F.P, F.dO, ax, axes_of(F.V, ax));
        dv = fc_rename(ctx, fc_rename(ctx, dv, A.k, o.kv_seq_axis), A.e, o.dim_axis);
        if (A.use_h) dv = fc_rename(ctx, dv, A.h, o.kv_head_axis);
        if (!(gin[2] = fca_sum_to(ctx, dv, v))) return 0;
    }
    fc_tensor *dP = fc_einsum(ctx, F.dO, F.V, F.sax, F.ns);
    fc_tensor *rowdot = fc_sum(ctx, fc_mul(ctx, dP, F.P), &A.k, 1);
    fc_tensor *dZ = fc_mul(ctx, F.P, fc_sub(ctx, dP, rowdot));
    if (!dZ) return 0;
    if (n->needs[3] && !(gin[3] = attn_mask_grad(ctx, &o, &A, dZ, n->in[3]))) return 0;
    if (n->needs[4] && !(gin[4] = attn_sink_grad(ctx, &o, &A, &F, rowdot, n->in[4]))) return 0;
    return attn_qk_grads(ctx, n, &o, &A, &F, dZ, gin);
}
