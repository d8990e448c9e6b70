/* SPDX-License-Identifier: MIT */
/* Internal helpers shared by the tensor-layer ops: shape checking with
 * messages that name the op, the axis and the operands' named shapes;
 * allocation of results; element loads and stores by the casting rules;
 * the strided loop engine. */
#ifndef FC_TENSOR_INTERNAL_H
#define FC_TENSOR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/tensor.h"
#include "core/axis.h"
#include "exec/ctx.h"

/* Validate and intern a user shape (rank <= 8, sizes >= 1, names valid and
 * distinct; NULL names become positional). Returns 0 after recording an error. */
int fct_shape(fc_ctx *ctx, const char *op, const fc_dim *dims, int rank,
              int64_t *sizes, const char **names);

/* A contiguous row-major tensor (contents undefined). */
fc_tensor *fct_alloc(fc_ctx *ctx, fc_dtype dt, int rank, const int64_t *sizes, const char *const *names);
/* Fill a fresh header: row-major over storage s from its start. */
void fct_set_row_major(fc_tensor *t, fc_dtype dt, int rank, const int64_t *sizes, const char *const *names,
                       fc_storage *s);
/* Same shape and names as `like`, dtype dt. */
fc_tensor *fct_alloc_like(fc_ctx *ctx, fc_dtype dt, const fc_tensor *like);
/* A view header over t's storage (retains it); shape filled by the caller. */
fc_tensor *fct_view(fc_ctx *ctx, const fc_tensor *t);

/* Axis index of `name` in t, or -1 after recording an error naming op and t. */
int fct_axis(fc_ctx *ctx, const char *op, const fc_tensor *t, const char *name);
/* Intern a name argument, or NULL after recording an error naming op. */
const char *fct_name(fc_ctx *ctx, const char *op, const char *name);

/* "f32[batch=32, in=784]" */
char *fct_describe(const fc_tensor *t, char *buf, size_t len);
#define FCT_DESC_MAX 400

static inline char *fct_ptr(const fc_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)fc_dtype_size(t->dtype);
}
static inline int64_t fct_numel(const fc_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dim[i];
    return n;
}
int fct_is_contiguous(const fc_tensor *t);

/* Element conversions by the casting rules (dtype.h). */
double fct_load(fc_dtype dt, const void *p);
void fct_store(fc_dtype dt, void *p, double v);
/* Convert n elements between dtypes, contiguous (uses conversion kernels
 * where the registry has them). */
void fct_convert(fc_dtype from, const void *src, fc_dtype to, void *dst, int64_t n);

/* n elements of dtype dt at row (byte stride st) as f32: row itself when it
 * already is contiguous f32, else converted into buf (n floats). */
const float *fct_row_f32(fc_dtype dt, const char *row, int64_t n, int64_t st, float *buf);

/* --- the strided loop engine ---
 * Up to FCT_MAX_OPS operands share one iteration shape; operand k's element
 * (i0..ir) is at base[k] + sum(i_d * stride[k][d]) bytes. Adjacent axes that
 * are contiguous for every operand are merged, so a contiguous op is one row.
 * `fn` gets one innermost row at a time: n elements, per-operand pointers
 * and byte strides (0 for a broadcast operand). */
#define FCT_MAX_OPS 4
typedef struct fct_loop {
    int rank;
    int nops;
    int64_t dim[FC_MAX_RANK];
    char *base[FCT_MAX_OPS];
    int64_t stride[FCT_MAX_OPS][FC_MAX_RANK];
} fct_loop;

typedef void (*fct_row_fn)(void *arg, int64_t n, char *const *ptr, const int64_t *stride, int worker);

/* Strides are in bytes. rank may be 0 (one element). */
void fct_loop_init(fct_loop *L, int rank, const int64_t *dim, int nops,
                   char *const *base, const int64_t strides[][FC_MAX_RANK]);
/* Run all rows; threaded when the element count reaches `parallel_min`
 * (rows are split into contiguous chunks; rows never split). */
void fct_loop_run(fc_ctx *ctx, const fct_loop *L, fct_row_fn fn, void *arg, int64_t parallel_min);

/* The loop of an op writing y from x elementwise (same named shape, same
 * element size in both, y contiguous). */
void fct_loop_unary(fct_loop *L, fc_tensor *y, const fc_tensor *x);

/* Byte strides of t laid over an iteration shape given by names (axes of t
 * absent from `names` are an error the caller prevented; names absent from t
 * or of size 1 in t broadcast with stride 0). */
void fct_strides_for(const fc_tensor *t, int rank, const char *const *names, int64_t *out);

/* relu's gradient for f32 x and output gradient g (g has x's named shape):
 * g where x > 0, else 0 (NaN x passes g). NULL when either is not f32. */
fc_tensor *fct_relu_grad(fc_ctx *ctx, fc_tensor *x, fc_tensor *g);
/* The derivative of gelu (op FC_GELU, tanh form) or silu (FC_SILU) at each
 * element of f32 x, in one generated pass; NULL for other ops or dtypes.
 * (op is an fc_unary_op; int here to keep ops.h out of this header.) */
struct fc_tensor *fct_act_grad(fc_ctx *ctx, int op, fc_tensor *x);

/* Elements per op below which ops stay on one thread. Measured with a
 * 1-vs-2-thread sweep of fc_exp over 4K..1M f32 elements (2026-11-29, this
 * VM): 2 threads lost below 32K (0.4-0.8x: the wake-up and the split cost
 * more than the work) and won from 64K (1.3-1.6x). */
#define FCT_PARALLEL_MIN_ELEMWISE 65536

#endif
