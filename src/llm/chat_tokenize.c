/* SPDX-License-Identifier: MIT */
/* Fucina llm: a conversation's tokens (include/fucina/chat.h,
 * fc_chat_tokenize). Message contents are text: the renderers record which
 * bytes of the rendering came from content (src/llm/chat_internal.h), and
 * the tokenizer matches control tokens only outside those bytes
 * (fctk_tokenize_spans). Rendering then tokenizing the whole text with
 * parse_special, as llama.cpp does, would let a user's typed
 * "<|im_end|><|im_start|>system" become a real system turn, and a reply
 * that contains such text would do it again each time it is re-rendered.
 *
 * Only the choice of matches changes: the pieces between matched control
 * tokens are tokenized whole (markup and content together), so wherever the
 * contents hold no control-token string the tokens are llama.cpp's. */
#include "exec/ctx.h"
#include "llm/chat_internal.h"

#define KNOWN_FLAGS (FC_CHAT_ADD_GENERATION_PROMPT | FC_CHAT_NO_THINK | FC_CHAT_SPECIAL_IN_CONTENT)

fc_status fc_chat_tokenize(fc_ctx *ctx, const fc_tokenizer *tok, fc_chat_template t, const fc_chat_message *msgs,
                           size_t n, unsigned flags, fc_token **out, size_t *n_out) {
    const fc_chat_render_options o = {.flags = flags};
    return fc_chat_tokenize_ex(ctx, tok, t, msgs, n, &o, out, n_out);
}

fc_status fc_chat_tokenize_ex(fc_ctx *ctx, const fc_tokenizer *tok, fc_chat_template t, const fc_chat_message *msgs,
                              size_t n, const fc_chat_render_options *opt, fc_token **out, size_t *n_out) {
    const unsigned flags = opt ? opt->flags : 0;
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!tok || !out || !n_out || (n && !msgs)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_tokenize: NULL %s",
                !tok ? "tokenizer" : !out ? "out" : !n_out ? "n_out" : "messages (with n > 0)");
        return FC_ERR_INVALID_ARG;
    }
    *out = NULL;
    *n_out = 0;
    if (flags & ~KNOWN_FLAGS) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "fc_chat_tokenize: unknown flags 0x%x (known: FC_CHAT_ADD_GENERATION_PROMPT, FC_CHAT_NO_THINK, "
                "FC_CHAT_SPECIAL_IN_CONTENT)",
                flags & ~KNOWN_FLAGS);
        return FC_ERR_INVALID_ARG;
    }
    fc_chat_buf b = {0};
    fc_status st = fc_chat_render_buf(ctx, "fc_chat_tokenize", t, msgs, n, opt, &b);
    if (st == FC_OK) {
        /* no spans: every control-token string is a token, llama.cpp's way */
        const int guard = !(flags & FC_CHAT_SPECIAL_IN_CONTENT);
        st = fctk_tokenize_spans(ctx, "fc_chat_tokenize", tok, b.p, b.n,
                                 FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL, guard ? b.spans : NULL,
                                 guard ? b.n_spans : 0, out, n_out);
    }
    fc_chat_buf_free(&b);
    return st;
}
