/* SPDX-License-Identifier: MIT */
/* The `llm` suite's peer: llama.cpp (libllama of the oracle) evaluating a
 * GGUF model as llama-bench does: prefill from an empty cache with the last
 * row's logits, and single-token decode steps. */
#ifndef FCB_PEERS_LLAMA_LLM_H
#define FCB_PEERS_LLAMA_LLM_H

#include <stddef.h>
#include <stdint.h>

typedef struct fcb_llama_model fcb_llama_model;
typedef struct fcb_llama_ctx fcb_llama_ctx;

/* 1 when libllama and ggml's threadpool are there; else 0 with *why set. */
int fcb_llama_available(const char **why);

/* For the other peers that drive libllama themselves (the serve suite's
 * lockstep decode): the oracle's libllama API and ggml's threadpool
 * functions, both valid once fcb_llama_available returned 1. A peer
 * attaches a threadpool to each context, as llama-bench does (else ggml
 * starts and joins threads for every graph); params_init fills ggml's own
 * parameter struct, which the caller passes as opaque storage. */
typedef struct fcb_ggml_threadpool {
    void (*params_init)(void *params, int n_threads);
    void *(*create)(void *params);
    void (*free)(void *tp);
    void (*pause)(void *tp);
} fcb_ggml_threadpool;
const struct fco_llama_api *fcb_llama_api(void);
const fcb_ggml_threadpool *fcb_llama_threadpool(void);

/* The model (weights loaded as llama.cpp loads them: mmap, CPU repack
 * buffers where it repacks). NULL + *why on failure. */
fcb_llama_model *fcb_llama_model_load(const char *path, const char **why);
void fcb_llama_model_free(fcb_llama_model *m);
/* llama_model_desc ("qwen3 0.6B F16"), into buf. */
void fcb_llama_model_desc(const fcb_llama_model *m, char *buf, size_t len);

/* A context as llama-bench makes one: n_ctx positions, n_batch = n_ubatch,
 * K and V of kv_type (a ggml type id: 0 f32, 1 f16, 8 q8_0), flash
 * attention left to llama.cpp ("auto"), and a persistent ggml threadpool of
 * n_threads attached (polling level 50, llama-bench's default). NULL + *why. */
fcb_llama_ctx *fcb_llama_ctx_new(fcb_llama_model *m, int n_threads, int n_ctx, int n_batch, int kv_type,
                                 const char **why);
/* Prefill: clear the cache, evaluate n tokens in one batch (logits of the
 * last row only). 0 on success. */
int fcb_llama_prefill(fcb_llama_ctx *c, const int32_t *tokens, int n);
/* Decode: clear the cache, evaluate n tokens one at a time, each with its
 * logits, waiting for each. 0 on success. */
int fcb_llama_decode(fcb_llama_ctx *c, const int32_t *tokens, int n);
/* Park the threadpool's workers (they poll after a graph) while the other
 * engine runs; the next graph resumes them. */
void fcb_llama_pause(fcb_llama_ctx *c);
void fcb_llama_ctx_free(fcb_llama_ctx *c);

#endif
