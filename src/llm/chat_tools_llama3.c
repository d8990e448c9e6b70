/* SPDX-License-Identifier: MIT */
/* Fucina llm: a llama3 conversation with tools, as Llama 3.1 Instruct's
 * Jinja template renders it (include/fucina/chat.h, FC_CHAT_TOOLS_LLAMA3_JSON;
 * Llama 3.2 and 3.3 write the same for custom tools). The plain llama3
 * rendering (chat_render.c) is llama.cpp's native one, without the dated
 * system header; the template's tool path writes that header, so a
 * conversation with tools follows the template step by step, and
 * tests/runtime/test_llm_chat.c renders both with jinja2 to compare bytes.
 *
 * The template's quirks, kept: the date is its own default ("26 Jul 2024":
 * transformers and llama.cpp pass today's date instead; a fixed one keeps a
 * prompt, and its cache, the same from day to day); "Do not use variables."
 * follows the sentence before it without a space; the tools go into the
 * first message after the system one, whatever its role; a tool result is
 * written through tojson, so a string arrives quoted; `trim` is Python's
 * str.strip(), which also strips Unicode spaces. */
#include <string.h>

#include "exec/ctx.h"
#include "llm/chat_internal.h"

typedef struct view {
    const char *p;
    size_t n;
} view;

static view py_strip(const char *s) {
    view v;
    fc_chat_py_strip(s, &v.p, &v.n);
    return v;
}

#define PUT(s)   ok = ok && !fc_chat_buf_puts(b, (s))
#define PUTC(s)  ok = ok && !fc_chat_buf_put_content(b, (s), strlen(s))
#define PUTCV(v) ok = ok && !fc_chat_buf_put_content(b, (v).p, (v).n)

static const char k_instructions[] =
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that "
    "best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
    "argument name and its value}.Do not use variables.\n\n";

fc_status fc_chat_render_llama3_tools(fc_ctx *ctx, const char *who, const fc_chat_message *msgs, size_t n,
                                      const fc_chat_render_options *o, fc_chat_buf *b)
{
    const size_t n_tools = o ? o->n_tools : 0;
    for (size_t i = 0; i < n; i++)
        if (msgs[i].n_tool_calls > 1) {
            fc_fail(ctx, FC_ERR_INVALID_ARG,
                    "%s: message %zu makes %zu tool calls; Llama 3's template renders one call a message", who, i,
                    msgs[i].n_tool_calls);
            return FC_ERR_INVALID_ARG;
        }
    size_t i = 0;
    view sys = {"", 0};
    if (n && msgs[0].role == FC_CHAT_SYSTEM) sys = py_strip(msgs[i++].content);
    if (n_tools && i == n) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "%s: tools need a message after the system one (Llama 3's template puts them in the first)", who);
        return FC_ERR_INVALID_ARG;
    }
    int ok = !fc_chat_buf_put(b, "", 0);
    PUT("<|start_header_id|>system<|end_header_id|>\n\n");
    if (n_tools) PUT("Environment: ipython\n");
    PUT("Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    PUTCV(sys);
    PUT("<|eot_id|>");
    if (n_tools) {
        const view first = py_strip(msgs[i++].content);
        PUT("<|start_header_id|>user<|end_header_id|>\n\n");
        PUT(k_instructions);
        for (size_t k = 0; k < n_tools; k++) {
            ok = ok && !fc_chat_put_tool_json_indent(b, o->tools[k], 4);
            PUT("\n\n");
        }
        PUTCV(first);
        PUT("<|eot_id|>");
    }
    for (; i < n && ok; i++) {
        const fc_chat_message *m = &msgs[i];
        if (m->n_tool_calls) { /* the content beside a call is not written */
            const fc_chat_tool_call *c = &m->tool_calls[0];
            PUT("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            PUTC(c->name);
            PUT("\", \"parameters\": ");
            ok = ok && !fc_chat_put_tool_json(b, c->arguments);
            PUT("}<|eot_id|>");
        } else if (m->role == FC_CHAT_TOOL) {
            PUT("<|start_header_id|>ipython<|end_header_id|>\n\n");
            ok = ok && !fc_chat_put_py_string(b, m->content, strlen(m->content));
            PUT("<|eot_id|>");
        } else {
            PUT("<|start_header_id|>");
            PUT(fc_chat_role_name(m->role));
            PUT("<|end_header_id|>\n\n");
            PUTCV(py_strip(m->content));
            PUT("<|eot_id|>");
        }
    }
    if (o && (o->flags & FC_CHAT_ADD_GENERATION_PROMPT)) PUT("<|start_header_id|>assistant<|end_header_id|>\n\n");
    if (!ok) {
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", who);
        return FC_ERR_OOM;
    }
    return FC_OK;
}
