/* SPDX-License-Identifier: MIT */
/* Fucina llm: the grammar of a reply that calls tools, and the parse of
 * such a reply (include/fucina/chat.h, fc_chat_tools_grammar,
 * fc_chat_parse_tool_calls).
 *
 * Each function's arguments come from its "parameters" schema through the
 * JSON Schema converter, whose grammar is a start rule, the schema's rules
 * and the shared JSON rules (grammar_json.c). Several tools live in one
 * grammar, so each tool's rules are renamed with a prefix of its own
 * ("t3-"), found by a lexer that skips literals, classes and comments, and
 * the shared rules are written once. The call syntax is the family's
 * (fc_chat_tool_format): what the model was trained to write, exactly as
 * the renderer writes past calls, so a reply parses the way a rendered
 * conversation reads. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "fucina/grammar.h"
#include "io/json_value.h"
#include "llm/chat_internal.h"
#include "llm/grammar_json.h"

/* s as a GBNF string literal's body (the quotes are the caller's). */
static void gbnf_literal(fj_buf *g, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '"': fj_raws(g, "\\\""); break;
        case '\\': fj_raws(g, "\\\\"); break;
        case '\n': fj_raws(g, "\\n"); break;
        case '\r': fj_raws(g, "\\r"); break;
        case '\t': fj_raws(g, "\\t"); break;
        default: fj_raw(g, s, 1);
        }
    }
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Append rules (GBNF text) with every rule it defines renamed to
 * prefix + name; references to other rules (the shared ones) stay. */
static int append_renamed(fj_buf *out, const char *text, size_t n, const char *prefix)
{
    /* the names this text defines: an identifier at a line start before ::= */
    char **defs = NULL;
    size_t n_defs = 0, cap = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && is_name_char(text[j])) j++;
        size_t k = j;
        while (k < n && (text[k] == ' ' || text[k] == '\t')) k++;
        if (j > i && k + 3 <= n && !memcmp(text + k, "::=", 3)) {
            if (n_defs == cap) {
                cap = cap ? 2 * cap : 32;
                char **d = realloc(defs, cap * sizeof *d);
                if (!d) goto oom;
                defs = d;
            }
            defs[n_defs] = strndup(text + i, j - i);
            if (!defs[n_defs++]) goto oom;
        }
        while (i < n && text[i] != '\n') i++;
        i++;
    }
    for (size_t i = 0; i < n;) {
        char c = text[i];
        if (c == '"' || c == '[') { /* a literal or a class: copied as it is, escapes included */
            const char close = c == '"' ? '"' : ']';
            size_t j = i + 1;
            while (j < n && text[j] != close) j += text[j] == '\\' ? 2 : 1;
            if (j < n) j++;
            fj_raw(out, text + i, (j < n ? j : n) - i);
            i = j;
        } else if (c == '#') {
            size_t j = i;
            while (j < n && text[j] != '\n') j++;
            i = j;
        } else if (is_name_char(c)) {
            size_t j = i;
            while (j < n && is_name_char(text[j])) j++;
            int mine = 0;
            for (size_t d = 0; d < n_defs && !mine; d++) mine = strlen(defs[d]) == j - i && !memcmp(defs[d], text + i, j - i);
            if (mine) fj_raws(out, prefix);
            fj_raw(out, text + i, j - i);
            i = j;
        } else {
            fj_raw(out, &c, 1);
            i++;
        }
    }
    for (size_t d = 0; d < n_defs; d++) free(defs[d]);
    free(defs);
    return out->oom ? -1 : 0;
oom:
    for (size_t d = 0; d < n_defs; d++) free(defs[d]);
    free(defs);
    return -1;
}

typedef struct tool_def {
    char name[65];
    char *schema; /* the parameters schema as JSON text; NULL: any object */
} tool_def;

static int read_tools(fc_ctx *ctx, const char *const *tools, size_t n, tool_def *defs)
{
    for (size_t i = 0; i < n; i++) {
        char err[200];
        fj_doc *d = tools[i] ? fj_parse(tools[i], strlen(tools[i]), NULL, err, sizeof err) : NULL;
        if (!d) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "tools[%zu]: %s", i, tools[i] ? err : "NULL");
            return -1;
        }
        const fj_val *f = fj_get(fj_root(d), "function");
        const fj_val *name = f ? fj_get(f, "name") : NULL;
        const fj_val *params = f ? fj_get(f, "parameters") : NULL;
        const char *why = NULL;
        if (!f || f->type != FJ_OBJ) why = "has no 'function' object";
        else if (!name || name->type != FJ_STR) why = "has no function name";
        else if (name->len == 0 || name->len > 64) why = "has a function name that is empty or longer than 64";
        for (size_t k = 0; !why && k < name->len; k++)
            if (!is_name_char(name->str[k])) why = "has a function name outside [a-zA-Z0-9_-]";
        if (!why && params && params->type != FJ_OBJ && params->type != FJ_NULL) why = "has parameters that are not an object";
        if (why) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "tools[%zu] %s", i, why);
            fj_free(d);
            return -1;
        }
        memcpy(defs[i].name, name->str, name->len);
        defs[i].name[name->len] = 0;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(defs[k].name, defs[i].name)) {
                fc_fail(ctx, FC_ERR_INVALID_ARG, "tools[%zu]: the function name '%s' is also tools[%zu]'s", i,
                        defs[i].name, k);
                fj_free(d);
                return -1;
            }
        if (params && params->type == FJ_OBJ) {
            fj_buf b = {0};
            fj_value(&b, params);
            fj_raw(&b, "", 1);
            if (b.oom) {
                fj_buf_free(&b);
                fj_free(d);
                fc_fail(ctx, FC_ERR_OOM, "tools: out of memory");
                return -1;
            }
            defs[i].schema = b.p;
        }
        fj_free(d);
    }
    return 0;
}

/* The rule "t<i>" matching tool i's arguments, with its rules, into g. */
static int tool_args_rules(fc_ctx *ctx, const tool_def *d, size_t i, fj_buf *g)
{
    if (!d->schema) {
        fj_printf(g, "t%zu ::= object\n", i);
        return 0;
    }
    char *text = fc_json_schema_to_gbnf(ctx, d->schema, strlen(d->schema));
    if (!text) {
        char why[400];
        snprintf(why, sizeof why, "%s", fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
        fc_fail(ctx, FC_ERR_INVALID_ARG, "tool '%s' parameters: %s", d->name, why);
        return -1;
    }
    /* "root ::= X\n" + the schema's rules + the shared rules */
    size_t n = strlen(text), nj = strlen(fc_grammar_json_rules);
    const char *body = strchr(text, '\n');
    if (strncmp(text, "root ::= ", 9) || !body || n < nj || strcmp(text + n - nj, fc_grammar_json_rules)) {
        free(text);
        fc_fail(ctx, FC_ERR_STATE, "tool '%s' parameters: unexpected converter output", d->name);
        return -1;
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "t%zu-", i);
    fj_printf(g, "t%zu ::= ", i);
    /* "X\n" and the rules: the definitions are found in all of it, so X is renamed too */
    int rc = append_renamed(g, text + 9, n - nj - 9, prefix);
    free(text);
    if (rc) fc_fail(ctx, FC_ERR_OOM, "tools: out of memory");
    return rc;
}

fc_grammar *fc_chat_tools_grammar(fc_ctx *ctx, fc_chat_template t, const char *const *tools, size_t n_tools,
                                  const fc_chat_tool_grammar_options *opt, const char **trigger)
{
    const fc_chat_tool_grammar_options o = opt ? *opt : (fc_chat_tool_grammar_options){0};
    if (trigger) *trigger = NULL;
    if (!fc_chat_template_name(t)) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_tools_grammar: template out of range");
    if (!n_tools || !tools) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_tools_grammar: no tools");
    if (o.choice == FC_CHAT_TOOL_CHOICE_NAMED && !o.name)
        return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_tools_grammar: a named choice without a name");
    tool_def *defs = calloc(n_tools, sizeof *defs);
    if (!defs) return fc_fail(ctx, FC_ERR_OOM, "fc_chat_tools_grammar: out of memory");
    fc_grammar *gr = NULL;
    fj_buf g = {0};
    if (read_tools(ctx, tools, n_tools, defs)) goto out;
    int named = -1;
    if (o.choice == FC_CHAT_TOOL_CHOICE_NAMED) {
        for (size_t i = 0; i < n_tools; i++)
            if (!strcmp(defs[i].name, o.name)) named = (int)i;
        if (named < 0) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "tool_choice names '%s', which is none of the tools", o.name);
            goto out;
        }
    }
    const fc_chat_tool_syntax *syn = fc_chat_template_tool_syntax(t);
    /* root: the calls (and, generic with auto, the text answer); a syntax's calls follow
     * each other after a newline, a generic reply lists them */
    const int single = o.single || (syn && syn->max_calls == 1);
    const int list = syn && syn->next;
    if (list) { /* the opening (its control token named as a token), the calls, the end */
        fj_raws(&g, "root ::= ");
        const char *rest = syn->open;
        if (syn->open_token) {
            fj_printf(&g, "<%s> ", syn->open_token);
            rest += strlen(syn->open_token);
        }
        fj_raws(&g, "\"");
        gbnf_literal(&g, rest);
        fj_raws(&g, "\" call");
    } else if (syn) {
        fj_raws(&g, "root ::= call");
    } else if (o.choice == FC_CHAT_TOOL_CHOICE_AUTO) {
        fj_raws(&g, "root ::= \"{\\\"response\\\": \" string \"}\" | \"{\\\"tool_calls\\\": [\" call");
    } else {
        fj_raws(&g, "root ::= \"{\\\"tool_calls\\\": [\" call");
    }
    if (!single && list) {
        fj_raws(&g, " ( \"");
        gbnf_literal(&g, syn->next);
        fj_raws(&g, "\" call )*");
    } else if (!single) {
        fj_raws(&g, syn ? " ( \"\\n\" call )*" : " ( \", \" call )*");
    }
    if (list) {
        fj_raws(&g, " \"");
        gbnf_literal(&g, syn->end);
        fj_raws(&g, "\"");
    }
    if (!syn) fj_raws(&g, " \"]}\"");
    fj_raws(&g, "\ncall ::= ");
    for (size_t i = 0; i < n_tools; i++) {
        if (named >= 0 && (int)i != named) continue;
        if (named < 0 && i) fj_raws(&g, " | ");
        fj_raws(&g, "\"");
        if (syn) {
            if (!list) gbnf_literal(&g, syn->open);
            gbnf_literal(&g, syn->name_at);
        } else {
            gbnf_literal(&g, "{\"name\": \"");
        }
        gbnf_literal(&g, defs[i].name);
        gbnf_literal(&g, syn ? syn->sep : "\", \"arguments\": ");
        fj_printf(&g, "\" t%zu \"", i);
        for (const char *q = syn ? syn->tail : "}"; *q; q++) { /* \x01: an id character */
            if (*q != '\x01') {
                const char one[2] = {*q, 0};
                gbnf_literal(&g, one);
            } else {
                fj_raws(&g, "\" [a-zA-Z0-9] \"");
            }
        }
        fj_raws(&g, "\"");
    }
    fj_raws(&g, "\n");
    for (size_t i = 0; i < n_tools; i++)
        if ((named < 0 || (int)i == named) && tool_args_rules(ctx, &defs[i], i, &g)) goto out;
    fj_raws(&g, fc_grammar_json_rules);
    if (g.oom) {
        fc_fail(ctx, FC_ERR_OOM, "fc_chat_tools_grammar: out of memory");
        goto out;
    }
    gr = fc_grammar_parse(ctx, g.p, g.n, "root");
    if (gr && syn && o.choice == FC_CHAT_TOOL_CHOICE_AUTO && trigger)
        *trigger = syn->open_token ? syn->open_token : syn->open;
out:
    for (size_t i = 0; i < n_tools; i++) free(defs[i].schema);
    free(defs);
    fj_buf_free(&g);
    return gr;
}

/* ---- parsing a reply ---- */

void fc_chat_tool_reply_free(fc_chat_tool_reply *r)
{
    if (!r) return;
    free(r->content);
    for (size_t i = 0; i < r->n_calls; i++) {
        free((char *)r->calls[i].name);
        free((char *)r->calls[i].arguments);
        free((char *)r->calls[i].id);
    }
    free(r->calls);
    *r = (fc_chat_tool_reply){0};
}

/* The arguments as the model wrote them: the text of the "arguments"
 * member's value in raw[0..n) (a call object), when it is the last member
 * (what parses, else NULL). The reply's calls then carry exactly what was generated,
 * as a stream of the same reply does. */
static char *raw_arguments(const char *raw, size_t n, const char *args_key)
{
    char key[40];
    const size_t nk = (size_t)snprintf(key, sizeof key, "\"%s\"", args_key);
    const char *k = NULL;
    /* the first: a name cannot hold it, and arguments nest after it */
    for (size_t i = 0; i + nk <= n && !k; i++)
        if (!memcmp(raw + i, key, nk)) k = raw + i;
    if (!k) return NULL;
    const char *p = k + nk, *e = raw + n;
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    if (p == e || *p++ != ':') return NULL;
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) e--;
    if (e == p || e[-1] != '}') return NULL;
    e--; /* the call object's closing brace */
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) e--;
    fj_doc *d = fj_parse(p, (size_t)(e - p), NULL, NULL, 0);
    const int ok = d && fj_root(d)->type == FJ_OBJ;
    fj_free(d);
    return ok ? strndup(p, (size_t)(e - p)) : NULL;
}

/* One call object {"name": S, ARGS_KEY: OBJECT or a string holding one}
 * (raw: its text, or NULL): 1 added, 0 not a call, -1 out of memory. */
static int add_call(fc_chat_tool_reply *r, const fj_val *v, const char *raw, size_t n_raw, const char *args_key)
{
    const fj_val *name = fj_get(v, "name"), *args = fj_get(v, args_key);
    if (v->type != FJ_OBJ || !name || name->type != FJ_STR || !name->len || !args) return 0;
    fj_doc *inner = NULL;
    if (args->type == FJ_STR) {
        inner = fj_parse(args->str, args->len, NULL, NULL, 0);
        if (!inner) return 0;
        args = fj_root(inner);
    }
    if (args->type != FJ_OBJ) {
        fj_free(inner);
        return 0;
    }
    fj_buf b = {0};
    char *verbatim = raw && !inner ? raw_arguments(raw, n_raw, args_key) : NULL;
    if (verbatim) {
        b.p = verbatim;
        b.n = strlen(verbatim);
    } else {
        fj_value(&b, args);
        fj_raw(&b, "", 1);
    }
    fj_free(inner);
    fc_chat_tool_call *c = realloc(r->calls, (r->n_calls + 1) * sizeof *c);
    char *nm = strndup(name->str, name->len);
    if (!c || !nm || b.oom) {
        if (c) r->calls = c;
        free(nm);
        fj_buf_free(&b);
        return -1;
    }
    r->calls = c;
    r->calls[r->n_calls++] = (fc_chat_tool_call){.name = nm, .arguments = b.p};
    return 1;
}

/* Past the JSON value at p (an object or array: strings, escapes and
 * nesting followed) when it closes before e; e when it does not. */
static const char *json_nesting_end(const char *p, const char *e, int *closed)
{
    int depth = 0, in_str = 0, esc = 0;
    *closed = 0;
    for (; p < e; p++) {
        const char c = *p;
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            *closed = 1;
            return p + 1;
        }
    }
    return e;
}

/* A call cut short by the end of the reply: past the syntax's open (at p),
 * the exact head the grammar writes (name_at NAME sep), then the arguments
 * as far as they go (up to where their nesting closes; a partial tail after
 * them is dropped). 1 added, 0 not such a head, -1 out of memory. */
static int truncated_call(fc_chat_tool_reply *r, const fc_chat_tool_syntax *syn, const char *p, const char *e)
{
    const char *head = syn->name_at, *args = syn->sep;
    const size_t nh = strlen(head), na = strlen(args);
    if ((size_t)(e - p) < nh || memcmp(p, head, nh)) return 0;
    const char *name = p + nh, *q = memchr(name, '"', (size_t)(e - name));
    if (!q || q == name || q - name > 64 || (size_t)(e - q) < na || memcmp(q, args, na)) return 0;
    int closed;
    const char *a = q + na, *z = json_nesting_end(a, e, &closed);
    fc_chat_tool_call *c = realloc(r->calls, (r->n_calls + 1) * sizeof *c);
    if (c) r->calls = c;
    char *nm = strndup(name, (size_t)(q - name)), *ar = strndup(a, (size_t)(z - a));
    if (!c || !nm || !ar) {
        free(nm), free(ar);
        return -1;
    }
    r->calls[r->n_calls++] = (fc_chat_tool_call){.name = nm, .arguments = ar};
    return 1;
}

/* Past the JSON object that starts after blanks at p, or NULL when there
 * is none before e. */
static const char *json_object_end(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    if (p == e || *p != '{') return NULL;
    int closed;
    const char *z = json_nesting_end(p, e, &closed);
    return closed ? z : NULL;
}

/* Append a call named name[0..nn) with arguments a[0..na): 0 or -1 (out of memory). */
static int push_call(fc_chat_tool_reply *r, const char *name, size_t nn, const char *a, size_t na)
{
    fc_chat_tool_call *c = realloc(r->calls, (r->n_calls + 1) * sizeof *c);
    if (c) r->calls = c;
    char *nm = strndup(name, nn), *ar = strndup(a, na);
    if (!c || !nm || !ar) {
        free(nm), free(ar);
        return -1;
    }
    r->calls[r->n_calls++] = (fc_chat_tool_call){.name = nm, .arguments = ar};
    return 0;
}

static int starts(const char *p, size_t n, const char *s, size_t ns) { return n >= ns && !memcmp(p, s, ns); }
/* p[0..n) is a proper beginning of s[0..ns) (all of p, fewer bytes than s). */
static int begins(const char *p, size_t n, const char *s, size_t ns) { return n < ns && !memcmp(p, s, n); }

/* A reply in a list syntax (Mistral's [TOOL_CALLS] [...]), read by the rules
 * the server's stream splitter follows (src/serve/tools.c), so a reply
 * parses as it streams: text before the opening is content (its trailing
 * newlines dropped); a list whose first call's head is not the syntax's
 * leaves its opening as text; a list that goes wrong later ends there (what
 * it read is dropped, its whole calls kept) and the scan goes on; a reply
 * cut inside a call keeps the call with the arguments it got; newlines
 * after a list's end are dropped. -1: out of memory. */
static int parse_list(const fc_chat_tool_syntax *syn, const char *text, size_t len, fc_chat_tool_reply *out,
                      fj_buf *content)
{
    const size_t no = strlen(syn->open), nh = strlen(syn->name_at), ns = strlen(syn->sep), nt = strlen(syn->tail),
                 nx = strlen(syn->next), ne = strlen(syn->end);
    size_t at = 0;
    while (at < len) {
        const char *o = NULL;
        for (size_t i = at; i + no <= len && !o; i++)
            if (!memcmp(text + i, syn->open, no)) o = text + i;
        if (!o) {
            fj_raw(content, text + at, len - at);
            break;
        }
        size_t keep = (size_t)(o - text) - at;
        while (keep && text[at + keep - 1] == '\n') keep--;
        fj_raw(content, text + at, keep);
        size_t p = (size_t)(o - text) + no;
        for (size_t k = 0;; k++) {
            /* the head: name_at NAME sep */
            const char *q = NULL;
            size_t nn = 0;
            int head = starts(text + p, len - p, syn->name_at, nh);
            if (head) {
                q = memchr(text + p + nh, '"', len - p - nh);
                nn = q ? (size_t)(q - text) - p - nh : 0;
                head = q && nn > 0 && nn <= 64 && starts(q, len - (size_t)(q - text), syn->sep, ns);
            }
            if (!head) {
                if (k == 0) fj_raw(content, syn->open, no);
                at = p;
                break;
            }
            const char *a = q + ns;
            int closed;
            const char *z = json_nesting_end(a, text + len, &closed);
            if (push_call(out, text + p + nh, nn, a, (size_t)(z - a))) return -1;
            if (!closed) return 0; /* cut short inside the arguments */
            p = (size_t)(z - text);
            const int tm = fc_chat_tool_tail_match(text + p, len - p, syn->tail);
            if (tm == 0) return 0; /* cut short in the tail */
            if (tm < 0) {
                at = p;
                break;
            }
            const char *idc = memchr(syn->tail, '\x01', nt); /* the model's id, where the tail has one */
            if (idc) {
                size_t ni = 0;
                while (idc[ni] == '\x01') ni++;
                char *id = strndup(text + p + (size_t)(idc - syn->tail), ni);
                if (!id) return -1;
                out->calls[out->n_calls - 1].id = id;
            }
            p += nt;
            if (starts(text + p, len - p, syn->next, nx)) {
                p += nx;
                continue;
            }
            if (starts(text + p, len - p, syn->end, ne)) {
                p += ne;
                while (p < len && text[p] == '\n') p++;
                at = p;
                break;
            }
            if (begins(text + p, len - p, syn->next, nx) || begins(text + p, len - p, syn->end, ne)) return 0;
            at = p;
            break;
        }
    }
    return 0;
}

fc_status fc_chat_parse_tool_calls(fc_ctx *ctx, fc_chat_template t, const char *text, size_t len,
                                   fc_chat_tool_reply *out)
{
    *out = (fc_chat_tool_reply){0};
    fj_buf content = {0};
    int oom = 0;
    if (fc_chat_template_tool_format(t) == FC_CHAT_TOOLS_GENERIC) {
        fj_doc *d = fj_parse(text, len, NULL, NULL, 0);
        const fj_val *root = d ? fj_root(d) : NULL;
        const fj_val *calls = root ? fj_get(root, "tool_calls") : NULL, *resp = root ? fj_get(root, "response") : NULL;
        if (root && root->type == FJ_OBJ && (calls || resp)) {
            if (resp && resp->type == FJ_STR) fj_raw(&content, resp->str, resp->len);
            for (size_t i = 0; calls && calls->type == FJ_ARR && i < calls->len && !oom; i++)
                oom = add_call(out, calls->items[i], NULL, 0, "arguments") < 0;
        } else {
            fj_raw(&content, text, len);
        }
        fj_free(d);
    } else if (fc_chat_template_tool_syntax(t)->next) {
        oom = parse_list(fc_chat_template_tool_syntax(t), text, len, out, &content) < 0;
    } else {
        const fc_chat_tool_syntax *syn = fc_chat_template_tool_syntax(t);
        const char *open_tag = syn->open, *close = syn->close;
        const size_t nt = strlen(open_tag), nc = strlen(close);
        size_t at = 0;
        while (at < len && !oom) {
            const char *open = NULL;
            if (!syn->max_calls || out->n_calls < (size_t)syn->max_calls)
                for (size_t i = at; i + nt <= len; i++)
                    if (!memcmp(text + i, open_tag, nt)) {
                        open = text + i;
                        break;
                    }
            /* the block ends after the object: a closing tag inside one of its strings is text;
             * an object that does not close before the next opening tag is not a call (and no
             * scan goes past that tag, so a reply of many broken blocks is parsed in linear time).
             * A syntax without a closing tag (the call is the object) has no such bound: its
             * opening text may recur inside the arguments. */
            const char *end = NULL, *bound = text + len;
            if (open) {
                for (const char *q = open + nt; nc && q + nt <= text + len; q++)
                    if (!memcmp(q, open_tag, nt)) {
                        bound = q;
                        break;
                    }
                const char *obj = json_object_end(open + syn->obj_at, bound);
                if (obj && !nc) end = obj;
                while (obj && nc && obj < text + len && (*obj == ' ' || *obj == '\t' || *obj == '\n' || *obj == '\r'))
                    obj++;
                if (obj && nc && (size_t)(text + len - obj) >= nc && !memcmp(obj, close, nc)) end = obj;
            }
            if (!open) {
                fj_raw(&content, text + at, len - at);
                break;
            }
            if (!end && bound == text + len) { /* the reply ended inside a call: a truncated call, as the stream sends it */
                const int added = truncated_call(out, syn, open + nt, text + len);
                if (added < 0) oom = 1;
                if (added > 0) {
                    size_t keep = (size_t)(open - text) - at;
                    while (keep && text[at + keep - 1] == '\n') keep--;
                    fj_raw(&content, text + at, keep);
                    break;
                }
            }
            if (!end) { /* not a call: the tag is text, and the search goes on after it */
                fj_raw(&content, text + at, (size_t)(open + nt - text) - at);
                at = (size_t)(open + nt - text);
                continue;
            }
            const char *obj_at = open + syn->obj_at;
            fj_doc *d = fj_parse(obj_at, (size_t)(end - obj_at), NULL, NULL, 0);
            int added = d ? add_call(out, fj_root(d), obj_at, (size_t)(end - obj_at), syn->args_key) : 0;
            fj_free(d);
            if (added < 0) oom = 1;
            /* text before the block is content; the templates join content and calls with "\n" */
            size_t keep = (size_t)(open - text) - at;
            if (added > 0) {
                while (keep && text[at + keep - 1] == '\n') keep--;
                fj_raw(&content, text + at, keep);
            } else {
                fj_raw(&content, text + at, (size_t)(end + nc - text) - at);
            }
            at = (size_t)(end + nc - text);
            while (added > 0 && at < len && text[at] == '\n') at++;
        }
    }
    fj_raw(&content, "", 1);
    if (oom || content.oom) {
        fj_buf_free(&content);
        fc_chat_tool_reply_free(out);
        fc_fail(ctx, FC_ERR_OOM, "fc_chat_parse_tool_calls: out of memory");
        return FC_ERR_OOM;
    }
    out->content = content.p;
    return FC_OK;
}
