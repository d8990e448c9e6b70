/* SPDX-License-Identifier: MIT */
/* Flash-style attention over the generated GEMM micro-kernel and row kernels.
 * See attention.h for the contract; the notes here are about the mechanics.
 *
 * Rows. A chunk is (KV head g, block of bq query tokens). Its R = bq*G rows
 * are r = t_local*G + j (query head g*G + j), token-major, gathered into the
 * packed-A layout of the micro-kernel (MR rows per panel, +0 past R).
 *
 * Visibility. Row r (token t, position q_pos0 + t) sees keys [lo(t), hi(t)]:
 * hi = min(n_kv-1, pos) when causal, lo = max(0, pos-window+1) with a window.
 * Both bounds are non-decreasing in t. The chunk walks key blocks of bc keys
 * over the union of its rows' ranges; within a block each MR-row panel only
 * computes the S tiles (NR keys wide) and the P·V steps (a kc sub-range of
 * the packed panels: row p of a packed B panel is at p*NR, column p of a
 * packed A panel at p*MR, so a key sub-range is a pointer offset and a
 * shorter kc) that intersect the union of its own rows' ranges. Inside that
 * range, keys a row cannot see get P = 0 exactly.
 *
 * Online softmax per row: m (running max of the logits), l (running sum of
 * exp(x - m)), O_acc (running sum of exp(x - m) V). A block with max mx
 * gives m' = max(m, mx), alpha = exp(m - m'), l = l*alpha + sum exp(x - m'),
 * O_acc = O_acc*alpha + P·V. The final O = O_acc / l (with a sink s:
 * m'' = max(m, s), O = O_acc e^(m-m'') / (l e^(m-m'') + e^(s-m''))). In
 * the chunk's last key block each MR-row panel's outputs are stored right
 * after its P·V (the rows are final, their O_acc still in L1), and a
 * panel's first P·V writes O_acc instead of adding to zeros.
 *
 * Logits: Q is gathered times scale, so S = Q·Kᵀ is already scaled; a
 * softcap then multiplies S by 1/softcap, takes tanh and multiplies by
 * softcap, three roundings in ggml's order (ggml_scale, ggml_tanh,
 * ggml_scale: folding 1/softcap into Q instead moved gemma2 logits by up to
 * 3e-5 of their range from llama.cpp's); per row one max pass remains, then per MR-row panel one
 * fused pass P = exp(x - m) with the row sums, written straight into the
 * packed A panel of the P·V micro-kernel (the generated f32_exp_sub_pack;
 * keys a row cannot see are set to -inf first, rows with nothing visible
 * get m = +inf, so P = 0 there). Decode (split mode) uses f32_exp_sub_sum
 * per row.
 *
 * Memory: one region, the shared part first (prepacked K/V blocks, or the
 * split partials), then one slice per worker (floats, 64-byte aligned
 * regions): gathered and packed Q (rows_pad*dk each, times the KV heads in
 * split mode), packed K block (bc*dk), packed V block (bc*dv_pad), one panel
 * of S (MR*bc) and of packed P (MR*bc), O_acc (rows_pad*dv_pad), m and l
 * (rows_pad), a flag per panel (and ATTN_KEEP's head tag), and for f16 or
 * staged K/V the widened K and V rows (NR*dk, NR*dv; split mode with f16
 * rows widened whole: bc rows of all heads). */
#include "exec/attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "fucina/dispatch.h"

/* Rows per chunk (in MR-row panels): the largest of FC_ATTN_ROW_PANELS_MAX,
 * /2, /4, ... down to FC_ATTN_ROW_PANELS_MIN that still gives at least
 * FC_ATTN_MIN_CHUNKS chunks (a function of the shape only, never of the
 * thread count). Packed Q and O_acc of 32 panels (6x64 tile, d = 128) take
 * ~200 KB, in L2 next to the K and V blocks.
 * Keys per block (prefill): FC_ATTN_KV_BLOCK_FLOATS / max(dk, dv_pad), within
 * [FC_ATTN_KV_BLOCK_MIN, FC_ATTN_KV_BLOCK_MAX], rounded up to NR (512 keys
 * for d = 128: 256 KB of packed K and as much V). Long blocks mean few
 * per-row calls (max, exp) and online-softmax rescales per row: at 128 keys
 * per block a 512-token prefill ran ~8% slower. */
#define FC_ATTN_ROW_PANELS_MAX 32
#define FC_ATTN_ROW_PANELS_MIN 8
#define FC_ATTN_MIN_CHUNKS 16
#define FC_ATTN_KV_BLOCK_FLOATS 65536
#define FC_ATTN_KV_BLOCK_MIN 128
#define FC_ATTN_KV_BLOCK_MAX 1024

struct fc_attn_workspace {
    void *mem;
    size_t bytes;
};

fc_attn_workspace *fc_attn_workspace_new(void)
{
    return calloc(1, sizeof(fc_attn_workspace));
}

void fc_attn_workspace_free(fc_attn_workspace *ws)
{
    if (!ws) return;
    free(ws->mem);
    free(ws);
}

size_t fc_attn_workspace_bytes(const fc_attn_workspace *ws)
{
    return ws ? ws->bytes : 0;
}

/* ---- the micro-kernel geometry of the dispatched arms ---------------------- */

static _Atomic int slot_index_cache[4] = {-2, -2, -2, -2};
static const char *const gemm_slot_names[4] = {"f32_gemm", "f32_gemm_pack_a", "f32_gemm_pack_b", "f32_gemm_pack_bt"};

static int slot_index(int which)
{
    int i = atomic_load_explicit(&slot_index_cache[which], memory_order_relaxed);
    if (i != -2) return i;
    i = -1;
    for (size_t s = 0; s < FCK_SLOT_COUNT; s++)
        if (strcmp(fck_slot_descs[s].slot, gemm_slot_names[which]) == 0) {
            i = (int)s;
            break;
        }
    atomic_store_explicit(&slot_index_cache[which], i, memory_order_relaxed);
    return i;
}

static int parse_tile(const char *tile, int64_t *mr, int64_t *nr)
{
    size_t m, n;
    if (fck_tile_parse(tile, &m, &n) != 0) return 0;
    *mr = (int64_t)m;
    *nr = (int64_t)n;
    return 1;
}

/* MR x NR of the dispatched f32_gemm; the pack slots must agree (they share
 * their arms in the registry, so they always do). */
static int gemm_geometry(int64_t *mr, int64_t *nr)
{
    int64_t m0 = 0, n0 = 0;
    for (int which = 0; which < 4; which++) {
        int i = slot_index(which);
        fc_kernel_slot ks;
        int64_t m, n;
        if (i < 0 || fc_kernel_slot_get((size_t)i, &ks) != FC_OK || !parse_tile(ks.tile, &m, &n)) return 0;
        if (which == 0) {
            m0 = m;
            n0 = n;
        } else if (m != m0 || n != n0) {
            return 0;
        }
    }
    if (m0 > 16) return 0; /* block_step keeps a panel's rows in arrays of 16 */
    *mr = m0;
    *nr = n0;
    return 1;
}

/* ---- the plan ----------------------------------------------------------------- */

/* Execution modes (a function of the shape only):
 *   ATTN_LAZY     chunks (KV head, query block); each packs the K/V blocks it
 *                 needs itself.
 *   ATTN_PREPACK  the same chunks, but K and V are first packed once per
 *                 (KV head, key block) into a shared region by a parallel
 *                 pre-pass, and every query block of that head reads them
 *                 (used when a head has several query blocks and the packed
 *                 K/V fit in FC_ATTN_PREPACK_MAX_BYTES).
 *   ATTN_KEEP     as PREPACK when all keys are one block: no pre-pass and no
 *                 shared region; chunks go head-major (all query blocks of
 *                 KV head 0, then head 1, ...) and each worker packs the
 *                 block of the head it is on into its own slice and keeps it
 *                 for its next chunks, so the packed K/V (256 KB each at
 *                 512 keys, d = 128) are read from L2, not written to memory
 *                 and read back (the micro-kernel ran at ~72% of peak in
 *                 a 512-token prefill with the pre-pass, ~80% with this).
 *                 With 2 threads a head is mostly packed by both workers;
 *                 that measured no slower than the shared pre-pass.
 *   ATTN_SPLIT    few rows (decode): chunks are key ranges of split_len keys
 *                 over all KV heads (a short cache, with few ranges: over a
 *                 group of KV heads); each writes per-row partial (m, l, O)
 *                 triples, merged afterwards in split order. Within a chunk,
 *                 key blocks are outer and heads inner, so K/V rows are read
 *                 in address order (one [token, head, dim] row after the
 *                 other) instead of one head's rows at the token stride. */
enum { ATTN_LAZY = 0, ATTN_PREPACK = 1, ATTN_SPLIT = 2, ATTN_KEEP = 3 };

/* Split mode: used when one query block of all tokens has at most
 * FC_ATTN_SPLIT_MAX_PANELS panels of rows per KV head. A split is a whole
 * number of key blocks, at least FC_ATTN_SPLIT_MIN_BLOCKS, and there are at
 * most FC_ATTN_SPLIT_MAX splits. */
#define FC_ATTN_SPLIT_MAX_PANELS 4
#define FC_ATTN_SPLIT_MIN_BLOCKS 2
#define FC_ATTN_SPLIT_MAX 16
/* keys per block in split mode (rounded up to NR): the block's K and V rows
 * of all heads (64 x 4 KB each for 8 heads x 128 f32) stay in L2. (A
 * software prefetch of each head's rows of the next block was in the code
 * but deleted by GCC, see stage_rows; made effective, it measured ~20%
 * slower for a 4096-position f32 decode, and was removed.) */
#define FC_ATTN_SPLIT_KV_BLOCK 64
/* Split mode: at least this many chunks (split x head group) when there
 * are heads enough, so both cores of a decode step have work at any cache
 * position (at <= 128 keys there is a single split: one serial chunk over
 * all heads took ~60 us per layer of a 0.6B decode step). */
#define FC_ATTN_SPLIT_MIN_CHUNKS 8
/* Split mode with at most this many rows per KV head (and at most MR): S by
 * f32_dot and O_acc += P V by f32_axpy, key by key, straight from the K (or
 * widened f16) rows, with no packing. Decode is close to compute-bound on
 * one core (packing K and V, or widening f16, is a pass over all of them);
 * with 2 rows per KV head this measured as fast as packing for f32 (in
 * cache) and ~10% faster for f16. */
#define FC_ATTN_DOT_ROWS 4
#define FC_ATTN_PREPACK_MAX_BYTES ((size_t)64 << 20)

typedef struct attn_plan {
    int64_t mr, nr, G, dk, dv, dv_pad;
    int64_t bq, rows_pad, bc, n_qb, n_chunks;
    int stage_kv;
    int wide_f16;                 /* split, f16, heads contiguous: widen whole token rows */
    int dot_rows;                 /* split with few rows: dot/axpy per key, no packing */
    int mode;
    int64_t kb0, n_kb;            /* prepack: first key block and block count */
    int64_t split_len, n_split;   /* split: keys per split, splits */
    int64_t head_groups;          /* split: chunks per split (KV heads divided among them) */
    int64_t n_heads_state;        /* KV heads whose row state a worker holds (split: all) */
    /* offsets (floats) of each scratch region in one worker's slice */
    size_t off_qp, off_qt, off_kp, off_vp, off_s, off_pp, off_o, off_m, off_l, off_kf, off_vf, off_init;
    size_t per_worker; /* bytes, a multiple of 64 */
    size_t shared;     /* bytes before the worker slices (prepacked K/V, partials), a multiple of 64 */
} attn_plan;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Keys visible to query token t: [*lo, *hi] (empty when *hi < *lo). */
static void token_range(const fc_attn_args *a, int64_t t, int64_t *lo, int64_t *hi)
{
    int64_t pos = a->q_pos0 + t;
    int64_t l = 0, h = a->n_kv - 1;
    if (a->causal && pos < h) h = pos;
    if (a->window > 0 && pos - a->window + 1 > l) l = pos - a->window + 1;
    *lo = l;
    *hi = h;
}

/* Union span of the ranges of tokens [ta, tb]; empty gives lo > hi. */
static void tokens_span(const fc_attn_args *a, int64_t ta, int64_t tb, int64_t *lo, int64_t *hi)
{
    int64_t l = INT64_MAX, h = INT64_MIN;
    for (int64_t t = ta; t <= tb; t++) {
        int64_t tl, th;
        token_range(a, t, &tl, &th);
        if (tl > th) continue;
        if (tl < l) l = tl;
        if (th > h) h = th;
    }
    *lo = l;
    *hi = h;
}

static void make_plan(const fc_attn_args *a, int64_t mr, int64_t nr, attn_plan *p)
{
    p->mr = mr;
    p->nr = nr;
    p->G = a->n_head / a->n_kv_head;
    p->dk = a->head_dim;
    p->dv = a->head_dim_v ? a->head_dim_v : a->head_dim;
    p->dv_pad = round_up(p->dv, nr);
    {
        /* keys per block: FC_ATTN_KV_BLOCK_FLOATS floats of K (or V) rows,
         * clamped to [FC_ATTN_KV_BLOCK_MIN, FC_ATTN_KV_BLOCK_MAX] */
        const int64_t d = p->dk > p->dv_pad ? p->dk : p->dv_pad;
        int64_t bc = FC_ATTN_KV_BLOCK_FLOATS / d;
        if (bc < FC_ATTN_KV_BLOCK_MIN) bc = FC_ATTN_KV_BLOCK_MIN;
        if (bc > FC_ATTN_KV_BLOCK_MAX) bc = FC_ATTN_KV_BLOCK_MAX;
        p->bc = round_up(bc, nr);
    }
    p->kb0 = p->n_kb = 0;
    p->split_len = p->n_split = 0;
    p->head_groups = 1;
    p->n_heads_state = 1;
    p->shared = 0;

    if (a->n_q * p->G <= FC_ATTN_SPLIT_MAX_PANELS * mr) {
        /* split-KV: one query block of all tokens, key ranges as chunks */
        p->mode = ATTN_SPLIT;
        p->bc = round_up(FC_ATTN_SPLIT_KV_BLOCK, nr);
        p->bq = a->n_q > 0 ? a->n_q : 1;
        p->rows_pad = round_up(p->bq * p->G, mr);
        p->n_qb = 1;
        const int64_t blocks = a->n_kv > 0 ? (a->n_kv + p->bc - 1) / p->bc : 1;
        int64_t per = (blocks + FC_ATTN_SPLIT_MAX - 1) / FC_ATTN_SPLIT_MAX;
        if (per < FC_ATTN_SPLIT_MIN_BLOCKS) per = FC_ATTN_SPLIT_MIN_BLOCKS;
        p->split_len = per * p->bc;
        p->n_split = (blocks + per - 1) / per;
        /* a short cache gives few splits: then the KV heads are divided
         * among chunks too, so that decode at a small position is not one
         * serial chunk (a head's arithmetic is the same in either chunking,
         * so the bits do not depend on it) */
        p->head_groups = p->n_split >= FC_ATTN_SPLIT_MIN_CHUNKS ? 1
                         : (FC_ATTN_SPLIT_MIN_CHUNKS + p->n_split - 1) / p->n_split;
        if (p->head_groups > a->n_kv_head) p->head_groups = a->n_kv_head;
        p->n_chunks = p->n_split * p->head_groups;
        p->n_heads_state = a->n_kv_head;
        p->shared = (size_t)round_up(p->n_split * a->n_q * a->n_head * (p->dv + 2), 16) * sizeof(float);
    } else {
        /* query tokens per chunk: a whole number of panels of rows when the
         * group size allows it */
        int64_t bq = 1;
        for (int64_t panels = FC_ATTN_ROW_PANELS_MAX; panels >= FC_ATTN_ROW_PANELS_MIN; panels /= 2) {
            bq = (panels * mr + p->G - 1) / p->G;
            bq = round_up(bq, mr / gcd64(mr, p->G));
            if (bq > a->n_q) bq = a->n_q;
            if (bq < 1) bq = 1;
            if (((a->n_q + bq - 1) / bq) * a->n_kv_head >= FC_ATTN_MIN_CHUNKS) break;
        }
        p->bq = bq;
        p->rows_pad = round_up(bq * p->G, mr);
        p->n_qb = (a->n_q + bq - 1) / bq;
        p->n_chunks = p->n_qb * a->n_kv_head;
        p->mode = ATTN_LAZY;
        int64_t lo, hi;
        tokens_span(a, 0, a->n_q - 1, &lo, &hi);
        if (p->n_qb > 1 && lo <= hi) {
            const int64_t kb0 = lo / p->bc, n_kb = hi / p->bc - kb0 + 1;
            const size_t bytes = (size_t)(a->n_kv_head * n_kb * p->bc * (p->dk + p->dv_pad)) * sizeof(float);
            if (n_kb == 1) {
                p->mode = ATTN_KEEP;
                p->kb0 = kb0;
                p->n_kb = 1;
            } else if (bytes <= FC_ATTN_PREPACK_MAX_BYTES) {
                p->mode = ATTN_PREPACK;
                p->kb0 = kb0;
                p->n_kb = n_kb;
                p->shared = bytes; /* a multiple of 64: bc is a multiple of 16 */
            }
        }
    }

    /* Split mode with f16 K/V whose heads are contiguous within a token row
     * (k_hs == head_dim, v_hs == head_dim_v): a block's rows are widened for
     * all heads at once, one call per token row in address order, and each
     * head reads from there (~5-10% faster than widening per head and row). */
    p->wide_f16 = p->mode == ATTN_SPLIT && a->kv_type == FC_ATTN_KV_F16 && a->k_hs == p->dk && a->v_hs == p->dv;
    p->dot_rows = p->mode == ATTN_SPLIT && a->n_q * p->G <= FC_ATTN_DOT_ROWS && a->n_q * p->G <= mr &&
                  (a->kv_type == FC_ATTN_KV_F32 || p->wide_f16);
    const int64_t hs = p->n_heads_state;
    size_t off = 0;
#define FC_REGION(field, nfloats)                                  \
    do {                                                           \
        p->field = off;                                            \
        off += (size_t)round_up((int64_t)(nfloats), 16);           \
    } while (0)
    FC_REGION(off_qp, hs * p->rows_pad * p->dk);
    FC_REGION(off_qt, p->rows_pad * p->dk);
    /* packed K/V blocks of the worker: not with prepacked K/V or dot rows
     * (ATTN_KEEP: the block of the KV head it last worked on) */
    const int own_packs = p->mode != ATTN_PREPACK && !p->dot_rows;
    FC_REGION(off_kp, own_packs ? p->bc * p->dk : 0);
    FC_REGION(off_vp, own_packs ? p->bc * p->dv_pad : 0);
    FC_REGION(off_s, mr * p->bc);
    FC_REGION(off_pp, mr * p->bc);
    FC_REGION(off_o, hs * p->rows_pad * p->dv_pad);
    FC_REGION(off_m, hs * p->rows_pad);
    FC_REGION(off_l, hs * p->rows_pad);
    /* per MR-row panel: 1 once its O_acc rows hold values (a panel's first
     * P·V overwrites instead of adding to zeros; split mode zeroes O_acc
     * and sets them all), then one more: in ATTN_KEEP, the KV head whose
     * block kp and vp hold (-1: none yet) */
    FC_REGION(off_init, hs * p->rows_pad / mr + 1);
    /* Prefill-sized chunks first copy f32 K/V rows of a block into contiguous
     * scratch: packing straight from rows a power-of-two stride apart (e.g.
     * 8 heads x 128 floats = 4 KB) thrashes L1 sets in the transposing pack
     * (measured ~10% of a 512-token prefill). Decode-sized chunks pack
     * directly: there the extra copy costs more than it saves. Blocks are
     * packed NR keys at a time (pack_k_block, pack_v_block), so the staged
     * (or widened f16) rows are NR rows, 32 KB at d = 128: they stay in L1. */
    p->stage_kv = a->kv_type == FC_ATTN_KV_F32 && p->mode != ATTN_SPLIT && p->rows_pad >= 8 * mr;
    if (p->wide_f16) {
        FC_REGION(off_kf, p->bc * a->n_kv_head * p->dk);
        FC_REGION(off_vf, p->bc * a->n_kv_head * p->dv);
    } else if (a->kv_type == FC_ATTN_KV_F16 || p->stage_kv) {
        FC_REGION(off_kf, nr * p->dk);
        FC_REGION(off_vf, nr * p->dv);
    } else {
        p->off_kf = p->off_vf = 0;
    }
#undef FC_REGION
    p->per_worker = off * sizeof(float);
}

static int valid_args(const fc_attn_args *a)
{
    if (!a) return 0;
    if (a->n_q < 0 || a->n_kv < 0 || a->n_head < 1 || a->n_kv_head < 1 || a->head_dim < 1 || a->head_dim_v < 0)
        return 0;
    if (a->n_head % a->n_kv_head) return 0;
    if (a->kv_type != FC_ATTN_KV_F32 && a->kv_type != FC_ATTN_KV_F16) return 0;
    if (a->q_ts < 0 || a->q_hs < 0 || a->k_ts < 0 || a->k_hs < 0 || a->v_ts < 0 || a->v_hs < 0 || a->o_ts < 0 ||
        a->o_hs < 0 || a->mask_rs < 0 || a->mask_hs < 0 || a->window < 0)
        return 0;
    if (a->n_q > 0 && (!a->q || !a->o)) return 0;
    if (a->n_q > 0 && a->n_kv > 0 && (!a->k || !a->v)) return 0;
    return 1;
}

int fc_attention_plan(const fc_attn_args *a, fc_attn_plan *out)
{
    int64_t mr, nr;
    if (!valid_args(a) || !out) return -2;
    if (!gemm_geometry(&mr, &nr)) return -2;
    attn_plan p;
    make_plan(a, mr, nr, &p);
    out->mr = mr;
    out->nr = nr;
    out->q_block = p.bq;
    out->kv_block = p.bc;
    out->n_chunks = p.n_chunks;
    out->kv_split = p.mode == ATTN_SPLIT ? p.split_len : 0;
    out->prepacked = p.mode == ATTN_PREPACK || p.mode == ATTN_KEEP;
    return 0;
}

/* ---- pieces of a chunk ------------------------------------------------------------ */

typedef struct attn_ctx {
    const fc_attn_args *a;
    const fck_table *kt;
    attn_plan p;
    unsigned char *mem;  /* shared region, then the worker slices */
    float lscale; /* the scale Q is gathered with */
} attn_ctx;

typedef struct attn_scratch {
    float *qp, *qt, *kp, *vp, *S, *pp, *oacc, *m, *l, *kf, *vf, *init;
} attn_scratch;

static void worker_scratch(const attn_ctx *x, int worker, attn_scratch *s)
{
    const attn_plan *p = &x->p;
    float *ws = (float *)(x->mem + p->shared + (size_t)worker * p->per_worker);
    s->qp = ws + p->off_qp;
    s->qt = ws + p->off_qt;
    s->kp = ws + p->off_kp;
    s->vp = ws + p->off_vp;
    s->S = ws + p->off_s;
    s->pp = ws + p->off_pp;
    s->oacc = ws + p->off_o;
    s->m = ws + p->off_m;
    s->l = ws + p->off_l;
    s->kf = ws + p->off_kf;
    s->vf = ws + p->off_vf;
    s->init = ws + p->off_init;
}

/* The rows of one (KV head, query block): R = nt*G rows, row r = token
 * t0 + r/G, query head g*G + r%G; packed Q, O_acc (row stride dv_pad), m, l,
 * and per MR-row panel whether its O_acc rows are written yet. */
typedef struct attn_rows {
    int64_t g, t0, nt, R;
    float *qp, *oacc, *m, *l, *init;
} attn_rows;

static void zero_floats(float *x, int64_t n)
{
    if (n > 0) memset(x, 0, (size_t)n * sizeof(float));
}

/* gather the rows' Q (token-major) into qt, pack into A panels, reset
 * state; dot rows read the scaled rows themselves: gathered straight into
 * the rows' Q, no panels */
static void rows_init(const attn_ctx *x, const attn_rows *rw, float *qt)
{
    const fc_attn_args *a = x->a;
    const attn_plan *p = &x->p;
    const int64_t G = p->G, dk = p->dk, mr = p->mr;
    if (p->dot_rows) qt = rw->qp;
    if (a->q_hs == dk) /* a token's G rows are contiguous: one call for them */
        for (int64_t t = 0; t < rw->nt; t++)
            x->kt->f32_scale((size_t)(G * dk), a->q + (rw->t0 + t) * a->q_ts + rw->g * G * dk, x->lscale,
                             qt + t * G * dk);
    else
        for (int64_t r = 0; r < rw->R; r++)
            x->kt->f32_scale((size_t)dk, a->q + (rw->t0 + r / G) * a->q_ts + (rw->g * G + r % G) * a->q_hs,
                             x->lscale, qt + r * dk);
    if (!p->dot_rows) x->kt->f32_gemm_pack_a((size_t)rw->R, (size_t)dk, qt, (size_t)dk, rw->qp);
    const int64_t rp = (rw->R + mr - 1) / mr * mr;
    for (int64_t r = 0; r < rp; r++) {
        rw->m[r] = -INFINITY;
        rw->l[r] = 0.0f;
    }
    /* Prefill: no zeroing, a panel's first P·V stores instead of adding.
     * Split mode sums O_acc with axpy (dot rows) and copies it whole into
     * the partials, so it starts from zeros there. */
    const int zeroed = p->mode == ATTN_SPLIT;
    if (zeroed) zero_floats(rw->oacc, rp * p->dv_pad);
    for (int64_t i = 0; i < rp / mr; i++) rw->init[i] = zeroed ? 1.0f : 0.0f;
}

/* Rows fetched ahead while K or V rows are copied (or widened) for packing:
 * one head's rows are a page or more apart (8 KV heads x 128 f32 = 4 KB),
 * where the hardware prefetchers stop, so without this each row costs a
 * DRAM latency. 8 rows of 512 bytes: 64 lines in flight. */
#define FC_ATTN_PREFETCH_ROWS 8

/* nb rows of n elements (f32, or f16 widened) from src (row stride ld
 * elements) into dst (row stride n floats), the rows FC_ATTN_PREFETCH_ROWS
 * ahead prefetched (a hint: no effect on results). The prefetch stays in
 * this function, which has effects: GCC's IPA takes a function made only of
 * __builtin_prefetch for pure and deletes its calls (that happened to a
 * split-mode prefetch_head). */
static void stage_rows(const attn_ctx *x, const void *src, int64_t ld, int64_t n, int64_t nb, float *dst)
{
    const int f16 = x->a->kv_type == FC_ATTN_KV_F16;
    const size_t el = f16 ? sizeof(fc_f16) : sizeof(float);
    const char *s = src;
    for (int64_t i = 0; i < nb; i++) {
#if defined(__GNUC__)
        if (i + FC_ATTN_PREFETCH_ROWS < nb) {
            const char *ahead = s + (size_t)((i + FC_ATTN_PREFETCH_ROWS) * ld) * el;
            for (size_t o = 0; o < (size_t)n * el; o += 64) __builtin_prefetch(ahead + o, 0, 3);
        }
#endif
        const void *row = s + (size_t)(i * ld) * el;
        if (f16) x->kt->f16_to_f32((size_t)n, row, dst + i * n);
        else memcpy(dst + i * n, row, (size_t)n * sizeof(float));
    }
}

/* pack keys [sa, sa+nb) of KV head g, nb <= NR or all in one call: K with
 * pack_bt into kp (its panels of NR keys, dk rows each); V with pack_b into
 * rows 0.. of the dv_pad/NR panels of vp, nbp*NR floats apart (nbp >= nb:
 * the keys of the whole block these rows are part of) */
static void pack_k(const attn_ctx *x, const attn_scratch *s, int64_t g, int64_t sa, int64_t nb, float *kp)
{
    const fc_attn_args *a = x->a;
    const fck_table *K = x->kt;
    const int64_t dk = x->p.dk;
    const size_t el = a->kv_type == FC_ATTN_KV_F16 ? sizeof(fc_f16) : sizeof(float);
    const char *src = (const char *)a->k + (size_t)(g * a->k_hs + sa * a->k_ts) * el;
    if (a->kv_type == FC_ATTN_KV_F16 || x->p.stage_kv) {
        stage_rows(x, src, a->k_ts, dk, nb, s->kf);
        K->f32_gemm_pack_bt((size_t)dk, (size_t)nb, s->kf, (size_t)dk, kp);
    } else {
        K->f32_gemm_pack_bt((size_t)dk, (size_t)nb, (const float *)(const void *)src, (size_t)a->k_ts, kp);
    }
}

static void pack_v(const attn_ctx *x, const attn_scratch *s, int64_t g, int64_t sa, int64_t nb, int64_t nbp,
                   float *vp)
{
    const fc_attn_args *a = x->a;
    const fck_table *K = x->kt;
    const int64_t dv = x->p.dv, nr = x->p.nr;
    const size_t el = a->kv_type == FC_ATTN_KV_F16 ? sizeof(fc_f16) : sizeof(float);
    const char *src = (const char *)a->v + (size_t)(g * a->v_hs + sa * a->v_ts) * el;
    const float *b = (const float *)(const void *)src;
    int64_t ld = a->v_ts;
    if (a->kv_type == FC_ATTN_KV_F16 || x->p.stage_kv) {
        stage_rows(x, src, a->v_ts, dv, nb, s->vf);
        b = s->vf;
        ld = dv;
    }
    if (nbp == nb) {
        K->f32_gemm_pack_b((size_t)nb, (size_t)dv, b, (size_t)ld, vp);
        return;
    }
    for (int64_t j = 0; j * nr < dv; j++) /* one panel at a time: they are nbp*NR apart */
        K->f32_gemm_pack_b((size_t)nb, (size_t)(dv - j * nr < nr ? dv - j * nr : nr), b + j * nr, (size_t)ld,
                           vp + j * nbp * nr);
}

/* pack keys [sa, sa+nb) of KV head g as one nb-key block, K into kp (and
 * pack_v_block: V into vp), NR keys at a time: the staged rows stay in L1 */
static void pack_k_block(const attn_ctx *x, const attn_scratch *s, int64_t g, int64_t sa, int64_t nb, float *kp)
{
    const int64_t nr = x->p.nr;
    for (int64_t k0 = 0; k0 < nb; k0 += nr) pack_k(x, s, g, sa + k0, nb - k0 < nr ? nb - k0 : nr, kp + k0 * x->p.dk);
}

static void pack_v_block(const attn_ctx *x, const attn_scratch *s, int64_t g, int64_t sa, int64_t nb, float *vp)
{
    const int64_t nr = x->p.nr;
    for (int64_t k0 = 0; k0 < nb; k0 += nr) pack_v(x, s, g, sa + k0, nb - k0 < nr ? nb - k0 : nr, nb, vp + k0 * nr);
}

/* ATTN_KEEP: KV head g's block packed in this worker's kp and vp, unless
 * they already hold it (the tag after the panel flags: the head, or -1) */
static void keep_block(const attn_ctx *x, const attn_scratch *s, int64_t g)
{
    const attn_plan *p = &x->p;
    float *tag = s->init + p->n_heads_state * p->rows_pad / p->mr;
    if (*tag == (float)g) return;
    const int64_t base = p->kb0 * p->bc, nb = x->a->n_kv - base < p->bc ? x->a->n_kv - base : p->bc;
    pack_k_block(x, s, g, base, nb, s->kp);
    pack_v_block(x, s, g, base, nb, s->vp);
    *tag = (float)g;
}

/* One row's online-softmax step over keys [pa, pb] of a block: xr[s - base]
 * is the (scaled) logit of key s. Keys the row cannot see get P = 0; the others
 * get softcap and mask, then P = exp(x - m') with m' the new running max; l
 * and O_acc (dv floats) are rescaled to m'. On return xr holds P there.
 * Two halves, so a panel can take all its rows' maxima before any exp (the
 * rows' exp passes then do not wait on each other's reductions):
 * row_max clips the row's range to [*ra, *rb], applies softcap and mask and
 * returns the new running max m' (-inf, with the row's P already zeroed,
 * when the row has nothing with weight yet); row_exp does the rest. */
static float row_max(const attn_ctx *x, float *xr, int64_t base, int64_t pa, int64_t pb, int64_t t, int64_t h,
                     float mo, int64_t *ra_out, int64_t *rb_out)
{
    const fc_attn_args *a = x->a;
    const fck_table *K = x->kt;
    int64_t ra, rb;
    token_range(a, t, &ra, &rb);
    if (ra < pa) ra = pa;
    if (rb > pb) rb = pb;
    *ra_out = ra;
    *rb_out = rb;
    if (ra > rb) {
        zero_floats(xr + (pa - base), pb - pa + 1);
        return -INFINITY;
    }
    float *u = xr + (ra - base); /* logits already scaled: Q was gathered times lscale */
    const size_t n = (size_t)(rb - ra + 1);
    if (a->softcap > 0.0f) {
        K->f32_scale(n, u, 1.0f / a->softcap, u);
        K->f32_tanh(n, u, u);
        K->f32_scale(n, u, a->softcap, u);
    }
    if (a->mask) K->f32_add(n, u, a->mask + t * a->mask_rs + h * a->mask_hs + ra, u);
    const float mx = K->f32_reduce_max(n, u);
    const float mn = (mx > mo || mx != mx) ? mx : mo; /* a NaN logit propagates */
    if (mn == -INFINITY) zero_floats(xr + (pa - base), pb - pa + 1); /* nothing with weight yet */
    return mn;
}

static void row_exp(const attn_ctx *x, float *xr, int64_t base, int64_t pa, int64_t pb, int64_t ra, int64_t rb,
                    float mn, float *m, float *l, float *oacc)
{
    const fck_table *K = x->kt;
    if (ra > rb || mn == -INFINITY) return; /* P zeroed by row_max */
    float *u = xr + (ra - base);
    const float mo = *m;
    const float sum = K->f32_exp_sub_sum((size_t)(rb - ra + 1), u, mn, u);
    if (mo == -INFINITY) {
        *l = sum;
    } else {
        const float alpha = expf(mo - mn);
        *l = *l * alpha + sum;
        if (alpha != 1.0f) K->f32_scale((size_t)x->p.dv, oacc, alpha, oacc);
    }
    *m = mn;
    zero_floats(xr + (pa - base), ra - pa);
    zero_floats(xr + (rb + 1 - base), pb - rb);
}

static void row_update(const attn_ctx *x, float *xr, int64_t base, int64_t pa, int64_t pb, int64_t t, int64_t h,
                       float *m, float *l, float *oacc)
{
    int64_t ra, rb;
    const float mn = row_max(x, xr, base, pa, pb, t, h, *m, &ra, &rb);
    row_exp(x, xr, base, pa, pb, ra, rb, mn, m, l, oacc);
}

/* O[t, h] from a row's state (m, l, O_acc); empty or fully masked: zeros */
static void store_row(const attn_ctx *x, int64_t t, int64_t h, float mr_, float lr, const float *oacc)
{
    const fc_attn_args *a = x->a;
    const fck_table *K = x->kt;
    const int64_t dv = x->p.dv;
    float *dst = a->o + t * a->o_ts + h * a->o_hs;
    if (mr_ == -INFINITY || lr == 0.0f) {
        zero_floats(dst, dv);
        return;
    }
    if (a->sinks) {
        const float sk = a->sinks[h];
        float f;
        if (sk > mr_) {
            const float e = expf(mr_ - sk);
            f = e / (lr * e + 1.0f);
        } else {
            f = 1.0f / (lr + expf(sk - mr_));
        }
        K->f32_scale((size_t)dv, oacc, f, dst);
    } else {
        K->f32_scale((size_t)dv, oacc, 1.0f / lr, dst);
    }
}

/* store the outputs of rows [r0, r1] of a row group */
static void store_rows(const attn_ctx *x, const attn_rows *rw, int64_t r0, int64_t r1)
{
    const int64_t G = x->p.G;
    for (int64_t r = r0; r <= r1; r++)
        store_row(x, rw->t0 + r / G, rw->g * G + r % G, rw->m[r], rw->l[r], rw->oacc + r * x->p.dv_pad);
}

/* One key block for one row group: keys [sa, sb] of the block whose packed
 * K/V start at key `base` and hold nbp keys (kp/vp: NULL means pack keys
 * [sa, sb] lazily into scratch, then base = sa and nbp = sb - sa + 1).
 * last: the rows' last block; each panel's outputs are then stored as soon
 * as it is done, while its O_acc rows are in L1. */
static void block_step(const attn_ctx *x, const attn_scratch *sc, const attn_rows *rw, int64_t sa, int64_t sb,
                       const float *kp_in, const float *vp_in, int64_t base, int64_t nbp, int last)
{
    const fc_attn_args *a = x->a;
    const attn_plan *p = &x->p;
    const fck_table *K = x->kt;
    const int64_t mr = p->mr, nr = p->nr, G = p->G, dk = p->dk, dvp = p->dv_pad, bc = p->bc;
    const int64_t g = rw->g, t0 = rw->t0, R = rw->R;
    const int64_t npan = (R + mr - 1) / mr;
    float *S = sc->S, *pp = sc->pp, *oacc = rw->oacc, *m = rw->m, *l = rw->l;
    const float *kp = kp_in, *vp = vp_in;
    if (!kp) {
        base = sa;
        nbp = sb - sa + 1;
    }

    for (int64_t i = 0; i < npan; i++) {
        const int64_t r0 = i * mr;
        const int64_t r1 = (r0 + mr < R ? r0 + mr : R) - 1;
        int64_t pa, pb;
        tokens_span(a, t0 + r0 / G, t0 + r1 / G, &pa, &pb);
        if (pa < sa) pa = sa;
        if (pb > sb) pb = sb;
        if (pa > pb) {
            if (last) store_rows(x, rw, r0, r1);
            continue;
        }

        if (!kp) {
            pack_k_block(x, sc, g, sa, nbp, sc->kp);
            kp = sc->kp;
        }

        /* S tiles of this panel over the key tiles it can see */
        float *Sp = S; /* this panel's rows of S: MR x bc; key s at column s - base */
        for (int64_t j = (pa - base) / nr; j <= (pb - base) / nr; j++)
            K->f32_gemm((size_t)dk, rw->qp + r0 * dk, kp + j * dk * nr, Sp + j * nr, (size_t)bc, 0);

        /* per row: logits, running max (all the panel's rows first) */
        const int64_t nrow = r1 - r0 + 1;
        float mn[16], mp[16], sums[16];
        int64_t ra[16], rb[16];
        for (int64_t r = r0; r <= r1; r++) {
            float *xr = S + (r - r0) * bc;
            const int64_t q = r - r0;
            mn[q] = row_max(x, xr, base, pa, pb, t0 + r / G, g * G + r % G, m[r], &ra[q], &rb[q]);
            if (ra[q] > rb[q] || mn[q] == -INFINITY) {
                mp[q] = INFINITY; /* P zeroed by row_max: exp(0 - inf) = 0 */
            } else {
                mp[q] = mn[q];
                for (int64_t s = pa; s < ra[q]; s++) xr[s - base] = -INFINITY;
                for (int64_t s = rb[q] + 1; s <= pb; s++) xr[s - base] = -INFINITY;
            }
        }

        /* P = exp(x - m') straight into the packed A panel, and its row sums */
        const int64_t kc = pb - pa + 1;
        K->f32_exp_sub_pack((size_t)mr, (size_t)nrow, (size_t)kc, Sp + (pa - base), (size_t)bc, mp, sums, pp);
        for (int64_t q = 0; q < nrow; q++) {
            if (mp[q] == INFINITY) continue;
            const int64_t r = r0 + q;
            const float mo = m[r];
            if (mo == -INFINITY) {
                l[r] = sums[q];
            } else {
                const float alpha = expf(mo - mn[q]);
                l[r] = l[r] * alpha + sums[q];
                if (alpha != 1.0f) K->f32_scale((size_t)p->dv, oacc + r * dvp, alpha, oacc + r * dvp);
            }
            m[r] = mn[q];
        }

        /* O_acc[panel] += P[panel, pa..pb] · V[pa..pb]; the panel's first
         * P·V stores instead (rows with no weight yet have P = 0, and a row
         * that had weight before had its O_acc written then) */
        if (!vp) {
            pack_v_block(x, sc, g, sa, nbp, sc->vp);
            vp = sc->vp;
        }
        const int acc = rw->init[i] != 0.0f;
        for (int64_t j = 0; j < dvp / nr; j++)
            K->f32_gemm((size_t)kc, pp, vp + j * nbp * nr + (pa - base) * nr, oacc + r0 * dvp + j * nr,
                        (size_t)dvp, acc);
        rw->init[i] = 1.0f;
        if (last) store_rows(x, rw, r0, r1);
    }
}

/* ---- chunks: (KV head, query block), lazy or prepacked K/V ------------------------- */

static void prepack_chunk(void *arg, int64_t c, int worker)
{
    const attn_ctx *x = arg;
    const attn_plan *p = &x->p;
    const fc_attn_args *a = x->a;
    attn_scratch sc;
    worker_scratch(x, worker, &sc);
    const int64_t g = c % a->n_kv_head, kb = p->kb0 + c / a->n_kv_head;
    const int64_t base = kb * p->bc;
    const int64_t nb = a->n_kv - base < p->bc ? a->n_kv - base : p->bc;
    float *kp = (float *)x->mem + (g * p->n_kb + (kb - p->kb0)) * p->bc * (p->dk + p->dv_pad);
    pack_k_block(x, &sc, g, base, nb, kp);
    pack_v_block(x, &sc, g, base, nb, kp + p->bc * p->dk);
}

static void attn_chunk(void *arg, int64_t c, int worker)
{
    const attn_ctx *x = arg;
    const fc_attn_args *a = x->a;
    const attn_plan *p = &x->p;
    const int64_t G = p->G, bc = p->bc;
    attn_scratch sc;
    worker_scratch(x, worker, &sc);

    /* heaviest query blocks (the last ones, under causality) first; ATTN_KEEP
     * head-major (a worker's next chunk is then mostly on the same head),
     * otherwise the KV heads of a query block one after the other (their Q
     * and O rows share pages, which the hardware prefetchers follow) */
    attn_rows rw;
    int64_t qb;
    if (p->mode == ATTN_KEEP) {
        rw.g = c / p->n_qb;
        qb = p->n_qb - 1 - c % p->n_qb;
    } else {
        rw.g = c % a->n_kv_head;
        qb = p->n_qb - 1 - c / a->n_kv_head;
    }
    rw.t0 = qb * p->bq;
    rw.nt = (a->n_q - rw.t0 < p->bq) ? a->n_q - rw.t0 : p->bq;
    rw.R = rw.nt * G;
    rw.qp = sc.qp;
    rw.oacc = sc.oacc;
    rw.m = sc.m;
    rw.l = sc.l;
    rw.init = sc.init;

    int64_t span_lo, span_hi;
    tokens_span(a, rw.t0, rw.t0 + rw.nt - 1, &span_lo, &span_hi);
    if (span_lo > span_hi) {
        for (int64_t r = 0; r < rw.R; r++) store_row(x, rw.t0 + r / G, rw.g * G + r % G, -INFINITY, 0.0f, NULL);
        return;
    }
    rows_init(x, &rw, sc.qt);
    if (p->mode == ATTN_KEEP) keep_block(x, &sc, rw.g);

    /* key blocks at fixed multiples of bc, clipped to the chunk's span: a
     * row's partial sums then do not depend on which rows share its chunk */
    for (int64_t kb = span_lo / bc; kb * bc <= span_hi; kb++) {
        const int64_t sa = kb * bc > span_lo ? kb * bc : span_lo;
        const int64_t sb = kb * bc + bc - 1 < span_hi ? kb * bc + bc - 1 : span_hi;
        const int last = sb == span_hi;
        const int64_t nbp = a->n_kv - kb * bc < bc ? a->n_kv - kb * bc : bc;
        if (p->mode == ATTN_PREPACK) {
            const float *kp = (const float *)x->mem + (rw.g * p->n_kb + (kb - p->kb0)) * bc * (p->dk + p->dv_pad);
            block_step(x, &sc, &rw, sa, sb, kp, kp + bc * p->dk, kb * bc, nbp, last);
        } else if (p->mode == ATTN_KEEP) {
            block_step(x, &sc, &rw, sa, sb, sc.kp, sc.vp, kb * bc, nbp, last);
        } else {
            block_step(x, &sc, &rw, sa, sb, NULL, NULL, 0, 0, last);
        }
    }
}

/* ---- split-KV chunks: a key range over all KV heads ------------------------------- */

/* partial triple of split s, row (token t, query head h): m, l, O[dv] */
static float *partial(const attn_ctx *x, int64_t s, int64_t t, int64_t h)
{
    const fc_attn_args *a = x->a;
    return (float *)x->mem + ((s * a->n_q + t) * a->n_head + h) * (x->p.dv + 2);
}

/* Split mode, few rows: keys [sa, sb] for the R rows of KV head g; q: R
 * scaled Q rows of dk; row s of K at kb + (s - origin) * kst, of V at
 * vb + (s - origin) * vst. */
/* S of the G rows of token t (q rows t*G.., dk apart) against the f16 key
 * rows [ra, rb] of KV head g, straight from the cache: one dot_x{8,4,2,1}
 * call per key and group of rows reads the key once, widening it in
 * registers (a row's result does not depend on the group it is in). */
static void f16_scores(const attn_ctx *x, const attn_scratch *sc, int64_t g, int64_t t, int64_t sa, int64_t ra,
                       int64_t rb, const float *q)
{
    const fc_attn_args *a = x->a;
    const fck_table *K = x->kt;
    const int64_t G = x->p.G, dk = x->p.dk, bc = x->p.bc;
    const fc_f16 *k16 = (const fc_f16 *)a->k + g * a->k_hs;
    float y[8];
    for (int64_t r0 = 0; r0 < G;) {
        const int64_t n = G - r0 >= 8 ? 8 : G - r0 >= 4 ? 4 : G - r0 >= 2 ? 2 : 1;
        const float *qr = q + (t * G + r0) * dk;
        for (int64_t s = ra; s <= rb; s++) {
            const fc_f16 *kr = k16 + s * a->k_ts;
            if (n == 8) K->f16_dot_x8((size_t)dk, kr, qr, (size_t)dk, y);
            else if (n == 4) K->f16_dot_x4((size_t)dk, kr, qr, (size_t)dk, y);
            else if (n == 2) K->f16_dot_x2((size_t)dk, kr, qr, (size_t)dk, y);
            else K->f16_dot_x1((size_t)dk, kr, qr, (size_t)dk, y);
            for (int64_t i = 0; i < n; i++) sc->S[(t * G + r0 + i) * bc + (s - sa)] = y[i];
        }
        r0 += n;
    }
}

/* O_acc of the G rows of token t += P V over the f16 value rows [ra, rb]
 * of KV head g, straight from the cache: one axpy_x{4,2,1} call per key and
 * group of rows reads the value row once, widening it in registers; each
 * element gets one fma, as f32_axpy on the widened row (the same bits). */
static void f16_pv(const attn_ctx *x, const attn_scratch *sc, int64_t g, int64_t t, int64_t sa, int64_t ra,
                   int64_t rb, float *oacc)
{
    const fc_attn_args *a = x->a;
    const fck_table *K = x->kt;
    const int64_t G = x->p.G, dv = x->p.dv, dvp = x->p.dv_pad, bc = x->p.bc;
    const fc_f16 *v16 = (const fc_f16 *)a->v + g * a->v_hs;
    float p[4];
    for (int64_t r0 = 0; r0 < G;) {
        const int64_t n = G - r0 >= 4 ? 4 : G - r0 >= 2 ? 2 : 1, r = t * G + r0;
        float *o = oacc + r * dvp;
        for (int64_t s = ra; s <= rb; s++) {
            const fc_f16 *vr = v16 + s * a->v_ts;
            for (int64_t i = 0; i < n; i++) p[i] = sc->S[(r + i) * bc + (s - sa)];
            if (n == 4) K->f16_axpy_x4((size_t)dv, vr, p, o, (size_t)dvp);
            else if (n == 2) K->f16_axpy_x2((size_t)dv, vr, p, o, (size_t)dvp);
            else K->f16_axpy_x1((size_t)dv, vr, p, o, (size_t)dvp);
        }
        r0 += n;
    }
}

/* k16: decode over an f16 cache with contiguous heads: S by f16_scores and
 * O_acc by f16_pv, from the cache (kb and vb unused); else S by f32_dot
 * from kb and O_acc by f32_axpy from vb. */
static void block_dot(const attn_ctx *x, const attn_scratch *sc, int64_t g, int64_t R, const float *q, float *oacc,
                      float *m, float *l, int64_t sa, int64_t sb, const float *kb, const float *vb, int64_t origin,
                      int64_t kst, int64_t vst, int k16)
{
    const fc_attn_args *a = x->a;
    const fck_table *K = x->kt;
    const int64_t G = x->p.G, dk = x->p.dk, dv = x->p.dv, dvp = x->p.dv_pad, bc = x->p.bc;
    for (int64_t r = 0; r < R; r++) {
        const int64_t t = r / G, h = g * G + r % G;
        int64_t ra, rb;
        token_range(a, t, &ra, &rb);
        if (ra < sa) ra = sa;
        if (rb > sb) rb = sb;
        if (ra > rb) continue;
        float *xr = sc->S + r * bc; /* key s at xr[s - sa] */
        if (k16) {
            /* the token's G rows at once: scores, G softmax updates, P V */
            if (r % G) continue;
            f16_scores(x, sc, g, t, sa, ra, rb, q);
            int all = 1;
            for (int64_t i = 0; i < G; i++) {
                row_update(x, sc->S + (r + i) * bc, sa, ra, rb, t, h + i, &m[r + i], &l[r + i], oacc + (r + i) * dvp);
                all &= m[r + i] != -INFINITY;
            }
            if (all) {
                f16_pv(x, sc, g, t, sa, ra, rb, oacc);
                continue;
            }
            /* a row with no weight yet (P all zero) is skipped: one at a time */
            const fc_f16 *v16 = (const fc_f16 *)a->v + g * a->v_hs;
            for (int64_t i = 0; i < G; i++) {
                if (m[r + i] == -INFINITY) continue;
                for (int64_t s = ra; s <= rb; s++)
                    K->f16_axpy_x1((size_t)dv, v16 + s * a->v_ts, &sc->S[(r + i) * bc + (s - sa)], oacc + (r + i) * dvp,
                                   (size_t)dvp);
            }
            continue;
        } else {
            for (int64_t s = ra; s <= rb; s++) xr[s - sa] = K->f32_dot((size_t)dk, q + r * dk, kb + (s - origin) * kst);
        }
        row_update(x, xr, sa, ra, rb, t, h, &m[r], &l[r], oacc + r * dvp);
        if (m[r] == -INFINITY) continue; /* no weight yet: P is all zero */
        for (int64_t s = ra; s <= rb; s++)
            K->f32_axpy((size_t)dv, vb + (s - origin) * vst, xr[s - sa], oacc + r * dvp);
    }
}

static void split_chunk(void *arg, int64_t chunk, int worker)
{
    const attn_ctx *x = arg;
    const fc_attn_args *a = x->a;
    const attn_plan *p = &x->p;
    const int64_t G = p->G, bc = p->bc, KH = a->n_kv_head, rp = p->rows_pad, dv = p->dv;
    /* chunk = split s, KV heads [g0, g1) of it */
    const int64_t s = chunk / p->head_groups, hg = chunk % p->head_groups;
    const int64_t per_group = (KH + p->head_groups - 1) / p->head_groups;
    const int64_t g0 = hg * per_group, g1 = g0 + per_group < KH ? g0 + per_group : KH;
    attn_scratch sc;
    worker_scratch(x, worker, &sc);

    int64_t lo, hi;
    tokens_span(a, 0, a->n_q - 1, &lo, &hi);
    const int64_t s0 = s * p->split_len, s1 = s0 + p->split_len - 1;
    if (lo < s0) lo = s0;
    if (hi > s1) hi = s1;

    attn_rows rw[1];
    if (lo <= hi && g0 < g1) {
        for (int64_t g = g0; g < g1; g++) {
            attn_rows r = {g, 0, a->n_q, a->n_q * G, sc.qp + g * rp * p->dk, sc.oacc + g * rp * p->dv_pad,
                           sc.m + g * rp, sc.l + g * rp, sc.init + g * rp / p->mr};
            rows_init(x, &r, sc.qt);
        }
        for (int64_t kb = lo / bc; kb * bc <= hi; kb++) {
            const int64_t sa = kb * bc > lo ? kb * bc : lo;
            const int64_t sb = kb * bc + bc - 1 < hi ? kb * bc + bc - 1 : hi;
            const int64_t nb = sb - sa + 1;
            if (p->wide_f16) {
                /* widen the block's K and V rows of this chunk's heads (contiguous
                 * in a token row), row by row, to their place in a whole row */
                const fc_f16 *k16 = a->k, *v16 = a->v;
                const int64_t nh = g1 - g0;
                /* (dot_rows reads K and V from the cache itself) */
                for (int64_t i = 0; i < nb && !p->dot_rows; i++) {
                    x->kt->f16_to_f32((size_t)(nh * p->dk), k16 + (sa + i) * a->k_ts + g0 * p->dk,
                                      sc.kf + i * KH * p->dk + g0 * p->dk);
                    x->kt->f16_to_f32((size_t)(nh * dv), v16 + (sa + i) * a->v_ts + g0 * dv,
                                      sc.vf + i * KH * dv + g0 * dv);
                }
            }
            for (int64_t g = g0; g < g1; g++) {
                rw[0] = (attn_rows){g, 0, a->n_q, a->n_q * G, sc.qp + g * rp * p->dk, sc.oacc + g * rp * p->dv_pad,
                                    sc.m + g * rp, sc.l + g * rp, sc.init + g * rp / p->mr};
                if (p->dot_rows) {
                    if (p->wide_f16) {
                        block_dot(x, &sc, g, a->n_q * G, rw[0].qp, rw[0].oacc, rw[0].m, rw[0].l, sa, sb,
                                  NULL, NULL, sa, 0, 0, 1);
                    } else {
                        block_dot(x, &sc, g, a->n_q * G, rw[0].qp, rw[0].oacc, rw[0].m, rw[0].l, sa, sb,
                                  (const float *)a->k + g * a->k_hs, (const float *)a->v + g * a->v_hs, 0, a->k_ts,
                                  a->v_ts, 0);
                    }
                } else if (p->wide_f16) {
                    x->kt->f32_gemm_pack_bt((size_t)p->dk, (size_t)nb, sc.kf + g * p->dk, (size_t)(KH * p->dk),
                                            sc.kp);
                    x->kt->f32_gemm_pack_b((size_t)nb, (size_t)dv, sc.vf + g * dv, (size_t)(KH * dv), sc.vp);
                    block_step(x, &sc, &rw[0], sa, sb, sc.kp, sc.vp, sa, nb, 0);
                } else {
                    block_step(x, &sc, &rw[0], sa, sb, NULL, NULL, 0, 0, 0);
                }
            }
        }
    }
    for (int64_t g = g0; g < g1; g++)
        for (int64_t r = 0; r < a->n_q * G; r++) {
            float *pt = partial(x, s, r / G, g * G + r % G);
            if (lo <= hi) {
                pt[0] = sc.m[g * rp + r];
                pt[1] = sc.l[g * rp + r];
                memcpy(pt + 2, sc.oacc + (g * rp + r) * p->dv_pad, (size_t)dv * sizeof(float));
            } else {
                pt[0] = -INFINITY;
                pt[1] = 0.0f;
            }
        }
}

/* merge the splits of row (t, h) in split order and store it; acc: dv floats */
static void merge_row(const attn_ctx *x, int64_t t, int64_t h, float *acc)
{
    const fck_table *K = x->kt;
    const int64_t dv = x->p.dv, ns = x->p.n_split;
    float M = -INFINITY;
    for (int64_t s = 0; s < ns; s++) {
        const float ms = partial(x, s, t, h)[0];
        M = (ms > M || ms != ms) ? ms : M;
    }
    if (M == -INFINITY) {
        store_row(x, t, h, M, 0.0f, NULL);
        return;
    }
    float L = 0.0f;
    zero_floats(acc, dv);
    for (int64_t s = 0; s < ns; s++) {
        const float *pt = partial(x, s, t, h);
        if (pt[0] == -INFINITY) continue;
        const float w = expf(pt[0] - M);
        L += pt[1] * w;
        K->f32_axpy((size_t)dv, pt + 2, w, acc);
    }
    store_row(x, t, h, M, L, acc);
}

/* ---- entry point ------------------------------------------------------------------ */

int fc_attention_f32(fc_workers *w, const fc_attn_args *a)
{
    int64_t mr, nr;
    if (!valid_args(a)) return -2;
    if (a->n_q == 0) return 0;
    if (!gemm_geometry(&mr, &nr)) return -2;

    attn_ctx x;
    x.a = a;
    x.kt = fck_kernels();
    make_plan(a, mr, nr, &x.p);
    x.lscale = a->scale;

    const int n_workers = fc_workers_count(w);
    const size_t need = x.p.shared + (size_t)n_workers * x.p.per_worker;
    void *tmp = NULL;
    if (a->ws) {
        if (a->ws->bytes < need) {
            void *mem = aligned_alloc(64, need);
            if (!mem) return -1;
            free(a->ws->mem);
            a->ws->mem = mem;
            a->ws->bytes = need;
        }
        x.mem = a->ws->mem;
    } else {
        tmp = aligned_alloc(64, need);
        if (!tmp) return -1;
        x.mem = tmp;
    }

    if (x.p.mode == ATTN_SPLIT) {
        fc_workers_run(w, x.p.n_chunks, split_chunk, &x);
        /* the merge, in split order (the first worker's O_acc as scratch) */
        attn_scratch sc;
        worker_scratch(&x, 0, &sc);
        for (int64_t t = 0; t < a->n_q; t++)
            for (int64_t h = 0; h < a->n_head; h++) merge_row(&x, t, h, sc.oacc);
    } else {
        if (x.p.mode == ATTN_PREPACK) fc_workers_run(w, a->n_kv_head * x.p.n_kb, prepack_chunk, &x);
        if (x.p.mode == ATTN_KEEP)
            for (int i = 0; i < n_workers; i++) { /* no block packed yet */
                attn_scratch sc;
                worker_scratch(&x, i, &sc);
                sc.init[x.p.rows_pad / x.p.mr] = -1.0f;
            }
        fc_workers_run(w, x.p.n_chunks, attn_chunk, &x);
    }
    free(tmp);
    return 0;
}
