/* SPDX-License-Identifier: MIT */
/* GBNF to the compiled grammar of grammar_internal.h.
 *
 * The text is read as UTF-8 code points; everything is lowered to bytes on
 * the way in:
 *   - a literal becomes its UTF-8 bytes, one single-byte set each;
 *   - a class with only ASCII members becomes one byte set; any other class
 *     (and `.`) becomes a generated rule whose alternatives are the UTF-8
 *     byte-range sequences of its code points (Russ Cox's utf8 range split),
 *     so a class can never match a surrogate or an overlong encoding;
 *   - a group becomes a generated rule;
 *   - X{m,n} becomes m copies of X, then, for an unbounded tail, a rule
 *     R ::= X R | "" (right recursion: the matcher's tail-call rule keeps
 *     its stack flat), or for a bounded one the nest O1 ::= X | "",
 *     Ok ::= X O(k-1) | "".
 * Then every reference must name a defined rule, and no rule may reach
 * itself at its left edge (through nullable prefixes too): a pushdown
 * matcher cannot run a left-recursive rule. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "llm/grammar_internal.h"

#define GP_MAX_ELEMENTS (1u << 22) /* a grammar larger than this is refused, not built */
#define GP_MAX_REPEAT 100000u
#define GP_MAX_NESTING 256 /* parentheses inside parentheses: the parser recurses on them, on a server
                              * connection thread of 512 KiB (frames are larger under ASan) */

typedef struct gp_rule {
    char *name;
    ge *el; /* alternatives, each ended by GE_END */
    uint32_t n, cap;
    int defined;
    int generated; /* a group, class or repetition, not a rule of the text */
    uint32_t owner; /* generated: the rule of the text it was written in */
    size_t first_use_line, first_use_col; /* for "used but never defined" */
} gp_rule;

typedef struct gp_class { /* a lowered non-ASCII class, kept to reuse its rule */
    uint32_t *ranges;     /* lo, hi pairs, sorted and merged */
    uint32_t n;
    uint32_t rule;
} gp_class;

typedef struct gp {
    fc_ctx *ctx;
    const char *s, *end;
    const char *p;
    gp_rule *rules;
    uint32_t n_rules, cap_rules;
    ge_set *sets;
    uint32_t n_sets, cap_sets;
    gp_class *classes;
    uint32_t n_classes, cap_classes;
    uint64_t n_total; /* elements over every rule, against GP_MAX_ELEMENTS */
    int failed;
    int nesting;
    /* open addressing: rules written in the text by name, byte sets by value
     * (index + 1; 0 empty), so a large grammar compiles in linear time */
    uint32_t *rule_hash, *set_hash;
    uint32_t rule_hash_cap, set_hash_cap, n_named;
} gp;

/* ---- errors, positions ---- */

static void gp_where(const gp *g, const char *at, size_t *line, size_t *col)
{
    size_t l = 1, c = 1;
    for (const char *q = g->s; q < at && q < g->end; q++) {
        if (*q == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)*q & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

__attribute__((format(printf, 3, 4))) static int gp_fail(gp *g, const char *at, const char *fmt, ...)
{
    if (g->failed) return -1;
    g->failed = 1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at) {
        size_t line, col;
        gp_where(g, at, &line, &col);
        fc_fail(g->ctx, FC_ERR_INVALID_ARG, "grammar line %zu, column %zu: %s", line, col, msg);
    } else {
        fc_fail(g->ctx, FC_ERR_INVALID_ARG, "grammar: %s", msg);
    }
    return -1;
}

static int gp_oom(gp *g) { return gp_fail(g, NULL, "out of memory"); }

/* ---- building blocks ---- */

static int gp_grow(gp *g, void **p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap) return 0;
    uint32_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return gp_oom(g);
    *p = q;
    *cap = c;
    return 0;
}

static int gp_emit(gp *g, uint32_t rule, uint32_t kind, uint32_t arg)
{
    gp_rule *r = &g->rules[rule];
    if (++g->n_total > GP_MAX_ELEMENTS)
        return gp_fail(g, g->p, "the grammar is too large (more than %u elements once repetitions are expanded)",
                       GP_MAX_ELEMENTS);
    if (gp_grow(g, (void **)&r->el, &r->cap, r->n + 1, sizeof *r->el)) return -1;
    r->el[r->n++] = (ge){kind, arg};
    return 0;
}

static int gp_new_rule(gp *g, const char *name, size_t len)
{
    if (gp_grow(g, (void **)&g->rules, &g->cap_rules, g->n_rules + 1, sizeof *g->rules)) return -1;
    gp_rule *r = &g->rules[g->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(len + 1);
    if (!r->name) return gp_oom(g);
    memcpy(r->name, name, len);
    r->name[len] = '\0';
    return (int)g->n_rules++;
}

/* A generated rule named after the rule it serves: "value-3". */
static int gp_gen_rule(gp *g, uint32_t parent)
{
    char name[300];
    int n = snprintf(name, sizeof name, "%.256s-%u", g->rules[parent].name, g->n_rules);
    int r = gp_new_rule(g, name, (size_t)n);
    if (r >= 0) {
        g->rules[r].defined = g->rules[r].generated = 1;
        g->rules[r].owner = g->rules[parent].generated ? g->rules[parent].owner : parent;
    }
    return r;
}

static uint32_t gp_hash_bytes(const void *p, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001B3ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* Grow a table (index + 1 per slot) to keep it at most half full, rehashing
 * with hash_of(i); -1 on out of memory. */
static int gp_table_grow(gp *g, uint32_t **tab, uint32_t *cap, uint32_t count, uint32_t (*hash_of)(const gp *, uint32_t))
{
    if (2 * (count + 1) <= *cap) return 0;
    uint32_t c = *cap ? 2 * *cap : 64;
    uint32_t *t = calloc(c, sizeof *t);
    if (!t) return gp_oom(g);
    for (uint32_t i = 0; i < *cap; i++)
        if ((*tab)[i]) {
            uint32_t h = hash_of(g, (*tab)[i] - 1) & (c - 1);
            while (t[h]) h = (h + 1) & (c - 1);
            t[h] = (*tab)[i];
        }
    free(*tab);
    *tab = t;
    *cap = c;
    return 0;
}

static uint32_t rule_hash_of(const gp *g, uint32_t r) { return gp_hash_bytes(g->rules[r].name, strlen(g->rules[r].name)); }
static uint32_t set_hash_of(const gp *g, uint32_t i) { return gp_hash_bytes(&g->sets[i], sizeof g->sets[i]); }

/* The rule the text calls `name` (made at its first mention). Generated
 * rules are not in the table: "root-1" in the text is never a group. */
static int gp_find_rule(gp *g, const char *name, size_t len, const char *at)
{
    if (gp_table_grow(g, &g->rule_hash, &g->rule_hash_cap, g->n_named, rule_hash_of)) return -1;
    uint32_t h = gp_hash_bytes(name, len) & (g->rule_hash_cap - 1);
    for (uint32_t v; (v = g->rule_hash[h]) != 0; h = (h + 1) & (g->rule_hash_cap - 1)) {
        const char *n = g->rules[v - 1].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0) return (int)(v - 1);
    }
    int r = gp_new_rule(g, name, len);
    if (r < 0) return -1;
    gp_where(g, at, &g->rules[r].first_use_line, &g->rules[r].first_use_col);
    g->rule_hash[h] = (uint32_t)r + 1;
    g->n_named++;
    return r;
}

static int gp_set(gp *g, const ge_set *s)
{
    if (gp_table_grow(g, &g->set_hash, &g->set_hash_cap, g->n_sets, set_hash_of)) return -1;
    uint32_t h = gp_hash_bytes(s, sizeof *s) & (g->set_hash_cap - 1);
    for (uint32_t v; (v = g->set_hash[h]) != 0; h = (h + 1) & (g->set_hash_cap - 1))
        if (memcmp(&g->sets[v - 1], s, sizeof *s) == 0) return (int)(v - 1);
    if (gp_grow(g, (void **)&g->sets, &g->cap_sets, g->n_sets + 1, sizeof *g->sets)) return -1;
    g->sets[g->n_sets] = *s;
    g->set_hash[h] = g->n_sets + 1;
    return (int)g->n_sets++;
}

static int gp_set_range(gp *g, unsigned lo, unsigned hi)
{
    ge_set s = {{0, 0, 0, 0}};
    for (unsigned b = lo; b <= hi; b++) s.w[b >> 6] |= 1ull << (b & 63);
    return gp_set(g, &s);
}

static int gp_emit_byte(gp *g, uint32_t rule, unsigned b)
{
    int s = gp_set_range(g, b, b);
    return s < 0 ? -1 : gp_emit(g, rule, GE_BYTES, (uint32_t)s);
}

/* ---- UTF-8 ---- */

static int utf8_encode(uint32_t cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One code point of the grammar text; -1 (with the error) on invalid UTF-8. */
static int64_t gp_next_cp(gp *g)
{
    const unsigned char *q = (const unsigned char *)g->p, *e = (const unsigned char *)g->end;
    if (q >= e) return gp_fail(g, g->p, "unexpected end of the grammar");
    unsigned c = q[0];
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || q + n > e) return gp_fail(g, g->p, "invalid UTF-8 in the grammar text");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; i++) {
        if ((q[i] & 0xC0) != 0x80) return gp_fail(g, g->p, "invalid UTF-8 in the grammar text");
        cp = (cp << 6) | (q[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return gp_fail(g, g->p, "invalid UTF-8 in the grammar text");
    g->p += n;
    return cp;
}

/* Emit the byte sequences of the code points [lo, hi] (one UTF-8 length,
 * no surrogates) as alternatives of rule. Split until every byte position
 * varies over a full continuation range, then one set per byte. */
static int gp_emit_utf8_range(gp *g, uint32_t rule, uint32_t lo, uint32_t hi)
{
    static const uint32_t len_max[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (int i = 0; i < 3; i++) {
        if (lo <= len_max[i] && hi > len_max[i])
            return gp_emit_utf8_range(g, rule, lo, len_max[i]) || gp_emit_utf8_range(g, rule, len_max[i] + 1, hi)
                       ? -1
                       : 0;
    }
    if (hi < 0x80) {
        int s = gp_set_range(g, lo, hi);
        if (s < 0 || gp_emit(g, rule, GE_BYTES, (uint32_t)s)) return -1;
        return gp_emit(g, rule, GE_END, 0);
    }
    for (int i = 1; i < 4; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0)
                return gp_emit_utf8_range(g, rule, lo, lo | m) || gp_emit_utf8_range(g, rule, (lo | m) + 1, hi) ? -1
                                                                                                               : 0;
            if ((hi & m) != m)
                return gp_emit_utf8_range(g, rule, lo, (hi & ~m) - 1) || gp_emit_utf8_range(g, rule, hi & ~m, hi) ? -1
                                                                                                                   : 0;
        }
    }
    unsigned char a[4], b[4];
    int n = utf8_encode(lo, a);
    utf8_encode(hi, b);
    for (int i = 0; i < n; i++) {
        int s = gp_set_range(g, a[i], b[i]);
        if (s < 0 || gp_emit(g, rule, GE_BYTES, (uint32_t)s)) return -1;
    }
    return gp_emit(g, rule, GE_END, 0);
}

/* ---- classes ---- */

typedef struct cp_ranges {
    uint32_t *r; /* lo, hi pairs */
    uint32_t n, cap;
} cp_ranges;

static int cmp_range(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sort and merge; negate over every code point when asked; drop surrogates. */
static int gp_normalize(gp *g, cp_ranges *cr, int negate)
{
    uint32_t n = cr->n;
    if (n) qsort(cr->r, n, 2 * sizeof *cr->r, cmp_range);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lo = cr->r[2 * i], hi = cr->r[2 * i + 1];
        if (k && lo <= cr->r[2 * k - 1] + 1) {
            if (hi > cr->r[2 * k - 1]) cr->r[2 * k - 1] = hi;
        } else {
            cr->r[2 * k] = lo;
            cr->r[2 * k + 1] = hi;
            k++;
        }
    }
    cr->n = k;
    cp_ranges out = {0};
    /* the complement needs at most k + 1 ranges; removing surrogates adds one */
    if (gp_grow(g, (void **)&out.r, &out.cap, 2 * (k + 2), sizeof *out.r)) return -1;
    uint32_t m = 0;
    if (negate) {
        uint32_t next = 0;
        for (uint32_t i = 0; i < k; i++) {
            if (cr->r[2 * i] > next) {
                out.r[2 * m] = next;
                out.r[2 * m + 1] = cr->r[2 * i] - 1;
                m++;
            }
            next = cr->r[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) {
            out.r[2 * m] = next;
            out.r[2 * m + 1] = 0x10FFFF;
            m++;
        }
    } else {
        if (k) memcpy(out.r, cr->r, 2 * k * sizeof *out.r);
        m = k;
    }
    /* cut [D800, DFFF] out */
    cp_ranges fin = {0};
    if (gp_grow(g, (void **)&fin.r, &fin.cap, 2 * (m + 1) + 2, sizeof *fin.r)) {
        free(out.r);
        return -1;
    }
    uint32_t f = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t lo = out.r[2 * i], hi = out.r[2 * i + 1];
        if (hi < 0xD800 || lo > 0xDFFF) {
            fin.r[2 * f] = lo;
            fin.r[2 * f + 1] = hi;
            f++;
            continue;
        }
        if (lo < 0xD800) {
            fin.r[2 * f] = lo;
            fin.r[2 * f + 1] = 0xD7FF;
            f++;
        }
        if (hi > 0xDFFF) {
            fin.r[2 * f] = 0xE000;
            fin.r[2 * f + 1] = hi;
            f++;
        }
    }
    free(out.r);
    free(cr->r);
    cr->r = fin.r;
    cr->n = f;
    cr->cap = fin.cap;
    return 0;
}

/* Append the element that matches one code point of cr (normalized). */
static int gp_emit_class(gp *g, uint32_t rule, cp_ranges *cr)
{
    if (cr->n == 0 || cr->r[2 * cr->n - 1] < 0x80) { /* ASCII only (or empty: matches nothing) */
        ge_set s = {{0, 0, 0, 0}};
        for (uint32_t i = 0; i < cr->n; i++)
            for (uint32_t b = cr->r[2 * i]; b <= cr->r[2 * i + 1]; b++) s.w[b >> 6] |= 1ull << (b & 63);
        int id = gp_set(g, &s);
        return id < 0 ? -1 : gp_emit(g, rule, GE_BYTES, (uint32_t)id);
    }
    for (uint32_t i = 0; i < g->n_classes; i++) {
        gp_class *c = &g->classes[i];
        if (c->n == cr->n && memcmp(c->ranges, cr->r, 2 * cr->n * sizeof *cr->r) == 0)
            return gp_emit(g, rule, GE_RULE, c->rule);
    }
    int sub = gp_gen_rule(g, rule);
    if (sub < 0) return -1;
    for (uint32_t i = 0; i < cr->n; i++)
        if (gp_emit_utf8_range(g, (uint32_t)sub, cr->r[2 * i], cr->r[2 * i + 1])) return -1;
    if (gp_grow(g, (void **)&g->classes, &g->cap_classes, g->n_classes + 1, sizeof *g->classes)) return -1;
    gp_class *c = &g->classes[g->n_classes];
    c->ranges = malloc(2 * cr->n * sizeof *cr->r);
    if (!c->ranges) return gp_oom(g);
    memcpy(c->ranges, cr->r, 2 * cr->n * sizeof *cr->r);
    c->n = cr->n;
    c->rule = (uint32_t)sub;
    g->n_classes++;
    return gp_emit(g, rule, GE_RULE, (uint32_t)sub);
}

/* ---- the lexer ---- */

static int is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Blanks and comments; newlines too when newline_ok. */
static void gp_space(gp *g, int newline_ok)
{
    while (g->p < g->end) {
        char c = *g->p;
        if (c == ' ' || c == '\t') {
            g->p++;
        } else if (c == '#') {
            while (g->p < g->end && *g->p != '\n') g->p++;
        } else if (newline_ok && (c == '\n' || c == '\r')) {
            g->p++;
        } else {
            break;
        }
    }
}

static int64_t gp_hex(gp *g, int digits)
{
    const char *at = g->p - 2;
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        if (g->p >= g->end) return gp_fail(g, at, "escape needs %d hex digits", digits);
        char c = *g->p;
        unsigned d = (c >= '0' && c <= '9')   ? (unsigned)(c - '0')
                     : (c >= 'a' && c <= 'f') ? (unsigned)(c - 'a' + 10)
                     : (c >= 'A' && c <= 'F') ? (unsigned)(c - 'A' + 10)
                                              : 16u;
        if (d == 16) return gp_fail(g, at, "escape needs %d hex digits", digits);
        v = v * 16 + d;
        g->p++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return gp_fail(g, at, "escape U+%04X is not a Unicode scalar value", v);
    return v;
}

/* One character of a literal or a class, escapes decoded. */
static int64_t gp_char(gp *g)
{
    if (g->p >= g->end) return gp_fail(g, g->p, "unexpected end of the grammar");
    if (*g->p != '\\') return gp_next_cp(g);
    const char *at = g->p;
    g->p++;
    if (g->p >= g->end) return gp_fail(g, at, "unexpected end of the grammar after '\\'");
    char c = *g->p++;
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\': return '\\';
    case '"': return '"';
    case '[': return '[';
    case ']': return ']';
    case '-': return '-';
    case '^': return '^';
    case 'x': return gp_hex(g, 2);
    case 'u': return gp_hex(g, 4);
    case 'U': return gp_hex(g, 8);
    default: return gp_fail(g, at, "unknown escape '\\%c'", c);
    }
}

/* ---- the parser ---- */

static int gp_alternates(gp *g, uint32_t rule, int nested);

/* Wrap elements [from, r->n) of rule into a new rule and leave one
 * reference to it in their place. */
static int gp_wrap(gp *g, uint32_t rule, uint32_t from)
{
    int sub = gp_gen_rule(g, rule);
    if (sub < 0) return -1;
    gp_rule *r = &g->rules[rule]; /* gp_gen_rule may have moved the array */
    uint32_t n = r->n - from;
    for (uint32_t i = 0; i < n; i++) {
        ge e = g->rules[rule].el[from + i];
        if (gp_emit(g, (uint32_t)sub, e.kind, e.arg)) return -1;
    }
    if (gp_emit(g, (uint32_t)sub, GE_END, 0)) return -1;
    g->rules[rule].n = from;
    g->n_total -= n;
    return gp_emit(g, rule, GE_RULE, (uint32_t)sub);
}

/* The item that ends at rule's last element and starts at `from` gets the
 * repetition {m, n} (n == UINT32_MAX: unbounded). */
static int gp_repeat(gp *g, uint32_t rule, uint32_t from, uint32_t m, uint32_t n, const char *at)
{
    if (n != UINT32_MAX && n < m) return gp_fail(g, at, "repetition {%u,%u}: the maximum is below the minimum", m, n);
    if (m > GP_MAX_REPEAT || (n != UINT32_MAX && n > GP_MAX_REPEAT))
        return gp_fail(g, at, "repetition count above %u", GP_MAX_REPEAT);
    if (g->rules[rule].n - from != 1 && gp_wrap(g, rule, from)) return -1;
    gp_rule *r = &g->rules[rule];
    ge x = r->el[r->n - 1];
    r->n--; /* re-emitted m times below */
    g->n_total--;
    for (uint32_t i = 0; i < m; i++)
        if (gp_emit(g, rule, x.kind, x.arg)) return -1;
    if (n == m) return 0;
    int tail;
    if (n == UINT32_MAX) { /* T ::= x T | "" */
        tail = gp_gen_rule(g, rule);
        if (tail < 0 || gp_emit(g, (uint32_t)tail, x.kind, x.arg) || gp_emit(g, (uint32_t)tail, GE_RULE, (uint32_t)tail) ||
            gp_emit(g, (uint32_t)tail, GE_END, 0) || gp_emit(g, (uint32_t)tail, GE_END, 0))
            return -1;
    } else { /* O1 ::= x | "", Ok ::= x O(k-1) | "" */
        tail = -1;
        for (uint32_t k = 0; k < n - m; k++) {
            int o = gp_gen_rule(g, rule);
            if (o < 0 || gp_emit(g, (uint32_t)o, x.kind, x.arg)) return -1;
            if (tail >= 0 && gp_emit(g, (uint32_t)o, GE_RULE, (uint32_t)tail)) return -1;
            if (gp_emit(g, (uint32_t)o, GE_END, 0) || gp_emit(g, (uint32_t)o, GE_END, 0)) return -1;
            tail = o;
        }
    }
    return gp_emit(g, rule, GE_RULE, (uint32_t)tail);
}

static int gp_uint(gp *g, uint32_t *out)
{
    const char *at = g->p;
    uint64_t v = 0;
    if (g->p >= g->end || *g->p < '0' || *g->p > '9') return gp_fail(g, at, "expected a number in the repetition");
    while (g->p < g->end && *g->p >= '0' && *g->p <= '9') {
        v = v * 10 + (uint64_t)(*g->p - '0');
        if (v > GP_MAX_REPEAT) return gp_fail(g, at, "repetition count above %u", GP_MAX_REPEAT);
        g->p++;
    }
    *out = (uint32_t)v;
    return 0;
}

static int gp_sequence(gp *g, uint32_t rule, int nested)
{
    uint32_t last = UINT32_MAX; /* where the last item's elements start */
    while (g->p < g->end && !g->failed) {
        const char *at = g->p;
        char c = *g->p;
        uint32_t start = g->rules[rule].n;
        if (c == '"') {
            g->p++;
            while (1) {
                if (g->p >= g->end) return gp_fail(g, at, "unterminated literal");
                if (*g->p == '"') break;
                if (*g->p == '\n' || *g->p == '\r') return gp_fail(g, at, "unterminated literal (a newline inside it)");
                int64_t cp = gp_char(g);
                if (cp < 0) return -1;
                unsigned char b[4];
                int nb = utf8_encode((uint32_t)cp, b);
                for (int i = 0; i < nb; i++)
                    if (gp_emit_byte(g, rule, b[i])) return -1;
            }
            g->p++;
            last = start;
            if (g->rules[rule].n == start) last = UINT32_MAX; /* "" : nothing to repeat */
        } else if (c == '[' || c == '.') {
            cp_ranges cr = {0};
            int negate = 0;
            if (c == '.') {
                g->p++;
                negate = 1; /* the complement of nothing */
            } else {
                g->p++;
                if (g->p < g->end && *g->p == '^') {
                    negate = 1;
                    g->p++;
                }
                while (1) {
                    if (g->p >= g->end) {
                        free(cr.r);
                        return gp_fail(g, at, "unterminated character class");
                    }
                    if (*g->p == ']') break;
                    int64_t lo = gp_char(g), hi;
                    if (lo < 0) {
                        free(cr.r);
                        return -1;
                    }
                    hi = lo;
                    if (g->p + 1 < g->end && g->p[0] == '-' && g->p[1] != ']') {
                        g->p++;
                        const char *hat = g->p;
                        hi = gp_char(g);
                        if (hi < 0) {
                            free(cr.r);
                            return -1;
                        }
                        if (hi < lo) {
                            free(cr.r);
                            return gp_fail(g, hat, "character range ends below its start (U+%04X-U+%04X)",
                                           (unsigned)lo, (unsigned)hi);
                        }
                    }
                    if (gp_grow(g, (void **)&cr.r, &cr.cap, 2 * cr.n + 2, sizeof *cr.r)) {
                        free(cr.r);
                        return -1;
                    }
                    cr.r[2 * cr.n] = (uint32_t)lo;
                    cr.r[2 * cr.n + 1] = (uint32_t)hi;
                    cr.n++;
                }
                g->p++;
            }
            int rc = gp_normalize(g, &cr, negate);
            if (rc == 0) rc = gp_emit_class(g, rule, &cr);
            free(cr.r);
            if (rc) return -1;
            last = start;
        } else if (c == '<') { /* a token: <TEXT> or <[TEXT]> (grammar_internal.h) */
            const char *e = g->p + 1;
            while (e < g->end && *e != '>' && *e != '\n' && *e != '\r' && *e != ' ' && *e != '"') e++;
            if (e >= g->end || *e != '>' || e == g->p + 1) return gp_fail(g, at, "'<' without a token text and '>'");
            const char *t = g->p;
            size_t nt = (size_t)(e - g->p) + 1; /* <TEXT>, brackets included */
            if (nt >= 4 && t[1] == '[' && e[-1] == ']') { /* <[TEXT]>: the token [TEXT] */
                t++, nt -= 2;
                size_t digits = 0;
                while (digits + 2 < nt && t[1 + digits] >= '0' && t[1 + digits] <= '9') digits++;
                if (digits + 2 == nt)
                    return gp_fail(g, at, "a token id (<[%.*s]>) needs a vocabulary: write the token's text", (int)digits,
                                   t + 1);
            }
            int sub = gp_gen_rule(g, rule);
            if (sub < 0 || gp_emit_byte(g, (uint32_t)sub, GE_TOKEN_OPEN)) return -1;
            for (size_t i = 0; i < nt; i++)
                if (gp_emit_byte(g, (uint32_t)sub, (unsigned char)t[i])) return -1;
            if (gp_emit_byte(g, (uint32_t)sub, GE_TOKEN_CLOSE) || gp_emit(g, (uint32_t)sub, GE_END, 0)) return -1;
            for (size_t i = 0; i < nt; i++)
                if (gp_emit_byte(g, (uint32_t)sub, (unsigned char)t[i])) return -1;
            if (gp_emit(g, (uint32_t)sub, GE_END, 0) || gp_emit(g, rule, GE_RULE, (uint32_t)sub)) return -1;
            g->p = e + 1;
            last = start;
        } else if (is_word((unsigned char)c)) {
            const char *name = g->p;
            while (g->p < g->end && is_word((unsigned char)*g->p)) g->p++;
            int ref = gp_find_rule(g, name, (size_t)(g->p - name), name);
            if (ref < 0 || gp_emit(g, rule, GE_RULE, (uint32_t)ref)) return -1;
            last = start;
        } else if (c == '(') {
            if (++g->nesting > GP_MAX_NESTING)
                return gp_fail(g, at, "parentheses nested deeper than %d", GP_MAX_NESTING);
            g->p++;
            int sub = gp_gen_rule(g, rule);
            if (sub < 0) return -1;
            gp_space(g, 1);
            if (gp_alternates(g, (uint32_t)sub, 1)) return -1;
            if (g->p >= g->end || *g->p != ')') return gp_fail(g, at, "'(' without its ')'");
            g->p++;
            g->nesting--;
            if (gp_emit(g, rule, GE_RULE, (uint32_t)sub)) return -1;
            last = start;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == UINT32_MAX) return gp_fail(g, at, "'%c' has nothing before it to repeat", c);
            g->p++;
            uint32_t m = 0, n = UINT32_MAX;
            if (c == '+') m = 1;
            if (c == '?') n = 1;
            if (c == '{') {
                gp_space(g, 0);
                if (gp_uint(g, &m)) return -1;
                gp_space(g, 0);
                n = m;
                if (g->p < g->end && *g->p == ',') {
                    g->p++;
                    gp_space(g, 0);
                    n = UINT32_MAX;
                    if (g->p < g->end && *g->p >= '0' && *g->p <= '9' && gp_uint(g, &n)) return -1;
                    gp_space(g, 0);
                }
                if (g->p >= g->end || *g->p != '}') return gp_fail(g, at, "'{' repetition without its '}'");
                g->p++;
            }
            if (gp_repeat(g, rule, last, m, n, at)) return -1;
            last = UINT32_MAX; /* x** is an error, as in llama.cpp */
        } else {
            break;
        }
        gp_space(g, nested);
    }
    return g->failed ? -1 : 0;
}

static int gp_alternates(gp *g, uint32_t rule, int nested)
{
    if (gp_sequence(g, rule, nested) || gp_emit(g, rule, GE_END, 0)) return -1;
    while (g->p < g->end && *g->p == '|') {
        g->p++;
        gp_space(g, 1);
        if (gp_sequence(g, rule, nested) || gp_emit(g, rule, GE_END, 0)) return -1;
    }
    return 0;
}

static int gp_grammar(gp *g)
{
    gp_space(g, 1);
    while (g->p < g->end) {
        const char *at = g->p;
        const char *name = g->p;
        while (g->p < g->end && is_word((unsigned char)*g->p)) g->p++;
        if (g->p == name) return gp_fail(g, at, "expected a rule name");
        size_t len = (size_t)(g->p - name);
        gp_space(g, 0);
        if (g->end - g->p < 3 || memcmp(g->p, "::=", 3) != 0)
            return gp_fail(g, g->p, "expected '::=' after the rule name '%.*s'", (int)(len > 200 ? 200 : len), name);
        g->p += 3;
        gp_space(g, 1);
        int r = gp_find_rule(g, name, len, name);
        if (r < 0) return -1;
        if (g->rules[r].defined) return gp_fail(g, at, "rule '%s' is defined twice", g->rules[r].name);
        g->rules[r].defined = 1;
        if (gp_alternates(g, (uint32_t)r, 0)) return -1;
        if (g->p < g->end && *g->p != '\n' && *g->p != '\r') {
            if (*g->p == ')') return gp_fail(g, g->p, "')' without its '('");
            return gp_fail(g, g->p, "unexpected '%c' in rule '%s'", *g->p, g->rules[r].name);
        }
        gp_space(g, 1);
    }
    return 0;
}

/* ---- checks on the whole grammar ---- */

static int gp_check_defined(gp *g)
{
    for (uint32_t i = 0; i < g->n_rules; i++) {
        if (!g->rules[i].defined) {
            g->failed = 0;
            fc_fail(g->ctx, FC_ERR_INVALID_ARG, "grammar line %zu, column %zu: rule '%s' is used but never defined",
                    g->rules[i].first_use_line, g->rules[i].first_use_col, g->rules[i].name);
            g->failed = 1;
            return -1;
        }
    }
    return 0;
}

/* nullable[r]: the rule can match the empty string (fixpoint). */
static void gp_nullable(const gp *g, unsigned char *nullable)
{
    memset(nullable, 0, g->n_rules);
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            const gp_rule *R = &g->rules[r];
            int all = 1; /* the current alternative is nullable so far */
            for (uint32_t i = 0; i < R->n; i++) {
                ge e = R->el[i];
                if (e.kind == GE_END) {
                    if (all) {
                        nullable[r] = 1;
                        changed = 1;
                        break;
                    }
                    all = 1;
                } else if (e.kind == GE_BYTES || !nullable[e.arg]) {
                    all = 0;
                }
            }
        }
    }
}

/* Depth-first over "r can start with s" edges; a grey rule met again is a
 * cycle. Iterative, so a long chain of rules cannot overflow the stack;
 * each frame keeps its place in the rule and whether that place is still
 * at the left edge of its alternative (every element before it nullable). */
static int gp_check_left_recursion(gp *g)
{
    uint32_t n = g->n_rules ? g->n_rules : 1;
    unsigned char *nullable = malloc(n), *color = calloc(n, 1), *stack_edge = malloc(n);
    uint32_t *stack_r = malloc(n * sizeof *stack_r), *stack_i = malloc(n * sizeof *stack_i);
    if (!nullable || !color || !stack_r || !stack_i || !stack_edge) {
        free(nullable), free(color), free(stack_r), free(stack_i), free(stack_edge);
        return gp_oom(g);
    }
    gp_nullable(g, nullable);
    int rc = 0;
    for (uint32_t r0 = 0; r0 < g->n_rules && rc == 0; r0++) {
        if (color[r0]) continue;
        uint32_t sp = 0;
        stack_r[sp] = r0, stack_i[sp] = 0, stack_edge[sp] = 1, sp++;
        color[r0] = 1;
        while (sp && rc == 0) {
            uint32_t r = stack_r[sp - 1], i = stack_i[sp - 1];
            int edge = stack_edge[sp - 1];
            const gp_rule *R = &g->rules[r];
            uint32_t next = UINT32_MAX; /* the next left-edge reference */
            while (i < R->n && next == UINT32_MAX) {
                ge e = R->el[i++];
                if (e.kind == GE_END) {
                    edge = 1;
                    continue;
                }
                if (edge && e.kind == GE_RULE) next = e.arg;
                edge = edge && e.kind == GE_RULE && nullable[e.arg];
            }
            stack_i[sp - 1] = i;
            stack_edge[sp - 1] = (unsigned char)edge;
            if (next == UINT32_MAX) {
                color[r] = 2;
                sp--;
            } else if (color[next] == 1) {
                /* name a rule the user wrote: the first one on the cycle, or the one whose
                 * group or repetition the cycle is (x* of an x that can be empty) */
                uint32_t who = next, k = 0;
                int own = 1;
                while (k < sp && stack_r[k] != next) k++;
                for (uint32_t j = k; j < sp; j++)
                    if (!g->rules[stack_r[j]].generated) {
                        who = stack_r[j], own = 0;
                        break;
                    }
                if (own && g->rules[who].generated) who = g->rules[who].owner;
                rc = own ? gp_fail(g, NULL, "rule '%s' repeats something that can match nothing (as in (\"a\"?)*): "
                                            "a repetition must consume text; drop the inner ? or *", g->rules[who].name)
                         : gp_fail(g, NULL, "rule '%s' is left-recursive (it can start with itself), which a grammar may not be",
                                   g->rules[who].name);
            } else if (color[next] == 0) {
                color[next] = 1;
                stack_r[sp] = next, stack_i[sp] = 0, stack_edge[sp] = 1, sp++;
            }
        }
    }
    free(nullable), free(color), free(stack_r), free(stack_i), free(stack_edge);
    return rc;
}

/* ---- assembly ---- */

void fc_grammar_free(fc_grammar *g)
{
    if (!g) return;
    for (uint32_t i = 0; i < g->n_rules; i++) free(g->rule_name ? g->rule_name[i] : NULL);
    free(g->rule_name);
    free(g->el);
    free(g->sets);
    free(g->alt);
    free(g->rule_alt0);
    free(g->rule_nalt);
    free(g);
}

static fc_grammar *gp_assemble(gp *g, uint32_t root)
{
    fc_grammar *G = calloc(1, sizeof *G);
    if (!G) return NULL;
    uint64_t n_el = 0, n_alt = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        n_el += g->rules[r].n;
        for (uint32_t i = 0; i < g->rules[r].n; i++) n_alt += g->rules[r].el[i].kind == GE_END;
    }
    G->n_rules = g->n_rules;
    G->n_el = (uint32_t)n_el;
    G->n_sets = g->n_sets;
    G->el = malloc((size_t)(n_el ? n_el : 1) * sizeof *G->el);
    G->alt = malloc((size_t)(n_alt ? n_alt : 1) * sizeof *G->alt);
    G->rule_alt0 = malloc((g->n_rules ? g->n_rules : 1) * sizeof *G->rule_alt0);
    G->rule_nalt = malloc((g->n_rules ? g->n_rules : 1) * sizeof *G->rule_nalt);
    G->rule_name = calloc(g->n_rules ? g->n_rules : 1, sizeof *G->rule_name);
    G->sets = malloc((g->n_sets ? g->n_sets : 1) * sizeof *G->sets);
    if (!G->el || !G->alt || !G->rule_alt0 || !G->rule_nalt || !G->rule_name || !G->sets) {
        fc_grammar_free(G);
        return NULL;
    }
    if (g->n_sets) memcpy(G->sets, g->sets, g->n_sets * sizeof *G->sets);
    uint32_t e = 0, a = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        gp_rule *R = &g->rules[r];
        G->rule_name[r] = R->name;
        R->name = NULL;
        G->rule_alt0[r] = a;
        int at_start = 1;
        for (uint32_t i = 0; i < R->n; i++) {
            if (at_start) G->alt[a++] = e;
            G->el[e++] = R->el[i];
            at_start = R->el[i].kind == GE_END;
        }
        G->rule_nalt[r] = a - G->rule_alt0[r];
    }
    G->root = root;
    return G;
}

static void gp_free(gp *g)
{
    for (uint32_t i = 0; i < g->n_rules; i++) {
        free(g->rules[i].name);
        free(g->rules[i].el);
    }
    free(g->rules);
    free(g->sets);
    free(g->rule_hash);
    free(g->set_hash);
    for (uint32_t i = 0; i < g->n_classes; i++) free(g->classes[i].ranges);
    free(g->classes);
}

fc_grammar *fc_grammar_parse(fc_ctx *ctx, const char *text, size_t len, const char *root)
{
    if (!text && len) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_grammar_parse: text is NULL");
    if (!root) root = "root";
    gp g = {.ctx = ctx, .s = text ? text : "", .end = (text ? text : "") + len, .p = text ? text : ""};
    fc_grammar *G = NULL;
    if (gp_grammar(&g) == 0 && gp_check_defined(&g) == 0) {
        uint32_t r;
        for (r = 0; r < g.n_rules; r++)
            if (!g.rules[r].generated && strcmp(g.rules[r].name, root) == 0) break;
        if (r == g.n_rules) {
            gp_fail(&g, NULL, "no rule named '%s' (the start rule)", root);
        } else if (gp_check_left_recursion(&g) == 0) {
            G = gp_assemble(&g, r);
            if (!G) gp_oom(&g);
        }
    }
    gp_free(&g);
    return G;
}
