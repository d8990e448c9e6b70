/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
/* Fucina serve: the process — listen at once (health says 503 while the
 * model loads), load, start the engine, serve until SIGINT or SIGTERM, then
 * stop accepting, end the work in flight and exit 0. */
#include "serve/server.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fucina/fucina.h"

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int srv_run(const srv_options *o) {
    /* signals are taken by sigwait below, on this thread only: block them
     * before any thread starts so every thread inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error return, not a death */

    srv_server sv = {.o = o, .t_start = (long long)time(NULL)};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sv.id_salt = ((uint64_t)ts.tv_sec * 1000000007u) ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid();
    pthread_mutex_init(&sv.tok_mu, NULL);
    char err[512];
    int status = 1;
    srv_http *http = NULL;
    fc_ctx *ctx = NULL;
    fc_ctx_options one = {.threads = 1};
    sv.tok_ctx = fc_ctx_new(&one, err, sizeof err);
    if (!sv.tok_ctx) {
        fprintf(stderr, "fucina serve: %s\n", err);
        goto out;
    }
    ctx = fc_ctx_new(&one, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina serve: %s\n", err);
        goto out;
    }
    srv_http_options ho = {
        .host = o->host,
        .port = o->port,
        .max_body = o->max_body,
        .max_header = o->max_header,
        .timeout_s = o->timeout_s,
        .max_connections = 512,
    };
    http = srv_http_start(&ho, srv_api_handle, &sv, err, sizeof err);
    if (!http) {
        fprintf(stderr, "fucina serve: %s\n", err);
        goto out;
    }
    fprintf(stderr, "fucina serve: loading %s\n", o->model_path);
    fc_llm_load_options lo = {.mmap = o->mmap};
    sv.model = fc_llm_model_load_ex(ctx, o->model_path, &lo);
    if (!sv.model) {
        fprintf(stderr, "fucina serve: %s\n", fc_ctx_error(ctx));
        goto out;
    }
    if (o->n_lora) { /* before the engine starts: every request computes with them */
        fc_llm_lora *ad[SRV_MAX_LORA] = {0};
        int ok = 1;
        for (int i = 0; i < o->n_lora && ok; i++)
            ok = (ad[i] = fc_llm_lora_load(ctx, sv.model, o->lora_path[i])) != NULL;
        ok = ok && fc_llm_model_set_loras(ctx, sv.model, ad, o->lora_scale, (size_t)o->n_lora) == FC_OK;
        for (int i = 0; i < o->n_lora; i++) fc_llm_lora_free(ad[i]); /* the model keeps what it needs */
        if (!ok) {
            fprintf(stderr, "fucina serve: %s\n", fc_ctx_error(ctx));
            goto out;
        }
        fprintf(stderr, "fucina serve: %d LoRA adapter%s set\n", o->n_lora, o->n_lora == 1 ? "" : "s");
    }
    const fc_llm_hparams *hp = fc_llm_model_hparams(sv.model);
    sv.tok = fc_llm_model_tokenizer(sv.model);
    sv.n_vocab = hp->n_vocab;
    if (o->chat_template) {
        if (fc_chat_template_from_name(ctx, o->chat_template, &sv.tmpl) != FC_OK) {
            fprintf(stderr, "fucina serve: --chat-template: %s\n", fc_ctx_error(ctx));
            goto out;
        }
    } else {
        int found = 0;
        if (fc_chat_template_load(ctx, o->model_path, &sv.tmpl, &found) != FC_OK) {
            fprintf(stderr, "fucina serve: %s (choose one with --chat-template)\n", fc_ctx_error(ctx));
            goto out;
        }
        if (!found) {
            sv.tmpl = FC_CHAT_TEMPLATE_CHATML;
            fprintf(stderr, "fucina serve: the model has no chat template: using chatml (see --chat-template)\n");
        }
    }
    snprintf(sv.model_id, sizeof sv.model_id, "%s", o->alias ? o->alias : base_name(o->model_path));
    sv.n_ctx = o->n_ctx > 0 ? o->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    fc_token eog[FC_CHAT_MAX_EOG_TOKENS];
    size_t n_eog = 0;
    if (fc_chat_template_eog_tokens(ctx, sv.tok, sv.tmpl, eog, FC_CHAT_MAX_EOG_TOKENS, &n_eog) != FC_OK) {
        fprintf(stderr, "fucina serve: %s\n", fc_ctx_error(ctx));
        goto out;
    }
    srv_engine_options eo = {
        .n_slots = o->n_slots,
        .n_ctx = sv.n_ctx,
        .kv_type = o->kv_type,
        .threads = o->threads,
        .n_batch = o->n_batch,
        .queue_cap = o->queue_cap,
        .eog = eog,
        .n_eog = n_eog,
    };
    sv.eng = srv_engine_start(sv.model, &eo, err, sizeof err);
    if (!sv.eng) {
        fprintf(stderr, "fucina serve: %s\n", err);
        goto out;
    }
    atomic_store(&sv.ready, 1);
    fprintf(stderr, "fucina serve: %s (%s), %d slot%s of %" PRId64 " tokens, chat template %s\n", sv.model_id,
            fc_llm_arch_name(hp->arch), srv_engine_n_slots(sv.eng), srv_engine_n_slots(sv.eng) == 1 ? "" : "s",
            sv.n_ctx, fc_chat_template_name(sv.tmpl));
    fprintf(stderr, "fucina serve: listening on http://%s%s%s:%d\n", o->host && strchr(o->host, ':') ? "[" : "",
            o->host ? o->host : "127.0.0.1", o->host && strchr(o->host, ':') ? "]" : "", srv_http_port(http));
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "fucina serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    status = 0;
out:
    /* stop taking connections, end the requests in flight (their clients
     * get an error or the end of their stream), then close the rest */
    srv_http_quiesce(http);
    srv_engine_stop(sv.eng);
    /* the streams write their last event and the waiting requests their
     * answer before the connections close */
    if (srv_http_drain(http, 5000)) fprintf(stderr, "fucina serve: some responses were still being sent: cut\n");
    srv_http_stop(http);
    srv_engine_free(sv.eng);
    if (sv.model) fc_llm_model_free(sv.model);
    if (ctx) fc_ctx_free(ctx);
    if (sv.tok_ctx) fc_ctx_free(sv.tok_ctx);
    pthread_mutex_destroy(&sv.tok_mu);
    return status;
}
