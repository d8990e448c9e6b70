/* SPDX-License-Identifier: MIT */
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

/* A pool of n_threads (>= 1; smaller values mean 1) threads in total, the
 * caller included: n_threads - 1 pool threads are started. Returns NULL when
 * memory or threads cannot be had (errno is left set). fc_workers_free joins
 * the threads; it accepts NULL and must not race with fc_workers_run. A pool
 * does not survive fork(): the child must not use the parent's pool. */
fc_workers *fc_workers_new(int n_threads);
void fc_workers_free(fc_workers *w);
int fc_workers_count(const fc_workers *w);

/* Run fn(arg, c, worker) for every c in [0, n_chunks), claimed dynamically,
 * and return when all have finished (n_chunks <= 0 does nothing). A NULL
 * pool, a pool of one thread, n_chunks == 1, or a call made from inside a
 * running loop (nesting: from a chunk on any thread, or from a pool thread)
 * runs the chunks inline on the calling thread, in order; a nested call on
 * the same pool passes the calling thread's worker index, any other inline
 * call passes 0. Thread-safe: concurrent callers are serialized. Everything a
 * chunk wrote is visible to the caller when fc_workers_run returns. */
void fc_workers_run(fc_workers *w, int64_t n_chunks, fc_chunk_fn fn, void *arg);

/* A hint: a worker that is spinning idle (none when all are parked or busy)
 * reads [p, p + bytes) into its L2, stopping at the next loop. For memory-
 * bound sequences (decode: a matmul, serial steps, the next matmul) the
 * caller posts the next operand's first bytes before the serial steps, so
 * they stream while the caller works alone. A later post replaces one not
 * yet taken; p is never dereferenced (any address is harmless). */
void fc_workers_prefetch(fc_workers *w, const void *p, size_t bytes);

/* How long idle threads spin before parking (a pool starts at the default,
 * 1 ms): longer keeps the next loop's start fast, shorter frees the CPU
 * sooner on a shared machine; 0 parks at once. */
void fc_workers_set_spin(fc_workers *w, uint64_t ns);
/* The spin FUCINA_SPIN_US asks for (microseconds, 0..1000000, surrounding
 * whitespace allowed), or the default when unset: 0 with *ns set, or -1 with
 * an error naming the variable and its value in err. */
int fc_workers_spin_from_env(uint64_t *ns, char *err, size_t errlen);

/* How many threads a context uses by default: FUCINA_THREADS when set (a
 * positive integer up to 1024, surrounding whitespace allowed; anything else
 * is an error naming the variable and its value, written to err when err is
 * not NULL, and a return of -1), otherwise min(physical cores, CPUs in the
 * affinity mask, the cgroup CPU quota rounded up) over the parts that are
 * known, at least 1. */
int fc_default_threads(char *err, size_t errlen);

/* The pieces, for tests: each returns 0 when unknown. Physical cores are
 * the distinct (package, die, core) ids of online CPUs in sysfs (else the
 * online CPU count); the cgroup limit reads cgroup v2 cpu.max along the
 * process's cgroup path, else v1 cpu.cfs_quota_us / cpu.cfs_period_us. */
int fc_cpu_physical_cores(void);
int fc_cpu_affinity_count(void);
/* Parse a cgroup v2 cpu.max ("max 100000" / "150000 100000"; v1 quota and
 * period joined by a space parse the same way, -1 meaning no limit): two
 * unsigned decimals (or "max" then one) separated by blanks, trailing
 * whitespace allowed, nothing else. Returns ceil(quota / period), or 0 for no
 * limit or malformed text. */
int fc_cgroup_cpu_limit_from_text(const char *cpu_max_text);
int fc_cgroup_cpu_limit(void);

#endif
