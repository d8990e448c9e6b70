/* SPDX-License-Identifier: MIT */
/* safetensors: round trips (every dtype, ranks 0..8, strided inputs, axis
 * names, mmap and read modes, tensors alive after close); fixtures written
 * independently by tests/goldens/gen_safetensors_fixtures.py (read back
 * against the script's values; the writer's exact bytes); one crafted file
 * per validation rule; truncation at every length and header byte flips;
 * atomic saves; load_into. Temporary files live in a mkdtemp directory that
 * the suite removes. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fucina/fucina.h"
#include "fct_golden.h"

FCT_SUITE_WITH_TMPDIR(safetensors, 2, "fc_st_");

/* ---- helpers ------------------------------------------------------------------ */

static const char *P(const char *name) { return fct_path(dir, name); }

/* A file: 8-byte length of `json`, json, then n data bytes. */
static void write_st(const char *name, const char *json, const void *data, size_t n)
{
    size_t h = strlen(json);
    unsigned char *b = malloc(8 + h + n + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, json, h);
    if (n) memcpy(b + 8 + h, data, n);
    fct_write_file(P(name), b, 8 + h + n);
    free(b);
}

/* Names of the directory's entries that are not `keep` (NULL: all). */
static int dir_entries_except(const char *keep)
{
    DIR *d = opendir(dir);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (keep && !strcmp(e->d_name, keep)) continue;
        cr_log_info("entry: %s", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* Opening `name` fails (mmap and read modes alike) with st and a message
 * naming the op, the file and every given substring. */
static void expect_open_error(const char *name, fc_status st, const char *s1, const char *s2)
{
    for (int mode = 0; mode < 2; mode++) {
        fc_safetensors *f = fc_safetensors_open(ctx, P(name), mode ? FC_ST_READ : 0);
        cr_assert_null(f, "%s: opened a malformed file", name);
        const char *m = fc_ctx_error(ctx);
        cr_expect_eq(fc_ctx_status(ctx), st, "%s: want %s, got %s: %s", name, fc_status_name(st),
                     fc_status_name(fc_ctx_status(ctx)), m);
        cr_expect(strstr(m, "fc_safetensors_open") && strstr(m, name), "%s: message lacks the op or file: %s", name, m);
        if (s1) cr_expect(strstr(m, s1), "%s: message lacks \"%s\": %s", name, s1, m);
        if (s2) cr_expect(strstr(m, s2), "%s: message lacks \"%s\": %s", name, s2, m);
        fc_ctx_clear_error(ctx);
    }
}

/* A one-tensor header for the entry text `entry` of tensor "t". */
static void expect_entry_error(const char *name, const char *entry, size_t ndata, const char *s1, const char *s2)
{
    char json[1024];
    snprintf(json, sizeof json, "{\"t\":%s}", entry);
    unsigned char data[64] = {0};
    cr_assert(ndata <= sizeof data);
    write_st(name, json, data, ndata);
    expect_open_error(name, FC_ERR_FORMAT, s1, s2);
}

static void expect_status(fc_status got, fc_status want, const char *s1, const char *s2)
{
    const char *m = fc_ctx_error(ctx);
    cr_expect_eq(got, want, "want %s, got %s: %s", fc_status_name(want), fc_status_name(got), m);
    cr_expect_eq(fc_ctx_status(ctx), want);
    if (s1) cr_expect(strstr(m, s1), "message lacks \"%s\": %s", s1, m);
    if (s2) cr_expect(strstr(m, s2), "message lacks \"%s\": %s", s2, m);
    fc_ctx_clear_error(ctx);
}

/* A tensor of dtype dt with deterministic bytes (bools 0/1). */
static fc_tensor *patterned(fc_dtype dt, const fc_dim *dims, int rank, unsigned seed)
{
    fc_tensor *t = fc_empty(ctx, dt, dims, rank);
    cr_assert(t, "%s", fc_ctx_error(ctx));
    unsigned char *p = fc_tensor_data(t);
    size_t n = fc_tensor_nbytes(t);
    for (size_t i = 0; i < n; i++)
        p[i] = dt == FC_BOOL ? (unsigned char)((i + seed) % 3 == 0) : (unsigned char)(i * 37u + seed * 11u + 5u);
    return t;
}

static unsigned char *bytes_of(const fc_tensor *t)
{
    size_t n = fc_tensor_nbytes(t);
    unsigned char *p = malloc(n);
    cr_assert_eq(fc_tensor_read(ctx, t, p, n), FC_OK, "%s", fc_ctx_error(ctx));
    return p;
}

static void expect_same(const fc_tensor *got, const fc_tensor *want, const char *what, int check_names)
{
    cr_assert(got, "%s: NULL (%s)", what, fc_ctx_error(ctx));
    cr_assert_eq(fc_tensor_dtype(got), fc_tensor_dtype(want), "%s: dtype", what);
    cr_assert_eq(fc_tensor_rank(got), fc_tensor_rank(want), "%s: rank", what);
    for (int a = 0; a < fc_tensor_rank(want); a++) {
        cr_expect_eq(fc_tensor_dim(got, a), fc_tensor_dim(want, a), "%s: dim %d", what, a);
        if (check_names)
            cr_expect_str_eq(fc_tensor_axis(got, a), fc_tensor_axis(want, a), "%s: axis %d name", what, a);
    }
    unsigned char *x = bytes_of(got), *y = bytes_of(want);
    cr_expect(memcmp(x, y, fc_tensor_nbytes(want)) == 0, "%s: bytes differ", what);
    free(x);
    free(y);
}

static const fc_dtype all_dtypes[FC_DTYPE_PLAIN_COUNT] = {FC_BOOL, FC_U8, FC_I8, FC_I16, FC_I32,
                                                    FC_I64,  FC_F16, FC_BF16, FC_F32, FC_F64};

/* ---- round trips -------------------------------------------------------------- */

Test(safetensors, round_trip_every_dtype_and_rank)
{
    static const int64_t sizes[FC_MAX_RANK] = {2, 1, 3, 1, 2, 1, 1, 2};
    static const char *const names[FC_MAX_RANK] = {"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"};
    enum { N = FC_DTYPE_PLAIN_COUNT * (FC_MAX_RANK + 1) };
    fc_named_tensor ts[N];
    char tn[N][32];
    int n = 0;
    fc_scope s = fc_scope_begin(ctx);
    for (int d = 0; d < FC_DTYPE_PLAIN_COUNT; d++) {
        for (int r = 0; r <= FC_MAX_RANK; r++) {
            fc_dim dims[FC_MAX_RANK];
            /* Odd ranks get axis names, even ones stay positional. */
            for (int a = 0; a < r; a++) dims[a] = (fc_dim){r % 2 ? names[a] : NULL, sizes[a]};
            snprintf(tn[n], sizeof tn[n], "%s.r%d", fc_dtype_name(all_dtypes[d]), r);
            ts[n] = (fc_named_tensor){tn[n], patterned(all_dtypes[d], dims, r, (unsigned)n)};
            n++;
        }
    }
    cr_assert_eq(fc_safetensors_save(ctx, P("all.st"), ts, n, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    cr_expect_eq(dir_entries_except("all.st"), 0, "temporary files left behind");
    for (int mode = 0; mode < 2; mode++) {
        fc_safetensors *f = fc_safetensors_open(ctx, P("all.st"), mode ? FC_ST_READ : 0);
        cr_assert(f, "%s", fc_ctx_error(ctx));
        cr_assert_eq(fc_safetensors_count(f), n);
        for (int i = 0; i < n; i++) {
            cr_expect_str_eq(fc_safetensors_name(f, i), tn[i], "header order");
            fc_safetensors_entry e;
            cr_assert(fc_safetensors_info(f, i, &e));
            cr_expect_eq(e.dtype, fc_tensor_dtype(ts[i].tensor));
            expect_same(fc_safetensors_get(f, tn[i]), ts[i].tensor, tn[i], 1);
        }
        cr_expect_null(fc_safetensors_name(f, n));
        cr_expect_eq(fc_safetensors_find(f, "nope"), -1);
        fc_safetensors_close(f);
    }
    fc_scope_end(ctx, s);
}

Test(safetensors, round_trip_strided_inputs)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *base = patterned(FC_F32, FC_SHAPE({"r", 4}, {"c", 6}), 1);
    fc_tensor *tr = fc_transpose(ctx, base, "r", "c");                   /* c, r */
    fc_tensor *nr = fc_narrow(ctx, base, "c", 1, 3);                     /* gaps between rows */
    fc_tensor *row = patterned(FC_I16, FC_SHAPE({"c", 6}), 2);
    fc_tensor *bc = fc_broadcast_to(ctx, row, FC_SHAPE({"r", 3}, {"c", 6})); /* stride 0 */
    fc_tensor *sel = fc_select(ctx, tr, "c", 2);                          /* rank 1, stride 6 */
    cr_assert(tr && nr && bc && sel, "%s", fc_ctx_error(ctx));
    cr_assert(!fc_tensor_is_contiguous(tr) && !fc_tensor_is_contiguous(nr) && !fc_tensor_is_contiguous(bc));
    fc_named_tensor ts[] = {{"tr", tr}, {"nr", nr}, {"bc", bc}, {"sel", sel}};
    cr_assert_eq(fc_safetensors_save(ctx, P("strided.st"), ts, 4, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    fc_safetensors *f = fc_safetensors_open(ctx, P("strided.st"), 0);
    cr_assert(f, "%s", fc_ctx_error(ctx));
    for (int i = 0; i < 4; i++) {
        fc_tensor *t = fc_safetensors_get(f, ts[i].name);
        expect_same(t, ts[i].tensor, ts[i].name, 1);
        cr_expect(fc_tensor_is_contiguous(t));
    }
    fc_safetensors_close(f);
    fc_scope_end(ctx, s);
}

Test(safetensors, axis_names_and_metadata)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *a = patterned(FC_F32, FC_SHAPE({"batch", 2}, {"in", 3}), 1);
    fc_tensor *pos = patterned(FC_F32, FC_SHAPE({NULL, 2}, {NULL, 3}), 2);
    fc_tensor *swapped = fc_transpose(ctx, pos, "_0", "_1"); /* _1, _0: not in order, so stored */
    fc_tensor *sc = fc_scalar(ctx, FC_F64, 2.5);
    const char *meta[] = {"format", "pt", "step", "1200", "empty", ""};
    fc_named_tensor ts[] = {{"a", a}, {"pos", pos}, {"swapped", swapped}, {"sc", sc}};
    cr_assert_eq(fc_safetensors_save(ctx, P("names.st"), ts, 4, meta, 3), FC_OK, "%s", fc_ctx_error(ctx));
    fc_safetensors *f = fc_safetensors_open(ctx, P("names.st"), 0);
    cr_assert(f, "%s", fc_ctx_error(ctx));
    fc_tensor *ga = fc_safetensors_get(f, "a"), *gp = fc_safetensors_get(f, "pos"), *gs = fc_safetensors_get(f, "swapped");
    expect_same(ga, a, "a", 1);
    expect_same(gp, pos, "pos", 1);
    expect_same(gs, swapped, "swapped", 1);
    cr_expect_str_eq(fc_tensor_axis(gs, 0), "_1");
    fc_tensor *gsc = fc_safetensors_get(f, "sc");
    cr_assert(gsc);
    cr_expect_eq(fc_tensor_rank(gsc), 0);
    cr_expect_eq(fc_tensor_item(gsc), 2.5);
    /* User entries first, in order, then the writer's axis entries. */
    cr_assert_eq(fc_safetensors_meta_count(f), 5);
    static const char *const keys[] = {"format", "step", "empty", "fucina.axes.a", "fucina.axes.swapped"};
    for (int i = 0; i < 5; i++) cr_expect_str_eq(fc_safetensors_meta_key(f, i), keys[i]);
    cr_expect_str_eq(fc_safetensors_meta(f, "step"), "1200");
    cr_expect_str_eq(fc_safetensors_meta(f, "empty"), "");
    cr_expect_str_eq(fc_safetensors_meta(f, "fucina.axes.a"), "batch,in");
    cr_expect_null(fc_safetensors_meta(f, "fucina.axes.pos"));
    cr_expect_null(fc_safetensors_meta(f, "missing"));
    fc_safetensors_close(f);
    fc_scope_end(ctx, s);
}

/* Invalid or foreign "fucina.axes.*" entries leave positional names. */
Test(safetensors, axis_metadata_fallback)
{
    float d[6] = {0};
    const char *cases[] = {"b,a", "x,x", "x", "x,y,z", "x,", ",y", "x y,z", "ok,waaaaaaaaaaaaaaaaaaaaaaaaaaaaaaay_too_long"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char json[512];
        snprintf(json, sizeof json, "{\"__metadata__\":{\"fucina.axes.t\":\"%s\"},"
                 "\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", cases[c]);
        write_st("ax.st", json, d, sizeof d);
        fc_safetensors *f = fc_safetensors_open(ctx, P("ax.st"), 0);
        cr_assert(f, "%s", fc_ctx_error(ctx));
        fc_tensor *t = fc_safetensors_get(f, "t");
        cr_assert(t, "%s", fc_ctx_error(ctx));
        if (c == 0) {
            cr_expect_str_eq(fc_tensor_axis(t, 0), "b");
            cr_expect_str_eq(fc_tensor_axis(t, 1), "a");
        } else {
            cr_expect_str_eq(fc_tensor_axis(t, 0), "_0", "case \"%s\"", cases[c]);
            cr_expect_str_eq(fc_tensor_axis(t, 1), "_1", "case \"%s\"", cases[c]);
        }
        fc_release(t);
        fc_safetensors_close(f);
    }
}

Test(safetensors, tensors_outlive_the_handle)
{
    for (int mode = 0; mode < 2; mode++) {
        fc_tensor *w = patterned(FC_F64, FC_SHAPE({"x", 5}, {"y", 7}), 3);
        fc_named_tensor ts[] = {{"w", w}};
        cr_assert_eq(fc_safetensors_save(ctx, P("alive.st"), ts, 1, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
        fc_safetensors *f = fc_safetensors_open(ctx, P("alive.st"), mode ? FC_ST_READ : 0);
        cr_assert(f, "%s", fc_ctx_error(ctx));
        fc_tensor *a = fc_safetensors_get(f, "w"), *b = fc_safetensors_get(f, "w");
        fc_tensor *v = fc_narrow(ctx, a, "y", 2, 3);
        cr_assert(a && b && v);
        /* Zero-copy: both share the file's bytes. */
        cr_expect_eq(fc_tensor_data(a), fc_tensor_data(b), "mode %d: not zero-copy", mode);
        fc_safetensors_close(f);
        fc_release(a);
        /* Replace the file: a mapping must not see the new bytes. */
        fc_tensor *z = fc_zeros(ctx, FC_F64, FC_SHAPE({"x", 5}, {"y", 7}));
        fc_named_tensor tz[] = {{"w", z}};
        cr_assert_eq(fc_safetensors_save(ctx, P("alive.st"), tz, 1, NULL, 0), FC_OK);
        expect_same(b, w, "after close", 1);
        fc_tensor *wv = fc_narrow(ctx, w, "y", 2, 3);
        expect_same(v, wv, "view after close", 1);
        fc_release(wv);
        fc_release(v);
        fc_release(b);
        fc_release(z);
        fc_release(w);
    }
}

/* The mapping is private: writing into a tensor never changes the file. */
Test(safetensors, writes_do_not_reach_the_file)
{
    fc_tensor *w = patterned(FC_I32, FC_SHAPE({"n", 16}), 4);
    fc_named_tensor ts[] = {{"w", w}};
    cr_assert_eq(fc_safetensors_save(ctx, P("cow.st"), ts, 1, NULL, 0), FC_OK);
    size_t n0;
    unsigned char *before = fct_read_file(P("cow.st"), &n0);
    fc_safetensors *f = fc_safetensors_open(ctx, P("cow.st"), 0);
    cr_assert(f);
    fc_tensor *t = fc_safetensors_get(f, "w");
    cr_assert_eq(fc_fill(ctx, t, 9), FC_OK, "%s", fc_ctx_error(ctx));
    fc_tensor *e3 = fc_select(ctx, t, "n", 3);
    cr_expect_eq(fc_tensor_item(e3), 9.0);
    fc_release(e3);
    fc_safetensors_close(f);
    size_t n1;
    unsigned char *after = fct_read_file(P("cow.st"), &n1);
    cr_expect(n0 == n1 && memcmp(before, after, n0) == 0, "the file changed");
    free(before);
    free(after);
    fc_release(t);
    fc_release(w);
}

/* ---- the independent fixtures (gen_safetensors_fixtures.py) ---------------------- */

typedef struct ref_tensor {
    char name[128];
    char dtype[8];
    int rank;
    int64_t dim[FC_MAX_RANK];
    char axes[128];
    unsigned char data[256];
    size_t nbytes;
    int n;
    double v[16];
} ref_tensor;

typedef struct ref_file {
    ref_tensor t[32];
    int nt;
    char mk[16][128], mv[16][128];
    int nm;
} ref_file;

/* "x<hex>" into out (NUL-terminated too); returns the byte count. */
static size_t unhex(const char *tok, unsigned char *out, size_t cap)
{
    cr_assert(tok && tok[0] == 'x', "bad hex token %s", tok ? tok : "(null)");
    size_t n = strlen(tok + 1) / 2;
    cr_assert(n < cap, "hex token too long");
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        cr_assert(sscanf(tok + 1 + 2 * i, "%2x", &v) == 1);
        out[i] = (unsigned char)v;
    }
    out[n] = 0;
    return n;
}

static void load_reference(ref_file *r)
{
    memset(r, 0, sizeof *r);
    char path[1024], line[8192];
    snprintf(path, sizeof path, "%s/safetensors/reference.txt", FC_GOLDEN_DIR);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s (run tests/goldens/gen_safetensors_fixtures.py)", path);
    while (fgets(line, sizeof line, f)) {
        char *save = NULL, *tok = strtok_r(line, " \n", &save);
        if (!tok || tok[0] == '#') continue;
        if (!strcmp(tok, "M")) {
            cr_assert(r->nm < 16);
            unhex(strtok_r(NULL, " \n", &save), (unsigned char *)r->mk[r->nm], sizeof r->mk[0]);
            unhex(strtok_r(NULL, " \n", &save), (unsigned char *)r->mv[r->nm], sizeof r->mv[0]);
            r->nm++;
            continue;
        }
        cr_assert(!strcmp(tok, "T") && r->nt < 32, "bad line in %s", path);
        ref_tensor *t = &r->t[r->nt++];
        unhex(strtok_r(NULL, " \n", &save), (unsigned char *)t->name, sizeof t->name);
        snprintf(t->dtype, sizeof t->dtype, "%s", strtok_r(NULL, " \n", &save));
        t->rank = atoi(strtok_r(NULL, " \n", &save));
        for (int a = 0; a < t->rank; a++) t->dim[a] = atoll(strtok_r(NULL, " \n", &save));
        snprintf(t->axes, sizeof t->axes, "%s", strtok_r(NULL, " \n", &save));
        t->nbytes = unhex(strtok_r(NULL, " \n", &save), t->data, sizeof t->data);
        t->n = atoi(strtok_r(NULL, " \n", &save));
        cr_assert(t->n <= 16);
        for (int i = 0; i < t->n; i++) t->v[i] = strtod(strtok_r(NULL, " \n", &save), NULL);
    }
    fclose(f);
    cr_assert(r->nt > 0);
}

/* The test's own dtype table, independent of the reader's. */
static fc_dtype dtype_of(const char *s)
{
    static const struct { const char *s; fc_dtype d; } m[] = {
        {"F64", FC_F64}, {"F32", FC_F32}, {"F16", FC_F16}, {"BF16", FC_BF16}, {"I64", FC_I64},
        {"I32", FC_I32}, {"I16", FC_I16}, {"I8", FC_I8},   {"U8", FC_U8},     {"BOOL", FC_BOOL}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!strcmp(s, m[i].s)) return m[i].d;
    cr_assert_fail("unknown dtype %s in reference.txt", s);
    return FC_F32;
}

static void check_reference_file(const ref_file *r, const char *file, int mode)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/safetensors/%s", FC_GOLDEN_DIR, file);
    fc_safetensors *f = fc_safetensors_open(ctx, path, mode);
    cr_assert(f, "%s: %s", file, fc_ctx_error(ctx));
    cr_assert_eq(fc_safetensors_count(f), r->nt, "%s", file);
    cr_assert_eq(fc_safetensors_meta_count(f), r->nm, "%s", file);
    for (int i = 0; i < r->nm; i++) {
        cr_expect_str_eq(fc_safetensors_meta_key(f, i), r->mk[i], "%s: metadata order", file);
        cr_expect_str_eq(fc_safetensors_meta(f, r->mk[i]), r->mv[i], "%s: metadata %s", file, r->mk[i]);
    }
    for (int i = 0; i < r->nt; i++) {
        const ref_tensor *e = &r->t[i];
        cr_expect_str_eq(fc_safetensors_name(f, i), e->name, "%s: header order", file);
        fc_tensor *t = fc_safetensors_get(f, e->name);
        cr_assert(t, "%s: %s: %s", file, e->name, fc_ctx_error(ctx));
        fc_dtype dt = dtype_of(e->dtype);
        cr_expect_eq(fc_tensor_dtype(t), dt, "%s: %s: dtype", file, e->name);
        cr_assert_eq(fc_tensor_rank(t), e->rank, "%s: %s: rank", file, e->name);
        cr_expect_eq((uintptr_t)fc_tensor_data(t) % fc_dtype_size(dt), 0, "%s: %s: misaligned data", file, e->name);
        char axes[128];
        if (!strcmp(e->axes, "-")) axes[0] = 0;
        else snprintf(axes, sizeof axes, "%s", e->axes);
        char *save = NULL, *ax = strtok_r(axes, ",", &save);
        for (int a = 0; a < e->rank; a++) {
            cr_expect_eq(fc_tensor_dim(t, a), e->dim[a], "%s: %s: dim %d", file, e->name, a);
            char want[16];
            if (ax) snprintf(want, sizeof want, "%s", ax), ax = strtok_r(NULL, ",", &save);
            else snprintf(want, sizeof want, "_%d", a);
            cr_expect_str_eq(fc_tensor_axis(t, a), want, "%s: %s: axis %d", file, e->name, a);
        }
        cr_assert_eq(fc_tensor_nbytes(t), e->nbytes, "%s: %s: size", file, e->name);
        unsigned char *b = bytes_of(t);
        cr_expect(memcmp(b, e->data, e->nbytes) == 0, "%s: %s: bytes differ", file, e->name);
        free(b);
        cr_assert_eq(fc_tensor_numel(t), e->n);
        double *v = fct_values(t);
        for (int k = 0; k < e->n; k++) {
            if (isnan(e->v[k])) cr_expect(isnan(v[k]), "%s: %s[%d] = %g, want nan", file, e->name, k, v[k]);
            else cr_expect(v[k] == e->v[k] && signbit(v[k]) == signbit(e->v[k]), "%s: %s[%d] = %a, want %a", file,
                           e->name, k, v[k], e->v[k]);
        }
        free(v);
        fc_release(t);
    }
    fc_safetensors_close(f);
}

Test(safetensors, reference_fixtures)
{
    static ref_file r;
    load_reference(&r);
    for (int mode = 0; mode < 2; mode++) {
        check_reference_file(&r, "reference_aligned.safetensors", mode ? FC_ST_READ : 0);
        check_reference_file(&r, "reference_unaligned.safetensors", mode ? FC_ST_READ : 0);
    }
}

/* The writer's bytes, exactly as the script computed them. */
Test(safetensors, writer_exact_bytes)
{
    fc_scope s = fc_scope_begin(ctx);
    const float wv[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
    const int16_t iv[3] = {-2, 0, 300};
    const uint8_t mv[4] = {1, 0, 0, 1};
    const uint16_t hv[2] = {0x3fc0, 0xc000}; /* bf16 1.5, -2.0 */
    fc_named_tensor ts[] = {
        {"w", fc_from_data(ctx, FC_F32, FC_SHAPE({"out", 2}, {"in", 3}), wv, sizeof wv)},
        {"b\t\"\\\xc3\xa9", fc_from_data(ctx, FC_I16, FC_SHAPE({NULL, 3}), iv, sizeof iv)},
        {"s", fc_scalar(ctx, FC_I8, -7)},
        {"m", fc_from_data(ctx, FC_BOOL, FC_SHAPE({NULL, 2}, {NULL, 2}), mv, sizeof mv)},
        {"h", fc_from_data(ctx, FC_BF16, FC_SHAPE({"k", 2}), hv, sizeof hv)},
    };
    const char *meta[] = {"format", "pt", "note", "x\ny"};
    cr_assert_eq(fc_safetensors_save(ctx, P("exact.st"), ts, 5, meta, 2), FC_OK, "%s", fc_ctx_error(ctx));
    char path[1024];
    snprintf(path, sizeof path, "%s/safetensors/writer_expected.safetensors", FC_GOLDEN_DIR);
    size_t ng, nw;
    unsigned char *got = fct_read_file(P("exact.st"), &ng), *want = fct_read_file(path, &nw);
    cr_expect_eq(ng, nw, "size %zu, want %zu", ng, nw);
    for (size_t i = 0; i < ng && i < nw; i++) {
        if (got[i] != want[i]) {
            cr_expect_fail("first difference at byte %zu: 0x%02x, want 0x%02x", i, got[i], want[i]);
            break;
        }
    }
    /* And the reader gives the tensors back, "h" copied (offset 35 is odd). */
    fc_safetensors *f = fc_safetensors_open(ctx, P("exact.st"), 0);
    cr_assert(f, "%s", fc_ctx_error(ctx));
    for (int i = 0; i < 5; i++) expect_same(fc_safetensors_get(f, ts[i].name), ts[i].tensor, ts[i].name, 1);
    fc_safetensors_entry e;
    cr_assert(fc_safetensors_info(f, 4, &e));
    cr_expect(!strcmp(e.name, "h") && e.dtype == FC_BF16 && e.rank == 1 && e.dim[0] == 2 && e.begin == 35 &&
              e.end == 39, "info of \"h\"");
    cr_expect(!fc_safetensors_info(f, 5, &e));
    fc_safetensors_close(f);
    free(got);
    free(want);
    fc_scope_end(ctx, s);
}

/* JSON escapes decode (\uXXXX, surrogate pairs, short escapes); a file
 * without tensors is valid. */
Test(safetensors, json_escapes)
{
    write_st("esc.st", "{\"__metadata__\":{\"k\":\"a\\u00e9\\ud83d\\ude00\\n\\t\\\"\\\\\\/\\b\\f\\r\\u0001\"}}   ",
             NULL, 0);
    fc_safetensors *f = fc_safetensors_open(ctx, P("esc.st"), 0);
    cr_assert(f, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_safetensors_count(f), 0);
    cr_expect_str_eq(fc_safetensors_meta(f, "k"), "a\xc3\xa9\xf0\x9f\x98\x80\n\t\"\\/\b\f\r\x01");
    fc_safetensors_close(f);
}

/* ---- malformed files: one per rule -------------------------------------------- */

Test(safetensors, malformed_lengths)
{
    fct_write_file(P("empty.st"), "", 0);
    expect_open_error("empty.st", FC_ERR_FORMAT, "0 bytes, shorter than the 8-byte header length", NULL);
    fct_write_file(P("short.st"), "\x05\x00\x00", 3);
    expect_open_error("short.st", FC_ERR_FORMAT, "3 bytes, shorter than the 8-byte", NULL);
    fct_write_file(P("zero.st"), "\0\0\0\0\0\0\0\0{}", 10);
    expect_open_error("zero.st", FC_ERR_FORMAT, "header length (bytes 0..7) is 0", NULL);
    unsigned char big[10] = {0x01, 0x00, 0x40, 0x06, 0, 0, 0, 0, '{', '}'}; /* 100 MiB + 1 */
    fct_write_file(P("big.st"), big, sizeof big);
    expect_open_error("big.st", FC_ERR_FORMAT, "104857601", "100 MiB limit");
    unsigned char huge[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    fct_write_file(P("huge.st"), huge, sizeof huge);
    expect_open_error("huge.st", FC_ERR_FORMAT, "100 MiB limit", NULL);
    unsigned char past[12] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    fct_write_file(P("past.st"), past, sizeof past);
    expect_open_error("past.st", FC_ERR_FORMAT, "header says 100 bytes, the file has 4", NULL);
}

Test(safetensors, malformed_io)
{
    fc_safetensors *f = fc_safetensors_open(ctx, P("does-not-exist.st"), 0);
    cr_assert_null(f);
    expect_status(fc_ctx_status(ctx), FC_ERR_IO, "cannot open", "does-not-exist.st");
    cr_assert_eq(mkdir(P("adir"), 0755), 0);
    cr_assert_null(fc_safetensors_open(ctx, P("adir"), 0));
    expect_status(fc_ctx_status(ctx), FC_ERR_IO, "not a regular file", NULL);
}

/* Syntax errors name the reason and the file offset (8 + JSON offset). */
Test(safetensors, malformed_json)
{
    static const struct { const char *json, *reason; long at; } cases[] = {
        {"{\"a\":{}", "not closed", -1},
        {"{\"a\" 1}", "expected ':'", 13},
        {"{\"a\":1,}", "trailing comma", 15},
        {"{\"a\":1 \"b\":2}", "expected ',' or '}'", 15},
        {"{a:1}", "expected a string key", 9},
        {"{\"a\":\"x}", "unterminated string", 13},
        {"{\"a\":\"\\x\"}", "invalid escape", 14},
        {"{\"a\":\"\\u12G4\"}", "4 hex digits", 14},
        {"{\"a\":\"\\udc00\"}", "lone low surrogate", 14},
        {"{\"a\":\"\\ud83dx\"}", "not followed by a low surrogate", 14},
        {"{\"a\":\"\\ud83d\\u0041\"}", "not followed by a low surrogate", 14},
        {"{\"a\":\"\xff\"}", "invalid UTF-8 byte 0xff", 14},
        {"{\"a\":\"\xc0\x80\"}", "invalid UTF-8 byte 0xc0", 14},
        {"{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8 byte 0xed", 14},
        {"{\"a\":\"\xe2\x82\"}", "invalid UTF-8", 14},
        {"{\"a\":\"\x01\"}", "raw control byte 0x01", 14},
        {"{\"a\":01}", "leading zero", 13},
        {"{\"a\":1.5}", "only integers", 13},
        {"{\"a\":2e3}", "only integers", 13},
        {"{\"a\":-}", "expected a digit", 14},
        {"{\"a\":99999999999999999999}", "out of range", 13},
        {"{\"a\":tru}", "unexpected 't'", 13},
        {"{\"a\":1} x", "after the JSON value", 16},
        {"{\"a\":1}\0", "after the JSON value", 15},
        {"\xef\xbb\xbf{}", "unexpected 0xef", 8},
        {"", NULL, 0}, /* placeholder: the deep nesting case is built below */
    };
    for (size_t i = 0; cases[i].reason; i++) {
        char name[32], at[32];
        snprintf(name, sizeof name, "json%zu.st", i);
        /* Lengths from the literal: case 23 has an embedded NUL. */
        size_t h = strlen(cases[i].json) + (i == 23);
        unsigned char b[128];
        for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)h >> (8 * k));
        memcpy(b + 8, cases[i].json, h);
        fct_write_file(P(name), b, 8 + h);
        snprintf(at, sizeof at, "(at byte %ld)", cases[i].at);
        expect_open_error(name, FC_ERR_FORMAT, cases[i].reason, cases[i].at >= 0 ? at : "header JSON");
    }
    char deep[300]; /* 200 unclosed arrays: the depth cap comes first */
    memset(deep, '[', 200);
    deep[200] = 0;
    char json[400];
    snprintf(json, sizeof json, "{\"a\":%s}", deep);
    write_st("deep.st", json, NULL, 0);
    expect_open_error("deep.st", FC_ERR_FORMAT, "nesting deeper than", NULL);
}

Test(safetensors, malformed_structure)
{
    write_st("root1.st", "[1,2]", NULL, 0);
    expect_open_error("root1.st", FC_ERR_FORMAT, "the header is a JSON array, not an object", NULL);
    write_st("root2.st", "\"x\"", NULL, 0);
    expect_open_error("root2.st", FC_ERR_FORMAT, "JSON string, not an object", NULL);
    const char *e = "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}";
    char json[512];
    snprintf(json, sizeof json, "{\"a\":%s,\"b\":%s,\"a\":%s}", e, e, e);
    write_st("dup.st", json, "xy", 2);
    expect_open_error("dup.st", FC_ERR_FORMAT, "duplicate key \"a\"", "(at byte 113)");
    expect_entry_error("dupfield.st", "{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}", 1,
                       "duplicate key \"dtype\"", NULL);
    expect_entry_error("notobj.st", "[1]", 0, "tensor \"t\": the entry is a JSON array, not an object", "(at byte 13)");
    expect_entry_error("unknown.st", "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"extra\":1}", 1,
                       "tensor \"t\": unknown field \"extra\"", "(at byte 60)");
    /* Names: empty, with NUL. */
    snprintf(json, sizeof json, "{\"\":%s}", e);
    write_st("emptyname.st", json, "x", 1);
    expect_open_error("emptyname.st", FC_ERR_FORMAT, "empty tensor name", "(at byte 9)");
    snprintf(json, sizeof json, "{\"a\\u0000b\":%s}", e);
    write_st("nulname.st", json, "x", 1);
    expect_open_error("nulname.st", FC_ERR_FORMAT, "contains a NUL character", NULL);
}

Test(safetensors, malformed_dtype)
{
    expect_entry_error("nodt.st", "{\"shape\":[1],\"data_offsets\":[0,1]}", 1, "tensor \"t\": missing field \"dtype\"",
                       NULL);
    expect_entry_error("dt5.st", "{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,1]}", 1,
                       "dtype is a JSON integer, not a string", "(at byte 22)");
    expect_entry_error("dtx.st", "{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}", 4,
                       "tensor \"t\": unknown dtype \"F33\"", NULL);
    static const char *const unsup[] = {"F8_E4M3", "F8_E5M2", "U16", "U32", "U64"};
    for (int i = 0; i < 5; i++) {
        char entry[128];
        snprintf(entry, sizeof entry, "{\"dtype\":\"%s\",\"shape\":[1],\"data_offsets\":[0,1]}", unsup[i]);
        expect_entry_error("unsup.st", entry, 1, "tensor \"t\": unsupported dtype", unsup[i]);
    }
}

Test(safetensors, malformed_shape)
{
    expect_entry_error("noshape.st", "{\"dtype\":\"U8\",\"data_offsets\":[0,1]}", 1, "missing field \"shape\"", NULL);
    expect_entry_error("shape3.st", "{\"dtype\":\"U8\",\"shape\":3,\"data_offsets\":[0,1]}", 1,
                       "shape is a JSON integer, not an array", NULL);
    expect_entry_error("shapeneg.st", "{\"dtype\":\"U8\",\"shape\":[1,-2],\"data_offsets\":[0,1]}", 1,
                       "shape[1] is not a non-negative integer", "(at byte 38)");
    expect_entry_error("shapestr.st", "{\"dtype\":\"U8\",\"shape\":[\"2\"],\"data_offsets\":[0,2]}", 2,
                       "shape[0] is not a non-negative integer", NULL);
    expect_entry_error("shapeflt.st", "{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}", 1, "only integers",
                       NULL);
    expect_entry_error("rank9.st", "{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}", 1,
                       "shape has rank 9; at most 8", NULL);
    expect_entry_error("zerodim.st", "{\"dtype\":\"U8\",\"shape\":[2,0],\"data_offsets\":[0,0]}", 0,
                       "shape[1] is 0", "no zero-size axes");
    expect_entry_error("overflow.st",
                       "{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,8]}", 8,
                       "the byte size overflows 64 bits", NULL);
    expect_entry_error("overflow2.st", "{\"dtype\":\"I16\",\"shape\":[9223372036854775807,2],\"data_offsets\":[0,2]}", 2,
                       "overflows 64 bits", NULL);
}

Test(safetensors, malformed_offsets)
{
    expect_entry_error("nooff.st", "{\"dtype\":\"U8\",\"shape\":[1]}", 1, "missing field \"data_offsets\"", NULL);
    static const char *const bad[] = {"5", "[0]", "[0,1,2]", "[-1,0]", "[0,\"1\"]", "{}"};
    for (int i = 0; i < 6; i++) {
        char entry[128];
        snprintf(entry, sizeof entry, "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":%s}", bad[i]);
        expect_entry_error("offs.st", entry, 2, "data_offsets must be [begin, end], two non-negative integers", NULL);
    }
    expect_entry_error("order.st", "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,1]}", 4,
                       "data_offsets [2, 1]: begin is after end", NULL);
    expect_entry_error("trunc.st", "{\"dtype\":\"F32\",\"shape\":[25],\"data_offsets\":[0,100]}", 8,
                       "expected at least 100 bytes of data, file has 8", NULL);
    expect_entry_error("size.st", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}", 8,
                       "data_offsets [0, 8] hold 8 bytes, but F32 [1] needs 4", "(at byte 55)");
    write_st("overlap.st",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             "0123456789ab", 12);
    expect_open_error("overlap.st", FC_ERR_FORMAT, "tensors \"a\" [0, 8) and \"b\" [4, 12) overlap", NULL);
    write_st("same.st",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             "0123", 4);
    expect_open_error("same.st", FC_ERR_FORMAT, "overlap", NULL);
}

Test(safetensors, malformed_metadata)
{
    write_st("meta1.st", "{\"__metadata__\":[\"a\"]}", NULL, 0);
    expect_open_error("meta1.st", FC_ERR_FORMAT, "__metadata__ is a JSON array, not an object", "(at byte 24)");
    write_st("meta2.st", "{\"__metadata__\":{\"k\":\"v\",\"n\":1}}", NULL, 0);
    expect_open_error("meta2.st", FC_ERR_FORMAT, "__metadata__ \"n\"", "metadata values must be strings");
    write_st("meta3.st", "{\"__metadata__\":{\"k\":{}}}", NULL, 0);
    expect_open_error("meta3.st", FC_ERR_FORMAT, "the value is a JSON object", NULL);
    write_st("meta4.st", "{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", NULL, 0);
    expect_open_error("meta4.st", FC_ERR_FORMAT, "contains a NUL character", NULL);
    write_st("meta5.st", "{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0);
    expect_open_error("meta5.st", FC_ERR_FORMAT, "duplicate key \"__metadata__\"", NULL);
}

/* Fucina's bool is 0 or 1: other bytes are rejected when the tensor is taken. */
Test(safetensors, malformed_bool_bytes)
{
    write_st("bool.st", "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}", "\x01\x00\x02", 3);
    fc_safetensors *f = fc_safetensors_open(ctx, P("bool.st"), 0);
    cr_assert(f, "%s", fc_ctx_error(ctx));
    cr_expect_null(fc_safetensors_get(f, "m"));
    expect_status(fc_ctx_status(ctx), FC_ERR_FORMAT, "tensor \"m\": BOOL element 2 is 0x02", NULL);
    cr_expect_null(fc_safetensors_get(f, "zz"));
    expect_status(fc_ctx_status(ctx), FC_ERR_INVALID_ARG, "fc_safetensors_get", "no tensor \"zz\"");
    fc_safetensors_close(f);
}

/* Cut a valid file at every length and flip header bytes: never a crash
 * or an out-of-bounds read (ASan in CI), always a clean error or a file
 * whose tensors can all be taken. */
Test(safetensors, truncations_and_flips)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_named_tensor ts[] = {
        {"w", patterned(FC_F32, FC_SHAPE({"o", 3}, {"i", 2}), 1)},
        {"b", patterned(FC_BOOL, FC_SHAPE({"o", 3}), 2)},
        {"s", fc_scalar(ctx, FC_I64, 7)},
        {"h", patterned(FC_BF16, FC_SHAPE({NULL, 2}, {NULL, 2}), 3)},
    };
    const char *meta[] = {"k", "v\u00e9"};
    cr_assert_eq(fc_safetensors_save(ctx, P("v.st"), ts, 4, meta, 1), FC_OK, "%s", fc_ctx_error(ctx));
    fc_scope_end(ctx, s);
    size_t n;
    unsigned char *full = fct_read_file(P("v.st"), &n);
    for (size_t len = 0; len < n; len++) {
        fct_write_file(P("cut.st"), full, len);
        fc_safetensors *f = fc_safetensors_open(ctx, P("cut.st"), len % 2 ? FC_ST_READ : 0);
        cr_assert_null(f, "a file cut at %zu of %zu bytes opened", len, n);
        fc_status st = fc_ctx_status(ctx);
        cr_expect(st == FC_ERR_FORMAT, "cut at %zu: %s: %s", len, fc_status_name(st), fc_ctx_error(ctx));
        cr_expect(strstr(fc_ctx_error(ctx), "cut.st"), "cut at %zu: %s", len, fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | full[i];
    static const unsigned char masks[] = {0x01, 0x02, 0x10, 0x20, 0x80, 0xff};
    unsigned char *b = malloc(n);
    int opened = 0, failed = 0;
    for (size_t pos = 0; pos < 8 + hlen; pos++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(b, full, n);
            b[pos] ^= masks[m];
            fct_write_file(P("flip.st"), b, n);
            fc_safetensors *f = fc_safetensors_open(ctx, P("flip.st"), m % 2 ? FC_ST_READ : 0);
            if (!f) {
                fc_status st = fc_ctx_status(ctx);
                cr_expect(st == FC_ERR_FORMAT, "flip %zu^0x%02x: %s: %s", pos, masks[m], fc_status_name(st),
                          fc_ctx_error(ctx));
                cr_expect(fc_ctx_error(ctx)[0], "flip %zu: empty message", pos);
                fc_ctx_clear_error(ctx);
                failed++;
                continue;
            }
            opened++;
            for (int i = 0; i < fc_safetensors_count(f); i++) {
                fc_tensor *t = fc_safetensors_get(f, fc_safetensors_name(f, i));
                if (t) {
                    double *v = fct_values(t);
                    free(v);
                    fc_release(t);
                }
                fc_ctx_clear_error(ctx);
            }
            (void)fc_safetensors_meta(f, "k");
            fc_safetensors_close(f);
        }
    }
    cr_log_info("flips: %d opened, %d rejected", opened, failed);
    cr_expect(failed > 0);
    free(b);
    free(full);
}

/* ---- saving: rejections and atomicity ------------------------------------------- */

/* A destination with known bytes, to check that failed saves leave it alone. */
static unsigned char *make_destination(const char *name, size_t *n)
{
    fc_tensor *t = patterned(FC_U8, FC_SHAPE({"n", 40}), 9);
    fc_named_tensor ts[] = {{"old", t}};
    cr_assert_eq(fc_safetensors_save(ctx, P(name), ts, 1, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    fc_release(t);
    return fct_read_file(P(name), n);
}

static void expect_unchanged(const char *name, const unsigned char *before, size_t n)
{
    size_t m;
    unsigned char *now = fct_read_file(P(name), &m);
    cr_expect(m == n && memcmp(now, before, n) == 0, "%s changed", name);
    free(now);
    cr_expect_eq(dir_entries_except(name), 0, "files left next to %s", name);
}

Test(safetensors, save_rejects_bad_arguments)
{
    size_t n;
    unsigned char *before = make_destination("dst.st", &n);
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *a = patterned(FC_F32, FC_SHAPE({"x", 2}), 1);
    fc_named_tensor dup[] = {{"a", a}, {"b", a}, {"a", a}};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), dup, 3, NULL, 0), FC_ERR_INVALID_ARG,
                  "fc_safetensors_save: duplicate tensor name \"a\"", "entries 0 and 2");
    fc_named_tensor reserved[] = {{"__metadata__", a}};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), reserved, 1, NULL, 0), FC_ERR_INVALID_ARG,
                  "\"__metadata__\" is reserved", NULL);
    fc_named_tensor empty[] = {{"ok", a}, {"", a}};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), empty, 2, NULL, 0), FC_ERR_INVALID_ARG, "tensor name 1 is empty",
                  NULL);
    fc_named_tensor noname[] = {{NULL, a}};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), noname, 1, NULL, 0), FC_ERR_INVALID_ARG, "tensor name 0 is NULL",
                  NULL);
    fc_named_tensor utf[] = {{"bad\xff", a}};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), utf, 1, NULL, 0), FC_ERR_INVALID_ARG, "not valid UTF-8",
                  "byte 3");
    fc_named_tensor surrogate[] = {{"\xed\xa0\x80", a}};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), surrogate, 1, NULL, 0), FC_ERR_INVALID_ARG, "not valid UTF-8",
                  NULL);
    fc_named_tensor nul[] = {{"t", NULL}};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), nul, 1, NULL, 0), FC_ERR_INVALID_ARG, "(\"t\") is NULL", NULL);
    fc_named_tensor one[] = {{"a", a}};
    const char *m1[] = {"k", "v", "k", "w"};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), one, 1, m1, 2), FC_ERR_INVALID_ARG,
                  "duplicate metadata key \"k\"", NULL);
    const char *m2[] = {"fucina.axes.a", "x"};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), one, 1, m2, 1), FC_ERR_INVALID_ARG,
                  "prefix \"fucina.axes.\" is reserved", NULL);
    const char *m3[] = {"k", NULL};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), one, 1, m3, 1), FC_ERR_INVALID_ARG, "metadata value 0 is NULL",
                  NULL);
    const char *m4[] = {"k", "\xc3"};
    expect_status(fc_safetensors_save(ctx, P("dst.st"), one, 1, m4, 1), FC_ERR_INVALID_ARG,
                  "metadata value 0 is not valid UTF-8", NULL);
    expect_status(fc_safetensors_save(ctx, P("dst.st"), one, -1, NULL, 0), FC_ERR_INVALID_ARG, "bad tensor", NULL);
    expect_status(fc_safetensors_save(ctx, NULL, one, 1, NULL, 0), FC_ERR_INVALID_ARG, "path is NULL", NULL);
    fc_scope_end(ctx, s);
    expect_unchanged("dst.st", before, n);
    free(before);
}

/* Names and values that need JSON escapes survive a round trip. */
Test(safetensors, save_odd_names)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *a = patterned(FC_I8, FC_SHAPE({"x", 3}), 1);
    const char *names[] = {"q\"uote", "back\\slash", "new\nline", "\x01\x1f ctl", "\xc3\xa9\xf0\x9f\x98\x80", "a,b"};
    fc_named_tensor ts[6];
    for (int i = 0; i < 6; i++) ts[i] = (fc_named_tensor){names[i], a};
    const char *meta[] = {"key \"\\\n", "val\t\x02\xe2\x82\xac"};
    cr_assert_eq(fc_safetensors_save(ctx, P("odd.st"), ts, 6, meta, 1), FC_OK, "%s", fc_ctx_error(ctx));
    fc_safetensors *f = fc_safetensors_open(ctx, P("odd.st"), 0);
    cr_assert(f, "%s", fc_ctx_error(ctx));
    for (int i = 0; i < 6; i++) {
        cr_expect_str_eq(fc_safetensors_name(f, i), names[i]);
        expect_same(fc_safetensors_get(f, names[i]), a, names[i], 1);
    }
    cr_expect_str_eq(fc_safetensors_meta(f, meta[0]), meta[1]);
    fc_safetensors_close(f);
    fc_scope_end(ctx, s);
}

Test(safetensors, save_replaces_atomically)
{
    size_t n;
    unsigned char *before = make_destination("dst.st", &n);
    fc_tensor *t = patterned(FC_F64, FC_SHAPE({"a", 3}), 5);
    fc_named_tensor ts[] = {{"new", t}};
    cr_assert_eq(fc_safetensors_save(ctx, P("dst.st"), ts, 1, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    cr_expect_eq(dir_entries_except("dst.st"), 0, "temporary files left");
    fc_safetensors *f = fc_safetensors_open(ctx, P("dst.st"), 0);
    cr_assert(f);
    cr_expect_eq(fc_safetensors_count(f), 1);
    cr_expect_str_eq(fc_safetensors_name(f, 0), "new");
    fc_safetensors_close(f);
    /* A bare file name is saved in the current directory. */
    char cwd[512];
    cr_assert(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(dir), 0);
    cr_expect_eq(fc_safetensors_save(ctx, "bare.st", ts, 1, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    cr_assert_eq(chdir(cwd), 0);
    cr_expect_eq(access(P("bare.st"), F_OK), 0);
    /* No tensors, no metadata: "{}" and padding. */
    cr_assert_eq(fc_safetensors_save(ctx, P("none.st"), NULL, 0, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    size_t nn;
    unsigned char *none = fct_read_file(P("none.st"), &nn);
    cr_expect(nn == 16 && memcmp(none, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0, "empty file layout");
    free(none);
    f = fc_safetensors_open(ctx, P("none.st"), 0);
    cr_assert(f, "%s", fc_ctx_error(ctx));
    cr_expect_eq(fc_safetensors_count(f), 0);
    cr_expect_eq(fc_safetensors_meta_count(f), 0);
    fc_safetensors_close(f);
    fc_release(t);
    free(before);
}

Test(safetensors, failed_saves_leave_nothing)
{
    size_t n;
    unsigned char *before = make_destination("dst.st", &n);
    fc_tensor *t = patterned(FC_F32, FC_SHAPE({"a", 1 << 14}), 5); /* 64 KiB */
    fc_named_tensor ts[] = {{"t", t}};
    /* No such directory: the temporary cannot be created. */
    expect_status(fc_safetensors_save(ctx, P("missing/x.st"), ts, 1, NULL, 0), FC_ERR_IO,
                  "cannot create the temporary file", "missing/x.st.tmp.");
    /* The destination is a directory: refused before any data is written. */
    cr_assert_eq(mkdir(P("sub"), 0755), 0);
    expect_status(fc_safetensors_save(ctx, P("sub"), ts, 1, NULL, 0), FC_ERR_IO, "exists and is a directory", "sub");
    /* A write fails halfway (a 16 KiB file size limit). */
    struct rlimit old, lim;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 16384;
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    fc_status st = fc_safetensors_save(ctx, P("dst.st"), ts, 1, NULL, 0);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    expect_status(st, FC_ERR_IO, "cannot write", "dst.st.tmp.");
    /* Only dst.st and the empty sub/ remain, dst.st as it was. */
    cr_expect_eq(rmdir(P("sub")), 0, "sub/ is not empty");
    expect_unchanged("dst.st", before, n);
    fc_release(t);
    free(before);
}

/* ---- load_into ------------------------------------------------------------------ */

static void save_abc(void)
{
    fc_scope s = fc_scope_begin(ctx);
    fc_named_tensor ts[] = {
        {"a", patterned(FC_F32, FC_SHAPE({"r", 2}, {"c", 3}), 1)},
        {"b", patterned(FC_I64, FC_SHAPE({"n", 4}), 2)},
        {"c", fc_scalar(ctx, FC_F64, -1.25)},
    };
    cr_assert_eq(fc_safetensors_save(ctx, P("abc.st"), ts, 3, NULL, 0), FC_OK, "%s", fc_ctx_error(ctx));
    fc_scope_end(ctx, s);
}

Test(safetensors, load_into_copies)
{
    save_abc();
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *want_a = patterned(FC_F32, FC_SHAPE({"r", 2}, {"c", 3}), 1);
    fc_tensor *want_b = patterned(FC_I64, FC_SHAPE({"n", 4}), 2);
    for (int mode = 0; mode < 2; mode++) {
        /* Different axis names, and a strided destination for "a". */
        fc_tensor *buf = fc_zeros(ctx, FC_F32, FC_SHAPE({"q", 3}, {"p", 2}));
        fc_tensor *a = fc_transpose(ctx, buf, "q", "p");
        fc_tensor *b = fc_zeros(ctx, FC_I64, FC_SHAPE({"m", 4}));
        fc_tensor *c = fc_zeros(ctx, FC_F64, FC_SCALAR);
        fc_named_tensor ts[] = {{"c", c}, {"a", a}, {"b", b}};
        cr_assert_eq(fc_safetensors_load_into(ctx, P("abc.st"), ts, 3, FC_ST_STRICT | (mode ? FC_ST_READ : 0)), FC_OK,
                     "%s", fc_ctx_error(ctx));
        expect_same(a, want_a, "a", 0);
        expect_same(b, want_b, "b", 0);
        cr_expect_eq(fc_tensor_item(c), -1.25);
        /* A subset without FC_ST_STRICT is fine. */
        cr_assert_eq(fc_safetensors_load_into(ctx, P("abc.st"), ts, 1, mode ? FC_ST_READ : 0), FC_OK);
    }
    fc_scope_end(ctx, s);
}

/* Every failure leaves every destination as it was. */
Test(safetensors, load_into_errors_modify_nothing)
{
    save_abc();
    fc_scope s = fc_scope_begin(ctx);
    fc_tensor *a = fc_full(ctx, FC_F32, FC_SHAPE({"r", 2}, {"c", 3}), 7);
    fc_tensor *b = fc_full(ctx, FC_I64, FC_SHAPE({"n", 4}), 7);
    fc_tensor *c = fc_full(ctx, FC_F64, FC_SCALAR, 7);
    fc_tensor *a_t = fc_full(ctx, FC_F32, FC_SHAPE({"c", 3}, {"r", 2}), 7);
    fc_tensor *a_64 = fc_full(ctx, FC_F64, FC_SHAPE({"r", 2}, {"c", 3}), 7);
    fc_tensor *b_r2 = fc_full(ctx, FC_I64, FC_SHAPE({"n", 2}, {"k", 2}), 7);

    fc_named_tensor missing[] = {{"a", a}, {"b", b}, {"zz", c}};
    expect_status(fc_safetensors_load_into(ctx, P("abc.st"), missing, 3, 0), FC_ERR_FORMAT,
                  "fc_safetensors_load_into", "tensor \"zz\" is missing from the file");
    fc_named_tensor shape[] = {{"a", a}, {"c", c}, {"a", a_t}};
    expect_status(fc_safetensors_load_into(ctx, P("abc.st"), shape, 3, 0), FC_ERR_SHAPE,
                  "tensor \"a\": shape [2, 3] in the file vs [3, 2] in the tensor", NULL);
    fc_named_tensor rank[] = {{"b", b_r2}};
    expect_status(fc_safetensors_load_into(ctx, P("abc.st"), rank, 1, 0), FC_ERR_SHAPE,
                  "shape [4] in the file vs [2, 2] in the tensor", NULL);
    fc_named_tensor dtype[] = {{"b", b}, {"a", a_64}};
    expect_status(fc_safetensors_load_into(ctx, P("abc.st"), dtype, 2, 0), FC_ERR_DTYPE,
                  "tensor \"a\": dtype f32 in the file vs f64 in the tensor", NULL);
    fc_named_tensor strict[] = {{"a", a}, {"c", c}};
    expect_status(fc_safetensors_load_into(ctx, P("abc.st"), strict, 2, FC_ST_STRICT), FC_ERR_FORMAT,
                  "unexpected tensor \"b\"", NULL);
    fc_named_tensor nulls[] = {{"a", a}, {"b", NULL}};
    expect_status(fc_safetensors_load_into(ctx, P("abc.st"), nulls, 2, 0), FC_ERR_INVALID_ARG, "(\"b\") has no tensor",
                  NULL);
    expect_status(fc_safetensors_load_into(ctx, P("nope.st"), strict, 2, 0), FC_ERR_IO, "fc_safetensors_load_into",
                  "cannot open");
    write_st("bad.st", "{\"a\":1}", NULL, 0);
    expect_status(fc_safetensors_load_into(ctx, P("bad.st"), strict, 2, 0), FC_ERR_FORMAT, "fc_safetensors_load_into",
                  "not an object");
    fc_tensor *all[] = {a, b, c, a_t, a_64, b_r2};
    for (int i = 0; i < 6; i++) {
        double *v = fct_values(all[i]);
        for (int64_t k = 0; k < fc_tensor_numel(all[i]); k++) cr_expect_eq(v[k], 7.0, "tensor %d modified", i);
        free(v);
    }
    fc_scope_end(ctx, s);
}
