/* SPDX-License-Identifier: MIT */
/* fco_llama_load: libllama's API for tests and benches (oracle/llama_abi.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_oracle.h"
#include "llama_abi.h"

static fco_llama_api api;
static const char *api_why;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

typedef void (*log_cb)(int level, const char *text, void *user);
static void quiet(int level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

#define RESOLVE(field, name)                                                                                       \
    do {                                                                                                           \
        *(void **)&api.field = fco_llama_sym(name);                                                                \
        if (!api.field) {                                                                                          \
            api_why = "libllama does not export " name " (wrong llama.cpp release in the oracle directory?)";     \
            return;                                                                                                \
        }                                                                                                          \
    } while (0)

static void load_once(void) {
    if (!fco_ggml_available(&api_why)) return;
    RESOLVE(model_defaults, "llama_model_default_params");
    RESOLVE(ctx_defaults, "llama_context_default_params");
    RESOLVE(load, "llama_model_load_from_file");
    RESOLVE(model_free, "llama_model_free");
    RESOLVE(init, "llama_init_from_model");
    RESOLVE(free_ctx, "llama_free");
    RESOLVE(batch_init, "llama_batch_init");
    RESOLVE(batch_free, "llama_batch_free");
    RESOLVE(decode, "llama_decode");
    RESOLVE(logits_ith, "llama_get_logits_ith");
    RESOLVE(get_vocab, "llama_model_get_vocab");
    RESOLVE(tokenize, "llama_tokenize");
    RESOLVE(get_memory, "llama_get_memory");
    RESOLVE(memory_clear, "llama_memory_clear");
    RESOLVE(memory_seq_rm, "llama_memory_seq_rm");
    RESOLVE(set_n_threads, "llama_set_n_threads");
    RESOLVE(synchronize, "llama_synchronize");
    RESOLVE(attach_threadpool, "llama_attach_threadpool");
    RESOLVE(detach_threadpool, "llama_detach_threadpool");
    RESOLVE(model_size, "llama_model_size");
    RESOLVE(model_n_params, "llama_model_n_params");
    RESOLVE(model_desc, "llama_model_desc");
    RESOLVE(chat_apply_template, "llama_chat_apply_template");
    RESOLVE(chat_builtin_templates, "llama_chat_builtin_templates");
    RESOLVE(vocab_n_tokens, "llama_vocab_n_tokens");
    RESOLVE(token_to_piece, "llama_token_to_piece");
    RESOLVE(detokenize, "llama_detokenize");
    RESOLVE(n_ctx_seq, "llama_n_ctx_seq");
    RESOLVE(vocab_is_eog, "llama_vocab_is_eog");
    /* optional: tests that need them skip when they are NULL */
    *(void **)&api.adapter_lora_init = fco_llama_sym("llama_adapter_lora_init");
    *(void **)&api.set_adapters_lora = fco_llama_sym("llama_set_adapters_lora");
    *(void **)&api.embeddings_ith = fco_llama_sym("llama_get_embeddings_ith");
    *(void **)&api.embeddings_seq = fco_llama_sym("llama_get_embeddings_seq");
    *(void **)&api.pooling_type = fco_llama_sym("llama_pooling_type");
    void (*log_set)(log_cb, void *);
    *(void **)&log_set = fco_llama_sym("llama_log_set");
    void *(*cpu_reg)(void);
    void (*reg)(void *);
    *(void **)&cpu_reg = fco_ggml_sym("ggml_backend_cpu_reg");
    *(void **)&reg = fco_ggml_sym("ggml_backend_register");
    if (!log_set || !cpu_reg || !reg) {
        api_why = "llama_log_set / ggml_backend_cpu_reg / ggml_backend_register missing in the oracle";
        return;
    }
    if (!getenv("FCT_LLAMA_VERBOSE")) log_set(quiet, NULL);
    reg(cpu_reg());
    /* the structs go by value: check our declarations through the documented defaults */
    struct llama_model_params mp = api.model_defaults();
    if (mp.n_gpu_layers != -1 || mp.vocab_only || !mp.use_extra_bufts || mp.no_alloc) {
        api_why = "llama_model_params of the oracle does not match oracle/llama_abi.h";
        return;
    }
    struct llama_context_params cp = api.ctx_defaults();
    if (cp.n_ctx != 512 || cp.n_batch != 2048 || cp.n_ubatch != 512 || cp.n_seq_max != 1 || cp.type_k != 1 ||
        cp.type_v != 1 || cp.flash_attn_type != -1 || cp.pooling_type != -1 || cp.embeddings || !cp.no_perf ||
        cp.kv_unified || cp.samplers || cp.ctx_other) {
        api_why = "llama_context_params of the oracle does not match oracle/llama_abi.h";
        return;
    }
    api_why = NULL;
}

const fco_llama_api *fco_llama_load(const char **why) {
    pthread_once(&api_once, load_once);
    if (api_why) {
        if (why) *why = api_why;
        return NULL;
    }
    return &api;
}
