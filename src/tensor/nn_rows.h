/* SPDX-License-Identifier: MIT */
/* Rows along one named axis, for the nn ops that run a generated f32 row
 * kernel on every row (nn_norm.c, nn_softmax.c).
 *
 * A row is one index of every other ("outer") axis of x. The rows are split
 * into chunks of whole rows over the context's workers; each worker has its
 * own f32 scratch slot, where rows that are not f32 and contiguous are
 * gathered (f16/bf16 widened exactly), run and scattered back (rounded once).
 * Rows are independent, so the chunking, and with it the thread count, does
 * not change the bits. */
#ifndef FC_TENSOR_NN_ROWS_H
#define FC_TENSOR_NN_ROWS_H

#include <stdint.h>

#include "tensor/internal.h"

/* n elements of dtype dt (f32, f16 or bf16) at p, element stride st, as f32. */
void fct_rows_gather(fc_dtype dt, const char *p, int64_t st, int64_t n, float *out);
/* n f32 values into dtype dt (f32, f16 or bf16) at p, element stride st. */
void fct_rows_scatter(fc_dtype dt, const float *in, int64_t n, char *p, int64_t st);
/* Element stride of t's axis `name`; 0 when absent or of size 1. */
int64_t fct_rows_stride(const fc_tensor *t, const char *name);

#define FCT_ROWS_MAX_OPS 4

typedef struct fct_rows {
    int nops;                                   /* operands */
    int64_t n;                                  /* row length: x's size along the axis */
    int nout;                                   /* outer axes: x's axes but the row axis, in order */
    int64_t odim[FC_MAX_RANK];
    int64_t rows;                               /* product of odim */
    int64_t ost[FCT_ROWS_MAX_OPS][FC_MAX_RANK]; /* operand k's element strides over the outer axes */
    int64_t ist[FCT_ROWS_MAX_OPS];              /* and along the row axis */
    /* set by fct_rows_prepare */
    int64_t chunks, rows_per_chunk;
    int64_t slot;                               /* floats of scratch per worker */
    float *scratch;
    fc_storage *storage;
} fct_rows;

/* The rows of x along its axis a, with nops operands (NULL: absent) laid over
 * them by name: strides from fct_rows_stride (0 where an operand lacks an axis
 * or broadcasts it). */
void fct_rows_init(fct_rows *R, const fc_tensor *x, int a, int nops, const fc_tensor *const *ops);

/* Can operands x and y (indices into ops) of dtype dt run in place: f32 and
 * contiguous along the row axis? */
static inline int fct_rows_in_place(const fct_rows *R, fc_dtype dt, int x, int y)
{
    return dt == FC_F32 && R->ist[x] == 1 && R->ist[y] == 1;
}

/* Chunk the rows (threaded when there are several and rows * n reaches
 * parallel_min) and allocate scratch: slot_floats floats per worker that may
 * run (rounded up to 64 bytes), then shared_floats floats for the caller to
 * fill before fct_rows_run. Returns those shared floats, or NULL after
 * recording an error. */
float *fct_rows_prepare(fc_ctx *ctx, fct_rows *R, int64_t parallel_min, int64_t slot_floats, int64_t shared_floats);

/* One row: idx its outer index, off[k] operand k's element offset there, ws
 * the running worker's scratch slot. */
typedef void (*fct_rows_fn)(void *arg, const int64_t *idx, const int64_t *off, float *ws);

/* Run fn on every row, then release the scratch. */
void fct_rows_run(fc_ctx *ctx, fct_rows *R, fct_rows_fn fn, void *arg);

#endif
