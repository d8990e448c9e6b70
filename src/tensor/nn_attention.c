/* SPDX-License-Identifier: MIT */
/* fc_attention: scaled dot-product attention over named axes, a wrapper of
 * the exec layer's flash-style kernel (src/exec/attention.h).
 *
 * q [seq, head, d], k and v [kv_seq, kv_head, d] are passed with their own
 * strides when the d axis is contiguous and no stride is negative;
 * otherwise that operand is copied once with d innermost. Other axes of q
 * are batch axes (k, v and the mask have them or broadcast over them); each
 * batch index is one call of the kernel. The mask is passed in place when
 * its kv_seq axis is contiguous, else materialized as [its axes..., kv_seq]. */
#include <math.h>
#include <string.h>

#include "exec/attention.h"
#include "fucina/nn.h"
#include "tensor/grad_record.h"
#include "tensor/internal.h"
#include "tensor/quant_tensor.h"

#define OP "fc_attention"

static int64_t stride_of(const fc_tensor *t, const char *name)
{
    for (int i = 0; i < t->rank; i++)
        if (t->axis[i] == name) return t->dim[i] == 1 ? 0 : t->stride[i];
    return 0;
}

/* A view of t (a new header) when its axis `inner` is contiguous and no
 * stride is negative; else a copy with `inner` moved last. */
static fc_tensor *inner_contiguous(fc_ctx *ctx, fc_tensor *t, const char *inner)
{
    int ok = 1, ia = -1;
    for (int i = 0; i < t->rank; i++) {
        if (t->stride[i] < 0) ok = 0;
        if (t->axis[i] == inner) ia = i;
    }
    if (ia >= 0 && t->dim[ia] != 1 && t->stride[ia] != 1) ok = 0;
    if (ok) return fct_view(ctx, t);
    const char *order[FC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < t->rank; i++)
        if (i != ia) order[r++] = t->axis[i];
    if (ia >= 0) order[r++] = t->axis[ia];
    fc_tensor *p = fc_permute(ctx, t, order, r);
    if (!p) return NULL;
    fc_tensor *c = fc_clone(ctx, p);
    fc_discard(ctx, p);
    return c;
}

/* Optional axis: explicit names must exist, the default may be absent. */
static int opt_axis(fc_ctx *ctx, const fc_tensor *t, const char *given, const char *dflt, int *idx)
{
    if (given) {
        *idx = fct_axis(ctx, OP, t, given);
        return *idx >= 0;
    }
    *idx = fc_tensor_axis_index(t, dflt);
    return 1;
}

/* The forward; on success *rec holds the options as the kernel ran them
 * (resolved scale, interned axis names, no tensors) for the backward record. */
static fc_tensor *attention_impl(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v, const fc_attention_options *opt,
                                 fc_attention_options *rec)
{
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];

    if (q->dtype != FC_F32)
        return fc_fail(ctx, FC_ERR_DTYPE, OP ": q is %s; it takes f32", fct_describe(q, d1, sizeof d1));
    if ((k->dtype != FC_F32 && k->dtype != FC_F16) || v->dtype != k->dtype)
        return fc_fail(ctx, FC_ERR_DTYPE, OP ": k %s and v %s must both be f32 or both f16",
                       fct_describe(k, d1, sizeof d1), fct_describe(v, d2, sizeof d2));

    /* axes */
    int qs = fct_axis(ctx, OP, q, opt->seq_axis ? opt->seq_axis : "seq");
    if (qs < 0) return NULL;
    int qd = fct_axis(ctx, OP, q, opt->dim_axis ? opt->dim_axis : "d");
    if (qd < 0) return NULL;
    int qh;
    if (!opt_axis(ctx, q, opt->head_axis, "head", &qh)) return NULL;
    const char *dn = q->axis[qd];
    const char *kvs_name = opt->kv_seq_axis ? opt->kv_seq_axis : "kv_seq";
    int ks = fct_axis(ctx, OP, k, kvs_name), vs = ks < 0 ? -1 : fct_axis(ctx, OP, v, kvs_name);
    if (ks < 0 || vs < 0) return NULL;
    int kd = fct_axis(ctx, OP, k, dn), vd = kd < 0 ? -1 : fct_axis(ctx, OP, v, dn);
    if (kd < 0 || vd < 0) return NULL;
    int kh, vh;
    if (!opt_axis(ctx, k, opt->kv_head_axis, "kv_head", &kh)) return NULL;
    if (!opt_axis(ctx, v, opt->kv_head_axis, "kv_head", &vh)) return NULL;
    const char *kvh_name = kh >= 0 ? k->axis[kh] : (vh >= 0 ? v->axis[vh] : NULL);
    if ((kh >= 0) != (vh >= 0))
        return fc_fail(ctx, FC_ERR_AXIS, OP ": k %s and v %s must both have the kv head axis or neither",
                       fct_describe(k, d1, sizeof d1), fct_describe(v, d2, sizeof d2));

    const int64_t n_q = q->dim[qs], n_head = qh >= 0 ? q->dim[qh] : 1, hd = q->dim[qd];
    const int64_t n_kv = k->dim[ks], n_kv_head = kh >= 0 ? k->dim[kh] : 1, hdv = v->dim[vd];
    const char *seq_n = q->axis[qs], *head_n = qh >= 0 ? q->axis[qh] : NULL;
    if (k->dim[kd] != hd)
        return fc_fail(ctx, FC_ERR_SHAPE, OP ": axis \"%s\" has size %lld in q %s and %lld in k %s", dn, (long long)hd,
                       fct_describe(q, d1, sizeof d1), (long long)k->dim[kd], fct_describe(k, d2, sizeof d2));
    if (v->dim[vs] != n_kv || (kh >= 0 && v->dim[vh] != n_kv_head))
        return fc_fail(ctx, FC_ERR_SHAPE, OP ": k %s and v %s differ along axis \"%s\"", fct_describe(k, d1, sizeof d1),
                       fct_describe(v, d2, sizeof d2), v->dim[vs] != n_kv ? k->axis[ks] : k->axis[kh]);
    if (n_head % n_kv_head)
        return fc_fail(ctx, FC_ERR_SHAPE,
                       OP ": the %lld query heads (axis \"%s\") are not a multiple of the %lld kv heads (axis \"%s\")",
                       (long long)n_head, head_n ? head_n : "head", (long long)n_kv_head,
                       kvh_name ? kvh_name : "kv_head");

    /* batch axes: q's others; k, v and the mask have them or broadcast */
    int bax[FC_MAX_RANK], nb = 0;
    int64_t nbatch = 1;
    for (int i = 0; i < q->rank; i++)
        if (i != qs && i != qh && i != qd) {
            bax[nb++] = i;
            nbatch *= q->dim[i];
        }
    const fc_tensor *kv[2] = {k, v};
    for (int t = 0; t < 2; t++) {
        const fc_tensor *x = kv[t];
        for (int i = 0; i < x->rank; i++) {
            const char *nm = x->axis[i];
            if (nm == dn || nm == k->axis[ks] || nm == kvh_name) continue;
            int qi = fc_tensor_axis_index(q, nm);
            int is_batch = qi >= 0 && qi != qs && qi != qh && qi != qd;
            if (!is_batch && x->dim[i] != 1)
                return fc_fail(ctx, FC_ERR_AXIS, OP ": axis \"%s\" of %s %s is not a batch axis of q %s", nm,
                               t ? "v" : "k", fct_describe(x, d1, sizeof d1), fct_describe(q, d2, sizeof d2));
            if (is_batch && x->dim[i] != 1 && x->dim[i] != q->dim[qi])
                return fc_fail(ctx, FC_ERR_SHAPE, OP ": batch axis \"%s\" has size %lld in q and %lld in %s %s", nm,
                               (long long)q->dim[qi], (long long)x->dim[i], t ? "v" : "k",
                               fct_describe(x, d1, sizeof d1));
        }
    }

    /* options */
    double scale = opt->scale == 0.0 ? 1.0 / sqrt((double)hd) : opt->scale;
    if (!isfinite((float)scale) || !(opt->softcap >= 0.0) || !isfinite((float)opt->softcap) || opt->window < 0)
        return fc_fail(ctx, FC_ERR_INVALID_ARG,
                       OP ": scale %g and softcap %g must be finite f32 (softcap >= 0), window %lld >= 0 (axis \"%s\")",
                       opt->scale, opt->softcap, (long long)opt->window, seq_n);
    const fc_tensor *mask = opt->mask, *sinks = opt->sinks;
    if (mask) {
        if (mask->dtype != FC_F32)
            return fc_fail(ctx, FC_ERR_DTYPE, OP ": the mask %s must be f32 (axes \"%s\", \"%s\")",
                           fct_describe(mask, d1, sizeof d1), seq_n, k->axis[ks]);
        for (int i = 0; i < mask->rank; i++) {
            const char *nm = mask->axis[i];
            int64_t want = -1;
            if (nm == k->axis[ks]) want = n_kv;
            else {
                int qi = fc_tensor_axis_index(q, nm);
                if (qi >= 0 && qi != qd) want = q->dim[qi];
            }
            if (mask->dim[i] != 1 && mask->dim[i] != want)
                return fc_fail(ctx, want < 0 ? FC_ERR_AXIS : FC_ERR_SHAPE,
                               OP ": axis \"%s\" of the mask %s %s (q %s)", nm, fct_describe(mask, d1, sizeof d1),
                               want < 0 ? "is not an axis of the scores" : "does not match the scores",
                               fct_describe(q, d2, sizeof d2));
        }
    }
    if (sinks) {
        const char *hn = head_n ? head_n : "head";
        if (sinks->dtype != FC_F32 || sinks->rank != 1 || strcmp(sinks->axis[0], hn) || sinks->dim[0] != n_head)
            return fc_fail(ctx, FC_ERR_SHAPE, OP ": sinks %s must be f32 rank 1 over axis \"%s\" of size %lld",
                           fct_describe(sinks, d1, sizeof d1), hn, (long long)n_head);
    }

    /* operands in a layout the kernel takes */
    fc_tensor *qc = NULL, *kc = NULL, *vc = NULL, *mc = NULL, *o = NULL, *ot = NULL;
    fc_storage *sk = NULL;
    qc = inner_contiguous(ctx, q, dn);
    kc = qc ? inner_contiguous(ctx, k, dn) : NULL;
    vc = kc ? inner_contiguous(ctx, v, dn) : NULL;
    if (!vc) goto fail;
    if (mask) {
        int mk = fc_tensor_axis_index(mask, k->axis[ks]);
        int ok = mk >= 0 && mask->dim[mk] == n_kv && (n_kv == 1 || mask->stride[mk] == 1);
        for (int i = 0; i < mask->rank; i++)
            if (mask->stride[i] < 0) ok = 0;
        if (ok) {
            mc = fct_view(ctx, mask);
            if (!mc) goto fail;
        } else {
            if (mk < 0 && mask->rank == FC_MAX_RANK) {
                fc_fail(ctx, FC_ERR_SHAPE, OP ": the mask %s plus axis \"%s\" exceeds rank %d",
                        fct_describe(mask, d1, sizeof d1), k->axis[ks], FC_MAX_RANK);
                goto fail;
            }
            fc_dim dims[FC_MAX_RANK];
            int r = 0;
            for (int i = 0; i < mask->rank; i++)
                if (i != mk) dims[r++] = (fc_dim){mask->axis[i], mask->dim[i]};
            dims[r++] = (fc_dim){k->axis[ks], n_kv};
            fc_tensor *b = fc_broadcast_to(ctx, (fc_tensor *)mask, dims, r);
            mc = b ? fc_clone(ctx, b) : NULL;
            if (b) fc_discard(ctx, b);
            if (!mc) goto fail;
        }
    }
    float *sinkp = NULL;
    if (sinks) {
        sk = fc_storage_new(ctx, (size_t)n_head * sizeof(float));
        if (!sk) goto fail;
        sinkp = sk->data;
        const float *sp = (const float *)fct_ptr(sinks);
        for (int64_t h = 0; h < n_head; h++) sinkp[h] = sp[h * sinks->stride[0]];
    }
    {
        int64_t sizes[FC_MAX_RANK];
        for (int i = 0; i < q->rank; i++) sizes[i] = i == qd ? hdv : q->dim[i];
        o = fct_alloc(ctx, FC_F32, q->rank, sizes, q->axis);
        if (!o) goto fail;
        if (o->stride[qd] != 1 && hdv != 1) {
            int64_t tsz[FC_MAX_RANK];
            const char *tnm[FC_MAX_RANK];
            int r = 0;
            for (int i = 0; i < q->rank; i++)
                if (i != qd) { tsz[r] = q->dim[i]; tnm[r++] = q->axis[i]; }
            tsz[r] = hdv; tnm[r++] = dn;
            ot = fct_alloc(ctx, FC_F32, r, tsz, tnm);
            if (!ot) goto fail;
        }
    }
    const fc_tensor *out = ot ? ot : o;

    fc_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_q = n_q;
    a.n_kv = n_kv;
    a.n_head = n_head;
    a.n_kv_head = n_kv_head;
    a.head_dim = hd;
    a.head_dim_v = hdv;
    a.q_ts = stride_of(qc, seq_n);
    a.q_hs = head_n ? stride_of(qc, head_n) : 0;
    a.kv_type = k->dtype == FC_F16 ? FC_ATTN_KV_F16 : FC_ATTN_KV_F32;
    a.k_ts = stride_of(kc, k->axis[ks]);
    a.k_hs = kvh_name ? stride_of(kc, kvh_name) : 0;
    a.v_ts = stride_of(vc, k->axis[ks]);
    a.v_hs = kvh_name ? stride_of(vc, kvh_name) : 0;
    a.o_ts = stride_of(out, seq_n);
    a.o_hs = head_n ? stride_of(out, head_n) : 0;
    a.scale = (float)scale;
    a.softcap = (float)opt->softcap;
    a.causal = opt->causal != 0;
    a.q_pos0 = opt->q_pos0;
    a.window = opt->window;
    a.mask_rs = mc ? stride_of(mc, seq_n) : 0;
    a.mask_hs = mc && head_n ? stride_of(mc, head_n) : 0;
    a.sinks = sinkp;
    const size_t kes = fc_dtype_size(k->dtype);
    a.ws = fc_ctx_attn_workspace_acquire(ctx); /* NULL: per-call scratch */
    int64_t idx[FC_MAX_RANK] = {0};
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t oq = 0, ok = 0, ov = 0, oo = 0, om = 0;
        for (int b = 0; b < nb; b++) {
            const char *nm = q->axis[bax[b]];
            oq += idx[b] * stride_of(qc, nm);
            ok += idx[b] * stride_of(kc, nm);
            ov += idx[b] * stride_of(vc, nm);
            oo += idx[b] * stride_of(out, nm);
            if (mc) om += idx[b] * stride_of(mc, nm);
        }
        a.q = (const float *)fct_ptr(qc) + oq;
        a.k = fct_ptr(kc) + ok * (int64_t)kes;
        a.v = fct_ptr(vc) + ov * (int64_t)kes;
        a.o = (float *)fct_ptr(out) + oo;
        a.mask = mc ? (const float *)fct_ptr(mc) + om : NULL;
        int rc = fc_attention_f32(fc_ctx_workers(ctx), &a);
        if (rc != 0) {
            fc_ctx_attn_workspace_release(ctx, a.ws);
            if (rc == -1)
                fc_fail(ctx, FC_ERR_OOM, OP ": out of memory for attention scratch (q %s)", fct_describe(q, d1, sizeof d1));
            else
                fc_fail(ctx, FC_ERR_INVALID_ARG, OP ": the kernel rejected q %s, k %s (axis \"%s\")",
                        fct_describe(q, d1, sizeof d1), fct_describe(k, d2, sizeof d2), seq_n);
            goto fail;
        }
        for (int b = nb - 1; b >= 0; b--) {
            if (++idx[b] < q->dim[bax[b]]) break;
            idx[b] = 0;
        }
    }
    fc_ctx_attn_workspace_release(ctx, a.ws);
    if (ot) {
        if (fc_copy_into(ctx, o, ot) != FC_OK) goto fail;
        fc_discard(ctx, ot);
    }
    fc_discard(ctx, qc);
    fc_discard(ctx, kc);
    fc_discard(ctx, vc);
    if (mc) fc_discard(ctx, mc);
    if (sk) fc_storage_release(sk);
    *rec = (fc_attention_options){
        .scale = (double)a.scale, .softcap = (double)a.softcap, .causal = a.causal, .q_pos0 = a.q_pos0,
        .window = a.window, .seq_axis = seq_n, .head_axis = head_n, .dim_axis = dn, .kv_seq_axis = k->axis[ks],
        .kv_head_axis = kvh_name,
    };
    return o;

fail:
    if (qc) fc_discard(ctx, qc);
    if (kc) fc_discard(ctx, kc);
    if (vc) fc_discard(ctx, vc);
    if (mc) fc_discard(ctx, mc);
    if (o) fc_discard(ctx, o);
    if (ot) fc_discard(ctx, ot);
    if (sk) fc_storage_release(sk);
    return NULL;
}

_Static_assert(sizeof(fc_attention_options) <= sizeof(((fcg_params *)0)->raw), "fc_attention_options fits a record");

/* The forward runs with recording off: its layout copies of q, k, v and the
 * mask are private. The result gets one record over the user's q, k, v,
 * mask and sinks, with the options as the kernel ran them (p.raw; a NULL
 * head axis means q, or k and v, have none). */
fc_tensor *fc_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v, const fc_attention_options *opt)
{
    FCT_NO_BLOCKS(ctx, "fc_attention", NULL, q, k, v);
    if (!ctx || !q || !k || !v) return NULL;
    static const fc_attention_options defaults = {0};
    if (!opt) opt = &defaults;
    fc_attention_options rec;
    fcg_disable();
    fc_tensor *o = attention_impl(ctx, q, k, v, opt, &rec);
    fcg_enable();
    fc_tensor *in[5] = {q, k, v, opt->mask, opt->sinks};
    fcg_node *n = fcg_record(ctx, o, FCG_ATTENTION, OP, in, 5);
    if (n) {
        memcpy(n->p.raw, &rec, sizeof rec);
        /* S = Q·Kᵀ, dP = dO·Vᵀ, dV, dQ, dK: five contractions over every (query, key) pair */
        double per_pair = (double)(3 * fc_tensor_size(k, rec.dim_axis) + 2 * fc_tensor_size(v, rec.dim_axis));
        n->work = 2.0 * per_pair * (double)fct_numel(o) / (double)fc_tensor_size(o, rec.dim_axis) *
                  (double)fc_tensor_size(k, rec.kv_seq_axis);
    }
    return o;
}
