/* SPDX-License-Identifier: MIT */
/* Fucina llm: the one forward pass of every family, on raw rows.
 *
 * A layer is written once, over step primitives (norm, project, bias,
 * RoPE, attend, FFN or mixture, residual), and the family's table entry
 * (src/llm/arch.c, copied into fc_llm_hparams at load) switches the parts
 * on and off. The graph is llama.cpp's (src/models/<arch>.cpp), op for op:
 *
 *   x = token_embd[ids] (* sqrt(n_embd) for gemma)
 *   per layer: h = rmsnorm(x) * attn_norm
 *              q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)  (or one fused Wqkv: Q rows, K rows, V rows)
 *              q, k = rmsnorm_d(q) * q_norm, rmsnorm_d(k) * k_norm   (per head, when the family has them)
 *              q, k = rope(q, k, pos)   NeoX or normal pairs; rope_freqs divisors; a sliding layer's own base
 *              q = q * attn_scale       (families that scale Q, then attend with scale 1)
 *              a = attention(q, K, V)   GQA, causal, softcap, sliding window on sliding layers
 *              o = a Wo (+bo);  o = rmsnorm(o) * attn_post_norm  (gemma)
 *              x = x + o;  h = rmsnorm(x) * ffn_norm
 *              f = down(act(gate h) * (up h))   SiLU or GELU(tanh) gating; or the routed experts
 *              f = rmsnorm(f) * ffn_post_norm  (gemma);  x = x + f
 *   logits = (rmsnorm(x) * output_norm) Woutput  (then tanh softcap: gemma2)
 *
 * Every step runs a dispatched kernel on rows the session owns, so a decode
 * step makes no tensors and takes no locks (each small tensor op cost 3-5 us
 * with caches cold from the weight stream). The rows of one forward are one
 * batch for everything but attention, which runs per segment (one
 * sequence's run of rows) over that sequence's cache: a prefill, a decode
 * step and a lockstep decode of several sequences are the same code. A
 * projection of one row of block weights is one quantized product for the
 * weights that share the input (fc_qmatmul_multi: the input quantized once,
 * one fork/join); of several rows, fc_linear's own product
 * (fct_block_linear, packed weights for prefill); float weights go to the
 * GEMM with the arguments fc_linear's contraction passes. K (after RoPE)
 * and V are stored into the session's cache (src/llm/kv_cache.c) before
 * each segment attends.
 *
 * The public entry points (validation) are in src/llm/session.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/attention.h"
#include "exec/attention_q8.h"
#include "exec/ctx.h"
#include "exec/gemm.h"
#include "exec/qmatmul.h"
#include "exec/rope.h"
#include "exec/workers.h"
#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "llm/arch.h"
#include "llm/forward.h"
#include "llm/model.h"
#include "llm/session.h"
#include "quant/quant.h"
#include "tensor/quant_tensor.h"

void fc_llm_prefetch(fc_ctx *ctx, const fc_tensor *w) {
    const size_t n = fc_tensor_nbytes(w);
    fc_workers_prefetch(fc_ctx_workers(ctx), fc_tensor_data(w), n < LLM_PREFETCH_BYTES ? n : LLM_PREFETCH_BYTES);
}

/* ---- the rows of one forward ------------------------------------------------------ */

/* The FFN's hidden width: the dense n_ff or one expert's. */
static int64_t ffn_width(const fc_llm_hparams *hp) { return hp->n_expert > 0 ? hp->n_ff_exp : hp->n_ff; }

/* A mixture's scratch per row: router logits, the used experts' weights,
 * ids and (token, slot) indices, the gathered input and the slots' outputs;
 * plus one row of probabilities. */
static int64_t moe_floats(const fc_llm_hparams *hp, int64_t n) {
    if (hp->n_expert == 0) return 0;
    const int64_t NX = hp->n_expert, K = hp->n_expert_used, E = hp->n_embd;
    return n * (NX + 3 * K + E + K * E) + NX;
}

size_t fc_llm_forward_floats(const fc_llm_hparams *hp, int64_t n) {
    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    const int64_t F = ffn_width(hp), R = hp->n_rot / 2;
    /* x h o f | qkv (fused) | q att | k v | gate(x2 when fused) up act | cos sin (x2: sliding layers) | moe */
    const int64_t per_row = 4 * E + (Q + 2 * KV) + 2 * Q + 2 * KV + 4 * F + 4 * R;
    return (size_t)(n * per_row + moe_floats(hp, n)) + 64; /* + 64 floats past the last part, a margin */
}

typedef struct rows {
    int64_t n;
    float *x, *h, *o, *f;   /* [n, embd] */
    float *qkv;             /* [n, q + 2 kv]: a fused projection's output */
    float *q, *att;         /* [n, q] */
    float *k, *v;           /* [n, kv] */
    float *gt, *up, *act;   /* [n, 2 ff] (fused gate/up output), [n, ff], [n, ff] */
    float *cs, *sn;         /* [n, rot/2] global layers */
    float *cs_w, *sn_w;     /* [n, rot/2] sliding layers */
    float *mx;              /* moe_floats */
    const fc_llm_lora_set *lora; /* the model's adapters, NULL when none */
    const fc_llm_act_hook *hook; /* the model's activation observer, NULL when none */
} rows;

static void carve(rows *r, float *p, const fc_llm_hparams *hp, int64_t n) {
    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    const int64_t F = ffn_width(hp), R = hp->n_rot / 2;
#define TAKE(field, count) (r->field = p, p += (count))
    r->n = n;
    TAKE(x, n * E), TAKE(h, n * E), TAKE(o, n * E), TAKE(f, n * E);
    TAKE(qkv, n * (Q + 2 * KV));
    TAKE(q, n * Q), TAKE(att, n * Q), TAKE(k, n * KV), TAKE(v, n * KV);
    TAKE(gt, 2 * n * F), TAKE(up, n * F), TAKE(act, n * F);
    TAKE(cs, n * R), TAKE(sn, n * R), TAKE(cs_w, n * R), TAKE(sn_w, n * R);
    TAKE(mx, moe_floats(hp, n));
#undef TAKE
}

/* ---- primitives ----------------------------------------------------------------------- */

/* y[rows, w rows] = a[rows, cols] · wᵀ for n weights sharing a, as
 * fc_linear computes it (see the header). 0, or -1 (out of memory). */
/* One row a[cols] times block weight w into y, as fc_qmatmul's arguments. */
static fc_qmatmul_args one_row(const float *a, int64_t cols, const fc_tensor *w, float *y) {
    const fc_dtype dt = fc_tensor_dtype(w);
    const int64_t nw = fc_tensor_dim(w, 0);
    return (fc_qmatmul_args){.m = 1, .n = nw, .k = cols, .a = a, .lda = cols, .w = fc_tensor_data(w),
                             .wtype = (uint32_t)fc_dtype_ggml_type(dt), .w_row_bytes = fc_dtype_row_bytes(dt, cols),
                             .c = y, .ldc = nw};
}

static int project_base(fc_ctx *ctx, const float *a, int64_t n_rows, int64_t cols, fc_tensor *const *w,
                        float *const *y, int n) {
    fc_workers *wk = fc_ctx_workers(ctx);
    fc_qmatmul_args g[4];
    int all_block = n_rows == 1 && n <= 4;
    for (int i = 0; i < n && all_block; i++) all_block = fc_dtype_is_block(fc_tensor_dtype(w[i]));
    if (all_block && n > 1) {
        for (int i = 0; i < n; i++) g[i] = one_row(a, cols, w[i], y[i]);
        return fc_qmatmul_multi(wk, g, n);
    }
    for (int i = 0; i < n; i++) {
        const fc_dtype dt = fc_tensor_dtype(w[i]);
        const int64_t nw = fc_tensor_dim(w[i], 0);
        if (fc_dtype_is_block(dt)) {
            if (n_rows == 1) {
                const fc_qmatmul_args q1 = one_row(a, cols, w[i], y[i]);
                if (fc_qmatmul(wk, &q1) != 0) return -1;
            } else if (!fct_block_linear(ctx, a, n_rows, cols, w[i], nw, y[i])) {
                return -1;
            }
            continue;
        }
        /* A [rows, cols] row-major; B = wᵀ: stride 1 along K, cols along N */
        const fc_gemm_args f = {.m = n_rows, .n = nw, .k = cols, .a = a, .rsa = cols, .csa = 1,
                                .b = fc_tensor_data(w[i]),
                                .btype = fc_gemm_btype_of(dt),
                                .rsb = 1, .csb = cols, .c = y[i], .ldc = nw, .accumulate = 0};
        if (fc_gemm_f32(wk, &f) != 0) return -1;
    }
    return 0;
}

/* The base products, then each weight's LoRA deltas when the model has
 * adapters set (src/llm/lora_apply.c): every projection of every path comes
 * through here, so prefill, decode and batches apply them alike; without
 * adapters the cost is the one NULL test. An activation observer (an
 * imatrix collection) sees each weight's input rows here, for the same
 * reason, at the cost of one more test when there is none. */
static int project(fc_ctx *ctx, const rows *b, const float *a, int64_t n_rows, int64_t cols, fc_tensor *const *w,
                   float *const *y, int n) {
    if (b->hook)
        for (int i = 0; i < n; i++) b->hook->fn(b->hook->user, w[i], a, n_rows, cols);
    if (project_base(ctx, a, n_rows, cols, w, y, n) != 0) return -1;
    const fc_llm_lora_set *lora = b->lora;
    if (!lora) return 0;
    for (int i = 0; i < n; i++) {
        const fc_llm_lora_delta *d = fc_llm_lora_find(lora, w[i]);
        if (d && fc_llm_lora_apply(ctx, d, a, n_rows, cols, y[i], fc_tensor_dim(w[i], 0)) != 0) return -1;
    }
    return 0;
}

/* The row steps (norms, residual adds, biases, activations) of a long
 * chunk run on the workers, a range of whole rows each: every row is the
 * same kernel call either way, so the bits do not depend on the split.
 * Below ROWS_PAR_MIN elements (a decode step) they run inline: a fork
 * costs more than the work. */
#define ROWS_PAR_MIN 65536

typedef enum row_op { ROW_RMSNORM, ROW_ADD, ROW_ADD_BIAS, ROW_SWIGLU, ROW_GEGLU } row_op;

typedef struct row_job {
    row_op op;
    const fck_table *K;
    const float *a, *b, *w; /* inputs (w: the norm weight or the bias row) */
    float *y;
    int64_t width;          /* elements per row */
    int64_t a_stride, b_stride; /* row strides of a and b (fused gate/up: 2 widths, b = a + width) */
    float eps;
    int64_t n, per_chunk;
} row_job;

static void rows_do(const row_job *j, int64_t r0, int64_t r1) {
    const size_t w = (size_t)j->width;
    for (int64_t r = r0; r < r1; r++) {
        const float *a = j->a + r * j->a_stride, *b = j->b ? j->b + r * j->b_stride : NULL;
        float *y = j->y + r * j->width;
        switch (j->op) {
        case ROW_RMSNORM: j->K->f32_rmsnorm(w, a, j->w, j->eps, y); break;
        case ROW_ADD: j->K->f32_add(w, a, b, y); break;
        case ROW_ADD_BIAS: j->K->f32_add(w, a, j->w, y); break;
        case ROW_SWIGLU: j->K->f32_swiglu(w, a, b, y); break;
        case ROW_GEGLU: fc_llm_geglu_ggml(w, a, b, y); break;
        }
    }
}

static void rows_chunk(void *arg, int64_t chunk, int worker) {
    (void)worker;
    const row_job *j = arg;
    const int64_t r0 = chunk * j->per_chunk, r1 = r0 + j->per_chunk < j->n ? r0 + j->per_chunk : j->n;
    rows_do(j, r0, r1);
}

static void rows_run(fc_ctx *ctx, row_job *j, int64_t n) {
    const int threads = fc_ctx_threads(ctx);
    j->n = n;
    if (threads <= 1 || n < 2 || n * j->width < ROWS_PAR_MIN) {
        rows_do(j, 0, n);
        return;
    }
    const int64_t chunks = n < 4 * (int64_t)threads ? n : 4 * (int64_t)threads;
    j->per_chunk = (n + chunks - 1) / chunks;
    fc_workers_run(fc_ctx_workers(ctx), (n + j->per_chunk - 1) / j->per_chunk, rows_chunk, j);
}

/* y[r] = a[r] + b[r] for n rows of width e (f32_add: a + b, exact either order). */
static void add_rows(fc_ctx *ctx, const fck_table *K, const float *a, const float *b, int64_t n, int64_t e, float *y) {
    row_job j = {.op = ROW_ADD, .K = K, .a = a, .b = b, .y = y, .width = e, .a_stride = e, .b_stride = e};
    rows_run(ctx, &j, n);
}

/* y[r] += b for each of n rows of width w (ggml_add of a bias row). */
static void add_bias(fc_ctx *ctx, const fck_table *K, float *y, const fc_tensor *b, int64_t n, int64_t w) {
    if (!b) return;
    row_job j = {.op = ROW_ADD_BIAS, .K = K, .a = y, .w = fc_tensor_data(b), .y = y, .width = w, .a_stride = w};
    rows_run(ctx, &j, n);
}

/* y[r] = rmsnorm(x[r]) * w for n rows of width e. */
static void norm_rows(fc_ctx *ctx, const fck_table *K, const float *x, const fc_tensor *w, float eps, int64_t n,
                      int64_t e, float *y) {
    row_job j = {.op = ROW_RMSNORM, .K = K, .a = x, .w = fc_tensor_data(w), .y = y, .width = e, .a_stride = e, .eps = eps};
    rows_run(ctx, &j, n);
}

/* The per-head norm (when the family has one), then RoPE in place, of n
 * rows of n_heads heads of hd: x -> y rotated. */
static int norm_rope(fc_ctx *ctx, const fck_table *K, const fc_llm_hparams *hp, const float *x, float *y, int64_t n,
                     int64_t n_heads, const fc_tensor *norm, const float *cs, const float *sn) {
    const int64_t hd = hp->head_dim, w = n_heads * hd;
    if (norm) norm_rows(ctx, K, x, norm, (float)hp->rms_eps, n * n_heads, hd, y);
    else if (y != x) memcpy(y, x, (size_t)(n * w) * sizeof(float));
    fc_rope_apply_args a;
    memset(&a, 0, sizeof a);
    a.n_tok = n;
    a.n_head = n_heads;
    a.head_dim = hd;
    a.n_rot = hp->n_rot;
    a.mode = hp->rope_neox ? FC_ROPE_NEOX : FC_ROPE_NORMAL;
    a.cos_tab = cs;
    a.sin_tab = sn;
    a.cs_ts = hp->n_rot / 2;
    a.x = y;
    a.x_ts = w;
    a.x_hs = hd;
    a.y = y;
    a.y_ts = w;
    a.y_hs = hd;
    return fc_rope_apply_f32(fc_ctx_workers(ctx), &a);
}

/* Each row's cos/sin tables for a RoPE base and frequency scale, as
 * ggml_rope_ext builds them (YaRN's parameters from the file). */
static int rope_tables(const fc_llm_model *m, double base, double freq_scale, const int64_t *pos, int64_t n, float *cs,
                       float *sn) {
    const fc_llm_hparams *hp = &m->hp;
    fc_rope_params rp;
    fc_rope_params_default(&rp, hp->n_rot);
    rp.theta_base = (float)base;
    rp.freq_scale = (float)freq_scale;
    rp.n_ctx_orig = hp->n_ctx_orig;
    rp.ext_factor = (float)hp->rope_ext_factor;
    rp.attn_factor = (float)hp->rope_attn_factor;
    rp.beta_fast = (float)hp->yarn_beta_fast;
    rp.beta_slow = (float)hp->yarn_beta_slow;
    rp.freq_factors = m->rope_freqs ? fc_tensor_data(m->rope_freqs) : NULL;
    return fc_rope_cache_f32(&rp, pos, n, cs, sn, hp->n_rot / 2);
}

/* rows pos..pos+n of (layer, seq)'s K or V cache := r (f16: rounded once,
 * as fc_copy_into; q8_0: the blocks kv_cache.c's store encodes) */
static void cache_store(const fck_table *K, fc_llm_kv *kv, int64_t layer, int64_t seq, int is_v, const float *r,
                        int64_t pos, int64_t n) {
    const int64_t i = layer * kv->n_seq + seq, row = kv->n_kv_head * kv->head_dim;
    if (kv->type == FC_Q8_0) {
        fcq_encode_q8_0(r, (is_v ? kv->qv[i] : kv->qk[i]) + (size_t)pos * kv->row_bytes, (size_t)(n * row));
        return;
    }
    fc_tensor *c = is_v ? kv->v[i] : kv->k[i];
    if (kv->type == FC_F16) K->f32_to_f16((size_t)(n * row), r, (fc_f16 *)fc_tensor_data(c) + pos * row);
    else memcpy((float *)fc_tensor_data(c) + pos * row, r, (size_t)(n * row) * sizeof(float));
    fc_storage_touch(c->storage);
}

/* Rows of a segment up to which a q8_0 cache is read in place (decode);
 * longer runs (prefill), and layers with a window or a softcap, decode the
 * rows to f32 for the blocked kernel. */
#define Q8_DIRECT_MAX_ROWS 4

/* Attention of the n query rows q [n, n_head, d] at positions pos.. over
 * rows 0..pos+n of cache i into o. 0, -1 (no memory) or -2 (rejected). */
static int attend(fc_ctx *ctx, fc_workers *wk, const fc_llm_hparams *hp, fc_llm_kv *kv, int64_t i, const float *q,
                  int64_t pos, int64_t n, int64_t window, float *o) {
    const int64_t d = kv->head_dim, nkv = kv->n_kv_head, NH = hp->n_head, row = nkv * d;
    /* families that scale Q beforehand attend with scale 1 */
    const float scale = hp->attn_prescale ? 1.0f : (float)hp->attn_scale;
    const int plain = window == 0 && hp->attn_softcap == 0;
    if (kv->type == FC_Q8_0 && n <= Q8_DIRECT_MAX_ROWS && plain) {
        const fc_attn_q8_args a = {
            .n_q = n, .n_kv = pos + n, .n_rows = kv->n_rows, .n_head = NH, .n_kv_head = nkv, .head_dim = d,
            .q = q, .q_ts = NH * d, .q_hs = d,
            .k = kv->qk[i], .v = kv->qv[i], .row_bytes = kv->row_bytes,
            .o = o, .o_ts = NH * d, .o_hs = d,
            .scale = scale, .q_pos0 = pos, .scratch = kv->scores};
        return fc_attention_q8_0(wk, &a) != 0 ? -2 : 0;
    }
    fc_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_q = n;
    a.n_kv = pos + n;
    a.n_head = NH;
    a.n_kv_head = nkv;
    a.head_dim = d;
    a.head_dim_v = d;
    a.q = q;
    a.q_ts = NH * d;
    a.q_hs = d;
    if (kv->type == FC_Q8_0) { /* the rows the attention reads, decoded into the f32 scratch */
        float *dk = fc_tensor_data(kv->deq_k), *dv = fc_tensor_data(kv->deq_v);
        fcq_decode_q8_0(kv->qk[i], dk, (size_t)((pos + n) * row));
        fcq_decode_q8_0(kv->qv[i], dv, (size_t)((pos + n) * row));
        a.kv_type = FC_ATTN_KV_F32;
        a.k = dk;
        a.v = dv;
    } else {
        a.kv_type = kv->type == FC_F16 ? FC_ATTN_KV_F16 : FC_ATTN_KV_F32;
        a.k = fc_tensor_data(kv->k[i]);
        a.v = fc_tensor_data(kv->v[i]);
    }
    a.k_ts = row;
    a.k_hs = d;
    a.v_ts = row;
    a.v_hs = d;
    a.o = o;
    a.o_ts = NH * d;
    a.o_hs = d;
    a.scale = scale;
    a.softcap = (float)hp->attn_softcap;
    a.causal = 1;
    a.q_pos0 = pos;
    a.window = window;
    a.ws = fc_ctx_attn_workspace_acquire(ctx);
    const int rc = fc_attention_f32(wk, &a);
    fc_ctx_attn_workspace_release(ctx, a.ws);
    return rc == -1 ? -1 : rc != 0 ? -2 : 0;
}

/* The gated activation of n rows: act = silu(gate) * up, or GELU(tanh) as
 * ggml's CPU computes it (src/llm/gelu_ggml.c). A fused gate/up output
 * [n, 2 ff] has each row's gate half first. */
static void activate(fc_ctx *ctx, const fck_table *K, const fc_llm_hparams *hp, const float *gt, const float *up,
                     int fused, int64_t n, int64_t F, float *act) {
    row_job j = {.op = hp->ffn_gelu ? ROW_GEGLU : ROW_SWIGLU, .K = K, .a = gt, .b = fused ? gt + F : up, .y = act,
                 .width = F, .a_stride = fused ? 2 * F : F, .b_stride = fused ? 2 * F : F};
    rows_run(ctx, &j, n);
}

/* The mixture of experts for n rows (llama.cpp's build_moe_ffn with softmax
 * gating, weights renormalized, no scale): the router as fc_linear, each
 * row's top-k (fc_llm_moe_route), then expert by expert the rows routed to
 * it gathered into one batch (a prefill reads each used expert once), gate
 * and up, the activation, down, each (row, slot) output weighted by one
 * multiply, then the slots summed in order, as ggml adds them. */
static int moe_ffn(const fck_table *K, fc_ctx *ctx, const fc_llm_hparams *hp, const fc_llm_layer *L, rows *b) {
    const int64_t n = b->n, E = hp->n_embd, NX = hp->n_expert, KU = hp->n_expert_used, FX = hp->n_ff_exp;
    float *lg = b->mx, *w = lg + n * NX, *acc = w + n * KU, *gath = acc + n * KU * E, *probs = gath + n * E;
    int32_t *sel = (int32_t *)(probs + NX), *idx = sel + n * KU;
    if (project(ctx, b, b->h, n, E, (fc_tensor *const[]){L->gate_inp}, (float *const[]){lg}, 1) != 0) return -1;
    for (int64_t t = 0; t < n; t++) fc_llm_moe_route(lg + t * NX, NX, KU, probs, sel + t * KU, w + t * KU);
    for (int64_t e = 0; e < NX; e++) {
        int64_t c = 0;
        for (int64_t i = 0; i < n * KU; i++)
            if (sel[i] == (int32_t)e) idx[c++] = (int32_t)i; /* (token, slot) = (i / KU, i % KU) */
        if (!c) continue;
        const float *in = b->h;
        if (n > 1) { /* one row needs no gather */
            for (int64_t r = 0; r < c; r++) memcpy(gath + r * E, b->h + (idx[r] / KU) * E, (size_t)E * sizeof(float));
            in = gath;
        }
        if (project(ctx, b, in, c, E, (fc_tensor *const[]){L->gate_e[e], L->up_e[e]},
                    (float *const[]){b->gt, b->up}, 2) != 0)
            return -1;
        activate(ctx, K, hp, b->gt, b->up, 0, c, FX, b->act);
        /* down into the gather rows (consumed), then weighted into the slots */
        float *y = n > 1 ? gath : acc + idx[0] * E;
        if (project(ctx, b, b->act, c, FX, (fc_tensor *const[]){L->down_e[e]}, (float *const[]){y}, 1) != 0)
            return -1;
        for (int64_t r = 0; r < c; r++) K->f32_scale((size_t)E, y + r * E, w[idx[r]], acc + idx[r] * E);
    }
    for (int64_t t = 0; t < n; t++) {
        float *ot = b->f + t * E;
        memcpy(ot, acc + (t * KU) * E, (size_t)E * sizeof(float));
        for (int64_t k = 1; k < KU; k++) K->f32_add((size_t)E, ot, acc + (t * KU + k) * E, ot);
    }
    return 0;
}

/* The dense FFN of n rows: gate and up (one fused matrix, or two sharing
 * the input), the activation, down. */
static int dense_ffn(const fck_table *K, fc_ctx *ctx, const fc_llm_hparams *hp, const fc_llm_layer *L, rows *b) {
    const int64_t n = b->n, E = hp->n_embd, F = hp->n_ff;
    const int fused = L->gate == NULL;
    if (fused) {
        if (project(ctx, b, b->h, n, E, (fc_tensor *const[]){L->up}, (float *const[]){b->gt}, 1) != 0) return -1;
    } else if (project(ctx, b, b->h, n, E, (fc_tensor *const[]){L->gate, L->up}, (float *const[]){b->gt, b->up},
                       2) != 0)
        return -1;
    fc_llm_prefetch(ctx, L->down); /* over the activation */
    activate(ctx, K, hp, b->gt, b->up, fused, n, F, b->act);
    return project(ctx, b, b->act, n, F, (fc_tensor *const[]){L->down}, (float *const[]){b->f}, 1);
}

/* Q, K and V of n rows: three projections sharing h, or one fused one split
 * into its Q, K and V parts; biases added. */
static int qkv(const fck_table *K, fc_ctx *ctx, const fc_llm_hparams *hp, const fc_llm_layer *L, rows *b) {
    const int64_t n = b->n, E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    if (L->wqkv) {
        const int64_t W = Q + 2 * KV;
        if (project(ctx, b, b->h, n, E, (fc_tensor *const[]){L->wqkv}, (float *const[]){b->qkv}, 1) != 0)
            return -1;
        for (int64_t r = 0; r < n; r++) {
            memcpy(b->q + r * Q, b->qkv + r * W, (size_t)Q * sizeof(float));
            memcpy(b->k + r * KV, b->qkv + r * W + Q, (size_t)KV * sizeof(float));
            memcpy(b->v + r * KV, b->qkv + r * W + Q + KV, (size_t)KV * sizeof(float));
        }
    } else if (project(ctx, b, b->h, n, E, (fc_tensor *const[]){L->wq, L->wk, L->wv},
                       (float *const[]){b->q, b->k, b->v}, 3) != 0)
        return -1;
    add_bias(ctx, K, b->q, L->bq, n, Q);
    add_bias(ctx, K, b->k, L->bk, n, KV);
    add_bias(ctx, K, b->v, L->bv, n, KV);
    return 0;
}

/* y = rmsnorm(x) * w of n rows in place (the post-norms). */
static void norm_in_place(fc_ctx *ctx, const fck_table *K, float *x, const fc_tensor *w, float eps, int64_t n,
                          int64_t e) {
    if (w) norm_rows(ctx, K, x, w, eps, n, e, x);
}

/* One chunk: n rows in n_seg segments, embedding rows x0. */
static fc_status forward_rows(fc_ctx *ctx, fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg, int64_t n,
                              const fc_token *tokens, const float *x0, const int64_t *pos, float *logits,
                              float *hidden) {
    const fc_llm_model *m = s->m;
    const fc_llm_hparams *hp = &m->hp;
    const fck_table *K = fck_kernels();
    fc_workers *wk = fc_ctx_workers(ctx);
    const int64_t E = hp->n_embd, NH = hp->n_head, NKV = hp->n_head_kv, Q = NH * hp->head_dim;
    const int64_t KV = NKV * hp->head_dim;
    const float eps = (float)hp->rms_eps;
    rows b;
    carve(&b, s->rows, hp, n);
    b.lora = m->lora;
    b.hook = m->act_hook;
    const char *oom = "fc_llm_forward: out of memory for the projections' scratch";

    if (rope_tables(m, hp->rope_theta, hp->rope_freq_scale, pos, n, b.cs, b.sn) != 0 ||
        (hp->swa_pattern && rope_tables(m, hp->rope_theta_swa, hp->rope_freq_scale_swa, pos, n, b.cs_w, b.sn_w) != 0)) {
        fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_forward: rope base %g rejected", hp->rope_theta);
        return FC_ERR_INVALID_ARG;
    }
    memcpy(b.x, x0, (size_t)(n * E) * sizeof(float));
    /* token_embd's LoRA deltas join the rows before any scale (llama.cpp's build_inp_embd) */
    if (b.lora && b.lora->tok_embd && fc_llm_lora_embd(ctx, b.lora->tok_embd, tokens, n, b.x, E) != 0) goto nomem;
    if (hp->embd_scale != 1.0) K->f32_scale((size_t)(n * E), b.x, (float)hp->embd_scale, b.x);
    norm_rows(ctx, K, b.x, m->layers[0].attn_norm, eps, n, E, b.h);
    for (int64_t l = 0; l < hp->n_layer; l++) {
        const fc_llm_layer *L = &m->layers[l];
        if (qkv(K, ctx, hp, L, &b) != 0) goto nomem;
        fc_llm_prefetch(ctx, L->wo); /* over the norms, rope and attention */
        const float *cs = L->swa ? b.cs_w : b.cs, *sn = L->swa ? b.sn_w : b.sn;
        if (norm_rope(ctx, K, hp, b.q, b.q, n, NH, L->q_norm, cs, sn) != 0 ||
            norm_rope(ctx, K, hp, b.k, b.k, n, NKV, L->k_norm, cs, sn) != 0) {
            fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_forward: the rotation was rejected (layer %lld)", (long long)l);
            return FC_ERR_INVALID_ARG;
        }
        if (hp->attn_prescale) K->f32_scale((size_t)(n * Q), b.q, (float)hp->attn_scale, b.q);
        for (int64_t i = 0, r0 = 0; i < n_seg; r0 += segs[i].n, i++) {
            const fc_llm_seg *g = &segs[i];
            cache_store(K, &s->kv, l, g->seq, 0, b.k + r0 * KV, g->pos0, g->n);
            cache_store(K, &s->kv, l, g->seq, 1, b.v + r0 * KV, g->pos0, g->n);
            const int rc = attend(ctx, wk, hp, &s->kv, l * s->kv.n_seq + g->seq, b.q + r0 * Q, g->pos0, g->n,
                                  L->swa ? hp->n_swa : 0, b.att + r0 * Q);
            if (rc == -1) goto nomem;
            if (rc != 0) {
                fc_fail(ctx, FC_ERR_INVALID_ARG, "fc_llm_forward: the attention kernel rejected layer %lld", (long long)l);
                return FC_ERR_INVALID_ARG;
            }
        }
        if (project(ctx, &b, b.att, n, Q, (fc_tensor *const[]){L->wo}, (float *const[]){b.o}, 1) != 0) goto nomem;
        add_bias(ctx, K, b.o, L->bo, n, E);
        fc_llm_prefetch(ctx, L->gate_inp ? L->gate_inp : L->gate ? L->gate : L->up); /* the FFN's first weights */
        norm_in_place(ctx, K, b.o, L->attn_post_norm, eps, n, E);
        /* residual add, then the FFN's norm (the same bits as fc_rmsnorm_residual) */
        add_rows(ctx, K, b.o, b.x, n, E, b.x);
        norm_rows(ctx, K, b.x, L->ffn_norm, eps, n, E, b.h);
        if ((L->gate_inp ? moe_ffn(K, ctx, hp, L, &b) : dense_ffn(K, ctx, hp, L, &b)) != 0) goto nomem;
        norm_in_place(ctx, K, b.f, L->ffn_post_norm, eps, n, E);
        fc_llm_prefetch(ctx, l + 1 < hp->n_layer ? (m->layers[l + 1].wqkv ? m->layers[l + 1].wqkv : m->layers[l + 1].wq)
                                                 : m->output);
        if (l + 1 < hp->n_layer) {
            add_rows(ctx, K, b.f, b.x, n, E, b.x);
            norm_rows(ctx, K, b.x, m->layers[l + 1].attn_norm, eps, n, E, b.h);
        } else {
            add_rows(ctx, K, b.x, b.f, n, E, b.x); /* fc_add(x, f) */
        }
    }
    /* the rows that get logits, in segment order: normed into b.h (free
     * now) one after the other, then one output projection for all */
    int64_t n_out = 0, first_out = -1, contiguous = 1;
    for (int64_t i = 0, r0 = 0; i < n_seg; r0 += segs[i].n, i++) {
        const int64_t k = segs[i].logits == FC_LLM_LOGITS_ALL ? segs[i].n : segs[i].logits == FC_LLM_LOGITS_LAST;
        if (!k) continue;
        const int64_t ra = r0 + segs[i].n - k;
        if (first_out < 0) first_out = ra;
        else if (ra != first_out + n_out) contiguous = 0;
        n_out += k;
    }
    if (n_out && (logits || hidden)) {
        if (contiguous) {
            norm_rows(ctx, K, b.x + first_out * E, m->output_norm, eps, n_out, E, b.h);
        } else {
            int64_t o = 0;
            for (int64_t i = 0, r0 = 0; i < n_seg; r0 += segs[i].n, i++) {
                const int64_t k = segs[i].logits == FC_LLM_LOGITS_ALL ? segs[i].n : segs[i].logits == FC_LLM_LOGITS_LAST;
                if (!k) continue;
                norm_rows(ctx, K, b.x + (r0 + segs[i].n - k) * E, m->output_norm, eps, k, E, b.h + o * E);
                o += k;
            }
        }
        /* the hidden states are these normed rows, the LM head's input
         * (llama.cpp's embeddings: result_norm); an embedding eval without
         * logits skips the head */
        if (hidden) memcpy(hidden, b.h, (size_t)(n_out * E) * sizeof(float));
        if (!logits) return FC_OK;
        if (project(ctx, &b, b.h, n_out, E, (fc_tensor *const[]){m->output}, (float *const[]){logits}, 1) != 0)
            goto nomem;
        if (hp->final_softcap > 0) { /* ggml: scale by 1/cap, tanh, scale by cap */
            const size_t nl = (size_t)(n_out * hp->n_vocab);
            K->f32_scale(nl, logits, 1.0f / (float)hp->final_softcap, logits);
            K->f32_tanh(nl, logits, logits);
            K->f32_scale(nl, logits, (float)hp->final_softcap, logits);
        }
    }
    return FC_OK;
nomem:
    fc_fail(ctx, FC_ERR_OOM, "%s", oom);
    return FC_ERR_OOM;
}

/* The session's rows hold at least n rows (grown once for a longer chunk;
 * a steady decode never grows them). */
static fc_status ensure_rows(fc_ctx *ctx, fc_llm_session *s, int64_t n) {
    if (n <= s->rows_cap) return FC_OK;
    const size_t bytes = (fc_llm_forward_floats(&s->m->hp, n) * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes);
    if (!p) {
        fc_fail(ctx, FC_ERR_OOM, "fc_llm_forward: out of memory for %lld rows of activations", (long long)n);
        return FC_ERR_OOM;
    }
    free(s->rows);
    s->rows = p;
    s->rows_cap = n;
    return FC_OK;
}

fc_status fc_llm_forward(fc_ctx *ctx, fc_llm_session *s, const fc_llm_seg *segs, int64_t n_seg,
                         const fc_token *tokens, float *logits, float *hidden) {
    const fc_llm_model *m = s->m;
    const fc_llm_hparams *hp = &m->hp;
    fc_status st = FC_OK;
    /* Chunks of at most FC_LLM_CHUNK_ROWS rows: whole segments, a long one
     * (a prefill) cut into pieces that run in order; a segment's LAST row
     * comes from its last piece, and the logits rows follow one another
     * across chunks. */
    int64_t si = 0, off = 0, row = 0, out_row = 0;
    while (si < n_seg && st == FC_OK) {
        fc_llm_seg *cs = s->chunk_segs;
        int64_t nc = 0, n = 0, n_out = 0;
        while (si < n_seg && n < FC_LLM_CHUNK_ROWS) {
            const int64_t take = segs[si].n - off < FC_LLM_CHUNK_ROWS - n ? segs[si].n - off : FC_LLM_CHUNK_ROWS - n;
            const int ends = off + take == segs[si].n;
            const fc_llm_logits w = segs[si].logits == FC_LLM_LOGITS_LAST && !ends ? FC_LLM_LOGITS_NONE : segs[si].logits;
            cs[nc++] = (fc_llm_seg){.seq = segs[si].seq, .pos0 = segs[si].pos0 + off, .n = take, .logits = w};
            n_out += w == FC_LLM_LOGITS_ALL ? take : w == FC_LLM_LOGITS_LAST;
            for (int64_t j = 0; j < take; j++) s->posv[n + j] = segs[si].pos0 + off + j;
            n += take;
            off += take;
            if (ends) si++, off = 0;
        }
        if ((st = ensure_rows(ctx, s, n)) != FC_OK) break;
        float *lo = logits ? logits + (size_t)out_row * (size_t)hp->n_vocab : NULL;
        float *hi = hidden ? hidden + (size_t)out_row * (size_t)hp->n_embd : NULL;
        fc_scope sc = fc_scope_begin(ctx);
        fc_tensor *ids = fc_from_data(ctx, FC_I32, FC_SHAPE({"seq", n}), tokens + row, (size_t)n * sizeof *tokens);
        fc_tensor *x = ids ? fc_get_rows(ctx, m->tok_embd, ids) : NULL; /* [seq, embd] */
        if (x && fc_tensor_dtype(x) != FC_F32) x = fc_cast(ctx, x, FC_F32);
        if (x) x = fc_contiguous(ctx, x);
        st = x ? forward_rows(ctx, s, cs, nc, n, tokens + row, fc_tensor_data(x), s->posv, lo, hi) : fc_ctx_status(ctx);
        fc_scope_end(ctx, sc);
        if (st == FC_OK)
            for (int64_t i = 0; i < nc; i++) s->pos[cs[i].seq] += cs[i].n;
        row += n;
        out_row += n_out;
    }
    if (st != FC_OK) /* an error leaves every sequence where it was */
        for (int64_t i = 0; i < n_seg; i++) s->pos[segs[i].seq] = segs[i].pos0;
    return st;
}
