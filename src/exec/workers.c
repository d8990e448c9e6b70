/* Placeholder worker pool: runs every loop inline on the caller. Replaced by
 * the threaded pool (spin-then-park) in the same file. */
#include "exec/workers.h"

#include <stdlib.h>

struct fc_workers { int n; };

fc_workers *fc_workers_new(int n_threads)
{
    fc_workers *w = malloc(sizeof *w);
    if (w) w->n = n_threads < 1 ? 1 : n_threads;
    return w;
}
void fc_workers_free(fc_workers *w) { free(w); }
int fc_workers_count(const fc_workers *w) { return w ? w->n : 1; }
void fc_workers_run(fc_workers *w, int64_t n_chunks, fc_chunk_fn fn, void *arg)
{
    (void)w;
    for (int64_t c = 0; c < n_chunks; c++) fn(arg, c, 0);
}
int fc_default_threads(char *err, size_t errlen) { (void)err; (void)errlen; return 1; }
int fc_cpu_physical_cores(void) { return 0; }
int fc_cpu_affinity_count(void) { return 0; }
int fc_cgroup_cpu_limit_from_text(const char *t) { (void)t; return 0; }
int fc_cgroup_cpu_limit(void) { return 0; }
