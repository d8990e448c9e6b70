/* SPDX-License-Identifier: MIT */
/* Fucina llm: chat internals shared by the renderer, the conversation and
 * the tests: a growable byte buffer that records which of its bytes came
 * from message content, the family table's per-family parts (reference
 * texts, renderers, end-of-turn texts). */
#ifndef FC_LLM_CHAT_INTERNAL_H
#define FC_LLM_CHAT_INTERNAL_H

#include <stddef.h>

#include "fucina/chat.h"
#include "llm/tokenizer_internal.h"

/* The number of fc_chat_template values (they run 0..FC_CHAT_N_TEMPLATES-1). */
#define FC_CHAT_N_TEMPLATES 13

/* ---- a growable byte buffer, always NUL-terminated when p != NULL ----
 * Renderers write the template's markup with fc_chat_buf_put(s) and every
 * byte taken from a message's content (trimmed or cut as the family does)
 * with fc_chat_buf_put_content, which also records where it went: spans
 * (sorted, disjoint, adjacent ones merged) are the bytes of p that are
 * content, the ones fc_chat_tokenize reads as text only. */
typedef struct fc_chat_buf {
    char *p;
    size_t n, cap;
    fctk_span *spans;
    size_t n_spans, cap_spans;
} fc_chat_buf;

/* 0 on success, -1 on OOM (the buffer is unchanged). */
int fc_chat_buf_put(fc_chat_buf *b, const char *s, size_t n);
int fc_chat_buf_puts(fc_chat_buf *b, const char *s);
int fc_chat_buf_put_content(fc_chat_buf *b, const char *s, size_t n);
void fc_chat_buf_free(fc_chat_buf *b);

/* fc_chat_render into b (empty on entry; freed by the caller on any
 * outcome), with the content spans; `who` names the public caller in error
 * messages. */
fc_status fc_chat_render_buf(fc_ctx *ctx, const char *who, fc_chat_template t, const fc_chat_message *msgs, size_t n,
                             const fc_chat_render_options *o, fc_chat_buf *b);

/* ---- tools (src/llm/chat_tools.c) ---- */
/* The tool definitions parse as JSON objects; every call has a name and an
 * object of arguments; only assistant messages carry calls. */
fc_status fc_chat_tools_check(fc_ctx *ctx, const char *who, const fc_chat_message *msgs, size_t n,
                              const fc_chat_render_options *o);
/* A JSON text as Jinja's tojson writes it (Python's json.dumps), as content;
 * 0, or -1 on out of memory. */
int fc_chat_put_tool_json(fc_chat_buf *b, const char *json);
/* ... with json.dumps(indent=indent) (indent 0: as fc_chat_put_tool_json). */
int fc_chat_put_tool_json_indent(fc_chat_buf *b, const char *json, int indent);
/* A string as json.dumps writes it (quoted, escaped), as content. */
int fc_chat_put_py_string(fc_chat_buf *b, const char *s, size_t n);
/* A parsed JSON value as json.dumps writes it, as content. */
struct fj_val;
int fc_chat_put_py_value(fc_chat_buf *b, const struct fj_val *v);
/* Qwen3's system turn with tools (system: the first system message's text
 * or NULL); 0 or -1 (out of memory). */
int fc_chat_put_hermes_tools(fc_chat_buf *b, const char *system, const fc_chat_render_options *o);
/* An assistant message's <tool_call> blocks, as Qwen3's template writes them. */
int fc_chat_put_hermes_calls(fc_chat_buf *b, const fc_chat_message *m, int content_nonempty);
/* Render in the generic tool format: a system message describing the tools
 * and the reply format, calls as JSON replies, then the family's renderer. */
fc_status fc_chat_render_generic(fc_ctx *ctx, const char *who, fc_chat_template t, const fc_chat_message *msgs,
                                 size_t n, const fc_chat_render_options *o, fc_chat_buf *b);
/* Python's str.strip() (Jinja's trim): s without the leading and trailing
 * characters str.isspace() accepts, Unicode spaces included: *p, *n. */
void fc_chat_py_strip(const char *s, const char **p, size_t *n);
/* Mistral's 9-character call id for id (itself when it has 9 characters;
 * else 9 of [a-zA-Z0-9] hashed from it; NULL hashes as ""). */
void fc_chat_mistral_call_id(const char *id, char out[10]);
/* Render in Mistral's tool format, v3 or v3-tekken (chat_tools_mistral.c). */
fc_status fc_chat_render_mistral_tools(fc_ctx *ctx, const char *who, fc_chat_template t, const fc_chat_message *msgs,
                                       size_t n, const fc_chat_render_options *o, fc_chat_buf *b);
/* Render in Llama 3.1's JSON tool format (src/llm/chat_tools_llama3.c). */
fc_status fc_chat_render_llama3_tools(fc_ctx *ctx, const char *who, const fc_chat_message *msgs, size_t n,
                                      const fc_chat_render_options *o, fc_chat_buf *b);
/* The generic format's instructions (before the tool list). */
extern const char fc_chat_generic_tools_intro[];

/* The reference Jinja text of Qwen3's template (src/llm/chat_qwen3_text.c). */
extern const char fc_chat_qwen3_jinja[];
/* The other families' reference texts (src/llm/chat_texts.c); NULL for
 * qwen3 and for a value out of range. */
const char *fc_chat_reference_text(fc_chat_template t);

/* Render one of llama.cpp's built-in families other than chatml/qwen3
 * (src/llm/chat_render.c) into b; 1 on success, 0 on OOM. Messages are
 * already validated. */
int fc_chat_render_builtin(fc_chat_buf *b, fc_chat_template t, const fc_chat_message *msgs, size_t n, unsigned flags);

/* The texts of a family's end-of-generation tokens besides the vocabulary's
 * EOS (src/llm/chat_stop.c); *n receives the count (at most
 * FC_CHAT_MAX_EOG_TEXTS = FC_CHAT_MAX_EOG_TOKENS - 1). Tokens a vocabulary
 * lacks are simply not used (fc_chat_template_eog_tokens). */
#define FC_CHAT_MAX_EOG_TEXTS 3
const char *const *fc_chat_eog_texts(fc_chat_template t, size_t *n);

#endif
