/* SPDX-License-Identifier: MIT */
/* Rows along one named axis: gather/scatter, chunking, per-worker scratch
 * (nn_rows.h). */
#include <string.h>

#include "fucina/half.h"
#include "tensor/nn_rows.h"

void fct_rows_gather(fc_dtype dt, const char *p, int64_t st, int64_t n, float *out)
{
    if (st == 1) {
        fct_convert(dt, p, FC_F32, out, n);
        return;
    }
    switch (dt) {
    case FC_F32:
        for (int64_t i = 0; i < n; i++) out[i] = ((const float *)p)[i * st];
        break;
    case FC_F16:
        for (int64_t i = 0; i < n; i++) out[i] = fc_f16_to_f32(((const fc_f16 *)p)[i * st]);
        break;
    case FC_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = fc_bf16_to_f32(((const fc_bf16 *)p)[i * st]);
        break;
    case FC_BOOL: case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: case FC_F64:
    FC_CASE_BLOCK_DTYPES:
        break; /* rejected before */
    }
}

void fct_rows_scatter(fc_dtype dt, const float *in, int64_t n, char *p, int64_t st)
{
    if (st == 1) {
        fct_convert(FC_F32, in, dt, p, n);
        return;
    }
    switch (dt) {
    case FC_F32:
        for (int64_t i = 0; i < n; i++) ((float *)p)[i * st] = in[i];
        break;
    case FC_F16:
        for (int64_t i = 0; i < n; i++) ((fc_f16 *)p)[i * st] = fc_f32_to_f16(in[i]);
        break;
    case FC_BF16:
        for (int64_t i = 0; i < n; i++) ((fc_bf16 *)p)[i * st] = fc_f32_to_bf16(in[i]);
        break;
    case FC_BOOL: case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: case FC_F64:
    FC_CASE_BLOCK_DTYPES:
        break;
    }
}

int64_t fct_rows_stride(const fc_tensor *t, const char *name)
{
    for (int i = 0; i < t->rank; i++)
        if (t->axis[i] == name) return t->dim[i] == 1 ? 0 : t->stride[i];
    return 0;
}

void fct_rows_init(fct_rows *R, const fc_tensor *x, int a, int nops, const fc_tensor *const *ops)
{
    memset(R, 0, sizeof *R);
    R->nops = nops;
    R->n = x->dim[a];
    for (int k = 0; k < nops; k++) R->ist[k] = ops[k] ? fct_rows_stride(ops[k], x->axis[a]) : 0;
    R->rows = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i == a) continue;
        int o = R->nout++;
        R->odim[o] = x->dim[i];
        for (int k = 0; k < nops; k++) R->ost[k][o] = ops[k] ? fct_rows_stride(ops[k], x->axis[i]) : 0;
        R->rows *= x->dim[i];
    }
}

float *fct_rows_prepare(fc_ctx *ctx, fct_rows *R, int64_t parallel_min, int64_t slot_floats, int64_t shared_floats)
{
    int threads = fc_ctx_threads(ctx);
    int64_t chunks = 1;
    if (threads > 1 && R->rows > 1 && R->rows * R->n >= parallel_min) {
        chunks = (int64_t)threads * 4;
        if (chunks > R->rows) chunks = R->rows;
    }
    R->rows_per_chunk = (R->rows + chunks - 1) / chunks;
    R->chunks = (R->rows + R->rows_per_chunk - 1) / R->rows_per_chunk;
    int slots = R->chunks > 1 ? fc_workers_count(fc_ctx_workers(ctx)) : 1;
    R->slot = (slot_floats + 15) & ~(int64_t)15; /* 64-byte slots: no false sharing */
    R->storage = fc_storage_new(ctx, (size_t)(R->slot * slots + shared_floats) * sizeof(float));
    if (!R->storage) return NULL;
    R->scratch = R->storage->data;
    return R->scratch + R->slot * slots;
}

typedef struct rows_run {
    const fct_rows *R;
    fct_rows_fn fn;
    void *arg;
} rows_run;

static void rows_chunk(void *arg, int64_t chunk, int worker)
{
    const rows_run *run = arg;
    const fct_rows *R = run->R;
    int64_t r0 = chunk * R->rows_per_chunk, r1 = r0 + R->rows_per_chunk;
    if (r1 > R->rows) r1 = R->rows;
    int64_t idx[FC_MAX_RANK] = {0}, rem = r0;
    for (int d = R->nout - 1; d >= 0; d--) {
        idx[d] = rem % R->odim[d];
        rem /= R->odim[d];
    }
    float *ws = R->scratch + (int64_t)worker * R->slot;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[FCT_ROWS_MAX_OPS] = {0};
        for (int d = 0; d < R->nout; d++)
            for (int k = 0; k < R->nops; k++) off[k] += idx[d] * R->ost[k][d];
        run->fn(run->arg, idx, off, ws);
        for (int d = R->nout - 1; d >= 0; d--) {
            if (++idx[d] < R->odim[d]) break;
            idx[d] = 0;
        }
    }
}

void fct_rows_run(fc_ctx *ctx, fct_rows *R, fct_rows_fn fn, void *arg)
{
    rows_run run = {R, fn, arg};
    if (R->chunks > 1)
        fc_workers_run(fc_ctx_workers(ctx), R->chunks, rows_chunk, &run);
    else
        rows_chunk(&run, 0, 0);
    fc_storage_release(R->storage);
    R->storage = NULL;
    R->scratch = NULL;
}
