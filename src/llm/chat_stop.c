/* SPDX-License-Identifier: MIT */
/* Fucina llm: how a reply ends. The end-of-turn tokens of each template
 * family (fc_chat_template_eog_tokens: the one list fc_chat and other
 * generators, such as the server, stop at), and stop strings: generated
 * text is held back while some suffix of it may still grow into a stop
 * string, so a caller streaming the emitted part never shows any piece of
 * one (src/llm/chat_internal.h). */
#include <string.h>

#include "exec/ctx.h"
#include "llm/chat_internal.h"

/* The token that closes an assistant turn in each family's rendering, plus
 * the vocabulary's other end markers the family's models emit (Llama 3.1's
 * <|eom_id|> after a tool call; <|endoftext|> / <|end_of_text|>, usually
 * the EOS already). The EOS itself is always added by the caller. */
const char *const *fc_chat_eog_texts(fc_chat_template t, size_t *n) {
    static const char *const chatml[] = {"<|im_end|>", "<|endoftext|>"};
    static const char *const llama3[] = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"};
    static const char *const gemma[] = {"<end_of_turn>"};
    static const char *const phi3[] = {"<|end|>", "<|endoftext|>"};
    static const char *const mistral[] = {"</s>"};
#define EOG(a) (*n = sizeof(a) / sizeof(a)[0], (a))
    switch (t) {
    case FC_CHAT_TEMPLATE_CHATML:
    case FC_CHAT_TEMPLATE_QWEN3: return EOG(chatml);
    case FC_CHAT_TEMPLATE_LLAMA3: return EOG(llama3);
    case FC_CHAT_TEMPLATE_GEMMA: return EOG(gemma);
    case FC_CHAT_TEMPLATE_PHI3: return EOG(phi3);
    case FC_CHAT_TEMPLATE_MISTRAL_V1:
    case FC_CHAT_TEMPLATE_MISTRAL_V3:
    case FC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN:
    case FC_CHAT_TEMPLATE_MISTRAL_V7:
    case FC_CHAT_TEMPLATE_LLAMA2:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_BOS:
    case FC_CHAT_TEMPLATE_LLAMA2_SYS_STRIP: return EOG(mistral);
    }
#undef EOG
    *n = 0;
    return NULL;
}

int fc_chat_stop_scan(const char *pend, size_t n, const char *const *stop, size_t n_stop, size_t *emit) {
    if (!stop) n_stop = 0; /* no array: no stop strings, whatever n_stop says */
    /* a complete occurrence: stop at the earliest one */
    size_t best = n + 1;
    for (size_t k = 0; k < n_stop; k++) {
        const size_t m = stop[k] ? strlen(stop[k]) : 0; /* NULL entries: ignored, as empty ones */
        if (!m || m > n) continue;
        for (size_t p = 0; p + m <= n && p < best; p++)
            if (!memcmp(pend + p, stop[k], m)) {
                best = p;
                break;
            }
    }
    if (best <= n) {
        *emit = best;
        return 1;
    }
    /* otherwise hold back from the earliest position whose tail is a proper
     * prefix of a stop string: an occurrence starting earlier can no longer
     * complete, because its start would need a longer matching tail */
    for (size_t p = 0; p < n; p++)
        for (size_t k = 0; k < n_stop; k++) {
            const size_t m = stop[k] ? strlen(stop[k]) : 0;
            if (n - p < m && !memcmp(pend + p, stop[k], n - p)) {
                *emit = p;
                return 0;
            }
        }
    *emit = n;
    return 0;
}

_Static_assert(FC_CHAT_MAX_EOG_TOKENS == 1 + FC_CHAT_MAX_EOG_TEXTS, "the EOS and every end-of-turn text");

fc_status fc_chat_template_eog_tokens(fc_ctx *ctx, const fc_tokenizer *tok, fc_chat_template t, fc_token *out,
                                      size_t cap, size_t *n) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!tok || !out || !n) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_template_eog_tokens: NULL %s",
                !tok ? "tokenizer" : !out ? "out" : "n");
        return FC_ERR_INVALID_ARG;
    }
    *n = 0;
    if (!fc_chat_template_name(t)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_chat_template_eog_tokens: template %d out of range", (int)t);
        return FC_ERR_INVALID_ARG;
    }
    /* a family's model stops at its own turn marker, which is often not the
     * EOS (<|eot_id|>, <end_of_turn>, <|end|>); the EOS stops it anyway */
    size_t n_txt;
    const char *const *txt = fc_chat_eog_texts(t, &n_txt);
    fc_token got[FC_CHAT_MAX_EOG_TOKENS];
    size_t k = 0;
    for (size_t i = 0; i <= n_txt; i++) {
        const fc_token id = i ? fc_tokenizer_find(tok, txt[i - 1], strlen(txt[i - 1])) : fc_tokenizer_eos(tok);
        int dup = id == FC_TOKEN_NONE; /* absent from this vocabulary */
        for (size_t j = 0; j < k && !dup; j++) dup = got[j] == id;
        if (!dup) got[k++] = id;
    }
    *n = k;
    if (k > cap) {
        fc_fail(ctx, FC_ERR_INVALID_ARG,
                "fc_chat_template_eog_tokens: cap %zu is less than the %zu tokens of %s in this vocabulary "
                "(FC_CHAT_MAX_EOG_TOKENS is always enough)",
                cap, k, fc_chat_template_name(t));
        return FC_ERR_INVALID_ARG;
    }
    memcpy(out, got, k * sizeof *got);
    return FC_OK;
}
