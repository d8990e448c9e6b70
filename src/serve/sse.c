/* SPDX-License-Identifier: MIT */
/* Fucina serve: the shared part of streamed answers (serve/sse.h). */
#include <stdlib.h>
#include <string.h>

#include "serve/server.h"
#include "serve/sse.h"

void srv_sse_take(srv_sse *s, srv_sse_news *n) {
    srv_req *r = s->r;
    memset(n, 0, sizeof *n);
    pthread_mutex_lock(&r->mu);
    const size_t nt = r->n_text, nl = r->n_lp;
    n->finish = r->finish;
    if (nt > s->seen_text && (n->text = malloc(nt - s->seen_text))) {
        n->n_text = nt - s->seen_text;
        memcpy(n->text, r->text + s->seen_text, n->n_text);
    }
    if (nl > s->seen_lp && (n->lp = malloc((nl - s->seen_lp) * sizeof *n->lp))) {
        n->n_lp = nl - s->seen_lp;
        memcpy(n->lp, r->lp + s->seen_lp, n->n_lp * sizeof *n->lp);
    }
    memcpy(n->error, r->error, sizeof n->error);
    n->error[sizeof n->error - 1] = 0;
    pthread_mutex_unlock(&r->mu);
    s->seen_text += n->n_text;
    s->seen_lp += n->n_lp;
}

ssize_t srv_sse_read(void *self, char *buf, size_t max) {
    srv_sse *s = self;
    for (;;) {
        if (s->out.oom) return -1;
        if (s->out_off < s->out.n) {
            size_t n = s->out.n - s->out_off;
            if (n > max) n = max;
            memcpy(buf, s->out.p + s->out_off, n);
            s->out_off += n;
            if (s->out_off == s->out.n) s->out.n = s->out_off = 0;
            return (ssize_t)n;
        }
        if (s->phase == 2) return 0;
        if (s->phase == 1 && srv_wait_news(s->r, s->seen_text, s->seen_lp, s->fd, 0)) {
            srv_req_cancel(s->r);
            return -1;
        }
        s->produce(s);
    }
}

void srv_sse_free(void *self) {
    srv_sse *s = self;
    srv_req_cancel(s->r); /* a no-op when it ended; otherwise the client is gone */
    srv_req_release(s->r);
    fj_buf_free(&s->out);
    if (s->destroy) s->destroy(s);
    free(s);
}
