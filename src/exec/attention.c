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
 * m'' = max(m, s), O = O_acc e^(m-m'') / (l e^(m-m'') + e^(s-m''))).
 *
 * Scratch per worker (floats, 64-byte aligned regions): gathered and packed
 * Q (rows_pad*dk each), packed K block (bc*dk), packed V block (bc*dv_pad),
 * one panel of S (MR*bc) and of packed P (MR*bc), O_acc (rows_pad*dv_pad),
 * m and l (rows_pad), and for f16 K/V the widened K and V blocks (bc*dk,
 * bc*dv). */
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
 * thread count). Packing a K/V block is amortized over all rows of a chunk;
 * packed Q and O_acc of 64 panels (6x64 tile, d = 128) take ~400 KB, in L2.
 * Keys per block: FC_ATTN_KV_BLOCK rounded up to NR. */
#define FC_ATTN_ROW_PANELS_MAX 64
#define FC_ATTN_ROW_PANELS_MIN 8
#define FC_ATTN_MIN_CHUNKS 16
#define FC_ATTN_KV_BLOCK 128

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
    char *end;
    long m = strtol(tile, &end, 10);
    if (*end != 'x') return 0;
    long n = strtol(end + 1, &end, 10);
    if (*end != '\0' || m <= 0 || n <= 0) return 0;
    *mr = m;
    *nr = n;
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
    *mr = m0;
    *nr = n0;
    return 1;
}

/* ---- the plan ----------------------------------------------------------------- */

typedef struct attn_plan {
    int64_t mr, nr, G, dk, dv, dv_pad;
    int64_t bq, rows_pad, bc, n_qb, n_chunks;
    int stage_kv;
    /* offsets (floats) of each scratch region in one worker's slice */
    size_t off_qp, off_qt, off_kp, off_vp, off_s, off_pp, off_o, off_m, off_l, off_kf, off_vf;
    size_t per_worker; /* bytes, a multiple of 64 */
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

static void make_plan(const fc_attn_args *a, int64_t mr, int64_t nr, attn_plan *p)
{
    p->mr = mr;
    p->nr = nr;
    p->G = a->n_head / a->n_kv_head;
    p->dk = a->head_dim;
    p->dv = a->head_dim_v ? a->head_dim_v : a->head_dim;
    p->dv_pad = round_up(p->dv, nr);

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
    p->bc = round_up(FC_ATTN_KV_BLOCK, nr);
    p->n_qb = (a->n_q + bq - 1) / bq;
    p->n_chunks = p->n_qb * a->n_kv_head;

    size_t off = 0;
#define FC_REGION(field, nfloats)                                  \
    do {                                                           \
        p->field = off;                                            \
        off += (size_t)round_up((int64_t)(nfloats), 16);           \
    } while (0)
    FC_REGION(off_qp, p->rows_pad * p->dk);
    FC_REGION(off_qt, p->rows_pad * p->dk);
    FC_REGION(off_kp, p->bc * p->dk);
    FC_REGION(off_vp, p->bc * p->dv_pad);
    FC_REGION(off_s, mr * p->bc);
    FC_REGION(off_pp, mr * p->bc);
    FC_REGION(off_o, p->rows_pad * p->dv_pad);
    FC_REGION(off_m, p->rows_pad);
    FC_REGION(off_l, p->rows_pad);
    /* Prefill-sized chunks first copy f32 K/V rows of a block into contiguous
     * scratch: packing straight from rows a power-of-two stride apart (e.g.
     * 8 heads x 128 floats = 4 KB) thrashes L1 sets in the transposing pack
     * (measured ~10% of a 512-token prefill). Decode-sized chunks pack
     * directly: there the extra copy costs more than it saves. */
    p->stage_kv = a->kv_type == FC_ATTN_KV_F32 && p->rows_pad >= 8 * mr;
    if (a->kv_type == FC_ATTN_KV_F16 || p->stage_kv) {
        FC_REGION(off_kf, p->bc * p->dk);
        FC_REGION(off_vf, p->bc * p->dv);
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
    return 0;
}

/* ---- one chunk ------------------------------------------------------------------ */

typedef struct attn_ctx {
    const fc_attn_args *a;
    const fck_table *kt;
    attn_plan p;
    unsigned char *mem;
    float lscale; /* scale, or scale / softcap */
} attn_ctx;

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

static void zero_floats(float *x, int64_t n)
{
    if (n > 0) memset(x, 0, (size_t)n * sizeof(float));
}

static void attn_chunk(void *arg, int64_t c, int worker)
{
    const attn_ctx *x = arg;
    const fc_attn_args *a = x->a;
    const attn_plan *p = &x->p;
    const fck_table *K = x->kt;
    const int64_t mr = p->mr, nr = p->nr, G = p->G, dk = p->dk, dv = p->dv, dvp = p->dv_pad, bc = p->bc;

    float *ws = (float *)(x->mem + (size_t)worker * p->per_worker);
    float *qp = ws + p->off_qp, *qt = ws + p->off_qt, *kp = ws + p->off_kp, *vp = ws + p->off_vp, *S = ws + p->off_s;
    float *pp = ws + p->off_pp, *oacc = ws + p->off_o, *m = ws + p->off_m, *l = ws + p->off_l;
    float *kf = ws + p->off_kf, *vf = ws + p->off_vf;

    /* heaviest query blocks (the last ones, under causality) first */
    const int64_t g = c % a->n_kv_head;
    const int64_t qb = p->n_qb - 1 - c / a->n_kv_head;
    const int64_t t0 = qb * p->bq;
    const int64_t nt = (a->n_q - t0 < p->bq) ? a->n_q - t0 : p->bq;
    const int64_t R = nt * G;
    const int64_t npan = (R + mr - 1) / mr;

    int64_t span_lo, span_hi;
    tokens_span(a, t0, t0 + nt - 1, &span_lo, &span_hi);

    if (span_lo <= span_hi) {
        /* gather the chunk's Q rows (token-major), then pack them into A panels */
        for (int64_t r = 0; r < R; r++)
            memcpy(qt + r * dk, a->q + (t0 + r / G) * a->q_ts + (g * G + r % G) * a->q_hs,
                   (size_t)dk * sizeof(float));
        K->f32_gemm_pack_a((size_t)R, (size_t)dk, qt, (size_t)dk, qp);
        for (int64_t r = 0; r < npan * mr; r++) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
        }
        zero_floats(oacc, npan * mr * dvp);
    }

    const size_t kel = a->kv_type == FC_ATTN_KV_F16 ? sizeof(fc_f16) : sizeof(float);
    /* (k and v may be NULL when n_kv == 0; then the span is empty) */
    const unsigned char *kbase = a->k ? (const unsigned char *)a->k + (size_t)(g * a->k_hs) * kel : NULL;
    const unsigned char *vbase = a->v ? (const unsigned char *)a->v + (size_t)(g * a->v_hs) * kel : NULL;

    /* key blocks at fixed multiples of bc, clipped to the chunk's span: a
     * row's partial sums then do not depend on which rows share its chunk */
    for (int64_t kb = span_lo > 0 ? span_lo / bc : 0; kb * bc <= span_hi; kb++) {
        const int64_t sa = kb * bc > span_lo ? kb * bc : span_lo;                 /* first key */
        const int64_t sb = kb * bc + bc - 1 < span_hi ? kb * bc + bc - 1 : span_hi; /* last key */
        const int64_t nb = sb - sa + 1;
        int k_packed = 0, v_packed = 0;

        for (int64_t i = 0; i < npan; i++) {
            const int64_t r0 = i * mr;
            const int64_t r1 = (r0 + mr < R ? r0 + mr : R) - 1;
            int64_t pa, pb;
            tokens_span(a, t0 + r0 / G, t0 + r1 / G, &pa, &pb);
            if (pa < sa) pa = sa;
            if (pb > sb) pb = sb;
            if (pa > pb) continue;

            if (!k_packed) {
                if (a->kv_type == FC_ATTN_KV_F16) {
                    for (int64_t s = 0; s < nb; s++)
                        K->f16_to_f32((size_t)dk, (const fc_f16 *)kbase + (sa + s) * a->k_ts, kf + s * dk);
                    K->f32_gemm_pack_bt((size_t)dk, (size_t)nb, kf, (size_t)dk, kp);
                } else if (p->stage_kv) {
                    for (int64_t s = 0; s < nb; s++)
                        memcpy(kf + s * dk, (const float *)kbase + (sa + s) * a->k_ts, (size_t)dk * sizeof(float));
                    K->f32_gemm_pack_bt((size_t)dk, (size_t)nb, kf, (size_t)dk, kp);
                } else {
                    K->f32_gemm_pack_bt((size_t)dk, (size_t)nb, (const float *)kbase + sa * a->k_ts,
                                        (size_t)a->k_ts, kp);
                }
                k_packed = 1;
            }

            /* S tiles of this panel over the key tiles it can see */
            float *Sp = S; /* this panel's rows of S: MR x bc */
            for (int64_t j = (pa - sa) / nr; j <= (pb - sa) / nr; j++)
                K->f32_gemm((size_t)dk, qp + r0 * dk, kp + j * dk * nr, Sp + j * nr, (size_t)bc, 0);

            /* per row: logits, running max, P = exp(x - m), running sum */
            for (int64_t r = r0; r <= r1; r++) {
                const int64_t t = t0 + r / G, h = g * G + r % G;
                float *xr = S + (r - r0) * bc; /* xr[s - sa] is key s */
                int64_t ra, rb;
                token_range(a, t, &ra, &rb);
                if (ra < pa) ra = pa;
                if (rb > pb) rb = pb;
                if (ra > rb) {
                    zero_floats(xr + (pa - sa), pb - pa + 1);
                    continue;
                }
                float *u = xr + (ra - sa);
                const size_t n = (size_t)(rb - ra + 1);
                K->f32_scale(n, u, x->lscale, u);
                if (a->softcap > 0.0f) {
                    K->f32_tanh(n, u, u);
                    K->f32_scale(n, u, a->softcap, u);
                }
                if (a->mask) K->f32_add(n, u, a->mask + t * a->mask_rs + h * a->mask_hs + ra, u);
                const float mx = K->f32_reduce_max(n, u);
                const float mo = m[r];
                const float mn = (mx > mo || mx != mx) ? mx : mo; /* a NaN logit propagates */
                if (mn == -INFINITY) { /* nothing with weight yet */
                    zero_floats(xr + (pa - sa), pb - pa + 1);
                    continue;
                }
                K->f32_sub_vs(n, u, mn, u);
                K->f32_exp(n, u, u);
                const float sum = K->f32_sum(n, u);
                if (mo == -INFINITY) {
                    l[r] = sum;
                } else {
                    const float alpha = expf(mo - mn);
                    l[r] = l[r] * alpha + sum;
                    if (alpha != 1.0f) K->f32_scale((size_t)dv, oacc + r * dvp, alpha, oacc + r * dvp);
                }
                m[r] = mn;
                zero_floats(xr + (pa - sa), ra - pa);
                zero_floats(xr + (rb + 1 - sa), pb - rb);
            }

            /* O_acc[panel] += P[panel, pa..pb] · V[pa..pb] */
            if (!v_packed) {
                if (a->kv_type == FC_ATTN_KV_F16) {
                    for (int64_t s = 0; s < nb; s++)
                        K->f16_to_f32((size_t)dv, (const fc_f16 *)vbase + (sa + s) * a->v_ts, vf + s * dv);
                    K->f32_gemm_pack_b((size_t)nb, (size_t)dv, vf, (size_t)dv, vp);
                } else if (p->stage_kv) {
                    for (int64_t s = 0; s < nb; s++)
                        memcpy(vf + s * dv, (const float *)vbase + (sa + s) * a->v_ts, (size_t)dv * sizeof(float));
                    K->f32_gemm_pack_b((size_t)nb, (size_t)dv, vf, (size_t)dv, vp);
                } else {
                    K->f32_gemm_pack_b((size_t)nb, (size_t)dv, (const float *)vbase + sa * a->v_ts,
                                       (size_t)a->v_ts, vp);
                }
                v_packed = 1;
            }
            const int64_t kc = pb - pa + 1;
            K->f32_gemm_pack_a((size_t)(r1 - r0 + 1), (size_t)kc, Sp + (pa - sa), (size_t)bc, pp);
            for (int64_t j = 0; j < dvp / nr; j++)
                K->f32_gemm((size_t)kc, pp, vp + j * nb * nr + (pa - sa) * nr, oacc + r0 * dvp + j * nr,
                            (size_t)dvp, 1);
        }
    }

    /* normalize and store */
    for (int64_t r = 0; r < R; r++) {
        const int64_t t = t0 + r / G, h = g * G + r % G;
        float *dst = a->o + t * a->o_ts + h * a->o_hs;
        if (span_lo > span_hi || m[r] == -INFINITY || l[r] == 0.0f) { /* fully masked */
            zero_floats(dst, dv);
            continue;
        }
        float f;
        if (a->sinks) {
            const float sk = a->sinks[h];
            if (sk > m[r]) {
                const float e = expf(m[r] - sk);
                f = e / (l[r] * e + 1.0f);
            } else {
                f = 1.0f / (l[r] + expf(sk - m[r]));
            }
            K->f32_scale((size_t)dv, oacc + r * dvp, f, dst);
        } else {
            K->f32_div_vs((size_t)dv, oacc + r * dvp, l[r], dst);
        }
    }
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
    x.lscale = a->softcap > 0.0f ? a->scale / a->softcap : a->scale;

    const int n_workers = fc_workers_count(w);
    const size_t need = (size_t)n_workers * x.p.per_worker;
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

    fc_workers_run(w, x.p.n_chunks, attn_chunk, &x);
    free(tmp);
    return 0;
}
