/* SPDX-License-Identifier: MIT */
/* Decode attention over a q8_0 KV cache, reading the blocks in place.
 *
 * For every query token t in [0, n_q) and head h, with KV head
 * g = h / (n_head / n_kv_head) and the visible keys s <= q_pos0 + t:
 *   x[s]    = scale * sum_b d_q(b) d_k(s, b) * sum_j q8(t, h, b, j) k8(s, g, b, j)
 *   O[t, h] = sum_s softmax(x)[s] * V(s, g)       (V decoded block by block)
 * Q is rounded to q8_0 blocks first (the int8 dot llama.cpp's flash
 * attention uses for a q8_0 K cache); softmax and the V sum are f32.
 *
 * Layout: K and V rows of one position are row_bytes apart (position s at
 * k + s * row_bytes), each row n_kv_head * head_dim elements of q8_0 blocks
 * (34 bytes per 32), head g's blocks first at g * head_dim / 32 blocks.
 * Q and O are f32 [t, h, i] at q[t*q_ts + h*q_hs + i] (O likewise), i
 * contiguous. head_dim a multiple of 32 up to 512, at most 64 query heads
 * per KV head.
 *
 * Work: one chunk per KV head (threaded), each row by one chunk in key
 * order, so the bits do not depend on the thread count. scratch holds
 * n_head * (n_rows + head_dim) floats (the caller's, so a call allocates
 * nothing): each head's weights and its output accumulator.
 * Q·K goes through the generated q8_0 x q8_0 qgemv kernel (exec/qmatmul),
 * nr keys per call, over whole groups of keys inside the n_rows allocated
 * (scores past the visible keys are computed and ignored); the rest, and
 * every key on an ISA without the kernel, by a scalar int8 dot.
 * Meant for decode (a few query rows): a prefill is better served by
 * decoding the rows and the blocked kernel (exec/attention.h). */
#ifndef FC_EXEC_ATTENTION_Q8_H
#define FC_EXEC_ATTENTION_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "exec/workers.h"

typedef struct fc_attn_q8_args {
    int64_t n_q, n_kv, n_head, n_kv_head, head_dim;
    int64_t n_rows;   /* rows allocated in K and V (>= n_kv): a kernel may read up to them */
    const float *q;
    int64_t q_ts, q_hs;
    const uint8_t *k, *v;
    size_t row_bytes;
    float *o;
    int64_t o_ts, o_hs;
    float scale;
    int64_t q_pos0; /* causal: query t sees keys s <= q_pos0 + t */
    float *scratch; /* n_head * (n_rows + head_dim) floats */
} fc_attn_q8_args;

/* 0, or -2 on invalid arguments (before O is touched). */
int fc_attention_q8_0(fc_workers *w, const fc_attn_q8_args *a);

#endif
