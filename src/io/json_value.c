/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
/* Fucina serve: the strict JSON reader and the writer (json.h). */
#include "io/json_value.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the arena: bump allocation in chunks, freed at once ---- */
typedef struct fj_chunk {
    struct fj_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} fj_chunk;

struct fj_doc {
    fj_chunk *chunks;
    fj_val *root;
};

static void *arena_alloc(fj_doc *d, size_t n) {
    n = (n + 15) & ~(size_t)15;
    fj_chunk *c = d->chunks;
    if (!c || c->cap - c->used < n) {
        const size_t cap = n > 16384 ? n : 16384;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = d->chunks;
        d->chunks = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

void fj_free(fj_doc *d) {
    if (!d) return;
    for (fj_chunk *c = d->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(d);
}

const fj_val *fj_root(const fj_doc *d) { return d ? d->root : NULL; }

/* ---- the reader ---- */
typedef struct parser {
    const unsigned char *s;
    size_t n, i;
    int depth, max_depth;
    fj_doc *d;
    char *err;
    size_t errlen;
    int failed;
} parser;

static void *fail(parser *p, const char *why) {
    if (!p->failed && p->err && p->errlen) snprintf(p->err, p->errlen, "byte %zu: %s", p->i, why);
    p->failed = 1;
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static fj_val *new_val(parser *p, fj_type t) {
    fj_val *v = arena_alloc(p->d, sizeof *v);
    if (!v) return fail(p, "out of memory");
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

/* A UTF-8 sequence's length at s[0..n) when it is a valid, shortest-form
 * encoding of a scalar value (no surrogates, at most U+10FFFF); 0 if not. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned min, cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000, cp = c & 0x07;
    else return 0;
    if (n < len) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

static int hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        const unsigned c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string at p->i (the opening quote); its decoded bytes in the arena. */
static int parse_string(parser *p, const char **out, size_t *out_len) {
    p->i++; /* the quote */
    /* the decoded text is never longer than the escaped one */
    size_t end = p->i;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) {
        p->i = p->n;
        fail(p, "unterminated string");
        return -1;
    }
    char *o = arena_alloc(p->d, end - p->i + 1);
    if (!o) {
        fail(p, "out of memory");
        return -1;
    }
    size_t k = 0;
    while (p->s[p->i] != '"') {
        const unsigned c = p->s[p->i];
        if (c < 0x20) {
            fail(p, "a control character in a string (escape it)");
            return -1;
        }
        if (c != '\\') {
            const size_t l = utf8_len(p->s + p->i, p->n - p->i);
            if (!l) {
                fail(p, "invalid UTF-8 in a string");
                return -1;
            }
            memcpy(o + k, p->s + p->i, l);
            k += l;
            p->i += l;
            continue;
        }
        const unsigned e = p->s[p->i + 1];
        p->i += 2;
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (p->i + 4 > p->n || hex4(p->s + p->i, &cp)) {
                fail(p, "a \\u escape needs four hex digits");
                return -1;
            }
            p->i += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                fail(p, "a lone low surrogate in a \\u escape");
                return -1;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' || hex4(p->s + p->i + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF) {
                    fail(p, "a high surrogate not followed by a low one");
                    return -1;
                }
                p->i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            k += put_utf8(o + k, cp);
            break;
        }
        default:
            p->i -= 1;
            fail(p, "an unknown escape in a string");
            return -1;
        }
    }
    p->i++; /* the closing quote */
    o[k] = 0;
    *out = o;
    *out_len = k;
    return 0;
}

static fj_val *parse_number(parser *p) {
    const size_t start = p->i;
    int integral = 1;
    if (p->s[p->i] == '-') p->i++;
    if (p->i < p->n && p->s[p->i] == '0') {
        p->i++;
    } else if (p->i < p->n && p->s[p->i] >= '1' && p->s[p->i] <= '9') {
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    } else {
        return fail(p, "invalid number");
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        integral = 0;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "a digit must follow '.'");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        integral = 0;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "a digit must follow the exponent");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    const size_t len = p->i - start;
    if (len > 400) return fail(p, "a number longer than 400 characters");
    char tmp[401];
    memcpy(tmp, p->s + start, len);
    tmp[len] = 0;
    fj_val *v = new_val(p, FJ_NUM);
    if (!v) return NULL;
    v->num = strtod(tmp, NULL); /* overflow gives +-inf: callers range-check */
    if (integral) {
        errno = 0;
        v->i = strtoll(tmp, NULL, 10);
        v->is_int = errno == 0;
    }
    return v;
}

static int match(parser *p, const char *lit) {
    const size_t l = strlen(lit);
    if (p->n - p->i < l || memcmp(p->s + p->i, lit, l)) return 0;
    p->i += l;
    return 1;
}

static fj_val *parse_value(parser *p);

static fj_val *parse_array(parser *p) {
    p->i++;
    fj_val *v = new_val(p, FJ_ARR);
    if (!v) return NULL;
    size_t cap = 0;
    fj_val **items = NULL;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
        return v;
    }
    for (;;) {
        fj_val *x = parse_value(p);
        if (!x) return NULL;
        if (v->len == cap) {
            const size_t nc = cap ? 2 * cap : 4;
            fj_val **ni = arena_alloc(p->d, nc * sizeof *ni);
            if (!ni) return fail(p, "out of memory");
            if (cap) memcpy(ni, items, cap * sizeof *ni);
            items = ni;
            cap = nc;
        }
        items[v->len++] = x;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            v->items = items;
            return v;
        }
        return fail(p, "expected ',' or ']' in an array");
    }
}

static fj_val *parse_object(parser *p) {
    p->i++;
    fj_val *v = new_val(p, FJ_OBJ);
    if (!v) return NULL;
    size_t cap = 0;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        return v;
    }
    for (;;) {
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "expected a string key in an object");
        const char *key;
        size_t klen;
        if (parse_string(p, &key, &klen)) return NULL;
        for (size_t k = 0; k < v->len; k++)
            if (v->key_lens[k] == klen && !memcmp(v->keys[k], key, klen)) {
                char why[96];
                snprintf(why, sizeof why, "a duplicate object key '%.*s'", klen > 48 ? 48 : (int)klen, key);
                return fail(p, why);
            }
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') return fail(p, "expected ':' after an object key");
        p->i++;
        fj_val *x = parse_value(p);
        if (!x) return NULL;
        if (v->len == cap) {
            const size_t nc = cap ? 2 * cap : 8;
            fj_val **ni = arena_alloc(p->d, nc * sizeof *ni);
            const char **nk = arena_alloc(p->d, nc * sizeof *nk);
            size_t *nl = arena_alloc(p->d, nc * sizeof *nl);
            if (!ni || !nk || !nl) return fail(p, "out of memory");
            if (cap) {
                memcpy(ni, v->items, cap * sizeof *ni);
                memcpy(nk, v->keys, cap * sizeof *nk);
                memcpy(nl, v->key_lens, cap * sizeof *nl);
            }
            v->items = ni;
            v->keys = nk;
            v->key_lens = nl;
            cap = nc;
        }
        v->items[v->len] = x;
        v->keys[v->len] = key;
        v->key_lens[v->len] = klen;
        v->len++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            return v;
        }
        return fail(p, "expected ',' or '}' in an object");
    }
}

static fj_val *parse_value(parser *p) {
    skip_ws(p);
    if (p->i >= p->n) return fail(p, "unexpected end of the text");
    const unsigned char c = p->s[p->i];
    if (c == '{' || c == '[') {
        if (++p->depth > p->max_depth) return fail(p, "nested deeper than the limit");
        fj_val *v = c == '{' ? parse_object(p) : parse_array(p);
        p->depth--;
        return v;
    }
    if (c == '"') {
        fj_val *v = new_val(p, FJ_STR);
        if (!v || parse_string(p, &v->str, &v->len)) return NULL;
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p);
    if (match(p, "true")) {
        fj_val *v = new_val(p, FJ_BOOL);
        if (v) v->boolean = 1;
        return v;
    }
    if (match(p, "false")) return new_val(p, FJ_BOOL);
    if (match(p, "null")) return new_val(p, FJ_NULL);
    return fail(p, "expected a JSON value");
}

fj_doc *fj_parse(const char *text, size_t len, const fj_limits *lim, char *err, size_t errlen) {
    const size_t max_bytes = lim && lim->max_bytes ? lim->max_bytes : (size_t)16 << 20;
    const int max_depth = lim && lim->max_depth ? lim->max_depth : 64;
    if (err && errlen) err[0] = 0;
    if (len > max_bytes) {
        if (err && errlen) snprintf(err, errlen, "the text (%zu bytes) is longer than the limit (%zu)", len, max_bytes);
        return NULL;
    }
    fj_doc *d = calloc(1, sizeof *d);
    if (!d) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    parser p = {(const unsigned char *)text, len, 0, 0, max_depth, d, err, errlen, 0};
    d->root = parse_value(&p);
    if (d->root) {
        skip_ws(&p);
        if (p.i != p.n) {
            fail(&p, "text after the JSON value");
            d->root = NULL;
        }
    }
    if (!d->root) {
        fj_free(d);
        return NULL;
    }
    return d;
}

const fj_val *fj_get(const fj_val *v, const char *key) {
    if (!v || v->type != FJ_OBJ) return NULL;
    const size_t kl = strlen(key);
    for (size_t k = 0; k < v->len; k++)
        if (v->key_lens[k] == kl && !memcmp(v->keys[k], key, kl)) return v->items[k];
    return NULL;
}

const char *fj_type_name(fj_type t) {
    switch (t) {
    case FJ_NULL: return "null";
    case FJ_BOOL: return "a boolean";
    case FJ_NUM: return "a number";
    case FJ_STR: return "a string";
    case FJ_ARR: return "an array";
    case FJ_OBJ: return "an object";
    }
    return "?";
}

/* ---- the writer ---- */
void fj_buf_free(fj_buf *b) {
    free(b->p);
    *b = (fj_buf){0};
}

static int grow(fj_buf *b, size_t add) {
    if (b->oom) return -1;
    if (b->n + add + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + add + 1) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) {
        b->oom = 1;
        return -1;
    }
    b->p = q;
    b->cap = cap;
    return 0;
}

void fj_raw(fj_buf *b, const char *s, size_t n) {
    if (grow(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void fj_raws(fj_buf *b, const char *s) { fj_raw(b, s, strlen(s)); }

void fj_printf(fj_buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        fj_raw(b, tmp, (size_t)n);
        return;
    }
    if (grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void fj_str(fj_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    fj_raw(b, "\"", 1);
    size_t run = 0; /* start of the bytes copied as they are */
    for (size_t i = 0; i < n;) {
        const unsigned c = u[i];
        size_t l = 1;
        const char *esc = NULL;
        char ubuf[6];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20) {
            ubuf[0] = '\\', ubuf[1] = 'u', ubuf[2] = '0', ubuf[3] = '0', ubuf[4] = hex[c >> 4], ubuf[5] = hex[c & 15];
        } else if (c >= 0x80 && !(l = utf8_len(u + i, n - i))) {
            esc = "\xEF\xBF\xBD"; /* U+FFFD for a byte that starts no valid character */
            l = 1;
        }
        if (esc || c < 0x20) {
            fj_raw(b, s + run, i - run);
            if (esc) fj_raws(b, esc);
            else fj_raw(b, ubuf, 6);
            i += l;
            run = i;
        } else {
            i += l;
        }
    }
    fj_raw(b, s + run, n - run);
    fj_raw(b, "\"", 1);
}

void fj_strs(fj_buf *b, const char *s) { fj_str(b, s, strlen(s)); }

void fj_num(fj_buf *b, double v) {
    if (!isfinite(v)) {
        fj_raws(b, "null");
        return;
    }
    if (v == floor(v) && fabs(v) < 9e15) {
        fj_printf(b, "%.0f", v);
        return;
    }
    /* the shortest of 15-17 significant digits that reads back as v */
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    fj_raws(b, tmp);
}

void fj_numf(fj_buf *b, float v) {
    if (!isfinite(v)) {
        fj_raws(b, "null");
        return;
    }
    char tmp[40];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, (double)v);
        if (strtof(tmp, NULL) == v) break;
    }
    fj_raws(b, tmp);
}

void fj_int(fj_buf *b, int64_t v) { fj_printf(b, "%lld", (long long)v); }

void fj_key(fj_buf *b, const char *key) {
    fj_strs(b, key);
    fj_raw(b, ":", 1);
}

void fj_value(fj_buf *b, const fj_val *v) {
    /* depth is bounded by the reader's max_depth: the recursion is too */
    switch (v->type) {
    case FJ_NULL: fj_raws(b, "null"); return;
    case FJ_BOOL: fj_raws(b, v->boolean ? "true" : "false"); return;
    case FJ_NUM:
        if (v->is_int) fj_int(b, v->i);
        else fj_num(b, v->num);
        return;
    case FJ_STR: fj_str(b, v->str, v->len); return;
    case FJ_ARR:
        fj_raw(b, "[", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i) fj_raw(b, ",", 1);
            fj_value(b, v->items[i]);
        }
        fj_raw(b, "]", 1);
        return;
    case FJ_OBJ:
        fj_raw(b, "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i) fj_raw(b, ",", 1);
            fj_str(b, v->keys[i], v->key_lens[i]);
            fj_raw(b, ":", 1);
            fj_value(b, v->items[i]);
        }
        fj_raw(b, "}", 1);
        return;
    }
}
