/* SPDX-License-Identifier: MIT */
/* GEMM scratch: cached sets of 64-byte aligned buffers that only grow, so
 * a steady stream of GEMM calls allocates nothing. A call takes a set from
 * the free list (or makes an empty one), grows it to the call's needs before
 * touching C, and gives it back; concurrent calls use different sets. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/gemm_internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fc_gemm_scratch *free_list;

fc_gemm_scratch *fc_gemm_scratch_acquire(void)
{
    pthread_mutex_lock(&lock);
    fc_gemm_scratch *s = free_list;
    if (s) free_list = s->next;
    pthread_mutex_unlock(&lock);
    if (!s) s = calloc(1, sizeof *s);
    if (s) s->next = NULL;
    return s;
}

void fc_gemm_scratch_release(fc_gemm_scratch *s)
{
    if (!s) return;
    pthread_mutex_lock(&lock);
    s->next = free_list;
    free_list = s;
    pthread_mutex_unlock(&lock);
}

/* Make *p hold at least n floats (64-byte aligned; contents not kept). */
static int grow(float **p, size_t *cap, size_t n)
{
    if (n <= *cap) return 0;
    size_t want = n + n / 4;                 /* some headroom for the next shape */
    size_t bytes = (want * sizeof(float) + 63) & ~(size_t)63;
    if (bytes / sizeof(float) < n) return -1; /* overflow */
    float *q = aligned_alloc(64, bytes);
    if (!q) return -1;
    free(*p);
    *p = q;
    *cap = bytes / sizeof(float);
    return 0;
}

int fc_gemm_scratch_reserve(fc_gemm_scratch *s, int nworkers, size_t b_floats, size_t a_floats, size_t wb_floats,
                            size_t t_floats, size_t tile_floats)
{
    if (nworkers < 1) nworkers = 1;
    if (nworkers > s->nw) {
        fc_gemm_wscratch *w = realloc(s->w, (size_t)nworkers * sizeof *w);
        if (!w) return -1;
        memset(w + s->nw, 0, (size_t)(nworkers - s->nw) * sizeof *w);
        s->w = w;
        s->nw = nworkers;
    }
    if (grow(&s->b, &s->b_cap, b_floats)) return -1;
    for (int i = 0; i < nworkers; i++) {
        fc_gemm_wscratch *w = &s->w[i];
        if (grow(&w->a, &w->a_cap, a_floats) || grow(&w->b, &w->b_cap, wb_floats) || grow(&w->t, &w->t_cap, t_floats) ||
            grow(&w->tile, &w->tile_cap, tile_floats))
            return -1;
    }
    return 0;
}

void *fc_gemm_scratch_bytes(fc_gemm_scratch *s, size_t bytes)
{
    size_t floats = bytes / sizeof(float) + 1;
    if (floats < bytes / sizeof(float)) return NULL; /* overflow */
    return grow(&s->b, &s->b_cap, floats) ? NULL : s->b;
}
