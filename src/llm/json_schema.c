/* SPDX-License-Identifier: MIT */
/* JSON Schema to GBNF (include/fucina/grammar.h).
 *
 * The schema is read with the strict JSON reader and walked once; every
 * subschema becomes one rule named after where it sits (a property name,
 * sanitized to [a-zA-Z0-9-], then "-r" and a counter: "age-r7"). The shared
 * JSON rules of grammar_json.c (value, object, string, char, number,
 * integer, ws) are appended and used as they are. Names end in "-r<n>",
 * which neither the shared rules nor the names the GBNF compiler gives its
 * own generated rules ("<rule>-<n>") can: no name is ever reused.
 *
 * The promise is soundness: every text the grammar accepts is JSON that
 * validates against the schema. Where the schema allows more than a
 * grammar can express, the grammar takes a subset and says so here:
 *   - an object schema with 'properties' and no 'additionalProperties'
 *     allows no other properties (llama.cpp's json-schema-to-grammar does
 *     the same; JSON Schema itself would allow any). 'additionalProperties'
 *     true or a schema allows extra properties after the declared ones, with
 *     keys that are none of the declared names (such a key may not use a
 *     backslash escape while it still spells the start of a declared name).
 *     Two extra properties may share a key: a grammar cannot rule that out.
 *     {"type": "object"} alone is any object;
 *   - properties come in the schema's order, required ones always, optional
 *     ones when the model wants;
 *   - integers have at most 16 digits (the shared integer rule's bound);
 *     minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers
 *     are exact: the range is spelled out digit by digit, so "007", "-0"
 *     and 2048 in [-15, 2047] are refused. Bounds on numbers that need not
 *     be integers are refused (a decimal range is not worth the grammar);
 *   - a pattern is matched anywhere in the string (JSON Schema's meaning)
 *     unless anchored with a leading ^ and a trailing $; it may hold
 *     literals, escapes (\n \t \xHH \uHHHH, \. and the like), '.', classes
 *     [a-z] [^...], groups ( ) (?: ) (?<name> ), '|', and * + ? {m} {m,}
 *     {m,n} {,n} (lazy forms too: same strings). \d \w \s are their ASCII
 *     members (a subset of the Unicode classes validators use); a negated
 *     class holding one of them, or \D \W \S, takes its members from
 *     printable ASCII only. The characters are JSON string content: '"',
 *     '\' and control characters come out escaped. Refused by name:
 *     backreferences, lookahead and lookbehind, \b \B \A \Z, inline flags
 *     (?i), possessive quantifiers, ^ or $ anywhere else;
 *   - formats date, time, date-time (RFC 3339: real calendar days, leap
 *     years included, seconds 00-59, a 'Z' or numeric offset) and uuid;
 *   - oneOf is an alternation like anyOf: exact when its branches do not
 *     overlap, which the schema's author must see to;
 *   - allOf merges object schemas that only have 'properties' and
 *     'required' (and type "object"): the union of both, no extra
 *     properties. Anything else inside allOf is refused.
 *   - enum and const match their values' compact JSON text exactly (one
 *     spelling per value: 1 matches "1", not "1.0"); with a 'type' next to
 *     them only the values of those types are kept;
 *   - without 'type', the keywords say which types are meant (minLength: a
 *     string; properties: an object; minimum: an integer); with none, any
 *     value;
 *   - 'format' is asserted (JSON Schema 2020-12 makes it an annotation by
 *     default; a grammar that ignored it would be pointless).
 * Everything else is refused by name: a keyword we do not implement is an
 * error, never ignored, except the annotations (title, description,
 * $schema, $id, $comment, examples, default, deprecated, readOnly,
 * writeOnly) that do not constrain a value. So are combinations we cannot
 * intersect exactly: a keyword next to $ref, anyOf / oneOf, enum / const
 * (other than type), pattern or format next to a length, a keyword that
 * applies to none of the listed types. $ref takes local JSON pointers ("#",
 * "#/$defs/x", "#/definitions/x", any "#/..." path), one rule per target,
 * so recursive schemas work (a definition that is only a reference to
 * itself is left-recursive: the GBNF compiler refuses it, naming the rule);
 * a remote $ref is refused. Definitions nothing refers to are not looked
 * at. Counts (minItems, maxItems, minLength, maxLength, {m,n} in patterns)
 * above 10000 are refused, not cut. Nesting is capped (64 levels of
 * schemas or of references, 64 of regular-expression groups) so that a
 * hostile schema gets an error, not a stack overflow. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/grammar.h"
#include "io/json_value.h"
#include "llm/grammar_json.h"

#define JS_MAX_DEPTH 64
#define JS_MAX_REPEAT 10000                 /* minItems, maxItems, minLength, maxLength, pattern {m,n} */
#define JS_MAX_KEY 256                      /* code points of a declared key, when extra keys must avoid it */
#define JS_INT_MAX 9999999999999999LL       /* 16 digits, like the shared integer rule */

enum {
    T_NULL = 1,
    T_BOOL = 2,
    T_OBJ = 4,
    T_ARR = 8,
    T_STR = 16,
    T_NUM = 32,
    T_INT = 64,
    T_ALL = 127,
};

typedef struct js_ref {
    const fj_val *target;
    char name[96];
} js_ref;

typedef struct js {
    fc_ctx *ctx;
    const fj_val *root;
    fj_buf out;
    unsigned counter;
    int depth;
    int failed;
    char path[1024];
    size_t plen;
    js_ref *refs;
    size_t n_refs, cap_refs;
    int fmt_done[4];
} js;

/* ---- errors, paths, names ---- */

__attribute__((format(printf, 2, 3))) static int js_fail(js *st, const char *fmt, ...)
{
    if (st->failed) return -1;
    st->failed = 1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fc_fail(st->ctx, FC_ERR_INVALID_ARG, "json schema at %s: %s", st->plen ? st->path : "/", msg);
    return -1;
}

/* Append "/seg" (JSON pointer escapes ~0 ~1) and return the old length. */
static size_t js_push(js *st, const char *seg)
{
    size_t old = st->plen;
    char *p = st->path;
    size_t n = st->plen, cap = sizeof st->path - 1;
    if (n < cap) p[n++] = '/';
    for (const char *s = seg; *s && n + 2 < cap; s++) {
        if (*s == '~' || *s == '/') {
            p[n++] = '~';
            p[n++] = *s == '~' ? '0' : '1';
        } else {
            p[n++] = *s;
        }
    }
    p[n] = '\0';
    st->plen = n;
    return old;
}

static size_t js_push_index(js *st, size_t i)
{
    char seg[32];
    snprintf(seg, sizeof seg, "%zu", i);
    return js_push(st, seg);
}

static void js_pop(js *st, size_t old)
{
    st->plen = old;
    st->path[old] = '\0';
}

/* A fresh rule name from a hint: "first-name" -> "first-name-r12". */
static void js_name(js *st, const char *hint, char out[96])
{
    char base[48];
    size_t n = 0;
    for (const char *s = hint; *s && n < 40; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
        base[n++] = ok ? c : '-';
    }
    if (n == 0) base[n++] = 'v';
    base[n] = '\0';
    snprintf(out, 96, "%s-r%u", base, ++st->counter);
}

static void js_rule(js *st, const char *name, const fj_buf *body)
{
    fj_printf(&st->out, "%s ::= ", name);
    fj_raw(&st->out, body->p ? body->p : "\"\"", body->p ? body->n : 2);
    fj_raws(&st->out, "\n");
    if (body->oom) st->out.oom = 1;
}

/* ---- literals ---- */

/* A GBNF literal of the bytes s[0..n) (valid UTF-8). */
static void gb_lit(fj_buf *b, const char *s, size_t n)
{
    fj_raws(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fj_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F) fj_printf(b, "\\x%02X", c);
        else fj_raw(b, (const char *)&c, 1);
    }
    fj_raws(b, "\"");
}

/* One code point inside a GBNF class. */
static void gb_cp(fj_buf *b, uint32_t cp)
{
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) fj_printf(b, "%c", (char)cp);
    else if (cp < 0x10000) fj_printf(b, "\\u%04X", (unsigned)cp);
    else fj_printf(b, "\\U%08X", (unsigned)cp);
}

/* The compact JSON text of v: the exact value for const and enum. */
static void js_dump(fj_buf *b, const fj_val *v)
{
    switch (v->type) {
    case FJ_NULL: fj_raws(b, "null"); break;
    case FJ_BOOL: fj_raws(b, v->boolean ? "true" : "false"); break;
    case FJ_NUM:
        if (v->is_int) fj_int(b, v->i);
        else fj_num(b, v->num);
        break;
    case FJ_STR: fj_str(b, v->str, v->len); break;
    case FJ_ARR:
        fj_raws(b, "[");
        for (size_t i = 0; i < v->len; i++) {
            if (i) fj_raws(b, ",");
            js_dump(b, v->items[i]);
        }
        fj_raws(b, "]");
        break;
    case FJ_OBJ:
        fj_raws(b, "{");
        for (size_t i = 0; i < v->len; i++) {
            if (i) fj_raws(b, ",");
            fj_str(b, v->keys[i], v->key_lens[i]);
            fj_raws(b, ":");
            js_dump(b, v->items[i]);
        }
        fj_raws(b, "}");
        break;
    }
}

static void gb_value_lit(fj_buf *b, const fj_val *v)
{
    fj_buf t = {0};
    js_dump(&t, v);
    gb_lit(b, t.p ? t.p : "", t.n);
    if (t.oom) b->oom = 1;
    fj_buf_free(&t);
}

/* ---- keywords ---- */

static const char *const annotations[] = {"title",   "description", "$schema",    "$id",      "$comment",
                                          "examples", "default",     "deprecated", "readOnly", "writeOnly"};
static const char *const kw_object[] = {"properties", "required", "additionalProperties"};
static const char *const kw_array[] = {"items", "prefixItems", "minItems", "maxItems"};
static const char *const kw_string[] = {"minLength", "maxLength", "format", "pattern"};
static const char *const kw_int[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
static const char *const kw_other[] = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions"};

#define N_OF(a) (sizeof(a) / sizeof(a)[0])

static int in_list(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, list[i]) == 0) return 1;
    return 0;
}

static int is_annotation(const char *k) { return in_list(k, annotations, N_OF(annotations)); }

/* The types a keyword constrains (0: not a value keyword of one type). */
static int kw_types(const char *k)
{
    if (in_list(k, kw_object, N_OF(kw_object))) return T_OBJ;
    if (in_list(k, kw_array, N_OF(kw_array))) return T_ARR;
    if (in_list(k, kw_string, N_OF(kw_string))) return T_STR;
    if (in_list(k, kw_int, N_OF(kw_int))) return T_INT | T_NUM;
    return 0;
}

static int check_keywords(js *st, const fj_val *v)
{
    for (size_t i = 0; i < v->len; i++) {
        const char *k = v->keys[i];
        if (is_annotation(k) || kw_types(k) || in_list(k, kw_other, N_OF(kw_other))) continue;
        return js_fail(st, "keyword '%s' is not supported", k);
    }
    return 0;
}

/* Every keyword of v but the annotations, $defs / definitions and the ones
 * in allowed must be absent ("keyword 'x' next to 'anyOf'"). */
static int only_with(js *st, const fj_val *v, const char *what, const char *const *allowed, size_t n_allowed)
{
    for (size_t i = 0; i < v->len; i++) {
        const char *k = v->keys[i];
        if (is_annotation(k) || strcmp(k, "$defs") == 0 || strcmp(k, "definitions") == 0 || strcmp(k, what) == 0 ||
            in_list(k, allowed, n_allowed))
            continue;
        return js_fail(st, "keyword '%s' next to '%s' is not supported", k, what);
    }
    return 0;
}

static int get_count(js *st, const fj_val *v, const char *key, int64_t *out)
{
    const fj_val *x = fj_get(v, key);
    if (!x) return 0;
    if (x->type != FJ_NUM || !x->is_int || x->i < 0) return js_fail(st, "'%s' must be a non-negative integer", key);
    if (x->i > JS_MAX_REPEAT)
        return js_fail(st, "'%s' is %lld, above the limit %d", key, (long long)x->i, JS_MAX_REPEAT);
    *out = x->i;
    return 1;
}

static int get_min_max(js *st, const fj_val *v, const char *kmin, const char *kmax, int64_t *lo, int64_t *hi)
{
    *lo = 0, *hi = -1; /* -1: unbounded */
    if (get_count(st, v, kmin, lo) < 0 || get_count(st, v, kmax, hi) < 0) return -1;
    if (*hi >= 0 && *lo > *hi)
        return js_fail(st, "'%s' is %lld, above '%s' %lld", kmin, (long long)*lo, kmax, (long long)*hi);
    return 0;
}

/* X{lo,hi} in GBNF (hi -1: unbounded); nothing when it can only be empty. */
static void gb_repeat(fj_buf *b, const char *x, int64_t lo, int64_t hi)
{
    if (hi == 0) return;
    if (lo == 0 && hi < 0) fj_printf(b, "%s*", x);
    else if (lo == 1 && hi < 0) fj_printf(b, "%s+", x);
    else if (lo == 0 && hi == 1) fj_printf(b, "%s?", x);
    else if (lo == 1 && hi == 1) fj_printf(b, "%s", x);
    else if (hi < 0) fj_printf(b, "%s{%lld,}", x, (long long)lo);
    else if (lo == hi) fj_printf(b, "%s{%lld}", x, (long long)lo);
    else fj_printf(b, "%s{%lld,%lld}", x, (long long)lo, (long long)hi);
}

static int gen(js *st, const fj_val *v, const char *hint, char name[96]);

/* ---- integers in a range ---- */

static int all_of(const char *s, size_t n, char c)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != c) return 0;
    return 1;
}

/* Decimal numbers of n digits from lo to hi (same length, lo <= hi). */
static void range_same(fj_buf *b, const char *lo, const char *hi, size_t n)
{
    if (lo[0] == hi[0]) {
        fj_printf(b, "\"%c\"", lo[0]);
        if (n > 1) {
            fj_raws(b, " ");
            range_same(b, lo + 1, hi + 1, n - 1);
        }
        return;
    }
    char nines[20], zeros[20];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    int lo_full = all_of(lo + 1, n - 1, '0'), hi_full = all_of(hi + 1, n - 1, '9');
    char a = lo_full ? lo[0] : (char)(lo[0] + 1), z = hi_full ? hi[0] : (char)(hi[0] - 1);
    int alts = 0;
    fj_raws(b, "(");
    if (!lo_full) {
        fj_printf(b, "\"%c\" ", lo[0]);
        range_same(b, lo + 1, nines, n - 1);
        alts++;
    }
    if (a <= z) {
        if (a == z) fj_printf(b, "%s\"%c\"", alts++ ? " | " : "", a);
        else fj_printf(b, "%s[%c-%c]", alts++ ? " | " : "", a, z);
        if (n == 2) fj_raws(b, " [0-9]");
        else if (n > 2) fj_printf(b, " [0-9]{%zu}", n - 1);
    }
    if (!hi_full) {
        fj_printf(b, "%s\"%c\" ", alts++ ? " | " : "", hi[0]);
        range_same(b, zeros, hi + 1, n - 1);
    }
    fj_raws(b, ")");
}

/* Positive integers from lo to hi (1 <= lo <= hi <= JS_INT_MAX), no leading zero. */
static void range_pos(fj_buf *b, int64_t lo, int64_t hi)
{
    fj_raws(b, "(");
    int first = 1;
    int64_t p = 1;
    for (int len = 1; len <= 16; len++, p *= 10) {
        int64_t a = lo > p ? lo : p, z = hi < p * 10 - 1 ? hi : p * 10 - 1;
        if (a > z) continue;
        char sa[24], sz[24];
        snprintf(sa, sizeof sa, "%lld", (long long)a);
        snprintf(sz, sizeof sz, "%lld", (long long)z);
        if (!first) fj_raws(b, " | ");
        first = 0;
        range_same(b, sa, sz, (size_t)len);
    }
    fj_raws(b, ")");
}

/* The least integer a bound allows: minimum x: ceil(x); exclusive: floor(x) + 1. */
static int64_t bound_lo(const fj_val *x, int exclusive)
{
    if (x->is_int && x->i > -JS_INT_MAX - 2 && x->i < JS_INT_MAX + 2) return exclusive ? x->i + 1 : x->i;
    double d = exclusive ? floor(x->num) + 1 : ceil(x->num);
    if (d < (double)-JS_INT_MAX) return -JS_INT_MAX - 1;
    if (d > (double)JS_INT_MAX) return JS_INT_MAX + 1;
    return (int64_t)d;
}

static int64_t bound_hi(const fj_val *x, int exclusive)
{
    if (x->is_int && x->i > -JS_INT_MAX - 2 && x->i < JS_INT_MAX + 2) return exclusive ? x->i - 1 : x->i;
    double d = exclusive ? ceil(x->num) - 1 : floor(x->num);
    if (d < (double)-JS_INT_MAX) return -JS_INT_MAX - 1;
    if (d > (double)JS_INT_MAX) return JS_INT_MAX + 1;
    return (int64_t)d;
}

static int gen_integer(js *st, const fj_val *v, fj_buf *b)
{
    int64_t lo = -JS_INT_MAX, hi = JS_INT_MAX;
    int any = 0;
    for (size_t i = 0; i < N_OF(kw_int); i++) {
        const fj_val *x = fj_get(v, kw_int[i]);
        if (!x) continue;
        if (x->type != FJ_NUM) return js_fail(st, "'%s' must be a number", kw_int[i]);
        any = 1;
        int excl = i >= 2, is_min = i % 2 == 0;
        int64_t r = is_min ? bound_lo(x, excl) : bound_hi(x, excl);
        if (is_min && r > lo) lo = r;
        if (!is_min && r < hi) hi = r;
    }
    if (!any) {
        fj_raws(b, "integer");
        return 0;
    }
    if (lo > hi) return js_fail(st, "no integer of at most 16 digits lies within the bounds");
    int alts = 0;
    fj_raws(b, "(");
    if (lo < 0) { /* negatives: "-" then magnitudes -min(hi,-1) .. -lo */
        int64_t top = hi < -1 ? hi : -1;
        fj_raws(b, "\"-\" ");
        range_pos(b, -top, -lo);
        alts++;
    }
    if (lo <= 0 && hi >= 0) fj_printf(b, "%s\"0\"", alts++ ? " | " : "");
    if (hi > 0) {
        if (alts++) fj_raws(b, " | ");
        range_pos(b, lo > 1 ? lo : 1, hi);
    }
    fj_raws(b, ")");
    return 0;
}

/* ---- code point sets (patterns) ---- */

#define CP_MAX_RANGES 512

typedef struct cpset {
    uint32_t lo[CP_MAX_RANGES], hi[CP_MAX_RANGES];
    int n;
    int shorthand; /* holds \d \w \s or their negations: complement within printable ASCII */
    int full;      /* a range did not fit: the set is refused, never used cut short */
} cpset;

static int cp_add(cpset *s, uint32_t lo, uint32_t hi)
{
    if (s->n >= CP_MAX_RANGES) {
        s->full = 1;
        return -1;
    }
    s->lo[s->n] = lo, s->hi[s->n] = hi, s->n++;
    return 0;
}

static void cp_norm(cpset *s)
{
    for (int i = 1; i < s->n; i++) /* insertion sort: sets are small */
        for (int j = i; j > 0 && s->lo[j - 1] > s->lo[j]; j--) {
            uint32_t a = s->lo[j], z = s->hi[j];
            s->lo[j] = s->lo[j - 1], s->hi[j] = s->hi[j - 1];
            s->lo[j - 1] = a, s->hi[j - 1] = z;
        }
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        if (m && s->lo[i] <= s->hi[m - 1] + 1) {
            if (s->hi[i] > s->hi[m - 1]) s->hi[m - 1] = s->hi[i];
        } else {
            s->lo[m] = s->lo[i], s->hi[m] = s->hi[i], m++;
        }
    }
    s->n = m;
}

/* s := [ulo, uhi] minus s */
static void cp_negate(cpset *s, uint32_t ulo, uint32_t uhi)
{
    cp_norm(s);
    cpset t = {.n = 0};
    uint32_t next = ulo;
    for (int i = 0; i < s->n; i++) {
        if (s->hi[i] < ulo || s->lo[i] > uhi) continue;
        if (s->lo[i] > next) cp_add(&t, next, s->lo[i] - 1);
        next = s->hi[i] + 1;
    }
    if (next <= uhi) cp_add(&t, next, uhi);
    t.shorthand = s->shorthand;
    t.full |= s->full;
    *s = t;
}

static int cp_has(const cpset *s, uint32_t c)
{
    for (int i = 0; i < s->n; i++)
        if (c >= s->lo[i] && c <= s->hi[i]) return 1;
    return 0;
}

/* The set as JSON string content: raw characters where JSON allows them,
 * the escape of '"', '\' and the control characters otherwise. */
static int cp_emit(fj_buf *b, const cpset *s0)
{
    cpset s = *s0;
    cp_norm(&s);
    fj_buf cls = {0};
    int n_raw = 0, alts = 0;
    for (int i = 0; i < s.n; i++) {
        uint32_t lo = s.lo[i], hi = s.hi[i];
        /* cut out the characters JSON must escape, and the surrogates */
        static const uint32_t cut_lo[] = {0x00, 0x22, 0x5C, 0xD800}, cut_hi[] = {0x1F, 0x22, 0x5C, 0xDFFF};
        uint32_t a = lo;
        while (a <= hi) {
            uint32_t z = hi;
            int skip = 0;
            for (int c = 0; c < 4; c++) {
                if (a >= cut_lo[c] && a <= cut_hi[c]) {
                    a = cut_hi[c] + 1;
                    skip = 1;
                    break;
                }
                if (cut_lo[c] > a && cut_lo[c] - 1 < z) z = cut_lo[c] - 1;
            }
            if (skip) continue;
            gb_cp(&cls, a);
            if (z > a) {
                fj_raws(&cls, "-");
                gb_cp(&cls, z);
            }
            n_raw++;
            if (z == 0xFFFFFFFFu) break;
            a = z + 1;
        }
    }
    fj_raws(b, "(");
    if (n_raw) {
        fj_raws(b, "[");
        fj_raw(b, cls.p, cls.n);
        fj_raws(b, "]");
        alts++;
    }
    fj_buf_free(&cls);
    if (cp_has(&s, '"')) fj_printf(b, "%s\"\\\\\\\"\"", alts++ ? " | " : "");
    if (cp_has(&s, '\\')) fj_printf(b, "%s\"\\\\\\\\\"", alts++ ? " | " : "");
    for (uint32_t c = 0; c < 0x20; c++) {
        if (!cp_has(&s, c)) continue;
        const char *e = c == '\n' ? "n" : c == '\t' ? "t" : c == '\r' ? "r" : c == '\b' ? "b" : c == '\f' ? "f" : NULL;
        if (e) fj_printf(b, "%s\"\\\\%s\"", alts++ ? " | " : "", e);
        else fj_printf(b, "%s\"\\\\u00%02x\"", alts++ ? " | " : "", (unsigned)c);
    }
    fj_raws(b, ")");
    return alts ? 0 : -1;
}

/* ---- regular expressions (pattern) ---- */

typedef struct re {
    js *st;
    const char *p, *end;
    int depth;
} re;

static int re_cp(re *r, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)r->p;
    unsigned c = s[0];
    int k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (r->p + k > r->end) return js_fail(r->st, "'pattern' is not valid UTF-8");
    uint32_t v = k == 1 ? c : k == 2 ? (c & 0x1F) : k == 3 ? (c & 0x0F) : (c & 0x07);
    for (int j = 1; j < k; j++) v = v << 6 | (s[j] & 0x3F);
    r->p += k;
    *cp = v;
    return 0;
}

static int re_hex(re *r, int n, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++, r->p++) {
        if (r->p >= r->end) return js_fail(r->st, "'pattern': escape needs %d hex digits", n);
        char c = *r->p;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return js_fail(r->st, "'pattern': escape needs %d hex digits", n);
        v = v << 4 | (uint32_t)d;
    }
    if (v >= 0xD800 && v <= 0xDFFF) return js_fail(r->st, "'pattern': escape of a surrogate is not supported");
    *out = v;
    return 0;
}

static void add_shorthand(cpset *s, char c)
{
    int neg = c == 'D' || c == 'W' || c == 'S';
    cpset t = {.n = 0};
    char l = (char)(c | 0x20);
    if (l == 'd') cp_add(&t, '0', '9');
    if (l == 'w') cp_add(&t, '0', '9'), cp_add(&t, 'A', 'Z'), cp_add(&t, 'a', 'z'), cp_add(&t, '_', '_');
    if (l == 's') cp_add(&t, ' ', ' '), cp_add(&t, '\t', '\r');
    if (neg) cp_negate(&t, 0x20, 0x7E);
    for (int i = 0; i < t.n; i++) cp_add(s, t.lo[i], t.hi[i]);
    s->shorthand = 1;
    s->full |= t.full;
}

/* After a backslash: a single character (*cp, return 0), a shorthand class
 * added to cls (return 1), or an error. */
static int re_escape(re *r, uint32_t *cp, cpset *cls, int in_class)
{
    if (r->p >= r->end) return js_fail(r->st, "'pattern' ends with a lone backslash");
    char c = *r->p++;
    switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': add_shorthand(cls, c); return 1;
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case '0': *cp = 0; return 0;
    case 'x': return re_hex(r, 2, cp);
    case 'u': return re_hex(r, 4, cp);
    case 'b':
        if (in_class) {
            *cp = '\b';
            return 0;
        }
        return js_fail(r->st, "'pattern': word boundary '\\b' is not supported");
    case 'B': return js_fail(r->st, "'pattern': word boundary '\\B' is not supported");
    case 'A': case 'Z': case 'z': case 'G':
        return js_fail(r->st, "'pattern': anchor '\\%c' is not supported", c);
    case 'k': return js_fail(r->st, "'pattern': backreference '\\k' is not supported");
    default: break;
    }
    if (c >= '1' && c <= '9') return js_fail(r->st, "'pattern': backreference '\\%c' is not supported", c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return js_fail(r->st, "'pattern': escape '\\%c' is not supported", c);
    r->p--;
    return re_cp(r, cp);
}

static int re_class(re *r, cpset *s)
{
    int neg = 0, first = 1;
    if (r->p < r->end && *r->p == '^') neg = 1, r->p++;
    for (;;) {
        if (r->p >= r->end) return js_fail(r->st, "'pattern': '[' without its ']'");
        if (*r->p == ']' && !first) {
            r->p++;
            break;
        }
        first = 0;
        uint32_t a, z;
        if (*r->p == '\\') {
            r->p++;
            int k = re_escape(r, &a, s, 1);
            if (k < 0) return -1;
            if (k == 1) continue;
        } else if (*r->p == '[' && r->p + 1 < r->end && r->p[1] == ':') {
            return js_fail(r->st, "'pattern': POSIX class '[:' is not supported");
        } else if (re_cp(r, &a)) {
            return -1;
        }
        z = a;
        if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                cpset dummy = {.n = 0};
                int k = re_escape(r, &z, &dummy, 1);
                if (k < 0) return -1;
                if (k == 1) return js_fail(r->st, "'pattern': a class range ends in a shorthand class");
            } else if (re_cp(r, &z)) {
                return -1;
            }
            if (z < a) return js_fail(r->st, "'pattern': class range ends below its start");
        }
        if (cp_add(s, a, z)) return js_fail(r->st, "'pattern': character class too large");
    }
    if (neg) {
        if (s->shorthand) cp_negate(s, 0x20, 0x7E);
        else cp_negate(s, 0, 0x10FFFF);
    }
    return 0;
}

static int re_alt(re *r, fj_buf *b);

/* A character, class, '.' or escape (not a group) into b. Out of line: its
 * set stays out of the frames of nested groups. */
__attribute__((noinline)) static int re_set_atom(re *r, fj_buf *b)
{
    char c = *r->p;
    cpset s = {.n = 0};
    if (c == '[') {
        r->p++;
        if (re_class(r, &s)) return -1;
    } else if (c == '.') {
        r->p++;
        cp_add(&s, 0, '\n' - 1), cp_add(&s, '\n' + 1, 0x10FFFF);
    } else if (c == '\\') {
        r->p++;
        uint32_t cp;
        int k = re_escape(r, &cp, &s, 0);
        if (k < 0) return -1;
        if (k == 0) cp_add(&s, cp, cp);
    } else if (c == '^' || c == '$') {
        return js_fail(r->st, "'pattern': anchor '%c' inside the pattern is not supported", c);
    } else if (c == '*' || c == '+' || c == '?') {
        return js_fail(r->st, "'pattern': '%c' has nothing before it to repeat", c);
    } else {
        uint32_t cp;
        if (re_cp(r, &cp)) return -1;
        cp_add(&s, cp, cp);
    }
    if (s.full) return js_fail(r->st, "'pattern': character class too large");
    if (cp_emit(b, &s)) return js_fail(r->st, "'pattern': a character class matches no character");
    return 0;
}

/* One atom (a GBNF term, parenthesized) into b. */
static int re_atom(re *r, fj_buf *b)
{
    if (*r->p == '(') {
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            const char *q = r->p + 1;
            if (q < r->end && *q == ':') {
                r->p = q + 1;
            } else if (q < r->end && (*q == '=' || *q == '!')) {
                return js_fail(r->st, "'pattern': lookahead '(?%c' is not supported", *q);
            } else if (q + 1 < r->end && *q == '<' && (q[1] == '=' || q[1] == '!')) {
                return js_fail(r->st, "'pattern': lookbehind '(?<%c' is not supported", q[1]);
            } else if (q < r->end && (*q == '<' || (*q == 'P' && q + 1 < r->end && q[1] == '<'))) {
                while (r->p < r->end && *r->p != '>') r->p++; /* a named group: just a group */
                if (r->p >= r->end) return js_fail(r->st, "'pattern': unterminated group name");
                r->p++;
            } else if (q < r->end && *q == 'P' && q + 1 < r->end && q[1] == '=') {
                return js_fail(r->st, "'pattern': backreference '(?P=' is not supported");
            } else {
                return js_fail(r->st, "'pattern': group '(?%c' is not supported", q < r->end ? *q : ' ');
            }
        }
        if (++r->depth > JS_MAX_DEPTH) return js_fail(r->st, "'pattern' nests groups deeper than %d", JS_MAX_DEPTH);
        fj_raws(b, "(");
        if (re_alt(r, b)) return -1;
        fj_raws(b, ")");
        r->depth--;
        if (r->p >= r->end || *r->p != ')') return js_fail(r->st, "'pattern': '(' without its ')'");
        r->p++;
        return 0;
    }
    return re_set_atom(r, b);
}

static int re_number(re *r, int64_t *v)
{
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return 0;
    int64_t x = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        x = x * 10 + (*r->p++ - '0');
        if (x > JS_MAX_REPEAT) x = JS_MAX_REPEAT + 1;
    }
    *v = x;
    return 1;
}

/* A quantifier after an atom: lo, hi (-1 unbounded); 0 when there is none. */
static int re_quant(re *r, int64_t *lo, int64_t *hi)
{
    if (r->p >= r->end) return 0;
    char c = *r->p;
    if (c == '*') *lo = 0, *hi = -1, r->p++;
    else if (c == '+') *lo = 1, *hi = -1, r->p++;
    else if (c == '?') *lo = 0, *hi = 1, r->p++;
    else if (c == '{') {
        const char *save = r->p++;
        int64_t a = 0, z = -1;
        int has_a = re_number(r, &a), ok = 1;
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            if (!re_number(r, &z)) z = -1;
            if (!has_a && z < 0) ok = 0;
        } else {
            z = a;
            if (!has_a) ok = 0;
        }
        if (!ok || r->p >= r->end || *r->p != '}') { /* not a quantifier: a literal '{' */
            r->p = save;
            return 0;
        }
        r->p++;
        if (a > JS_MAX_REPEAT || z > JS_MAX_REPEAT)
            return js_fail(r->st, "'pattern': repetition count above %d", JS_MAX_REPEAT);
        if (z >= 0 && z < a) return js_fail(r->st, "'pattern': repetition maximum below its minimum");
        *lo = a, *hi = z;
    } else {
        return 0;
    }
    if (r->p < r->end && *r->p == '?') r->p++; /* lazy: the same strings match */
    else if (r->p < r->end && *r->p == '+') return js_fail(r->st, "'pattern': possessive quantifier is not supported");
    if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?'))
        return js_fail(r->st, "'pattern': '%c' after a quantifier is not supported", *r->p);
    return 1;
}

static int re_seq(re *r, fj_buf *b)
{
    int n = 0;
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (*r->p == '{' ) { /* a '{' that starts no quantifier is a literal */
            int64_t lo, hi;
            const char *save = r->p;
            int q = re_quant(r, &lo, &hi);
            if (q < 0) return -1;
            if (q > 0) {
                r->p = save;
                return js_fail(r->st, "'pattern': '{' has nothing before it to repeat");
            }
        }
        fj_buf atom = {0};
        int64_t lo = 0, hi = 0;
        int q = re_atom(r, &atom);
        if (q == 0) q = re_quant(r, &lo, &hi);
        fj_raw(&atom, "", 1); /* NUL-terminated */
        if (q < 0 || atom.oom) {
            if (q >= 0) js_fail(r->st, "out of memory");
            fj_buf_free(&atom);
            return -1;
        }
        if (n++) fj_raws(b, " ");
        if (q && hi == 0) fj_raws(b, "\"\"");
        else if (q) gb_repeat(b, atom.p, lo, hi);
        else fj_raws(b, atom.p);
        fj_buf_free(&atom);
    }
    if (n == 0) fj_raws(b, "\"\"");
    return 0;
}

static int re_alt(re *r, fj_buf *b)
{
    if (re_seq(r, b)) return -1;
    while (r->p < r->end && *r->p == '|') {
        r->p++;
        fj_raws(b, " | ");
        if (re_seq(r, b)) return -1;
    }
    return 0;
}

static int gen_pattern(js *st, const fj_val *pat, fj_buf *b)
{
    if (pat->type != FJ_STR) return js_fail(st, "'pattern' must be a string");
    if (memchr(pat->str, 0, pat->len)) return js_fail(st, "'pattern' holds a NUL character");
    const char *s = pat->str, *e = pat->str + pat->len;
    int start = s < e && *s == '^', end = 0;
    if (start) s++;
    if (e > s && e[-1] == '$') { /* unless the '$' is escaped */
        size_t bs = 0;
        for (const char *q = e - 2; q >= s && *q == '\\'; q--) bs++;
        if (bs % 2 == 0) end = 1, e--;
    }
    re r = {st, s, e, 0};
    fj_buf body = {0};
    int rc = re_alt(&r, &body);
    if (rc == 0 && r.p < r.end) rc = js_fail(st, "'pattern': ')' without its '('");
    if (rc == 0) {
        fj_raws(b, "\"\\\"\" ");
        if (!start) fj_raws(b, "char* ");
        fj_raws(b, "(");
        fj_raw(b, body.p ? body.p : "\"\"", body.p ? body.n : 2);
        fj_raws(b, ")");
        if (!end) fj_raws(b, " char*");
        fj_raws(b, " \"\\\"\"");
    }
    if (body.oom) b->oom = 1;
    fj_buf_free(&body);
    return rc;
}

/* ---- strings ---- */

static const char *const formats[] = {"date", "time", "date-time", "uuid"};

/* The format rules, each written once (names "-r0": no counter gives 0). */
static void emit_format(js *st, int f)
{
    if (st->fmt_done[f]) return;
    st->fmt_done[f] = 1;
    fj_buf *o = &st->out;
    switch (f) {
    case 0: /* years 0001-9999; leap years: divisible by 4, not by 100 unless by 400 */
        fj_raws(o, "year-r0 ::= [0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\"\n");
        fj_raws(o, "leap-r0 ::= [0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | "
                   "( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\"\n");
        fj_raws(o, "date-r0 ::= year-r0 \"-\" ( ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" "
                   "[0-8] ) | ( \"0\" [13-9] | \"1\" [0-2] ) \"-\" ( \"29\" | \"30\" ) | ( \"0\" [13578] | \"1\" [02] ) "
                   "\"-31\" ) | leap-r0 \"-02-29\"\n");
        break;
    case 1: /* RFC 3339 partial-time and offset: seconds 00-59 (no leap second), 'Z' or +hh:mm */
        fj_raws(o, "time-r0 ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
                   "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n");
        break;
    case 2:
        emit_format(st, 0);
        emit_format(st, 1);
        fj_raws(o, "date-time-r0 ::= date-r0 \"T\" time-r0\n");
        break;
    default: fj_raws(o, "uuid-r0 ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n"); break;
    }
}

static int gen_string(js *st, const fj_val *v, fj_buf *b)
{
    const fj_val *fmt = fj_get(v, "format"), *pat = fj_get(v, "pattern");
    int has_len = fj_get(v, "minLength") || fj_get(v, "maxLength");
    if (fmt && pat) return js_fail(st, "keyword 'pattern' next to 'format' is not supported");
    if ((fmt || pat) && has_len)
        return js_fail(st, "keyword '%s' next to '%s' is not supported",
                       fj_get(v, "minLength") ? "minLength" : "maxLength", fmt ? "format" : "pattern");
    if (pat) return gen_pattern(st, pat, b);
    if (fmt) {
        if (fmt->type != FJ_STR) return js_fail(st, "'format' must be a string");
        for (int f = 0; f < 4; f++) {
            if (strcmp(fmt->str, formats[f]) != 0) continue;
            emit_format(st, f);
            fj_printf(b, "\"\\\"\" %s-r0 \"\\\"\"", formats[f]);
            return 0;
        }
        return js_fail(st, "format '%s' is not supported (only date, time, date-time, uuid)", fmt->str);
    }
    if (!has_len) {
        fj_raws(b, "string");
        return 0;
    }
    int64_t lo, hi;
    if (get_min_max(st, v, "minLength", "maxLength", &lo, &hi)) return -1;
    fj_raws(b, "\"\\\"\" ");
    gb_repeat(b, "char", lo, hi);
    fj_raws(b, " \"\\\"\"");
    return 0;
}

/* ---- arrays ---- */

static int gen_array(js *st, const fj_val *v, const char *hint, fj_buf *b)
{
    const fj_val *items = fj_get(v, "items"), *prefix = fj_get(v, "prefixItems");
    int64_t lo, hi;
    if (get_min_max(st, v, "minItems", "maxItems", &lo, &hi)) return -1;
    if (prefix && prefix->type != FJ_ARR) return js_fail(st, "'prefixItems' must be an array of schemas");
    if (items && items->type == FJ_ARR)
        return js_fail(st, "'items' as an array (the old tuple form) is not supported: use 'prefixItems'");
    size_t k = prefix ? prefix->len : 0;
    int tail_ok = !(items && items->type == FJ_BOOL && !items->boolean);
    char tail[96] = "value";
    if (tail_ok && items) {
        size_t old = js_push(st, "items");
        char h[64];
        snprintf(h, sizeof h, "%.40s-item", hint);
        int rc = gen(st, items, h, tail);
        js_pop(st, old);
        if (rc) return -1;
    }
    if (!tail_ok && (int64_t)k < lo)
        return js_fail(st, "'minItems' is %lld, above the %zu items 'prefixItems' allows when 'items' is false",
                       (long long)lo, k);
    size_t kk = hi >= 0 && (int64_t)k > hi ? (size_t)hi : k;
    fj_raws(b, "\"[\" ws ");
    int opens = 0;
    for (size_t i = 0; i < kk; i++) {
        char item[96], h[64];
        snprintf(h, sizeof h, "%.40s-%zu", hint, i);
        size_t old = js_push(st, "prefixItems");
        js_push_index(st, i);
        int rc = gen(st, prefix->items[i], h, item);
        js_pop(st, old);
        if (rc) return -1;
        if ((int64_t)i >= lo) fj_raws(b, "( "), opens++;
        fj_printf(b, "%s%s ws ", i ? "\",\" ws " : "", item);
    }
    if (tail_ok && kk == k && (hi < 0 || hi > (int64_t)k)) {
        int64_t tlo = lo > (int64_t)k ? lo - (int64_t)k : 0, thi = hi < 0 ? -1 : hi - (int64_t)k;
        char rep[128];
        if (k > 0) {
            snprintf(rep, sizeof rep, "( \",\" ws %s ws )", tail);
            gb_repeat(b, rep, tlo, thi);
            fj_raws(b, " ");
        } else if (tlo == 0) {
            snprintf(rep, sizeof rep, "( \",\" ws %s ws )", tail);
            fj_printf(b, "( %s ws ", tail);
            gb_repeat(b, rep, 0, thi < 0 ? -1 : thi - 1);
            fj_raws(b, " )? ");
        } else {
            snprintf(rep, sizeof rep, "( \",\" ws %s ws )", tail);
            fj_printf(b, "%s ws ", tail);
            gb_repeat(b, rep, tlo - 1, thi < 0 ? -1 : thi - 1);
            fj_raws(b, " ");
        }
    }
    for (int i = 0; i < opens; i++) fj_raws(b, ")? ");
    fj_raws(b, "\"]\"");
    return 0;
}

/* ---- objects ---- */

typedef struct js_prop {
    const char *key;
    size_t key_len;
    const fj_val *schema;
    int required;
    int member; /* which allOf member (for the path) */
} js_prop;

static int utf8_decode(const char *s, size_t n, uint32_t *out, size_t cap)
{
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = (unsigned char)s[i];
        int k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
        uint32_t v = k == 1 ? c : k == 2 ? (c & 0x1F) : k == 3 ? (c & 0x0F) : (c & 0x07);
        for (int j = 1; j < k && i + (size_t)j < n; j++) v = v << 6 | ((unsigned char)s[i + (size_t)j] & 0x3F);
        if (m >= cap) return -1;
        out[m++] = v;
        i += (size_t)k;
    }
    return (int)m;
}

typedef struct js_key {
    uint32_t cp[JS_MAX_KEY];
    int n;
} js_key;

static int plain_json_char(uint32_t c) { return c >= 0x20 && c != '"' && c != '\\'; }

/* The rest of a key (closing quote included) that, after the shared prefix
 * of length d of keys[0..n) (sorted), spells none of those keys. */
static void not_keys(fj_buf *b, const js_key *keys, int n, int d)
{
    int ends = 0, alts = 0;
    fj_buf kids = {0};
    fj_raws(b, "(");
    for (int i = 0; i < n;) {
        if (keys[i].n == d) {
            ends = 1;
            i++;
            continue;
        }
        uint32_t c = keys[i].cp[d];
        int j = i;
        while (j < n && keys[j].n > d && keys[j].cp[d] == c) j++;
        if (plain_json_char(c)) {
            gb_cp(&kids, c);
            fj_raws(b, alts++ ? " | [" : "[");
            gb_cp(b, c);
            fj_raws(b, "] ");
            not_keys(b, keys + i, j - i, d + 1);
        }
        i = j;
    }
    /* any other plain character (the class drops surrogates), then anything */
    fj_printf(b, "%s[^\"\\\\\\x00-\\x1F", alts++ ? " | " : "");
    fj_raw(b, kids.p ? kids.p : "", kids.n);
    fj_raws(b, "] char* \"\\\"\"");
    if (kids.oom) b->oom = 1;
    fj_buf_free(&kids);
    if (!ends) fj_raws(b, " | \"\\\"\"");
    fj_raws(b, ")");
}

static int cmp_key(const void *a, const void *b)
{
    const js_key *x = a, *y = b;
    for (int i = 0; i < x->n && i < y->n; i++)
        if (x->cp[i] != y->cp[i]) return x->cp[i] < y->cp[i] ? -1 : 1;
    return x->n - y->n;
}

/* The rule of one extra key: a JSON string that is none of the declared keys. */
static int gen_extra_key(js *st, const js_prop *props, size_t n, const char *hint, char name[96])
{
    char h[64];
    snprintf(h, sizeof h, "%.40s-key", hint);
    js_name(st, h, name);
    if (n == 0) {
        fj_printf(&st->out, "%s ::= string\n", name);
        return 0;
    }
    js_key *keys = malloc(n * sizeof *keys);
    if (!keys) return js_fail(st, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int m = utf8_decode(props[i].key, props[i].key_len, keys[i].cp, JS_MAX_KEY);
        if (m < 0) {
            free(keys);
            return js_fail(st, "property name '%.40s...' is longer than %d characters, the limit with "
                               "'additionalProperties'", props[i].key, JS_MAX_KEY);
        }
        keys[i].n = m;
    }
    qsort(keys, n, sizeof *keys, cmp_key);
    fj_buf body = {0};
    fj_raws(&body, "\"\\\"\" ");
    not_keys(&body, keys, (int)n, 0);
    js_rule(st, name, &body);
    fj_buf_free(&body);
    free(keys);
    return 0;
}

/* "{" ws, the properties in order (each "key" ws ":" ws value ws), extras
 * (additional: NULL none, else the value rule) after them, "}". */
static int gen_object_from(js *st, const js_prop *props, size_t n, const char *additional, const fj_val *add_schema,
                           const char *hint, fj_buf *b)
{
    char (*kv)[96] = calloc(n + 1, sizeof *kv);
    if (!kv) return js_fail(st, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char val[96];
        size_t old = js_push(st, props[i].member >= 0 ? "allOf" : "properties");
        if (props[i].member >= 0) {
            js_push_index(st, (size_t)props[i].member);
            js_push(st, "properties");
        }
        js_push(st, props[i].key);
        rc = gen(st, props[i].schema, props[i].key, val);
        js_pop(st, old);
        if (rc) break;
        fj_buf body = {0};
        fj_buf key = {0};
        fj_str(&key, props[i].key, props[i].key_len);
        gb_lit(&body, key.p ? key.p : "", key.n); /* the key's JSON text, quotes included */
        if (key.oom) body.oom = 1;
        fj_buf_free(&key);
        fj_printf(&body, " ws \":\" ws %s ws", val);
        char h[64];
        snprintf(h, sizeof h, "%.40s-kv", props[i].key);
        js_name(st, h, kv[i]);
        js_rule(st, kv[i], &body);
        fj_buf_free(&body);
    }
    char xkv[96] = "";
    if (rc == 0 && additional) {
        char val[96], key[96];
        if (add_schema) {
            size_t old = js_push(st, "additionalProperties");
            rc = gen(st, add_schema, "additional", val);
            js_pop(st, old);
        } else {
            snprintf(val, sizeof val, "value");
        }
        if (rc == 0) rc = gen_extra_key(st, props, n, hint, key);
        if (rc == 0) {
            fj_buf body = {0};
            fj_printf(&body, "%s ws \":\" ws %s ws", key, val);
            js_name(st, "extra-kv", xkv);
            js_rule(st, xkv, &body);
            fj_buf_free(&body);
        }
    }
    if (rc) {
        free(kv);
        return -1;
    }
    /* tails: t[i] is what may follow once something came before property i */
    char (*t)[96] = calloc(n + 1, sizeof *t);
    if (!t) {
        free(kv);
        return js_fail(st, "out of memory");
    }
    for (size_t i = 1; i <= n; i++) js_name(st, "rest", t[i]);
    for (size_t i = 1; i <= n; i++) {
        fj_buf body = {0};
        if (i == n) {
            if (xkv[0]) fj_printf(&body, "( \",\" ws %s )*", xkv);
            else fj_raws(&body, "\"\"");
        } else if (props[i].required) {
            fj_printf(&body, "\",\" ws %s %s", kv[i], t[i + 1]);
        } else {
            fj_printf(&body, "( \",\" ws %s )? %s", kv[i], t[i + 1]);
        }
        js_rule(st, t[i], &body);
        fj_buf_free(&body);
    }
    /* the first property present: any optional one up to the first required one */
    fj_raws(b, "\"{\" ws ( ");
    int alts = 0, nullable = 1;
    for (size_t i = 0; i < n; i++) {
        fj_printf(b, "%s%s %s", alts++ ? " | " : "", kv[i], t[i + 1]);
        if (props[i].required) {
            nullable = 0;
            break;
        }
    }
    if (nullable && xkv[0]) fj_printf(b, "%s%s %s", alts++ ? " | " : "", xkv, t[n]);
    if (alts == 0) fj_raws(b, "\"\"");
    fj_raws(b, nullable && alts ? " )? \"}\"" : " ) \"}\"");
    free(kv);
    free(t);
    return 0;
}

static int find_prop(const js_prop *props, size_t n, const char *key, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (props[i].key_len == len && memcmp(props[i].key, key, len) == 0) return (int)i;
    return -1;
}

/* required: an array of distinct names, each in props; mark them. */
static int mark_required(js *st, const fj_val *req, js_prop *props, size_t n)
{
    if (!req) return 0;
    if (req->type != FJ_ARR) return js_fail(st, "'required' must be an array of property names");
    for (size_t i = 0; i < req->len; i++) {
        const fj_val *r = req->items[i];
        if (r->type != FJ_STR) return js_fail(st, "'required' must be an array of property names");
        int p = find_prop(props, n, r->str, r->len);
        if (p < 0) return js_fail(st, "required property '%s' is not in 'properties'", r->str);
        props[p].required = 1;
    }
    return 0;
}

static int collect_props(js *st, const fj_val *obj, int member, js_prop **props, size_t *n)
{
    if (!obj) return 0;
    if (obj->type != FJ_OBJ) return js_fail(st, "'properties' must be an object");
    js_prop *p = realloc(*props, (*n + obj->len + 1) * sizeof *p);
    if (!p) return js_fail(st, "out of memory");
    *props = p;
    for (size_t i = 0; i < obj->len; i++) {
        if (find_prop(p, *n, obj->keys[i], obj->key_lens[i]) >= 0)
            return js_fail(st, "property '%s' is declared by two 'allOf' members", obj->keys[i]);
        p[(*n)++] = (js_prop){obj->keys[i], obj->key_lens[i], obj->items[i], 0, member};
    }
    return 0;
}

static int gen_object(js *st, const fj_val *v, const char *hint, fj_buf *b)
{
    const fj_val *props_v = fj_get(v, "properties"), *add = fj_get(v, "additionalProperties");
    if (!props_v && !add) {
        if (fj_get(v, "required")) return js_fail(st, "'required' without 'properties' is not supported");
        fj_raws(b, "object");
        return 0;
    }
    js_prop *props = NULL;
    size_t n = 0;
    int rc = collect_props(st, props_v, -1, &props, &n);
    if (rc == 0) rc = mark_required(st, fj_get(v, "required"), props, n);
    const char *additional = NULL;
    const fj_val *add_schema = NULL;
    if (rc == 0 && add) {
        if (add->type == FJ_BOOL) {
            additional = add->boolean ? "value" : NULL;
        } else if (add->type == FJ_OBJ) {
            additional = "schema";
            add_schema = add;
        } else {
            rc = js_fail(st, "'additionalProperties' must be a boolean or a schema");
        }
    }
    if (rc == 0) rc = gen_object_from(st, props, n, additional, add_schema, hint, b);
    free(props);
    return rc;
}

/* allOf of object schemas with only properties / required: their union. */
static int gen_all_of(js *st, const fj_val *v, const char *hint, fj_buf *b)
{
    static const char *const sib[] = {"type"};
    if (only_with(st, v, "allOf", sib, 1)) return -1;
    const fj_val *all = fj_get(v, "allOf"), *ty = fj_get(v, "type");
    if (ty && !(ty->type == FJ_STR && strcmp(ty->str, "object") == 0))
        return js_fail(st, "'allOf' next to a 'type' other than \"object\" is not supported");
    if (all->type != FJ_ARR || all->len == 0) return js_fail(st, "'allOf' must be a non-empty array of schemas");
    js_prop *props = NULL;
    size_t n = 0;
    int rc = 0;
    for (size_t m = 0; m < all->len && rc == 0; m++) {
        const fj_val *s = all->items[m];
        size_t old = js_push(st, "allOf");
        js_push_index(st, m);
        if (s->type != FJ_OBJ) rc = js_fail(st, "an 'allOf' member must be an object schema");
        for (size_t i = 0; rc == 0 && i < s->len; i++) {
            const char *k = s->keys[i];
            if (is_annotation(k) || strcmp(k, "properties") == 0 || strcmp(k, "required") == 0) continue;
            if (strcmp(k, "type") == 0 && s->items[i]->type == FJ_STR && strcmp(s->items[i]->str, "object") == 0)
                continue;
            rc = js_fail(st, "keyword '%s' inside 'allOf' is not supported (only object schemas with "
                             "'properties' and 'required' are merged)", k);
        }
        if (rc == 0) rc = collect_props(st, fj_get(s, "properties"), (int)m, &props, &n);
        js_pop(st, old);
    }
    for (size_t m = 0; m < all->len && rc == 0; m++) {
        size_t old = js_push(st, "allOf");
        js_push_index(st, m);
        rc = mark_required(st, fj_get(all->items[m], "required"), props, n);
        js_pop(st, old);
    }
    if (rc == 0) rc = gen_object_from(st, props, n, NULL, NULL, hint, b);
    free(props);
    return rc;
}

/* ---- $ref ---- */

/* Decode one JSON pointer segment (~0 ~1, %-escapes are not decoded). */
static const fj_val *pointer_step(const fj_val *at, const char *seg, size_t n)
{
    char key[512];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < sizeof key; i++) {
        if (seg[i] == '~' && i + 1 < n && (seg[i + 1] == '0' || seg[i + 1] == '1')) {
            key[k++] = seg[i + 1] == '0' ? '~' : '/';
            i++;
        } else {
            key[k++] = seg[i];
        }
    }
    key[k] = '\0';
    if (at->type == FJ_OBJ) return fj_get(at, key);
    if (at->type == FJ_ARR) {
        char *end;
        unsigned long idx = strtoul(key, &end, 10);
        if (k == 0 || *end || idx >= at->len) return NULL;
        return at->items[idx];
    }
    return NULL;
}

static int gen_ref(js *st, const fj_val *v, char name[96])
{
    if (only_with(st, v, "$ref", NULL, 0)) return -1;
    const fj_val *ref = fj_get(v, "$ref");
    if (ref->type != FJ_STR) return js_fail(st, "'$ref' must be a string");
    if (ref->len == 0 || ref->str[0] != '#')
        return js_fail(st, "remote $ref '%s' is not supported (only '#...' within the schema)", ref->str);
    const char *p = ref->str + 1, *e = ref->str + ref->len;
    if (p < e && *p != '/') return js_fail(st, "$ref '%s' is not a JSON pointer (anchors are not supported)", ref->str);
    const fj_val *at = st->root;
    const char *last = "root";
    size_t last_n = 4;
    while (p < e && at) {
        p++;
        const char *q = p;
        while (q < e && *q != '/') q++;
        at = pointer_step(at, p, (size_t)(q - p));
        last = p, last_n = (size_t)(q - p);
        p = q;
    }
    if (!at) return js_fail(st, "$ref '%s' points to nothing in the schema", ref->str);
    for (size_t i = 0; i < st->n_refs; i++)
        if (st->refs[i].target == at) {
            memcpy(name, st->refs[i].name, 96);
            return 0;
        }
    if (st->n_refs == st->cap_refs) {
        size_t c = st->cap_refs ? st->cap_refs * 2 : 8;
        js_ref *r = realloc(st->refs, c * sizeof *r);
        if (!r) return js_fail(st, "out of memory");
        st->refs = r, st->cap_refs = c;
    }
    js_ref *r = &st->refs[st->n_refs++];
    r->target = at;
    char hint[48];
    snprintf(hint, sizeof hint, "ref-%.*s", (int)(last_n < 40 ? last_n : 40), last);
    js_name(st, hint, r->name);
    memcpy(name, r->name, 96);
    /* generate the target with the ref's own path, into its rule */
    char saved[sizeof st->path];
    size_t saved_n = st->plen;
    memcpy(saved, st->path, sizeof saved);
    size_t n = ref->len - 1 < sizeof st->path - 1 ? ref->len - 1 : sizeof st->path - 1;
    memcpy(st->path, ref->str + 1, n);
    st->path[n] = '\0';
    st->plen = n;
    char inner[96];
    int rc = gen(st, at, hint, inner);
    memcpy(st->path, saved, sizeof saved);
    st->plen = saved_n;
    if (rc) return -1;
    fj_printf(&st->out, "%s ::= %s\n", name, inner);
    return 0;
}

/* ---- the schema ---- */

static int type_of_name(const char *s)
{
    static const char *const names[] = {"null", "boolean", "object", "array", "string", "number", "integer"};
    for (int i = 0; i < 7; i++)
        if (strcmp(s, names[i]) == 0) return 1 << i;
    return 0;
}

static int schema_types(js *st, const fj_val *v, int *mask)
{
    const fj_val *ty = fj_get(v, "type");
    *mask = 0;
    if (ty) {
        const fj_val *const *list = &ty;
        size_t n = 1;
        if (ty->type == FJ_ARR) list = (const fj_val *const *)ty->items, n = ty->len;
        if (n == 0) return js_fail(st, "'type' is an empty array");
        for (size_t i = 0; i < n; i++) {
            if (list[i]->type != FJ_STR)
                return js_fail(st, "'type' must be a type name or an array of them, not %s", fj_type_name(list[i]->type));
            int t = type_of_name(list[i]->str);
            if (!t) return js_fail(st, "unknown type '%s'", list[i]->str);
            *mask |= t;
        }
    }
    int implied = 0;
    for (size_t i = 0; i < v->len; i++) {
        int t = kw_types(v->keys[i]);
        if (!t) continue;
        if (ty && !(t & *mask))
            return js_fail(st, "keyword '%s' applies to none of the types in 'type'", v->keys[i]);
        implied |= t == (T_INT | T_NUM) ? T_INT : t;
    }
    if (!ty) *mask = implied ? implied : T_ALL;
    if ((*mask & T_NUM)) {
        for (size_t i = 0; i < N_OF(kw_int); i++)
            if (fj_get(v, kw_int[i]))
                return js_fail(st, "keyword '%s' on type 'number' is not supported (only integer bounds are exact)",
                               kw_int[i]);
    }
    return 0;
}

static int value_type(const fj_val *x)
{
    switch (x->type) {
    case FJ_NULL: return T_NULL;
    case FJ_BOOL: return T_BOOL;
    case FJ_OBJ: return T_OBJ;
    case FJ_ARR: return T_ARR;
    case FJ_STR: return T_STR;
    case FJ_NUM: return isfinite(x->num) && x->num == floor(x->num) ? T_NUM | T_INT : T_NUM;
    }
    return 0;
}

static int gen_enum(js *st, const fj_val *v, fj_buf *b)
{
    const fj_val *c = fj_get(v, "const"), *e = fj_get(v, "enum");
    static const char *const sib[] = {"type"};
    if (c && e) return js_fail(st, "keyword 'enum' next to 'const' is not supported");
    if (only_with(st, v, c ? "const" : "enum", sib, 1)) return -1;
    int mask = T_ALL;
    if (fj_get(v, "type") && schema_types(st, v, &mask)) return -1;
    const fj_val *const *vals = &c;
    size_t n = 1;
    if (e) {
        if (e->type != FJ_ARR || e->len == 0) return js_fail(st, "'enum' must be a non-empty array");
        vals = (const fj_val *const *)e->items, n = e->len;
    }
    int alts = 0;
    fj_raws(b, "(");
    for (size_t i = 0; i < n; i++) {
        if (!(value_type(vals[i]) & mask)) continue;
        if (alts++) fj_raws(b, " | ");
        gb_value_lit(b, vals[i]);
    }
    fj_raws(b, ")");
    if (!alts) return js_fail(st, "no value of '%s' has a type in 'type'", c ? "const" : "enum");
    return 0;
}

static int gen_union(js *st, const fj_val *v, const char *kw, const char *hint, fj_buf *b)
{
    if (fj_get(v, "anyOf") && fj_get(v, "oneOf")) return js_fail(st, "keyword 'oneOf' next to 'anyOf' is not supported");
    if (only_with(st, v, kw, NULL, 0)) return -1;
    const fj_val *list = fj_get(v, kw);
    if (list->type != FJ_ARR || list->len == 0) return js_fail(st, "'%s' must be a non-empty array of schemas", kw);
    fj_raws(b, "(");
    for (size_t i = 0; i < list->len; i++) {
        char sub[96], h[64];
        snprintf(h, sizeof h, "%.40s-%zu", hint, i);
        size_t old = js_push(st, kw);
        js_push_index(st, i);
        int rc = gen(st, list->items[i], h, sub);
        js_pop(st, old);
        if (rc) return -1;
        fj_printf(b, "%s%s", i ? " | " : "", sub);
    }
    fj_raws(b, ")");
    return 0;
}

static int gen_typed(js *st, const fj_val *v, const char *hint, fj_buf *b)
{
    int mask;
    if (schema_types(st, v, &mask)) return -1;
    int typed = fj_get(v, "type") != NULL;
    for (size_t i = 0; i < v->len && !typed; i++) typed = kw_types(v->keys[i]) != 0;
    if (!typed) {
        fj_raws(b, "value");
        return 0;
    }
    int alts = 0, rc = 0;
    fj_raws(b, "(");
    if (mask & T_NULL) fj_printf(b, "%s\"null\"", alts++ ? " | " : "");
    if (mask & T_BOOL) fj_printf(b, "%s(\"true\" | \"false\")", alts++ ? " | " : "");
    if (mask & T_NUM) fj_printf(b, "%snumber", alts++ ? " | " : "");
    else if (mask & T_INT) {
        if (alts++) fj_raws(b, " | ");
        rc = gen_integer(st, v, b);
    }
    if (rc == 0 && (mask & T_STR)) {
        if (alts++) fj_raws(b, " | ");
        rc = gen_string(st, v, b);
    }
    if (rc == 0 && (mask & T_ARR)) {
        if (alts++) fj_raws(b, " | ");
        rc = gen_array(st, v, hint, b);
    }
    if (rc == 0 && (mask & T_OBJ)) {
        if (alts++) fj_raws(b, " | ");
        rc = gen_object(st, v, hint, b);
    }
    fj_raws(b, ")");
    return rc;
}

static int check_defs(js *st, const fj_val *v)
{
    static const char *const defs[] = {"$defs", "definitions"};
    for (int i = 0; i < 2; i++) {
        const fj_val *d = fj_get(v, defs[i]);
        if (d && d->type != FJ_OBJ) return js_fail(st, "'%s' must be an object of schemas", defs[i]);
    }
    return 0;
}

/* One schema to one rule; its name in name. */
static int gen(js *st, const fj_val *v, const char *hint, char name[96])
{
    if (st->failed) return -1;
    if (st->depth >= JS_MAX_DEPTH) return js_fail(st, "schemas nest deeper than %d levels", JS_MAX_DEPTH);
    fj_buf body = {0};
    int rc = 0;
    st->depth++;
    if (v->type == FJ_BOOL) {
        if (v->boolean) fj_raws(&body, "value");
        else rc = js_fail(st, "the schema false matches no value");
    } else if (v->type != FJ_OBJ) {
        rc = js_fail(st, "a schema must be an object or a boolean, not %s", fj_type_name(v->type));
    } else if (check_keywords(st, v) || check_defs(st, v)) {
        rc = -1;
    } else if (fj_get(v, "$ref")) {
        rc = gen_ref(st, v, name);
        st->depth--;
        return rc;
    } else if (fj_get(v, "anyOf") || fj_get(v, "oneOf")) {
        rc = gen_union(st, v, fj_get(v, "anyOf") ? "anyOf" : "oneOf", hint, &body);
    } else if (fj_get(v, "allOf")) {
        rc = gen_all_of(st, v, hint, &body);
    } else if (fj_get(v, "const") || fj_get(v, "enum")) {
        rc = gen_enum(st, v, &body);
    } else {
        rc = gen_typed(st, v, hint, &body);
    }
    st->depth--;
    if (rc == 0) {
        js_name(st, hint, name);
        js_rule(st, name, &body);
    }
    fj_buf_free(&body);
    return rc;
}

char *fc_json_schema_to_gbnf(fc_ctx *ctx, const char *schema, size_t len)
{
    if (!schema) return fc_fail(ctx, FC_ERR_INVALID_ARG, "json schema: no text");
    char err[256];
    fj_doc *doc = fj_parse(schema, len, NULL, err, sizeof err);
    if (!doc) return fc_fail(ctx, FC_ERR_INVALID_ARG, "json schema: not valid JSON: %s", err);
    js st = {.ctx = ctx, .root = fj_root(doc)};
    char top[96];
    char *text = NULL;
    if (gen(&st, st.root, "root", top) == 0) {
        fj_buf g = {0};
        fj_printf(&g, "root ::= %s\n", top);
        fj_raw(&g, st.out.p, st.out.n);
        fj_raws(&g, fc_grammar_json_rules);
        fj_raw(&g, "", 1);
        if (g.oom || st.out.oom) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "json schema: out of memory");
            fj_buf_free(&g);
        } else {
            text = g.p;
        }
    }
    fj_buf_free(&st.out);
    free(st.refs);
    fj_free(doc);
    return text;
}

fc_grammar *fc_grammar_from_json_schema(fc_ctx *ctx, const char *schema, size_t len)
{
    char *text = fc_json_schema_to_gbnf(ctx, schema, len);
    if (!text) return NULL;
    fc_grammar *g = fc_grammar_parse(ctx, text, strlen(text), "root");
    free(text);
    return g;
}
