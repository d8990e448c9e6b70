/* SPDX-License-Identifier: MIT */
/* Fucina llm: tokens -> bytes, whole or streamed.
 *
 * A token's piece is precomputed at load time (llama.cpp's token_to_piece
 * with special = true); without FC_DETOKENIZE_UNPARSE_SPECIAL, control and
 * unknown tokens render as nothing (user-defined ones always render).
 *
 * Then llama.cpp's llama_detokenize rules: with add_space_prefix (SPM) the
 * first token's piece loses one leading space, unless a leading BOS was
 * dropped by FC_DETOKENIZE_REMOVE_SPECIAL (then nothing is stripped: that
 * is what llama.cpp does); and vocabularies with clean_spaces (the gpt2 and
 * llama3 pre-tokenizers) get its clean-up: a space before ? ! . , is
 * removed, " ' " loses both spaces, and " 's", " 'm", " 're", " 've" lose
 * theirs. llama.cpp runs those as three passes over the whole text; here
 * each pass is a small state machine holding back at most three bytes, so
 * the stream applies exactly the same rules (fc_detokenize runs the same
 * machines, so the two agree by construction).
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

/* ---- clean_up_tokenization_spaces as three chained state machines ---- */

typedef struct clean {
    int h1;           /* pass 1: a space is held */
    int h2;           /* pass 2: 0, 1 = " ", 2 = " '" */
    int h3;           /* pass 3: 0, 1 = " ", 2 = " '", 3 = " '" + x3 */
    char x3;
} clean;

typedef struct sink {
    char *p;
    size_t n;
} sink;

static void out(sink *o, char c) { o->p[o->n++] = c; }

/* pass 3: " 's" " 'm" " 're" " 've" lose the space (llama.cpp leaves " 't",
 * " 'd", " 'll" alone) */
static void p3(clean *c, sink *o, char x) {
    switch (c->h3) {
    case 1:
        if (x == '\'') {
            c->h3 = 2;
            return;
        }
        out(o, ' ');
        c->h3 = 0;
        break;
    case 2:
        if (x == 's' || x == 'm') {
            out(o, '\'');
            out(o, x);
            c->h3 = 0;
            return;
        }
        if (x == 'r' || x == 'v') {
            c->x3 = x;
            c->h3 = 3;
            return;
        }
        out(o, ' ');
        out(o, '\'');
        c->h3 = 0;
        break;
    case 3:
        if (x == 'e') {
            out(o, '\'');
            out(o, c->x3);
            out(o, 'e');
            c->h3 = 0;
            return;
        }
        out(o, ' ');
        out(o, '\'');
        out(o, c->x3);
        c->h3 = 0;
        break;
    }
    if (x == ' ') c->h3 = 1;
    else out(o, x);
}

/* pass 2: " ' " becomes "'"; the dropped right space cannot be the left
 * space of another match (llama.cpp overwrites it with NUL) */
static void p2(clean *c, sink *o, char x) {
    switch (c->h2) {
    case 1:
        if (x == '\'') {
            c->h2 = 2;
            return;
        }
        p3(c, o, ' ');
        c->h2 = 0;
        break;
    case 2:
        c->h2 = 0;
        if (x == ' ') {
            p3(c, o, '\'');
            return;
        }
        p3(c, o, ' ');
        p3(c, o, '\'');
        break;
    }
    if (x == ' ') c->h2 = 1;
    else p3(c, o, x);
}

/* pass 1: a space before ? ! . , is dropped */
static void p1(clean *c, sink *o, char x) {
    if (c->h1) {
        c->h1 = 0;
        if (!(x == '?' || x == '!' || x == '.' || x == ',')) p2(c, o, ' ');
    }
    if (x == ' ') c->h1 = 1;
    else p2(c, o, x);
}

/* End of text: what each pass still holds goes out unchanged. */
static void clean_flush(clean *c, sink *o) {
    if (c->h1) p2(c, o, ' ');
    c->h1 = 0;
    if (c->h2 >= 1) p3(c, o, ' ');
    if (c->h2 == 2) p3(c, o, '\'');
    c->h2 = 0;
    if (c->h3 >= 1) out(o, ' ');
    if (c->h3 >= 2) out(o, '\'');
    if (c->h3 == 3) out(o, c->x3);
    c->h3 = 0;
}

/* One token's bytes into o: lstrip drops one leading space; with clean-up
 * the bytes go through the passes (o never grows faster than the input). */
static void emit(const fc_tokenizer *t, clean *c, sink *o, const char *p, size_t n, int lstrip) {
    if (lstrip && n && p[0] == ' ') p++, n--;
    if (!t->clean_spaces) {
        memcpy(o->p + o->n, p, n);
        o->n += n;
        return;
    }
    for (size_t i = 0; i < n; i++) p1(c, o, p[i]);
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
    int lstrip = t->add_space_prefix; /* llama.cpp's remove_space */
    /* llama.cpp: remove_special drops the BOS/EOS the vocabulary adds itself */
    if (flags & FC_DETOKENIZE_REMOVE_SPECIAL) {
        if (t->add_bos && n > 0 && tokens[0] == t->bos) {
            tokens++;
            n--;
            lstrip = 0;
        }
        if (t->add_eos && n > 0 && tokens[n - 1] == t->eos) n--;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= t->n_vocab) return bad_id(ctx, "fc_detokenize", t, tokens[i]);
        if (renders(t, tokens[i], special)) total += t->piece_len[tokens[i]];
    }
    char *buf = malloc(total + 1);
    if (!buf) {
        fc_fail(ctx, FC_ERR_OOM, "fc_detokenize: out of memory (%zu bytes)", total + 1);
        return FC_ERR_OOM;
    }
    sink o = {buf, 0};
    clean c = {0};
    for (size_t i = 0; i < n; i++) {
        size_t pl = renders(t, tokens[i], special) ? t->piece_len[tokens[i]] : 0;
        emit(t, &c, &o, t->piece + t->piece_off[tokens[i]], pl, lstrip && i == 0);
    }
    if (t->clean_spaces) clean_flush(&c, &o);
    buf[o.n] = 0;
    *text = buf;
    if (len) *len = o.n;
    return FC_OK;
}

/* ---- streaming ---- */

struct fc_detok_stream {
    const fc_tokenizer *t;
    int special;
    int started;           /* a token was pushed since creation / the last flush */
    clean c;               /* the clean-up passes' held bytes */
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
    /* the clean-up passes may release up to 6 held bytes (1 + 2 + 3) */
    size_t need = s->n_held + pl + 8;
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
    sink o = {s->buf, s->n_held};
    emit(t, &s->c, &o, t->piece + t->piece_off[id], pl, t->add_space_prefix && !s->started);
    s->started = 1;
    size_t keep = incomplete_tail((const unsigned char *)s->buf, o.n);
    memcpy(s->held, s->buf + o.n - keep, keep);
    s->n_held = keep;
    *out = s->buf;
    *len = o.n - keep;
    return FC_OK;
}

fc_status fc_detok_stream_flush(fc_ctx *ctx, fc_detok_stream *s, const char **out, size_t *len) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!s || !out || !len) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_detok_stream_flush: %s is NULL", !s ? "the stream" : !out ? "out" : "len");
        return FC_ERR_INVALID_ARG;
    }
    if (s->cap < 16) { /* 3 held UTF-8 bytes + 6 from the clean-up passes */
        char *p = realloc(s->buf, 64);
        if (!p) {
            fc_fail(ctx, FC_ERR_OOM, "fc_detok_stream_flush: out of memory");
            return FC_ERR_OOM;
        }
        s->buf = p;
        s->cap = 64;
    }
    memcpy(s->buf, s->held, s->n_held);
    sink o = {s->buf, s->n_held};
    if (s->t->clean_spaces) clean_flush(&s->c, &o);
    *out = s->buf;
    *len = o.n;
    s->n_held = 0;
    s->started = 0;
    return FC_OK;
}
