/* SPDX-License-Identifier: MIT */
/* A loss curve as an SVG file (src/cli/svg_plot.c). */
#ifndef FC_CLI_SVG_PLOT_H
#define FC_CLI_SVG_PLOT_H

#include <stddef.h>

#include "fucina/ctx.h"

/* Training loss (step[i], loss[i]) as a line and held-out loss as dots,
 * written atomically to path. Non-finite values are skipped. 0, or -1 with
 * the error in ctx. */
int fc_cli_svg_loss_plot(fc_ctx *ctx, const char *path, const char *title, const double *step, const double *loss,
                         size_t n, const double *val_step, const double *val_loss, size_t n_val);

#endif
