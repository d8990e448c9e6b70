/* SPDX-License-Identifier: MIT */
/* Fucina core: growing a malloc'd array (internal). */
#ifndef FC_CORE_GROW_H
#define FC_CORE_GROW_H

#include <stdlib.h>

/* Make *p (of *cap elements of elem bytes) hold at least need elements,
 * doubling from 64; 0, or -1 with *p and *cap unchanged when out of memory. */
static inline int fc_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

#endif
