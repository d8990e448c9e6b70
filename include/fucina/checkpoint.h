/* SPDX-License-Identifier: MIT */
/* Fucina: training checkpoints.
 *
 * One safetensors file holds a run's parameters and its optimizer's state:
 *   "param.<name>"   each parameter of the optimizer, by the name it was
 *                    added with (its dtype and shape; axis names kept)
 *   "optim.<entry>"  each entry of fc_optim_state_get ("optim.step", ...)
 * and the metadata "fucina.optim.kind" (sgd, adam, adamw, muon) plus any
 * caller pairs. Saving is atomic (a temporary file renamed over the
 * destination). Loading checks everything first — the optimizer kind, every
 * parameter present with its shape and dtype, no unknown parameter, the
 * optimizer state complete — and changes nothing when a check fails; the
 * error names the entry and the reason. A run resumed from a checkpoint
 * continues bit for bit as the uninterrupted run would have. */
#ifndef FUCINA_CHECKPOINT_H
#define FUCINA_CHECKPOINT_H

#include "fucina/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* meta_kv: n_meta key/value pairs (2 * n_meta strings), may be NULL. */
FC_API fc_status fc_checkpoint_save(fc_ctx *ctx, const char *path, fc_optim *opt, const char *const *meta_kv,
                                    int n_meta);
/* Restore the parameters (in place) and the optimizer state of `opt` from
 * path. */
FC_API fc_status fc_checkpoint_load(fc_ctx *ctx, const char *path, fc_optim *opt);

#ifdef __cplusplus
}
#endif
#endif
