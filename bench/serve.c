/* SPDX-License-Identifier: MIT */
/* `fucina-bench serve`: aggregate decode speed of N concurrent streams
 * through `fucina serve` against libllama decoding N sequences in lockstep.
 *
 *   ours     `fucina serve MODEL -np N -c C -t T --port 0`, a child process
 *            of this one, driven over HTTP/1.1 by N client threads (plain
 *            sockets), each streaming a completion of its own prompt
 *            (temperature 0, max_tokens = --gen, cache_prompt false so
 *            every prompt is evaluated). C = the longest prompt + gen + 16.
 *   peer     llama.cpp's libllama in this process (oracle/llama_abi.h):
 *            a context of N sequences of C positions each (f16 KV, T
 *            threads, a persistent ggml threadpool), the same prompts
 *            prefilled one sequence at a time (untimed), then gen - 1 steps
 *            of ONE llama_decode holding one token per sequence, greedy.
 *
 * The rates (bench/README.md gives the exact definitions):
 *   ours  the tokens generated between the moment the last stream got its
 *         first token and the moment the last stream ended, over that time,
 *         taken by the client as the SSE events arrive (each event with
 *         text is one token when the server kept up, and then the count is
 *         exact); `ours-all` also counts what earlier streams generated
 *         before that window opened
 *   peer  N * (gen - 1) / the time of the gen - 1 lockstep steps
 * The first token comes with the prompt on both sides, so neither counts
 * it. A stream that ends before gen tokens (an end-of-generation token:
 * random weights pick one now and then) counts only what it generated and
 * is reported in the `short` column and by a warning, never hidden.
 *
 * Also, through the server: the time to the first token of one new request
 * sent while N - 1 streams decode (the idle server's when N = 1), and a
 * 1-token request's latency on the idle server next to the prompt_ms the
 * server reports for it (the difference is what HTTP, JSON, tokenizing and
 * queueing cost).
 *
 * For each model and stream count: the server starts (and is warmed up by
 * one request), the peer's context is made and warmed up, then --rounds
 * rounds alternate ours and the peer; the table gives medians over rounds. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "fcb.h"
#include "fucina/fucina.h"
#include "fucina/tokenizer.h"
#include "ggml_oracle.h"
#include "llama_abi.h"
#include "peers/llama_llm.h"

#define MAX_MODELS 8
#define MAX_LIST 16
#define MAX_STREAMS 256
#define MAX_ROUNDS 64
/* seconds: a client gives up on a silent server after this; a model loads within the other */
#define READ_TIMEOUT_S 300
#define START_TIMEOUT_S 600

typedef struct sopts {
    const char *models[MAX_MODELS];
    int nmodels;
    int streams[MAX_LIST], nstreams;
    long gen, prompt_tokens, threads, rounds;
    const char *fucina;
    char fucina_buf[PATH_MAX];
    int peer;
    const char *json;
} sopts;

static void help(FILE *f)
{
    fprintf(f,
            "usage: fucina-bench serve MODEL.gguf [MODEL.gguf ...] [--streams 1,2,4,8,16] [--gen 64]\n"
            "                          [--prompt-tokens 32] [--threads 2] [--rounds 3] [--fucina PATH]\n"
            "                          [--no-peer] [--json FILE]\n"
            "Aggregate decode tokens/s of N concurrent streaming completions through `fucina serve -np N`\n"
            "(a child process; HTTP clients in this one) against llama.cpp's libllama decoding N sequences\n"
            "in lockstep (one llama_decode per step, one token per sequence, greedy) on the same file, with\n"
            "the same threads, per-sequence context and f16 KV; --rounds rounds alternate the two, medians.\n"
            "Also through the server: the first-token time of a new request while N-1 streams run, and a\n"
            "1-token request's latency against the server's own prompt_ms (its overhead).\n"
            "  --streams N,N     stream counts (default 1,2,4,8,16)\n"
            "  --gen N           tokens per stream, max_tokens (default 64; >= 2)\n"
            "  --prompt-tokens N prompt length, each prompt distinct (default 32)\n"
            "  --threads N       server -t and llama.cpp's threads (default 2)\n"
            "  --fucina PATH     the fucina binary (default: ../fucina next to fucina-bench)\n"
            "  --no-peer         ours only\n"
            "Exit status: 0 ok, 1 run-time failure (server, peer, output file), 2 bad command line.\n");
}

/* ../fucina relative to this executable (build/bench/fucina-bench -> build/fucina). */
static int default_fucina(char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 0;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return 0;
    *slash = 0;
    return snprintf(buf, len, "%s/../fucina", self) < (int)len;
}

static int parse(int argc, char **argv, sopts *o)
{
    *o = (sopts){.streams = {1, 2, 4, 8, 16}, .nstreams = 5, .gen = 64, .prompt_tokens = 32, .threads = 2,
                 .rounds = 3, .peer = 1};
    fcb_argv a = {argc, 1, argv, "serve"};
    while (a.i < argc) {
        const char *v, *arg = argv[a.i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            help(stdout);
            return 0;
        }
        if (!strcmp(arg, "--no-peer")) {
            o->peer = 0;
            a.i++;
        } else if (fcb_arg_is(&a, "--streams", &v)) {
            if (!fcb_parse_int_list("serve", "--streams", v, 1, MAX_STREAMS, o->streams, MAX_LIST, &o->nstreams))
                return -1;
        } else if (fcb_arg_is(&a, "--gen", &v)) {
            if (!fcb_parse_int("serve", "--gen", v, 2, 1 << 16, &o->gen)) return -1;
        } else if (fcb_arg_is(&a, "--prompt-tokens", &v)) {
            if (!fcb_parse_int("serve", "--prompt-tokens", v, 1, 1 << 16, &o->prompt_tokens)) return -1;
        } else if (fcb_arg_is(&a, "--threads", &v)) {
            if (!fcb_parse_int("serve", "--threads", v, 1, 256, &o->threads)) return -1;
        } else if (fcb_arg_is(&a, "--rounds", &v)) {
            if (!fcb_parse_int("serve", "--rounds", v, 1, MAX_ROUNDS, &o->rounds)) return -1;
        } else if (fcb_arg_is(&a, "--fucina", &v)) {
            o->fucina = v;
        } else if (fcb_arg_is(&a, "--json", &v)) {
            o->json = v;
        } else if (arg[0] == '-') {
            fprintf(stderr, "fucina-bench serve: unknown option '%s' (see --help)\n", arg);
            return -1;
        } else {
            if (o->nmodels == MAX_MODELS) {
                fprintf(stderr, "fucina-bench serve: more than %d models\n", MAX_MODELS);
                return -1;
            }
            o->models[o->nmodels++] = arg;
            a.i++;
        }
    }
    if (!o->nmodels) {
        fprintf(stderr, "fucina-bench serve: no model given (see --help)\n");
        return -1;
    }
    if (!o->fucina) {
        if (!default_fucina(o->fucina_buf, sizeof o->fucina_buf)) {
            fprintf(stderr, "fucina-bench serve: cannot locate this executable: give --fucina PATH\n");
            return -1;
        }
        o->fucina = o->fucina_buf;
    }
    return 1;
}

/* ---- the server: a child process ---------------------------------------------- */

typedef struct server {
    pid_t pid;
    int port;
    char log[64]; /* its stderr (a file: a pipe nobody drains would block it) */
} server;

static void print_log(const server *s)
{
    FILE *f = fopen(s->log, "r");
    if (!f) return;
    char line[512];
    fprintf(stderr, "fucina-bench serve: the server's log (%s):\n", s->log);
    while (fgets(line, sizeof line, f)) fprintf(stderr, "  | %s", line);
    fclose(f);
}

/* Waits up to timeout_s for the child to exit; its wait status, or -1. */
static int wait_child(pid_t pid, double timeout_s)
{
    const double t0 = fcb_now();
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0 || fcb_now() - t0 > timeout_s) return -1;
        usleep(10000);
    }
}

static void server_stop(server *s, int keep_log)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int st = wait_child(s->pid, 60);
        if (st == -1) {
            fprintf(stderr, "fucina-bench serve: the server did not stop on SIGTERM within 60 s: killed\n");
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            keep_log = 1;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "fucina-bench serve: the server exited with %s %d after SIGTERM\n",
                    WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            keep_log = 1;
        }
        s->pid = 0;
    }
    if (s->log[0]) {
        if (keep_log) print_log(s);
        unlink(s->log);
        s->log[0] = 0;
    }
}

/* Starts `fucina serve` and waits for its "listening on" line. 0 on success;
 * otherwise the server is gone and its log printed. */
static int server_start(const sopts *o, const char *model, int np, int n_ctx, server *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->log, sizeof s->log, "/tmp/fucina-bench-serve-XXXXXX");
    int fd = mkstemp(s->log);
    if (fd < 0) {
        fprintf(stderr, "fucina-bench serve: cannot create a log file in /tmp: %s\n", strerror(errno));
        s->log[0] = 0;
        return -1;
    }
    char a_np[16], a_c[16], a_t[16];
    snprintf(a_np, sizeof a_np, "%d", np);
    snprintf(a_c, sizeof a_c, "%d", n_ctx);
    snprintf(a_t, sizeof a_t, "%ld", o->threads);
    char *args[] = {(char *)o->fucina, "serve", (char *)model, "-np", a_np, "-c", a_c, "-t", a_t,
                    "--port", "0", "--no-webui", NULL};
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "fucina-bench serve: fork: %s\n", strerror(errno));
        close(fd);
        server_stop(s, 0);
        return -1;
    }
    if (pid == 0) {
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a bench that dies takes its server along */
#endif
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) dup2(null, 0), dup2(null, 1);
        dup2(fd, 2);
        unsetenv("OPENBLAS_THREAD_TIMEOUT"); /* ours to set (bench_main.c), not the server's */
        execv(o->fucina, args);
        fprintf(stderr, "exec %s: %s\n", o->fucina, strerror(errno));
        _exit(127);
    }
    close(fd);
    s->pid = pid;
    const double t0 = fcb_now();
    for (;;) {
        FILE *f = fopen(s->log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://");
            const char *colon = p ? strrchr(p, ':') : NULL;
            if (colon && atoi(colon + 1) > 0) {
                s->port = atoi(colon + 1);
                fclose(f);
                return 0;
            }
        }
        if (f) fclose(f);
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "fucina-bench serve: %s serve exited (%s %d) before listening\n", o->fucina,
                    WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            s->pid = 0;
            server_stop(s, 1);
            return -1;
        }
        if (fcb_now() - t0 > START_TIMEOUT_S) {
            fprintf(stderr, "fucina-bench serve: the server did not listen within %d s\n", START_TIMEOUT_S);
            server_stop(s, 1);
            return -1;
        }
        usleep(20000);
    }
}

/* ---- HTTP/1.1 client ----------------------------------------------------------- */

/* One request and what its response said. */
typedef struct call {
    /* in */
    int port;
    const char *method, *path;
    char *body; /* owned */
    int sse;    /* the body is an event stream */
    struct group *g;
    /* out: times are fcb_now() seconds (0: not seen) */
    int status;           /* HTTP status, 0: none */
    double t_send, t_first, t_end; /* the first SSE event; the final one (finish_reason) */
    int events, done;     /* SSE events; [DONE] seen */
    char finish[16];      /* finish_reason ("" until the final chunk) */
    long predicted_n, prompt_n;
    double prompt_ms, predicted_ms;
    char err[256];
    /* arrival times of the events that carry text: one per token, except
     * when a token's text is held back (part of a UTF-8 character) and goes
     * out with the next one's */
    double *ev_t;
    size_t n_ev, cap_ev;
    /* the body as it arrives: SSE events are cut off it as they complete */
    char *acc;
    size_t n, cap;
} call;

/* Streams that start together (connected first, then sent when `go` is
 * set) and tell the thread that waits for them when they are ready: their
 * first token came, or they ended without one. */
typedef struct group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gate, go;
    int n_ready;
} group;

static void group_ready(group *g)
{
    pthread_mutex_lock(&g->mu);
    g->n_ready++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void group_go(group *g)
{
    pthread_mutex_lock(&g->mu);
    g->go = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

typedef struct conn {
    int fd;
    char b[65536];
    size_t n, off;
    double t; /* when the last bytes arrived */
} conn;

static int conn_fill(conn *c)
{
    if (c->off) {
        memmove(c->b, c->b + c->off, c->n - c->off);
        c->n -= c->off;
        c->off = 0;
    }
    if (c->n == sizeof c->b) return -1;
    ssize_t k;
    do k = recv(c->fd, c->b + c->n, sizeof c->b - c->n, 0);
    while (k < 0 && errno == EINTR);
    if (k > 0) {
        c->t = fcb_now();
        c->n += (size_t)k;
    }
    return (int)k;
}

/* The line at c->off (without CRLF) into *line, NUL-terminated in place; 0 at EOF. */
static int conn_line(conn *c, char **line)
{
    for (;;) {
        char *p = memchr(c->b + c->off, '\n', c->n - c->off);
        if (p) {
            *line = c->b + c->off;
            c->off = (size_t)(p - c->b) + 1;
            *p = 0;
            if (p > *line && p[-1] == '\r') p[-1] = 0;
            return 1;
        }
        if (conn_fill(c) <= 0) return 0;
    }
}

static double num_after(const char *s, const char *key, double dflt)
{
    const char *p = strstr(s, key);
    return p ? strtod(p + strlen(key), NULL) : dflt;
}

/* One SSE event's data, or a whole JSON body: the fields the bench reads. */
static void on_json(call *k, const char *json, double t)
{
    if (!strncmp(json, "{\"error\"", 8)) {
        snprintf(k->err, sizeof k->err, "the server sent an error: %.200s", json);
        return;
    }
    const char *f = strstr(json, "\"finish_reason\":\"");
    if (f) {
        f += strlen("\"finish_reason\":\"");
        size_t len = strcspn(f, "\"");
        snprintf(k->finish, sizeof k->finish, "%.*s", (int)(len < sizeof k->finish ? len : sizeof k->finish - 1), f);
        k->predicted_n = (long)num_after(json, "\"predicted_n\":", -1);
        k->prompt_n = (long)num_after(json, "\"prompt_n\":", -1);
        k->prompt_ms = num_after(json, "\"prompt_ms\":", NAN);
        k->predicted_ms = num_after(json, "\"predicted_ms\":", NAN);
        k->t_end = t;
    }
    const char *x = strstr(json, "\"text\":\"");
    if (x && x[strlen("\"text\":\"")] != '"' && k->sse) {
        if (k->n_ev == k->cap_ev) {
            size_t cap = k->cap_ev ? 2 * k->cap_ev : 256;
            double *q = realloc(k->ev_t, cap * sizeof *q);
            if (!q) {
                snprintf(k->err, sizeof k->err, "out of memory");
                return;
            }
            k->ev_t = q;
            k->cap_ev = cap;
        }
        k->ev_t[k->n_ev++] = t;
    }
}

static void on_body(call *k, const char *p, size_t n, double t)
{
    if (k->n + n + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 4096;
        while (cap < k->n + n + 1) cap *= 2;
        char *q = realloc(k->acc, cap);
        if (!q) {
            snprintf(k->err, sizeof k->err, "out of memory");
            return;
        }
        k->acc = q;
        k->cap = cap;
    }
    memcpy(k->acc + k->n, p, n);
    k->n += n;
    k->acc[k->n] = 0;
    if (!k->sse) return;
    char *end;
    while ((end = strstr(k->acc, "\n\n"))) {
        *end = 0;
        if (!strncmp(k->acc, "data: ", 6)) {
            const char *d = k->acc + 6;
            if (!strcmp(d, "[DONE]")) {
                k->done = 1;
            } else {
                if (!k->events++) {
                    k->t_first = t;
                    if (k->g) group_ready(k->g);
                }
                on_json(k, d, t);
            }
        }
        const size_t used = (size_t)(end + 2 - k->acc);
        memmove(k->acc, end + 2, k->n - used + 1);
        k->n -= used;
    }
}

/* Connects, sends, reads the whole response into k. 0 on success (any status). */
static int call_run(call *k)
{
    conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(k->err, sizeof k->err, "out of memory");
        return -1;
    }
    int rc = -1;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)k->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const int one = 1;
    struct timeval tv = {.tv_sec = READ_TIMEOUT_S};
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa)) {
        snprintf(k->err, sizeof k->err, "connect to 127.0.0.1:%d: %s", k->port, strerror(errno));
        goto out;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const size_t blen = k->body ? strlen(k->body) : 0;
    char head[512];
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s"
                      "Content-Length: %zu\r\n\r\n",
                      k->method, k->path, k->port, blen ? "Content-Type: application/json\r\n" : "", blen);
    if (k->g && k->g->gate) {
        pthread_mutex_lock(&k->g->mu);
        while (!k->g->go) pthread_cond_wait(&k->g->cv, &k->g->mu);
        pthread_mutex_unlock(&k->g->mu);
    }
    k->t_send = fcb_now();
    if (send(c->fd, head, (size_t)hl, MSG_NOSIGNAL) != hl ||
        (blen && send(c->fd, k->body, blen, MSG_NOSIGNAL) != (ssize_t)blen)) {
        snprintf(k->err, sizeof k->err, "send: %s", strerror(errno));
        goto out;
    }
    char *line;
    if (!conn_line(c, &line) || sscanf(line, "HTTP/1.%*d %d", &k->status) != 1) {
        snprintf(k->err, sizeof k->err, "no HTTP response (%s)", errno ? strerror(errno) : "closed");
        goto out;
    }
    long long length = -1;
    int chunked = 0;
    for (;;) {
        if (!conn_line(c, &line)) {
            snprintf(k->err, sizeof k->err, "the response's headers end early");
            goto out;
        }
        if (!*line) break;
        if (!strncasecmp(line, "content-length:", 15)) length = atoll(line + 15);
        if (!strncasecmp(line, "transfer-encoding:", 18) && strstr(line + 18, "chunked")) chunked = 1;
    }
    if (chunked) {
        for (;;) {
            if (!conn_line(c, &line)) {
                snprintf(k->err, sizeof k->err, "the chunked body ends early");
                goto out;
            }
            long long size = strtoll(line, NULL, 16);
            if (size == 0) break; /* trailers are not read: Connection: close */
            while (size > 0) {
                if (c->off == c->n && conn_fill(c) <= 0) {
                    snprintf(k->err, sizeof k->err, "the chunked body ends early");
                    goto out;
                }
                size_t take = c->n - c->off;
                if ((long long)take > size) take = (size_t)size;
                on_body(k, c->b + c->off, take, c->t);
                c->off += take;
                size -= (long long)take;
            }
            if (!conn_line(c, &line)) { /* the CRLF after the data */
                snprintf(k->err, sizeof k->err, "the chunked body ends early");
                goto out;
            }
        }
    } else {
        for (long long got = 0; length < 0 || got < length;) {
            if (c->off == c->n && conn_fill(c) <= 0) {
                if (length < 0) break;
                snprintf(k->err, sizeof k->err, "the body ends early");
                goto out;
            }
            size_t take = c->n - c->off;
            if (length >= 0 && (long long)take > length - got) take = (size_t)(length - got);
            on_body(k, c->b + c->off, take, c->t);
            c->off += take;
            got += (long long)take;
        }
    }
    if (!k->sse && k->acc) on_json(k, k->acc, c->t);
    if (!k->t_end) k->t_end = c->t;
    rc = k->err[0] ? -1 : 0;
out:
    if (c->fd >= 0) close(c->fd);
    free(c);
    return rc;
}

static void call_free(call *k)
{
    free(k->body);
    free(k->acc);
    free(k->ev_t);
    k->body = k->acc = NULL;
    k->ev_t = NULL;
}

static void *call_thread(void *arg)
{
    call *k = arg;
    call_run(k);
    if (k->g && !k->events) group_ready(k->g); /* no first token will come: do not keep the waiter */
    return NULL;
}

/* A completion request's body; NULL when out of memory. */
static char *completion_body(const char *prompt, long max_tokens, int stream)
{
    size_t len = strlen(prompt) * 6 + 160;
    char *b = malloc(len), *w = b;
    if (!b) return NULL;
    w += sprintf(w, "{\"prompt\":\"");
    for (const char *p = prompt; *p; p++) {
        if (*p == '"' || *p == '\\') *w++ = '\\', *w++ = *p;
        else if ((unsigned char)*p < 0x20) w += sprintf(w, "\\u%04x", (unsigned char)*p);
        else *w++ = *p;
    }
    sprintf(w, "\",\"max_tokens\":%ld,\"temperature\":0,\"stream\":%s,\"cache_prompt\":false}", max_tokens,
            stream ? "true" : "false");
    return b;
}

/* The call ran to a well-formed end: 200, a finish_reason, [DONE] when streamed. */
static int call_ok(const call *k, const char *what)
{
    if (!k->err[0] && k->status == 200 && k->finish[0] && (!k->sse || k->done)) return 1;
    fprintf(stderr, "fucina-bench serve: %s: %s%sHTTP %d%s%s\n", what, k->err, k->err[0] ? "; " : "", k->status,
            k->finish[0] ? "" : ", no finish_reason", k->sse && !k->done ? ", no [DONE]" : "");
    if (k->acc && k->n) fprintf(stderr, "  response body (tail): %.400s\n", k->acc);
    return 0;
}

/* ---- the prompts --------------------------------------------------------------- */

/* Prompt i: distinct numbered sentences, cut at the first word that brings
 * it to >= n tokens under the model's own tokenizer (the server's). */
static char *make_prompt(fc_ctx *ctx, const fc_tokenizer *tok, int i, long n, long *n_tokens)
{
    static const char *const words[] = {"the", "river", "carries", "seven", "stones", "past", "an", "old",
                                        "mill", "while", "a", "quiet", "heron", "watches", "from", "tall",
                                        "grass", "and", "children", "count", "boats", "near", "bridge", "at",
                                        "dawn", "every", "morning", "of", "summer", "light", "wind", "rain"};
    const int nw = (int)(sizeof words / sizeof words[0]);
    size_t cap = 64 + (size_t)n * 24, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    len = (size_t)snprintf(s, cap, "Story %d.", i + 1);
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    for (int k = 0, sentence = 1;; k++) {
        fc_token *t = NULL;
        size_t nt = 0;
        if (fc_tokenize(ctx, tok, s, len, FC_TOKENIZE_ADD_SPECIAL | FC_TOKENIZE_PARSE_SPECIAL, &t, &nt) != FC_OK) {
            free(s);
            return NULL;
        }
        fc_tokens_free(t);
        if ((long)nt >= n) {
            *n_tokens = (long)nt;
            return s;
        }
        if (len + 40 > cap) {
            char *q = realloc(s, cap *= 2);
            if (!q) {
                free(s);
                return NULL;
            }
            s = q;
        }
        if (k % 8 == 0) {
            len += (size_t)snprintf(s + len, cap - len, " Sentence %d:", sentence++);
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            len += (size_t)snprintf(s + len, cap - len, " %s", words[x % (uint64_t)nw]);
        }
    }
}

/* ---- ours: one round through the server ---------------------------------------- */

typedef struct ours_round {
    double ts;          /* aggregate decode tokens/s, tokens counted in the window; NaN: no window */
    double ts_all;      /* every token after each stream's first over the same window */
    long tokens;        /* generated in the window (see ours_decode) */
    long merged;        /* tokens that had no text event of their own */
    int short_streams;  /* streams that ended before gen tokens */
    double spread_ms;   /* last first token - first first token */
    double ttft_ms;     /* a new request's, while N - 1 streams decode */
    double one_ms;      /* a 1-token request's latency on the idle server */
    double one_prompt_ms; /* the server's prompt_ms for it */
} ours_round;

/* N streams at once; 0 on success. */
static int ours_decode(const server *sv, char *const *prompts, int N, long gen, ours_round *r)
{
    call *k = calloc((size_t)N, sizeof *k);
    pthread_t *th = calloc((size_t)N, sizeof *th);
    group g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .gate = 1};
    int rc = -1, started = 0;
    if (!k || !th) goto out;
    for (int i = 0; i < N; i++) {
        k[i] = (call){.port = sv->port, .method = "POST", .path = "/v1/completions", .sse = 1, .g = &g,
                      .body = completion_body(prompts[i], gen, 1)};
        if (!k[i].body) goto out;
    }
    for (; started < N; started++)
        if (pthread_create(&th[started], NULL, call_thread, &k[started])) break;
    group_go(&g);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (started < N) {
        fprintf(stderr, "fucina-bench serve: cannot start %d client threads\n", N);
        goto out;
    }
    double first_max = 0, first_min = INFINITY, end_max = 0;
    long all = 0;
    r->tokens = r->merged = 0;
    r->short_streams = 0;
    for (int i = 0; i < N; i++) {
        char what[48];
        snprintf(what, sizeof what, "stream %d of %d", i + 1, N);
        if (!call_ok(&k[i], what)) goto out;
        if (k[i].predicted_n != gen || strcmp(k[i].finish, "length")) r->short_streams++;
        all += k[i].predicted_n > 0 ? k[i].predicted_n - 1 : 0;
        r->merged += k[i].predicted_n - (long)k[i].n_ev;
        first_max = k[i].t_first > first_max ? k[i].t_first : first_max;
        first_min = k[i].t_first < first_min ? k[i].t_first : first_min;
        end_max = k[i].t_end > end_max ? k[i].t_end : end_max;
    }
    /* the window starts when the last stream has its first token: the
     * tokens an earlier stream generated before it are not in it. A stream
     * whose every token had its own text event is counted exactly, by its
     * events in the window; one that had fewer events than tokens (text held
     * back, or tokens coming faster than its connection wrote them) by its
     * tokens after the first, times the part of its decode time that lies in
     * the window */
    double in_window = 0;
    for (int i = 0; i < N; i++) {
        if ((long)k[i].n_ev >= k[i].predicted_n) {
            for (size_t e = 0; e < k[i].n_ev; e++) in_window += k[i].ev_t[e] > first_max;
        } else if (k[i].t_end > k[i].t_first && k[i].predicted_n > 1) {
            const double from = k[i].t_first > first_max ? k[i].t_first : first_max;
            in_window += (double)(k[i].predicted_n - 1) * (k[i].t_end - from) / (k[i].t_end - k[i].t_first);
        }
    }
    r->tokens = (long)(in_window + 0.5);
    r->spread_ms = 1e3 * (first_max - first_min);
    r->ts = end_max > first_max ? in_window / (end_max - first_max) : NAN;
    r->ts_all = end_max > first_max ? (double)all / (end_max - first_max) : NAN;
    rc = 0;
out:
    for (int i = 0; k && i < N; i++) call_free(&k[i]);
    free(k);
    free(th);
    return rc;
}

/* The first-token time of one request sent once N - 1 streams have their
 * first token; 0 on success. */
static int ours_ttft(const server *sv, char *const *prompts, int N, long gen, const char *probe, double *ttft_ms)
{
    const int nb = N - 1;
    call *k = calloc((size_t)(nb + 1), sizeof *k);
    pthread_t *th = calloc((size_t)(nb + 1), sizeof *th);
    group g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    int rc = -1, started = 0;
    if (!k || !th) goto out;
    for (int i = 0; i < nb; i++) {
        k[i] = (call){.port = sv->port, .method = "POST", .path = "/v1/completions", .sse = 1, .g = &g,
                      .body = completion_body(prompts[i], gen, 1)};
        if (!k[i].body) goto out;
    }
    for (; started < nb; started++)
        if (pthread_create(&th[started], NULL, call_thread, &k[started])) break;
    /* wait for the background streams to decode (or to end) */
    pthread_mutex_lock(&g.mu);
    while (g.n_ready < started) pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    call *p = &k[nb];
    *p = (call){.port = sv->port, .method = "POST", .path = "/v1/completions", .sse = 1,
                .body = completion_body(probe, 1, 1)};
    const int prc = p->body ? call_run(p) : -1;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (started < nb) fprintf(stderr, "fucina-bench serve: cannot start %d client threads\n", nb);
    else if (prc == 0 && call_ok(p, "the first-token request")) rc = 0;
    for (int i = 0; i < started && rc == 0; i++) {
        char what[64];
        snprintf(what, sizeof what, "background stream %d of %d", i + 1, nb);
        if (!call_ok(&k[i], what)) rc = -1;
    }
    *ttft_ms = 1e3 * (p->t_first - p->t_send);
out:
    for (int i = 0; k && i <= nb; i++) call_free(&k[i]);
    free(k);
    free(th);
    return rc;
}

/* A 1-token request, not streamed, on the idle server. */
static int ours_one(const server *sv, const char *prompt, double *lat_ms, double *prompt_ms)
{
    call k = {.port = sv->port, .method = "POST", .path = "/v1/completions", .body = completion_body(prompt, 1, 0)};
    int rc = k.body && call_run(&k) == 0 && call_ok(&k, "the 1-token request") ? 0 : -1;
    *lat_ms = 1e3 * (k.t_end - k.t_send);
    *prompt_ms = k.prompt_ms;
    call_free(&k);
    return rc;
}

static int server_health(const server *sv)
{
    for (int tries = 0; tries < 3000; tries++) { /* 60 s */
        call k = {.port = sv->port, .method = "GET", .path = "/health"};
        call_run(&k);
        const int st = k.status;
        call_free(&k);
        if (st == 200) return 0;
        usleep(20000);
    }
    fprintf(stderr, "fucina-bench serve: GET /health never answered 200\n");
    return -1;
}

/* ---- the peer: libllama, N sequences in lockstep -------------------------------- */

/* libllama and ggml's threadpool, loaded once by the llm suite's peer
 * (bench/peers/llama_llm.c), which attaches a threadpool the same way */
static struct {
    const fco_llama_api *L;
    const fcb_ggml_threadpool *tp;
} P;

static int peer_available(const char **why)
{
    if (!fcb_llama_available(why)) return 0;
    P.L = fcb_llama_api();
    P.tp = fcb_llama_threadpool();
    return 1;
}

typedef struct peer {
    struct llama_model *m;
    const void *vocab;
    int32_t n_vocab;
    struct llama_context *lc;
    void *tp;
    llama_batch b;
    int n_seq;
    int32_t n_ctx_seq;
    llama_token **prompt; /* [n_seq], the same texts as ours, by llama's tokenizer */
    int *n_prompt;
    llama_token *next;
    int eog_hits; /* sequences whose greedy pick was an end-of-generation token (not stopped) */
} peer;

static void peer_ctx_free(peer *p)
{
    if (p->b.token) P.L->batch_free(p->b);
    memset(&p->b, 0, sizeof p->b);
    if (p->lc) {
        P.L->detach_threadpool(p->lc);
        P.L->free_ctx(p->lc);
    }
    if (p->tp) P.tp->free(p->tp);
    p->lc = NULL;
    p->tp = NULL;
    for (int i = 0; p->prompt && i < p->n_seq; i++) free(p->prompt[i]);
    free(p->prompt);
    free(p->n_prompt);
    free(p->next);
    p->prompt = NULL;
    p->n_prompt = NULL;
    p->next = NULL;
}

/* A context for N sequences of n_ctx_seq positions; 0 or -1 with *why. */
static int peer_ctx_new(peer *p, int N, int n_ctx_seq, int threads, char *const *prompts, const char **why)
{
    p->n_seq = N;
    p->prompt = calloc((size_t)N, sizeof *p->prompt);
    p->n_prompt = calloc((size_t)N, sizeof *p->n_prompt);
    p->next = calloc((size_t)N, sizeof *p->next);
    if (!p->prompt || !p->n_prompt || !p->next) return *why = "out of memory", -1;
    int longest = 1;
    for (int i = 0; i < N; i++) {
        const int32_t len = (int32_t)strlen(prompts[i]), cap = len + 16;
        p->prompt[i] = malloc((size_t)cap * sizeof **p->prompt);
        if (!p->prompt[i]) return *why = "out of memory", -1;
        p->n_prompt[i] = P.L->tokenize(p->vocab, prompts[i], len, p->prompt[i], cap, true, true);
        if (p->n_prompt[i] <= 0) return *why = "llama_tokenize failed on a prompt", -1;
        longest = p->n_prompt[i] > longest ? p->n_prompt[i] : longest;
    }
    struct llama_context_params cp = P.L->ctx_defaults();
    cp.n_ctx = (uint32_t)N * (uint32_t)n_ctx_seq; /* split evenly: kv_unified stays false */
    cp.n_seq_max = (uint32_t)N;
    cp.n_batch = cp.n_ubatch = (uint32_t)(longest > N ? longest : N);
    cp.n_threads = cp.n_threads_batch = threads;
    cp.type_k = cp.type_v = FCO_GGML_TYPE_F16;
    cp.no_perf = true;
    p->lc = P.L->init(p->m, cp);
    if (!p->lc) return *why = "llama_init_from_model failed (FCT_LLAMA_VERBOSE=1 shows its log)", -1;
    p->n_ctx_seq = (int32_t)P.L->n_ctx_seq(p->lc);
    /* ggml fills the parameters and we read none of them: room for its
     * struct (a 512-entry CPU mask and a few fields) without mirroring it */
    _Alignas(16) unsigned char tpp[4096];
    P.tp->params_init(tpp, threads); /* poll 50, as llama-bench's and llama-server's default */
    p->tp = P.tp->create(tpp);
    if (!p->tp) return *why = "ggml_threadpool_new failed", -1;
    P.L->attach_threadpool(p->lc, p->tp, NULL);
    p->b = P.L->batch_init(longest > N ? longest : N, 0, 1);
    return 0;
}

static llama_token argmax(const float *row, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

/* One lockstep run: prefill every sequence (untimed), then gen - 1 steps;
 * tokens/s of the steps, NaN on failure. */
static double peer_run(peer *p, long gen)
{
    P.L->memory_clear(P.L->get_memory(p->lc), false);
    p->eog_hits = 0;
    for (int s = 0; s < p->n_seq; s++) {
        p->b.n_tokens = p->n_prompt[s];
        for (int i = 0; i < p->n_prompt[s]; i++) {
            p->b.token[i] = p->prompt[s][i];
            p->b.pos[i] = i;
            p->b.n_seq_id[i] = 1;
            p->b.seq_id[i][0] = s;
            p->b.logits[i] = i == p->n_prompt[s] - 1;
        }
        if (P.L->decode(p->lc, p->b)) return NAN;
        p->next[s] = argmax(P.L->logits_ith(p->lc, p->n_prompt[s] - 1), p->n_vocab);
    }
    P.L->synchronize(p->lc);
    int *hit = calloc((size_t)p->n_seq, sizeof *hit);
    const double t0 = fcb_now();
    for (long step = 0; step < gen - 1; step++) {
        p->b.n_tokens = p->n_seq;
        for (int s = 0; s < p->n_seq; s++) {
            p->b.token[s] = p->next[s];
            p->b.pos[s] = p->n_prompt[s] + (llama_pos)step;
            p->b.n_seq_id[s] = 1;
            p->b.seq_id[s][0] = s;
            p->b.logits[s] = 1;
        }
        if (P.L->decode(p->lc, p->b)) {
            free(hit);
            return NAN;
        }
        for (int s = 0; s < p->n_seq; s++) {
            p->next[s] = argmax(P.L->logits_ith(p->lc, s), p->n_vocab);
            if (hit && P.L->vocab_is_eog(p->vocab, p->next[s])) hit[s] = 1;
        }
    }
    const double t = fcb_now() - t0;
    for (int s = 0; hit && s < p->n_seq; s++) p->eog_hits += hit[s];
    free(hit);
    P.tp->pause(p->tp); /* its workers poll after a graph: park them while the server runs */
    return (double)p->n_seq * (double)(gen - 1) / t;
}

/* ---- the command ---------------------------------------------------------------- */

typedef struct result {
    int N;
    double ours_ts, llama_ts, ours_cv, llama_cv;
    double ours_ts_all; /* the rate counting every token after each stream's first */
    long merged;        /* tokens without a text event of their own (the most in any round) */
    int short_streams; /* the most in any round */
    double spread_ms, ttft_ms, one_ms, one_prompt_ms, overhead_ms;
    int llama_eog; /* sequences whose greedy path met an end-of-generation token (most in any round) */
    int32_t llama_n_ctx_seq;
} result;

static void fmt_or_dash(char *buf, size_t len, const char *fmt, double v)
{
    if (isfinite(v)) snprintf(buf, len, fmt, v);
    else snprintf(buf, len, "-");
}

/* One (model, N) case; 0 on success. */
static int run_case(const sopts *o, const char *model, peer *pm, char *const *prompts, int n_ctx_slot, int N,
                    result *r)
{
    memset(r, 0, sizeof *r);
    r->N = N;
    r->llama_ts = r->llama_cv = NAN;
    server sv;
    if (server_start(o, model, N, n_ctx_slot, &sv)) return -1;
    int rc = -1;
    peer pc = {0};
    if (server_health(&sv)) goto out;
    /* warm-up: one request through the whole path */
    {
        call k = {.port = sv.port, .method = "POST", .path = "/v1/completions", .sse = 1,
                  .body = completion_body(prompts[N + 1], o->gen, 1)};
        const int ok = k.body && call_run(&k) == 0 && call_ok(&k, "the warm-up request");
        call_free(&k);
        if (!ok) goto out;
    }
    if (pm) {
        pc = *pm;
        const char *why = NULL;
        if (peer_ctx_new(&pc, N, n_ctx_slot, (int)o->threads, prompts, &why) || !isfinite(peer_run(&pc, 2))) {
            fprintf(stderr, "fucina-bench serve: llama.cpp, %d sequences: %s\n", N, why ? why : "llama_decode failed");
            goto out;
        }
        r->llama_n_ctx_seq = pc.n_ctx_seq;
    }
    double ts[MAX_ROUNDS], ts_all[MAX_ROUNDS], lts[MAX_ROUNDS], spread[MAX_ROUNDS], ttft[MAX_ROUNDS], one[MAX_ROUNDS], onep[MAX_ROUNDS],
        ovh[MAX_ROUNDS];
    for (long round = 0; round < o->rounds; round++) {
        ours_round orr = {0};
        if (ours_decode(&sv, prompts, N, o->gen, &orr)) goto out;
        if (ours_ttft(&sv, prompts, N, o->gen, prompts[N], &orr.ttft_ms)) goto out;
        if (ours_one(&sv, prompts[N + 1], &orr.one_ms, &orr.one_prompt_ms)) goto out;
        ts[round] = orr.ts;
        ts_all[round] = orr.ts_all;
        r->merged = orr.merged > r->merged ? orr.merged : r->merged;
        spread[round] = orr.spread_ms;
        ttft[round] = orr.ttft_ms;
        one[round] = orr.one_ms;
        onep[round] = orr.one_prompt_ms;
        ovh[round] = orr.one_ms - orr.one_prompt_ms;
        r->short_streams = orr.short_streams > r->short_streams ? orr.short_streams : r->short_streams;
        if (pc.lc) {
            lts[round] = peer_run(&pc, o->gen);
            if (!isfinite(lts[round])) {
                fprintf(stderr, "fucina-bench serve: llama.cpp, %d sequences: llama_decode failed\n", N);
                goto out;
            }
            r->llama_eog = pc.eog_hits > r->llama_eog ? pc.eog_hits : r->llama_eog;
        }
    }
    const size_t n = (size_t)o->rounds;
    r->ours_ts = fcb_median(ts, n);
    r->ours_cv = fcb_cv(ts, n);
    r->ours_ts_all = fcb_median(ts_all, n);
    r->spread_ms = fcb_median(spread, n);
    r->ttft_ms = fcb_median(ttft, n);
    r->one_ms = fcb_median(one, n);
    r->one_prompt_ms = fcb_median(onep, n);
    r->overhead_ms = fcb_median(ovh, n);
    if (pc.lc) {
        r->llama_ts = fcb_median(lts, n);
        r->llama_cv = fcb_cv(lts, n);
    }
    rc = 0;
out:
    if (pm) peer_ctx_free(&pc);
    server_stop(&sv, rc != 0);
    return rc;
}

static void print_header(void)
{
    printf("  %4s %10s %10s %7s %7s %7s %9s %5s %9s %8s %8s %8s %8s\n", "N", "ours t/s", "llama t/s", "ratio",
           "cv-ours", "cv-llm", "ours-all", "short", "spread-ms", "ttft-ms", "1tok-ms", "prmpt-ms", "ovh-ms");
}

static void print_row(const result *r)
{
    char lt[16], ratio[16], cvl[16], ot[16], cvo[16], oa[16];
    fmt_or_dash(ot, sizeof ot, "%.2f", r->ours_ts);
    fmt_or_dash(oa, sizeof oa, "%.2f", r->ours_ts_all);
    fmt_or_dash(cvo, sizeof cvo, "%.1f%%", 100 * r->ours_cv);
    fmt_or_dash(lt, sizeof lt, "%.2f", r->llama_ts);
    fmt_or_dash(ratio, sizeof ratio, "%.2fx", r->ours_ts / r->llama_ts);
    fmt_or_dash(cvl, sizeof cvl, "%.1f%%", 100 * r->llama_cv);
    printf("  %4d %10s %10s %7s %7s %7s %9s %5d %9.1f %8.1f %8.1f %8.1f %8.1f\n", r->N, ot, lt, ratio, cvo, cvl, oa,
           r->short_streams, r->spread_ms, r->ttft_ms, r->one_ms, r->one_prompt_ms, r->overhead_ms);
    fflush(stdout);
}

int fcb_cmd_serve(int argc, char **argv)
{
    static sopts o;
    int prc = parse(argc, argv, &o);
    if (prc <= 0) return prc == 0 ? FCB_EXIT_OK : FCB_EXIT_USAGE;
    if (access(o.fucina, X_OK)) {
        fprintf(stderr, "fucina-bench serve: %s is not an executable (--fucina PATH)\n", o.fucina);
        return FCB_EXIT_FAIL;
    }
    int threads1 = (int)o.threads;
    const fcb_suite_opts start = {.cmd = "serve", .peer_name = "llama.cpp", .peer_available = peer_available,
                                  .roofline = 0, .threads = &threads1, .nthreads = 1};
    fcb_suite_env env;
    if (fcb_suite_start(&start, &o.peer, &env)) return FCB_EXIT_FAIL;
    signal(SIGPIPE, SIG_IGN); /* a server gone mid-request is an error return, not our death */
    int maxN = 1;
    for (int i = 0; i < o.nstreams; i++) maxN = o.streams[i] > maxN ? o.streams[i] : maxN;
    printf("server: %s; -t %ld, f16 KV; %ld rounds alternating (ours, llama.cpp), medians\n", o.fucina, o.threads,
           o.rounds);
    printf("streams: --gen %ld tokens each (temperature 0), prompts of >= %ld tokens. Window = from the last stream's "
           "first token to the last end;\nours t/s = text events in the window / its length; ours-all = "
           "sum(predicted_n - 1) / its length (counts what earlier streams\ngenerated before it); llama t/s = N * "
           "(gen - 1) / time of the lockstep steps; short = streams that ended before --gen tokens\n",
           o.gen, o.prompt_tokens);
    fcb_json j = {0};
    if (o.json) {
        if (fcb_json_open(&j, o.json)) {
            fprintf(stderr, "fucina-bench serve: cannot write %s\n", o.json);
            return FCB_EXIT_FAIL;
        }
        fcb_json_begin(&j, NULL, '{');
        fcb_json_str(&j, "suite", "serve");
        fcb_json_machine(&j, &env.mach);
        fcb_json_str(&j, "fucina", o.fucina);
        fcb_json_int(&j, "threads", o.threads);
        fcb_json_int(&j, "gen", o.gen);
        fcb_json_int(&j, "prompt_tokens", o.prompt_tokens);
        fcb_json_int(&j, "rounds", o.rounds);
        fcb_json_str(&j, "type_k", "f16");
        fcb_json_num(&j, "load_average_start", env.load_start);
        fcb_json_begin(&j, "models", '[');
    }
    int rc = FCB_EXIT_OK;
    for (int mi = 0; mi < o.nmodels && rc == FCB_EXIT_OK; mi++) {
        const char *path = o.models[mi];
        /* the prompts, by the server's tokenizer: maxN streams, the
         * first-token probe, the warm-up / 1-token request */
        const int np = maxN + 2;
        char **prompts = calloc((size_t)np, sizeof *prompts);
        long longest = 0, shortest = LONG_MAX;
        char err[256];
        fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
        fc_tokenizer *tok = ctx ? fc_tokenizer_load(ctx, path) : NULL;
        for (int i = 0; tok && prompts && i < np; i++) {
            long nt = 0;
            if (!(prompts[i] = make_prompt(ctx, tok, i, o.prompt_tokens, &nt))) break;
            longest = nt > longest ? nt : longest;
            shortest = nt < shortest ? nt : shortest;
        }
        if (!ctx || !tok || !prompts || !prompts[np - 1]) {
            fprintf(stderr, "fucina-bench serve: %s: %s\n", path, !ctx ? err : tok ? "out of memory" : fc_ctx_error(ctx));
            rc = FCB_EXIT_FAIL;
        }
        fc_tokenizer_free(tok);
        fc_ctx_free(ctx);
        const int n_ctx_slot = (int)(longest + o.gen + 16);
        peer pm = {0};
        char desc[128] = "";
        if (rc == FCB_EXIT_OK && o.peer) {
            pm.m = P.L->load(path, P.L->model_defaults());
            if (!pm.m) {
                printf("llama.cpp peer skipped for %s: llama.cpp cannot load the model (FCT_LLAMA_VERBOSE=1 shows "
                       "its log)\n",
                       path);
            } else {
                pm.vocab = P.L->get_vocab(pm.m);
                pm.n_vocab = P.L->vocab_n_tokens(pm.vocab);
                if (P.L->model_desc(pm.m, desc, sizeof desc) < 0) desc[0] = 0;
            }
        }
        if (rc == FCB_EXIT_OK) {
            printf("\n%s (%s): prompts of %ld-%ld tokens, -c %d per slot (prompt + gen + 16)\n", path,
                   desc[0] ? desc : "no peer", shortest, longest, n_ctx_slot);
            print_header();
        }
        if (o.json && rc == FCB_EXIT_OK) {
            fcb_json_begin(&j, NULL, '{');
            fcb_json_str(&j, "model", path);
            fcb_json_str(&j, "llama_desc", desc);
            fcb_json_int(&j, "prompt_tokens_min", shortest);
            fcb_json_int(&j, "prompt_tokens_max", longest);
            fcb_json_int(&j, "n_ctx_slot", n_ctx_slot);
            fcb_json_begin(&j, "cases", '[');
        }
        result res[MAX_LIST];
        int nres = 0;
        for (int si = 0; si < o.nstreams && rc == FCB_EXIT_OK; si++) {
            result *r = &res[nres];
            if (run_case(&o, path, pm.m ? &pm : NULL, prompts, n_ctx_slot, o.streams[si], r)) {
                rc = FCB_EXIT_FAIL;
                break;
            }
            nres++;
            print_row(r);
            if (r->short_streams)
                printf("  warning: %d of %d streams ended before %ld tokens (an end-of-generation token); their "
                       "tokens are counted as generated\n",
                       r->short_streams, r->N, o.gen);
            if (o.json) {
                fcb_json_begin(&j, NULL, '{');
                fcb_json_int(&j, "streams", r->N);
                fcb_json_num(&j, "ours_ts", r->ours_ts);
                fcb_json_num(&j, "llama_ts", r->llama_ts);
                fcb_json_num(&j, "ratio", r->ours_ts / r->llama_ts);
                fcb_json_num(&j, "ours_cv", r->ours_cv);
                fcb_json_num(&j, "ours_ts_all", r->ours_ts_all);
                fcb_json_int(&j, "merged_tokens", r->merged);
                fcb_json_num(&j, "llama_cv", r->llama_cv);
                fcb_json_int(&j, "short_streams", r->short_streams);
                fcb_json_num(&j, "first_token_spread_ms", r->spread_ms);
                fcb_json_num(&j, "ttft_ms", r->ttft_ms);
                fcb_json_int(&j, "ttft_background_streams", r->N - 1);
                fcb_json_num(&j, "one_token_ms", r->one_ms);
                fcb_json_num(&j, "one_token_prompt_ms", r->one_prompt_ms);
                fcb_json_num(&j, "overhead_ms", r->overhead_ms);
                fcb_json_int(&j, "llama_n_ctx_seq", r->llama_n_ctx_seq);
                fcb_json_int(&j, "llama_eog_sequences", r->llama_eog);
                fcb_json_end(&j, '}');
            }
        }
        /* scaling: the rate at 8 streams over the rate at 1 */
        const result *r1 = NULL, *r8 = NULL;
        for (int i = 0; i < nres; i++) {
            if (res[i].N == 1) r1 = &res[i];
            if (res[i].N == 8) r8 = &res[i];
        }
        double so = NAN, sl = NAN;
        if (r1 && r8) {
            so = r8->ours_ts / r1->ours_ts;
            sl = r8->llama_ts / r1->llama_ts;
            char a[16], b[16];
            fmt_or_dash(a, sizeof a, "%.2fx", so);
            fmt_or_dash(b, sizeof b, "%.2fx", sl);
            printf("  8 streams vs 1: ours %s, llama.cpp %s\n", a, b);
        }
        if (o.json && rc == FCB_EXIT_OK) {
            fcb_json_end(&j, ']');
            fcb_json_num(&j, "scaling_8v1_ours", so);
            fcb_json_num(&j, "scaling_8v1_llama", sl);
            fcb_json_end(&j, '}');
        }
        if (pm.m) P.L->model_free(pm.m);
        for (int i = 0; prompts && i < np; i++) free(prompts[i]);
        free(prompts);
    }
    const double load_end = fcb_suite_end();
    if (o.json) {
        fcb_json_end(&j, ']');
        fcb_json_num(&j, "load_average_end", load_end);
        fcb_json_end(&j, '}');
        if (fcb_json_close(&j)) {
            fprintf(stderr, "fucina-bench serve: cannot write %s\n", o.json);
            return FCB_EXIT_FAIL;
        }
    }
    return rc;
}
