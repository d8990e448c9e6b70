/* SPDX-License-Identifier: MIT */
/* Fucina llm: the template families llama.cpp renders natively besides
 * ChatML (include/fucina/chat.h), byte for byte what its
 * llama_chat_apply_template writes, quirks included: these are the
 * renderings llama.cpp's chat and server feed the model when they do not
 * run the Jinja template, and tests/runtime/test_llm_chat.c compares every
 * family with libllama. Where a family's real Jinja template renders
 * something else (Gemma's untrimmed system prefix, Phi-3's trailing
 * eos_token, Mistral v3 putting the system message in the last user turn),
 * the test documents it; we follow llama.cpp.
 *
 * Roles other than system and user are written by name ("tool"), or treated
 * as the assistant where llama.cpp does (mistral, llama2, gemma's "model"
 * only for the assistant). */
#include <string.h>

#include "llm/chat_internal.h"

/* A (pointer, length) view of a message's content. */
typedef struct view {
    const char *p;
    size_t n;
} view;

/* llama.cpp trims with isspace() in the C locale: exactly these six ASCII
 * bytes. Spelled out so the host's locale cannot change what is trimmed,
 * and so UTF-8 bytes (>= 0x80) never are; Python's str.strip(), which the
 * real Jinja templates use, also strips Unicode spaces such as U+00A0. */
static int c_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

static view trim(const char *s) {
    view v = {s, strlen(s)};
    while (v.n && c_space((unsigned char)v.p[0])) v.p++, v.n--;
    while (v.n && c_space((unsigned char)v.p[v.n - 1])) v.n--;
    return v;
}

/* PUT writes markup; PUTC / PUTCV write (a view of) a message's content,
 * which fc_chat_tokenize reads as text only */
#define PUT(s) ok = ok && !fc_chat_buf_puts(b, (s))
#define PUTC(s) ok = ok && !fc_chat_buf_put_content(b, (s), strlen(s))
#define PUTCV(v) ok = ok && !fc_chat_buf_put_content(b, (v).p, (v).n)

static int render_llama3(fc_chat_buf *b, const fc_chat_message *m, size_t n, int add_ass) {
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        PUT("<|start_header_id|>");
        PUT(fc_chat_role_name(m[i].role));
        PUT("<|end_header_id|>\n\n");
        PUTCV(trim(m[i].content));
        PUT("<|eot_id|>");
    }
    /* no <|begin_of_text|>: the tokenizer adds BOS (add_bos_token) */
    if (add_ass) PUT("<|start_header_id|>assistant<|end_header_id|>\n\n");
    return ok;
}

/* v7 (and llama.cpp's v7-tekken without the spaces): every message stands
 * alone; a user turn ends with [/INST], so there is no generation prompt */
static int render_mistral_v7(fc_chat_buf *b, const fc_chat_message *m, size_t n) {
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        switch (m[i].role) {
        case FC_CHAT_SYSTEM:
            PUT("[SYSTEM_PROMPT] ");
            PUTC(m[i].content);
            PUT("[/SYSTEM_PROMPT]");
            break;
        case FC_CHAT_USER:
            PUT("[INST] ");
            PUTC(m[i].content);
            PUT("[/INST]");
            break;
        case FC_CHAT_ASSISTANT:
        case FC_CHAT_TOOL:
            PUT(" ");
            PUTC(m[i].content);
            PUT("</s>");
            break;
        }
    }
    return ok;
}

/* v1 / v3 / v3-tekken: "[INST]" opens a turn that the next assistant
 * message closes; system and user messages inside it follow each other */
static int render_mistral(fc_chat_buf *b, fc_chat_template t, const fc_chat_message *m, size_t n) {
    const char *lead = t == FC_CHAT_TEMPLATE_MISTRAL_V1 ? " " : "";
    const char *trail = t == FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN ? "" : " ";
    const int trim_reply = t == FC_CHAT_TEMPLATE_MISTRAL_V3;
    int ok = 1, open = 0;
    for (size_t i = 0; i < n; i++) {
        if (!open) {
            PUT(lead);
            PUT("[INST]");
            PUT(trail);
            open = 1;
        }
        switch (m[i].role) {
        case FC_CHAT_SYSTEM:
            PUTC(m[i].content);
            PUT("\n\n");
            break;
        case FC_CHAT_USER:
            PUTC(m[i].content);
            PUT(lead);
            PUT("[/INST]");
            break;
        case FC_CHAT_ASSISTANT:
        case FC_CHAT_TOOL:
            PUT(trail);
            if (trim_reply)
                PUTCV(trim(m[i].content));
            else
                PUTC(m[i].content);
            PUT("</s>");
            open = 0;
            break;
        }
    }
    return ok;
}

/* llama2 and its variants: the prompt opens with "[INST] " (the BOS before
 * it is the tokenizer's); an assistant message closes the turn and the next
 * message opens another */
static int render_llama2(fc_chat_buf *b, fc_chat_template t, const fc_chat_message *m, size_t n) {
    const int sys_block = t != FC_CHAT_TEMPLATE_LLAMA2;
    const int bos_inside = t == FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS;
    const int strip = t == FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP;
    int ok = 1, open = 1;
    PUT("[INST] ");
    for (size_t i = 0; i < n; i++) {
        const view c = strip ? trim(m[i].content) : (view){m[i].content, strlen(m[i].content)};
        if (!open) {
            PUT(bos_inside ? "<s>[INST] " : "[INST] ");
            open = 1;
        }
        switch (m[i].role) {
        case FC_CHAT_SYSTEM:
            if (sys_block) {
                PUT("<<SYS>>\n");
                PUTCV(c);
                PUT("\n<</SYS>>\n\n");
            } else {
                /* no system block in plain llama2: the text joins the first turn */
                PUTCV(c);
                PUT("\n");
            }
            break;
        case FC_CHAT_USER:
            PUTCV(c);
            PUT(" [/INST]");
            break;
        case FC_CHAT_ASSISTANT:
        case FC_CHAT_TOOL:
            PUTCV(c);
            PUT("</s>");
            open = 0;
            break;
        }
    }
    return ok;
}

/* Gemma has no system role: system messages are trimmed and concatenated,
 * then written (with "\n\n") at the start of the next turn that is not the
 * model's; a system text that trims to nothing, or comes after the last
 * such turn, is dropped. */
static int render_gemma(fc_chat_buf *b, const fc_chat_message *m, size_t n, int add_ass) {
    int ok = 1;
    size_t sys_from = 0, sys_n = 0; /* pending system messages: m[sys_from..] */
    int pending = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].role == FC_CHAT_SYSTEM) {
            if (!pending) sys_from = i;
            pending = 1;
            sys_n += trim(m[i].content).n;
            continue;
        }
        const int model = m[i].role == FC_CHAT_ASSISTANT;
        PUT("<start_of_turn>");
        PUT(model ? "model" : fc_chat_role_name(m[i].role));
        PUT("\n");
        if (pending && !model) {
            if (sys_n) {
                for (size_t j = sys_from; j < i; j++)
                    if (m[j].role == FC_CHAT_SYSTEM) PUTCV(trim(m[j].content));
                PUT("\n\n");
            }
            pending = 0;
            sys_n = 0;
        }
        PUTCV(trim(m[i].content));
        PUT("<end_of_turn>\n");
    }
    if (add_ass) PUT("<start_of_turn>model\n");
    return ok;
}

static int render_phi3(fc_chat_buf *b, const fc_chat_message *m, size_t n, int add_ass) {
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        PUT("<|");
        PUT(fc_chat_role_name(m[i].role));
        PUT("|>\n");
        PUTC(m[i].content);
        PUT("<|end|>\n");
    }
    if (add_ass) PUT("<|assistant|>\n");
    return ok;
}

int fc_chat_render_builtin(fc_chat_buf *b, fc_chat_template t, const fc_chat_message *msgs, size_t n,
                           unsigned flags) {
    const int add_ass = (flags & FC_CHAT_ADD_GENERATION_PROMPT) != 0;
    switch (t) {
    case FC_CHAT_TEMPLATE_LLAMA3: return render_llama3(b, msgs, n, add_ass);
    case FC_CHAT_TEMPLATE_MISTRAL_V1:
    case FC_CHAT_TEMPLATE_MISTRAL_V3:
    case FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN: return render_mistral(b, t, msgs, n);
    case FC_CHAT_TEMPLATE_MISTRAL_V7: return render_mistral_v7(b, msgs, n);
    case FC_CHAT_TEMPLATE_GEMMA: return render_gemma(b, msgs, n, add_ass);
    case FC_CHAT_TEMPLATE_PHI3: return render_phi3(b, msgs, n, add_ass);
    case FC_CHAT_TEMPLATE_LLAMA2:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP: return render_llama2(b, t, msgs, n);
    case FC_CHAT_TEMPLATE_CHATML:
    case FC_CHAT_TEMPLATE_QWEN3: break; /* rendered in chat_template.c */
    }
    return 0;
}
