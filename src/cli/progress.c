/* SPDX-License-Identifier: MIT */
/* fc_cli_progress: "label [#####.....]  42%" redrawn in place with \r; drawn
 * only when stderr is a terminal, so pipes and logs stay clean. */
#define _POSIX_C_SOURCE 200809L
#include "cli/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void fc_cli_progress_init(fc_cli_progress *p, const char *label) {
    p->label = label;
    p->enabled = isatty(STDERR_FILENO) && !getenv("FUCINA_NO_PROGRESS");
    p->last = -1;
}

void fc_cli_progress_update(double fraction, void *user) {
    fc_cli_progress *p = user;
    if (!p->enabled) return;
    if (!(fraction >= 0)) fraction = 0; /* NaN too */
    if (fraction > 1) fraction = 1;
    int pm = (int)(fraction * 1000.0);
    if (pm / 10 == p->last / 10 && p->last >= 0) return; /* redraw per whole percent */
    p->last = pm;
    enum { width = 30 };
    char bar[width + 1];
    int fill = (int)(fraction * width);
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r%s [%s] %3d%%", p->label, bar, pm / 10);
    fflush(stderr);
}

void fc_cli_progress_done(fc_cli_progress *p) {
    if (!p->enabled || p->last < 0) return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
}
