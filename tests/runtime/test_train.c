/* SPDX-License-Identifier: MIT */
/* Training runs end to end: the two-spirals classifier (src/train/spirals.c)
 * resumed from a checkpoint continues bit for bit as the uninterrupted run
 * (with dropout and a learning-rate schedule in play, for each optimizer);
 * checkpoints that do not fit the model or the optimizer are refused with a
 * message naming the entry, and leave the parameters untouched. Reaching 99%
 * accuracy is the demo_spirals ctest. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fucina/fucina.h"
#include "fct_golden.h"
#include "train/spirals.h"

static fc_ctx *ctx;
static char dir[64];

static void setup(void)
{
    ctx = fct_suite_begin(2);
    fct_tmpdir(dir, sizeof dir, "fucina-train-");
}
static void teardown(void)
{
    fct_rm_tree(dir);
    fct_suite_end(ctx);
}
TestSuite(train, .init = setup, .fini = teardown);

Test(train, resuming_a_run_is_bit_identical)
{
    for (int k = 0; k < FC_OPTIM_KIND_COUNT; k++) {
        char path[128];
        snprintf(path, sizeof path, "%s/ck-%d.safetensors", dir, k);
        fc_spirals_config base = {.optim = (fc_optim_kind)k, .steps = 60, .points = 50, .hidden = 16,
                                  .dropout = 0.1, .seed = 5};
        fc_spirals_config a = base, b = base;
        a.save_path = path;
        a.save_at = 25;
        fc_spirals_result ra, rb;
        cr_assert_eq(fc_spirals_train(ctx, &a, &ra), FC_OK, "%s", fc_ctx_error(ctx));
        b.resume_path = path;
        cr_assert_eq(fc_spirals_train(ctx, &b, &rb), FC_OK, "%s", fc_ctx_error(ctx));
        cr_expect_eq(ra.steps, 60);
        cr_expect_eq(rb.steps, 60);
        cr_expect_eq(ra.param_hash, rb.param_hash, "%s: resumed parameters differ",
                     fc_optim_kind_name((fc_optim_kind)k));
        cr_expect_eq(ra.loss, rb.loss, "%s: resumed loss differs", fc_optim_kind_name((fc_optim_kind)k));
        /* A run that never saw the checkpoint but stopped early differs: the
         * comparison above is not vacuous. */
        fc_spirals_config c = base;
        c.steps = 59;
        fc_spirals_result rc;
        cr_assert_eq(fc_spirals_train(ctx, &c, &rc), FC_OK, "%s", fc_ctx_error(ctx));
        cr_expect_neq(rc.param_hash, ra.param_hash);
    }
}

static fc_optim *small_optim(fc_optim_kind kind, int64_t out, fc_tensor **w, fc_tensor **b)
{
    *w = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"out", out}, {"in", 3}), 1, -1, 1);
    *b = fc_rand_uniform(ctx, FC_F32, FC_SHAPE({"out", out}), 2, -1, 1);
    cr_assert_eq(fc_requires_grad(ctx, *w, 1), FC_OK);
    cr_assert_eq(fc_requires_grad(ctx, *b, 1), FC_OK);
    fc_optim *o = fc_optim_new(ctx, kind, &(fc_optim_options){.lr = 0.1});
    cr_assert(o, "%s", fc_ctx_error(ctx));
    cr_assert_geq(fc_optim_add_group(o, FC_PARAMS(*w, *b), FC_NAMES("w", "b"), NULL), 0, "%s", fc_ctx_error(ctx));
    return o;
}

static void one_step(fc_optim *o, fc_tensor *w)
{
    fc_scope sc = fc_scope_begin(ctx);
    cr_assert_eq(fc_backward(ctx, fc_sum(ctx, fc_sqr(ctx, w), FC_NO_AXES)), FC_OK, "%s", fc_ctx_error(ctx));
    fc_scope_end(ctx, sc);
    cr_assert_eq(fc_optim_step(o), FC_OK, "%s", fc_ctx_error(ctx));
    fc_optim_zero_grad(o);
}

static void expect_refused(const char *path, fc_optim *o, fc_tensor *w, const char *msg)
{
    double *before = fct_values(w);
    cr_expect_neq(fc_checkpoint_load(ctx, path, o), FC_OK, "a mismatched checkpoint loaded");
    cr_expect(strstr(fc_ctx_error(ctx), msg), "message '%s' lacks '%s'", fc_ctx_error(ctx), msg);
    fc_ctx_clear_error(ctx);
    double *after = fct_values(w);
    cr_expect(memcmp(before, after, sizeof(double) * (size_t)fc_tensor_numel(w)) == 0, "parameters changed");
    free(before);
    free(after);
}

Test(train, mismatched_checkpoints_are_refused)
{
    char path[128];
    snprintf(path, sizeof path, "%s/small.safetensors", dir);
    fc_tensor *w, *b, *w2, *b2, *w3, *b3;
    fc_optim *src = small_optim(FC_OPTIM_ADAM, 4, &w, &b);
    one_step(src, w);
    cr_assert_eq(fc_checkpoint_save(ctx, path, src, (const char *const[]){"run", "test"}, 1), FC_OK, "%s",
                 fc_ctx_error(ctx));
    /* Another optimizer kind. */
    fc_optim *sgd = small_optim(FC_OPTIM_SGD, 4, &w2, &b2);
    expect_refused(path, sgd, w2, "adam optimizer, this one is sgd");
    /* Another shape. */
    fc_optim *wide = small_optim(FC_OPTIM_ADAM, 5, &w3, &b3);
    expect_refused(path, wide, w3, "parameter \"w\"");
    /* The right model loads, and then steps exactly like the source. */
    fc_tensor *w4, *b4;
    fc_optim *same = small_optim(FC_OPTIM_ADAM, 4, &w4, &b4);
    cr_assert_eq(fc_checkpoint_load(ctx, path, same), FC_OK, "%s", fc_ctx_error(ctx));
    one_step(src, w);
    one_step(same, w4);
    fct_expect_bits(ctx, w, ctx, w4, "w after a resumed step");
    fct_expect_bits(ctx, b, ctx, b4, "b after a resumed step");
    /* A missing file. */
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.safetensors", dir);
    expect_refused(missing, same, w4, "none.safetensors");
    fc_optim_free(src);
    fc_optim_free(sgd);
    fc_optim_free(wide);
    fc_optim_free(same);
    fc_tensor *all[] = {w, b, w2, b2, w3, b3, w4, b4};
    for (int i = 0; i < 8; i++) fc_release(all[i]);
}
