/* SPDX-License-Identifier: MIT */
/* safetensors reading: the header is validated completely at open (rules in
 * docs/IO.md), the data is mmap'd (or read) once, and tensors are wrapped
 * zero-copy over it; a refcounted mapping outlives the handle for as long as
 * any of those tensors. fc_safetensors_load_into is built on top. */
#define _POSIX_C_SOURCE 200809L

#include "fucina/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/axis.h"
#include "exec/ctx.h"
#include "io/file_map.h"
#include "io/atomic_file.h"
#include "io/json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian and is wrapped as is: a big-endian host needs byte swapping"
#endif

#define ST_HEADER_MAX ((uint64_t)100 << 20) /* the reference implementation's cap */
#define ST_JSON_DEPTH 64                    /* a valid header needs 3 */
#define ST_JSON_VALUES (4u << 20)           /* ~10 per tensor; bounds memory (32 B each) on hostile headers */
#define ST_NAME_SHOW 96                     /* bytes of a name quoted in a message */

typedef struct st_entry {
    const char *name;
    fc_dtype dtype;
    int rank;
    int64_t dim[FC_MAX_RANK];
    uint64_t begin, end;
    const char *axes[FC_MAX_RANK]; /* interned; axes[0] NULL: positional names */
} st_entry;

typedef struct st_kv {
    const char *k, *v;
} st_kv;

typedef struct st_name {
    const char *name;
    int idx;
} st_name;

struct fc_safetensors {
    fc_ctx *ctx;
    char *path;
    char *strings;        /* the header's decoded strings (names, metadata) */
    st_entry *e;          /* header order */
    st_name *by_name;     /* sorted by name */
    int n;
    st_kv *meta;          /* header order */
    st_kv *meta_sorted;   /* sorted by key */
    int n_meta;
    fc_file_map *map;     /* NULL when no tensor has data */
    unsigned char *data;  /* start of the data buffer */
};

/* Who is reporting, for messages: "<op>: <path>: <reason>". */
typedef struct st_src {
    fc_ctx *ctx;
    const char *op;
    const char *path;
} st_src;

static void *st_fail(const st_src *o, fc_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void *st_fail(const st_src *o, fc_status st, const char *fmt, ...)
{
    char msg[768], pb[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fc_fail(o->ctx, st, "%s: %s: %s", o->op, fc_io_path_for_msg(o->path, pb, sizeof pb), msg);
}

static const char *show(char buf[ST_NAME_SHOW], const char *s) { return fc_json_quote(buf, ST_NAME_SHOW, s, strlen(s)); }

/* ---- the mapping ---------------------------------------------------------------- */

/* mmap the whole file (copy-on-write: a tensor written in place never
 * changes the file), or read the data buffer's used part. */
static int map_data(const st_src *o, fc_safetensors *f, int fd, int flags, uint64_t fsize, uint64_t data_start,
                    uint64_t used)
{
    if (used == 0) return 1;
    fc_status st = FC_OK;
    int rd = (flags & FC_ST_READ) != 0;
    fc_file_map *m = fc_file_map_new(fd, rd, fsize, data_start, used, &st);
    if (!m) {
        if (st == FC_ERR_OOM)
            st_fail(o, FC_ERR_OOM, "out of memory (%llu bytes of tensor data)", (unsigned long long)used);
        else if (rd)
            st_fail(o, FC_ERR_IO, "cannot read %llu bytes of data at byte %llu: %s", (unsigned long long)used,
                    (unsigned long long)data_start, fc_file_read_error());
        else
            st_fail(o, FC_ERR_IO, "cannot mmap %llu bytes: %s (FC_ST_READ reads instead)", (unsigned long long)fsize,
                    strerror(errno));
        return 0;
    }
    f->data = rd ? (unsigned char *)m->base : (unsigned char *)m->base + data_start;
    f->map = m;
    return 1;
}

/* ---- header validation --------------------------------------------------------- */

static const struct { const char *name; fc_dtype dt; } st_dtypes[] = {
    {"F64", FC_F64}, {"F32", FC_F32}, {"F16", FC_F16}, {"BF16", FC_BF16}, {"I64", FC_I64},
    {"I32", FC_I32}, {"I16", FC_I16}, {"I8", FC_I8},   {"U8", FC_U8},     {"BOOL", FC_BOOL},
};
/* Valid safetensors dtypes Fucina has no type for: named as unsupported
 * rather than unknown, so the message says what to do. */
static const char *const st_unsupported[] = {"U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0",
                                             "F6_E2M3", "F6_E3M2", "F4", "C64"};

static void shape_str(char *buf, size_t cap, const int64_t *dim, int rank)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < rank && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)dim[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* One tensor's entry; `tn` is its quoted name, offsets in messages are
 * file offsets (the JSON offset + 8). */
typedef struct entry_ctx {
    const st_src *o;
    const fc_json_doc *d;
    const char *tn;
    uint64_t data_len;
} entry_ctx;

#define EFAIL(ec, v, fmt, ...)                                                                           \
    (st_fail((ec)->o, FC_ERR_FORMAT, "tensor \"%s\": " fmt " (at byte %llu)", (ec)->tn, __VA_ARGS__,     \
             (unsigned long long)(v)->offset + 8), 0)

static int parse_dtype(const entry_ctx *ec, const fc_json_value *v, fc_dtype *dt)
{
    if (v->kind != FC_JSON_STRING) return EFAIL(ec, v, "dtype is a JSON %s, not a string", fc_json_kind_name(v->kind));
    const char *s = fc_json_str(ec->d, v);
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++) {
        if (strcmp(s, st_dtypes[i].name) == 0 && strlen(s) == v->u.s.len) {
            *dt = st_dtypes[i].dt;
            return 1;
        }
    }
    char q[ST_NAME_SHOW];
    fc_json_quote(q, sizeof q, s, v->u.s.len);
    for (size_t i = 0; i < sizeof st_unsupported / sizeof st_unsupported[0]; i++)
        if (strcmp(s, st_unsupported[i]) == 0)
            return EFAIL(ec, v, "unsupported dtype \"%s\" (Fucina reads F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)", q);
    return EFAIL(ec, v, "unknown dtype \"%s\"", q);
}

static int parse_shape(const entry_ctx *ec, const fc_json_value *v, st_entry *e)
{
    if (v->kind != FC_JSON_ARRAY) return EFAIL(ec, v, "shape is a JSON %s, not an array", fc_json_kind_name(v->kind));
    if (v->u.c.count > FC_MAX_RANK) return EFAIL(ec, v, "shape has rank %u; at most %d", v->u.c.count, FC_MAX_RANK);
    int r = 0;
    for (const fc_json_value *c = fc_json_first(ec->d, v); c; c = fc_json_next(ec->d, c), r++) {
        if (c->kind != FC_JSON_INT || c->u.i < 0) return EFAIL(ec, c, "shape[%d] is not a non-negative integer", r);
        if (c->u.i == 0)
            return EFAIL(ec, c, "shape[%d] is 0: Fucina has no zero-size axes, so empty tensors cannot be read", r);
        e->dim[r] = c->u.i;
    }
    e->rank = r;
    return 1;
}

static int parse_offsets(const entry_ctx *ec, const fc_json_value *v, st_entry *e)
{
    const fc_json_value *b = v->kind == FC_JSON_ARRAY ? fc_json_first(ec->d, v) : NULL;
    const fc_json_value *x = b ? fc_json_next(ec->d, b) : NULL;
    if (v->kind != FC_JSON_ARRAY || v->u.c.count != 2 || b->kind != FC_JSON_INT || x->kind != FC_JSON_INT ||
        b->u.i < 0 || x->u.i < 0)
        return EFAIL(ec, v, "data_offsets must be [begin, end], two non-negative integers%s", "");
    e->begin = (uint64_t)b->u.i;
    e->end = (uint64_t)x->u.i;
    if (e->begin > e->end)
        return EFAIL(ec, v, "data_offsets [%llu, %llu]: begin is after end", (unsigned long long)e->begin,
                     (unsigned long long)e->end);
    if (e->end > ec->data_len)
        return EFAIL(ec, v, "data_offsets end %llu is past the data buffer: expected at least %llu bytes of data, "
                     "file has %llu (truncated?)", (unsigned long long)e->end, (unsigned long long)e->end,
                     (unsigned long long)ec->data_len);
    return 1;
}

static int parse_entry(const entry_ctx *ec, const fc_json_value *v, st_entry *e)
{
    if (v->kind != FC_JSON_OBJECT) return EFAIL(ec, v, "the entry is a JSON %s, not an object", fc_json_kind_name(v->kind));
    const fc_json_value *dt = NULL, *shape = NULL, *offs = NULL;
    for (const fc_json_value *c = fc_json_first(ec->d, v); c; c = fc_json_next(ec->d, c)) {
        const char *k = fc_json_key(ec->d, c);
        if (strcmp(k, "dtype") == 0) dt = c;
        else if (strcmp(k, "shape") == 0) shape = c;
        else if (strcmp(k, "data_offsets") == 0) offs = c;
        else {
            char q[ST_NAME_SHOW];
            return st_fail(ec->o, FC_ERR_FORMAT, "tensor \"%s\": unknown field \"%s\" (at byte %llu)", ec->tn,
                           fc_json_quote(q, sizeof q, k, c->key_len), (unsigned long long)c->key_offset + 8), 0;
        }
    }
    if (!dt) return EFAIL(ec, v, "missing field \"dtype\"%s", "");
    if (!shape) return EFAIL(ec, v, "missing field \"shape\"%s", "");
    if (!offs) return EFAIL(ec, v, "missing field \"data_offsets\"%s", "");
    if (!parse_dtype(ec, dt, &e->dtype) || !parse_shape(ec, shape, e) || !parse_offsets(ec, offs, e)) return 0;
    /* numel * element size in 64 bits, checked at every step. */
    uint64_t need = fc_dtype_size(e->dtype);
    for (int i = 0; i < e->rank; i++) {
        if (need > UINT64_MAX / (uint64_t)e->dim[i]) {
            char s[160];
            shape_str(s, sizeof s, e->dim, e->rank);
            return EFAIL(ec, shape, "shape %s: the byte size overflows 64 bits", s);
        }
        need *= (uint64_t)e->dim[i];
    }
    if (e->end - e->begin != need) {
        char s[160];
        shape_str(s, sizeof s, e->dim, e->rank);
        return EFAIL(ec, offs, "data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs %llu",
                     (unsigned long long)e->begin, (unsigned long long)e->end,
                     (unsigned long long)(e->end - e->begin), fc_json_str(ec->d, dt), s, (unsigned long long)need);
    }
    return 1;
}

static int parse_metadata(const st_src *o, const fc_json_doc *d, const fc_json_value *m, fc_safetensors *f)
{
    if (m->kind != FC_JSON_OBJECT)
        return st_fail(o, FC_ERR_FORMAT, "__metadata__ is a JSON %s, not an object (at byte %llu)",
                       fc_json_kind_name(m->kind), (unsigned long long)m->offset + 8), 0;
    f->meta = calloc(m->u.c.count + 1, sizeof *f->meta);
    f->meta_sorted = calloc(m->u.c.count + 1, sizeof *f->meta_sorted);
    if (!f->meta || !f->meta_sorted) return st_fail(o, FC_ERR_OOM, "out of memory (metadata)"), 0;
    for (const fc_json_value *c = fc_json_first(d, m); c; c = fc_json_next(d, c)) {
        char q[ST_NAME_SHOW];
        const char *k = fc_json_key(d, c);
        fc_json_quote(q, sizeof q, k, c->key_len);
        if (c->kind != FC_JSON_STRING)
            return st_fail(o, FC_ERR_FORMAT, "__metadata__ \"%s\": the value is a JSON %s; metadata values must be "
                           "strings (at byte %llu)", q, fc_json_kind_name(c->kind), (unsigned long long)c->offset + 8), 0;
        /* C strings cannot carry NUL: refuse rather than silently cut. */
        if (strlen(k) != c->key_len || strlen(fc_json_str(d, c)) != c->u.s.len)
            return st_fail(o, FC_ERR_FORMAT, "__metadata__ \"%s\": contains a NUL character (at byte %llu)", q,
                           (unsigned long long)c->key_offset + 8), 0;
        f->meta[f->n_meta++] = (st_kv){k, fc_json_str(d, c)};
    }
    return 1;
}

static int cmp_kv(const void *a, const void *b) { return strcmp(((const st_kv *)a)->k, ((const st_kv *)b)->k); }
static int cmp_name(const void *a, const void *b) { return strcmp(((const st_name *)a)->name, ((const st_name *)b)->name); }

typedef struct st_span {
    uint64_t begin, end;
    int idx;
} st_span;

static int cmp_span(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* No two tensors may share a byte (holes between them are allowed). */
static int check_overlap(const st_src *o, const fc_safetensors *f)
{
    if (f->n < 2) return 1;
    st_span *s = malloc((size_t)f->n * sizeof *s);
    if (!s) return st_fail(o, FC_ERR_OOM, "out of memory"), 0;
    for (int i = 0; i < f->n; i++) s[i] = (st_span){f->e[i].begin, f->e[i].end, i};
    qsort(s, (size_t)f->n, sizeof *s, cmp_span);
    for (int i = 1; i < f->n; i++) {
        if (s[i].begin < s[i - 1].end) {
            char a[ST_NAME_SHOW], b[ST_NAME_SHOW];
            st_fail(o, FC_ERR_FORMAT, "tensors \"%s\" [%llu, %llu) and \"%s\" [%llu, %llu) overlap in the data buffer",
                    show(a, f->e[s[i - 1].idx].name), (unsigned long long)s[i - 1].begin,
                    (unsigned long long)s[i - 1].end, show(b, f->e[s[i].idx].name), (unsigned long long)s[i].begin,
                    (unsigned long long)s[i].end);
            free(s);
            return 0;
        }
    }
    free(s);
    return 1;
}

/* "fucina.axes.<name>" = "a,b,c": applied only when it names every axis
 * once with valid axis names; anything else leaves the positional names
 * (files from other tools may use the key differently). */
static void apply_axes(fc_safetensors *f, st_entry *e)
{
    if (e->rank == 0) return;
    size_t nl = strlen(e->name), pl = strlen(FC_ST_AXES_PREFIX);
    char *key = malloc(pl + nl + 1);
    if (!key) return;
    memcpy(key, FC_ST_AXES_PREFIX, pl);
    memcpy(key + pl, e->name, nl + 1);
    const char *val = fc_safetensors_meta(f, key);
    free(key);
    if (!val) return;
    const char *names[FC_MAX_RANK];
    int k = 0;
    for (const char *p = val;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char buf[FC_AXIS_NAME_MAX + 1];
        if (k == e->rank || len == 0 || len > FC_AXIS_NAME_MAX) return;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (!(names[k] = fc_axis_intern(buf, NULL))) return;
        for (int j = 0; j < k; j++)
            if (names[j] == names[k]) return;
        k++;
        if (!comma) break;
        p = comma + 1;
    }
    if (k == e->rank) memcpy(e->axes, names, sizeof(const char *) * (size_t)k);
}

static int validate(const st_src *o, fc_safetensors *f, const fc_json_doc *d, uint64_t data_len)
{
    const fc_json_value *root = &d->v[0];
    if (root->kind != FC_JSON_OBJECT)
        return st_fail(o, FC_ERR_FORMAT, "the header is a JSON %s, not an object (at byte 8)",
                       fc_json_kind_name(root->kind)), 0;
    const fc_json_value *meta = fc_json_get(d, root, "__metadata__");
    if (meta && !parse_metadata(o, d, meta, f)) return 0;
    f->e = calloc(root->u.c.count + 1, sizeof *f->e);
    f->by_name = calloc(root->u.c.count + 1, sizeof *f->by_name);
    if (!f->e || !f->by_name) return st_fail(o, FC_ERR_OOM, "out of memory (%u tensors)", root->u.c.count), 0;
    for (const fc_json_value *c = fc_json_first(d, root); c; c = fc_json_next(d, c)) {
        if (c == meta) continue;
        const char *name = fc_json_key(d, c);
        char q[ST_NAME_SHOW];
        if (c->key_len == 0)
            return st_fail(o, FC_ERR_FORMAT, "empty tensor name (at byte %llu)", (unsigned long long)c->key_offset + 8), 0;
        if (strlen(name) != c->key_len)
            return st_fail(o, FC_ERR_FORMAT, "tensor name \"%s\" contains a NUL character (at byte %llu)",
                           fc_json_quote(q, sizeof q, name, c->key_len), (unsigned long long)c->key_offset + 8), 0;
        entry_ctx ec = {o, d, fc_json_quote(q, sizeof q, name, c->key_len), data_len};
        st_entry *e = &f->e[f->n];
        e->name = name;
        if (!parse_entry(&ec, c, e)) return 0;
        f->by_name[f->n] = (st_name){name, f->n};
        f->n++;
    }
    if (!check_overlap(o, f)) return 0;
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
    if (f->n_meta) { /* meta is NULL without __metadata__ */
        memcpy(f->meta_sorted, f->meta, (size_t)f->n_meta * sizeof *f->meta);
        qsort(f->meta_sorted, (size_t)f->n_meta, sizeof *f->meta_sorted, cmp_kv);
    }
    for (int i = 0; i < f->n; i++) apply_axes(f, &f->e[i]);
    return 1;
}

static void st_free(fc_safetensors *f)
{
    if (!f) return;
    fc_file_map_unref(f->map);
    free(f->path);
    free(f->strings);
    free(f->e);
    free(f->by_name);
    free(f->meta);
    free(f->meta_sorted);
    free(f);
}

static fc_safetensors *st_open(const st_src *o, int flags)
{
    /* O_NONBLOCK: a FIFO would block open() until a writer came; fstat refuses
     * it below, and the flag is cleared for the regular file. */
    int fd = open(o->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return st_fail(o, FC_ERR_IO, "cannot open: %s", strerror(errno));
    fc_safetensors *f = NULL;
    char *hdr = NULL;
    fc_json_doc doc;
    memset(&doc, 0, sizeof doc);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st_fail(o, FC_ERR_IO, "cannot stat: %s", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st_fail(o, FC_ERR_IO, "not a regular file");
        goto fail;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        st_fail(o, FC_ERR_IO, "cannot clear O_NONBLOCK: %s", strerror(errno));
        goto fail;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    if (fsize < 8) {
        st_fail(o, FC_ERR_FORMAT, "the file is %llu bytes, shorter than the 8-byte header length",
                (unsigned long long)fsize);
        goto fail;
    }
    unsigned char lb[8];
    if (!fc_file_read_at(fd, lb, 8, 0)) {
        st_fail(o, FC_ERR_IO, "cannot read the header length: %s", fc_file_read_error());
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lb[i];
    if (hlen == 0) {
        st_fail(o, FC_ERR_FORMAT, "the header length (bytes 0..7) is 0");
        goto fail;
    }
    if (hlen > ST_HEADER_MAX) {
        st_fail(o, FC_ERR_FORMAT, "the header length (bytes 0..7) is %llu, more than the 100 MiB limit",
                (unsigned long long)hlen);
        goto fail;
    }
    if (hlen > fsize - 8) {
        st_fail(o, FC_ERR_FORMAT, "the header says %llu bytes, the file has %llu after the 8-byte length (truncated?)",
                (unsigned long long)hlen, (unsigned long long)(fsize - 8));
        goto fail;
    }
    hdr = malloc((size_t)hlen);
    if (!hdr) {
        st_fail(o, FC_ERR_OOM, "out of memory (a %llu-byte header)", (unsigned long long)hlen);
        goto fail;
    }
    if (!fc_file_read_at(fd, hdr, (size_t)hlen, 8)) {
        st_fail(o, FC_ERR_IO, "cannot read the header: %s", fc_file_read_error());
        goto fail;
    }
    fc_json_limits lim = {.max_bytes = (size_t)ST_HEADER_MAX, .max_depth = ST_JSON_DEPTH, .max_values = ST_JSON_VALUES};
    char jerr[256];
    size_t joff = 0;
    if (!fc_json_parse(hdr, (size_t)hlen, &lim, &doc, jerr, sizeof jerr, &joff)) {
        st_fail(o, FC_ERR_FORMAT, "header JSON: %s (at byte %llu)", jerr, (unsigned long long)joff + 8);
        goto fail;
    }
    free(hdr);
    hdr = NULL;
    f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(o->path))) {
        st_fail(o, FC_ERR_OOM, "out of memory");
        goto fail;
    }
    f->ctx = o->ctx;
    if (!validate(o, f, &doc, fsize - 8 - hlen)) goto fail;
    f->strings = doc.strings; /* names and metadata point into it: keep it, drop the values */
    doc.strings = NULL;
    fc_json_free(&doc);
    uint64_t used = 0;
    for (int i = 0; i < f->n; i++)
        if (f->e[i].end > used) used = f->e[i].end;
    if (!map_data(o, f, fd, flags, fsize, 8 + hlen, used)) goto fail;
    close(fd);
    return f;

fail:
    close(fd);
    free(hdr);
    fc_json_free(&doc);
    st_free(f);
    return NULL;
}

/* ---- public: handle ------------------------------------------------------------- */

fc_safetensors *fc_safetensors_open(fc_ctx *ctx, const char *path, int flags)
{
    if (!ctx) return NULL;
    if (!path) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_safetensors_open: path is NULL");
    st_src o = {ctx, "fc_safetensors_open", path};
    return st_open(&o, flags);
}

void fc_safetensors_close(fc_safetensors *f) { st_free(f); }

int fc_safetensors_count(const fc_safetensors *f) { return f ? f->n : 0; }

const char *fc_safetensors_name(const fc_safetensors *f, int i)
{
    return f && i >= 0 && i < f->n ? f->e[i].name : NULL;
}

int fc_safetensors_find(const fc_safetensors *f, const char *name)
{
    if (!f || !name || f->n == 0) return -1;
    st_name key = {name, 0};
    const st_name *hit = bsearch(&key, f->by_name, (size_t)f->n, sizeof key, cmp_name);
    return hit ? hit->idx : -1;
}

int fc_safetensors_info(const fc_safetensors *f, int i, fc_safetensors_entry *out)
{
    if (!f || i < 0 || i >= f->n || !out) return 0;
    const st_entry *e = &f->e[i];
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->dtype = e->dtype;
    out->rank = e->rank;
    memcpy(out->dim, e->dim, sizeof e->dim);
    out->begin = e->begin;
    out->end = e->end;
    return 1;
}

const char *fc_safetensors_meta(const fc_safetensors *f, const char *key)
{
    if (!f || !key || f->n_meta == 0) return NULL;
    st_kv k = {key, NULL};
    const st_kv *hit = bsearch(&k, f->meta_sorted, (size_t)f->n_meta, sizeof k, cmp_kv);
    return hit ? hit->v : NULL;
}

int fc_safetensors_meta_count(const fc_safetensors *f) { return f ? f->n_meta : 0; }

const char *fc_safetensors_meta_key(const fc_safetensors *f, int i)
{
    return f && i >= 0 && i < f->n_meta ? f->meta[i].k : NULL;
}

/* ---- tensors -------------------------------------------------------------------- */

/* Fucina's bool is a byte that is 0 or 1; any other byte would break ops
 * that test it, so such a file is malformed. */
static int check_bool(const st_src *o, const fc_safetensors *f, const st_entry *e)
{
    if (e->dtype != FC_BOOL) return 1;
    const unsigned char *p = f->data + e->begin;
    for (uint64_t i = 0; i < e->end - e->begin; i++) {
        if (p[i] > 1) {
            char q[ST_NAME_SHOW];
            return st_fail(o, FC_ERR_FORMAT, "tensor \"%s\": BOOL element %llu is 0x%02x, not 0 or 1 (at byte %llu of "
                           "the data buffer)", show(q, e->name), (unsigned long long)i, p[i],
                           (unsigned long long)(e->begin + i)), 0;
        }
    }
    return 1;
}

/* Tensor e with axis names `axes` (NULL entries: positional): wrapped over
 * the data when aligned to the element size, else copied. */
static fc_tensor *entry_tensor(fc_safetensors *f, const st_entry *e, const char *const *axes)
{
    fc_dim dims[FC_MAX_RANK];
    for (int i = 0; i < e->rank; i++) dims[i] = (fc_dim){axes[i], e->dim[i]};
    void *p = f->data + e->begin;
    size_t nbytes = (size_t)(e->end - e->begin);
    if ((uintptr_t)p % fc_dtype_size(e->dtype) != 0) return fc_from_data(f->ctx, e->dtype, dims, e->rank, p, nbytes);
    return fc_file_map_wrap(f->ctx, f->map, e->dtype, dims, e->rank, p, nbytes);
}

fc_tensor *fc_safetensors_get(fc_safetensors *f, const char *name)
{
    if (!f) return NULL;
    st_src o = {f->ctx, "fc_safetensors_get", f->path};
    if (!name) return st_fail(&o, FC_ERR_INVALID_ARG, "the name is NULL");
    int i = fc_safetensors_find(f, name);
    char q[ST_NAME_SHOW];
    if (i < 0) return st_fail(&o, FC_ERR_INVALID_ARG, "no tensor \"%s\" in the file", show(q, name));
    const st_entry *e = &f->e[i];
    if (!check_bool(&o, f, e)) return NULL;
    return entry_tensor(f, e, e->axes);
}

/* ---- load_into ------------------------------------------------------------------ */

static int check_request(const st_src *o, fc_safetensors *f, const fc_named_tensor *r, int i, char *seen)
{
    char q[ST_NAME_SHOW];
    if (!r->name) return st_fail(o, FC_ERR_INVALID_ARG, "ts[%d].name is NULL", i), 0;
    if (!r->tensor) return st_fail(o, FC_ERR_INVALID_ARG, "ts[%d] (\"%s\") has no tensor", i, show(q, r->name)), 0;
    int k = fc_safetensors_find(f, r->name);
    if (k < 0) return st_fail(o, FC_ERR_FORMAT, "tensor \"%s\" is missing from the file", show(q, r->name)), 0;
    seen[k] = 1;
    const st_entry *e = &f->e[k];
    fc_dtype dt = fc_tensor_dtype(r->tensor);
    if (fc_dtype_is_block(dt))
        return st_fail(o, FC_ERR_DTYPE, "tensor \"%s\": the destination is %s, a block-quantized dtype safetensors "
                       "cannot hold (read into f32 and fc_quantize)", show(q, r->name), fc_dtype_name(dt)), 0;
    if (dt != e->dtype)
        return st_fail(o, FC_ERR_DTYPE, "tensor \"%s\": dtype %s in the file vs %s in the tensor", show(q, r->name),
                       fc_dtype_name(e->dtype), fc_dtype_name(dt)), 0;
    int rank = fc_tensor_rank(r->tensor), same = rank == e->rank;
    int64_t dim[FC_MAX_RANK];
    for (int a = 0; a < rank; a++) {
        dim[a] = fc_tensor_dim(r->tensor, a);
        if (same && dim[a] != e->dim[a]) same = 0;
    }
    if (!same) {
        char sf[160], st[160];
        shape_str(sf, sizeof sf, e->dim, e->rank);
        shape_str(st, sizeof st, dim, rank);
        return st_fail(o, FC_ERR_SHAPE, "tensor \"%s\": shape %s in the file vs %s in the tensor", show(q, r->name),
                       sf, st), 0;
    }
    return check_bool(o, f, e);
}

fc_status fc_safetensors_load_into(fc_ctx *ctx, const char *path, const fc_named_tensor *ts, int n, int flags)
{
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!path || n < 0 || (n > 0 && !ts)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_safetensors_load_into: %s", !path ? "path is NULL" : "bad tensor list");
        return FC_ERR_INVALID_ARG;
    }
    st_src o = {ctx, "fc_safetensors_load_into", path};
    fc_safetensors *f = st_open(&o, flags);
    if (!f) return fc_ctx_status(ctx);
    fc_status st = FC_OK;
    char *seen = calloc((size_t)f->n + 1, 1);
    if (!seen) {
        st_fail(&o, FC_ERR_OOM, "out of memory");
        st = FC_ERR_OOM;
        goto done;
    }
    /* Every check before the first write: on error nothing was modified. */
    for (int i = 0; i < n; i++) {
        if (!check_request(&o, f, &ts[i], i, seen)) {
            st = fc_ctx_status(ctx);
            goto done;
        }
    }
    if (flags & FC_ST_STRICT) {
        for (int k = 0; k < f->n; k++) {
            if (seen[k]) continue;
            char q[ST_NAME_SHOW];
            st_fail(&o, FC_ERR_FORMAT, "unexpected tensor \"%s\" in the file (FC_ST_STRICT)", show(q, f->e[k].name));
            st = FC_ERR_FORMAT;
            goto done;
        }
    }
    for (int i = 0; i < n; i++) {
        fc_tensor *dst = ts[i].tensor;
        const st_entry *e = &f->e[fc_safetensors_find(f, ts[i].name)];
        const char *axes[FC_MAX_RANK];
        for (int a = 0; a < e->rank; a++) axes[a] = fc_tensor_axis(dst, a); /* so the shapes match by name */
        fc_tensor *src = entry_tensor(f, e, axes);
        st = src ? fc_copy_into(ctx, dst, src) : fc_ctx_status(ctx);
        fc_discard(ctx, src);
        if (st != FC_OK) goto done;
    }
done:
    free(seen);
    fc_safetensors_close(f);
    return st;
}
