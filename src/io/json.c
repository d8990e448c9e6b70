/* SPDX-License-Identifier: MIT */
/* Strict JSON: a recursive-descent parser into an index-linked value array
 * (json.h), and the small output helpers the writers share. */
#include "io/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_INPUT ((size_t)1 << 30) /* offsets are uint32_t */

typedef struct parser {
    const unsigned char *p;
    size_t len, pos;
    fc_json_doc *d;
    const fc_json_limits *lim;
    uint32_t str_used;
    char *err;
    size_t errlen;
    size_t err_off;
    int failed;
} parser;

static int fail(parser *ps, size_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *ps, size_t off, const char *fmt, ...)
{
    if (ps->failed) return 0; /* keep the first (innermost) reason */
    ps->failed = 1;
    ps->err_off = off;
    va_list ap;
    va_start(ap, fmt);
    if (ps->errlen) vsnprintf(ps->err, ps->errlen, fmt, ap);
    va_end(ap);
    return 0;
}

/* A byte for a message: printable ASCII as 'c', anything else as 0xNN. */
static const char *show_byte(unsigned char c, char buf[8])
{
    if (c >= 0x20 && c < 0x7f) snprintf(buf, 8, "'%c'", c);
    else snprintf(buf, 8, "0x%02x", c);
    return buf;
}

static void skip_ws(parser *ps)
{
    while (ps->pos < ps->len) {
        unsigned char c = ps->p[ps->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
        ps->pos++;
    }
}

/* Index of a fresh value, or FC_JSON_NONE (failed) on the value cap or OOM. */
static uint32_t new_value(parser *ps, fc_json_kind kind, size_t off)
{
    fc_json_doc *d = ps->d;
    if (d->n >= ps->lim->max_values) {
        fail(ps, off, "more than %u values", (unsigned)ps->lim->max_values);
        return FC_JSON_NONE;
    }
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? (d->cap > UINT32_MAX / 2 ? UINT32_MAX - 1 : d->cap * 2) : 64;
        fc_json_value *v = realloc(d->v, (size_t)cap * sizeof *v);
        if (!v) {
            fail(ps, off, "out of memory (%u values)", (unsigned)cap);
            return FC_JSON_NONE;
        }
        d->v = v;
        d->cap = cap;
    }
    fc_json_value *v = &d->v[d->n];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->offset = (uint32_t)off;
    v->next = FC_JSON_NONE;
    v->key = FC_JSON_NONE;
    return d->n++;
}

size_t fc_utf8_seq(const unsigned char *p, size_t avail)
{
    if (avail == 0) return 0;
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c == 0xe0) n = 3, lo = 0xa0;          /* no overlong 3-byte forms */
    else if (c == 0xed) n = 3, hi = 0x9f;          /* no UTF-16 surrogates */
    else if (c >= 0xe1 && c <= 0xef) n = 3;
    else if (c == 0xf0) n = 4, lo = 0x90;          /* no overlong 4-byte forms */
    else if (c >= 0xf1 && c <= 0xf3) n = 4;
    else if (c == 0xf4) n = 4, hi = 0x8f;          /* nothing above U+10FFFF */
    else return 0;
    if (avail < n || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return n;
}

int fc_utf8_valid(const char *s, size_t len, size_t *bad)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t k = fc_utf8_seq(p + i, len - i);
        if (!k) {
            if (bad) *bad = i;
            return 0;
        }
        i += k;
    }
    return 1;
}

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        unsigned h;
        if (c >= '0' && c <= '9') h = c - '0';
        else if (c >= 'a' && c <= 'f') h = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') h = c - 'A' + 10;
        else return 0;
        v = v << 4 | h;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* One \u escape at ps->pos (pointing at 'u'), a surrogate pair taken whole. */
static int parse_u_escape(parser *ps, unsigned *cp)
{
    size_t at = ps->pos - 1; /* the backslash */
    if (ps->len - ps->pos < 5 || !hex4(ps->p + ps->pos + 1, cp))
        return fail(ps, at, "\\u must be followed by 4 hex digits");
    ps->pos += 5;
    if (*cp >= 0xdc00 && *cp <= 0xdfff) return fail(ps, at, "lone low surrogate \\u%04x", *cp);
    if (*cp < 0xd800 || *cp > 0xdbff) return 1;
    unsigned lo;
    if (ps->len - ps->pos < 6 || ps->p[ps->pos] != '\\' || ps->p[ps->pos + 1] != 'u' ||
        !hex4(ps->p + ps->pos + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
        return fail(ps, at, "high surrogate \\u%04x is not followed by a low surrogate", *cp);
    ps->pos += 6;
    *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
    return 1;
}

/* A string at ps->pos (the opening quote), decoded into the string buffer. */
static int parse_string(parser *ps, uint32_t *at, uint32_t *slen)
{
    size_t start = ps->pos++;
    char *o = ps->d->strings + ps->str_used;
    size_t n = 0;
    for (;;) {
        if (ps->pos >= ps->len) return fail(ps, start, "unterminated string");
        unsigned char c = ps->p[ps->pos];
        if (c == '"') {
            ps->pos++;
            break;
        }
        if (c < 0x20) return fail(ps, ps->pos, "raw control byte 0x%02x in a string (must be escaped)", c);
        if (c == '\\') {
            if (++ps->pos >= ps->len) return fail(ps, start, "unterminated string");
            unsigned char e = ps->p[ps->pos];
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char repl[] = "\"\\/\b\f\n\r\t";
                o[n++] = repl[simple - "\"\\/bfnrt"];
                ps->pos++;
            } else if (e == 'u') {
                unsigned cp = 0;
                if (!parse_u_escape(ps, &cp)) return 0;
                n += put_utf8(o + n, cp);
            } else {
                char b[8];
                return fail(ps, ps->pos - 1, "invalid escape \\%s", show_byte(e, b));
            }
            continue;
        }
        size_t k = fc_utf8_seq(ps->p + ps->pos, ps->len - ps->pos);
        if (!k) return fail(ps, ps->pos, "invalid UTF-8 byte 0x%02x in a string", c);
        memcpy(o + n, ps->p + ps->pos, k);
        n += k;
        ps->pos += k;
    }
    o[n] = 0;
    *at = ps->str_used;
    *slen = (uint32_t)n;
    ps->str_used += (uint32_t)n + 1; /* fits: decoded text + NUL <= the quoted input */
    return 1;
}

static int parse_number(parser *ps, int64_t *out)
{
    size_t start = ps->pos;
    int neg = 0;
    if (ps->p[ps->pos] == '-') {
        neg = 1;
        ps->pos++;
    }
    if (ps->pos >= ps->len || ps->p[ps->pos] < '0' || ps->p[ps->pos] > '9')
        return fail(ps, ps->pos, "expected a digit");
    if (ps->p[ps->pos] == '0' && ps->pos + 1 < ps->len && ps->p[ps->pos + 1] >= '0' && ps->p[ps->pos + 1] <= '9')
        return fail(ps, start, "number with a leading zero");
    /* Magnitude up to 2^63 (INT64_MIN's), checked before each step. */
    uint64_t mag = 0, cap = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    while (ps->pos < ps->len && ps->p[ps->pos] >= '0' && ps->p[ps->pos] <= '9') {
        unsigned dgt = ps->p[ps->pos] - '0';
        if (mag > (cap - dgt) / 10) return fail(ps, start, "integer out of range (64-bit)");
        mag = mag * 10 + dgt;
        ps->pos++;
    }
    if (ps->pos < ps->len && (ps->p[ps->pos] == '.' || ps->p[ps->pos] == 'e' || ps->p[ps->pos] == 'E'))
        return fail(ps, start, "only integers are allowed (found a fraction or exponent)");
    *out = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    return 1;
}

static int parse_value(parser *ps, int depth, uint32_t *out);

/* Sorted keys of one object, to find duplicates in n log n. */
typedef struct key_ref {
    const char *k;
    uint32_t len, off;
} key_ref;

static int key_cmp(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    int c = memcmp(x->k, y->k, x->len);
    if (c) return c;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int check_duplicates(parser *ps, uint32_t obj)
{
    const fc_json_value *o = &ps->d->v[obj];
    if (o->u.c.count < 2) return 1;
    key_ref *k = malloc((size_t)o->u.c.count * sizeof *k);
    if (!k) return fail(ps, o->offset, "out of memory (object keys)");
    uint32_t n = 0;
    for (const fc_json_value *c = fc_json_first(ps->d, o); c; c = fc_json_next(ps->d, c))
        k[n++] = (key_ref){fc_json_key(ps->d, c), c->key_len, c->key_offset};
    qsort(k, n, sizeof *k, key_cmp);
    for (uint32_t i = 1; i < n; i++) {
        if (k[i].len == k[i - 1].len && memcmp(k[i].k, k[i - 1].k, k[i].len) == 0) {
            char q[96];
            fail(ps, k[i].off, "duplicate key \"%s\"", fc_json_quote(q, sizeof q, k[i].k, k[i].len));
            free(k);
            return 0;
        }
    }
    free(k);
    return 1;
}

/* Arrays and objects: children are linked in order through `next`. */
static int parse_container(parser *ps, int depth, uint32_t *out)
{
    int is_obj = ps->p[ps->pos] == '{';
    char close = is_obj ? '}' : ']';
    size_t start = ps->pos;
    if (depth >= ps->lim->max_depth) return fail(ps, start, "nesting deeper than %d levels", ps->lim->max_depth);
    uint32_t self = new_value(ps, is_obj ? FC_JSON_OBJECT : FC_JSON_ARRAY, start);
    if (self == FC_JSON_NONE) return 0;
    ps->d->v[self].u.c.first = FC_JSON_NONE;
    ps->pos++;
    skip_ws(ps);
    if (ps->pos < ps->len && ps->p[ps->pos] == close) {
        ps->pos++;
        *out = self;
        return 1;
    }
    uint32_t prev = FC_JSON_NONE, count = 0;
    for (;;) {
        skip_ws(ps);
        uint32_t key = FC_JSON_NONE, key_len = 0, key_off = 0;
        if (is_obj) {
            if (ps->pos >= ps->len) return fail(ps, ps->pos, "unexpected end of input (an object is not closed)");
            if (ps->p[ps->pos] != '"') {
                char b[8];
                return fail(ps, ps->pos, "expected a string key, found %s", show_byte(ps->p[ps->pos], b));
            }
            key_off = (uint32_t)ps->pos;
            if (!parse_string(ps, &key, &key_len)) return 0;
            skip_ws(ps);
            if (ps->pos >= ps->len || ps->p[ps->pos] != ':') return fail(ps, ps->pos, "expected ':' after a key");
            ps->pos++;
        }
        uint32_t child;
        if (!parse_value(ps, depth + 1, &child)) return 0;
        fc_json_value *c = &ps->d->v[child];
        c->key = key;
        c->key_len = key_len;
        c->key_offset = key_off;
        if (prev == FC_JSON_NONE) ps->d->v[self].u.c.first = child;
        else ps->d->v[prev].next = child;
        prev = child;
        count++;
        skip_ws(ps);
        if (ps->pos >= ps->len)
            return fail(ps, ps->pos, "unexpected end of input (%s is not closed)", is_obj ? "an object" : "an array");
        unsigned char ch = ps->p[ps->pos];
        if (ch == ',') {
            ps->pos++;
            skip_ws(ps);
            if (ps->pos < ps->len && ps->p[ps->pos] == close) return fail(ps, ps->pos, "trailing comma");
            continue;
        }
        if (ch == close) {
            ps->pos++;
            break;
        }
        char b[8];
        return fail(ps, ps->pos, "expected ',' or '%c', found %s", close, show_byte(ch, b));
    }
    ps->d->v[self].u.c.count = count;
    *out = self;
    return is_obj ? check_duplicates(ps, self) : 1;
}

static int parse_literal(parser *ps, uint32_t *out)
{
    static const struct { const char *word; fc_json_kind kind; int64_t v; } lits[3] = {
        {"true", FC_JSON_BOOL, 1}, {"false", FC_JSON_BOOL, 0}, {"null", FC_JSON_NULL, 0}};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lits[i].word);
        if (ps->len - ps->pos >= n && memcmp(ps->p + ps->pos, lits[i].word, n) == 0) {
            uint32_t v = new_value(ps, lits[i].kind, ps->pos);
            if (v == FC_JSON_NONE) return 0;
            ps->d->v[v].u.i = lits[i].v;
            ps->pos += n;
            *out = v;
            return 1;
        }
    }
    char b[8];
    return fail(ps, ps->pos, "unexpected %s", show_byte(ps->p[ps->pos], b));
}

static int parse_value(parser *ps, int depth, uint32_t *out)
{
    skip_ws(ps);
    if (ps->pos >= ps->len) return fail(ps, ps->pos, "unexpected end of input (expected a value)");
    unsigned char c = ps->p[ps->pos];
    if (c == '{' || c == '[') return parse_container(ps, depth, out);
    if (c == '"') {
        uint32_t v = new_value(ps, FC_JSON_STRING, ps->pos);
        if (v == FC_JSON_NONE) return 0;
        uint32_t at, len;
        if (!parse_string(ps, &at, &len)) return 0;
        ps->d->v[v].u.s.at = at;
        ps->d->v[v].u.s.len = len;
        *out = v;
        return 1;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        uint32_t v = new_value(ps, FC_JSON_INT, ps->pos);
        if (v == FC_JSON_NONE) return 0;
        int64_t x = 0;
        if (!parse_number(ps, &x)) return 0;
        ps->d->v[v].u.i = x;
        *out = v;
        return 1;
    }
    return parse_literal(ps, out);
}

int fc_json_parse(const char *text, size_t len, const fc_json_limits *lim, fc_json_doc *doc, char *err,
                  size_t errlen, size_t *err_offset)
{
    memset(doc, 0, sizeof *doc);
    parser ps = {.p = (const unsigned char *)text, .len = len, .d = doc, .lim = lim, .err = err, .errlen = errlen};
    if (errlen) err[0] = 0;
    size_t cap = lim->max_bytes < JSON_MAX_INPUT ? lim->max_bytes : JSON_MAX_INPUT;
    int ok = 0;
    if (len > cap) {
        fail(&ps, 0, "input of %zu bytes exceeds the %zu-byte limit", len, cap);
        goto done;
    }
    doc->strings = malloc(len + 1);
    if (!doc->strings) {
        fail(&ps, 0, "out of memory (%zu bytes of strings)", len + 1);
        goto done;
    }
    uint32_t root;
    if (!parse_value(&ps, 0, &root)) goto done;
    skip_ws(&ps);
    if (ps.pos != len) {
        char b[8];
        fail(&ps, ps.pos, "unexpected %s after the JSON value", show_byte(ps.p[ps.pos], b));
        goto done;
    }
    ok = 1;
done:
    if (!ok) {
        if (err_offset) *err_offset = ps.err_off;
        fc_json_free(doc);
    }
    return ok;
}

void fc_json_free(fc_json_doc *doc)
{
    free(doc->v);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

const fc_json_value *fc_json_get(const fc_json_doc *d, const fc_json_value *obj, const char *key)
{
    if (!obj || obj->kind != FC_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (const fc_json_value *c = fc_json_first(d, obj); c; c = fc_json_next(d, c))
        if (c->key_len == n && memcmp(fc_json_key(d, c), key, n) == 0) return c;
    return NULL;
}

const char *fc_json_kind_name(fc_json_kind k)
{
    switch (k) {
    case FC_JSON_NULL: return "null";
    case FC_JSON_BOOL: return "boolean";
    case FC_JSON_INT: return "integer";
    case FC_JSON_STRING: return "string";
    case FC_JSON_ARRAY: return "array";
    case FC_JSON_OBJECT: return "object";
    }
    return "?";
}

char *fc_json_quote(char *dst, size_t cap, const char *s, size_t len)
{
    if (!cap) return dst;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t k = fc_utf8_seq(p + i, len - i);
        if (!k) k = 1; /* not UTF-8: shown as '?' below */
        if (o + k + 4 > cap) { /* room for "..." and the NUL */
            if (o + 4 <= cap) memcpy(dst + o, "...", 3), o += 3;
            break;
        }
        if (k == 1 && (p[i] < 0x20 || p[i] >= 0x7f)) dst[o++] = '?';
        else memcpy(dst + o, p + i, k), o += k;
        i += k;
    }
    dst[o] = 0;
    return dst;
}

/* --- writing --- */

static int buf_reserve(fc_json_buf *b, size_t extra)
{
    if (b->oom) return 0;
    if (b->cap - b->n >= extra) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < extra) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return 0;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

void fc_json_buf_raw(fc_json_buf *b, const char *s, size_t n)
{
    if (!n || !buf_reserve(b, n)) return; /* n == 0: b->p may still be NULL */
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void fc_json_buf_string(fc_json_buf *b, const char *s, size_t len)
{
    fc_json_buf_raw(b, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            fc_json_buf_raw(b, e, 2);
        } else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            fc_json_buf_raw(b, e, 6);
        } else {
            fc_json_buf_raw(b, (const char *)&s[i], 1);
        }
    }
    fc_json_buf_raw(b, "\"", 1);
}

void fc_json_buf_int(fc_json_buf *b, int64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", (long long)v);
    fc_json_buf_raw(b, t, (size_t)n);
}

void fc_json_buf_free(fc_json_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
