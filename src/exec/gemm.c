/* SPDX-License-Identifier: MIT */
/* fc_gemm_f32: argument checks, the choice of path (own blocked, own
 * skinny, OpenBLAS), scratch, batching. The paths live in gemm_blocked.c,
 * gemm_gemv.c and gemm_openblas.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/gemm_internal.h"

/* Below this many flops (2*M*N*K) a product runs on the calling thread
 * alone: waking the pool costs more than it saves. It changes no bits. */
#define FC_GEMM_SERIAL_FLOPS (1 << 20)
/* Blocks (see gemm_blocked.c), with FC_GEMM_KC = 512 (gemm_internal.h).
 * MC: rows of A packed per task (144 x 512 floats = 288 KiB, in L2 while the
 * B micro-panels stream past it); NC: columns of the shared packed B block.
 * Chosen on the 6x64 avx512 arm, Ice Lake, 1 thread, min CPU time per call
 * against OpenBLAS in the same process (the machine was shared, so only the
 * ratio was stable): KC 128..512 x MC 72..288 x NC 256..3072 all landed
 * within +-10% of each other on 1024^3 and 512x3072x1024 (weights [N, K]);
 * KC 512 / MC 144 / NC 512 was never worse than 0.96x OpenBLAS there, while
 * KC 256 / NC 1024 dropped to 0.79-0.93x on the weights shape. */
#define FC_GEMM_MC 144
#define FC_GEMM_NC 512

/* ---- geometry ------------------------------------------------------------------- */

static size_t slot_gemm, slot_pack_a, slot_pack_b, slot_pack_bt;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;

static void find_slots(void)
{
    slot_gemm = fck_dispatch_slot_index("f32_gemm");
    slot_pack_a = fck_dispatch_slot_index("f32_gemm_pack_a");
    slot_pack_b = fck_dispatch_slot_index("f32_gemm_pack_b");
    slot_pack_bt = fck_dispatch_slot_index("f32_gemm_pack_bt");
}

int fc_gemm_geom_now(fc_gemm_geom *geo)
{
    pthread_once(&slots_once, find_slots);
    if (slot_gemm >= FCK_SLOT_COUNT || slot_pack_a >= FCK_SLOT_COUNT || slot_pack_b >= FCK_SLOT_COUNT ||
        slot_pack_bt >= FCK_SLOT_COUNT)
        return -1;
    const char *tile = fck_dispatch_chosen_tile(slot_gemm);
    if (strcmp(tile, fck_dispatch_chosen_tile(slot_pack_a)) != 0 ||
        strcmp(tile, fck_dispatch_chosen_tile(slot_pack_b)) != 0 ||
        strcmp(tile, fck_dispatch_chosen_tile(slot_pack_bt)) != 0 || fck_tile_parse(tile, &geo->mr, &geo->nr))
        return -1;
    const fck_table *kt = fck_kernels();
    geo->kernel = kt->f32_gemm;
    geo->pack_a = kt->f32_gemm_pack_a;
    geo->pack_b = kt->f32_gemm_pack_b;
    geo->pack_bt = kt->f32_gemm_pack_bt;
    geo->kc = FC_GEMM_KC;
    geo->mc = FC_GEMM_MC / geo->mr * geo->mr;
    if (geo->mc == 0) geo->mc = geo->mr;
    geo->nc = FC_GEMM_NC / geo->nr * geo->nr;
    if (geo->nc == 0) geo->nc = geo->nr;
    return 0;
}

/* ---- B access ----------------------------------------------------------------------- */

static size_t b_esize(fc_gemm_btype t) { return t == FC_GEMM_B_F32 ? sizeof(float) : sizeof(fc_f16); }

const void *fc_gemm_b_ptr(const fc_gemm_args *g, int64_t k, int64_t j)
{
    return (const char *)g->b + (k * g->rsb + j * g->csb) * (int64_t)b_esize(g->btype);
}

float fc_gemm_b_at(const fc_gemm_args *g, int64_t k, int64_t j)
{
    int64_t off = k * g->rsb + j * g->csb;
    switch (g->btype) {
    case FC_GEMM_B_F32: return ((const float *)g->b)[off];
    case FC_GEMM_B_F16: return fc_f16_to_f32(((const fc_f16 *)g->b)[off]);
    case FC_GEMM_B_BF16: return fc_bf16_to_f32(((const fc_bf16 *)g->b)[off]);
    }
    return 0.0f;
}

void fc_gemm_widen(fc_gemm_btype bt, const void *p, size_t n, float *out)
{
    switch (bt) {
    case FC_GEMM_B_F32: memcpy(out, p, n * sizeof(float)); return;
    case FC_GEMM_B_F16: fck_kernels()->f16_to_f32(n, p, out); return;
    case FC_GEMM_B_BF16: fck_kernels()->bf16_to_f32(n, p, out); return;
    }
}

/* ---- provider choice ---------------------------------------------------------------- */

typedef enum provider { PROV_AUTO, PROV_OWN, PROV_OPENBLAS } provider;
static provider forced = PROV_AUTO;

typedef enum path { PATH_NONE, PATH_BLOCKED, PATH_GEMV, PATH_OPENBLAS } path;

static int args_ok(const fc_gemm_args *g)
{
    if (!g || g->m < 0 || g->n < 0 || g->k < 0) return 0;
    if (g->m == 0 || g->n == 0) return 1;
    if (!g->c || g->ldc < g->n || (g->k > 0 && (!g->a || !g->b))) return 0;
    switch (g->btype) {
    case FC_GEMM_B_F32:
    case FC_GEMM_B_F16:
    case FC_GEMM_B_BF16: return 1;
    }
    return 0;
}

static path choose(const fc_gemm_args *g)
{
    if (g->m == 0 || g->n == 0 || g->k == 0) return PATH_NONE;
    if (forced != PROV_OWN && fc_gemm_openblas_fits(g) &&
        (forced == PROV_OPENBLAS || fc_gemm_openblas_preferred(g)))
        return PATH_OPENBLAS;
    if (fc_gemm_gemv_fits(g)) return PATH_GEMV;
    return PATH_BLOCKED;
}

const char *fc_gemm_provider_for(const fc_gemm_args *g)
{
    switch (choose(g)) {
    case PATH_NONE: return "none";
    case PATH_BLOCKED: return "own-blocked";
    case PATH_GEMV: return "own-gemv";
    case PATH_OPENBLAS: return "openblas";
    }
    return "none";
}

int fc_gemm_set_provider(const char *name)
{
    if (!name || !strcmp(name, "auto")) forced = PROV_AUTO;
    else if (!strcmp(name, "own")) forced = PROV_OWN;
    else if (!strcmp(name, "openblas") && fc_gemm_openblas_available()) forced = PROV_OPENBLAS;
    else return -1;
    return 0;
}

/* ---- the entry points ------------------------------------------------------------------ */

static fc_workers *pool_for(fc_workers *w, const fc_gemm_args *g)
{
    double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
    return flops < FC_GEMM_SERIAL_FLOPS ? NULL : w;
}

/* K == 0: C = 0 (or unchanged when accumulating). */
static void zero_c(const fc_gemm_args *g)
{
    if (g->accumulate) return;
    for (int64_t i = 0; i < g->m; i++) memset(g->c + i * g->ldc, 0, (size_t)g->n * sizeof(float));
}

/* Reserve scratch for path p with `nworkers` workers; 0 or -1. */
static int reserve(path p, const fc_gemm_args *g, const fc_gemm_geom *geo, fc_gemm_scratch *s, int nworkers)
{
    switch (p) {
    case PATH_BLOCKED: return fc_gemm_blocked_reserve(g, geo, s, nworkers);
    case PATH_GEMV: return fc_gemm_gemv_reserve(g, s, nworkers);
    case PATH_NONE:
    case PATH_OPENBLAS: return 0;
    }
    return -1;
}

static void run(path p, fc_workers *w, const fc_gemm_args *g, const fc_gemm_geom *geo, fc_gemm_scratch *s)
{
    switch (p) {
    case PATH_NONE: zero_c(g); return;
    case PATH_BLOCKED: fc_gemm_blocked_run(w, g, geo, s); return;
    case PATH_GEMV: fc_gemm_gemv_run(w, g, s); return;
    case PATH_OPENBLAS: fc_gemm_openblas(w, g); return;
    }
}

int fc_gemm_f32(fc_workers *w, const fc_gemm_args *g)
{
    if (!args_ok(g)) return -1;
    if (g->m == 0 || g->n == 0) return 0;
    path p = choose(g);
    fc_gemm_geom geo;
    memset(&geo, 0, sizeof geo);
    if (p == PATH_BLOCKED && fc_gemm_geom_now(&geo)) return -1;
    if (p == PATH_NONE || p == PATH_OPENBLAS) {
        run(p, w, g, &geo, NULL);
        return 0;
    }
    fc_workers *pool = pool_for(w, g);
    fc_gemm_scratch *s = fc_gemm_scratch_acquire();
    if (!s || reserve(p, g, &geo, s, fc_workers_count(pool))) {
        fc_gemm_scratch_release(s);
        return -1;
    }
    run(p, pool, g, &geo, s);
    fc_gemm_scratch_release(s);
    return 0;
}

/* Batched: small products run one per thread (each on its own scratch set),
 * large ones one after another with the whole pool. Either way each product
 * is computed exactly as fc_gemm_f32 would. */
typedef struct batch_ctx {
    const fc_gemm_args *g;
    path p;
    const fc_gemm_geom *geo;
    fc_gemm_scratch **sets;
    int64_t bsa, bsb, bsc;
} batch_ctx;

static fc_gemm_args nth(const fc_gemm_args *g, int64_t i, int64_t bsa, int64_t bsb, int64_t bsc)
{
    fc_gemm_args x = *g;
    x.a = g->a ? g->a + i * bsa : NULL;
    x.b = g->b ? (const char *)g->b + i * bsb * (int64_t)b_esize(g->btype) : NULL;
    x.c = g->c + i * bsc;
    return x;
}

static void batch_one(void *arg, int64_t i, int worker)
{
    const batch_ctx *bc = arg;
    fc_gemm_args x = nth(bc->g, i, bc->bsa, bc->bsb, bc->bsc);
    run(bc->p, NULL, &x, bc->geo, bc->sets[worker]);
}

int fc_gemm_f32_batched(fc_workers *w, const fc_gemm_args *g, int64_t batch, int64_t bsa, int64_t bsb, int64_t bsc)
{
    if (batch < 0 || !args_ok(g)) return -1;
    if (batch == 0 || g->m == 0 || g->n == 0) return 0;
    path p = choose(g);
    fc_gemm_geom geo;
    memset(&geo, 0, sizeof geo);
    if (p == PATH_BLOCKED && fc_gemm_geom_now(&geo)) return -1;
    int threads = fc_workers_count(w);
    fc_workers *pool = pool_for(w, g);
    if (threads == 1 || batch == 1 || pool != NULL || p == PATH_NONE || p == PATH_OPENBLAS) {
        /* One product after another (each threaded inside when large). */
        fc_gemm_scratch *s = NULL;
        if (p == PATH_BLOCKED || p == PATH_GEMV) {
            s = fc_gemm_scratch_acquire();
            if (!s || reserve(p, g, &geo, s, fc_workers_count(pool))) {
                fc_gemm_scratch_release(s);
                return -1;
            }
        }
        for (int64_t i = 0; i < batch; i++) {
            fc_gemm_args x = nth(g, i, bsa, bsb, bsc);
            run(p, pool, &x, &geo, s);
        }
        fc_gemm_scratch_release(s);
        return 0;
    }
    /* Small products: one per thread, one scratch set per worker. */
    fc_gemm_scratch *sets[64];
    int n = threads < 64 ? threads : 64;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        sets[i] = fc_gemm_scratch_acquire();
        if (!sets[i] || reserve(p, g, &geo, sets[i], 1)) ok = 0;
    }
    if (ok) {
        batch_ctx bc = {g, p, &geo, sets, bsa, bsb, bsc};
        fc_workers_run(threads <= 64 ? w : NULL, batch, batch_one, &bc);
    }
    for (int i = 0; i < n; i++) fc_gemm_scratch_release(sets[i]);
    return ok ? 0 : -1;
}
