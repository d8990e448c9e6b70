/* SPDX-License-Identifier: MIT */
/* `fucina pretrain` / `fucina sft` under mpirun: the ranks of a
 * data-parallel run (fc_lm_parallel over MPI). The library knows nothing
 * of MPI; only the command links it, when the build found it. */
#ifndef FUCINA_CLI_TRAIN_RANKS_H
#define FUCINA_CLI_TRAIN_RANKS_H

#include "fucina/lm_train.h"

typedef struct cli_ranks {
    fc_lm_parallel par; /* rank 0 of 1 when alone */
    int mpi;            /* MPI was initialized (and is finalized or aborted by cli_ranks_end) */
} cli_ranks;

/* Alone, or the MPI world this process was launched into by mpirun. 0, or
 * -1 after printing why (launched with several ranks by a build without
 * MPI; MPI failed to start). */
int cli_ranks_begin(const char *cmd, cli_ranks *r);
/* Finalize MPI; when rc != 0, abort the whole job with rc instead, so the
 * other ranks do not wait for this one forever. */
void cli_ranks_end(cli_ranks *r, int rc);

#endif
