/* SPDX-License-Identifier: MIT */
/* Fucina llm: the BPE trainer's merge loop.
 *
 * Incremental, as fast trainers are (HF tokenizers, nanochat's rustbpe):
 * pair counts live in a hash map, each pair keeps the list of words it was
 * seen in, and a max-heap orders the pairs by (count desc, left id asc,
 * right id asc). A merge visits only the words on its pair's list.
 *
 * The heap is lazy. A merge of (a, b) into c changes only pairs next to an
 * occurrence: those not involving c lose counts, and the ones involving c
 * are new (c did not exist). So an entry's count is never below its pair's
 * true count: when the top entry's count is the true one, it is the maximum
 * and, among equal counts, the smallest (left, right); when it is stale it
 * goes back with the true count. New pairs enter after the whole merge, with
 * their final counts. Each pair has at most one entry at any time.
 *
 * Word lists are append-only and may hold words that no longer contain the
 * pair (or one word twice): a merge checks each word, once (a stamp per
 * word). Updating a word subtracts all its adjacent pairs, merges, and adds
 * them back: words are short, and it keeps overlapping cases ("aaa" with
 * (a, a): one merge, left to right, as the reference does) obviously right. */
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "llm/tokenizer_train_internal.h"

typedef struct pair {
    int32_t a, b;
    int64_t count;
    uint32_t head;      /* first node of the word list + 1; 0 = empty */
    uint32_t last_word; /* the word appended last + 1 (skips repeats within one word) */
    uint8_t fresh;      /* on this merge's list of new pairs */
    uint8_t banned;     /* its spelling exists already: never merged */
} pair;

typedef struct node {
    uint32_t word, next; /* next: node + 1; 0 = end */
} node;

typedef struct hentry {
    int64_t count;
    uint32_t pair;
} hentry;

typedef struct state {
    fctt_words *w;
    pair *p;
    size_t n_pairs, pairs_cap;
    uint32_t *slots; /* pair index + 1; 0 = empty */
    size_t slots_cap;
    node *nodes;
    size_t n_nodes, nodes_cap;
    hentry *heap;
    size_t heap_n, heap_cap;
    uint32_t *fresh;
    size_t n_fresh, fresh_cap;
} state;

static uint64_t pair_key(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static size_t slot_of(const state *s, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    return (size_t)h & (s->slots_cap - 1);
}

static int grow_slots(state *s)
{
    size_t cap = s->slots_cap ? s->slots_cap * 2 : 4096;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    free(s->slots);
    s->slots = slots;
    s->slots_cap = cap;
    for (size_t i = 0; i < s->n_pairs; i++) {
        size_t j = slot_of(s, pair_key(s->p[i].a, s->p[i].b));
        while (slots[j]) j = (j + 1) & (cap - 1);
        slots[j] = (uint32_t)(i + 1);
    }
    return 0;
}

/* The index of pair (a, b), created with count 0 when absent; -1 when out of
 * memory. */
static int64_t pair_get(state *s, int32_t a, int32_t b)
{
    if ((s->n_pairs + 1) * 2 > s->slots_cap && grow_slots(s)) return -1;
    const uint64_t key = pair_key(a, b);
    size_t j = slot_of(s, key);
    for (; s->slots[j]; j = (j + 1) & (s->slots_cap - 1)) {
        const pair *q = &s->p[s->slots[j] - 1];
        if (q->a == a && q->b == b) return (int64_t)s->slots[j] - 1;
    }
    if (s->n_pairs >= UINT32_MAX - 1) return -1;
    if (fc_grow((void **)&s->p, &s->pairs_cap, s->n_pairs + 1, sizeof *s->p)) return -1;
    s->p[s->n_pairs] = (pair){a, b, 0, 0, 0, 0, 0};
    s->slots[j] = (uint32_t)(s->n_pairs + 1);
    return (int64_t)s->n_pairs++;
}

/* Puts word into pair i's list unless it was the last one added. */
static int list_add(state *s, size_t i, uint32_t word)
{
    pair *q = &s->p[i];
    if (q->last_word == word + 1) return 0;
    if (s->n_nodes >= UINT32_MAX - 1) return -1;
    if (fc_grow((void **)&s->nodes, &s->nodes_cap, s->n_nodes + 1, sizeof *s->nodes)) return -1;
    s->nodes[s->n_nodes] = (node){word, q->head};
    q->head = (uint32_t)(++s->n_nodes);
    q->last_word = word + 1;
    return 0;
}

/* x above y: the larger count; on equal counts the smaller (left, right). */
static int above(const state *s, const hentry *x, const hentry *y)
{
    if (x->count != y->count) return x->count > y->count;
    const pair *a = &s->p[x->pair], *b = &s->p[y->pair];
    return a->a != b->a ? a->a < b->a : a->b < b->b;
}

static int heap_push(state *s, uint32_t i)
{
    if (fc_grow((void **)&s->heap, &s->heap_cap, s->heap_n + 1, sizeof *s->heap)) return -1;
    hentry e = {s->p[i].count, i};
    size_t k = s->heap_n++;
    while (k > 0) {
        size_t up = (k - 1) / 2;
        if (!above(s, &e, &s->heap[up])) break;
        s->heap[k] = s->heap[up];
        k = up;
    }
    s->heap[k] = e;
    return 0;
}

static hentry heap_pop(state *s)
{
    hentry top = s->heap[0], last = s->heap[--s->heap_n];
    size_t k = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * k + 1;
        if (c >= n) break;
        if (c + 1 < n && above(s, &s->heap[c + 1], &s->heap[c])) c++;
        if (!above(s, &s->heap[c], &last)) break;
        s->heap[k] = s->heap[c];
        k = c;
    }
    if (n) s->heap[k] = last;
    return top;
}

/* Adds delta occurrences of every adjacent pair of word `wi` (weighted by its
 * count); with `fresh_id` >= 0, pairs involving that id get the word on their
 * list and go on the list of new pairs. */
static int add_word_pairs(state *s, uint32_t wi, int sign, int32_t fresh_id)
{
    const int32_t *sym = s->w->sym + s->w->off[wi];
    const uint32_t n = s->w->len[wi];
    const int64_t d = sign * s->w->count[wi];
    for (uint32_t k = 0; k + 1 < n; k++) {
        const int64_t i = pair_get(s, sym[k], sym[k + 1]);
        if (i < 0) return -1;
        s->p[i].count += d;
        if (fresh_id < 0 || (sym[k] != fresh_id && sym[k + 1] != fresh_id)) continue;
        if (list_add(s, (size_t)i, wi)) return -1;
        if (!s->p[i].fresh) {
            if (fc_grow((void **)&s->fresh, &s->fresh_cap, s->n_fresh + 1, sizeof *s->fresh)) return -1;
            s->fresh[s->n_fresh++] = (uint32_t)i;
            s->p[i].fresh = 1;
        }
    }
    return 0;
}

/* Replaces each (a, b) in the word by c, left to right; 1 when it held one. */
static int merge_word(fctt_words *w, uint32_t wi, int32_t a, int32_t b, int32_t c)
{
    int32_t *sym = w->sym + w->off[wi];
    const uint32_t n = w->len[wi];
    uint32_t o = 0, i = 0;
    int hit = 0;
    while (i < n) {
        if (i + 1 < n && sym[i] == a && sym[i + 1] == b) {
            sym[o++] = c;
            i += 2;
            hit = 1;
        } else {
            sym[o++] = sym[i++];
        }
    }
    w->len[wi] = o;
    return hit;
}

static int word_has(const fctt_words *w, uint32_t wi, int32_t a, int32_t b)
{
    const int32_t *sym = w->sym + w->off[wi];
    for (uint32_t k = 0; k + 1 < w->len[wi]; k++)
        if (sym[k] == a && sym[k + 1] == b) return 1;
    return 0;
}

static int tok_add(fctt_tokens *t, const unsigned char *p, size_t n)
{
    if (n > UINT32_MAX) return -1;
    if (fc_grow((void **)&t->bytes, &t->bytes_cap, t->n_bytes + n, 1)) return -1;
    size_t cap = t->cap;
    if (fc_grow((void **)&t->off, &cap, t->n + 1, sizeof *t->off)) return -1;
    if (cap != t->cap) {
        uint32_t *l = realloc(t->len, cap * sizeof *l);
        if (!l) return -1;
        t->len = l;
        t->cap = cap;
    }
    memcpy(t->bytes + t->n_bytes, p, n);
    t->off[t->n] = t->n_bytes;
    t->len[t->n] = (uint32_t)n;
    t->n_bytes += n;
    t->n++;
    return 0;
}

void fctt_tokens_free(fctt_tokens *t)
{
    free(t->bytes);
    free(t->off);
    free(t->len);
    memset(t, 0, sizeof *t);
}

static void state_free(state *s)
{
    free(s->p);
    free(s->slots);
    free(s->nodes);
    free(s->heap);
    free(s->fresh);
}

/* The words of the merge's list that still hold (a, b): re-count them around
 * the new token c. */
static int apply_merge(state *s, uint32_t pi, int32_t c, uint32_t *stamp)
{
    const int32_t a = s->p[pi].a, b = s->p[pi].b;
    s->n_fresh = 0;
    for (uint32_t nd = s->p[pi].head; nd; nd = s->nodes[nd - 1].next) {
        const uint32_t wi = s->nodes[nd - 1].word;
        if (stamp[wi] == (uint32_t)c) continue;
        stamp[wi] = (uint32_t)c;
        if (!word_has(s->w, wi, a, b)) continue;
        if (add_word_pairs(s, wi, -1, -1)) return -1;
        merge_word(s->w, wi, a, b, c);
        if (add_word_pairs(s, wi, +1, c)) return -1;
    }
    for (size_t k = 0; k < s->n_fresh; k++) {
        pair *q = &s->p[s->fresh[k]];
        q->fresh = 0;
        if (q->count > 0 && heap_push(s, s->fresh[k])) return -1;
    }
    return 0;
}

int fctt_bpe(fctt_words *w, int64_t max_merges, int64_t min_count, fctk_map *reserved, fctt_merge **merges,
             int64_t *n_merges, fctt_tokens *toks, int64_t *n_skipped)
{
    state s = {.w = w};
    fctt_merge *m = NULL;
    int64_t nm = 0, skipped = 0;
    unsigned char *cat = NULL;
    size_t cat_cap = 0;
    uint32_t *stamp = calloc(w->n ? w->n : 1, sizeof *stamp);
    memset(toks, 0, sizeof *toks);
    if (!stamp) goto oom;
    if (max_merges > 0 && !(m = malloc((size_t)max_merges * sizeof *m))) goto oom;
    for (unsigned b = 0; b < 256; b++) {
        const unsigned char byte = (unsigned char)b;
        if (tok_add(toks, &byte, 1)) goto oom;
    }
    if (w->n > UINT32_MAX - 1) goto oom;
    for (size_t wi = 0; wi < w->n; wi++) {
        const int32_t *sym = w->sym + w->off[wi];
        for (uint32_t k = 0; k + 1 < w->len[wi]; k++) {
            const int64_t i = pair_get(&s, sym[k], sym[k + 1]);
            if (i < 0 || list_add(&s, (size_t)i, (uint32_t)wi)) goto oom;
            s.p[i].count += w->count[wi];
        }
    }
    for (size_t i = 0; i < s.n_pairs; i++)
        if (heap_push(&s, (uint32_t)i)) goto oom;

    while (nm < max_merges && s.heap_n) {
        const hentry top = heap_pop(&s);
        pair *q = &s.p[top.pair];
        if (q->banned) continue;
        if (top.count != q->count) { /* stale: back with the true count */
            if (q->count > 0 && heap_push(&s, top.pair)) goto oom;
            continue;
        }
        if (top.count < min_count) break;
        const size_t la = toks->len[q->a], lb = toks->len[q->b];
        if (fc_grow((void **)&cat, &cat_cap, la + lb, 1)) goto oom;
        memcpy(cat, toks->bytes + toks->off[q->a], la);
        memcpy(cat + la, toks->bytes + toks->off[q->b], lb);
        const int32_t c = 256 + (int32_t)nm;
        const int r = fctk_map_put(reserved, cat, la + lb, 0, c, NULL);
        if (r < 0) goto oom;
        if (r == 0) { /* spelled like an existing token or a special */
            q->banned = 1;
            skipped++;
            continue;
        }
        if (tok_add(toks, cat, la + lb)) goto oom;
        m[nm++] = (fctt_merge){q->a, q->b};
        if (apply_merge(&s, top.pair, c, stamp)) goto oom;
    }
    state_free(&s);
    free(stamp);
    free(cat);
    *merges = m;
    *n_merges = nm;
    *n_skipped = skipped;
    return 0;
oom:
    state_free(&s);
    free(stamp);
    free(cat);
    free(m);
    fctt_tokens_free(toks);
    return -1;
}
