/* SPDX-License-Identifier: MIT */
/* What the tensor layer knows of autograd: whether an operand requires a
 * gradient, and how an op attaches a backward record to its result.
 *
 * The records are plain data here (op id, operands, saved tensors,
 * parameters). The autograd layer above owns their meaning: the backward
 * engine and one VJP per op id (src/autograd/). Keeping the data here lets
 * every op record itself without the tensor layer depending on autograd.
 *
 * Ownership: a tensor that requires a gradient points (t->grad) at its
 * fcg_state; the state of an op result owns one reference to the record
 * (fcg_node) that made it; a record owns references to its operands and to
 * what it saved. Records are freed iteratively (a work list per thread), so
 * releasing the end of a long chain does not recurse through it. */
#ifndef FC_TENSOR_GRAD_RECORD_H
#define FC_TENSOR_GRAD_RECORD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "exec/ctx.h"

/* One id per differentiable op (or family, when the VJP shares a body). The
 * autograd layer switches over it exhaustively. */
typedef enum fcg_op {
    FCG_UNARY = 0,      /* p.i[0] = fc_unary_op */
    FCG_BINARY,         /* p.i[0] = fc_binary_op */
    FCG_BINARY_SCALAR,  /* x op s: p.i[0] = op, p.d[0] = s */
    FCG_SCALAR_BINARY,  /* s op x: p.i[0] = op, p.d[0] = s */
    FCG_GATED,          /* p.i[0] = 0 swiglu, 1 geglu */
    FCG_CAST,
    FCG_WHERE,          /* in: cond, a, b */
    FCG_MASKED_FILL,    /* in: x, mask */
    FCG_CLAMP,          /* p.d[0] = lo, p.d[1] = hi */
    FCG_REDUCE,         /* p.i[0] = kind (fcg_reduce_kind), p.i[1] = correction; axes */
    FCG_CUMSUM,         /* axes[0] */
    FCG_EINSUM,         /* axes = output list */
    FCG_VIEW,           /* p.i[0] = fcg_view_kind; see grad_record.c */
    FCG_COPY,           /* contiguous / clone: identity */
    FCG_SOFTMAX,        /* p.raw = options; saved[0] = output */
    FCG_LOG_SOFTMAX,
    FCG_RMSNORM,
    FCG_RMSNORM_RESIDUAL,
    FCG_LAYERNORM,
    FCG_ROPE,
    FCG_ATTENTION,
    FCG_CONCAT,
    FCG_PAD,
    FCG_REPEAT,
    FCG_FLIP,
    FCG_GET_ROWS,
    FCG_INDEX_SELECT,
    FCG_GATHER,
    FCG_SCATTER_ADD,
    FCG_TOPK,
    FCG_CROSS_ENTROPY,
    FCG_MSE,
    FCG_CONV1D,
    FCG_CONV_TRANSPOSE1D,
    FCG_DROPOUT,        /* p.d[0] = p, p.i[0] = seed */
    FCG_CUSTOM,         /* p.ptr[0] = const fc_custom_op * (copied) */
    FCG_CHECKPOINT,     /* p.ptr[0] = block, p.ptr[1] = user */
} fcg_op;
#define FCG_OP_COUNT (FCG_CHECKPOINT + 1)

typedef enum fcg_reduce_kind {
    FCG_RED_SUM = 0, FCG_RED_MEAN, FCG_RED_MAX, FCG_RED_MIN, FCG_RED_VAR, FCG_RED_NORM, FCG_RED_LSE,
} fcg_reduce_kind;

typedef enum fcg_view_kind {
    FCG_V_NARROW = 0,   /* axes[0], p.i[1] = start, p.i[2] = len */
    FCG_V_SELECT,       /* axes[0], p.i[1] = index */
    FCG_V_PERMUTE,      /* any pure reordering / renaming / broadcast / reshape: see the VJP */
    FCG_V_BROADCAST,
    FCG_V_RESHAPE,      /* the output is a reshape (or split / merge / unsqueeze / squeeze) of the input */
    FCG_V_RENAME,       /* same layout, other names: in-order rename */
} fcg_view_kind;

#define FCG_MAX_SAVED 4

/* Parameters an op keeps for its VJP. `raw` holds a copy of an options
 * struct (softmax, attention, loss, conv...); `axes` interned names. */
typedef struct fcg_params {
    int64_t i[8];
    double d[4];
    const char *axes[FC_MAX_RANK];
    int n_axes;
    void *ptr[2];
    _Alignas(8) unsigned char raw[256];
} fcg_params;

#define FCG_INLINE_IN 4

/* Field order is deliberate: what discovery and the engine touch for every
 * record comes first (a few cache lines, operands inline for up to
 * FCG_INLINE_IN of them); the VJP's parameters, read once, come last. */
typedef struct fcg_node {
    atomic_long refs;
    fcg_op op;
    int ran;                    /* a pass consumed this record */
    uint64_t pass;              /* the pass that last reached it */
    atomic_long pending;        /* consumers still to contribute, in that pass */
    fc_tensor *gacc;            /* output gradient accumulated so far */
    void *engine;               /* the free list's link */
    double work;                /* rough flop count, to decide what runs concurrently */
    /* What the VJP must produce gradients for. */
    int n_in;
    fc_tensor **in;             /* retained operands (NULL slots allowed) */
    unsigned char *needs;       /* needs[i]: operand i requires a gradient */
    unsigned *in_version;       /* operand storage versions at record time */
    /* Tensors saved for the VJP (retained; never the node's own output
     * handle, which would be a cycle: fcg_save_output makes a view). */
    fc_tensor *saved[FCG_MAX_SAVED];
    unsigned saved_version[FCG_MAX_SAVED];
    fc_tensor *in_inline[FCG_INLINE_IN];
    unsigned in_version_inline[FCG_INLINE_IN];
    unsigned char needs_inline[FCG_INLINE_IN];
    const char *name;           /* the public op, for messages */
    /* The output's shape (the node does not hold the output). */
    fc_dtype out_dtype;
    int out_rank;
    int64_t out_dim[FC_MAX_RANK];
    const char *out_axis[FC_MAX_RANK];
    fcg_params p;
} fcg_node;

/* Per-tensor autograd state (t->grad). */
typedef struct fcg_state {
    int requires_grad;
    fcg_node *node;             /* producer; NULL for a variable */
    fc_tensor *grad;            /* a variable's accumulated gradient */
    pthread_mutex_t lock;       /* guards `grad` (concurrent passes may share variables) */
} fcg_state;

static inline fcg_state *fcg_state_of(const fc_tensor *t)
{
    return t ? (fcg_state *)t->grad : NULL;
}
static inline int fcg_requires(const fc_tensor *t)
{
    fcg_state *s = fcg_state_of(t);
    return s && s->requires_grad;
}

/* Grad mode of the calling thread (fc_no_grad_begin/end nest a counter). */
int fcg_enabled(void);
void fcg_disable(void);  /* depth++ */
void fcg_enable(void);   /* depth-- */

/* The dtype of a gradient for a tensor of dtype dt: f64 for f64, else f32. */
static inline fc_dtype fcg_grad_dtype(fc_dtype dt) { return dt == FC_F64 ? FC_F64 : FC_F32; }

/* Attach a record of op `op` to `out`, made from operands in[0..n). Returns
 * the record for the caller to fill (params, saved), or NULL when nothing is
 * recorded: grad mode off, no operand requires a gradient, or out is NULL
 * (on OOM the error is recorded and the result simply does not record).
 * `out` must be a fresh result of the op (no state yet). */
fcg_node *fcg_record(fc_ctx *ctx, fc_tensor *out, fcg_op op, const char *name, fc_tensor *const *in, int n);
/* Keep t for the VJP in slot k (retained; its storage version is noted). */
void fcg_save(fcg_node *n, int k, fc_tensor *t);
/* Keep the op's own output for the VJP: a view of its storage (no cycle). */
void fcg_save_output(fc_ctx *ctx, fcg_node *n, int k, fc_tensor *out);
/* Copy up to FC_MAX_RANK interned names into the params. */
void fcg_set_axes(fcg_node *n, const char *const *axes, int count);

/* Make t a variable (state with requires_grad and no node). */
int fcg_make_leaf(fc_ctx *ctx, fc_tensor *t);

void fcg_node_retain(fcg_node *n);
/* Drop a reference; the last one frees the record (iteratively). */
void fcg_node_release(fcg_node *n);
/* Free what a record saved and its operands (after its VJP ran). */
void fcg_node_drop_saved(fcg_node *n);

#endif
