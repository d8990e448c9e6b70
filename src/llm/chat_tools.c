/* SPDX-License-Identifier: MIT */
/* Fucina llm: tools in a rendered conversation (include/fucina/chat.h,
 * fc_chat_tool_format).
 *
 * Tool definitions and call arguments arrive as JSON text. Where a family's
 * template writes them with Jinja's `tojson` (transformers: Python's
 * json.dumps(x, ensure_ascii=False)), we write them the same way, so the
 * prompt is the one the model was trained on: ", " and ": " separators,
 * keys in their order, non-ASCII characters as they are, the escapes \" \\
 * \n \r \t \b \f and \u00XX (lowercase) for other control characters, and
 * numbers as Python prints them (integers exactly; floats in repr's
 * shortest round-trip form: 1.0, 0.1, 1e-05, 1e+16). Everything taken from
 * a tool or a call is content: read as text only by fc_chat_tokenize, so a
 * description cannot open a turn. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "io/json_value.h"
#include "llm/chat_internal.h"

fc_chat_tool_format fc_chat_template_tool_format(fc_chat_template t) {
    switch (t) {
    case FC_CHAT_TEMPLATE_CHATML:
    case FC_CHAT_TEMPLATE_QWEN3: return FC_CHAT_TOOLS_HERMES;
    case FC_CHAT_TEMPLATE_LLAMA3: return FC_CHAT_TOOLS_LLAMA3_JSON;
    case FC_CHAT_TEMPLATE_MISTRAL_V3:
    case FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN: return FC_CHAT_TOOLS_MISTRAL;
    case FC_CHAT_TEMPLATE_MISTRAL_V1: /* no tools in v0.1 / v0.2 */
    case FC_CHAT_TEMPLATE_MISTRAL_V7:
    case FC_CHAT_TEMPLATE_GEMMA:
    case FC_CHAT_TEMPLATE_PHI3:
    case FC_CHAT_TEMPLATE_LLAMA2:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP: return FC_CHAT_TOOLS_GENERIC;
    }
    return FC_CHAT_TOOLS_GENERIC;
}

/* The renderers write past calls in exactly these shapes (chat_tools.c,
 * chat_tools_llama3.c), the grammar forces them, and the readers split a
 * reply by them. */
static const fc_chat_tool_syntax k_hermes = {
    .open = "<tool_call>",
    .name_at = "\n{\"name\": \"",
    .sep = "\", \"arguments\": ",
    .tail = "}\n</tool_call>",
    .close = "</tool_call>",
    .args_key = "arguments",
    .obj_at = sizeof "<tool_call>" - 1,
};
/* the call is the reply's JSON object itself; the template renders one call a message */
static const fc_chat_tool_syntax k_llama3 = {
    .open = "{\"name\": \"",
    .name_at = "",
    .sep = "\", \"parameters\": ",
    .tail = "}",
    .close = "",
    .args_key = "parameters",
    .max_calls = 1,
};

/* the calls as one list after the [TOOL_CALLS] control token, each with the
 * 9-character id the template writes after its arguments (the model writes
 * one too, as llama.cpp's grammar asks: it is what the model was trained on) */
static const fc_chat_tool_syntax k_mistral_v3 = {
    .open = "[TOOL_CALLS] [",
    .name_at = "{\"name\": \"",
    .sep = "\", \"arguments\": ",
    .tail = ", \"id\": \"\x01\x01\x01\x01\x01\x01\x01\x01\x01\"}",
    .close = "",
    .args_key = "arguments",
    .obj_at = sizeof "[TOOL_CALLS] [" - 1,
    .next = ", ",
    .end = "]",
    .open_token = "[TOOL_CALLS]",
};
static const fc_chat_tool_syntax k_mistral_tekken = {
    .open = "[TOOL_CALLS][",
    .name_at = "{\"name\": \"",
    .sep = "\", \"arguments\": ",
    .tail = ", \"id\": \"\x01\x01\x01\x01\x01\x01\x01\x01\x01\"}",
    .close = "",
    .args_key = "arguments",
    .obj_at = sizeof "[TOOL_CALLS][" - 1,
    .next = ", ",
    .end = "]",
    .open_token = "[TOOL_CALLS]",
};

int fc_chat_tool_tail_match(const char *p, size_t n, const char *tail) {
    size_t i = 0;
    for (; tail[i] && i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        const int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (tail[i] == '\x01' ? !alnum : p[i] != tail[i]) return -1;
    }
    return tail[i] ? 0 : 1;
}

const fc_chat_tool_syntax *fc_chat_template_tool_syntax(fc_chat_template t) {
    if (!fc_chat_template_name(t)) return NULL;
    switch (fc_chat_template_tool_format(t)) {
    case FC_CHAT_TOOLS_HERMES: return &k_hermes;
    case FC_CHAT_TOOLS_LLAMA3_JSON: return &k_llama3;
    case FC_CHAT_TOOLS_MISTRAL: return t == FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN ? &k_mistral_tekken : &k_mistral_v3;
    case FC_CHAT_TOOLS_GENERIC: return NULL;
    }
    return NULL;
}

/* ---- Python's json.dumps(ensure_ascii=False) ---- */

/* repr(float): the shortest digits that read back as v; exponent form when
 * the decimal exponent is below -4 or at least 16, else positional with at
 * least one digit after the point. */
static void py_float(double v, char *out, size_t cap) {
    if (!isfinite(v)) { /* Python writes NaN / Infinity; a strict JSON reader never gives them */
        snprintf(out, cap, "%s", isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
        return;
    }
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    /* e: [-]d[.ddd]e[+-]XX */
    const char *p = e;
    int neg = *p == '-';
    if (neg) p++;
    char digits[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp < -4 || exp >= 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        snprintf(out + o, cap - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return;
    }
    if (exp < 0) {
        out[o++] = '0', out[o++] = '.';
        for (int k = -1; k > exp; k--) out[o++] = '0';
        memcpy(out + o, digits, nd);
        o += nd;
    } else {
        for (int k = 0; k <= exp; k++) out[o++] = (size_t)k < nd ? digits[k] : '0';
        out[o++] = '.';
        if ((size_t)exp + 1 < nd) {
            memcpy(out + o, digits + exp + 1, nd - (size_t)exp - 1);
            o += nd - (size_t)exp - 1;
        } else {
            out[o++] = '0';
        }
    }
    out[o] = 0;
}

static int put_c(fc_chat_buf *b, const char *s, size_t n) { return fc_chat_buf_put_content(b, s, n); }
static int put_cs(fc_chat_buf *b, const char *s) { return put_c(b, s, strlen(s)); }

static int py_string(fc_chat_buf *b, const char *s, size_t n) {
    if (put_c(b, "\"", 1)) return -1;
    size_t run = 0; /* bytes copied as they are, flushed before an escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (!esc) {
            run++;
            continue;
        }
        if (put_c(b, s + i - run, run) || put_cs(b, esc)) return -1;
        run = 0;
    }
    if (put_c(b, s + n - run, run)) return -1;
    return put_c(b, "\"", 1);
}

static int py_value(fc_chat_buf *b, const fj_val *v);

/* indent > 0: json.dumps(indent=indent), whose separators are "," and ": "
 * with each member on its own line (empty containers stay "[]" / "{}");
 * depth is the nesting level of v. */
static int py_newline(fc_chat_buf *b, int indent, int depth) {
    if (put_cs(b, "\n")) return -1;
    for (int k = 0; k < indent * depth; k++)
        if (put_cs(b, " ")) return -1;
    return 0;
}

static int py_value_ind(fc_chat_buf *b, const fj_val *v, int indent, int depth) {
    if (indent <= 0 || (v->type != FJ_ARR && v->type != FJ_OBJ) || v->len == 0) return py_value(b, v);
    const int obj = v->type == FJ_OBJ;
    if (put_cs(b, obj ? "{" : "[")) return -1;
    for (size_t i = 0; i < v->len; i++) {
        if ((i && put_cs(b, ",")) || py_newline(b, indent, depth + 1)) return -1;
        if (obj && (py_string(b, v->keys[i], v->key_lens[i]) || put_cs(b, ": "))) return -1;
        if (py_value_ind(b, v->items[i], indent, depth + 1)) return -1;
    }
    if (py_newline(b, indent, depth)) return -1;
    return put_cs(b, obj ? "}" : "]");
}

static int py_value(fc_chat_buf *b, const fj_val *v) {
    char num[64];
    switch (v->type) {
    case FJ_NULL: return put_cs(b, "null");
    case FJ_BOOL: return put_cs(b, v->boolean ? "true" : "false");
    case FJ_NUM:
        if (v->is_int) snprintf(num, sizeof num, "%lld", (long long)v->i);
        else py_float(v->num, num, sizeof num);
        return put_cs(b, num);
    case FJ_STR: return py_string(b, v->str, v->len);
    case FJ_ARR:
        if (put_cs(b, "[")) return -1;
        for (size_t i = 0; i < v->len; i++)
            if ((i && put_cs(b, ", ")) || py_value(b, v->items[i])) return -1;
        return put_cs(b, "]");
    case FJ_OBJ:
        if (put_cs(b, "{")) return -1;
        for (size_t i = 0; i < v->len; i++)
            if ((i && put_cs(b, ", ")) || py_string(b, v->keys[i], v->key_lens[i]) || put_cs(b, ": ") ||
                py_value(b, v->items[i]))
                return -1;
        return put_cs(b, "}");
    }
    return -1;
}

/* ---- Python's str.strip(), Jinja's trim ---- */

/* The length of the Python whitespace character (str.isspace) at p[0..n),
 * or 0 when p does not start with one. */
static size_t py_space_at(const unsigned char *p, size_t n)
{
    if ((p[0] >= 0x09 && p[0] <= 0x0d) || (p[0] >= 0x1c && p[0] <= 0x20)) return 1;
    if (n >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2; /* U+0085 U+00A0 */
    if (n < 3) return 0;
    const unsigned cp = ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
    if ((p[0] & 0xf0) != 0xe0 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80) return 0;
    const int space = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
                      cp == 0x205f || cp == 0x3000;
    return space ? 3 : 0;
}

/* The length of the Python whitespace character ending at p[n), or 0. */
static size_t py_space_before(const unsigned char *p, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (py_space_at(p + n - k, k) == k) return k;
    return 0;
}

void fc_chat_py_strip(const char *s, const char **p, size_t *n)
{
    const char *a = s;
    size_t len = strlen(s);
    for (size_t k; len && (k = py_space_at((const unsigned char *)a, len));) a += k, len -= k;
    for (size_t k; len && (k = py_space_before((const unsigned char *)a, len));) len -= k;
    *p = a, *n = len;
}

/* ---- checks ---- */

fc_status fc_chat_tools_check(fc_ctx *ctx, const char *who, const fc_chat_message *msgs, size_t n,
                              const fc_chat_render_options *o) {
    if (o && o->n_tools && !o->tools) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: n_tools %zu with NULL tools", who, o->n_tools);
        return FC_ERR_INVALID_ARG;
    }
    for (size_t i = 0; o && i < o->n_tools; i++) {
        char err[200];
        fj_doc *d = o->tools[i] ? fj_parse(o->tools[i], strlen(o->tools[i]), NULL, err, sizeof err) : NULL;
        const int ok = d && fj_root(d)->type == FJ_OBJ;
        if (!ok) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: tool %zu is %s", who, i,
                    !o->tools[i] ? "NULL" : d ? "not a JSON object" : err);
            fj_free(d);
            return FC_ERR_INVALID_ARG;
        }
        fj_free(d);
    }
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].n_tool_calls && !msgs[i].tool_calls) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: message %zu has n_tool_calls %zu with NULL tool_calls", who, i,
                    msgs[i].n_tool_calls);
            return FC_ERR_INVALID_ARG;
        }
        if (msgs[i].n_tool_calls && msgs[i].role != FC_CHAT_ASSISTANT) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: message %zu has tool calls but is not the assistant's", who, i);
            return FC_ERR_INVALID_ARG;
        }
        for (size_t k = 0; k < msgs[i].n_tool_calls; k++) {
            const fc_chat_tool_call *c = &msgs[i].tool_calls[k];
            char err[200] = "";
            fj_doc *d = c->arguments ? fj_parse(c->arguments, strlen(c->arguments), NULL, err, sizeof err) : NULL;
            const int ok = c->name && c->name[0] && d && fj_root(d)->type == FJ_OBJ;
            fj_free(d);
            if (!ok) {
                fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: message %zu, tool call %zu: %s", who, i, k,
                        !c->name || !c->name[0] ? "no function name"
                        : !c->arguments        ? "NULL arguments"
                        : err[0]               ? err
                                               : "the arguments are not a JSON object");
                return FC_ERR_INVALID_ARG;
            }
        }
    }
    return FC_OK;
}

/* ---- Hermes (Qwen) ---- */

int fc_chat_put_tool_json_indent(fc_chat_buf *b, const char *json, int indent) {
    fj_doc *d = fj_parse(json, strlen(json), NULL, NULL, 0);
    if (!d) return -1; /* checked before: only out of memory gets here */
    int rc = py_value_ind(b, fj_root(d), indent, 0);
    fj_free(d);
    return rc;
}

int fc_chat_put_tool_json(fc_chat_buf *b, const char *json) { return fc_chat_put_tool_json_indent(b, json, 0); }

int fc_chat_put_py_string(fc_chat_buf *b, const char *s, size_t n) { return py_string(b, s, n); }

int fc_chat_put_py_value(fc_chat_buf *b, const fj_val *v) { return py_value(b, v); }

int fc_chat_put_hermes_tools(fc_chat_buf *b, const char *system, const fc_chat_render_options *o) {
    static const char head[] = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    static const char tail[] = "\n</tools>\n\nFor each function call, return a json object with function name and "
                               "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
                               "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
    if (fc_chat_buf_puts(b, "<|im_start|>system\n")) return -1;
    if (system && (put_cs(b, system) || fc_chat_buf_puts(b, "\n\n"))) return -1;
    if (fc_chat_buf_puts(b, head)) return -1;
    for (size_t i = 0; i < o->n_tools; i++)
        if (fc_chat_buf_puts(b, "\n") || fc_chat_put_tool_json(b, o->tools[i])) return -1;
    return fc_chat_buf_puts(b, tail);
}

int fc_chat_put_hermes_calls(fc_chat_buf *b, const fc_chat_message *m, int content_nonempty) {
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const fc_chat_tool_call *c = &m->tool_calls[k];
        if ((k == 0 && content_nonempty) || k > 0)
            if (fc_chat_buf_puts(b, "\n")) return -1;
        /* the arguments are a string in OpenAI's messages: the template writes them as they are */
        if (fc_chat_buf_puts(b, "<tool_call>\n{\"name\": \"") || put_cs(b, c->name) ||
            fc_chat_buf_puts(b, "\", \"arguments\": ") || put_cs(b, c->arguments) ||
            fc_chat_buf_puts(b, "}\n</tool_call>"))
            return -1;
    }
    return 0;
}

/* ---- the generic format ---- */

const char fc_chat_generic_tools_intro[] =
    "You can call the tools listed below. To call one or more of them, reply with only a JSON object "
    "{\"tool_calls\": [{\"name\": <tool name>, \"arguments\": <arguments object>}]}; to answer without a tool, "
    "reply with only {\"response\": <your answer as a string>}.\n\nTools:";

/* A message's content in the generic format: {"response": C, "tool_calls": [...]} */
static char *generic_reply(const fc_chat_message *m) {
    fc_chat_buf b = {0};
    int bad = fc_chat_buf_puts(&b, "{");
    if (m->content[0]) bad = bad || fc_chat_buf_puts(&b, "\"response\": ") || py_string(&b, m->content, strlen(m->content)) ||
                            fc_chat_buf_puts(&b, ", ");
    bad = bad || fc_chat_buf_puts(&b, "\"tool_calls\": [");
    for (size_t k = 0; k < m->n_tool_calls && !bad; k++) {
        const fc_chat_tool_call *c = &m->tool_calls[k];
        bad = (k && fc_chat_buf_puts(&b, ", ")) || fc_chat_buf_puts(&b, "{\"name\": ") ||
              py_string(&b, c->name, strlen(c->name)) || fc_chat_buf_puts(&b, ", \"arguments\": ") ||
              fc_chat_put_tool_json(&b, c->arguments) || fc_chat_buf_puts(&b, "}");
    }
    bad = bad || fc_chat_buf_puts(&b, "]}");
    free(b.spans);
    if (bad) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

fc_status fc_chat_render_generic(fc_ctx *ctx, const char *who, fc_chat_template t, const fc_chat_message *msgs,
                                 size_t n, const fc_chat_render_options *o, fc_chat_buf *b) {
    const int has_system = n && msgs[0].role == FC_CHAT_SYSTEM;
    const size_t n2 = n + !has_system;
    fc_chat_message *m2 = calloc(n2 ? n2 : 1, sizeof *m2);
    char **owned = calloc(n2 ? n2 : 1, sizeof *owned);
    fc_status st = FC_ERR_OOM;
    if (!m2 || !owned) goto out;
    /* the system message: its own text, then the tools */
    fc_chat_buf sys = {0};
    int bad = 0;
    if (has_system && msgs[0].content[0])
        bad = fc_chat_buf_puts(&sys, msgs[0].content) || fc_chat_buf_puts(&sys, "\n\n");
    bad = bad || fc_chat_buf_puts(&sys, fc_chat_generic_tools_intro);
    for (size_t i = 0; o && i < o->n_tools && !bad; i++)
        bad = fc_chat_buf_puts(&sys, "\n") || fc_chat_put_tool_json(&sys, o->tools[i]);
    free(sys.spans);
    if (bad) {
        free(sys.p);
        goto out;
    }
    owned[0] = sys.p;
    m2[0] = (fc_chat_message){.role = FC_CHAT_SYSTEM, .content = sys.p};
    for (size_t i = has_system, j = 1; i < n; i++, j++) {
        m2[j] = (fc_chat_message){.role = msgs[i].role, .content = msgs[i].content};
        if (msgs[i].n_tool_calls) {
            if (!(owned[j] = generic_reply(&msgs[i]))) goto out;
            m2[j].content = owned[j];
        }
    }
    const fc_chat_render_options plain = {.flags = o ? o->flags : 0};
    st = fc_chat_render_buf(ctx, who, t, m2, n2, &plain, b);
out:
    if (st == FC_ERR_OOM) fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", who);
    for (size_t i = 0; owned && i < n2; i++) free(owned[i]);
    free(owned);
    free(m2);
    return st;
}
