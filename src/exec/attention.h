/* SPDX-License-Identifier: MIT */
/* Scaled dot-product attention over raw strided pointers (flash-style).
 *
 * For every query token t in [0, n_q) and query head h in [0, n_head), with
 * KV head g = h / (n_head / n_kv_head) (grouped-query attention; MQA when
 * n_kv_head == 1, MHA when n_kv_head == n_head):
 *
 *   x[s]      = scale * dot(Q[t,h,:], K[s,g,:])          s in [0, n_kv)
 *   x[s]      = softcap * tanh(x[s] / softcap)           when softcap > 0
 *   x[s]     += mask[t, h, s]                            when mask != NULL
 *   visible(s): s <= q_pos0 + t                          when causal
 *               (q_pos0 + t) - s < window                when window > 0
 *   O[t,h,:]  = sum_{visible s} exp(x[s]) V[s,g,:]
 *               / (sum_{visible s} exp(x[s]) + (sinks ? exp(sinks[h]) : 0))
 *
 * Keys are at absolute positions 0..n_kv-1; query t is at q_pos0 + t. A sink
 * (gpt-oss) is one logit per query head that joins the denominator and has
 * no value. A row that has no visible key, or whose visible keys all have
 * logit -inf (from the mask), is "fully masked": its output is all zeros,
 * with or without a sink (the sink would take all the weight, and it has no
 * value).
 *
 * Layout. Element (t, h, i) of Q is q[t*q_ts + h*q_hs + i], and likewise for
 * K (k_ts, k_hs), V (v_ts, v_hs) and O (o_ts, o_hs); strides are in
 * elements (of f32 or f16), non-negative, and the last dimension is
 * contiguous. K and V are f32 or fc_f16 (kv_type); f16 is widened exactly.
 * The mask is f32, element (t, h, s) at mask[t*mask_rs + h*mask_hs + s]
 * (mask_hs = 0 broadcasts one [n_q, n_kv] mask over heads). Q and K have
 * head_dim elements per head, V and O have head_dim_v (0: head_dim).
 * O may be Q itself (same pointer and strides, head_dim_v == head_dim); it
 * must not overlap K, V, the mask or the sinks otherwise.
 *
 * Algorithm. The rows of the problem are (token, query head of the group)
 * pairs, token-major per KV head, so the n_head/n_kv_head heads sharing a KV
 * head form the M dimension of the register tiles together. Per key block:
 * K is packed (pack_bt; f16 first widened into scratch), S = Q·Kᵀ by the
 * f32_gemm micro-kernel (Q gathered times the scale), then per row softcap
 * and mask, the running max, P = exp(x - m) with its sum in one pass
 * (f32_exp_sub_sum), the accumulator is rescaled, and O_acc += P·V by the
 * micro-kernel (V packed with pack_b). Key blocks outside every row's visible
 * range are skipped, and inside a block each register panel of rows only
 * multiplies the key range its rows can see. Two ways to cut the work:
 *
 *   prefill (more than 4 MR-row panels of rows per KV head): chunks are
 *   (KV head, block of query tokens), up to 32 panels of rows each (fewer
 *   when that would leave fewer than 16 chunks). When a head has several
 *   query blocks, its K and V are not packed again for each: if all keys
 *   are one block, the chunks run head-major and each worker packs the
 *   block of the head it is on and keeps it for its next chunks (in L2);
 *   otherwise a parallel pre-pass packs them once per (KV head, key block)
 *   into the workspace (if that takes at most 64 MiB), shared by all query
 *   blocks. Key blocks: 65536 floats of K rows (512 keys at d = 128),
 *   between 128 and 1024 keys, rounded up to NR.
 *
 *   split-KV (decode: at most 4 MR-row panels of rows per KV head): chunks
 *   are key ranges ("splits", whole numbers of 64-key blocks, at least 2
 *   blocks, at most 16 splits) over all KV heads; inside a chunk the key
 *   blocks are outer and the heads inner, so the [token, head, dim] rows are
 *   read in address order, not one head's rows at the token stride. With at most 4 rows per KV head (and
 *   f32 K/V, or f16 with each token's heads contiguous, widened a token row
 *   at a time) S and P·V go key by key through f32_dot and f32_axpy instead
 *   of packing K and V for the micro-kernel. Each chunk leaves per-row
 *   partial (m, l, O_acc) triples; they are merged in split order:
 *   M = max m_s, l = sum l_s e^(m_s - M), O = sum O_s e^(m_s - M).
 *
 * Determinism. The mode, the chunking, the splits and the block boundaries
 * depend only on the shape and the dispatched tile geometry, never on the
 * thread count; each chunk is computed by one worker and the split merge
 * runs in a fixed order. So 1 and N threads give identical bits (for a given
 * dispatch; different ISAs may differ in the last bits).
 *
 * Performance notes (2-vCPU Xeon VM, AVX-512, noisy): a 512-token prefill
 * (16/8 heads, d 128, causal) runs at ~50-55% of the FMA peak on one thread
 * (thread CPU time against the peak measured alongside); the micro-kernel
 * calls are ~60% of the time (at ~85% of peak; 7% of their flops are the
 * masked part of the diagonal 64-key tiles), gathering Q and storing O
 * ~13% and reading K/V for packing ~8%: those read or write rows a page
 * apart in DRAM, at ~5 GB/s, and software prefetch did not overlap them
 * with the micro-kernel (a prefetched line cost the micro-kernel about
 * what the miss costs). exp ~7%, packing Q ~3%. Decode (4096 positions)
 * reads K/V at ~8-9 GB/s for f32 (~70-75% of the measured DRAM read rate)
 * but only ~5 GB/s of f16: on one core it is compute-bound (widening,
 * dot/axpy per key).
 *
 * Accuracy: f32 accumulation throughout; the exp kernel is within 2 ulp.
 */
#ifndef FC_EXEC_ATTENTION_H
#define FC_EXEC_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/half.h"
#include "exec/workers.h"

typedef enum fc_attn_kv_type {
    FC_ATTN_KV_F32 = 0,
    FC_ATTN_KV_F16, /* K and V elements are fc_f16 */
} fc_attn_kv_type;

/* Per-worker scratch that survives between calls, so steady-state calls do
 * not allocate (it grows when a call needs more). One workspace must not be
 * used by two calls at the same time; an exec context owns one. */
typedef struct fc_attn_workspace fc_attn_workspace;

fc_attn_workspace *fc_attn_workspace_new(void);
void fc_attn_workspace_free(fc_attn_workspace *ws);
/* Bytes currently held (for tests and memory accounting). */
size_t fc_attn_workspace_bytes(const fc_attn_workspace *ws);

typedef struct fc_attn_args {
    int64_t n_q, n_kv;          /* query tokens, key/value positions */
    int64_t n_head, n_kv_head;  /* n_head % n_kv_head == 0 */
    int64_t head_dim;           /* Q and K */
    int64_t head_dim_v;         /* V and O; 0 means head_dim */

    const float *q;
    int64_t q_ts, q_hs;
    fc_attn_kv_type kv_type;
    const void *k;              /* float or fc_f16 per kv_type */
    int64_t k_ts, k_hs;
    const void *v;
    int64_t v_ts, v_hs;
    float *o;
    int64_t o_ts, o_hs;

    float scale;                /* usually 1/sqrt(head_dim) */
    float softcap;              /* 0: off (gemma-2 logit soft-capping otherwise) */
    int causal;                 /* query t sees keys s <= q_pos0 + t */
    int64_t q_pos0;             /* absolute position of query 0 */
    int64_t window;             /* sliding window: 0 off, else pos - s < window */
    const float *mask;          /* NULL or additive f32 mask */
    int64_t mask_rs, mask_hs;   /* token (row) and head stride; mask_hs 0 broadcasts */
    const float *sinks;         /* NULL or n_head logits */

    fc_attn_workspace *ws;      /* NULL: scratch allocated and freed per call */
} fc_attn_args;

/* Returns 0; -1 when scratch memory cannot be allocated and -2 on invalid
 * arguments (null pointers, n_head % n_kv_head != 0, negative sizes or
 * strides), in both cases before O is touched. `w` may be NULL (one thread).
 * n_q == 0 does nothing; n_kv == 0 gives zeros (every row fully masked). */
int fc_attention_f32(fc_workers *w, const fc_attn_args *a);

/* The chunking fc_attention_f32 uses for a shape (for tests and the bench):
 * the micro-kernel tile, query tokens per chunk, keys per block, chunks of
 * the main parallel loop (splits in split-KV mode), keys per split (0: not
 * split-KV) and whether K/V are packed once per (KV head, key block) rather
 * than per chunk (by a pre-pass, or with one key block by each worker for
 * the heads it works on). */
typedef struct fc_attn_plan {
    int64_t mr, nr;             /* micro-kernel tile in use */
    int64_t q_block, kv_block;
    int64_t n_chunks;
    int64_t kv_split;           /* split-KV (decode): keys per split, else 0 */
    int prepacked;              /* K/V packed per (KV head, key block), not per chunk */
} fc_attn_plan;
int fc_attention_plan(const fc_attn_args *a, fc_attn_plan *out);

#endif
