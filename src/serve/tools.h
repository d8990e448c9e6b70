/* SPDX-License-Identifier: MIT */
/* Fucina serve: tool calls in chat completions — the request's `tools`,
 * `tool_choice` and `parallel_tool_calls`, and the reply split into text
 * and calls, streamed as OpenAI streams them (tools.c). */
#ifndef FC_SERVE_TOOLS_H
#define FC_SERVE_TOOLS_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/chat.h"
#include "io/json_value.h"
#include "serve/http.h"

typedef struct srv_server srv_server;

typedef struct srv_tools {
    char **defs; /* each tool as JSON text (rendered into the prompt) */
    size_t n;
    int none;    /* tool_choice "none": listed in the prompt, never called */
    fc_chat_tool_grammar_options choice;
    char name[65]; /* a named choice's function */
} srv_tools;

/* Read tools / tool_choice / parallel_tool_calls of a chat request into t
 * (zeroed on entry; srv_tools_free after). 0, or -1 with a 400 in out
 * naming the field. */
int srv_tools_parse(const fj_val *root, srv_tools *t, srv_http_response *out);
void srv_tools_free(srv_tools *t);

/* A streamed reply's text split into content and tool-call deltas. A reply
 * in a family's call syntax (Hermes, Llama 3 JSON) is split as it comes:
 * text until the call's opening text, then each call's id, type and name
 * once and its arguments as they grow; a generic reply (one JSON object) is
 * split when it ends. */
typedef struct srv_tool_stream {
    const fc_chat_tool_syntax *syn; /* NULL: the generic format */
    fc_chat_template tmpl;
    uint64_t id_seed;
    fj_buf held;  /* text not yet classified */
    int mode;     /* 0 text, 1 inside a call's head, 2 its arguments, 3 its tail, 4 a list's next or end */
    size_t in_list; /* a list syntax: the calls of the current list before this one */
    int depth, in_str, esc; /* the arguments' JSON nesting */
    size_t n_calls;
    int after_call; /* nothing but the call has come since the last one ended */
    char name[65];
    size_t n_name;
} srv_tool_stream;

/* Deltas go to emit_content(user, text, n) and emit_call(user, index, id,
 * name, args, n_args): id and name are non-NULL the first time a call is
 * named, NULL afterwards, when args carries more of its arguments. */
typedef struct srv_tool_sink {
    void *user;
    void (*content)(void *user, const char *text, size_t n);
    void (*call)(void *user, size_t index, const char *id, const char *name, const char *args, size_t n_args);
} srv_tool_sink;

void srv_tool_stream_init(srv_tool_stream *s, fc_chat_template t, uint64_t id_seed);
void srv_tool_stream_push(srv_tool_stream *s, const char *text, size_t n, const srv_tool_sink *k);
/* The reply ended: what is held is flushed. */
void srv_tool_stream_end(srv_tool_stream *s, const srv_tool_sink *k);
void srv_tool_stream_free(srv_tool_stream *s);

/* A call's id: "call_" and 24 hex digits from the seed and the index. */
void srv_tool_call_id(uint64_t seed, size_t index, char out[40]);

#endif
