/* SPDX-License-Identifier: MIT */
/* Fucina serve: the engine — slots, the request queue and continuous
 * batching over one multi-sequence session.
 *
 * One thread owns the session. Each slot is one sequence of it, with its
 * KV cache and the tokens the cache holds. A request waits in a bounded
 * queue until a slot is free, then takes the free slot whose cache shares
 * the longest token prefix with its prompt (prompt caching: only the rest
 * is evaluated). Every iteration of the engine's loop is ONE forward
 * (fc_llm_session_eval_batch): a decode row for each generating slot and,
 * in the rest of n_batch rows, the next prompt chunks of the slots still
 * reading their prompts — the weights are read once for all of them, and
 * a long prompt is read in chunks beside the decode rows instead of
 * freezing the other streams. Requests join and leave between steps.
 *
 * Output goes to the request: text that is final (whole UTF-8 characters,
 * never part of a stop string) and, when asked, one log-probability record
 * per generated token. Connection threads wait on the request and take what
 * is new; the engine never waits for a client, so a client that stops
 * reading stalls nobody. A cancelled request (its client went away) is
 * dropped at the next step. */
#ifndef FC_SERVE_ENGINE_H
#define FC_SERVE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/grammar.h"
#include "fucina/llm.h"
#include "fucina/sampler.h"

#define SRV_MAX_STOP 4
#define SRV_MAX_TOP_LOGPROBS 20

typedef enum srv_finish {
    SRV_FINISH_NONE = 0,   /* still running */
    SRV_FINISH_STOP = 1,   /* an end-of-generation token or a stop string */
    SRV_FINISH_LENGTH = 2, /* max_tokens, or the slot's context is full */
    SRV_FINISH_ERROR = 3,  /* an evaluation failed, or the server is shutting down: see error */
} srv_finish;

typedef struct srv_top {
    int32_t token;
    float logprob;
} srv_top;

/* One generated token's log-probabilities (log-softmax of the raw logits). */
typedef struct srv_logprob {
    int32_t token;
    float logprob;
    int n_top;
    srv_top top[SRV_MAX_TOP_LOGPROBS];
} srv_logprob;

typedef struct srv_gen_params {
    fc_sampler_params sp;
    int32_t max_tokens; /* <= 0: until the slot's context is full */
    char *stop[SRV_MAX_STOP];
    size_t n_stop;
    int logprobs;     /* record srv_logprob per token */
    int top_logprobs; /* alternatives per token, 0..SRV_MAX_TOP_LOGPROBS */
    int no_cache;     /* evaluate the whole prompt, reusing nothing of the slot's cache */
    fc_grammar *grammar; /* owned: the output must be a sentence of it (NULL: free text) */
    /* non-NULL: the grammar holds only from this text on (a tool call's
     * opening tag, static storage); the text before it is free */
    const char *trigger;
    int tool_format; /* -1: no tools; else the fc_chat_tool_format the reply is parsed with */
} srv_gen_params;

typedef struct srv_req {
    /* set before submit, read-only afterwards */
    fc_token *prompt;
    size_t n_prompt;
    srv_gen_params gp;
    uint64_t id;
    /* the client went away, or the server is stopping: drop at the next step */
    atomic_int cancelled;

    /* written by the engine under mu; connection threads read under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *text; /* the final text so far */
    size_t n_text, cap_text;
    srv_logprob *lp; /* one per generated token when gp.logprobs */
    size_t n_lp, cap_lp;
    int started;       /* a slot took it */
    srv_finish finish; /* set once, at the end */
    int stop_index;    /* the stop string that ended it (gp.stop[i]); -1: none */
    char error[256];
    int slot;                /* the slot that ran it (-1: none yet) */
    int64_t n_cached;        /* prompt tokens reused from the slot's cache */
    int64_t n_gen;           /* tokens generated (an end-of-generation token included) */
    double t_prompt_ms;      /* evaluating the prompt's new tokens */
    double t_gen_ms;         /* from the first sampled token to the end */
    int refs;                /* owners: the submitter, and the engine while it holds it */
} srv_req;

/* A new request owning prompt (malloc'd) and the stop strings in gp; refs 1. */
srv_req *srv_req_new(fc_token *prompt, size_t n_prompt, const srv_gen_params *gp);
/* Drop one reference; the last frees it. */
void srv_req_release(srv_req *r);
/* Ask the engine to drop it (safe from any thread, any time). */
void srv_req_cancel(srv_req *r);

typedef struct srv_engine srv_engine;

typedef struct srv_engine_options {
    int n_slots;       /* sequences (1..256); 0: 1 */
    int64_t n_ctx;     /* positions per slot; 0: the model's training context */
    fc_dtype kv_type;  /* 0: FC_F16 */
    int threads;       /* 0: the context's default */
    int n_batch;       /* prompt tokens prefilled per step; 0: 512 */
    int queue_cap;     /* requests waiting for a slot; 0: 64 */
    const fc_token *eog; /* end-of-generation tokens (copied) */
    size_t n_eog;
} srv_engine_options;

/* Starts the engine's thread. NULL with a message in err on failure. */
srv_engine *srv_engine_start(const fc_llm_model *m, const srv_engine_options *opt, char *err, size_t errlen);
/* End every running and queued request (SRV_FINISH_ERROR, "the server is
 * shutting down") and stop the thread; later submits return -2. The
 * snapshots below still work. */
void srv_engine_stop(srv_engine *e);
/* Stop (if not yet) and free. */
void srv_engine_free(srv_engine *e);

/* Queue r (the engine takes a reference). 0 on success; -1 when the queue
 * is full; -2 when the engine is stopping. */
int srv_engine_submit(srv_engine *e, srv_req *r);

int64_t srv_engine_n_ctx(const srv_engine *e);
int srv_engine_n_slots(const srv_engine *e);

typedef struct srv_slot_info {
    int id;
    int busy;
    uint64_t req_id;
    int64_t n_cache;  /* tokens the slot's cache holds */
    int64_t n_prompt; /* of the running request */
    int64_t n_gen;
} srv_slot_info;

typedef struct srv_stats {
    uint64_t prompt_tokens;    /* prompt tokens evaluated */
    uint64_t cached_tokens;    /* prompt tokens reused from a slot's cache */
    uint64_t predicted_tokens; /* tokens generated */
    uint64_t requests_done;    /* requests that ran to an end */
    uint64_t requests_cancelled;
    double prompt_ms, predicted_ms;
    int busy_slots;
    int queued;
} srv_stats;

/* A snapshot (slots may be NULL; otherwise srv_engine_n_slots entries). */
void srv_engine_stats(srv_engine *e, srv_stats *st, srv_slot_info *slots);

#endif
