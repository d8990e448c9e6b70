/* SPDX-License-Identifier: MIT */
/* Fucina serve: HTTP/1.1 over libmicrohttpd (http.h). */
#define _GNU_SOURCE /* POLLRDHUP */
#include "serve/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct srv_http {
    struct MHD_Daemon *d;
    atomic_int active; /* requests handed to the handler whose responses are not done */
    srv_http_handler handler;
    void *user;
    size_t max_body;
    int port;
};

/* What one request accumulates between libmicrohttpd's calls. */
typedef struct req_state {
    char *body;
    size_t n, cap;
    int too_large;
    int counted; /* in srv_http.active */
    srv_http *server;
} req_state;

const char *srv_http_header(const srv_http_request *rq, const char *name) {
    return MHD_lookup_connection_value((struct MHD_Connection *)rq->conn, MHD_HEADER_KIND, name);
}

int srv_http_client_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static void add_common_headers(struct MHD_Response *r, const srv_http_response *o) {
    MHD_add_response_header(r, "Content-Type", o->content_type ? o->content_type : "application/json");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (o->retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", o->retry_after);
        MHD_add_response_header(r, "Retry-After", v);
    }
    if (o->allow) MHD_add_response_header(r, "Allow", o->allow);
    if (o->cors_preflight) {
        MHD_add_response_header(r, "Access-Control-Allow-Methods", o->allow ? o->allow : "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
        MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    }
    if (o->stream.read) {
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* nginx: pass SSE events through */
    }
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    srv_http_stream *s = cls;
    const ssize_t n = s->read(s->self, buf, max);
    if (n > 0) return n;
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls) {
    srv_http_stream *s = cls;
    if (s->free) s->free(s->self);
    free(s);
}

static enum MHD_Result send_response(struct MHD_Connection *c, srv_http_response *o) {
    struct MHD_Response *r;
    if (o->stream.read) {
        srv_http_stream *s = malloc(sizeof *s);
        if (!s) {
            if (o->stream.free) o->stream.free(o->stream.self);
            return MHD_NO;
        }
        *s = o->stream;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, s, stream_free);
        if (!r) {
            stream_free(s);
            return MHD_NO;
        }
    } else {
        r = MHD_create_response_from_buffer(o->len, o->body ? o->body : (char *)"", MHD_RESPMEM_MUST_COPY);
        free(o->body);
        o->body = NULL;
        if (!r) return MHD_NO;
    }
    add_common_headers(r, o);
    const enum MHD_Result rc = MHD_queue_response(c, (unsigned)o->status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_plain(struct MHD_Connection *c, int status, const char *json) {
    srv_http_response o = {.status = status, .body = strdup(json), .len = strlen(json)};
    return send_response(c, &o);
}

/* What libmicrohttpd lets through and HTTP forbids: a header with an empty
 * name, and two Content-Lengths that differ (a proxy in front may read the
 * other one: request smuggling). The error body, or NULL. */
typedef struct header_scan {
    int empty_name;
    const char *content_length;
    int conflicting;
} header_scan;

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    header_scan *h = cls;
    if (!key || !*key) h->empty_name = 1;
    else if (!strcasecmp(key, "Content-Length")) {
        if (h->content_length && strcmp(h->content_length, value ? value : "")) h->conflicting = 1;
        h->content_length = value ? value : "";
    }
    return MHD_YES;
}

static const char *check_headers(struct MHD_Connection *c) {
    header_scan h = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, scan_header, &h);
    if (h.empty_name)
        return "{\"error\":{\"message\":\"a request header has an empty name\",\"type\":\"invalid_request_error\","
               "\"param\":null,\"code\":null}}";
    if (h.conflicting)
        return "{\"error\":{\"message\":\"two Content-Length headers that differ\",\"type\":\"invalid_request_error\","
               "\"param\":null,\"code\":null}}";
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    srv_http *s = cls;
    req_state *st = *con_cls;
    static const char too_large[] =
        "{\"error\":{\"message\":\"the request body is larger than the server's limit (--max-body)\","
        "\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"request_too_large\"}}";
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return MHD_NO;
        st->server = s;
        *con_cls = st;
        const char *bad = check_headers(c);
        if (bad) {
            st->too_large = 1; /* nothing of the body is read */
            return send_plain(c, 400, bad);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            const unsigned long long v = strtoull(cl, &end, 10);
            if (end != cl && !*end && v > s->max_body) st->too_large = 1;
        }
        if (st->too_large) return send_plain(c, 413, too_large);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!st->too_large) {
            if (st->n + *upload_size > s->max_body) {
                /* a chunked body: read and drop the rest, answer at its end
                 * (libmicrohttpd takes no response in the middle of an upload) */
                st->too_large = 2;
                free(st->body);
                st->body = NULL;
                st->n = st->cap = 0;
                *upload_size = 0;
                return MHD_YES;
            }
            if (st->n + *upload_size + 1 > st->cap) {
                size_t cap = st->cap ? st->cap : 4096;
                while (cap < st->n + *upload_size + 1) cap *= 2;
                char *q = realloc(st->body, cap);
                if (!q) return MHD_NO;
                st->body = q;
                st->cap = cap;
            }
            memcpy(st->body + st->n, upload_data, *upload_size);
            st->n += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (st->too_large == 2) return send_plain(c, 413, too_large);
    if (st->too_large) return MHD_YES; /* the answer is queued already */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    srv_http_request rq = {
        .method = method,
        .path = url,
        .body = st->body ? st->body : "",
        .body_len = st->n,
        .fd = ci ? ci->connect_fd : -1,
        .conn = c,
    };
    if (st->body) st->body[st->n] = 0;
    srv_http_response o = {.status = 500};
    st->counted = 1;
    atomic_fetch_add(&s->active, 1);
    s->handler(s->user, &rq, &o);
    return send_response(c, &o);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    req_state *st = *con_cls;
    if (!st) return;
    if (st->counted) atomic_fetch_sub(&st->server->active, 1);
    free(st->body);
    free(st);
    *con_cls = NULL;
}

/* libmicrohttpd's own messages (a malformed request, a refused connection)
 * are the client's problem, not the operator's: keep stderr for ours. */
static void quiet_log(void *cls, const char *fmt, va_list ap) { (void)cls, (void)fmt, (void)ap; }

srv_http *srv_http_start(const srv_http_options *o, srv_http_handler h, void *user, char *err, size_t errlen) {
    const char *host = o->host ? o->host : "127.0.0.1";
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    const int gai = getaddrinfo(host, NULL, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "--host %s: %s", host, gai_strerror(gai));
        return NULL;
    }
    struct sockaddr_storage sa;
    memcpy(&sa, ai->ai_addr, ai->ai_addrlen);
    const int v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (v6) ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)o->port);
    else ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)o->port);
    srv_http *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->handler = h;
    s->user = user;
    s->max_body = o->max_body;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (v6) flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,                                  //
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,                          //
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,                 //
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,             //
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->max_header,                     //
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,                          //
                            MHD_OPTION_EXTERNAL_LOGGER, quiet_log, s,                              //
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)512 * 1024,                      //
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 256u,                                  //
                            MHD_OPTION_STRICT_FOR_CLIENT, 1,                                       //
                            MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, or not an address of this machine)", host,
                 o->port);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    return s;
}

int srv_http_port(const srv_http *s) { return s->port; }

void srv_http_quiesce(srv_http *s) {
    if (!s || !s->d) return;
    const MHD_socket fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

int srv_http_drain(srv_http *s, int timeout_ms) {
    if (!s) return 0;
    for (int waited = 0; atomic_load(&s->active) > 0; waited += 10) {
        if (waited >= timeout_ms) return -1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

void srv_http_stop(srv_http *s) {
    if (!s) return;
    if (s->d) MHD_stop_daemon(s->d);
    free(s);
}
