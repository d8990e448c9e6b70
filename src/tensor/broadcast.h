/* SPDX-License-Identifier: MIT */
/* Broadcasting by name (see fucina/ops.h): the output shape of several
 * operands and each operand's byte strides over it. */
#ifndef FC_TENSOR_BROADCAST_H
#define FC_TENSOR_BROADCAST_H

#include "tensor/internal.h"

typedef struct fct_bcast {
    int rank;
    int64_t dim[FC_MAX_RANK];
    const char *axis[FC_MAX_RANK];
    int64_t stride[FCT_MAX_OPS][FC_MAX_RANK]; /* bytes, per operand */
} fct_bcast;

/* Returns 0 after recording an error that names op, the axis and the shapes.
 * ts[i] may have different dtypes; strides use each one's element size. */
int fct_broadcast(fc_ctx *ctx, const char *op, fc_tensor *const *ts, int n, fct_bcast *out);

#endif
