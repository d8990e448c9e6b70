/* SPDX-License-Identifier: MIT */
/* Fucina llm: text -> tokens (byte-level BPE here; SentencePiece in
 * tokenizer_spm.c).
 *
 * 1. Special tokens: the text is cut at every occurrence of each special
 *    token's string, longest token first, leftmost occurrence first
 *    (llama.cpp's tokenizer_st_partition).
 * 2. Each remaining piece is decoded to codepoints (invalid UTF-8 -> U+FFFD
 *    per bad byte) and cut into words by the pre-tokenizer; each word is
 *    re-encoded to UTF-8 from those codepoints, so a bad byte becomes the
 *    three bytes of U+FFFD, as in llama.cpp.
 * 3. BPE on the word's bytes: start from single bytes and repeatedly merge
 *    the adjacent pair with the lowest merge rank (leftmost on ties) until
 *    no pair has a rank. The vocabulary spells bytes with GPT-2's printable
 *    images; the maps were converted to raw bytes at load time, which is
 *    the same thing since the byte<->image mapping is one-to-one.
 * 4. Each final piece is its token, or, when the vocabulary lacks it, one
 *    token per printable ASCII byte; other bytes are dropped, as llama.cpp
 *    does (only a vocabulary whose merges make non-tokens gets here).
 *    With ignore_merges (the llama3 pre-tokenizers) a word that is itself
 *    a token is that token, whatever the merges would have made of it.
 *
 * With plain spans (fctk_tokenize_spans: the chat's message contents), a
 * control or unknown token is matched only where none of its bytes lies in
 * a span; everything else is the same, so a text whose spans hold no such
 * string gets exactly the tokens fc_tokenize gives it.
 *
 * SentencePiece vocabularies take the same special-token partition, then
 * each text fragment goes to fctk_spm_encode with a leading space when it
 * is the first fragment or follows a special token (llama.cpp's
 * is_prev_special, with add_space_prefix). */
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "exec/ctx.h"
#include "llm/tokenizer_internal.h"
#include "llm/unicode.h"

typedef struct frag {
    size_t off, len;
    fc_token tok; /* FC_TOKEN_NONE: raw text */
} frag;

typedef struct fragvec {
    frag *v;
    size_t n, cap;
} fragvec;

typedef fctk_tokvec tokvec;

typedef struct bigram {
    int32_t rank;
    uint32_t left, right, size;
} bigram;

typedef struct scratch {
    uint32_t *cpts;
    size_t *ends;
    size_t cpt_cap;
    unsigned char *word;
    size_t word_cap;
    uint32_t *sym_start, *sym_len;
    int32_t *sym_prev, *sym_next;
    bigram *heap;
    size_t heap_n, sym_cap, heap_cap;
} scratch;

static int frag_push(fragvec *f, size_t off, size_t len, fc_token tok) {
    if (fc_grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v)) return -1;
    f->v[f->n++] = (frag){off, len, tok};
    return 0;
}

int fctk_tok_push(fctk_tokvec *o, fc_token id) {
    if (fc_grow((void **)&o->v, &o->cap, o->n + 1, sizeof *o->v)) return -1;
    o->v[o->n++] = id;
    return 0;
}

static int tok_push(tokvec *o, fc_token id) { return fctk_tok_push(o, id); }

/* First occurrence of pat (m > 0 bytes) in s[0..n), or (size_t)-1. */
static size_t find_bytes(const char *s, size_t n, const char *pat, size_t m) {
    if (m > n) return (size_t)-1;
    const char *end = s + (n - m) + 1, *p = s;
    while (p < end) {
        const char *q = memchr(p, pat[0], (size_t)(end - p));
        if (!q) return (size_t)-1;
        if (memcmp(q, pat, m) == 0) return (size_t)(q - s);
        p = q + 1;
    }
    return (size_t)-1;
}

/* Whether [at, at + m) shares a byte with one of the spans (sorted, disjoint). */
static int in_spans(const fctk_span *sp, size_t n_sp, size_t at, size_t m) {
    /* the first span ending after `at` is the only one that can start before at + m */
    size_t lo = 0, hi = n_sp;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (sp[mid].off + sp[mid].len <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n_sp && sp[lo].off < at + m;
}

/* Cut text at the special tokens' strings. A control or unknown token is
 * matched only with parse_special, and then not where any of its bytes lies
 * in a plain span: such an occurrence stays text, and the search for that
 * token goes on from its next byte (a later occurrence in the same piece may
 * still be markup). User-defined tokens are matched everywhere, as
 * llama.cpp does without parse_special. */
static int partition(const fc_tokenizer *t, const char *text, size_t len, int parse_special, const fctk_span *plain,
                     size_t n_plain, fragvec *out) {
    fragvec a = {0}, b = {0};
    if (frag_push(&a, 0, len, FC_TOKEN_NONE)) return -1;
    for (int32_t k = 0; k < t->n_specials; k++) {
        fc_token id = t->specials[k];
        fc_token_type ty = (fc_token_type)t->type[id];
        const int guarded = ty == FC_TOKEN_TYPE_CONTROL || ty == FC_TOKEN_TYPE_UNKNOWN;
        /* user-defined tokens are always matched; control/unknown only on request */
        if (!parse_special && guarded) continue;
        const char *pat = t->text + t->text_off[id];
        size_t m = t->text_len[id];
        b.n = 0;
        for (size_t i = 0; i < a.n; i++) {
            frag f = a.v[i];
            if (f.tok != FC_TOKEN_NONE) {
                if (frag_push(&b, f.off, f.len, f.tok)) goto fail;
                continue;
            }
            /* [off, off + rem): the text not yet pushed; search from `from` in it */
            size_t off = f.off, rem = f.len, from = 0;
            for (;;) {
                size_t at = find_bytes(text + off + from, rem - from, pat, m);
                if (at == (size_t)-1) {
                    if (rem && frag_push(&b, off, rem, FC_TOKEN_NONE)) goto fail;
                    break;
                }
                at += from;
                if (guarded && n_plain && in_spans(plain, n_plain, off + at, m)) {
                    from = at + 1;
                    continue;
                }
                if (at && frag_push(&b, off, at, FC_TOKEN_NONE)) goto fail;
                if (frag_push(&b, off + at, m, id)) goto fail;
                off += at + m;
                rem -= at + m;
                from = 0;
            }
        }
        fragvec tmp = a;
        a = b;
        b = tmp;
    }
    free(b.v);
    *out = a;
    return 0;
fail:
    free(a.v);
    free(b.v);
    return -1;
}

/* Binary heap of bigrams: lowest rank first, then leftmost. */
static int bg_less(const bigram *x, const bigram *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->left < y->left);
}

static int heap_push(scratch *s, bigram g) {
    if (fc_grow((void **)&s->heap, &s->heap_cap, s->heap_n + 1, sizeof *s->heap)) return -1;
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_less(&g, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = g;
    return 0;
}

static bigram heap_pop(scratch *s) {
    bigram top = s->heap[0];
    bigram last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!bg_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static int try_pair(const fc_tokenizer *t, scratch *s, const unsigned char *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return 0;
    uint32_t ll = s->sym_len[l], rl = s->sym_len[r];
    int32_t rank = fctk_map_get(&t->merges, w + s->sym_start[l], ll + rl, ll);
    if (rank < 0) return 0;
    return heap_push(s, (bigram){rank, (uint32_t)l, (uint32_t)r, ll + rl});
}

static int emit_piece(const fc_tokenizer *t, const unsigned char *p, size_t n, tokvec *out) {
    int32_t id = fctk_map_get(&t->by_bytes, p, n, 0);
    if (id >= 0) return tok_push(out, id);
    /* llama.cpp looks up each byte of the piece's byte-mapped spelling as a
     * one-byte text: only a byte whose image is ASCII (itself) can match;
     * the two-byte images of the others never do, so those bytes vanish. */
    for (size_t i = 0; i < n; i++) {
        fc_token b = fcu_byte_to_cpt(p[i]) < 0x80 ? t->byte_token[p[i]] : FC_TOKEN_NONE;
        if (b != FC_TOKEN_NONE && tok_push(out, b)) return -1;
    }
    return 0;
}

static int bpe_word(const fc_tokenizer *t, scratch *s, const unsigned char *w, size_t n, tokvec *out) {
    if (n == 1) return emit_piece(t, w, 1, out);
    if (t->ignore_merges) { /* llama.cpp looks the byte-mapped word up among all tokens: by_bytes is that map */
        int32_t id = fctk_map_get(&t->by_bytes, w, n, 0);
        if (id >= 0) return tok_push(out, id);
    }
    if (n > s->sym_cap) {
        size_t cap = s->sym_cap;
        if (fc_grow((void **)&s->sym_start, &cap, n, sizeof *s->sym_start)) return -1;
        void *p;
        if (!(p = realloc(s->sym_len, cap * sizeof *s->sym_len))) return -1;
        s->sym_len = p;
        if (!(p = realloc(s->sym_prev, cap * sizeof *s->sym_prev))) return -1;
        s->sym_prev = p;
        if (!(p = realloc(s->sym_next, cap * sizeof *s->sym_next))) return -1;
        s->sym_next = p;
        s->sym_cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        s->sym_start[i] = (uint32_t)i;
        s->sym_len[i] = 1;
        s->sym_prev[i] = (int32_t)i - 1;
        s->sym_next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    s->heap_n = 0;
    for (size_t i = 1; i < n; i++)
        if (try_pair(t, s, w, (int32_t)i - 1, (int32_t)i)) return -1;
    while (s->heap_n) {
        bigram g = heap_pop(s);
        uint32_t l = g.left, r = g.right;
        /* Stale entry: one side was merged since (lengths only grow, and a
         * merged-away right side has length 0). */
        if (s->sym_len[l] == 0 || s->sym_len[r] == 0 || s->sym_next[l] != (int32_t)r ||
            s->sym_len[l] + s->sym_len[r] != g.size)
            continue;
        s->sym_len[l] += s->sym_len[r];
        s->sym_len[r] = 0;
        s->sym_next[l] = s->sym_next[r];
        if (s->sym_next[r] >= 0) s->sym_prev[s->sym_next[r]] = (int32_t)l;
        if (try_pair(t, s, w, s->sym_prev[l], (int32_t)l)) return -1;
        if (try_pair(t, s, w, (int32_t)l, s->sym_next[l])) return -1;
    }
    for (int32_t i = 0; i >= 0; i = s->sym_next[i])
        if (emit_piece(t, w + s->sym_start[i], s->sym_len[i], out)) return -1;
    return 0;
}

static int encode_text(const fc_tokenizer *t, scratch *s, const char *text, size_t len, tokvec *out) {
    const unsigned char *u = (const unsigned char *)text;
    if (fc_grow((void **)&s->cpts, &s->cpt_cap, len, sizeof *s->cpts)) return -1;
    void *p = realloc(s->ends, s->cpt_cap * sizeof *s->ends);
    if (!p) return -1;
    s->ends = p;
    size_t nc = 0, i = 0;
    while (i < len) s->cpts[nc++] = fcu_decode(u, len, &i);
    size_t nw = fctk_pretokenize(t->pre, s->cpts, nc, s->ends);
    size_t start = 0;
    for (size_t k = 0; k < nw; k++) {
        size_t end = s->ends[k];
        if (fc_grow((void **)&s->word, &s->word_cap, (end - start) * 4, 1)) return -1;
        size_t wn = 0;
        for (size_t c = start; c < end; c++) wn += (size_t)fcu_encode(s->cpts[c], s->word + wn);
        if (bpe_word(t, s, s->word, wn, out)) return -1;
        start = end;
    }
    return 0;
}

void fc_tokens_free(fc_token *tokens) { free(tokens); }

fc_status fc_tokenize(fc_ctx *ctx, const fc_tokenizer *t, const char *text, size_t len, unsigned flags,
                      fc_token **tokens, size_t *n) {
    return fctk_tokenize_spans(ctx, "fc_tokenize", t, text, len, flags, NULL, 0, tokens, n);
}

fc_status fctk_tokenize_spans(fc_ctx *ctx, const char *who, const fc_tokenizer *t, const char *text, size_t len,
                              unsigned flags, const fctk_span *plain, size_t n_plain, fc_token **tokens, size_t *n) {
    if (!ctx) return FC_ERR_INVALID_ARG;
    if (!t || !tokens || !n || (!text && len) || (n_plain && !plain)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %s is NULL", who,
                !t                  ? "the tokenizer"
                : !tokens           ? "tokens"
                : !n                ? "n"
                : n_plain && !plain ? "the plain spans (with n_plain > 0)"
                                    : "text (with len > 0)");
        return FC_ERR_INVALID_ARG;
    }
    if (flags & ~(FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: unknown flags 0x%x", who, flags);
        return FC_ERR_INVALID_ARG;
    }
    /* in_spans' binary search needs them sorted and disjoint */
    for (size_t i = 0; i < n_plain; i++) {
        const int outside = plain[i].off > len || plain[i].len > len - plain[i].off;
        if (outside || (i && plain[i].off < plain[i - 1].off + plain[i - 1].len)) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: plain span %zu [%zu, +%zu) is %s (text of %zu bytes)", who, i,
                    plain[i].off, plain[i].len, outside ? "outside the text" : "not after the previous one", len);
            return FC_ERR_INVALID_ARG;
        }
    }
    *tokens = NULL;
    *n = 0;
    tokvec out = {0};
    fragvec frags = {0};
    scratch s = {0};
    int add = (flags & FC_TOKENIZE_ADD_SPECIAL) != 0;
    int err = 0, bad_byte = -1;
    if (add && t->add_bos) err |= tok_push(&out, t->bos);
    if (!err && len) err |= partition(t, text, len, (flags & FC_TOKENIZE_PARSE_SPECIAL) != 0, plain, n_plain, &frags);
    int prev_special = 1; /* the first fragment counts as following a special token */
    for (size_t i = 0; !err && i < frags.n; i++) {
        if (frags.v[i].tok != FC_TOKEN_NONE) {
            err |= tok_push(&out, frags.v[i].tok);
            prev_special = 1;
        } else if (t->model == FCTK_MODEL_SPM) {
            int r = fctk_spm_encode(t, text + frags.v[i].off, frags.v[i].len, t->add_space_prefix && prev_special,
                                    &out, &bad_byte);
            err |= r != 0;
            prev_special = 0;
        } else {
            err |= encode_text(t, &s, text + frags.v[i].off, frags.v[i].len, &out);
        }
    }
    if (!err && add && t->add_eos) err |= tok_push(&out, t->eos);
    free(frags.v);
    free(s.cpts);
    free(s.ends);
    free(s.word);
    free(s.sym_start);
    free(s.sym_len);
    free(s.sym_prev);
    free(s.sym_next);
    free(s.heap);
    if (err) {
        free(out.v);
        if (bad_byte >= 0) {
            /* llama.cpp throws here (std::out_of_range from its byte lookup) */
            fc_fail(ctx, FC_ERR_UNSUPPORTED,
                    "%s: byte 0x%02X of the text has no token: the vocabulary has neither <0x%02X> nor a "
                    "one-byte token for it", who, bad_byte, bad_byte);
            return FC_ERR_UNSUPPORTED;
        }
        fc_fail(ctx, FC_ERR_OOM, "%s: out of memory (text of %zu bytes)", who, len);
        return FC_ERR_OOM;
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    }
    *tokens = out.v;
    *n = out.n;
    return FC_OK;
}
