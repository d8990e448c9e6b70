/* SPDX-License-Identifier: MIT */
/* A one-line progress bar on stderr, drawn only when stderr is a terminal. */
#ifndef FC_CLI_PROGRESS_H
#define FC_CLI_PROGRESS_H

typedef struct fc_cli_progress {
    const char *label;
    int enabled, last; /* last: the per-mille drawn, -1 before the first */
} fc_cli_progress;

/* enabled when stderr is a terminal (and $FUCINA_NO_PROGRESS is unset) */
void fc_cli_progress_init(fc_cli_progress *p, const char *label);
/* fraction in [0, 1]; fits fc_llm_load_options.progress (user = the bar) */
void fc_cli_progress_update(double fraction, void *user);
/* erase the line */
void fc_cli_progress_done(fc_cli_progress *p);

#endif
