/* The worker pool: a fixed set of threads that run chunked parallel loops.
 *
 * One pool per context. The calling thread takes part in every loop, so a
 * pool of n threads starts n-1 workers. Workers spin briefly after a loop
 * (the next op usually follows within microseconds), then park on a futex or
 * condition variable so an idle process uses no CPU.
 *
 * Determinism: the pool hands out chunk indices; what a chunk computes is
 * the caller's choice. Callers that reduce pick a chunking that does not
 * depend on the thread count, so 1 and 2 threads give identical bits. */
#ifndef FC_EXEC_WORKERS_H
#define FC_EXEC_WORKERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct fc_workers fc_workers;

/* Run chunk `chunk` of a loop on worker `worker` (0 = the caller,
 * 1..n-1 = pool threads; use it to pick per-thread scratch). */
typedef void (*fc_chunk_fn)(void *arg, int64_t chunk, int worker);

/* A pool of n_threads (>= 1) threads in total, the caller included.
 * Returns NULL when threads cannot be started (errno is left set). */
fc_workers *fc_workers_new(int n_threads);
void fc_workers_free(fc_workers *w);
int fc_workers_count(const fc_workers *w);

/* Run fn(arg, c, worker) for every c in [0, n_chunks), claimed dynamically,
 * and return when all have finished. A NULL pool, n_chunks == 1, or a call
 * made from inside a running loop (nesting) runs the chunks inline on the
 * caller, in order. Thread-safe: concurrent callers are serialized. */
void fc_workers_run(fc_workers *w, int64_t n_chunks, fc_chunk_fn fn, void *arg);

/* How many threads a context uses by default: FUCINA_THREADS when set (a
 * positive integer; anything else is an error reported in err and a return
 * of -1), otherwise min(physical cores, CPUs in the affinity mask, the cgroup
 * CPU quota rounded up), at least 1. */
int fc_default_threads(char *err, size_t errlen);

/* The pieces, for tests: each returns 0 when unknown. */
int fc_cpu_physical_cores(void);
int fc_cpu_affinity_count(void);
/* Parse a cgroup v2 cpu.max ("max 100000" / "150000 100000") or v1 quota and
 * period; returns ceil(quota / period), or 0 for no limit or bad text. */
int fc_cgroup_cpu_limit_from_text(const char *cpu_max_text);
int fc_cgroup_cpu_limit(void);

#endif
