/* SPDX-License-Identifier: MIT */
/* Install smoke test: a consumer of an installed Fucina (see CMakeLists.txt
 * here, and .ci/run for the pkg-config build). It uses the dispatch API and
 * the tensor and autograd APIs through the installed headers only. */
#include <stdio.h>
#include <string.h>

#include <fucina/fucina.h>

int main(void)
{
    fc_status st = fc_dispatch_init();
    size_t n = fc_kernel_slot_count();
    printf("fucina %s: fc_dispatch_init() = %d, %zu kernel slots, isa cap %s\n", FUCINA_VERSION_STRING, (int)st,
           n, fc_dispatch_cap());
    if (st != FC_OK || n == 0) return 1;
    /* the library found at run time is the one these headers describe */
    if (strcmp(fc_version(), FUCINA_VERSION_STRING) != 0) {
        fprintf(stderr, "fc_version() = %s, the headers say %s\n", fc_version(), FUCINA_VERSION_STRING);
        return 1;
    }

    char err[256];
    fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fc_ctx_new: %s\n", err);
        return 1;
    }
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *x = fc_full(ctx, FC_F32, FC_SHAPE({"batch", 4}, {"in", 8}), 0.5);
    fc_tensor *w = fc_full(ctx, FC_F32, FC_SHAPE({"out", 3}, {"in", 8}), 2.0);
    fc_tensor *y = fc_softmax(ctx, fc_linear(ctx, x, w, NULL), "out", NULL);
    double v = y ? fc_tensor_item(fc_select(ctx, fc_select(ctx, y, "batch", 1), "out", 2)) : -1;
    char desc[64] = "";
    if (y) fc_tensor_describe(y, desc, sizeof desc);
    fc_scope_end(ctx, s);
    int ok = fc_ctx_status(ctx) == FC_OK && v > 0.3333 && v < 0.3334;
    printf("tensor API: %s, softmax of equal logits = %.6f (%s)\n", desc, v, ok ? "ok" : fc_ctx_error(ctx));

    /* Autograd: d/dw sum(w * w) = 2 w. */
    fc_tensor *p = fc_full(ctx, FC_F32, FC_SHAPE({"i", 3}), 1.5);
    fc_requires_grad(ctx, p, 1);
    s = fc_scope_begin(ctx);
    fc_backward(ctx, fc_sum(ctx, fc_mul(ctx, p, p), FC_NO_AXES));
    fc_scope_end(ctx, s);
    s = fc_scope_begin(ctx);
    fc_tensor *g = fc_grad(ctx, p);
    double gv = g ? fc_tensor_item(fc_select(ctx, g, "i", 2)) : -1;
    fc_scope_end(ctx, s);
    int ok2 = fc_ctx_status(ctx) == FC_OK && gv == 3.0;
    printf("autograd: d sum(w^2) / dw = %.1f (%s)\n", gv, ok2 ? "ok" : fc_ctx_error(ctx));
    fc_release(p);
    fc_ctx_free(ctx);
    return ok && ok2 ? 0 : 1;
}
