/* SPDX-License-Identifier: MIT */
/* Interned axis names: an open-addressing hash set of immutable strings
 * behind a mutex. Lookups of names already interned take the lock too; ops
 * intern their axis arguments once per call, which is cheap next to the op. */
#include "core/axis.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FC_AXIS_NAME_MAX 31

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char **g_slots;      /* hash set of interned names */
static size_t g_cap;        /* slots, a power of two */
static size_t g_count;
static const char *g_positional[8];
static pthread_once_t g_positional_once = PTHREAD_ONCE_INIT;

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int valid_name(const char *name, const char **why)
{
    size_t n = 0;
    if (!name) { if (why) *why = "the name is NULL"; return 0; }
    for (const char *p = name; *p; p++, n++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
        if (!ok) { if (why) *why = "axis names use only letters, digits, '_' and '.'"; return 0; }
        if (n >= FC_AXIS_NAME_MAX) { if (why) *why = "axis names are at most 31 bytes"; return 0; }
    }
    if (n == 0) { if (why) *why = "the name is empty"; return 0; }
    return 1;
}

/* Insert or find under the lock. Returns NULL on a full table or OOM. */
static const char *intern_locked(const char *name, const char **why)
{
    if (g_count * 2 >= g_cap) {
        size_t ncap = g_cap ? g_cap * 2 : 256;
        if (g_count >= FC_AXIS_TABLE_CAP) { if (why) *why = "too many distinct axis names (65536)"; return NULL; }
        char **ns = calloc(ncap, sizeof *ns);
        if (!ns) { if (why) *why = "out of memory"; return NULL; }
        for (size_t i = 0; i < g_cap; i++) {
            if (!g_slots[i]) continue;
            size_t j = (size_t)hash_name(g_slots[i]) & (ncap - 1);
            while (ns[j]) j = (j + 1) & (ncap - 1);
            ns[j] = g_slots[i];
        }
        free(g_slots);
        g_slots = ns;
        g_cap = ncap;
    }
    size_t j = (size_t)hash_name(name) & (g_cap - 1);
    while (g_slots[j]) {
        if (strcmp(g_slots[j], name) == 0) return g_slots[j];
        j = (j + 1) & (g_cap - 1);
    }
    size_t len = strlen(name);
    char *copy = malloc(len + 1);
    if (!copy) { if (why) *why = "out of memory"; return NULL; }
    memcpy(copy, name, len + 1);
    g_slots[j] = copy;
    g_count++;
    return copy;
}

static void init_positional_locked(void)
{
    static const char *const pos[8] = {"_0", "_1", "_2", "_3", "_4", "_5", "_6", "_7"};
    if (g_positional[0]) return;
    for (int i = 0; i < 8; i++) g_positional[i] = intern_locked(pos[i], NULL);
}

const char *fc_axis_intern(const char *name, const char **why)
{
    if (!valid_name(name, why)) return NULL;
    pthread_mutex_lock(&g_lock);
    init_positional_locked();
    const char *r = intern_locked(name, why);
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* The positional names are interned once; afterwards they are read without
 * the lock (pthread_once orders the writes before every later read). */
static void positional_once(void)
{
    pthread_mutex_lock(&g_lock);
    init_positional_locked();
    pthread_mutex_unlock(&g_lock);
}

const char *fc_axis_positional(int i)
{
    if (i < 0 || i >= 8) return NULL;
    pthread_once(&g_positional_once, positional_once);
    return g_positional[i];
}

int fc_axis_is_positional(const char *interned)
{
    pthread_once(&g_positional_once, positional_once);
    for (int i = 0; i < 8; i++)
        if (interned == g_positional[i]) return 1;
    return 0;
}
