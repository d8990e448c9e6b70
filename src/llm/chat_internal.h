/* Fucina llm: chat internals shared by the renderer, the conversation and
 * the tests: a growable byte buffer, the family table's per-family parts
 * (reference texts, renderers, end-of-turn tokens). */
#ifndef FC_LLM_CHAT_INTERNAL_H
#define FC_LLM_CHAT_INTERNAL_H

#include <stddef.h>

#include "fucina/chat.h"

/* The number of fc_chat_template values (they run 0..FC_CHAT_N_TEMPLATES-1). */
#define FC_CHAT_N_TEMPLATES 13

/* ---- a growable byte buffer, always NUL-terminated when p != NULL ---- */
typedef struct fc_chat_buf {
    char *p;
    size_t n, cap;
} fc_chat_buf;

/* 0 on success, -1 on OOM (the buffer is unchanged). */
int fc_chat_buf_put(fc_chat_buf *b, const char *s, size_t n);
int fc_chat_buf_puts(fc_chat_buf *b, const char *s);
void fc_chat_buf_free(fc_chat_buf *b);

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
 * FC_CHAT_MAX_EOG_TEXTS). Tokens a vocabulary lacks are simply not used. */
#define FC_CHAT_MAX_EOG_TEXTS 3
const char *const *fc_chat_eog_texts(fc_chat_template t, size_t *n);

/* The end-of-generation tokens a chat stops at (src/llm/chat.c). */
const fc_token *fc_chat_eog_tokens(const fc_chat *c, size_t *n);

#endif
