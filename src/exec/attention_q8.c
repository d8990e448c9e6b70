/* SPDX-License-Identifier: MIT */
/* Decode attention over a q8_0 KV cache (see attention_q8.h): the blocks
 * are read in place, so a decode step costs O(visible keys) reads of the
 * 34-byte blocks instead of decoding the whole cache to f32 first.
 *
 * Plain C: the int8 dot of a 32-element block and the V block update are
 * simple loops the compiler vectorizes at the build's baseline ISA. */
#include <math.h>
#include <string.h>

#include "exec/attention_q8.h"
#include "exec/qmatmul_internal.h"
#include "fucina/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#define QK 32
#define MAX_D 512
#define MAX_GROUP 64 /* query heads per KV head */

static float half(uint16_t bits) { return fc_f16_to_f32((fc_f16){bits}); }

static int32_t dot_i8(const int8_t *a, const int8_t *b) {
    int32_t s = 0;
    for (int j = 0; j < QK; j++) s += (int32_t)a[j] * (int32_t)b[j];
    return s;
}

typedef struct job {
    const fc_attn_q8_args *a;
    fc_qgemm_fn gemv; /* the q8_0 x q8_0 1 x nr kernel (NULL: none on this ISA) */
    size_t nr;
} job;

/* One KV head g: every query row of every head of its group. Per row: the
 * scores and softmax weights of each head of the group, then one pass over
 * the V rows that widens each block once for all the group's heads. */
static void head_chunk(void *arg, int64_t g, int worker) {
    (void)worker;
    const job *jb = arg;
    const fc_attn_q8_args *a = jb->a;
    const int64_t D = a->head_dim, nb = D / QK, group = a->n_head / a->n_kv_head;
    const int64_t nr = (int64_t)jb->nr, per_head = a->n_rows + D;
    const uint8_t *kg = a->k + (size_t)g * (size_t)nb * sizeof(fcq_block_q8_0);
    fcq_block_q8_0 qb[MAX_D / QK];
    float dq[MAX_D / QK], inv[MAX_GROUP];
    for (int64_t t = 0; t < a->n_q; t++) {
        int64_t n_vis = a->q_pos0 + t + 1;
        if (n_vis > a->n_kv) n_vis = a->n_kv;
        for (int64_t hh = 0; hh < group; hh++) {
            const int64_t h = g * group + hh;
            float *x = a->scratch + h * per_head;
            if (n_vis <= 0) continue;
            fcq_encode_q8_0(a->q + t * a->q_ts + h * a->q_hs, qb, (size_t)D);
            for (int64_t b = 0; b < nb; b++) dq[b] = half(qb[b].d);
            /* scores: nr keys per kernel call while whole groups stay inside
             * the cache's rows (the extra scores are ignored), the rest one
             * by one; then the scale, the max and P = exp(x - max) */
            int64_t s0 = 0;
            if (jb->gemv)
                for (; s0 < n_vis && s0 + nr <= a->n_rows; s0 += nr)
                    jb->gemv((size_t)nb, kg + (size_t)s0 * a->row_bytes, a->row_bytes, qb, 0, x + s0, (size_t)nr);
            for (int64_t s = s0; s < n_vis; s++) {
                const fcq_block_q8_0 *kb = (const fcq_block_q8_0 *)(kg + (size_t)s * a->row_bytes);
                float sum = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    fcq_block_q8_0 blk;
                    memcpy(&blk, kb + b, sizeof blk); /* blocks are 2-byte aligned at best */
                    sum += (float)dot_i8(qb[b].qs, blk.qs) * (dq[b] * half(blk.d));
                }
                x[s] = sum;
            }
            float m = -INFINITY;
            for (int64_t s = 0; s < n_vis; s++) {
                x[s] *= a->scale;
                if (x[s] > m) m = x[s];
            }
            float l = 0.0f;
            for (int64_t s = 0; s < n_vis; s++) {
                x[s] = expf(x[s] - m);
                l += x[s];
            }
            inv[hh] = 1.0f / l;
            memset(x + a->n_rows, 0, (size_t)D * sizeof(float));
        }
        /* O_h = sum_s P_h[s] V[s] / l_h */
        const uint8_t *vg = a->v + (size_t)g * (size_t)nb * sizeof(fcq_block_q8_0);
        for (int64_t s = 0; s < n_vis; s++) {
            const fcq_block_q8_0 *vb = (const fcq_block_q8_0 *)(vg + (size_t)s * a->row_bytes);
            for (int64_t b = 0; b < nb; b++) {
                fcq_block_q8_0 blk;
                memcpy(&blk, vb + b, sizeof blk);
                const float dv = half(blk.d);
                float vf[QK];
                for (int j = 0; j < QK; j++) vf[j] = (float)blk.qs[j];
                for (int64_t hh = 0; hh < group; hh++) {
                    float *x = a->scratch + (g * group + hh) * per_head;
                    const float w = x[s] * dv;
                    float *acc = x + a->n_rows + b * QK;
                    for (int j = 0; j < QK; j++) acc[j] += w * vf[j];
                }
            }
        }
        for (int64_t hh = 0; hh < group; hh++) {
            const int64_t h = g * group + hh;
            float *o = a->o + t * a->o_ts + h * a->o_hs;
            if (n_vis <= 0) {
                memset(o, 0, (size_t)D * sizeof *o);
                continue;
            }
            const float *acc = a->scratch + h * per_head + a->n_rows;
            for (int64_t i = 0; i < D; i++) o[i] = acc[i] * inv[hh];
        }
    }
}

int fc_attention_q8_0(fc_workers *w, const fc_attn_q8_args *a) {
    if (!a || a->n_q < 0 || a->n_kv < 0 || a->n_head <= 0 || a->n_kv_head <= 0 || a->n_head % a->n_kv_head ||
        a->n_head / a->n_kv_head > MAX_GROUP || a->head_dim <= 0 || a->head_dim % QK || a->head_dim > MAX_D ||
        a->q_ts < 0 || a->q_hs < 0 || a->o_ts < 0 || a->o_hs < 0)
        return -2;
    if (a->n_q == 0) return 0;
    if (!a->q || !a->o || a->n_rows < a->n_kv || (a->n_kv > 0 && (!a->k || !a->v || !a->scratch))) return -2;
    job j = {a, NULL, 0};
    fc_qm_plan plan;
    if (fc_qm_plan_for(FCQ_Q8_0, &plan) == 0 && plan.ntiles > 0 && plan.tile[plan.ntiles - 1].mr == 1) {
        j.gemv = plan.tile[plan.ntiles - 1].fn;
        j.nr = plan.tile[plan.ntiles - 1].nr;
    }
    fc_workers_run(w, a->n_kv_head, head_chunk, &j);
    return 0;
}
