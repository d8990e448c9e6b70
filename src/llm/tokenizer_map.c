/* SPDX-License-Identifier: MIT */
/* Fucina llm: the tokenizer's byte-string hash map (open addressing, linear
 * probing, keys in an arena; no deletion: vocabularies are built once). */
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "llm/tokenizer_internal.h"

uint64_t fctk_hash(const void *p, size_t len, uint32_t split) {
    /* FNV-1a over the bytes, then the split point mixed in, then a final
     * avalanche so the low bits used for the slot index are well spread. */
    uint64_t h = fc_fnv1a(FC_FNV1A_INIT, p, len);
    h ^= (uint64_t)split * 0x9e3779b97f4a7c15ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static int grow_slots(fctk_map *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t e = 0; e < m->n; e++) {
        size_t i = (size_t)m->entries[e].hash & (cap - 1);
        while (slots[i]) i = (i + 1) & (cap - 1);
        slots[i] = (uint32_t)(e + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

static int find_slot(const fctk_map *m, const void *key, size_t len, uint32_t split, uint64_t h, size_t *slot) {
    size_t i = (size_t)h & (m->cap - 1);
    for (;;) {
        uint32_t s = m->slots[i];
        if (!s) {
            *slot = i;
            return 0;
        }
        const struct fctk_entry *e = &m->entries[s - 1];
        if (e->hash == h && e->len == len && e->split == split && memcmp(m->arena + e->off, key, len) == 0) {
            *slot = i;
            return 1;
        }
        i = (i + 1) & (m->cap - 1);
    }
}

int fctk_map_put(fctk_map *m, const void *key, size_t len, uint32_t split, int32_t value, int32_t *existing) {
    if (len > UINT32_MAX) return -1;
    if ((m->n + 1) * 2 > m->cap && grow_slots(m) != 0) return -1;
    uint64_t h = fctk_hash(key, len, split);
    size_t slot;
    if (find_slot(m, key, len, split, h, &slot)) {
        if (existing) *existing = m->entries[m->slots[slot] - 1].value;
        return 0;
    }
    if (m->n == m->entries_cap) {
        size_t c = m->entries_cap ? m->entries_cap * 2 : 1024;
        void *p = realloc(m->entries, c * sizeof *m->entries);
        if (!p) return -1;
        m->entries = p;
        m->entries_cap = c;
    }
    if (m->arena_len + len > m->arena_cap) {
        size_t c = m->arena_cap ? m->arena_cap : 4096;
        while (c < m->arena_len + len) c *= 2;
        void *p = realloc(m->arena, c);
        if (!p) return -1;
        m->arena = p;
        m->arena_cap = c;
    }
    if (len) memcpy(m->arena + m->arena_len, key, len);
    m->entries[m->n] = (struct fctk_entry){h, m->arena_len, (uint32_t)len, split, value};
    m->arena_len += len;
    m->slots[slot] = (uint32_t)(m->n + 1);
    m->n++;
    return 1;
}

int32_t fctk_map_get(const fctk_map *m, const void *key, size_t len, uint32_t split) {
    if (!m->cap) return -1;
    size_t slot;
    if (!find_slot(m, key, len, split, fctk_hash(key, len, split), &slot)) return -1;
    return m->entries[m->slots[slot] - 1].value;
}

void fctk_map_free(fctk_map *m) {
    free(m->slots);
    free(m->entries);
    free(m->arena);
    memset(m, 0, sizeof *m);
}
