/* SPDX-License-Identifier: MIT */
/* Prepared (packed) quantized weights: the load-time repacking of a block
 * matrix into the interleaved layout of the generated qgemm_packed kernels
 * (registry/quant_packed.yaml) and the prefill driver that runs them
 * (fc_qweights in qmatmul.h). Small M goes to the row-major fc_qmatmul.
 *
 * Why a packed layout pays (avx512): the row-major 8x4 tiles decode nibbles /
 * scales and do the per-block float work for every 4 weight rows; here one
 * zmm holds a 4-element slice of 16 rows (one vpdpbusd lane per row), the
 * nibbles need one and (low) or shift-and (high) per 32 row-elements, shared
 * by 8 activation rows, the 16 row scales are one f32 vector, and the K
 * formats' 6-bit scales and mins are decoded once here instead of per call.
 * Formats: q4_0, q8_0, q4_K (the others keep the row-major kernels). The
 * activations are quantized by the generated quantizers exactly as for
 * fc_qmatmul, then rewritten per block (f32 scale, the sums the layout's
 * offset correction needs) -- see registry/quant_packed.yaml. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/gemm_internal.h"
#include "exec/qmatmul.h"
#include "exec/qmatmul_internal.h"
#include "fucina/gen/fck_kernels.h"
#include "fucina/half.h"
#include "quant/blocks.h"

/* Rows per packed group (the layout's interleave; the kernels' NR). */
#define QP_ROWS 16
/* Bytes per group and block (q4_0 and q8_0: exactly 16 row-major blocks, so the
 * packed copy is the size of the matrix; q4_K: 2496 against 2304, its scales and
 * mins pre-decoded); per activation block (q8_0s, q8_Ks). */
#define QP_Q4_0_GROUP_BLOCK 288
#define QP_Q8_0_GROUP_BLOCK 544
#define QP_Q4_K_GROUP_BLOCK 2496
#define QP_Q4_K_ACT_BLOCK 276
#define QP_ACT_BLOCK 40
/* Smallest M for the packed path. Measured (fucina-bench quant --shape, 1
 * thread, CPU time, q4_0 K 1024/3072): at M = 2 packed 55 GFLOP/s vs 23
 * row-major, at M = 1 (a DRAM stream; the packed copy, with f32 scales then,
 * 11% larger) 19 vs 20: decode keeps the row-major path. docs/bench_quant_draft.md, "packed". */
#define QP_MIN_M 2
/* About this many bytes of packed W per task (stays in L2 while the M tiles
 * of A pass over it), and activation rows per task at large M. */
#define QP_W_TASK_BYTES ((size_t)128 * 1024)
#define QP_M_TASK 64
#define QP_SERIAL_MACS ((int64_t)1 << 18)

typedef void (*qp_fn)(size_t nb, const void *w, const void *a, size_t a_stride, float *c, size_t ldc);

struct fc_qweights {
    const void *w; /* the row-major matrix (not owned) */
    uint32_t wtype;
    int64_t n, k;
    size_t w_row_bytes;
    unsigned char *packed; /* NULL: row-major only */
    size_t group_bytes;    /* packed bytes per QP_ROWS rows */
    int64_t ngroups;
};

int64_t fc_qweights_min_m(void) { return QP_MIN_M; }

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static int fail(char *err, size_t len, const char *msg)
{
    if (err && len) snprintf(err, len, "%s", msg);
    return -1;
}

/* The packed kernels of a format on this CPU: the main tile (slot
 * <fmt>_qgemm_packed, MR x 16) and the small one for the last <= 4 rows
 * (<fmt>_qgemm_packed4, 4 x 16). */
typedef struct qp_kernels {
    qp_fn fn, fn4;
    size_t mr, mr4;
} qp_kernels;

static int slot_tile(const char *name, size_t *mr)
{
    size_t s = fck_dispatch_slot_index(name);
    if (s >= FCK_SLOT_COUNT || fck_dispatch_chosen_isa(s) == FCK_ISA_SCALAR) return -1;
    const char *tile = fck_dispatch_chosen_tile(s);
    size_t a = 0;
    while (*tile >= '0' && *tile <= '9') a = a * 10 + (size_t)(*tile++ - '0');
    if (a == 0 || strcmp(tile, "x16") != 0) return -1;
    *mr = a;
    return 0;
}

/* 0 with *k filled, or -1 when the format has no packed layout or dispatch
 * chose the scalar arm (slower than the row-major SIMD tiles): then nothing
 * is packed. Only q4_0, q8_0 and q4_K have a packed layout so far. */
static int packed_kernels(uint32_t wtype, qp_kernels *k)
{
    const fck_table *kt = fck_kernels();
    const char *name;
    memset(k, 0, sizeof *k);
    if (wtype == FCQ_Q4_0) {
        name = "q4_0_qgemm_packed";
        k->fn = kt->q4_0_qgemm_packed;
        k->fn4 = kt->q4_0_qgemm_packed4;
    } else if (wtype == FCQ_Q8_0) {
        name = "q8_0_qgemm_packed";
        k->fn = kt->q8_0_qgemm_packed;
        k->fn4 = kt->q8_0_qgemm_packed4;
    } else if (wtype == FCQ_Q4_K) {
        name = "q4_K_qgemm_packed";
        k->fn = kt->q4_K_qgemm_packed;
        k->fn4 = kt->q4_K_qgemm_packed4;
    } else {
        return -1;
    }
    char name4[40];
    snprintf(name4, sizeof name4, "%s4", name);
    if (!k->fn || slot_tile(name, &k->mr) != 0) return -1;
    if (!k->fn4 || slot_tile(name4, &k->mr4) != 0 || k->mr4 > k->mr) k->fn4 = NULL, k->mr4 = 0;
    return 0;
}

/* Block b (of nb) of weight row r (0..15 in its group) into its group g. */
typedef void (*qp_pack_block_fn)(const unsigned char *src, unsigned char *g, size_t b, size_t nb, int r);

/* The walk every format shares: group g's block b holds block b of rows
 * 16g .. 16g+15, each packed by `block` at its row's place. A last, partial
 * group repeats row n-1: the kernel always reads 16 rows, and the surplus
 * columns are never stored. */
static void pack_groups(const fc_qweights *q, size_t block_elems, size_t src_block, qp_pack_block_fn block)
{
    size_t nb = (size_t)q->k / block_elems;
    for (int64_t g = 0; g < q->ngroups; g++) {
        unsigned char *gp = q->packed + (size_t)g * q->group_bytes;
        for (int r = 0; r < QP_ROWS; r++) {
            int64_t row = g * QP_ROWS + r < q->n ? g * QP_ROWS + r : q->n - 1;
            const unsigned char *src = (const unsigned char *)q->w + (size_t)row * q->w_row_bytes;
            for (size_t b = 0; b < nb; b++) block(src + b * src_block, gp, b, nb, r);
        }
    }
}

/* The 32 nibbles u[e] of weight row r as the kernels read them: in 4 64-byte rows of
 * 4-byte quads (one per weight row), quad byte t of row p holding elements
 * 8p+t (low) and 8p+4+t (high). */
static void put_nibbles(unsigned char *dst, int r, const unsigned char u[32])
{
    for (int p = 0; p < 4; p++)
        for (int t = 0; t < 4; t++) dst[64 * p + 4 * r + t] = (unsigned char)(u[8 * p + t] | u[8 * p + 4 + t] << 4);
}

/* q4_0 -> packed groups (layout in registry/quant_packed.yaml): every
 * block's nibbles (256 bytes a block: the kernels' loads stay 64-byte
 * aligned), then every block's f16 scales (32 bytes). */
static void pack_q4_0_block(const unsigned char *src, unsigned char *g, size_t b, size_t nb, int r)
{
    fcq_block_q4_0 x;
    memcpy(&x, src, sizeof x);
    memcpy(g + nb * 256 + b * 32 + 2 * r, &x.d, 2);
    /* element e's nibble: qs[e] low (e < 16), qs[e-16] high */
    unsigned char u[32];
    for (int l = 0; l < 16; l++) {
        u[l] = x.qs[l] & 0xF;
        u[l + 16] = x.qs[l] >> 4;
    }
    put_nibbles(g + b * 256, r, u);
}

/* q8_0 -> packed groups: every block's quants + 128 (vpdpbusd's unsigned
 * operand; the activations' -128 sum undoes the offset) in 4-byte quads of
 * the 16 rows, 512 bytes a block, then every block's f16 scales. */
static void pack_q8_0_block(const unsigned char *src, unsigned char *g, size_t b, size_t nb, int r)
{
    fcq_block_q8_0 x;
    memcpy(&x, src, sizeof x);
    memcpy(g + nb * 512 + b * 32 + 2 * r, &x.d, 2);
    for (int k = 0; k < 8; k++)
        for (int t = 0; t < 4; t++) g[b * 512 + 64 * k + 4 * r + t] = (unsigned char)(x.qs[4 * k + t] + 128);
}

/* The 6-bit scale and min of sub-block s of a q4_K block (12 packed bytes). */
static void scale_min_k4(int s, const uint8_t *q, int *sc, int *m)
{
    if (s < 4) {
        *sc = q[s] & 63;
        *m = q[s + 4] & 63;
    } else {
        *sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
        *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
    }
}

/* q4_K -> packed groups: f16 d and dmin, the 6-bit scales as bytes and the
 * mins as int16 pairs (pre-decoded: no bit games in the kernel), each
 * sub-block's nibbles laid out like a q4_0 block. */
static void pack_q4_K_block(const unsigned char *src, unsigned char *g, size_t b, size_t nb, int r)
{
    (void)nb;
    unsigned char *dst = g + b * QP_Q4_K_GROUP_BLOCK;
    fcq_block_q4_K x;
    memcpy(&x, src, sizeof x);
    memcpy(dst + 2 * r, &x.d, 2);
    memcpy(dst + 32 + 2 * r, &x.dmin, 2);
    for (int s = 0; s < 8; s++) {
        int sc, m;
        scale_min_k4(s, x.scales, &sc, &m);
        dst[64 + 16 * s + r] = (unsigned char)sc;
        int16_t m16 = (int16_t)m;
        memcpy(dst + 192 + 64 * (s / 2) + 4 * r + 2 * (s % 2), &m16, 2);
        /* sub-block s: low (s even) or high (s odd) nibbles of qs[32 (s/2) ..] */
        unsigned char u[32];
        for (int l = 0; l < 32; l++) u[l] = (x.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xF;
        put_nibbles(dst + 448 + 256 * s, r, u);
    }
}

int fc_qweights_prepare(fc_qweights **out, const void *w, uint32_t wtype, int64_t n, int64_t k, size_t w_row_bytes,
                        char *err, size_t errlen)
{
    if (!out) return fail(err, errlen, "fc_qweights_prepare: out is NULL");
    *out = NULL;
    /* The same checks as a product with M = 1 (C and A only need to exist). */
    float dummy = 0;
    fc_qmatmul_args g = {.m = 1, .n = n, .k = k, .a = &dummy, .lda = k, .w = w, .wtype = wtype,
                         .w_row_bytes = w_row_bytes, .c = &dummy, .ldc = n};
    char why[160];
    if (fc_qmatmul_check(&g, why, sizeof why) != 0) {
        if (err && errlen) snprintf(err, errlen, "fc_qweights_prepare: %s", why);
        return -1;
    }
    fc_qweights *q = calloc(1, sizeof *q);
    if (!q) return fail(err, errlen, "fc_qweights_prepare: out of memory");
    *q = (fc_qweights){.w = w, .wtype = wtype, .n = n, .k = k, .w_row_bytes = w_row_bytes};
    qp_kernels pk;
    if (n > 0 && k > 0 && packed_kernels(wtype, &pk) == 0) {
        q->ngroups = (n + QP_ROWS - 1) / QP_ROWS;
        q->group_bytes = wtype == FCQ_Q4_K ? (size_t)k / 256 * QP_Q4_K_GROUP_BLOCK
                                           : (size_t)k / 32 * (wtype == FCQ_Q4_0 ? QP_Q4_0_GROUP_BLOCK : QP_Q8_0_GROUP_BLOCK);
        q->packed = aligned_alloc(64, round_up((size_t)q->ngroups * q->group_bytes, 64));
        if (!q->packed) {
            free(q);
            return fail(err, errlen, "fc_qweights_prepare: out of memory for the packed copy");
        }
        if (wtype == FCQ_Q4_0) pack_groups(q, 32, sizeof(fcq_block_q4_0), pack_q4_0_block);
        else if (wtype == FCQ_Q8_0) pack_groups(q, 32, sizeof(fcq_block_q8_0), pack_q8_0_block);
        else pack_groups(q, 256, sizeof(fcq_block_q4_K), pack_q4_K_block);
    }
    *out = q;
    return 0;
}

void fc_qweights_free(fc_qweights *q)
{
    if (!q) return;
    free(q->packed);
    free(q);
}

size_t fc_qweights_packed_bytes(const fc_qweights *q)
{
    return q && q->packed ? (size_t)q->ngroups * q->group_bytes : 0;
}

static int use_packed(const fc_qweights *q, int64_t m, qp_kernels *k)
{
    if (!q->packed || m < QP_MIN_M) return 0;
    fc_qm_plan p;
    if (fc_qm_plan_for(q->wtype, &p) != 0 || p.ntiles == 0 || !p.quant) return 0; /* forced decode */
    return packed_kernels(q->wtype, k) == 0;
}

const char *fc_qweights_path(const fc_qweights *q, int64_t m)
{
    static _Thread_local char buf[32];
    qp_kernels k;
    if (!q) return "bad";
    if (!use_packed(q, m, &k)) return fc_qmatmul_path(q->wtype);
    if (k.fn4) snprintf(buf, sizeof buf, "packed %zux%d/%zux%d", k.mr, QP_ROWS, k.mr4, QP_ROWS);
    else snprintf(buf, sizeof buf, "packed %zux%d", k.mr, QP_ROWS);
    return buf;
}

/* ---- the packed product ------------------------------------------------------------ */

typedef struct qp_job {
    const fc_qweights *q;
    qp_kernels k;
    fc_qquant_fn quant;
    size_t mr, nb, a_row;
    int64_t m;
    const float *a;
    int64_t lda;
    float *c;
    int64_t ldc;
    unsigned char *qa; /* round_up(m, mr) rows of activation blocks, zero rows past m */
    size_t g_task, m_task;
    int64_t n_mtasks;
    float *tiles;      /* per worker: an mr x QP_ROWS scratch tile */
} qp_job;

/* Activation row i: q8_0 by the generated quantizer into the tail of its own
 * 40-byte-block slot, then widened forward in place (block b's 40 bytes end
 * at or before block b+1's 34 start, and each block is read out first) to
 * q8_0s: d as f32, the weights' offset times the quant sum (-8 for q4_0's
 * nibbles, -128 for q8_0's quants + 128), qs. */
static void qp_quant(void *arg, int64_t i, int worker)
{
    (void)worker;
    const qp_job *j = arg;
    unsigned char *row = j->qa + (size_t)i * j->a_row;
    if (j->q->wtype == FCQ_Q4_K) {
        /* q8_K (292 bytes a block) at the row's start, narrowed forward in
         * place to q8_Ks (276: block b's end never passes block b+1's start). */
        j->quant(j->nb * 256, j->a + i * j->lda, row);
        for (size_t b = 0; b < j->nb; b++) {
            fcq_block_q8_K y;
            memcpy(&y, row + b * sizeof y, sizeof y);
            unsigned char *dst = row + b * QP_Q4_K_ACT_BLOCK;
            memcpy(dst, &y.d, 4);
            for (int s = 0; s < 8; s++) {
                int16_t v = (int16_t)(y.bsums[2 * s] + y.bsums[2 * s + 1]); /* |v| <= 32 * 128 */
                memcpy(dst + 4 + 2 * s, &v, 2);
            }
            memcpy(dst + 20, y.qs, 256);
        }
        return;
    }
    /* the weights' offset: sum (u - o) a = sum u a - o sum a */
    const int32_t offset = j->q->wtype == FCQ_Q4_0 ? -8 : -128;
    unsigned char *src = row + j->nb * (QP_ACT_BLOCK - sizeof(fcq_block_q8_0));
    j->quant(j->nb * 32, j->a + i * j->lda, src);
    for (size_t b = 0; b < j->nb; b++) {
        fcq_block_q8_0 y;
        memcpy(&y, src + b * sizeof y, sizeof y);
        float d = fc_f16_to_f32((fc_f16){y.d});
        int32_t s = 0;
        for (int e = 0; e < 32; e++) s += y.qs[e];
        s *= offset;
        unsigned char *dst = row + b * QP_ACT_BLOCK;
        memcpy(dst, &d, 4);
        memcpy(dst + 4, &s, 4);
        memcpy(dst + 8, y.qs, 32);
    }
}

/* Groups [g0, g1) x activation rows [i0, i1): groups outer (one group's
 * panel stays in L1 while the M tiles pass), MR-row tiles inner. Edge tiles
 * (the last group past N, the last M tile past m) go through scratch; the
 * last <= 4 rows of a task take the 4-row tile (task edges depend on M only,
 * and both tiles give the same bits anyway). Every C
 * element is one kernel call over all of K: no dependence on the tasking. */
static void qp_task(void *arg, int64_t task, int worker)
{
    const qp_job *j = arg;
    const fc_qweights *q = j->q;
    int64_t gi = task / j->n_mtasks, mi = task % j->n_mtasks;
    size_t g0 = (size_t)gi * j->g_task, g1 = g0 + j->g_task < (size_t)q->ngroups ? g0 + j->g_task : (size_t)q->ngroups;
    size_t i0 = (size_t)mi * j->m_task, i1 = i0 + j->m_task < (size_t)j->m ? i0 + j->m_task : (size_t)j->m;
    float *tile = j->tiles + (size_t)worker * j->mr * QP_ROWS;
    for (size_t g = g0; g < g1; g++) {
        const unsigned char *wp = q->packed + g * q->group_bytes;
        size_t col = g * QP_ROWS, cols = (size_t)q->n - col < QP_ROWS ? (size_t)q->n - col : QP_ROWS;
        for (size_t i = i0; i < i1;) {
            /* The small tile for the last <= mr4 rows (zero rows pad it). */
            const int small = j->k.fn4 && i1 - i <= j->k.mr4;
            const qp_fn fn = small ? j->k.fn4 : j->k.fn;
            const size_t mr = small ? j->k.mr4 : j->mr;
            size_t rows = i1 - i < mr ? i1 - i : mr;
            float *cp = j->c + i * (size_t)j->ldc + col;
            const unsigned char *ap = j->qa + i * j->a_row;
            if (rows == mr && cols == QP_ROWS)
                fn(j->nb, wp, ap, j->a_row, cp, (size_t)j->ldc);
            else {
                fn(j->nb, wp, ap, j->a_row, tile, QP_ROWS);
                for (size_t r = 0; r < rows; r++)
                    memcpy(cp + r * (size_t)j->ldc, tile + r * QP_ROWS, cols * sizeof(float));
            }
            i += rows;
        }
    }
}

int fc_qmatmul_prepared(fc_workers *w, const fc_qweights *q, int64_t m, const float *a, int64_t lda, float *c,
                        int64_t ldc)
{
    if (!q) return -1;
    fc_qmatmul_args g = {.m = m, .n = q->n, .k = q->k, .a = a, .lda = lda, .w = q->w, .wtype = q->wtype,
                         .w_row_bytes = q->w_row_bytes, .c = c, .ldc = ldc};
    qp_kernels pk;
    if (q->n == 0 || q->k == 0 || !use_packed(q, m, &pk)) return fc_qmatmul(w, &g);
    const size_t mr = pk.mr;
    if (fc_qmatmul_check(&g, NULL, 0) != 0) return -1;
    const int kq = q->wtype == FCQ_Q4_K;
    qp_job j = {.q = q, .k = pk, .quant = kq ? fck_kernels()->q8_K_quantize : fck_kernels()->q8_0_quantize, .mr = mr,
                .nb = (size_t)q->k / (kq ? 256 : 32),
                .m = m, .a = a, .lda = lda, .c = c, .ldc = ldc};
    if (!j.quant) return fc_qmatmul(w, &g);
    j.a_row = j.nb * (kq ? sizeof(fcq_block_q8_K) : QP_ACT_BLOCK); /* q8_K's size: quantized in place */
    int nw = w ? fc_workers_count(w) : 1;
    if (m * q->n * q->k < QP_SERIAL_MACS) w = NULL, nw = 1;
    size_t mpad = round_up((size_t)m, mr);
    size_t qa_bytes = round_up(mpad * j.a_row, 64);
    size_t tile_bytes = round_up(mr * QP_ROWS * sizeof(float), 64);
    fc_gemm_scratch *scr = fc_gemm_scratch_acquire();
    unsigned char *mem = scr ? fc_gemm_scratch_bytes(scr, qa_bytes + tile_bytes * (size_t)nw) : NULL;
    if (!mem) {
        fc_gemm_scratch_release(scr);
        return -1;
    }
    j.qa = mem;
    j.tiles = (float *)(mem + qa_bytes);
    memset(j.qa + (size_t)m * j.a_row, 0, (mpad - (size_t)m) * j.a_row);
    if (w && m >= 16) fc_workers_run(w, m, qp_quant, &j);
    else
        for (int64_t i = 0; i < m; i++) qp_quant(&j, i, 0);

    /* Tasks: groups of about QP_W_TASK_BYTES, A rows in QP_M_TASK blocks at
     * large M (whole MR tiles), at least 4 tasks per thread when threaded. */
    size_t gt = QP_W_TASK_BYTES / q->group_bytes;
    if (gt < 1) gt = 1;
    j.m_task = (size_t)m > 2 * QP_M_TASK ? round_up(QP_M_TASK, mr) : mpad;
    j.n_mtasks = (int64_t)((mpad + j.m_task - 1) / j.m_task);
    size_t want = (size_t)nw * 4 / (size_t)j.n_mtasks;
    if (nw > 1 && want > 1 && ((size_t)q->ngroups + gt - 1) / gt < want) {
        size_t t = ((size_t)q->ngroups + want - 1) / want;
        gt = t < gt ? (t ? t : 1) : gt;
    }
    j.g_task = gt;
    int64_t tasks = (int64_t)(((size_t)q->ngroups + gt - 1) / gt) * j.n_mtasks;
    if (w && tasks > 1) fc_workers_run(w, tasks, qp_task, &j);
    else
        for (int64_t t = 0; t < tasks; t++) qp_task(&j, t, 0);
    fc_gemm_scratch_release(scr);
    return 0;
}
