/* Fucina llm: chat internals shared by the renderer, the conversation and
 * the tests: a growable byte buffer and the reference Qwen3 template text. */
#ifndef FC_LLM_CHAT_INTERNAL_H
#define FC_LLM_CHAT_INTERNAL_H

#include <stddef.h>

#include "fucina/chat.h"

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

#endif
