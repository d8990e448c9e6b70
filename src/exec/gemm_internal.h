/* SPDX-License-Identifier: MIT */
/* What the gemm_*.c files share: the blocking geometry taken from the
 * dispatched micro-kernel, the scratch cache, and the per-path entry points.
 * Not installed; include only from src/exec/gemm*.c. */
#ifndef FC_EXEC_GEMM_INTERNAL_H
#define FC_EXEC_GEMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dispatch/dispatch.h"
#include "exec/gemm.h"

/* ---- geometry (gemm.c) ------------------------------------------------------ */

/* Blocking of the packed path. KC is fixed (it decides the K order, so the
 * bits of C: it must not depend on anything but the micro-kernel geometry). */
#define FC_GEMM_KC 512

typedef struct fc_gemm_geom {
    size_t mr, nr; /* register tile of the dispatched f32_gemm arm */
    size_t kc;     /* K block */
    size_t mc;     /* M block of one task (multiple of mr) */
    size_t nc;     /* N block of one packed B block (multiple of nr) */
    fck_f32_gemm_fn kernel;
    fck_f32_gemm_pack_a_fn pack_a;
    fck_f32_gemm_pack_b_fn pack_b;
    fck_f32_gemm_pack_bt_fn pack_bt;
} fc_gemm_geom;

/* The geometry of the arms dispatch resolves to now (re-read on every call:
 * tests re-resolve with an ISA cap). Returns 0, or -1 if the tiles of the
 * four slots disagree or do not parse (a registry error). */
int fc_gemm_geom_now(fc_gemm_geom *geo);

/* ---- scratch (gemm_scratch.c) ----------------------------------------------- */

/* Per-worker scratch: packed A block, packed B columns (when a worker packs
 * its own), a conversion / accumulator area, an edge tile. */
typedef struct fc_gemm_wscratch {
    float *a, *b, *t, *tile;
    size_t a_cap, b_cap, t_cap, tile_cap; /* floats */
} fc_gemm_wscratch;

/* One call's scratch: the shared packed B block and one fc_gemm_wscratch per
 * worker. Sets are cached (a free list under a mutex) and only grow, so the
 * steady state allocates nothing; concurrent calls take different sets. */
typedef struct fc_gemm_scratch {
    struct fc_gemm_scratch *next;
    float *b;
    size_t b_cap;
    int nw;
    fc_gemm_wscratch *w;
} fc_gemm_scratch;

fc_gemm_scratch *fc_gemm_scratch_acquire(void); /* NULL on out of memory */
void fc_gemm_scratch_release(fc_gemm_scratch *s);
/* Grow to at least these sizes (floats; 64-byte aligned); 0 or -1. */
int fc_gemm_scratch_reserve(fc_gemm_scratch *s, int nworkers, size_t b_floats, size_t a_floats, size_t wb_floats,
                            size_t t_floats, size_t tile_floats);
/* The set's shared block as `bytes` bytes of 64-byte aligned memory (grown
 * if needed, contents not kept): scratch for callers other than the GEMM
 * (the quantized matmul), so their steady state allocates nothing too.
 * NULL on out of memory. */
void *fc_gemm_scratch_bytes(fc_gemm_scratch *s, size_t bytes);

/* ---- B operand access (gemm.c) ----------------------------------------------- */

/* B[k, j] widened to float (f32, f16 or bf16 storage). */
float fc_gemm_b_at(const fc_gemm_args *g, int64_t k, int64_t j);
/* Pointer to B[k, j] in its storage type. */
const void *fc_gemm_b_ptr(const fc_gemm_args *g, int64_t k, int64_t j);
/* Widen n contiguous B elements at p (B storage type) to f32 with the
 * generated conversion kernels (exact). */
void fc_gemm_widen(fc_gemm_btype bt, const void *p, size_t n, float *out);

/* ---- the paths ------------------------------------------------------------------ */
/* Each own path has a reserve step (grow the scratch set for this shape and
 * `nworkers` workers; 0 or -1, C untouched) and a run step that cannot fail. */

/* Blocked, packed (gemm_blocked.c): any strides. */
int fc_gemm_blocked_reserve(const fc_gemm_args *g, const fc_gemm_geom *geo, fc_gemm_scratch *s, int nworkers);
void fc_gemm_blocked_run(fc_workers *w, const fc_gemm_args *g, const fc_gemm_geom *geo, fc_gemm_scratch *s);

/* Memory-bound skinny shapes (gemm_gemv.c): B streamed once through the dot
 * or axpy kernels. fc_gemm_gemv_fits says whether a shape takes this path
 * (M small, or N == 1, with a unit-stride B). */
int fc_gemm_gemv_fits(const fc_gemm_args *g);
int fc_gemm_gemv_reserve(const fc_gemm_args *g, fc_gemm_scratch *s, int nworkers);
void fc_gemm_gemv_run(fc_workers *w, const fc_gemm_args *g, fc_gemm_scratch *s);

/* OpenBLAS (gemm_openblas.c): f32 operands with a unit stride each. */
int fc_gemm_openblas_available(void);
int fc_gemm_openblas_fits(const fc_gemm_args *g);
/* Whether auto mode prefers OpenBLAS for this shape (measured rule). */
int fc_gemm_openblas_preferred(const fc_gemm_args *g);
int fc_gemm_openblas(fc_workers *w, const fc_gemm_args *g);

#endif
