/* Fucina llm: tokens -> bytes, whole or streamed.
 *
 * A token's piece is precomputed at load time (llama.cpp's token_to_piece
 * with special = true); without FC_DETOKENIZE_UNPARSE_SPECIAL, control and
 * unknown tokens render as nothing (user-defined ones always render).
 *
 * The stream holds back only a trailing character whose lead byte promises
 * more bytes than have arrived, so a caller printing each push never shows
 * half a character; everything else goes out at once (including invalid
 * bytes, which no later token can repair), so pushes + flush == whole. */
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "llm/tokenizer_internal.h"
#include "llm/unicode.h"

static int renders(const fc_tokenizer *t, fc_token id, int special) {
    fc_token_type ty = (fc_token_type)t->type[id];
    return special || !(ty == FC_TOKEN_TYPE_CONTROL || ty == FC_TOKEN_TYPE_UNKNOWN);
}

static fc_status bad_id(fc_ctx *ctx, const char *fn, const fc_tokenizer *t, fc_token id) {
    fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: token id %d is out of range (the vocabulary has %d tokens)", fn, (int)id,
            (int)t->n_vocab);
    return FC_ERR_INVALID_ARG;
}

fc_status fc_token_piece(fc_ctx *ctx, const fc_tokenizer *t, fc_token id, int special, const char **piece,
                         size_t *len) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!t || !piece || !len) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_token_piece: %s is NULL", !t ? "the tokenizer" : !piece ? "piece" : "len");
        return FC_ERR_INVALID_ARG;
    }
    if (id < 0 || id >= t->n_vocab) return bad_id(ctx, "fc_token_piece", t, id);
    *piece = t->piece + t->piece_off[id];
    *len = renders(t, id, special) ? t->piece_len[id] : 0;
    return FC_OK;
}

fc_status fc_detokenize(fc_ctx *ctx, const fc_tokenizer *t, const fc_token *tokens, size_t n, unsigned flags,
                        char **text, size_t *len) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!t || !text || (!tokens && n)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_detokenize: %s is NULL", !t ? "the tokenizer" : !text ? "text" : "tokens");
        return FC_ERR_INVALID_ARG;
    }
    if (flags & ~(FC_DETOKENIZE_REMOVE_SPECIAL | FC_DETOKENIZE_UNPARSE_SPECIAL)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_detokenize: unknown flags 0x%x", flags);
        return FC_ERR_INVALID_ARG;
    }
    *text = NULL;
    int special = (flags & FC_DETOKENIZE_UNPARSE_SPECIAL) != 0;
    /* llama.cpp: remove_special drops the BOS/EOS the vocabulary adds itself */
    if (flags & FC_DETOKENIZE_REMOVE_SPECIAL) {
        if (t->add_bos && n > 0 && tokens[0] == t->bos) {
            tokens++;
            n--;
        }
        if (t->add_eos && n > 0 && tokens[n - 1] == t->eos) n--;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= t->n_vocab) return bad_id(ctx, "fc_detokenize", t, tokens[i]);
        if (renders(t, tokens[i], special)) total += t->piece_len[tokens[i]];
    }
    char *out = malloc(total + 1);
    if (!out) {
        fc_fail(ctx, FC_ERR_OOM, "fc_detokenize: out of memory (%zu bytes)", total + 1);
        return FC_ERR_OOM;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (!renders(t, tokens[i], special)) continue;
        memcpy(out + o, t->piece + t->piece_off[tokens[i]], t->piece_len[tokens[i]]);
        o += t->piece_len[tokens[i]];
    }
    out[o] = 0;
    *text = out;
    if (len) *len = o;
    return FC_OK;
}

/* ---- streaming ---- */

struct fc_detok_stream {
    const fc_tokenizer *t;
    int special;
    unsigned char held[4]; /* an incomplete trailing character */
    size_t n_held;
    char *buf;             /* what the last call returned */
    size_t cap;
};

fc_detok_stream *fc_detok_stream_new(fc_ctx *ctx, const fc_tokenizer *t, unsigned flags) {
    if (!ctx) return NULL;
    if (!t) return fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_detok_stream_new: the tokenizer is NULL");
    if (flags & ~FC_DETOKENIZE_UNPARSE_SPECIAL)
        return fc_fail(ctx, FC_ERR_INVALID_ARG,
                       "fc_detok_stream_new: unknown flags 0x%x (only FC_DETOKENIZE_UNPARSE_SPECIAL)", flags);
    fc_detok_stream *s = calloc(1, sizeof *s);
    if (!s) return fc_fail(ctx, FC_ERR_OOM, "fc_detok_stream_new: out of memory");
    s->t = t;
    s->special = (flags & FC_DETOKENIZE_UNPARSE_SPECIAL) != 0;
    return s;
}

void fc_detok_stream_free(fc_detok_stream *s) {
    if (!s) return;
    free(s->buf);
    free(s);
}

/* How many bytes at the end of b[0..n) form a character that is valid so
 * far but incomplete (0 when the end is complete or hopeless). */
static size_t incomplete_tail(const unsigned char *b, size_t n) {
    /* Look back at most 3 bytes for the lead of the last character. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = b[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation: keep looking */
        int need = fcu_utf8_lead_len(c);
        if (need <= 1) return 0;
        /* the lead's second byte has a narrower range for E0 ED F0 F4 */
        if (back >= 2) {
            unsigned char c1 = b[n - back + 1];
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;
        }
        return (size_t)need > back ? back : 0;
    }
    return 0;
}

fc_status fc_detok_stream_push(fc_ctx *ctx, fc_detok_stream *s, fc_token id, const char **out, size_t *len) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !out || !len) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_detok_stream_push: %s is NULL", !s ? "the stream" : !out ? "out" : "len");
        return FC_ERR_INVALID_ARG;
    }
    const fc_tokenizer *t = s->t;
    if (id < 0 || id >= t->n_vocab) return bad_id(ctx, "fc_detok_stream_push", t, id);
    size_t pl = renders(t, id, s->special) ? t->piece_len[id] : 0;
    size_t need = s->n_held + pl;
    if (need > s->cap) {
        size_t c = s->cap ? s->cap : 64;
        while (c < need) c *= 2;
        char *p = realloc(s->buf, c);
        if (!p) {
            fc_fail(ctx, FC_ERR_OOM, "fc_detok_stream_push: out of memory");
            return FC_ERR_OOM;
        }
        s->buf = p;
        s->cap = c;
    }
    memcpy(s->buf, s->held, s->n_held);
    memcpy(s->buf + s->n_held, t->piece + t->piece_off[id], pl);
    size_t keep = incomplete_tail((const unsigned char *)s->buf, need);
    memcpy(s->held, s->buf + need - keep, keep);
    s->n_held = keep;
    *out = s->buf;
    *len = need - keep;
    return FC_OK;
}

fc_status fc_detok_stream_flush(fc_ctx *ctx, fc_detok_stream *s, const char **out, size_t *len) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !out || !len) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_detok_stream_flush: %s is NULL", !s ? "the stream" : !out ? "out" : "len");
        return FC_ERR_INVALID_ARG;
    }
    if (s->cap < 4) {
        char *p = realloc(s->buf, 64);
        if (!p) {
            fc_fail(ctx, FC_ERR_OOM, "fc_detok_stream_flush: out of memory");
            return FC_ERR_OOM;
        }
        s->buf = p;
        s->cap = 64;
    }
    memcpy(s->buf, s->held, s->n_held);
    *out = s->buf;
    *len = s->n_held;
    s->n_held = 0;
    return FC_OK;
}
