/* SPDX-License-Identifier: MIT */
/* Fucina: 1-D convolutions (f32), as PyTorch's conv1d / conv_transpose1d.
 *
 * Axes are found by name, so operands may have any axis order:
 *
 *   x     [batch..., c, t]   the input: a channel axis, a time axis, and any
 *                            other axes (batch axes, zero or more);
 *   w     conv1d:            {c_out: C_out, c: C_in / groups, k: K}
 *                            (PyTorch's [C_out, C_in/groups, K] layout is
 *                            FC_SHAPE({"c_out", C_out}, {"c", C_in / g}, {"k", K}));
 *         conv_transpose1d:  {c: C_in, c_out: C_out / groups, k: K}
 *                            (PyTorch's [C_in, C_out/groups, K]);
 *   bias  NULL or rank 1 {c_out: C_out};
 *   y     x's axes in x's order; the channel axis keeps x's name with size
 *         C_out, the time axis gets the output length.
 *
 * "c", "t", "c_out" and "k" are the defaults of the names in the options.
 * Group g uses input channels [g*C_in/G, (g+1)*C_in/G) and produces output
 * channels [g*C_out/G, (g+1)*C_out/G).
 *
 * Lengths (L = input length, d = dilation, s = stride, K = taps):
 *   conv1d:           L_out = (L + pad_l + pad_r - d*(K-1) - 1) / s + 1
 *   conv_transpose1d: L_out = (L-1)*s - pad_l - pad_r + d*(K-1) + output_padding + 1
 * PyTorch's symmetric padding p is .padding = {p, p}. L_out < 1 is an error.
 *
 * Computed by im2col (col2im for the transpose) and the f32 GEMM; results
 * do not depend on the thread count. Zero option fields mean the defaults;
 * a NULL options pointer means all defaults. */
#ifndef FUCINA_CONV_H
#define FUCINA_CONV_H

#include <stdint.h>

#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_conv1d_options {
    const char *channel_axis; /* x's channel axis and w's input-channel axis; NULL: "c" */
    const char *time_axis;    /* x's time axis; NULL: "t" */
    const char *out_axis;     /* w's (and bias's) output-channel axis; NULL: "c_out" */
    const char *kernel_axis;  /* w's tap axis; NULL: "k" */
    int64_t stride;           /* 0: 1 */
    int64_t padding[2];       /* zeros before and after the input along time */
    int64_t dilation;         /* 0: 1 */
    int64_t groups;           /* 0: 1 */
} fc_conv1d_options;

typedef struct fc_conv_transpose1d_options {
    const char *channel_axis; /* x's channel axis and w's input-channel axis; NULL: "c" */
    const char *time_axis;    /* NULL: "t" */
    const char *out_axis;     /* w's (and bias's) output-channel axis; NULL: "c_out" */
    const char *kernel_axis;  /* NULL: "k" */
    int64_t stride;           /* 0: 1 */
    int64_t padding[2];       /* removed from the start and the end of the full output */
    int64_t output_padding;   /* extra samples at the end; < max(stride, dilation) */
    int64_t dilation;         /* 0: 1 */
    int64_t groups;           /* 0: 1 */
} fc_conv_transpose1d_options;

FC_API fc_tensor *fc_conv1d(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias,
                            const fc_conv1d_options *opt);
FC_API fc_tensor *fc_conv_transpose1d(fc_ctx *ctx, fc_tensor *x, fc_tensor *w, fc_tensor *bias,
                                      const fc_conv_transpose1d_options *opt);

#ifdef __cplusplus
}
#endif
#endif
