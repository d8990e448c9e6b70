/* SPDX-License-Identifier: MIT */
/* The grammar matcher: which bytes, and so which tokens, may come next.
 *
 * A parse in progress is a set of stacks. A stack is a chain of nodes; a
 * node is (pos, parent): "go on at element pos; when its alternative ends,
 * go on at the parent". Nodes are hash-consed, so equal stacks are one
 * node id and stacks share their tails. The top of every stack in a state
 * is a byte set (references are expanded eagerly, "closure"); node 0 is
 * the accepting node: the whole root rule has been matched.
 *
 * Tail calls: a reference that is the last element of its alternative
 * continues straight at the caller's parent, so `x*` (R ::= x R | "") and
 * long literals keep stacks flat and states repeat; states are interned
 * too (a sorted set of node ids), and each state caches its transition on
 * every byte and, once asked, its mask over the whole vocabulary. Inside a
 * JSON string, say, the state after one more character is the state before
 * it: after the first token, a mask there is a cache hit.
 *
 * The vocabulary is a byte trie laid out in preorder (a node's subtree is
 * the index range up to its `end`); a mask walks it once, skipping every
 * subtree whose prefix the grammar refuses.
 *
 * Bounds: stacks deeper than GM_MAX_DEPTH are dropped (a grammar that
 * nests deeper than that refuses the text); when the node or state tables
 * pass their caps the matcher rebuilds them from the current state alone. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ctx.h"
#include "llm/grammar_internal.h"
#include "llm/tokenizer_internal.h"

#define GM_NONE UINT32_MAX
#define GM_ACCEPT 0u
#define GM_DEAD (-1)
#define GM_UNKNOWN (-2)
#define GM_MAX_DEPTH 2048u
#define GM_MAX_NODES (1u << 20)
#define GM_MAX_STATES (1u << 14)
#define GM_MAX_MASKS 128u
#define GM_MAX_CLOSURE (1u << 22) /* nodes in all: past this a grammar's state is refused, not grown */

typedef struct gm_state {
    uint32_t off, n; /* node ids in pool[off, off + n), ascending */
    uint32_t hash;
    int32_t *trans;  /* 256 next states (GM_UNKNOWN, GM_DEAD or an index) */
    uint64_t *mask;  /* allowed tokens, once computed */
} gm_state;

/* A vocabulary's bytes and trie: built once per vocabulary and shared by
 * every matcher over it (vocab_get), read-only once built. */
typedef struct gm_vocab {
    int refs;     /* under g_vocab_mu */
    uint64_t key; /* the tokenizer's serial */
    int32_t n_vocab;
    char *bytes;
    uint32_t *tok_off, *tok_len; /* per token id; len 0: no text */
    /* the trie, preorder; node 0 is the root */
    uint32_t n_t;
    unsigned char *t_byte;
    uint16_t *t_depth;
    uint32_t *t_end, *t_tok0, *t_ntok;
    uint32_t *t_toks; /* token ids, grouped by trie node */
    uint32_t max_len;
} gm_vocab;

struct fc_grammar_matcher {
    fc_ctx *ctx;
    const fc_grammar *g;
    int32_t n_vocab;
    gm_vocab *v;
    uint64_t *eog_bits;
    uint32_t *depth_state; /* the mask walk's state per trie depth */
    /* stack nodes */
    uint32_t *n_pos, *n_parent, *n_mark;
    uint16_t *n_depth;
    uint32_t n_nodes, cap_nodes;
    uint32_t *nh; /* open addressing over node ids; 0 = empty (node 0 is never hashed) */
    uint32_t nh_cap;
    uint32_t stamp;
    /* states */
    gm_state *st;
    uint32_t n_st, cap_st;
    uint32_t *pool;
    size_t pool_n, pool_cap;
    uint32_t *sh; /* open addressing over state index + 1; 0 = empty */
    uint32_t sh_cap;
    uint32_t n_masks;
    /* the closure's output */
    uint32_t *tmp;
    size_t tmp_n, tmp_cap;
    int oom;    /* 1: out of memory, 2: a closure made more than GM_MAX_CLOSURE nodes */
    int broken; /* a failure left the tables unusable: every call refuses */
    /* a lazy grammar (fc_grammar_matcher_set_trigger): free text until the trigger */
    char *trigger;
    size_t n_trigger;
    int waiting;  /* the trigger has not been seen: nothing is constrained */
    char *tail;   /* the last n_trigger bytes of the text, where the trigger is looked for */
    size_t n_tail;
    uint32_t *work; /* the closure's work list: (pos, parent) pairs */
    size_t n_work, cap_work;
    uint32_t start, cur;
};

/* ---- nodes ---- */

static uint32_t hash2(uint32_t a, uint32_t b)
{
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static int gm_nodes_grow(fc_grammar_matcher *m)
{
    if (m->n_nodes < m->cap_nodes) return 0;
    uint32_t c = m->cap_nodes ? m->cap_nodes * 2 : 1024;
    uint32_t *p = realloc(m->n_pos, c * sizeof *p);
    if (p) m->n_pos = p;
    uint32_t *q = realloc(m->n_parent, c * sizeof *q);
    if (q) m->n_parent = q;
    uint32_t *k = realloc(m->n_mark, c * sizeof *k);
    if (k) m->n_mark = k;
    uint16_t *d = realloc(m->n_depth, c * sizeof *d);
    if (d) m->n_depth = d;
    if (!p || !q || !k || !d) return -1;
    m->cap_nodes = c;
    /* the hash table stays at most half full */
    uint32_t hc = m->nh_cap;
    while (hc < 2 * c) hc = hc ? hc * 2 : 2048;
    if (hc != m->nh_cap) {
        uint32_t *nh = calloc(hc, sizeof *nh);
        if (!nh) return -1;
        for (uint32_t i = 1; i < m->n_nodes; i++) {
            uint32_t h = hash2(m->n_pos[i], m->n_parent[i]) & (hc - 1);
            while (nh[h]) h = (h + 1) & (hc - 1);
            nh[h] = i;
        }
        free(m->nh);
        m->nh = nh;
        m->nh_cap = hc;
    }
    return 0;
}

/* The node (pos, parent); GM_NONE when it would be deeper than the cap or
 * memory ran out (m->oom). */
static uint32_t gm_node(fc_grammar_matcher *m, uint32_t pos, uint32_t parent)
{
    uint32_t depth = parent == GM_NONE ? 1 : m->n_depth[parent] + 1u;
    if (depth > GM_MAX_DEPTH) return GM_NONE;
    uint32_t h = hash2(pos, parent) & (m->nh_cap - 1);
    for (uint32_t id; (id = m->nh[h]) != 0; h = (h + 1) & (m->nh_cap - 1))
        if (m->n_pos[id] == pos && m->n_parent[id] == parent) return id;
    if (m->n_nodes >= GM_MAX_CLOSURE) {
        m->oom = 2;
        return GM_NONE;
    }
    if (gm_nodes_grow(m)) {
        m->oom = 1;
        return GM_NONE;
    }
    h = hash2(pos, parent) & (m->nh_cap - 1); /* the table may have been rebuilt */
    while (m->nh[h]) h = (h + 1) & (m->nh_cap - 1);
    uint32_t id = m->n_nodes++;
    m->n_pos[id] = pos;
    m->n_parent[id] = parent;
    m->n_mark[id] = 0;
    m->n_depth[id] = (uint16_t)depth;
    m->nh[h] = id;
    return id;
}

static void gm_push(fc_grammar_matcher *m, uint32_t id)
{
    if (m->tmp_n == m->tmp_cap) {
        size_t c = m->tmp_cap ? m->tmp_cap * 2 : 256;
        uint32_t *t = realloc(m->tmp, c * sizeof *t);
        if (!t) {
            m->oom = 1;
            return;
        }
        m->tmp = t;
        m->tmp_cap = c;
    }
    m->tmp[m->tmp_n++] = id;
}

static void gm_work(fc_grammar_matcher *m, uint32_t pos, uint32_t parent)
{
    if (m->n_work + 2 > m->cap_work) {
        size_t c = m->cap_work ? m->cap_work * 2 : 256;
        uint32_t *w = realloc(m->work, c * sizeof *w);
        if (!w) {
            m->oom = 1;
            return;
        }
        m->work = w;
        m->cap_work = c;
    }
    m->work[m->n_work++] = pos;
    m->work[m->n_work++] = parent;
}

/* Add to tmp every terminal node reachable from "go on at pos, then
 * parent". A work list, not recursion: a closure may visit a million nodes
 * (x{0,100000} of a nullable x walks its whole nest), which would overflow
 * the C stack of a server thread. */
static void gm_expand(fc_grammar_matcher *m, uint32_t pos0, uint32_t parent0)
{
    const fc_grammar *g = m->g;
    m->n_work = 0;
    gm_work(m, pos0, parent0);
    while (m->n_work && !m->oom) {
        const uint32_t parent = m->work[--m->n_work], pos = m->work[--m->n_work];
        const uint32_t id = gm_node(m, pos, parent);
        if (id == GM_NONE || m->n_mark[id] == m->stamp) continue;
        m->n_mark[id] = m->stamp;
        const ge e = g->el[pos];
        switch ((ge_kind)e.kind) {
        case GE_BYTES: gm_push(m, id); break;
        case GE_END:
            if (parent != GM_NONE) gm_work(m, m->n_pos[parent], m->n_parent[parent]);
            else if (m->n_mark[GM_ACCEPT] != m->stamp) {
                m->n_mark[GM_ACCEPT] = m->stamp;
                gm_push(m, GM_ACCEPT);
            }
            break;
        case GE_RULE: {
            uint32_t cont = parent;
            if (g->el[pos + 1].kind != GE_END) {
                cont = gm_node(m, pos + 1, parent);
                if (cont == GM_NONE) break;
            }
            const uint32_t a0 = g->rule_alt0[e.arg], na = g->rule_nalt[e.arg];
            for (uint32_t a = na; a-- > 0;) gm_work(m, g->alt[a0 + a], cont);
            break;
        }
        }
    }
}

static void gm_stamp(fc_grammar_matcher *m)
{
    if (++m->stamp == 0) { /* wrapped: clear every mark once */
        memset(m->n_mark, 0, m->n_nodes * sizeof *m->n_mark);
        m->stamp = 1;
    }
}

/* ---- states ---- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t hash_ids(const uint32_t *ids, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ids[i]) * 0x100000001B3ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* The state holding tmp[0..tmp_n) (sorted here); GM_DEAD when empty, -3 on
 * out of memory. */
static int32_t gm_intern(fc_grammar_matcher *m)
{
    if (m->oom) return -3;
    if (m->tmp_n == 0) return GM_DEAD;
    qsort(m->tmp, m->tmp_n, sizeof *m->tmp, cmp_u32);
    uint32_t h = hash_ids(m->tmp, m->tmp_n);
    uint32_t slot = h & (m->sh_cap - 1);
    for (uint32_t v; (v = m->sh[slot]) != 0; slot = (slot + 1) & (m->sh_cap - 1)) {
        gm_state *s = &m->st[v - 1];
        if (s->hash == h && s->n == m->tmp_n && memcmp(m->pool + s->off, m->tmp, m->tmp_n * sizeof *m->tmp) == 0)
            return (int32_t)(v - 1);
    }
    if (m->n_st == m->cap_st) {
        uint32_t c = m->cap_st * 2;
        gm_state *s = realloc(m->st, c * sizeof *s);
        if (!s) return -3;
        m->st = s;
        m->cap_st = c;
        uint32_t hc = 2 * c;
        uint32_t *sh = calloc(hc, sizeof *sh);
        if (!sh) return -3;
        for (uint32_t i = 0; i < m->n_st; i++) {
            uint32_t k = m->st[i].hash & (hc - 1);
            while (sh[k]) k = (k + 1) & (hc - 1);
            sh[k] = i + 1;
        }
        free(m->sh);
        m->sh = sh;
        m->sh_cap = hc;
        slot = h & (hc - 1);
        while (m->sh[slot]) slot = (slot + 1) & (hc - 1);
    }
    if (m->pool_n + m->tmp_n > m->pool_cap) {
        size_t c = m->pool_cap * 2;
        while (c < m->pool_n + m->tmp_n) c *= 2;
        uint32_t *p = realloc(m->pool, c * sizeof *p);
        if (!p) return -3;
        m->pool = p;
        m->pool_cap = c;
    }
    memcpy(m->pool + m->pool_n, m->tmp, m->tmp_n * sizeof *m->tmp);
    gm_state *s = &m->st[m->n_st];
    *s = (gm_state){.off = (uint32_t)m->pool_n, .n = (uint32_t)m->tmp_n, .hash = h};
    m->pool_n += m->tmp_n;
    m->sh[slot] = m->n_st + 1;
    return (int32_t)m->n_st++;
}

/* The state after byte b from state sid: an index, GM_DEAD, or -3 (out of
 * memory). */
static int32_t gm_step(fc_grammar_matcher *m, uint32_t sid, unsigned b)
{
    gm_state *s = &m->st[sid];
    if (!s->trans) {
        s->trans = malloc(256 * sizeof *s->trans);
        if (!s->trans) return -3;
        for (int i = 0; i < 256; i++) s->trans[i] = GM_UNKNOWN;
    }
    if (s->trans[b] != GM_UNKNOWN) return s->trans[b];
    const fc_grammar *g = m->g;
    m->tmp_n = 0;
    gm_stamp(m);
    uint32_t off = s->off, n = s->n;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id = m->pool[off + k];
        if (id == GM_ACCEPT) continue;
        uint32_t pos = m->n_pos[id];
        if (ge_set_has(&g->sets[g->el[pos].arg], b)) gm_expand(m, pos + 1, m->n_parent[id]);
    }
    int32_t r = gm_intern(m);
    if (r == -3) return r;
    m->st[sid].trans[b] = r; /* m->st may have moved */
    return r;
}

static int gm_start_state(fc_grammar_matcher *m)
{
    m->tmp_n = 0;
    gm_stamp(m);
    const fc_grammar *g = m->g;
    uint32_t a0 = g->rule_alt0[g->root], na = g->rule_nalt[g->root];
    for (uint32_t a = 0; a < na; a++) gm_expand(m, g->alt[a0 + a], GM_NONE);
    int32_t r = gm_intern(m);
    if (r == -3) return -1;
    int any = 0; /* some byte can be taken, or the empty text is a sentence */
    for (size_t k = 0; r >= 0 && k < m->st[r].n && !any; k++) {
        uint32_t id = m->pool[m->st[r].off + k];
        const ge_set *set = id == GM_ACCEPT ? NULL : &g->sets[g->el[m->n_pos[id]].arg];
        any = !set || (set->w[0] | set->w[1] | set->w[2] | set->w[3]) != 0;
    }
    if (!any) { /* a root that matches nothing at all, e.g. root ::= [] */
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "grammar: the start rule '%s' can match no text at all",
                g->rule_name[g->root]);
        return -1;
    }
    m->start = (uint32_t)r;
    return 0;
}

static void gm_tables_free(fc_grammar_matcher *m)
{
    for (uint32_t i = 0; i < m->n_st; i++) {
        free(m->st[i].trans);
        free(m->st[i].mask);
    }
    m->n_st = 0;
    m->pool_n = 0;
    m->n_masks = 0;
    if (m->sh) memset(m->sh, 0, m->sh_cap * sizeof *m->sh);
    if (m->nh) memset(m->nh, 0, m->nh_cap * sizeof *m->nh);
    m->n_nodes = 1; /* node 0: accept */
}

/* Rebuild every table from the current state alone (each of its stacks
 * re-interned from the bottom up). */
static int gm_compact(fc_grammar_matcher *m)
{
    gm_state *s = &m->st[m->cur];
    size_t total = 0;
    for (uint32_t k = 0; k < s->n; k++) total += m->pool[s->off + k] == GM_ACCEPT ? 1 : m->n_depth[m->pool[s->off + k]];
    uint32_t *chains = malloc((total + s->n + 1) * sizeof *chains); /* per stack: length, positions top-down */
    if (!chains) return -1;
    size_t w = 0;
    for (uint32_t k = 0; k < s->n; k++) {
        uint32_t id = m->pool[s->off + k];
        if (id == GM_ACCEPT) {
            chains[w++] = 0;
            continue;
        }
        size_t at = w++;
        uint32_t len = 0;
        for (; id != GM_NONE; id = m->n_parent[id]) chains[w++] = m->n_pos[id], len++;
        chains[at] = len;
    }
    uint32_t n_stacks = s->n;
    gm_tables_free(m);
    m->tmp_n = 0;
    size_t r = 0;
    for (uint32_t k = 0; k < n_stacks; k++) {
        uint32_t len = chains[r++];
        if (len == 0) {
            gm_push(m, GM_ACCEPT);
            continue;
        }
        uint32_t parent = GM_NONE;
        for (uint32_t j = len; j-- > 0;) parent = gm_node(m, chains[r + j], parent);
        r += len;
        if (parent == GM_NONE) m->oom = 1;
        gm_push(m, parent);
    }
    free(chains);
    int32_t cur = gm_intern(m);
    if (cur < 0) return -1;
    m->cur = (uint32_t)cur;
    return gm_start_state(m);
}

/* ---- the vocabulary ---- */

typedef struct tok_key {
    const char *b;
    uint32_t len, id;
} tok_key;

/* Bytes, then shorter first (a prefix sorts before its extensions), then id. */
static int cmp_tok(const void *a, const void *b)
{
    const tok_key *x = a, *y = b;
    int c = memcmp(x->b, y->b, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int vocab_build(gm_vocab *v, fc_ctx *ctx, const fc_tokenizer *tok)
{
    int32_t nv = v->n_vocab;
    v->tok_off = calloc((size_t)nv, sizeof *v->tok_off);
    v->tok_len = calloc((size_t)nv, sizeof *v->tok_len);
    size_t total = 0, cap = 1 << 20;
    v->bytes = malloc(cap);
    if (!v->tok_off || !v->tok_len || !v->bytes) return -1;
    uint32_t n_tok = 0;
    for (int32_t t = 0; t < nv; t++) {
        const char *p;
        size_t len;
        /* a control token is never text: its bytes are the ones only a token element matches */
        const int control = fc_tokenizer_token_type(tok, t) == FC_TOKEN_TYPE_CONTROL;
        if (fc_token_piece(ctx, tok, t, control, &p, &len) != FC_OK) return -2;
        if (len == 0) continue;
        if (len > UINT16_MAX - 2) continue; /* no grammar text is produced by such a token */
        int dead = 0; /* a byte no code point's UTF-8 has: no grammar can take the token */
        for (size_t i = 0; i < len && !dead; i++) dead = (unsigned char)p[i] >= GE_FIRST_NON_UTF8;
        if (dead) continue;
        const size_t nb = len + (control ? 2 : 0);
        if (total + nb > cap) {
            while (total + nb > cap) cap *= 2;
            char *b = realloc(v->bytes, cap);
            if (!b) return -1;
            v->bytes = b;
        }
        if (control) {
            v->bytes[total] = (char)GE_TOKEN_OPEN;
            memcpy(v->bytes + total + 1, p, len);
            v->bytes[total + 1 + len] = (char)GE_TOKEN_CLOSE;
            len = nb;
        } else {
            memcpy(v->bytes + total, p, len);
        }
        v->tok_off[t] = (uint32_t)total;
        v->tok_len[t] = (uint32_t)len;
        total += len;
        n_tok++;
        if (len > v->max_len) v->max_len = (uint32_t)len;
    }
    uint32_t *order = malloc((n_tok ? n_tok : 1) * sizeof *order);
    tok_key *keys = malloc((n_tok ? n_tok : 1) * sizeof *keys);
    if (!order || !keys) {
        free(order);
        free(keys);
        return -1;
    }
    uint32_t k = 0;
    for (int32_t t = 0; t < nv; t++)
        if (v->tok_len[t]) keys[k++] = (tok_key){v->bytes + v->tok_off[t], v->tok_len[t], (uint32_t)t};
    qsort(keys, n_tok, sizeof *keys, cmp_tok);
    for (uint32_t i = 0; i < n_tok; i++) order[i] = keys[i].id;
    free(keys);
    /* at most one node per byte of every token, plus the root */
    size_t cap_t = 1;
    for (uint32_t i = 0; i < n_tok; i++) cap_t += v->tok_len[order[i]];
    v->t_byte = malloc(cap_t);
    v->t_depth = malloc(cap_t * sizeof *v->t_depth);
    v->t_end = malloc(cap_t * sizeof *v->t_end);
    v->t_tok0 = malloc(cap_t * sizeof *v->t_tok0);
    v->t_ntok = calloc(cap_t, sizeof *v->t_ntok);
    v->t_toks = order;
    uint32_t *path = malloc((v->max_len + 1) * sizeof *path);
    if (!v->t_byte || !v->t_depth || !v->t_end || !v->t_tok0 || !v->t_ntok || !path) {
        free(path);
        return -1;
    }
    uint32_t n = 1, depth = 0; /* path[0..depth] is the open chain */
    v->t_byte[0] = 0, v->t_depth[0] = 0, v->t_tok0[0] = 0;
    path[0] = 0;
    const char *prev = NULL;
    uint32_t prev_len = 0;
    for (uint32_t i = 0; i < n_tok; i++) {
        uint32_t t = order[i], len = v->tok_len[t];
        const char *b = v->bytes + v->tok_off[t];
        uint32_t lcp = 0;
        while (prev && lcp < len && lcp < prev_len && b[lcp] == prev[lcp]) lcp++;
        while (depth > lcp) v->t_end[path[depth--]] = n; /* close the nodes below the common prefix */
        for (; depth < len; depth++) {
            v->t_byte[n] = (unsigned char)b[depth];
            v->t_depth[n] = (uint16_t)(depth + 1);
            v->t_tok0[n] = i;
            v->t_ntok[n] = 0;
            path[depth + 1] = n++;
        }
        if (v->t_ntok[path[len]] == 0) v->t_tok0[path[len]] = i;
        v->t_ntok[path[len]]++;
        prev = b, prev_len = len;
    }
    while (depth > 0) v->t_end[path[depth--]] = n;
    v->t_end[0] = n;
    v->n_t = n;
    free(path);
    return 0;
}

static void vocab_free(gm_vocab *v)
{
    if (!v) return;
    free(v->bytes), free(v->tok_off), free(v->tok_len);
    free(v->t_byte), free(v->t_depth), free(v->t_end), free(v->t_tok0), free(v->t_ntok), free(v->t_toks);
    free(v);
}

/* The cache: a few vocabularies (a server's model, a test's), each kept
 * while the cache or a matcher holds it. Keyed by the tokenizer's serial,
 * not its address: a freed tokenizer's address may come back holding
 * another vocabulary. */
#define GM_VOCAB_CACHE 4
static pthread_mutex_t g_vocab_mu = PTHREAD_MUTEX_INITIALIZER;
static gm_vocab *g_vocab[GM_VOCAB_CACHE];
static uint64_t g_vocab_tick[GM_VOCAB_CACHE], g_tick;

/* A tokenizer's identity: its serial (unique in the process, unlike its address). */
static uint64_t vocab_key(const fc_tokenizer *tok) { return tok->serial; }

static void vocab_release(gm_vocab *v)
{
    if (!v) return;
    pthread_mutex_lock(&g_vocab_mu);
    const int last = --v->refs == 0;
    pthread_mutex_unlock(&g_vocab_mu);
    if (last) vocab_free(v);
}

/* The vocabulary of tok, shared (a reference the caller releases); NULL:
 * -1 out of memory, -2 the tokenizer failed (error in ctx). */
static gm_vocab *vocab_get(fc_ctx *ctx, const fc_tokenizer *tok, int *why)
{
    const int32_t nv = fc_tokenizer_n_vocab(tok);
    const uint64_t key = vocab_key(tok);
    pthread_mutex_lock(&g_vocab_mu);
    for (int i = 0; i < GM_VOCAB_CACHE; i++)
        if (g_vocab[i] && g_vocab[i]->key == key && g_vocab[i]->n_vocab == nv) {
            gm_vocab *v = g_vocab[i];
            v->refs++;
            g_vocab_tick[i] = ++g_tick;
            pthread_mutex_unlock(&g_vocab_mu);
            return v;
        }
    pthread_mutex_unlock(&g_vocab_mu);
    /* built outside the lock: two threads may build the same one; the second is dropped */
    gm_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        *why = -1;
        return NULL;
    }
    v->n_vocab = nv, v->key = key, v->refs = 1;
    const int rc = vocab_build(v, ctx, tok);
    if (rc) {
        vocab_free(v);
        *why = rc;
        return NULL;
    }
    pthread_mutex_lock(&g_vocab_mu);
    int slot = 0;
    for (int i = 0; i < GM_VOCAB_CACHE; i++) {
        if (g_vocab[i] && g_vocab[i]->key == key && g_vocab[i]->n_vocab == nv) { /* built meanwhile */
            gm_vocab *w = g_vocab[i];
            w->refs++;
            pthread_mutex_unlock(&g_vocab_mu);
            vocab_free(v);
            return w;
        }
        if (!g_vocab[i] || g_vocab_tick[i] < g_vocab_tick[slot]) slot = i;
        if (!g_vocab[slot]) break;
    }
    gm_vocab *old = g_vocab[slot];
    g_vocab[slot] = v;
    g_vocab_tick[slot] = ++g_tick;
    v->refs++; /* the cache's */
    const int drop = old && --old->refs == 0;
    pthread_mutex_unlock(&g_vocab_mu);
    if (drop) vocab_free(old);
    return v;
}

/* ---- the public calls ---- */

void fc_grammar_matcher_free(fc_grammar_matcher *m)
{
    if (!m) return;
    gm_tables_free(m);
    free(m->st);
    free(m->pool);
    free(m->sh);
    free(m->nh);
    free(m->n_pos), free(m->n_parent), free(m->n_mark), free(m->n_depth);
    free(m->tmp);
    free(m->work);
    free(m->trigger);
    free(m->tail);
    free(m->eog_bits);
    vocab_release(m->v);
    free(m->depth_state);
    free(m);
}

fc_grammar_matcher *fc_grammar_matcher_new(fc_ctx *ctx, const fc_grammar *g, const fc_tokenizer *tok,
                                           const fc_token *eog, size_t n_eog)
{
    const char *fn = "fc_grammar_matcher_new";
    if (!g || !tok) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: %s is NULL", fn, g ? "tok" : "g");
    if (n_eog && !eog) return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: eog is NULL with n_eog %zu", fn, n_eog);
    fc_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
    m->ctx = ctx;
    m->g = g;
    m->n_vocab = fc_tokenizer_n_vocab(tok);
    size_t words = ((size_t)m->n_vocab + 63) / 64;
    m->eog_bits = calloc(words ? words : 1, sizeof *m->eog_bits);
    if (!m->eog_bits) goto oom;
    fc_token eos = fc_tokenizer_eos(tok);
    if (n_eog == 0 && eos != FC_TOKEN_NONE) eog = &eos, n_eog = 1;
    for (size_t i = 0; i < n_eog; i++) {
        if (eog[i] < 0 || eog[i] >= m->n_vocab) {
            fc_grammar_matcher_free(m);
            return fc_fail(ctx, FC_ERR_INVALID_ARG, "%s: end token %d is outside the vocabulary [0, %d)", fn,
                           (int)eog[i], (int)m->n_vocab);
        }
        m->eog_bits[eog[i] >> 6] |= 1ull << (eog[i] & 63);
    }
    int why = 0;
    m->v = vocab_get(ctx, tok, &why);
    if (!m->v && why == -2) {
        fc_grammar_matcher_free(m);
        return NULL;
    }
    if (!m->v) goto oom;
    m->depth_state = malloc((m->v->max_len + 1) * sizeof *m->depth_state);
    if (!m->depth_state) goto oom;
    m->cap_st = 64;
    m->sh_cap = 128;
    m->pool_cap = 1024;
    m->st = malloc(m->cap_st * sizeof *m->st);
    m->sh = calloc(m->sh_cap, sizeof *m->sh);
    m->pool = malloc(m->pool_cap * sizeof *m->pool);
    if (!m->st || !m->sh || !m->pool || gm_nodes_grow(m)) goto oom;
    m->n_nodes = 1; /* node 0: accept; never hashed */
    m->n_pos[0] = GM_NONE, m->n_parent[0] = GM_NONE, m->n_mark[0] = 0, m->n_depth[0] = 0;
    if (gm_start_state(m)) {
        if (m->oom == 2) {
            fc_grammar_matcher_free(m);
            return fc_fail(ctx, FC_ERR_UNSUPPORTED, "%s: the grammar's start state grew past %u nodes (too much nesting "
                                                    "or ambiguity)", fn, GM_MAX_CLOSURE);
        }
        if (m->oom) goto oom;
        fc_grammar_matcher_free(m);
        return NULL;
    }
    m->cur = m->start;
    return m;
oom:
    fc_grammar_matcher_free(m);
    return fc_fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
}

void fc_grammar_matcher_reset(fc_grammar_matcher *m)
{
    if (!m) return;
    m->cur = m->start;
    m->waiting = m->trigger != NULL;
    m->n_tail = 0;
}

fc_status fc_grammar_matcher_set_trigger(fc_grammar_matcher *m, const char *trigger)
{
    if (!m) return FC_ERR_INVALID_ARG;
    if (trigger && !trigger[0]) {
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "fc_grammar_matcher_set_trigger: the trigger is empty");
        return FC_ERR_INVALID_ARG;
    }
    char *t = trigger ? strdup(trigger) : NULL, *tail = trigger ? malloc(strlen(trigger)) : NULL;
    if (trigger && (!t || !tail)) {
        free(t), free(tail);
        fc_fail(m->ctx, FC_ERR_OOM, "fc_grammar_matcher_set_trigger: out of memory");
        return FC_ERR_OOM;
    }
    free(m->trigger), free(m->tail);
    m->trigger = t, m->tail = tail, m->n_trigger = t ? strlen(t) : 0;
    fc_grammar_matcher_reset(m);
    return FC_OK;
}

static int32_t gm_walk(fc_grammar_matcher *m, const unsigned char *b, size_t n, size_t *at);
static fc_status gm_oom(fc_grammar_matcher *m, const char *fn);
static fc_status gm_maybe_compact(fc_grammar_matcher *m, const char *fn);

/* Free text while waiting: look for the trigger across what came before and
 * b; once it is there, the grammar holds from its first byte (the trigger
 * and what follows it in b are fed). */
static fc_status gm_lazy_feed(fc_grammar_matcher *m, const char *b, size_t n, const char *fn)
{
    const size_t nt = m->n_trigger;
    for (size_t i = 0; i < n; i++) {
        if (m->n_tail == nt) memmove(m->tail, m->tail + 1, --m->n_tail);
        m->tail[m->n_tail++] = b[i];
        if (m->n_tail < nt || memcmp(m->tail, m->trigger, nt)) continue;
        size_t at = 0;
        int32_t s = gm_walk(m, (const unsigned char *)m->trigger, nt, &at);
        if (s >= 0) {
            m->cur = (uint32_t)s;
            s = gm_walk(m, (const unsigned char *)b + i + 1, n - i - 1, &at);
        }
        if (s == -3) return gm_oom(m, fn);
        if (s < 0) {
            m->cur = m->start;
            fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: the grammar refuses the text from its trigger '%s' on", fn,
                    m->trigger);
            return FC_ERR_INVALID_ARG;
        }
        m->cur = (uint32_t)s;
        m->waiting = 0;
        return gm_maybe_compact(m, fn);
    }
    return FC_OK;
}

static int gm_is_eog(const fc_grammar_matcher *m, fc_token t)
{
    return (int)((m->eog_bits[t >> 6] >> (t & 63)) & 1u);
}

bool fc_grammar_matcher_complete(const fc_grammar_matcher *m)
{
    if (!m || m->broken) return false;
    if (m->waiting) return true; /* free text may end anywhere */
    const gm_state *s = &m->st[m->cur];
    return s->n > 0 && m->pool[s->off] == GM_ACCEPT;
}

bool fc_grammar_matcher_done(const fc_grammar_matcher *m)
{
    if (!m || m->broken || m->waiting) return false;
    const gm_state *s = &m->st[m->cur];
    return s->n == 1 && m->pool[s->off] == GM_ACCEPT;
}

/* Walk bytes from the current state: the final state, GM_DEAD with *at the
 * offset of the refused byte, or -3. */
static int32_t gm_walk(fc_grammar_matcher *m, const unsigned char *b, size_t n, size_t *at)
{
    int32_t s = (int32_t)m->cur;
    for (size_t i = 0; i < n; i++) {
        s = gm_step(m, (uint32_t)s, b[i]);
        if (s < 0) {
            if (at) *at = i;
            return s;
        }
    }
    return s;
}

/* A failure in the middle of a step leaves half-built tables: the matcher
 * refuses every later call rather than guess. */
static fc_status gm_oom(fc_grammar_matcher *m, const char *fn)
{
    m->broken = 1;
    if (m->oom == 2) {
        fc_fail(m->ctx, FC_ERR_UNSUPPORTED, "%s: the grammar's state grew past %u nodes (too much nesting or ambiguity)",
                fn, GM_MAX_CLOSURE);
        return FC_ERR_UNSUPPORTED;
    }
    fc_fail(m->ctx, FC_ERR_OOM, "%s: out of memory for the grammar's state", fn);
    return FC_ERR_OOM;
}

static int gm_refuse(fc_grammar_matcher *m, const char *fn)
{
    if (!m->broken) return 0;
    fc_fail(m->ctx, FC_ERR_STATE, "%s: the matcher failed earlier and cannot go on", fn);
    return 1;
}

int fc_grammar_matcher_allows(fc_grammar_matcher *m, fc_token token)
{
    if (!m || gm_refuse(m, "fc_grammar_matcher_allows")) return -1;
    if (token < 0 || token >= m->n_vocab) return 0;
    if (m->waiting) return 1;
    if (gm_is_eog(m, token)) return fc_grammar_matcher_complete(m);
    if (m->v->tok_len[token] == 0) return 0;
    int32_t s = gm_walk(m, (const unsigned char *)m->v->bytes + m->v->tok_off[token], m->v->tok_len[token], NULL);
    if (s == -3) {
        gm_oom(m, "fc_grammar_matcher_allows");
        return -1;
    }
    return s >= 0;
}

static fc_status gm_maybe_compact(fc_grammar_matcher *m, const char *fn)
{
    if (m->n_nodes < GM_MAX_NODES && m->n_st < GM_MAX_STATES) return FC_OK;
    return gm_compact(m) ? gm_oom(m, fn) : FC_OK;
}

fc_status fc_grammar_matcher_accept(fc_grammar_matcher *m, fc_token token)
{
    const char *fn = "fc_grammar_matcher_accept";
    if (!m) return FC_ERR_INVALID_ARG;
    if (gm_refuse(m, fn)) return FC_ERR_STATE;
    if (token < 0 || token >= m->n_vocab) {
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: token %d is outside the vocabulary [0, %d)", fn, (int)token,
                (int)m->n_vocab);
        return FC_ERR_INVALID_ARG;
    }
    if (m->waiting) {
        const gm_vocab *v = m->v;
        if (gm_is_eog(m, token)) return FC_OK;
        const char *b = v->bytes + v->tok_off[token];
        const size_t n = v->tok_len[token];
        if (n >= 2 && (unsigned char)b[0] == GE_TOKEN_OPEN) {
            /* a control token: the trigger when its text is the trigger, fed as the token it is;
             * otherwise not text, so no text trigger spans it */
            m->n_tail = 0;
            if (n - 2 != m->n_trigger || memcmp(b + 1, m->trigger, m->n_trigger)) return FC_OK;
            int32_t s = gm_walk(m, (const unsigned char *)b, n, NULL);
            if (s == -3) return gm_oom(m, fn);
            if (s < 0) {
                fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: the grammar refuses its trigger token '%s'", fn, m->trigger);
                return FC_ERR_INVALID_ARG;
            }
            m->cur = (uint32_t)s;
            m->waiting = 0;
            return gm_maybe_compact(m, fn);
        }
        return gm_lazy_feed(m, b, n, fn);
    }
    if (gm_is_eog(m, token)) {
        if (fc_grammar_matcher_complete(m)) return FC_OK;
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: end token %d before the grammar is complete", fn, (int)token);
        return FC_ERR_INVALID_ARG;
    }
    if (m->v->tok_len[token] == 0) {
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: token %d has no text a grammar can hold", fn,
                (int)token);
        return FC_ERR_INVALID_ARG;
    }
    int32_t s = gm_walk(m, (const unsigned char *)m->v->bytes + m->v->tok_off[token], m->v->tok_len[token], NULL);
    if (s == -3) return gm_oom(m, fn);
    if (s < 0) {
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: token %d is not allowed by the grammar here", fn, (int)token);
        return FC_ERR_INVALID_ARG;
    }
    m->cur = (uint32_t)s;
    return gm_maybe_compact(m, fn);
}

fc_status fc_grammar_matcher_accept_bytes(fc_grammar_matcher *m, const char *bytes, size_t n)
{
    const char *fn = "fc_grammar_matcher_accept_bytes";
    if (!m) return FC_ERR_INVALID_ARG;
    if (gm_refuse(m, fn)) return FC_ERR_STATE;
    if (!bytes && n) {
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
        return FC_ERR_INVALID_ARG;
    }
    if (m->waiting) return gm_lazy_feed(m, bytes, n, fn);
    size_t at = 0;
    int32_t s = gm_walk(m, (const unsigned char *)bytes, n, &at);
    if (s == -3) return gm_oom(m, fn);
    if (s < 0) {
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: the grammar refuses byte %zu (0x%02X)", fn, at,
                (unsigned)(unsigned char)bytes[at]);
        return FC_ERR_INVALID_ARG;
    }
    m->cur = (uint32_t)s;
    return gm_maybe_compact(m, fn);
}

/* The allowed-token bitmap of state sid (cached); NULL on out of memory. */
static const uint64_t *gm_mask_bits(fc_grammar_matcher *m, uint32_t sid)
{
    if (m->st[sid].mask) return m->st[sid].mask;
    if (m->n_masks >= GM_MAX_MASKS) { /* drop every cached mask but none of the transitions */
        for (uint32_t i = 0; i < m->n_st; i++) {
            free(m->st[i].mask);
            m->st[i].mask = NULL;
        }
        m->n_masks = 0;
    }
    size_t words = ((size_t)m->n_vocab + 63) / 64;
    uint64_t *bits = calloc(words ? words : 1, sizeof *bits);
    if (!bits) return NULL;
    m->depth_state[0] = sid;
    for (uint32_t i = 1; i < m->v->n_t;) {
        uint32_t d = m->v->t_depth[i];
        int32_t s = gm_step(m, m->depth_state[d - 1], m->v->t_byte[i]);
        if (s == -3) {
            free(bits);
            return NULL;
        }
        if (s < 0) {
            i = m->v->t_end[i];
            continue;
        }
        m->depth_state[d] = (uint32_t)s;
        for (uint32_t k = 0; k < m->v->t_ntok[i]; k++) {
            uint32_t t = m->v->t_toks[m->v->t_tok0[i] + k];
            bits[t >> 6] |= 1ull << (t & 63);
        }
        i++;
    }
    /* an end token is an end token, whatever its bytes: allowed exactly when
     * the text is complete (as allows() and accept() judge it) */
    const gm_state *st = &m->st[sid];
    const int accepting = st->n > 0 && m->pool[st->off] == GM_ACCEPT;
    for (size_t w = 0; w < words; w++) bits[w] = accepting ? bits[w] | m->eog_bits[w] : bits[w] & ~m->eog_bits[w];
    m->st[sid].mask = bits;
    m->n_masks++;
    return bits;
}

fc_status fc_grammar_matcher_mask(fc_grammar_matcher *m, float *logits, int32_t n_vocab)
{
    const char *fn = "fc_grammar_matcher_mask";
    if (!m) return FC_ERR_INVALID_ARG;
    if (gm_refuse(m, fn)) return FC_ERR_STATE;
    if (m->waiting) return FC_OK; /* free text: nothing is masked */
    if (!logits || n_vocab < 0) {
        fc_fail(m->ctx, FC_ERR_INVALID_ARG, "%s: %s", fn, logits ? "n_vocab is negative" : "logits is NULL");
        return FC_ERR_INVALID_ARG;
    }
    const uint64_t *bits = gm_mask_bits(m, m->cur);
    if (!bits) return gm_oom(m, fn);
    int32_t n = n_vocab < m->n_vocab ? n_vocab : m->n_vocab;
    for (int32_t t = 0; t < n; t++)
        if (!((bits[t >> 6] >> (t & 63)) & 1u)) logits[t] = -INFINITY;
    for (int32_t t = n; t < n_vocab; t++) logits[t] = -INFINITY;
    return FC_OK;
}

static int filter_allows(void *user, fc_token token) { return fc_grammar_matcher_allows(user, token); }

static int filter_mask(void *user, float *logits, int32_t n_vocab)
{
    return fc_grammar_matcher_mask(user, logits, n_vocab) == FC_OK ? 0 : -1;
}

fc_token_filter fc_grammar_matcher_filter(fc_grammar_matcher *m)
{
    fc_token_filter f = {.user = m, .allows = filter_allows, .mask = filter_mask};
    return f;
}
