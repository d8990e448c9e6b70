/* SPDX-License-Identifier: MIT */
/* Contractions by name: einsum, dot, matmul, linear — all lowered to one
 * (batched) f32 GEMM call on views.
 *
 * Every axis of the two operands is classified by the output list:
 *   in a and b, kept     -> batch       in a and b, dropped -> contracted (K)
 *   in a only, kept      -> rows (M)    in b only, kept     -> columns (N)
 *   in one only, dropped -> summed out first.
 * Each operand is permuted to [batch, M or K, K or N] and each group of axes
 * merged into one stride when the memory layout allows (no copy); a group
 * that cannot merge makes that operand a contiguous copy. B may be f16/bf16:
 * the GEMM widens it exactly while packing and accumulates in f32. */
#include <string.h>

#include "fucina/ops.h"
#include "exec/gemm.h"
#include "tensor/grad_record.h"
#include "tensor/internal.h"
#include "tensor/quant_tensor.h"

enum { GRP_BATCH, GRP_M, GRP_K, GRP_N };

static int in_list(const char *const *l, int n, const char *x)
{
    for (int i = 0; i < n; i++) if (l[i] == x) return 1;
    return 0;
}
static int axis_of(const fc_tensor *t, const char *name)
{
    for (int i = 0; i < t->rank; i++) if (t->axis[i] == name) return i;
    return -1;
}

/* Merge the axes idx[0..n) of t (in that order) into one (size, stride).
 * Returns 0 if they are not mergeable. An empty group is (1, 0). */
static int merge_group(const fc_tensor *t, const int *idx, int n, int64_t *size, int64_t *stride)
{
    int64_t s = 1, st = 0;
    int have = 0;
    for (int i = n - 1; i >= 0; i--) {
        int64_t d = t->dim[idx[i]];
        if (d == 1) continue;
        if (!have) { st = t->stride[idx[i]]; have = 1; }
        else if (t->stride[idx[i]] != st * s) return 0;
        s *= d;
    }
    *size = s;
    *stride = have ? st : 0;
    return 1;
}

/* End the op's private scope `sc` and hand `res` (made inside it; may be
 * NULL) to the caller's scope as a fresh header over the same storage. The
 * header takes over res's backward record, if any. */
static fc_tensor *leave_scope(fc_ctx *ctx, fc_scope sc, fc_tensor *res)
{
    fc_retain(res);
    fc_scope_end(ctx, sc);
    if (!res) return NULL;
    fc_tensor *v = fct_view(ctx, res);
    if (v) {
        v->grad = res->grad;
        v->grad_release = res->grad_release;
        res->grad = NULL;
        res->grad_release = NULL;
    }
    fc_release(res);
    return v;
}

/* Merge t's three axis groups (idx[g][0..n[g])) into (size, stride) each. If
 * a group cannot merge, replace *t by a contiguous copy in group order (the
 * copy belongs to the caller's scope) and merge again. 0 on failure. */
static int grouped(fc_ctx *ctx, fc_tensor **t, int idx[3][FC_MAX_RANK], const int n[3], int64_t size[3],
                   int64_t stride[3])
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int ok = 1;
        for (int g = 0; g < 3; g++) ok = ok && merge_group(*t, idx[g], n[g], &size[g], &stride[g]);
        if (ok) return 1;
        const char *ord[FC_MAX_RANK];
        int r = 0;
        for (int g = 0; g < 3; g++)
            for (int i = 0; i < n[g]; i++) ord[r++] = (*t)->axis[idx[g][i]];
        *t = fc_clone(ctx, fc_permute(ctx, *t, ord, r));
        if (!*t) return 0;
        r = 0;
        for (int g = 0; g < 3; g++)
            for (int i = 0; i < n[g]; i++) idx[g][i] = r++;
    }
    return 0;
}

static fc_tensor *einsum_impl(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const char *const *out, int n)
{
    static const char *op = "fc_einsum";
    if (!ctx || !a || !b) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    int qa = fc_dtype_is_block(a->dtype), qb = fc_dtype_is_block(b->dtype); /* contract_block.c */
    if ((a->dtype != FC_F32 && !qa) || (b->dtype != FC_F32 && b->dtype != FC_F16 && b->dtype != FC_BF16 && !qb))
        return fc_fail(ctx, FC_ERR_DTYPE, "%s: a must be f32 and b f32, f16 or bf16 (either may be block-quantized): "
                       "%s and %s", op, fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2));
    if (n < 0 || n > FC_MAX_RANK) return fc_fail(ctx, FC_ERR_SHAPE, "%s: %d output axes (0..%d)", op, n, FC_MAX_RANK);
    if (n > 0 && !out) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: the output axis list is NULL (n = %d)", op, n);
    const char *on[FC_MAX_RANK];
    for (int i = 0; i < n; i++) {
        on[i] = fct_name(ctx, op, out[i]);
        if (!on[i]) return NULL;
        for (int j = 0; j < i; j++)
            if (on[j] == on[i]) return fc_fail(ctx, FC_ERR_AXIS, "%s: output axis \"%s\" is listed twice", op, out[i]);
        if (axis_of(a, on[i]) < 0 && axis_of(b, on[i]) < 0)
            return fc_fail(ctx, FC_ERR_AXIS, "%s: output axis \"%s\" is in neither %s nor %s", op, out[i],
                           fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2));
    }
    /* Shared axes must agree in size. */
    for (int i = 0; i < a->rank; i++) {
        int j = axis_of(b, a->axis[i]);
        if (j >= 0 && a->dim[i] != b->dim[j])
            return fc_fail(ctx, FC_ERR_SHAPE, "%s: axis \"%s\" has size %lld in %s and %lld in %s", op, a->axis[i],
                           (long long)a->dim[i], fct_describe(a, d1, sizeof d1), (long long)b->dim[j],
                           fct_describe(b, d2, sizeof d2));
    }
    if (qa || qb) return fct_einsum_block(ctx, a, b, on, n);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *res = NULL;
    /* Sum out private dropped axes first. */
    const char *drop[FC_MAX_RANK];
    int nd = 0;
    for (int i = 0; i < a->rank; i++)
        if (axis_of(b, a->axis[i]) < 0 && !in_list(on, n, a->axis[i])) drop[nd++] = a->axis[i];
    fc_tensor *A = nd ? fc_sum(ctx, a, drop, nd) : a;
    nd = 0;
    for (int i = 0; i < b->rank; i++)
        if (axis_of(a, b->axis[i]) < 0 && !in_list(on, n, b->axis[i])) drop[nd++] = b->axis[i];
    fc_tensor *B = b;
    if (nd) { /* sums of f16/bf16 come back f32, which the GEMM takes too */
        B = fc_sum(ctx, b, drop, nd);
    }
    if (!A || !B) goto done;
    /* Groups, in output order for batch/M/N and in a's order for K. */
    int ia[3][FC_MAX_RANK], ib[3][FC_MAX_RANK], na[3] = {0}, nb[3] = {0};
    const char *bat[FC_MAX_RANK], *mm[FC_MAX_RANK], *nn[FC_MAX_RANK];
    int nbat = 0, nm = 0, nnn = 0;
    int64_t bsz[FC_MAX_RANK], msz[FC_MAX_RANK], nsz[FC_MAX_RANK];
    for (int i = 0; i < n; i++) {
        int pa = axis_of(A, on[i]), pb = axis_of(B, on[i]);
        if (pa >= 0 && pb >= 0) { ia[0][na[0]++] = pa; ib[0][nb[0]++] = pb; bsz[nbat] = A->dim[pa]; bat[nbat++] = on[i]; }
        else if (pa >= 0) { ia[1][na[1]++] = pa; msz[nm] = A->dim[pa]; mm[nm++] = on[i]; }
        else { ib[2][nb[2]++] = pb; nsz[nnn] = B->dim[pb]; nn[nnn++] = on[i]; }
    }
    for (int i = 0; i < A->rank; i++) {
        int pb = axis_of(B, A->axis[i]);
        if (pb >= 0 && !in_list(on, n, A->axis[i])) { ia[2][na[2]++] = i; ib[1][nb[1]++] = pb; }
    }
    /* ia: [0]=batch [1]=M [2]=K ; ib: [0]=batch [1]=K [2]=N */
    int64_t sa[3], sta[3], sb[3], stb[3];
    if (!grouped(ctx, &A, ia, na, sa, sta) || !grouped(ctx, &B, ib, nb, sb, stb)) goto done;
    int64_t bs_a = sa[0], bst_a = sta[0], m = sa[1], rsa = sta[1], k = sa[2], csa = sta[2];
    int64_t bst_b = stb[0], rsb = stb[1], nsize = sb[2], csb = stb[2];
    /* Result [batch..., M..., N...], contiguous. */
    int64_t rsz[FC_MAX_RANK];
    const char *rnm[FC_MAX_RANK];
    int rr = 0;
    for (int i = 0; i < nbat; i++) { rsz[rr] = bsz[i]; rnm[rr++] = bat[i]; }
    for (int i = 0; i < nm; i++) { rsz[rr] = msz[i]; rnm[rr++] = mm[i]; }
    for (int i = 0; i < nnn; i++) { rsz[rr] = nsz[i]; rnm[rr++] = nn[i]; }
    fc_tensor *C = fct_alloc(ctx, FC_F32, rr, rsz, rnm);
    if (!C) goto done;
    fc_gemm_btype bt = fc_gemm_btype_of(B->dtype);
    fc_gemm_args g = {
        .m = m, .n = nsize, .k = k,
        .a = (const float *)fct_ptr(A), .rsa = rsa, .csa = csa,
        .b = fct_ptr(B), .btype = bt, .rsb = rsb, .csb = csb,
        .c = (float *)fct_ptr(C), .ldc = nsize, .accumulate = 0,
    };
    int rc;
    if (bs_a > 1) rc = fc_gemm_f32_batched(fc_ctx_workers(ctx), &g, bs_a, bst_a, bst_b, m * nsize);
    else rc = fc_gemm_f32(fc_ctx_workers(ctx), &g);
    if (rc != 0) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory for GEMM scratch", op);
        goto done;
    }
    /* Output order as requested. */
    int natural = 1;
    for (int i = 0; i < n; i++) natural &= C->axis[i] == on[i];
    if (natural) res = C;
    else {
        fc_tensor *p = fc_permute(ctx, C, on, n);
        res = fc_clone(ctx, p);
    }
done:
    return leave_scope(ctx, sc, res);
}

/* The contraction runs with recording off (its inner views and sums are
 * private); the result gets one record whose VJP is two more contractions. */
fc_tensor *fc_einsum(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const char *const *out, int n)
{
    if (!ctx || !a || !b) return NULL;
    fcg_disable();
    fc_tensor *y = einsum_impl(ctx, a, b, out, n);
    fcg_enable();
    fc_tensor *in[2] = {a, b};
    fcg_node *nd = fcg_record(ctx, y, FCG_EINSUM, "fc_einsum", in, 2);
    if (nd) {
        fcg_set_axes(nd, (const char *const *)y->axis, y->rank);
        double k = 1; /* contracted size: a's axes that are in b but not in y */
        for (int i = 0; i < a->rank; i++)
            if (axis_of(b, a->axis[i]) >= 0 && axis_of(y, a->axis[i]) < 0) k *= (double)a->dim[i];
        nd->work = 2.0 * (double)fct_numel(y) * k;
    }
    return y;
}

fc_tensor *fc_dot(fc_ctx *ctx, fc_tensor *a, fc_tensor *b, const char *axis)
{
    if (!ctx || !a || !b) return NULL;
    const char *k = fct_name(ctx, "fc_dot", axis);
    if (!k) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (axis_of(a, k) < 0 || axis_of(b, k) < 0)
        return fc_fail(ctx, FC_ERR_AXIS, "fc_dot: axis \"%s\" must be in both %s and %s", axis,
                       fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2));
    const char *out[2 * FC_MAX_RANK];
    int n = 0;
    for (int i = 0; i < a->rank; i++) if (a->axis[i] != k) out[n++] = a->axis[i];
    for (int i = 0; i < b->rank; i++)
        if (b->axis[i] != k && axis_of(a, b->axis[i]) < 0) out[n++] = b->axis[i];
    if (n > FC_MAX_RANK)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_dot: the result of %s and %s would have %d axes (max %d)",
                       fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2), n, FC_MAX_RANK);
    return fc_einsum(ctx, a, b, out, n);
}

fc_tensor *fc_matmul(fc_ctx *ctx, fc_tensor *a, fc_tensor *b)
{
    if (!ctx || !a || !b) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (a->rank < 1 || b->rank < 1)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_matmul: operands need rank >= 1: %s and %s", fct_describe(a, d1, sizeof d1),
                       fct_describe(b, d2, sizeof d2));
    const char *ka = a->axis[a->rank - 1];
    const char *kb = b->rank == 1 ? b->axis[0] : b->axis[b->rank - 2];
    if (a->dim[a->rank - 1] != (b->rank == 1 ? b->dim[0] : b->dim[b->rank - 2]))
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_matmul: inner sizes differ: %s x %s (axes \"%s\" and \"%s\")",
                       fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2), ka, kb);
    const char *tmp = fc_axis_intern("__matmul_k", NULL);
    fc_scope sc = fc_scope_begin(ctx);
    fc_tensor *a2 = fc_rename(ctx, a, ka, tmp);
    fc_tensor *b2 = fc_rename(ctx, b, kb, tmp);
    fc_tensor *res = NULL;
    if (a2 && b2) {
        if (b->rank >= 2 && axis_of(a2, b->axis[b->rank - 1]) >= 0 && b->axis[b->rank - 1] != a->axis[0] &&
            a->rank >= 2 && b->axis[b->rank - 1] == a->axis[a->rank - 2]) {
            fc_fail(ctx, FC_ERR_AXIS, "fc_matmul: the rows of %s and the columns of %s have the same name \"%s\"; rename one",
                    fct_describe(a, d1, sizeof d1), fct_describe(b, d2, sizeof d2), b->axis[b->rank - 1]);
        } else {
            res = fc_dot(ctx, a2, b2, "__matmul_k");
        }
    }
    return leave_scope(ctx, sc, res);
}

fc_tensor *fc_linear(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias)
{
    if (!ctx || !x || !w) return NULL;
    char d1[FCT_DESC_MAX], d2[FCT_DESC_MAX];
    if (w->rank != 2)
        return fc_fail(ctx, FC_ERR_SHAPE, "fc_linear: the weight must be [out, in], not %s", fct_describe(w, d1, sizeof d1));
    if (axis_of(x, w->axis[1]) < 0)
        return fc_fail(ctx, FC_ERR_AXIS, "fc_linear: %s has no axis \"%s\" to contract with the weight %s",
                       fct_describe(x, d1, sizeof d1), w->axis[1], fct_describe(w, d2, sizeof d2));
    if (axis_of(x, w->axis[0]) >= 0)
        return fc_fail(ctx, FC_ERR_AXIS, "fc_linear: %s already has the weight's output axis \"%s\"",
                       fct_describe(x, d1, sizeof d1), w->axis[0]);
    fc_tensor *y = fc_dot(ctx, x, w, w->axis[1]);
    if (!y || !bias) return y;
    fc_tensor *z = fc_add(ctx, y, bias);
    fc_discard(ctx, y);
    return z;
}
