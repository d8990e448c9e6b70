/* SPDX-License-Identifier: MIT */
/* Runtime-test helpers: contexts, the leak-checking suite fixture, goldens
 * (fct_golden.h). */
#define _POSIX_C_SOURCE 200809L
#include "fct_golden.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FC_GOLDEN_DIR
#error "FC_GOLDEN_DIR (the tests/goldens directory) must be defined"
#endif

/* ---- contexts -------------------------------------------------------------- */

fc_ctx *fct_new_ctx(int threads)
{
    char err[256];
    fc_ctx_options o = {.threads = threads};
    fc_ctx *c = fc_ctx_new(&o, err, sizeof err);
    cr_assert(c, "%s", err);
    return c;
}

static uint64_t suite_live0;

fc_ctx *fct_suite_begin(int threads)
{
    fc_ctx *c = fct_new_ctx(threads);
    suite_live0 = fc_ctx_pool_stats(c).tensors_live;
    return c;
}

void fct_suite_end(fc_ctx *ctx)
{
    cr_expect_eq(fc_ctx_pool_stats(ctx).tensors_live, suite_live0, "tensors leaked: %llu",
                 (unsigned long long)(fc_ctx_pool_stats(ctx).tensors_live - suite_live0));
    fc_ctx_free(ctx);
}

fct_ctx_pair fct_ctx_pair_begin(void)
{
    fct_ctx_pair p;
    p.c[0] = fct_new_ctx(1);
    p.c[1] = fct_new_ctx(2);
    for (int k = 0; k < 2; k++) p.live[k] = fc_ctx_pool_stats(p.c[k]).tensors_live;
    for (int k = 0; k < 2; k++) p.scope[k] = fc_scope_begin(p.c[k]);
    return p;
}

void fct_ctx_pair_end(fct_ctx_pair *p)
{
    for (int k = 0; k < 2; k++) fc_scope_end(p->c[k], p->scope[k]);
    for (int k = 0; k < 2; k++) cr_expect_eq(fc_ctx_pool_stats(p->c[k]).tensors_live, p->live[k]);
    for (int k = 0; k < 2; k++) fc_ctx_free(p->c[k]);
}

/* ---- goldens ----------------------------------------------------------------- */

fct_goldens fct_golden_load(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", FC_GOLDEN_DIR, file);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s (run tests/goldens/gen_structure_goldens.py)", path);
    fct_goldens g = {NULL, 0};
    char tok[64];
    while (fscanf(f, "%63s", tok) == 1) {
        if (tok[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n') {}
            continue;
        }
        g.a = realloc(g.a, (size_t)(g.n + 1) * sizeof *g.a);
        fct_golden *e = &g.a[g.n++];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", tok);
        char kind[8];
        cr_assert(fscanf(f, "%7s %d", kind, &e->rank) == 2, "%s: bad header for %s", path, tok);
        e->is_int = strcmp(kind, "i64") == 0;
        e->n = 1;
        for (int i = 0; i < e->rank; i++) {
            long long d;
            cr_assert(fscanf(f, "%lld", &d) == 1);
            e->dim[i] = d;
            e->n *= d;
        }
        e->v = malloc((size_t)e->n * sizeof(double));
        for (int64_t i = 0; i < e->n; i++)
            cr_assert(fscanf(f, "%lf", &e->v[i]) == 1, "%s: short data in %s", path, tok);
    }
    fclose(f);
    return g;
}

const fct_golden *fct_golden_find(const fct_goldens *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->a[i].name, name) == 0) return &g->a[i];
    return NULL;
}

const fct_golden *fct_golden_get(const fct_goldens *g, const char *name)
{
    const fct_golden *e = fct_golden_find(g, name);
    cr_assert(e, "golden %s is missing", name);
    return e;
}

void fct_golden_free(fct_goldens *g)
{
    for (int i = 0; i < g->n; i++) free(g->a[i].v);
    free(g->a);
}

fc_tensor *fct_golden_tensor(fc_ctx *c, const fct_golden *e, fc_dtype dt, const char *const *names)
{
    fc_dim dims[8];
    for (int i = 0; i < e->rank; i++) dims[i] = (fc_dim){names[i], e->dim[i]};
    fc_tensor *t = fc_empty(c, dt, dims, e->rank);
    cr_assert(t);
    size_t es = fc_dtype_size(dt);
    char *p = fc_tensor_data(t);
    for (int64_t i = 0; i < e->n; i++) {
        double v = e->v[i];
        switch (dt) {
        case FC_I32: { int32_t x = (int32_t)v; memcpy(p + i * es, &x, 4); break; }
        case FC_I64: { int64_t x = (int64_t)v; memcpy(p + i * es, &x, 8); break; }
        case FC_F32: { float x = (float)v; memcpy(p + i * es, &x, 4); break; }
        case FC_F64: memcpy(p + i * es, &v, 8); break;
        case FC_F16: { fc_f16 x = fc_f32_to_f16((float)v); memcpy(p + i * es, &x, 2); break; }
        case FC_BF16: { fc_bf16 x = fc_f32_to_bf16((float)v); memcpy(p + i * es, &x, 2); break; }
        case FC_BOOL: case FC_U8: case FC_I8: case FC_I16: cr_assert_fail("unused dtype"); break;
        FC_CASE_BLOCK_DTYPES: cr_assert_fail("block dtypes have no golden values"); break;
        }
    }
    return t;
}

/* ---- checks ------------------------------------------------------------------ */

double *fct_values(const fc_tensor *t)
{
    int r = fc_tensor_rank(t);
    int64_t n = fc_tensor_numel(t);
    double *v = malloc((size_t)n * sizeof *v);
    int64_t idx[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        v[i] = fc_tensor_get(t, idx);
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < fc_tensor_dim(t, d)) break;
            idx[d] = 0;
        }
    }
    return v;
}

void fct_expect_bits(fc_ctx *c1, const fc_tensor *a, fc_ctx *c2, const fc_tensor *b, const char *what)
{
    cr_assert(a && b, "%s: NULL (%s / %s)", what, fc_ctx_error(c1), fc_ctx_error(c2));
    size_t n = fc_tensor_nbytes(a);
    cr_assert_eq(n, fc_tensor_nbytes(b), "%s: sizes differ", what);
    void *x = malloc(n), *y = malloc(n);
    cr_assert_eq(fc_tensor_read(c1, a, x, n), FC_OK);
    cr_assert_eq(fc_tensor_read(c2, b, y, n), FC_OK);
    cr_expect(memcmp(x, y, n) == 0, "%s: results differ", what);
    free(x);
    free(y);
}

void fct_expect_error(fc_ctx *c, fc_status st, const char *op, const char *axis)
{
    cr_expect_eq(fc_ctx_status(c), st, "want %s, got %s: %s", fc_status_name(st), fc_status_name(fc_ctx_status(c)),
                 fc_ctx_error(c));
    cr_expect(strstr(fc_ctx_error(c), op) != NULL, "message lacks \"%s\": %s", op, fc_ctx_error(c));
    if (axis) cr_expect(strstr(fc_ctx_error(c), axis) != NULL, "message lacks \"%s\": %s", axis, fc_ctx_error(c));
    fc_ctx_clear_error(c);
}

fc_tensor *fct_variable(fc_ctx *c, fc_tensor *t)
{
    cr_assert(t, "NULL tensor: %s", fc_ctx_error(c));
    cr_assert_eq(fc_requires_grad(c, t, 1), FC_OK, "%s", fc_ctx_error(c));
    return t;
}

fc_tensor *fct_weighted_sum(fc_ctx *c, fc_tensor *y, uint64_t seed, double lo, double hi)
{
    if (!y) return NULL;
    fc_dtype dt = fc_tensor_dtype(y);
    if (dt == FC_F16 || dt == FC_BF16) {
        y = fc_cast(c, y, FC_F32);
        dt = FC_F32;
    }
    fc_dim dims[FC_MAX_RANK];
    for (int i = 0; i < fc_tensor_rank(y); i++) dims[i] = (fc_dim){fc_tensor_axis(y, i), fc_tensor_dim(y, i)};
    fc_tensor *w = fc_rand_uniform(c, dt, dims, fc_tensor_rank(y), seed, lo, hi);
    return fc_sum(c, fc_mul(c, y, w), FC_NO_AXES);
}

void fct_tmpdir(char *dir, size_t cap, const char *prefix)
{
    snprintf(dir, cap, "/tmp/%sXXXXXX", prefix);
    cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

void fct_rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                fct_rm_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

const char *fct_path(const char *dir, const char *name)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

int fct_run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

unsigned char *fct_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "fopen %s: %s", path, strerror(errno));
    cr_assert_eq(fseek(f, 0, SEEK_END), 0, "fseek %s", path);
    long len = ftell(f);
    cr_assert_geq(len, 0, "ftell %s", path);
    cr_assert_eq(fseek(f, 0, SEEK_SET), 0, "fseek %s", path);
    unsigned char *p = malloc((size_t)len + 1);
    cr_assert(p, "out of memory reading %s", path);
    cr_assert_eq(fread(p, 1, (size_t)len, f), (size_t)len, "fread %s", path);
    fclose(f);
    p[len] = 0;
    *n = (size_t)len;
    return p;
}

void fct_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "fopen %s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(p, 1, n, f), n, "fwrite %s", path);
    cr_assert_eq(fclose(f), 0, "fclose %s", path);
}
