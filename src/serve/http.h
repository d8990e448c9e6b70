/* SPDX-License-Identifier: MIT */
/* Fucina serve: HTTP/1.1 over libmicrohttpd.
 *
 * libmicrohttpd parses requests (request line, headers, chunked bodies,
 * keep-alive) and writes responses; this layer adds what a server needs on
 * top: a body size limit (413 before the body is read when Content-Length
 * says so), CORS headers, the hand-off of a complete request to one
 * handler, and streamed responses.
 *
 * Threads: one per connection (MHD's thread-per-connection mode). A handler
 * may block — a non-streamed completion waits for its tokens — and a
 * stream's read callback blocks until it has bytes, so a slow client only
 * ever holds its own thread. A blocked handler watches the client's socket
 * (srv_http_client_gone) to notice a hang-up while it waits. */
#ifndef FC_SERVE_HTTP_H
#define FC_SERVE_HTTP_H

#include <stddef.h>
#include <sys/types.h>

typedef struct srv_http_request {
    const char *method;
    const char *path; /* without the query */
    const char *body; /* NUL-terminated; body_len bytes (may hold NULs) */
    size_t body_len;
    int fd;      /* the client's socket (for srv_http_client_gone) */
    void *conn;  /* libmicrohttpd's connection (srv_http_header) */
} srv_http_request;

/* A request header's value, NULL when absent. */
const char *srv_http_header(const srv_http_request *rq, const char *name);
/* 1 when the client closed its end or the socket failed. */
int srv_http_client_gone(int fd);

/* A streamed body: read() blocks until it has bytes and returns how many
 * (at most max), 0 at the end, -1 to abort the connection (the client is
 * gone). free() is called once, whichever way the response ended. */
typedef struct srv_http_stream {
    void *self;
    ssize_t (*read)(void *self, char *buf, size_t max);
    void (*free)(void *self);
} srv_http_stream;

typedef struct srv_http_response {
    int status;
    char *body; /* malloc'd; the layer frees it */
    size_t len;
    const char *content_type; /* NULL: application/json */
    int retry_after;          /* > 0: a Retry-After header (seconds) */
    const char *allow;        /* an Allow header (405, and a CORS preflight's allowed methods) */
    int cors_preflight;       /* an OPTIONS answer: the CORS Allow-Methods / Allow-Headers */
    srv_http_stream stream;   /* stream.read set: a chunked streamed body instead of body */
} srv_http_response;

typedef void (*srv_http_handler)(void *user, const srv_http_request *rq, srv_http_response *out);

typedef struct srv_http_options {
    const char *host; /* an address or a name; NULL: 127.0.0.1 */
    int port;         /* 0: any free port */
    size_t max_body;  /* bytes; beyond: 413 */
    size_t max_header; /* the per-connection memory for the request line and headers */
    int timeout_s;    /* an idle connection is closed after this */
    int max_connections;
} srv_http_options;

typedef struct srv_http srv_http;

/* Listening when it returns; NULL with a message in err. */
srv_http *srv_http_start(const srv_http_options *o, srv_http_handler h, void *user, char *err, size_t errlen);
int srv_http_port(const srv_http *s);
/* Stop accepting connections (the open ones go on). */
void srv_http_quiesce(srv_http *s);
/* Wait until every request handed to the handler has its response sent
 * (or its connection closed), at most timeout_ms; -1 on the timeout. */
int srv_http_drain(srv_http *s, int timeout_ms);
/* Close everything and wait for the connections' threads. */
void srv_http_stop(srv_http *s);

#endif
