/* SPDX-License-Identifier: MIT */
/* Fucina: neural-network ops over named axes: softmax, normalization,
 * rotary position embedding and attention.
 *
 * Conventions (as in ops.h): every function returns a new tensor (NULL after
 * recording an error that names the op and the axis); a NULL operand returns
 * NULL without recording anything. Options structs are passed by pointer and
 * written with designated initializers; NULL means every default, and a field
 * left zero takes the default documented next to it:
 *
 *     fc_tensor *p = fc_softmax(ctx, scores, "kv_seq",
 *                               &(fc_softmax_options){.scale = 0.125, .causal = 1});
 *
 * Dtypes: the row ops (softmax, log_softmax, rmsnorm, layernorm, rope) take
 * f32, f16 and bf16; f16/bf16 are widened exactly to f32, computed in f32
 * and rounded once to the input's dtype (bit-identical to casting up,
 * running the f32 op and casting down). Results have x's axes in x's order
 * and are contiguous. Rows are independent, so results do not depend on the
 * thread count. */
#ifndef FUCINA_NN_H
#define FUCINA_NN_H

#include <stdint.h>

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- softmax --- */
typedef struct fc_softmax_options {
    /* y = softmax(scale * x + mask) along the axis; 0 means 1. */
    double scale;
    /* NULL, or an additive f32 mask whose axes are among x's (equal size or
     * size 1; missing axes broadcast). Entries may be -INFINITY. */
    fc_tensor *mask;
    /* Causal masking: element (q, k) is masked (-inf) when k > q + q_offset,
     * with q the index along query_axis and k the index along key_axis. */
    int causal;
    const char *query_axis;    /* NULL: "seq" */
    const char *key_axis;      /* NULL: the softmax axis */
    int64_t q_offset;          /* position of query 0 among the keys */
    /* NULL, or per-row "sink" logits (gpt-oss): a float tensor whose axes
     * are among x's minus the softmax axis (missing axes broadcast). The sink
     * joins the denominator only (it is not scaled and has no output):
     * y_i = exp(z_i) / (sum_j exp(z_j) + exp(sink)). */
    fc_tensor *sinks;
} fc_softmax_options;

/* Softmax along `axis`. A fully masked row (every scaled, masked logit
 * -inf) gives zeros, with or without a sink. NaN or +inf in a row makes the
 * row NaN. */
FC_API fc_tensor *fc_softmax(fc_ctx *ctx, fc_tensor *x, const char *axis, const fc_softmax_options *opt);
/* log(softmax(x)) along `axis`, computed as x - max - log(sum exp(x - max));
 * an all -inf row gives -inf. */
FC_API fc_tensor *fc_log_softmax(fc_ctx *ctx, fc_tensor *x, const char *axis);

/* --- normalization ---
 * `weight` and `bias` are rank-1 tensors whose one axis has the name and
 * size of the normalized axis, of x's dtype or f32; NULL means none. */

/* y = x / sqrt(mean(x^2) + eps) * weight along `axis` (Llama, Qwen). */
FC_API fc_tensor *fc_rmsnorm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, const char *axis, double eps);
/* The pre-norm residual step in one pass over the rows:
 *   s = x + residual (x's dtype, rounded once),  y = rmsnorm(s) * weight.
 * residual has x's dtype and x's named shape (any axis order). Returns y;
 * *sum_out (when sum_out is not NULL) receives s, the next residual, as a
 * new reference; on error it is set to NULL. y equals fc_rmsnorm of s
 * exactly. */
FC_API fc_tensor *fc_rmsnorm_residual(fc_ctx *ctx, fc_tensor *x, fc_tensor *residual, fc_tensor *weight,
                                      const char *axis, double eps, fc_tensor **sum_out);
/* y = (x - mean) / sqrt(var + eps) * weight + bias along `axis` (biased
 * variance, as torch.nn.functional.layer_norm). */
FC_API fc_tensor *fc_layernorm(fc_ctx *ctx, fc_tensor *x, fc_tensor *weight, fc_tensor *bias, const char *axis,
                               double eps);

/* --- rotary position embedding --- */
typedef enum fc_rope_style {
    /* Interleaved pairs (2i, 2i+1): GPT-J, llama.cpp's "normal" mode. */
    FC_ROPE_STYLE_NORMAL = 0,
    /* Rotate-half pairs (i, i + n_rot/2): GPT-NeoX, Hugging Face Llama. */
    FC_ROPE_STYLE_NEOX = 1,
} fc_rope_style;

typedef struct fc_rope_options {
    fc_rope_style style;       /* default NORMAL */
    int64_t n_rot;             /* rotated leading dims of each head: even; 0 = the head dim.
                                  Dims [n_rot, d) pass through unchanged. */
    double theta;              /* frequency base; 0 = 10000 */
    double freq_scale;         /* linear position scaling (1/factor); 0 = 1 */
    /* YaRN (ggml's semantics, see src/exec/rope.h); off when ext_factor is 0. */
    double ext_factor;
    int64_t n_ctx_orig;        /* the original training context; required with YaRN */
    double attn_factor;        /* magnitude scale of cos/sin; 0 = 1 */
    double beta_fast;          /* 0 = 32 */
    double beta_slow;          /* 0 = 1 */
    fc_tensor *freq_factors;   /* NULL, or f32 rank 1 of n_rot/2 frequency divisors (Llama 3.1) */
    int f64_angles;            /* 1: angles in double (more accurate); 0: ggml's float arithmetic */
    int backward;              /* 1: rotate by -theta (the gradient of RoPE) */
    const char *token_axis;    /* NULL: "seq" */
    const char *head_axis;     /* NULL: "head" (may be absent from x: one head) */
    const char *dim_axis;      /* NULL: "d" */
} fc_rope_options;

/* Rotate x [seq, head, d] by the angles of `positions` (i32 or i64, rank 1,
 * its one axis named like the token axis and of its size). x's other axes,
 * if any, are batch axes sharing the positions. Angle for pair i at
 * position p: p * freq_scale * theta^(-2i/n_rot) (plus YaRN); each pair
 * (x0, x1) becomes (x0 cos - x1 sin, x0 sin + x1 cos). */
FC_API fc_tensor *fc_rope(fc_ctx *ctx, fc_tensor *x, fc_tensor *positions, const fc_rope_options *opt);

/* --- attention --- */
typedef struct fc_attention_options {
    double scale;              /* logits = scale * q·k; 0 = 1/sqrt(d) */
    double softcap;            /* 0: off; else logits = softcap * tanh(logits / softcap) */
    int causal;                /* query t sees keys s <= q_pos0 + t */
    int64_t q_pos0;            /* absolute position of query 0 (keys are at 0..kv_seq-1) */
    int64_t window;            /* sliding window: 0 off, else (q_pos0 + t) - s < window */
    /* NULL, or an additive f32 mask over axes among q's seq and head, k's
     * kv_seq and the batch axes (missing axes broadcast). */
    fc_tensor *mask;
    /* NULL, or f32 per-head sink logits [head] (gpt-oss): they join the
     * denominator only. */
    fc_tensor *sinks;
    /* Axis names. q is [seq, head, d]; k is [kv_seq, kv_head, d]; v is
     * [kv_seq, kv_head, d] (v's d may have another size). Head axes may be
     * absent (one head). Other axes of q are batch axes: k, v and the mask
     * have them with the same size or not at all (broadcast). */
    const char *seq_axis;      /* NULL: "seq" */
    const char *head_axis;     /* NULL: "head" */
    const char *dim_axis;      /* NULL: "d" (q, k and v) */
    const char *kv_seq_axis;   /* NULL: "kv_seq" */
    const char *kv_head_axis;  /* NULL: "kv_head" */
} fc_attention_options;

/* Scaled dot-product attention: softmax(scale * q·kᵀ + mask) · v per head,
 * with grouped-query attention when head is a multiple of kv_head (query
 * head h uses kv head h / (head / kv_head), as repeat_interleave). q is f32;
 * k and v are both f32 or both f16. Returns f32 with q's axes in q's order
 * (d of v's size). A row with no visible key gives zeros. Strided q/k/v
 * views are read in place when their d axis is contiguous. */
FC_API fc_tensor *fc_attention(fc_ctx *ctx, fc_tensor *q, fc_tensor *k, fc_tensor *v,
                               const fc_attention_options *opt);

/* Dropout with probability p in [0, 1): element i (row-major over x's
 * axes) is zeroed when the counter-based uniform u(seed, i) < p, else scaled
 * by 1/(1-p). Deterministic in (seed, shape); the mask is never stored (the
 * gradient regenerates it). Pass a new seed per step. */
FC_API fc_tensor *fc_dropout(fc_ctx *ctx, fc_tensor *x, double p, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif
