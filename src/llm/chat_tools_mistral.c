/* SPDX-License-Identifier: MIT */
/* Fucina llm: a Mistral conversation with tools, as Mistral-7B-Instruct-
 * v0.3's (mistral-v3) and Mistral-Nemo-Instruct-2407's (mistral-v3-tekken)
 * templates render it (include/fucina/chat.h, FC_CHAT_TOOLS_MISTRAL; the
 * texts are src/llm/chat_texts.c's, and tests/runtime/test_llm_chat.c
 * renders them with jinja2 to compare bytes). The two differ only in
 * spacing: v3 puts a space after [INST], [AVAILABLE_TOOLS], [TOOL_CALLS] and
 * [TOOL_RESULTS] and before a trimmed reply; tekken none.
 *
 * The templates' quirks, kept: the system message is written only into the
 * last message, when that is a user turn ("\n\n" before the user's text);
 * the tools go before every user turn whose text equals the last one's
 * (Jinja compares the message dicts); a tool definition's string members
 * are written raw, unescaped, and its other members through tojson; a
 * result's content is written raw. What the templates refuse is refused:
 * roles that do not alternate user / assistant after the system message
 * (tool results and calls aside), a system message anywhere but first.
 *
 * Call ids: the templates require 9 characters ("Tool call IDs should be
 * alphanumeric strings with length 9!"). OpenAI clients send others
 * ("call_..."), so an id of another length becomes 9 characters of
 * [a-zA-Z0-9] hashed from it (FNV-1a): a call and the result that names
 * its id map alike, so they still pair. fucina serve gives Mistral calls
 * 9-character ids, which pass unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "exec/ctx.h"
#include "io/json_value.h"
#include "llm/chat_internal.h"

#define PUT(s)      ok = ok && !fc_chat_buf_puts(b, (s))
#define PUTC(s)     ok = ok && !fc_chat_buf_put_content(b, (s), strlen(s))
#define PUTCN(s, n) ok = ok && !fc_chat_buf_put_content(b, (s), (n))

void fc_chat_mistral_call_id(const char *id, char out[10])
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const size_t n = id ? strlen(id) : 0;
    if (n == 9) {
        memcpy(out, id, 10);
        return;
    }
    uint64_t h = fc_fnv1a(FC_FNV1A_INIT, id ? id : "", n);
    for (int k = 0; k < 9; k++) {
        out[k] = alnum[h % 62];
        h = h / 62 ^ (h * 0x9E3779B97F4A7C15ull);
    }
    out[9] = 0;
}

/* One tool, as the template writes it: {"type": "function", "function": {MEMBERS}}. */
static int put_tool(fc_chat_buf *b, const fj_val *f)
{
    int ok = !fc_chat_buf_puts(b, "{\"type\": \"function\", \"function\": {");
    int first = 1;
    for (size_t i = 0; i < f->len && ok; i++) {
        if (f->key_lens[i] == 6 && !memcmp(f->keys[i], "return", 6)) continue;
        if (!first) PUT(", ");
        first = 0;
        PUT("\"");
        PUTCN(f->keys[i], f->key_lens[i]);
        const fj_val *v = f->items[i];
        if (v->type == FJ_STR) {
            PUT("\": \"");
            PUTCN(v->str, v->len);
            PUT("\"");
        } else {
            PUT("\": ");
            ok = ok && !fc_chat_put_py_value(b, v);
        }
    }
    PUT("}}");
    return ok;
}

static fc_status fail(fc_ctx *ctx, const char *who, size_t i, const char *why)
{
    fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: message %zu %s (Mistral's template refuses it)", who, i, why);
    return FC_ERR_INVALID_ARG;
}

fc_status fc_chat_render_mistral_tools(fc_ctx *ctx, const char *who, fc_chat_template t, const fc_chat_message *msgs,
                                       size_t n, const fc_chat_render_options *o, fc_chat_buf *b)
{
    const int sp = t != FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN; /* v3's spaces */
    const size_t n_tools = o ? o->n_tools : 0;
    const size_t first = n && msgs[0].role == FC_CHAT_SYSTEM;
    /* the template's checks: alternating user / assistant, results and calls aside */
    size_t turn = 0, last_user = n;
    for (size_t i = first; i < n; i++) {
        const fc_chat_message *m = &msgs[i];
        if (m->role == FC_CHAT_USER) last_user = i;
        if (m->role == FC_CHAT_TOOL || m->n_tool_calls) continue;
        if ((m->role == FC_CHAT_USER) != (turn % 2 == 0))
            return fail(ctx, who, i, "breaks the user / assistant alternation after the system message");
        if (m->role == FC_CHAT_SYSTEM) return fail(ctx, who, i, "is a system message after the first message");
        turn++;
    }
    for (size_t i = first; i < n; i++)
        if (msgs[i].role == FC_CHAT_TOOL && !msgs[i].tool_call_id)
            return fail(ctx, who, i, "is a tool result without the id of its call");
    fj_doc **defs = NULL;
    if (n_tools) {
        defs = calloc(n_tools, sizeof *defs);
        if (!defs) goto oom;
        for (size_t k = 0; k < n_tools; k++) {
            defs[k] = fj_parse(o->tools[k], strlen(o->tools[k]), NULL, NULL, 0);
            const fj_val *f = defs[k] ? fj_get(fj_root(defs[k]), "function") : NULL;
            if (!defs[k]) goto oom; /* checked before: only out of memory gets here */
            if (!f || f->type != FJ_OBJ) {
                for (size_t j = 0; j <= k; j++) fj_free(defs[j]);
                free(defs);
                fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: tool %zu has no 'function' object", who, k);
                return FC_ERR_INVALID_ARG;
            }
        }
    }
    int ok = !fc_chat_buf_put(b, "", 0);
    for (size_t i = first; i < n && ok; i++) {
        const fc_chat_message *m = &msgs[i];
        if (m->role == FC_CHAT_USER) {
            if (n_tools && last_user < n && !strcmp(m->content, msgs[last_user].content)) {
                PUT(sp ? "[AVAILABLE_TOOLS] [" : "[AVAILABLE_TOOLS][");
                for (size_t k = 0; k < n_tools && ok; k++) {
                    if (k) PUT(", ");
                    ok = ok && put_tool(b, fj_get(fj_root(defs[k]), "function"));
                }
                PUT("][/AVAILABLE_TOOLS]");
            }
            PUT(sp ? "[INST] " : "[INST]");
            if (i + 1 == n && first) {
                PUTC(msgs[0].content);
                PUT("\n\n");
            }
            PUTC(m->content);
            PUT("[/INST]");
        } else if (m->n_tool_calls) { /* the content beside calls is not written */
            PUT(sp ? "[TOOL_CALLS] [" : "[TOOL_CALLS][");
            for (size_t k = 0; k < m->n_tool_calls && ok; k++) {
                const fc_chat_tool_call *c = &m->tool_calls[k];
                char id[10];
                fc_chat_mistral_call_id(c->id, id);
                if (k) PUT(", ");
                PUT("{\"name\": ");
                ok = ok && !fc_chat_put_py_string(b, c->name, strlen(c->name));
                PUT(", \"arguments\": ");
                ok = ok && !fc_chat_put_tool_json(b, c->arguments);
                PUT(", \"id\": \"");
                PUTC(id);
                PUT("\"}");
            }
            PUT("]</s>");
        } else if (m->role == FC_CHAT_ASSISTANT) {
            if (sp) {
                const char *p;
                size_t len;
                fc_chat_py_strip(m->content, &p, &len);
                PUT(" ");
                PUTCN(p, len);
            } else {
                PUTC(m->content);
            }
            PUT("</s>");
        } else { /* a tool result (system ones were refused above) */
            char id[10];
            fc_chat_mistral_call_id(m->tool_call_id, id);
            PUT(sp ? "[TOOL_RESULTS] {\"content\": " : "[TOOL_RESULTS]{\"content\": ");
            PUTC(m->content);
            PUT(", \"call_id\": \"");
            PUTC(id);
            PUT("\"}[/TOOL_RESULTS]");
        }
    }
    for (size_t k = 0; k < n_tools; k++) fj_free(defs[k]);
    free(defs);
    if (!ok) goto oom_nodefs;
    return FC_OK;
oom:
    for (size_t k = 0; defs && k < n_tools; k++) fj_free(defs[k]);
    free(defs);
oom_nodefs:
    fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", who);
    return FC_ERR_OOM;
}
