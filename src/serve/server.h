/* SPDX-License-Identifier: MIT */
/* Fucina serve: the server — options, its state, and the entry point that
 * `fucina serve` calls. */
#ifndef FC_SERVE_SERVER_H
#define FC_SERVE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/chat.h"
#include "fucina/llm.h"
#include "serve/engine.h"
#include "serve/http.h"

#define SRV_MAX_API_KEYS 16
#define SRV_MAX_LORA 32 /* --lora / --lora-scaled adapters */

typedef struct srv_options {
    const char *model_path;
    const char *alias; /* the model's id in the API; NULL: the file's name */
    const char *host;  /* NULL: 127.0.0.1 */
    int port;          /* 8080; 0: any free port */
    int n_slots;       /* -np */
    int64_t n_ctx;     /* per slot; 0: the model's training context, at most 4096 */
    int threads;
    int n_batch;
    int queue_cap;
    fc_dtype kv_type;
    const char *chat_template; /* NULL: the model's */
    const char *api_keys[SRV_MAX_API_KEYS];
    int n_api_keys;
    int metrics;
    int webui;
    size_t max_body;
    size_t max_header;
    int timeout_s;
    int mmap; /* fc_llm_load_options.mmap */
    /* LoRA adapters set on the model for every request (--lora, --lora-scaled) */
    const char *lora_path[SRV_MAX_LORA];
    float lora_scale[SRV_MAX_LORA];
    int n_lora;
} srv_options;

/* Everything the handlers share. */
typedef struct srv_server {
    const srv_options *o;
    atomic_int ready; /* the model is loaded and the engine runs */
    fc_llm_model *model;
    const fc_tokenizer *tok;
    fc_chat_template tmpl;
    srv_engine *eng;
    char model_id[256];
    int64_t n_ctx;
    int64_t n_vocab;
    /* tokenizing and rendering from the connections' threads: a context of
     * their own, one at a time (the errors are per context) */
    pthread_mutex_t tok_mu;
    fc_ctx *tok_ctx;
    atomic_ullong next_id;
    uint64_t id_salt; /* response ids: this process's salt and the request's number */
    atomic_ullong requests_total, requests_errors;
    long long t_start;
} srv_server;

/* An OpenAI-shaped error response {"error": {"message", "type", "param",
 * "code"}} into out (api.c); returns -1, for `return srv_api_error(...)`. */
__attribute__((format(printf, 5, 6))) int srv_api_error(srv_http_response *out, int status, const char *type,
                                                        const char *param, const char *fmt, ...);

/* Wait until r has text, log-probabilities or an end beyond what was seen
 * (until_end: until it ends); -1 when the client hung up meanwhile (api.c). */
int srv_wait_news(srv_req *r, size_t seen_text, size_t seen_lp, int fd, int until_end);
/* POST /v1/messages, Anthropic's Messages API (api_messages.c). */
void srv_api_messages(srv_server *sv, const srv_http_request *rq, srv_http_response *out);
/* POST /v1/responses, OpenAI's Responses API, stateless (api_responses.c). */
void srv_api_responses(srv_server *sv, const srv_http_request *rq, srv_http_response *out);

/* Route one request (api.c). */
void srv_api_handle(void *server, const srv_http_request *rq, srv_http_response *out);

/* The embedded chat page (webui.c, generated from src/serve/webui/index.html). */
extern const unsigned char srv_webui_html[];
extern const size_t srv_webui_html_len;

/* Load, listen, serve until SIGINT or SIGTERM; the process exit status. */
int srv_run(const srv_options *o);

#endif
