/* SPDX-License-Identifier: MIT */
/* Fucina serve: a streamed (server-sent events) answer to one request, the
 * part every dialect shares (sse.c): the buffer of events not yet sent,
 * waiting for the engine's news, taking what it has added, and the end.
 * A dialect's stream embeds an srv_sse as its first member and gives
 * `produce`, which appends events for what is new (and, in phase 0, the
 * opening events) and sets phase 2 once everything is written. */
#ifndef FC_SERVE_SSE_H
#define FC_SERVE_SSE_H

#include <stddef.h>
#include <sys/types.h>

#include "io/json_value.h"
#include "serve/engine.h"

typedef struct srv_sse {
    srv_req *r;
    int fd; /* the client's socket: a hang-up cancels the request */
    fj_buf out;
    size_t out_off;
    size_t seen_text, seen_lp;
    int phase; /* 0: the opening events are due; 1: running; 2: everything is written */
    void (*produce)(struct srv_sse *s);
    void (*destroy)(struct srv_sse *s); /* the dialect's own state (NULL: none) */
} srv_sse;

/* What the request added since the last take: its new text and
 * log-probabilities (malloc'd copies, NULL when none; the caller frees
 * them), its finish and error, all read under its lock at once. */
typedef struct srv_sse_news {
    char *text;
    size_t n_text;
    srv_logprob *lp;
    size_t n_lp;
    srv_finish finish;
    char error[256];
} srv_sse_news;
void srv_sse_take(srv_sse *s, srv_sse_news *n);

/* The srv_http_stream callbacks for any srv_sse. */
ssize_t srv_sse_read(void *self, char *buf, size_t max);
void srv_sse_free(void *self);

#endif
