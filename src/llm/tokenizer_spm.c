/* SPDX-License-Identifier: MIT */
/* Fucina llm: SentencePiece (tokenizer.ggml.model = "llama") encoding, the
 * way llama.cpp's llm_tokenizer_spm does it, since that decides the ids:
 *
 * 1. Spaces become U+2581 ("▁"), with one more in front when the caller
 *    asks (add_space_prefix at the start and after a special token).
 * 2. The bytes are cut into symbols by the UTF-8 lead byte alone (0xxx,
 *    10xx: 1, 110x: 2, 1110: 3, 1111: 4, clipped at the end); continuation
 *    bytes are not checked, so invalid UTF-8 never changes the cut of what
 *    follows it and needs no replacement character.
 * 3. Every adjacent pair whose concatenated text is a token (of any type)
 *    is a candidate with that token's score; the highest score merges first,
 *    the leftmost on equal scores, and the merged symbol offers new pairs
 *    with its neighbours. Stale candidates (a side already merged) are
 *    recognised by their length, as llama.cpp does.
 * 4. Each final symbol is its token; a symbol that is not a token (only an
 *    unmerged character can be one) becomes one byte-fallback token per
 *    byte. llama.cpp's "resegment" through its merge history never applies:
 *    every merged symbol is a token by construction. */
#include <stdlib.h>
#include <string.h>

#include "llm/tokenizer_internal.h"

typedef struct sym {
    uint32_t start, n; /* bytes of the symbol in the escaped text; n = 0: merged away */
    int32_t prev, next;
} sym;

typedef struct cand {
    float score;
    uint32_t left, right, size;
} cand;

typedef struct heap {
    cand *v;
    size_t n, cap;
} heap;

/* The order of llama.cpp's priority queue: higher score first, then the
 * smaller left index. */
static int before(const cand *a, const cand *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(heap *h, cand c) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        cand *v = realloc(h->v, cap * sizeof *v);
        if (!v) return -1;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&c, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = c;
    return 0;
}

static cand heap_pop(heap *h) {
    cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n) h->v[i] = last;
    return top;
}

/* llama.cpp's unicode_len_utf8: the length promised by the top four bits. */
static uint32_t lead_len(unsigned char b) {
    static const uint8_t k_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return k_len[b >> 4];
}

static int try_pair(const fc_tokenizer *t, const char *s, const sym *sy, heap *h, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return 0;
    uint32_t size = sy[l].n + sy[r].n;
    int32_t id = fctk_map_get(&t->by_text, s + sy[l].start, size, 0);
    if (id < 0) return 0;
    return heap_push(h, (cand){t->score[id], (uint32_t)l, (uint32_t)r, size});
}

int fctk_spm_encode(const fc_tokenizer *t, const char *text, size_t len, int prefix_space, fctk_tokvec *out,
                    int *bad_byte) {
    /* escaped text: at most 3 bytes per input byte, plus the prefix */
    size_t cap = len * 3 + 3;
    if (len > (SIZE_MAX - 3) / 3 || cap > UINT32_MAX) return -1;
    char *s = malloc(cap);
    sym *sy = NULL;
    heap h = {0};
    int rc = -1;
    if (!s) return -1;
    size_t n = 0;
    if (prefix_space) {
        memcpy(s, "\xE2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(s + n, "\xE2\x96\x81", 3);
            n += 3;
        } else {
            s[n++] = text[i];
        }
    }
    if (n == 0) {
        free(s);
        return 0;
    }
    sy = malloc(n * sizeof *sy);
    if (!sy) goto done;
    int32_t ns = 0;
    for (size_t off = 0; off < n;) {
        uint32_t l = lead_len((unsigned char)s[off]);
        if (l > n - off) l = (uint32_t)(n - off);
        sy[ns] = (sym){(uint32_t)off, l, ns - 1, -1};
        if (ns > 0) sy[ns - 1].next = ns;
        ns++;
        off += l;
    }
    for (int32_t i = 1; i < ns; i++)
        if (try_pair(t, s, sy, &h, i - 1, i)) goto done;
    while (h.n) {
        cand c = heap_pop(&h);
        sym *l = &sy[c.left], *r = &sy[c.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != c.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sy[r->next].prev = (int32_t)c.left;
        if (try_pair(t, s, sy, &h, l->prev, (int32_t)c.left)) goto done;
        if (try_pair(t, s, sy, &h, (int32_t)c.left, l->next)) goto done;
    }
    for (int32_t i = 0; i >= 0; i = sy[i].next) {
        int32_t id = fctk_map_get(&t->by_text, s + sy[i].start, sy[i].n, 0);
        if (id >= 0) {
            if (fctk_tok_push(out, id)) goto done;
            continue;
        }
        for (uint32_t k = 0; k < sy[i].n; k++) {
            unsigned char b = (unsigned char)s[sy[i].start + k];
            if (t->byte_token[b] == FC_TOKEN_NONE) {
                *bad_byte = b;
                rc = -2;
                goto done;
            }
            if (fctk_tok_push(out, t->byte_token[b])) goto done;
        }
    }
    rc = 0;
done:
    free(s);
    free(sy);
    free(h.v);
    return rc;
}
