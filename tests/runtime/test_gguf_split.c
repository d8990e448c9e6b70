/* SPDX-License-Identifier: MIT */
/* Split GGUF models (llama.cpp's gguf-split layout): PREFIX-0000k-of-0000n.gguf
 * files, each a complete GGUF holding split.no (0-based) and split.count as
 * u16, the first also split.tensors.count (i32) and the model's metadata.
 * The parts are written here with the writer and explicit split keys, then
 * opened through the first file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fct_golden.h"
#include "fucina/fucina.h"

static fc_ctx *ctx;
static char dir[256];

static void setup(void)
{
    char err[256];
    ctx = fc_ctx_new(NULL, err, sizeof err);
    cr_assert_not_null(ctx, "%s", err);
    fct_tmpdir(dir, sizeof dir, "gguf_split");
}

static void teardown(void)
{
    fct_rm_tree(dir);
    fc_ctx_free(ctx);
}

TestSuite(gguf_split, .init = setup, .fini = teardown);

/* Tensor j of the model: 4*(j+1) f32 values j*100 + i. */
static const char *const names[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight",
                                    "blk.1.attn_q.weight", "output.weight"};
static float values[5][20];

static void part(const char *prefix, int no, int count, int first, int last, int32_t total, int no_key)
{
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    if (no == 0) cr_assert_eq(fc_gguf_set_str(w, "general.architecture", "qwen3"), FC_OK);
    cr_assert_eq(fc_gguf_set_u16(w, "split.no", (uint16_t)(no_key >= 0 ? no_key : no)), FC_OK);
    cr_assert_eq(fc_gguf_set_u16(w, "split.count", (uint16_t)count), FC_OK);
    if (no == 0) cr_assert_eq(fc_gguf_set_i32(w, "split.tensors.count", total), FC_OK);
    for (int j = first; j <= last; j++) {
        for (int i = 0; i < 4 * (j + 1); i++) values[j][i] = (float)(j * 100 + i);
        int64_t ne[1] = {4 * (j + 1)};
        cr_assert_eq(fc_gguf_writer_add_raw(w, names[j], 0, 1, ne, values[j], (uint64_t)ne[0] * 4), FC_OK, "%s",
                     fc_ctx_error(ctx));
    }
    char name[300];
    snprintf(name, sizeof name, "%s-%05d-of-%05d.gguf", prefix, no + 1, count);
    cr_assert_eq(fc_gguf_writer_save(w, fct_path(dir, name)), FC_OK, "%s", fc_ctx_error(ctx));
    fc_gguf_writer_free(w);
}

static void model(const char *prefix)
{
    part(prefix, 0, 3, 0, 1, 5, -1);
    part(prefix, 1, 3, 2, 3, 0, -1);
    part(prefix, 2, 3, 4, 4, 0, -1);
}

static char first_path[512];
static const char *first(const char *prefix)
{
    char name[300];
    snprintf(name, sizeof name, "%s-00001-of-00003.gguf", prefix);
    snprintf(first_path, sizeof first_path, "%s", fct_path(dir, name));
    return first_path;
}

static void expect_status(fc_status want, const char *path, const char *s1, const char *s2)
{
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    cr_assert_null(g, "opened %s", path);
    const char *m = fc_ctx_error(ctx);
    cr_expect_eq(fc_ctx_status(ctx), want, "%s", m);
    cr_expect(strstr(m, s1), "message lacks \"%s\": %s", s1, m);
    if (s2) cr_expect(strstr(m, s2), "message lacks \"%s\": %s", s2, m);
    fc_ctx_clear_error(ctx);
}

static void expect_error(const char *path, const char *s1, const char *s2)
{
    expect_status(FC_ERR_FORMAT, path, s1, s2);
}

Test(gguf_split, three_parts_read_as_one)
{
    model("m");
    for (int mode = 0; mode < 2; mode++) {
        fc_gguf *g = fc_gguf_open(ctx, first("m"), mode ? FC_GGUF_READ : 0);
        cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
        cr_expect_eq(fc_gguf_split_count(g), 3);
        cr_assert_eq(fc_gguf_tensor_count(g), 5);
        const char *arch;
        size_t len;
        cr_expect_eq(fc_gguf_get_str(g, "general.architecture", &arch, &len), FC_OK);
        static const int split_of[5] = {0, 0, 1, 1, 2};
        fc_tensor *last = NULL;
        for (int j = 0; j < 5; j++) {
            int64_t i = fc_gguf_find_tensor(g, names[j]);
            cr_assert_geq(i, 0, "%s missing", names[j]);
            fc_gguf_tensor_info ti;
            cr_assert(fc_gguf_tensor_info_at(g, i, &ti));
            cr_expect_eq(ti.split, split_of[j], "%s", names[j]);
            cr_expect(!memcmp(ti.data, values[j], (size_t)ti.nbytes), "%s: info bytes differ", names[j]);
            fc_tensor *t = fc_gguf_tensor(g, names[j]);
            cr_assert_not_null(t, "%s", fc_ctx_error(ctx));
            cr_expect(!memcmp(fc_tensor_data(t), values[j], (size_t)ti.nbytes), "%s: tensor bytes differ", names[j]);
            if (j == 4) last = t;
            else fc_release(t);
        }
        fc_gguf_close(g);
        /* The third split's mapping outlives the handle. */
        cr_expect_eq(((const float *)fc_tensor_data(last))[19], 419.0f);
        fc_release(last);
    }
}

Test(gguf_split, missing_part)
{
    part("m", 0, 3, 0, 1, 5, -1);
    part("m", 1, 3, 2, 3, 0, -1);
    expect_status(FC_ERR_IO, first("m"), "m-00003-of-00003.gguf", "cannot open");
}

Test(gguf_split, later_part_opened)
{
    model("m");
    char name[300];
    snprintf(name, sizeof name, "%s", fct_path(dir, "m-00002-of-00003.gguf"));
    expect_error(name, "split 2 of 3", "open the first split");
}

Test(gguf_split, parts_disagree)
{
    part("a", 0, 3, 0, 1, 5, -1);
    part("a", 1, 3, 2, 3, 0, 2); /* says it is split 3 */
    part("a", 2, 3, 4, 4, 0, -1);
    expect_error(first("a"), "a-00002-of-00003.gguf", "expected split 2 of 3");
}

Test(gguf_split, duplicate_tensor_across_parts)
{
    part("d", 0, 3, 0, 1, 5, -1);
    part("d", 1, 3, 1, 2, 0, -1); /* repeats tensor 1 */
    part("d", 2, 3, 4, 4, 0, -1);
    expect_error(first("d"), "also in an earlier split", names[1]);
}

Test(gguf_split, tensor_count_mismatch)
{
    part("c", 0, 3, 0, 1, 6, -1);
    part("c", 1, 3, 2, 3, 0, -1);
    part("c", 2, 3, 4, 4, 0, -1);
    expect_error(first("c"), "split.tensors.count is 6", "hold 5 tensors");
}

Test(gguf_split, unsplittable_name)
{
    fc_gguf_writer *w = fc_gguf_writer_new(ctx);
    cr_assert_eq(fc_gguf_set_u16(w, "split.no", 0), FC_OK);
    cr_assert_eq(fc_gguf_set_u16(w, "split.count", 2), FC_OK);
    cr_assert_eq(fc_gguf_writer_save(w, fct_path(dir, "model.gguf")), FC_OK);
    fc_gguf_writer_free(w);
    char path[512];
    snprintf(path, sizeof path, "%s", fct_path(dir, "model.gguf"));
    expect_error(path, "does not end in \"-00001-of-00002.gguf\"", NULL);
}

Test(gguf_split, single_file_is_one_split)
{
    part("s", 0, 1, 0, 0, 1, -1);
    char path[512];
    snprintf(path, sizeof path, "%s", fct_path(dir, "s-00001-of-00001.gguf"));
    fc_gguf *g = fc_gguf_open(ctx, path, 0);
    cr_assert_not_null(g, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_gguf_split_count(g), 1);
    cr_expect_eq(fc_gguf_tensor_count(g), 1);
    fc_gguf_close(g);
}
