/* SPDX-License-Identifier: MIT */
/* Fucina serve: tool calls (serve/tools.h).
 *
 * A call in a family's syntax (fc_chat_template_tool_syntax: Hermes'
 * <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>, Llama 3's
 * {"name": "NAME", "parameters": ARGS}) is forced by the grammar to be
 * exactly what the renderer writes, so the stream can be split as it
 * comes: the name is known when its closing quote arrives, and the
 * arguments end where their JSON nesting returns to zero (a brace inside a
 * string does not count). Text a model writes in another shape (possible
 * only without the grammar) stays content, as fc_chat_parse_tool_calls
 * leaves it. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/server.h"
#include "serve/tools.h"

#define BAD(param, ...) srv_api_error(out, 400, "invalid_request_error", param, __VA_ARGS__)

static int name_ok(const fj_val *n) {
    if (!n || n->type != FJ_STR || n->len == 0 || n->len > 64) return 0;
    for (size_t i = 0; i < n->len; i++) {
        char c = n->str[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

void srv_tools_free(srv_tools *t) {
    for (size_t i = 0; i < t->n; i++) free(t->defs[i]);
    free(t->defs);
    *t = (srv_tools){0};
}

int srv_tools_parse(const fj_val *root, srv_tools *t, srv_http_response *out) {
    const fj_val *tools = fj_get(root, "tools"), *choice = fj_get(root, "tool_choice"),
                 *par = fj_get(root, "parallel_tool_calls");
    if (tools && tools->type != FJ_NULL) {
        if (tools->type != FJ_ARR) return BAD("tools", "'tools' must be an array, not %s", fj_type_name(tools->type));
        t->defs = calloc(tools->len ? tools->len : 1, sizeof *t->defs);
        if (!t->defs) return BAD("tools", "out of memory");
        for (size_t i = 0; i < tools->len; i++) {
            const fj_val *tool = tools->items[i];
            char param[64];
            snprintf(param, sizeof param, "tools[%zu]", i);
            const fj_val *type = fj_get(tool, "type"), *f = fj_get(tool, "function");
            if (tool->type != FJ_OBJ || !type || type->type != FJ_STR || strcmp(type->str, "function"))
                return BAD(param, "'%s' must be {\"type\": \"function\", \"function\": {...}}", param);
            for (size_t k = 0; k < tool->len; k++)
                if (strcmp(tool->keys[k], "type") && strcmp(tool->keys[k], "function"))
                    return BAD(param, "'%s.%s' is not supported", param, tool->keys[k]);
            if (!f || f->type != FJ_OBJ) return BAD(param, "'%s.function' must be an object", param);
            for (size_t k = 0; k < f->len; k++) {
                const char *key = f->keys[k];
                if (strcmp(key, "name") && strcmp(key, "description") && strcmp(key, "parameters") && strcmp(key, "strict"))
                    return BAD(param, "'%s.function.%s' is not supported", param, key);
            }
            if (!name_ok(fj_get(f, "name")))
                return BAD(param, "'%s.function.name' must be 1 to 64 of a-z, A-Z, 0-9, _ and -", param);
            const fj_val *ps = fj_get(f, "parameters");
            if (ps && ps->type != FJ_OBJ && ps->type != FJ_NULL)
                return BAD(param, "'%s.function.parameters' must be a JSON Schema object", param);
            fj_buf b = {0};
            fj_value(&b, tool);
            fj_raw(&b, "", 1);
            if (b.oom) {
                fj_buf_free(&b);
                return BAD("tools", "out of memory");
            }
            t->defs[t->n++] = b.p;
        }
    }
    if (par && par->type != FJ_NULL) {
        if (par->type != FJ_BOOL) return BAD("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        t->choice.single = !par->boolean;
    }
    if (!choice || choice->type == FJ_NULL) {
        t->choice.choice = FC_CHAT_TOOL_CHOICE_AUTO;
    } else if (choice->type == FJ_STR) {
        if (!strcmp(choice->str, "none")) t->none = 1;
        else if (!strcmp(choice->str, "auto")) t->choice.choice = FC_CHAT_TOOL_CHOICE_AUTO;
        else if (!strcmp(choice->str, "required")) t->choice.choice = FC_CHAT_TOOL_CHOICE_REQUIRED;
        else return BAD("tool_choice", "'tool_choice' is '%s': it must be none, auto, required or a function",
                        choice->str);
    } else if (choice->type == FJ_OBJ) {
        const fj_val *type = fj_get(choice, "type"), *f = fj_get(choice, "function");
        const fj_val *name = f && f->type == FJ_OBJ ? fj_get(f, "name") : NULL;
        if (!type || type->type != FJ_STR || strcmp(type->str, "function") || !name_ok(name))
            return BAD("tool_choice", "'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": NAME}}");
        t->choice.choice = FC_CHAT_TOOL_CHOICE_NAMED;
        memcpy(t->name, name->str, name->len);
        t->name[name->len] = 0;
        t->choice.name = t->name;
    } else {
        return BAD("tool_choice", "'tool_choice' must be a string or an object, not %s", fj_type_name(choice->type));
    }
    if (!t->n && !t->none && t->choice.choice != FC_CHAT_TOOL_CHOICE_AUTO)
        return BAD("tool_choice", "'tool_choice' asks for a call, but there are no 'tools'");
    return 0;
}

void srv_tool_call_id(uint64_t seed, size_t index, char out[40]) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + index + 1;
    x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
    snprintf(out, 40, "call_%016" PRIx64 "%08" PRIx64, x, (uint64_t)(seed ^ index) & 0xFFFFFFFFu);
}

/* ---- the streamed reply ---- */

void srv_tool_stream_init(srv_tool_stream *s, fc_chat_template t, uint64_t id_seed) {
    *s = (srv_tool_stream){.syn = fc_chat_template_tool_syntax(t), .tmpl = t, .id_seed = id_seed};
}

void srv_tool_stream_free(srv_tool_stream *s) { fj_buf_free(&s->held); }

static void drop(srv_tool_stream *s, size_t n) {
    memmove(s->held.p, s->held.p + n, s->held.n - n);
    s->held.n -= n;
}

/* Hold back a suffix that may still become the call's opening text, and
 * newlines before it (the templates join content and calls with "\n"). */
static size_t held_back(const char *open, const char *p, size_t n) {
    size_t k = 0;
    for (size_t m = strlen(open) - 1; m > 0; m--)
        if (n >= m && !memcmp(p + n - m, open, m)) {
            k = m;
            break;
        }
    while (k < n && p[n - k - 1] == '\n') k++;
    return k;
}

static void syntax_step(srv_tool_stream *s, const srv_tool_sink *k, int final) {
    const char *k_open = s->syn->open, *k_head = s->syn->name_at, *k_args = s->syn->sep, *k_tail = s->syn->tail;
    const size_t n_open = strlen(k_open);
    for (;;) {
        char *p = s->held.p;
        size_t n = s->held.n;
        if (s->mode == 0) {
            while (s->after_call && n && p[0] == '\n' && !final) { /* the separator after a call */
                drop(s, 1);
                p = s->held.p, n = s->held.n;
            }
            if (s->syn->max_calls && s->n_calls >= (size_t)s->syn->max_calls) {
                if (n && (final || p[0] != '\n')) { /* no more calls: the rest is text */
                    k->content(k->user, p, n);
                    drop(s, n);
                    s->after_call = 0;
                }
                return;
            }
            const char *open = NULL;
            for (size_t i = 0; i + n_open <= n; i++)
                if (!memcmp(p + i, k_open, n_open)) {
                    open = p + i;
                    break;
                }
            if (!open) {
                size_t emit = final ? n : n - held_back(k_open, p, n);
                if (emit) k->content(k->user, p, emit), s->after_call = 0;
                drop(s, emit);
                return;
            }
            size_t before = (size_t)(open - p);
            size_t text = before;
            while (text && p[text - 1] == '\n') text--;
            if (text) k->content(k->user, p, text);
            drop(s, before + n_open);
            s->mode = 1, s->in_list = 0;
            continue;
        }
        if (s->mode == 1) { /* \n{"name": "NAME", "arguments": */
            const size_t nh = strlen(k_head), na = strlen(k_args);
            size_t cmp = n < nh ? n : nh;
            int bad = memcmp(p, k_head, cmp) != 0;
            const char *q = !bad && n > nh ? memchr(p + nh, '"', n - nh) : NULL;
            if (!bad && q) {
                size_t nn = (size_t)(q - p - nh), rest = n - (size_t)(q - p);
                if (nn == 0 || nn > 64) bad = 1;
                else if (memcmp(q, k_args, rest < na ? rest : na)) bad = 1;
                else if (rest >= na) {
                    memcpy(s->name, p + nh, nn);
                    s->name[nn] = 0;
                    char id[40];
                    srv_tool_call_id(s->id_seed, s->n_calls, id);
                    k->call(k->user, s->n_calls, id, s->name, "", 0);
                    drop(s, (size_t)(q - p) + na);
                    s->mode = 2, s->depth = 0, s->in_str = 0, s->esc = 0;
                    continue;
                }
            }
            if (bad || final) { /* not a call after all: it is text */
                s->mode = 0;
                if (s->in_list) continue; /* a list gone wrong ends there; what follows is read again */
                k->content(k->user, k_open, n_open);
                if (!final || s->syn->next) continue;
                k->content(k->user, p, n);
                drop(s, n);
                return;
            }
            return; /* wait for more */
        }
        if (s->mode == 2) { /* the arguments, until their nesting closes */
            size_t i = 0, end = 0;
            for (; i < n && !end; i++) {
                char c = p[i];
                if (s->in_str) {
                    if (s->esc) s->esc = 0;
                    else if (c == '\\') s->esc = 1;
                    else if (c == '"') s->in_str = 0;
                } else if (c == '"') {
                    s->in_str = 1;
                } else if (c == '{' || c == '[') {
                    s->depth++;
                } else if ((c == '}' || c == ']') && --s->depth == 0) {
                    end = 1;
                }
            }
            if (i) k->call(k->user, s->n_calls, NULL, NULL, p, i);
            drop(s, i);
            if (!end) {
                if (final) s->n_calls++, s->after_call = 1, s->mode = 0; /* cut short: a call with the arguments it got */
                return;
            }
            s->mode = 3;
            continue;
        }
        if (s->mode == 4) { /* a list syntax: the next call, or the list's end */
            const char *nx = s->syn->next, *ne = s->syn->end;
            const size_t nnx = strlen(nx), nne = strlen(ne);
            if (n >= nnx && !memcmp(p, nx, nnx)) {
                drop(s, nnx);
                s->mode = 1, s->in_list++;
                continue;
            }
            if (n >= nne && !memcmp(p, ne, nne)) {
                drop(s, nne);
                s->mode = 0, s->after_call = 1;
                continue;
            }
            if ((n < nnx && !memcmp(p, nx, n)) || (n < nne && !memcmp(p, ne, n))) {
                if (final) drop(s, n), s->mode = 0; /* cut short: the calls are whole */
                return;
            }
            s->mode = 0; /* the list ends there; what follows is read again */
            continue;
        }
        /* mode 3: }\n</tool_call> */
        const size_t nt = strlen(k_tail);
        const int tm = fc_chat_tool_tail_match(p, n, k_tail);
        if (tm < 0) { /* a shape the grammar would not allow: the rest is text */
            s->n_calls++, s->after_call = 0;
            s->mode = 0;
            if (s->syn->next) continue; /* a list: what follows is read again */
            k->content(k->user, p, n);
            drop(s, n);
            return;
        }
        if (tm == 0) {
            if (final) drop(s, n), s->n_calls++, s->after_call = 1, s->mode = 0; /* the tag cut short: the call is whole */
            return;
        }
        drop(s, nt);
        s->n_calls++;
        if (s->syn->next) {
            s->mode = 4;
        } else {
            s->after_call = 1;
            s->mode = 0;
        }
    }
}

void srv_tool_stream_push(srv_tool_stream *s, const char *text, size_t n, const srv_tool_sink *k) {
    fj_raw(&s->held, text, n);
    if (s->syn) syntax_step(s, k, 0);
}

void srv_tool_stream_end(srv_tool_stream *s, const srv_tool_sink *k) {
    if (s->syn) {
        syntax_step(s, k, 1);
        return;
    }
    /* generic: the reply is one JSON object, split now */
    fc_chat_tool_reply r;
    if (fc_chat_parse_tool_calls(NULL, s->tmpl, s->held.p ? s->held.p : "", s->held.n, &r) != FC_OK) {
        k->content(k->user, s->held.p, s->held.n);
        return;
    }
    if (r.content[0]) k->content(k->user, r.content, strlen(r.content));
    for (size_t i = 0; i < r.n_calls; i++) {
        char id[40];
        srv_tool_call_id(s->id_seed, i, id);
        k->call(k->user, i, id, r.calls[i].name, "", 0);
        k->call(k->user, i, NULL, NULL, r.calls[i].arguments, strlen(r.calls[i].arguments));
    }
    s->n_calls = r.n_calls;
    fc_chat_tool_reply_free(&r);
}
