/* SPDX-License-Identifier: MIT */
/* Fucina: training language models (pretraining from scratch and supervised
 * fine-tuning) on the autograd runtime.
 *
 * An fc_lm is a decoder of one of the dense families of fucina/llm.h
 * ("qwen3": per-head Q/K norms, NeoX RoPE; "llama": normal RoPE, no Q/K
 * norms; "qwen2": Q/K/V biases) whose weights are f32 variables laid out
 * exactly as the GGUF loader binds them (src/llm/arch.c): the same tensor
 * names, the same axes. Its differentiable forward (src/llm/lm_graph.c) is
 * the family's graph on tensor ops; the inference forward (fc_llm_session,
 * src/llm/forward.c) runs on the very same weights, so a training model is
 * evaluated, sampled and exported without conversion:
 *
 *     fc_lm *lm = fc_lm_new(ctx, "tok.gguf", &(fc_lm_config){.n_embd = 128, .n_layer = 4});
 *     fc_scope s = fc_scope_begin(ctx);
 *     fc_tensor *loss = fc_lm_loss(ctx, lm, tokens, targets, NULL);   // sum over the targets
 *     fc_backward(ctx, loss);
 *     fc_scope_end(ctx, s);
 *     ... fc_optim_step ...
 *     fc_lm_save_gguf(ctx, lm, "model.gguf", FC_F32);                // llama.cpp loads it
 *
 * fc_lm_train (below) is the whole pretraining / SFT loop the `fucina
 * pretrain` and `fucina sft` commands run: data, Muon + AdamW, schedule,
 * gradient accumulation, held-out bits per byte, checkpoints that resume
 * bit for bit. LoRA fine-tuning of a frozen (possibly quantized) base is in
 * fucina/lm_lora.h: the same fc_lm, the same loop.
 *
 * Options structs follow the library's convention: a zeroed struct (or
 * NULL) means every default, documented next to each field. Errors name the
 * function, the thing and the reason (fc_ctx_error). */
#ifndef FUCINA_LM_TRAIN_H
#define FUCINA_LM_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/llm.h"
#include "fucina/optim.h"
#include "fucina/status.h"
#include "fucina/tensor.h"
#include "fucina/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_lm fc_lm;

/* The shape of a new model. */
typedef struct fc_lm_config {
    const char *arch;   /* NULL: "qwen3"; also "llama", "qwen2" */
    int64_t n_vocab;    /* 0: the tokenizer's; without a tokenizer file it is required (a model for tests) */
    int64_t n_embd;     /* 0: 128 */
    int64_t n_layer;    /* 0: 4 */
    int64_t n_head;     /* 0: max(1, n_embd / 64) */
    int64_t n_head_kv;  /* 0: n_head; must divide n_head */
    int64_t head_dim;   /* 0: n_embd / n_head (even) */
    int64_t n_ff;       /* 0: 8/3 n_embd rounded up to a multiple of 32 (the SiLU-gated FFN's usual width) */
    int64_t n_ctx;      /* the context written as <arch>.context_length; 0: 512 */
    double rope_theta;  /* 0: 10000 */
    double rms_eps;     /* 0: 1e-6 */
    int tied;           /* 1: no output.weight (the embeddings are the output projection); default untied */
    uint64_t seed;      /* the initial weights are a pure function of it */
} fc_lm_config;

/* A new model with the tokenizer of tokenizer_gguf (any GGUF holding
 * tokenizer.ggml.*: a `fucina train-tokenizer` file, or a model; NULL: no
 * tokenizer, cfg->n_vocab ids, and no GGUF export) and
 * nanochat's initialisation: embeddings N(0, 1); Q/K/V, gate and up
 * matrices uniform with std 1/sqrt(in) (times min(1, sqrt(out/in)));
 * the attention and FFN output projections and the output head zero;
 * norm weights one, biases zero. NULL + error. */
FC_API fc_lm *fc_lm_new(fc_ctx *ctx, const char *tokenizer_gguf, const fc_lm_config *cfg);
/* A model from a GGUF file of a supported family (f32, f16 or bf16
 * weights, converted to f32 variables): the start of a fine-tune, or a
 * model exported by fc_lm_save_gguf. NULL + error naming the file and the
 * reason (an unsupported family or switch, a quantized tensor). */
FC_API fc_lm *fc_lm_load(fc_ctx *ctx, const char *path);
FC_API void fc_lm_free(fc_lm *lm);

/* The model seen by the inference API (sessions, sampling, chat): its
 * weights are the training variables themselves, read in place. Valid
 * until fc_lm_free; evaluate it under no-grad (sessions do). */
FC_API const fc_llm_model *fc_lm_model(const fc_lm *lm);
FC_API const fc_llm_hparams *fc_lm_hparams(const fc_lm *lm);
FC_API const fc_tokenizer *fc_lm_tokenizer(const fc_lm *lm);
/* The parameters in the loader's order, with their GGUF names. */
FC_API int fc_lm_param_count(const fc_lm *lm);
FC_API fc_tensor *fc_lm_param(const fc_lm *lm, int i, const char **name);
/* Total parameter elements. */
FC_API int64_t fc_lm_n_elements(const fc_lm *lm);

typedef struct fc_lm_forward_options {
    /* 1: activation checkpointing per layer (fc_checkpoint): a layer's
     * activations are recomputed in backward instead of kept; gradients
     * are bitwise the same. */
    int checkpoint;
} fc_lm_forward_options;

/* Logits [b, seq, vocab] of tokens [b, seq] (i32 or i64; axes named "b"
 * and "seq"), positions 0..seq-1 in every row, causal attention. */
FC_API fc_tensor *fc_lm_logits(fc_ctx *ctx, fc_lm *lm, fc_tensor *tokens, const fc_lm_forward_options *opt);
/* The summed cross-entropy (nats) of targets [b, seq] (i32 / i64; -100 is
 * ignored) under the logits of tokens: a scalar. A sum rather than a mean
 * so that micro-batches, accumulation steps and data-parallel ranks add up
 * to the global batch's sum; divide by the global count of targets. */
FC_API fc_tensor *fc_lm_loss(fc_ctx *ctx, fc_lm *lm, fc_tensor *tokens, fc_tensor *targets,
                             const fc_lm_forward_options *opt);

/* Write the model as a GGUF file llama.cpp and fc_llm_model_load read: the
 * family's metadata keys, the tokenizer's keys copied from the file it came
 * from (tokenizer.*, the chat template included), every weight as dtype
 * (FC_F32, FC_F16 or FC_BF16 for matrices; vectors stay f32). Atomic. */
FC_API fc_status fc_lm_save_gguf(fc_ctx *ctx, const fc_lm *lm, const char *path, fc_dtype dtype);

/* ---- the training loop ---- */

/* What one step reports (fc_lm_train_options.on_step). */
typedef struct fc_lm_step_info {
    int64_t step, steps;    /* step just taken (1-based), of steps */
    double loss;            /* mean nats per target of the step's global batch */
    double lr_scale;        /* the schedule's factor (1 at the peak) */
    double tokens_per_s;    /* targets per second of this step */
    int64_t tokens_seen;    /* targets trained on since this call began (a resumed run counts from 0) */
    double val_bpb;         /* held-out bits per byte, when this step evaluated (else NaN) */
    double val_loss;        /* held-out mean nats per target (NaN when not evaluated) */
    double reduce_s;        /* seconds this step spent combining the micro-batches' gradients (across
                               ranks under `parallel`, waiting for the slower one included) */
} fc_lm_step_info;

/* Data parallelism across processes: this process is rank `rank` of `size`
 * (`fucina pretrain` under mpirun fills it in with MPI; the library only
 * moves bytes through these functions, each returning 0 on success).
 *
 * Rank r computes micro-batches [r A/K, (r+1) A/K) of every global batch
 * (A = accum, which K = size must divide). Gradients are combined in one
 * fixed order, the order a single process sums its micro-batches in: rank
 * 0's running sum goes to rank 1, which adds its micro-batches one by one
 * and passes it on; the last rank broadcasts the total. So K ranks give
 * parameters bitwise equal to one process with the same batch and accum
 * (and the same thread count per process: a kernel's bits depend on none
 * of these, but Muon's and the GEMMs' must match across the runs compared).
 * Only rank 0 evaluates and writes checkpoints; every rank reads the whole
 * data set and computes the same optimizer step. */
typedef struct fc_lm_parallel {
    int rank, size;
    int (*send)(void *user, int to, const void *data, size_t bytes);
    int (*recv)(void *user, int from, void *data, size_t bytes);
    int (*broadcast)(void *user, int root, void *data, size_t bytes);
    void *user;
} fc_lm_parallel;

typedef enum fc_lm_data_kind {
    FC_LM_DATA_TEXT = 0,    /* documents of plain text ({"text": ...} in JSONL, or whole files) */
    FC_LM_DATA_CHAT = 1,    /* conversations ({"messages": [...]} in JSONL): loss on assistant tokens only */
} fc_lm_data_kind;

typedef struct fc_lm_train_options {
    fc_lm_data_kind data;
    const char *const *train_files; /* .jsonl (one document per line) or text files (one document each) */
    int n_train_files;
    const char *const *val_files;   /* NULL: no held-out evaluation */
    int n_val_files;
    const char *jsonl_field;        /* the text field of TEXT JSONL lines; NULL: "text" */

    int64_t steps;          /* optimizer steps; 0: 200 */
    int64_t seq;            /* tokens per row; 0: 128 (at most the model's n_ctx) */
    int64_t batch;          /* rows per optimizer step (the global batch); 0: 8 */
    int64_t accum;          /* micro-batches the global batch is split into; 0: 1, or the ranks' count
                               under `parallel` (must divide batch; the ranks' count must divide it) */
    double matrix_lr;       /* Muon's lr for the layers' matrices; 0: 0.02 */
    double embed_lr;        /* AdamW's for token_embd; 0: 0.2 x (n_embd/768)^-0.5 */
    double head_lr;         /* AdamW's for output.weight; 0: 0.004 x (n_embd/768)^-0.5 */
    double scalar_lr;       /* AdamW's for norm weights and biases; 0: 0.02 */
    double lora_lr;         /* a LoRA model's (fucina/lm_lora.h): AdamW's for its A/B pairs, the only
                               group (the four above are unused); 0: 1e-3 */
    double warmup;          /* fraction of steps of linear warmup; 0: none (FC_OPTIM_ZERO is also none) */
    double warmdown;        /* fraction of steps of the final linear decay; 0: 0.2; FC_OPTIM_ZERO: none */
    double final_lr_frac;   /* the lr factor at the end of the warmdown; 0: 0 */
    double clip;            /* gradient-norm clip; 0: none */
    int checkpoint_layers;  /* activation checkpointing (fc_lm_forward_options.checkpoint) */
    uint64_t seed;          /* data order; 0: 1 */

    int64_t eval_every;     /* evaluate on the held-out files every this many steps; 0: at the end only */
    int64_t eval_tokens;    /* held-out targets per evaluation; 0: all, at most 65536 */
    const char *save_path;  /* checkpoint file (safetensors); NULL: none */
    int64_t save_every;     /* also every this many steps; 0: at the end only */
    const char *resume_path;/* continue from this checkpoint (its step, optimizer state, data position) */
    const fc_lm_parallel *parallel; /* NULL (or size 1): this process alone */

    void (*on_step)(const fc_lm_step_info *info, void *user);
    void *user;
} fc_lm_train_options;

/* The recipe's optimizer for lm (Muon; the groups and learning rates of
 * the options above, with their defaults): group 0 the layers' matrices,
 * then token_embd, output.weight (untied) and the norm weights / biases,
 * each present group in that order. For a LoRA model (fucina/lm_lora.h):
 * AdamW (betas 0.9 / 0.999, eps 1e-8, no weight decay) at lora_lr, one
 * group of every A and B. Free with fc_optim_free. */
FC_API fc_optim *fc_lm_optimizer(fc_ctx *ctx, fc_lm *lm, const fc_lm_train_options *opt);
/* The schedule's factor at step (0-based) of steps: linear warmup over
 * round(warmup * steps) steps from 1/w to 1, then 1, then a linear decay
 * over the last round(warmdown * steps) steps to final_frac. */
FC_API double fc_lm_lr_factor(int64_t step, int64_t steps, double warmup, double warmdown, double final_frac);

/* Train lm in place. The result continues bit for bit when resumed from a
 * checkpoint it wrote (same options). FC_OK or an error naming the file,
 * line or option and the reason. */
FC_API fc_status fc_lm_train(fc_ctx *ctx, fc_lm *lm, const fc_lm_train_options *opt);

#ifdef __cplusplus
}
#endif
#endif
