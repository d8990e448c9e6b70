/* SPDX-License-Identifier: MIT */
/* llama.cpp's model and context API, as the prebuilt libllama of the oracle
 * exports it (declared from include/llama.h of the matching release). The
 * parameter structs go by value, so their layouts must be exact:
 * fco_llama_load checks them against the documented defaults before use.
 * Used by tests (logits parity) and by the bench harness's llm suite. */
#ifndef FUCINA_LLAMA_ABI_H
#define FUCINA_LLAMA_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int32_t llama_token;
typedef int32_t llama_pos;
typedef int32_t llama_seq_id;
struct llama_model;
struct llama_context;
struct llama_adapter_lora;
typedef bool (*llama_progress_callback)(float progress, void *user_data);
struct llama_model_params {
    void **devices;
    const void *tensor_buft_overrides;
    int32_t n_gpu_layers;
    int split_mode;
    int load_mode;
    int lazy_mode;
    int32_t main_gpu;
    const float *tensor_split;
    llama_progress_callback progress_callback;
    void *progress_callback_user_data;
    const void *kv_overrides;
    bool vocab_only;
    bool check_tensors;
    bool use_extra_bufts;
    bool no_host;
    bool no_alloc;
    bool load_mtp;
};
struct llama_context_params {
    uint32_t n_ctx;
    uint32_t n_batch;
    uint32_t n_ubatch;
    uint32_t n_seq_max;
    uint32_t n_rs_seq;
    uint32_t n_outputs_max;
    uint32_t n_outputs_max_per_seq;
    int32_t n_threads;
    int32_t n_threads_batch;
    int ctx_type;          /* enum llama_context_type */
    int rope_scaling_type; /* enum llama_rope_scaling_type */
    int pooling_type;      /* enum llama_pooling_type */
    int attention_type;    /* enum llama_attention_type */
    int flash_attn_type;   /* enum llama_flash_attn_type */
    float rope_freq_base;
    float rope_freq_scale;
    float yarn_ext_factor;
    float yarn_attn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    float defrag_thold;
    void *cb_eval; /* ggml_backend_sched_eval_callback */
    void *cb_eval_user_data;
    int type_k; /* enum ggml_type */
    int type_v;
    void *abort_callback; /* ggml_abort_callback */
    void *abort_callback_data;
    bool embeddings;
    bool offload_kqv;
    bool no_perf;
    bool op_offload;
    bool swa_full;
    bool kv_unified;
    void *samplers;
    size_t n_samplers;
    struct llama_context *ctx_other;
};
typedef struct llama_batch {
    int32_t n_tokens;
    llama_token *token;
    float *embd;
    llama_pos *pos;
    int32_t *n_seq_id;
    llama_seq_id **seq_id;
    int8_t *logits;
} llama_batch;

typedef struct llama_memory_i *llama_memory_t;
typedef struct llama_chat_message {
    const char *role;
    const char *content;
} llama_chat_message;

/* The entry points the tests and benches call, resolved by fco_llama_load. */
typedef struct fco_llama_api {
    struct llama_model_params (*model_defaults)(void);
    struct llama_context_params (*ctx_defaults)(void);
    struct llama_model *(*load)(const char *path, struct llama_model_params);
    void (*model_free)(struct llama_model *);
    struct llama_context *(*init)(struct llama_model *, struct llama_context_params);
    void (*free_ctx)(struct llama_context *);
    llama_batch (*batch_init)(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
    void (*batch_free)(llama_batch);
    int32_t (*decode)(struct llama_context *, llama_batch);
    float *(*logits_ith)(struct llama_context *, int32_t i);
    const void *(*get_vocab)(const struct llama_model *);
    int32_t (*tokenize)(const void *vocab, const char *text, int32_t len, llama_token *out, int32_t cap,
                        bool add_special, bool parse_special);
    llama_memory_t (*get_memory)(const struct llama_context *);
    void (*memory_clear)(llama_memory_t, bool data);
    bool (*memory_seq_rm)(llama_memory_t, llama_seq_id, llama_pos p0, llama_pos p1);
    void (*set_n_threads)(struct llama_context *, int32_t n_threads, int32_t n_threads_batch);
    void (*synchronize)(struct llama_context *);
    /* the bench harness's llm suite (bench/peers/llama_llm.c) */
    void (*attach_threadpool)(struct llama_context *, void *threadpool, void *threadpool_batch);
    void (*detach_threadpool)(struct llama_context *);
    uint64_t (*model_size)(const struct llama_model *);
    uint64_t (*model_n_params)(const struct llama_model *);
    int32_t (*model_desc)(const struct llama_model *, char *buf, size_t buf_size);
    /* chat templates (tests/runtime/test_llm_chat.c): llama_chat_apply_template */
    int32_t (*chat_apply_template)(const char *tmpl, const struct llama_chat_message *chat, size_t n_msg, bool add_ass,
                                   char *buf, int32_t length);
    /* the names of llama.cpp's built-in template families: the count, and up to len of them into output */
    int32_t (*chat_builtin_templates)(const char **output, size_t len);
    /* tokenizer tests (tests/runtime/test_tokenizer_spm.c): llama_vocab_n_tokens,
     * llama_token_to_piece, llama_detokenize (vocab is a const llama_vocab *) */
    int32_t (*vocab_n_tokens)(const void *vocab);
    int32_t (*token_to_piece)(const void *vocab, llama_token token, char *buf, int32_t length, int32_t lstrip,
                              bool special);
    int32_t (*detokenize)(const void *vocab, const llama_token *tokens, int32_t n_tokens, char *text,
                          int32_t text_len_max, bool remove_special, bool unparse_special);
    /* the bench harness's serve suite (bench/serve.c): llama_n_ctx_seq (the
     * positions each sequence got), llama_vocab_is_eog */
    uint32_t (*n_ctx_seq)(const struct llama_context *);
    bool (*vocab_is_eog)(const void *vocab, llama_token token);
    /* LoRA adapters (tests/runtime/test_lora.c), resolved optionally: NULL
     * when the release lacks them (older ones set one adapter at a time with
     * llama_set_adapter_lora). llama_adapter_lora_init loads an adapter for a
     * model (freed with the model); llama_set_adapters_lora replaces the
     * context's set with n adapters and their scales (0 on success). */
    struct llama_adapter_lora *(*adapter_lora_init)(struct llama_model *, const char *path_lora);
    int32_t (*set_adapters_lora)(struct llama_context *, struct llama_adapter_lora **adapters, size_t n_adapters,
                                 float *scales);
    /* embeddings (tests/runtime/test_llm_embed.c), resolved optionally (NULL when the release
     * lacks them): llama_get_embeddings_ith (a row's final hidden state, pooling none),
     * llama_get_embeddings_seq (a sequence's pooled embedding), llama_pooling_type (the
     * context's pooling after llama.cpp resolved an unspecified one from the model) */
    float *(*embeddings_ith)(struct llama_context *, int32_t i);
    float *(*embeddings_seq)(struct llama_context *, llama_seq_id seq_id);
    int (*pooling_type)(const struct llama_context *);
} fco_llama_api;

/* enum ggml_type values used for type_k / type_v */
#define FCO_GGML_TYPE_F32 0
#define FCO_GGML_TYPE_F16 1
#define FCO_GGML_TYPE_Q8_0 8
/* enum llama_pooling_type */
#define FCO_LLAMA_POOLING_UNSPECIFIED (-1)
#define FCO_LLAMA_POOLING_NONE 0
#define FCO_LLAMA_POOLING_MEAN 1
#define FCO_LLAMA_POOLING_CLS 2
#define FCO_LLAMA_POOLING_LAST 3
/* enum llama_flash_attn_type */
#define FCO_LLAMA_FLASH_ATTN_DISABLED 0

/* Loads libllama through the ggml oracle, resolves the API, silences its log
 * (unless $FCT_LLAMA_VERBOSE is set), registers the CPU backend the oracle
 * chose (libllama finds none by itself in the oracle's directory) and checks
 * the parameter structs' layouts. NULL with *why set (a sentence) when
 * anything is missing or does not match. Thread-safe; resolved once. */
const fco_llama_api *fco_llama_load(const char **why);

#endif
