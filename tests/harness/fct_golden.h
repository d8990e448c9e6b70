/* SPDX-License-Identifier: MIT */
/* Helpers shared by the hand-written runtime tests (tests/runtime/):
 * contexts that assert on failure, a suite fixture that checks for leaked
 * tensor handles, the PyTorch goldens written by
 * tests/goldens/gen_structure_goldens.py (read from FC_GOLDEN_DIR), and
 * checks of results and errors.
 *
 * Failures are reported with Criterion's cr_assert, so these run inside a
 * test (or its .init / .fini). */
#ifndef FCT_GOLDEN_H
#define FCT_GOLDEN_H

#include <stdint.h>

#include "fucina/fucina.h"

/* ---- contexts -------------------------------------------------------------- */

/* A context with `threads` workers; asserts (with fc_ctx_new's message) if it
 * cannot be made. */
fc_ctx *fct_new_ctx(int threads);

/* Suite fixture: fct_suite_begin makes a context (fct_new_ctx) and remembers
 * its live tensor handles; fct_suite_end expects the same count ("tensors
 * leaked: N" otherwise) and frees the context. One suite context at a time:
 *   static fc_ctx *ctx;
 *   static void setup(void) { ctx = fct_suite_begin(2); }
 *   static void teardown(void) { fct_suite_end(ctx); }
 *   TestSuite(name, .init = setup, .fini = teardown); */
fc_ctx *fct_suite_begin(int threads);
void fct_suite_end(fc_ctx *ctx);

/* A 1-thread and a 2-thread context (c[0], c[1]), for checking that results
 * do not depend on the thread count: fct_ctx_pair_begin records their live
 * tensor handles and opens a scope in each; fct_ctx_pair_end closes the
 * scopes, expects the counts back where they were and frees both. */
typedef struct fct_ctx_pair {
    fc_ctx *c[2];
    uint64_t live[2];
    fc_scope scope[2];
} fct_ctx_pair;
fct_ctx_pair fct_ctx_pair_begin(void);
void fct_ctx_pair_end(fct_ctx_pair *p);

/* ---- goldens (format: gen_structure_goldens.py) ------------------------------ */

/* One array: its name, whether the file typed it i64 (else f32), its shape
 * and its n values, row-major. */
typedef struct fct_golden {
    char name[64];
    int is_int;
    int rank;
    int64_t dim[8];
    int64_t n;
    double *v;
} fct_golden;
typedef struct fct_goldens { fct_golden *a; int n; } fct_goldens;

/* Every array of FC_GOLDEN_DIR/<file>; asserts if the file is missing or
 * malformed. Free with fct_golden_free. */
fct_goldens fct_golden_load(const char *file);
/* The array called name, or NULL. */
const fct_golden *fct_golden_find(const fct_goldens *g, const char *name);
/* The array called name; asserts that it exists. */
const fct_golden *fct_golden_get(const fct_goldens *g, const char *name);
void fct_golden_free(fct_goldens *g);

/* A new contiguous tensor of dtype dt (i32, i64, f32, f64, f16 or bf16) in c
 * holding golden e, its axes called names[0 .. e->rank-1]. */
fc_tensor *fct_golden_tensor(fc_ctx *c, const fct_golden *e, fc_dtype dt, const char *const *names);

/* ---- checks ------------------------------------------------------------------ */

/* ---- temporary files ----------------------------------------------------------- */

/* A new directory /tmp/<prefix>XXXXXX into dir (asserts on failure). */
void fct_tmpdir(char *dir, size_t cap, const char *prefix);
/* Remove path and everything below it. */
void fct_rm_tree(const char *path);
/* "dir/name" in one of four rotating buffers (several paths live at once). */
const char *fct_path(const char *dir, const char *name);

/* A Criterion suite with a leak-checked context `ctx` (fct_suite_begin with
 * n_threads workers) and a fresh temporary directory `dir` (prefix), removed
 * after the suite. Needs <criterion/criterion.h>. */
#define FCT_SUITE_WITH_TMPDIR(suite, n_threads, prefix)                  \
    static fc_ctx *ctx;                                                  \
    static char dir[256];                                                \
    static void suite##_setup(void)                                      \
    {                                                                    \
        ctx = fct_suite_begin(n_threads);                                \
        fct_tmpdir(dir, sizeof dir, prefix);                             \
    }                                                                    \
    static void suite##_teardown(void)                                   \
    {                                                                    \
        fct_rm_tree(dir);                                                \
        fct_suite_end(ctx);                                              \
    }                                                                    \
    TestSuite(suite, .init = suite##_setup, .fini = suite##_teardown)

/* Run a shell command, capture up to cap-1 bytes of its stdout (NUL-ended);
 * its exit status, or -1 when it did not exit normally. */
int fct_run(const char *cmd, char *out, size_t cap);

/* A whole file (malloc'd, one NUL byte past *n so text can be used as is);
 * the test fails with the path and errno when it cannot be read. */
unsigned char *fct_read_file(const char *path, size_t *n);
/* Writes n bytes to path; the test fails when it cannot. */
void fct_write_file(const char *path, const void *p, size_t n);

/* ---- autograd -------------------------------------------------------------- */

/* t made a variable (fc_requires_grad); asserts t is not NULL and that it
 * worked. Returns t. */
fc_tensor *fct_variable(fc_ctx *c, fc_tensor *t);
/* sum(y * w) for a fixed random w (uniform in [lo, hi], from seed) of y's
 * named shape: every element of y gets its own weight, so a misplaced or
 * transposed gradient shows. f16/bf16 y is summed in f32. NULL for NULL y. */
fc_tensor *fct_weighted_sum(fc_ctx *c, fc_tensor *y, uint64_t seed, double lo, double hi);

/* Every element of t (any strides, any dtype) as double, row-major; the
 * caller frees it. */
double *fct_values(const fc_tensor *t);

/* a (of context c1) and b (of c2) are non-NULL and of one size (asserted),
 * and their bytes are equal (expected; "<what>: results differ"). */
void fct_expect_bits(fc_ctx *c1, const fc_tensor *a, fc_ctx *c2, const fc_tensor *b, const char *what);

/* c's error state is st and its message names op and (unless NULL) axis
 * (expected); then clears it. */
void fct_expect_error(fc_ctx *c, fc_status st, const char *op, const char *axis);

#endif
