/* SPDX-License-Identifier: MIT */
/* The worker pool: every chunk runs exactly once whatever the thread count;
 * nested and concurrent calls neither deadlock nor lose chunks; pools start
 * and stop cleanly; FUCINA_THREADS and cgroup cpu.max are parsed strictly. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/workers.h"

static const int thread_counts[] = {1, 2, 4, 8};
static const int64_t chunk_counts[] = {0, 1, 2, 3, 1000, 100000};
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- every chunk exactly once, worker indices in range ----------------- */

typedef struct {
    _Atomic int *counts;
    int n_threads;
    _Atomic int bad_worker;
    _Atomic int64_t bad_chunk;
    int64_t n_chunks;
} count_job;

static void count_chunk(void *p, int64_t c, int worker)
{
    count_job *j = p;
    if (worker < 0 || worker >= j->n_threads) atomic_store(&j->bad_worker, 1);
    if (c < 0 || c >= j->n_chunks) {
        atomic_store(&j->bad_chunk, c);
        return;
    }
    atomic_fetch_add_explicit(&j->counts[c], 1, memory_order_relaxed);
}

Test(workers, every_chunk_runs_exactly_once)
{
    for (size_t t = 0; t < N_ELEMS(thread_counts); t++) {
        fc_workers *w = fc_workers_new(thread_counts[t]);
        cr_assert_not_null(w);
        cr_assert_eq(fc_workers_count(w), thread_counts[t]);
        for (size_t k = 0; k < N_ELEMS(chunk_counts); k++) {
            int64_t n = chunk_counts[k];
            count_job j = {.n_threads = thread_counts[t], .n_chunks = n};
            atomic_init(&j.bad_worker, 0);
            atomic_init(&j.bad_chunk, -1);
            j.counts = calloc((size_t)(n ? n : 1), sizeof *j.counts);
            cr_assert_not_null(j.counts);
            fc_workers_run(w, n, count_chunk, &j);
            for (int64_t c = 0; c < n; c++)
                cr_assert_eq(atomic_load(&j.counts[c]), 1, "threads %d, %lld chunks: chunk %lld ran %d times",
                             thread_counts[t], (long long)n, (long long)c, atomic_load(&j.counts[c]));
            cr_assert_eq(atomic_load(&j.bad_worker), 0, "worker index out of [0, %d)", thread_counts[t]);
            cr_assert_eq(atomic_load(&j.bad_chunk), -1);
            free(j.counts);
        }
        fc_workers_free(w);
    }
}

Test(workers, null_pool_runs_inline_in_order)
{
    cr_assert_eq(fc_workers_count(NULL), 1);
    _Atomic int counts[5];
    for (int i = 0; i < 5; i++) atomic_init(&counts[i], 0);
    count_job j = {.counts = counts, .n_threads = 1, .n_chunks = 5};
    atomic_init(&j.bad_worker, 0);
    atomic_init(&j.bad_chunk, -1);
    fc_workers_run(NULL, 5, count_chunk, &j);
    for (int i = 0; i < 5; i++) cr_assert_eq(atomic_load(&counts[i]), 1);
    cr_assert_eq(atomic_load(&j.bad_worker), 0);
}

/* ---- results equal the serial loop --------------------------------------- */

typedef struct {
    uint64_t *out;
    int64_t per_chunk, n;
} fill_job;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    return x ^ (x >> 33);
}

static void fill_chunk(void *p, int64_t c, int worker)
{
    (void)worker;
    fill_job *j = p;
    int64_t lo = c * j->per_chunk, hi = lo + j->per_chunk < j->n ? lo + j->per_chunk : j->n;
    uint64_t acc = (uint64_t)c;
    for (int64_t i = lo; i < hi; i++) {
        acc = mix(acc + (uint64_t)i);
        j->out[i] = acc;
    }
}

Test(workers, results_equal_serial)
{
    const int64_t n = 200003, per = 1000, chunks = (n + per - 1) / per;
    uint64_t *want = calloc((size_t)n, sizeof *want), *got = calloc((size_t)n, sizeof *got);
    cr_assert(want && got);
    fill_job s = {want, per, n};
    for (int64_t c = 0; c < chunks; c++) fill_chunk(&s, c, 0);
    for (size_t t = 0; t < N_ELEMS(thread_counts); t++) {
        fc_workers *w = fc_workers_new(thread_counts[t]);
        cr_assert_not_null(w);
        memset(got, 0, (size_t)n * sizeof *got);
        fill_job j = {got, per, n};
        fc_workers_run(w, chunks, fill_chunk, &j);
        cr_assert(memcmp(got, want, (size_t)n * sizeof *got) == 0, "threads %d differ from serial", thread_counts[t]);
        fc_workers_free(w);
    }
    free(want);
    free(got);
}

/* ---- nesting runs inline, in order, on the calling worker ---------------- */

enum { OUTER = 64, INNER = 16 };

typedef struct {
    fc_workers *w;
    int n_threads;
    _Atomic int inner_done[OUTER];
    _Atomic int errors;
} nest_job;

typedef struct {
    nest_job *job;
    int worker;
    int next;
} inner_arg;

static void inner_chunk(void *p, int64_t c, int worker)
{
    inner_arg *a = p;
    /* inline: in order, on the thread (and so the worker index) that nested */
    if (c != a->next || worker != a->worker) atomic_fetch_add(&a->job->errors, 1);
    a->next++;
}

static void outer_chunk(void *p, int64_t c, int worker)
{
    nest_job *j = p;
    if (worker < 0 || worker >= j->n_threads) atomic_fetch_add(&j->errors, 1);
    inner_arg a = {j, worker, 0};
    fc_workers_run(j->w, INNER, inner_chunk, &a);
    if (a.next != INNER) atomic_fetch_add(&j->errors, 1);
    atomic_fetch_add(&j->inner_done[c], 1);
}

Test(workers, nested_run_is_inline_without_deadlock)
{
    for (size_t t = 0; t < N_ELEMS(thread_counts); t++) {
        nest_job j = {.n_threads = thread_counts[t]};
        j.w = fc_workers_new(thread_counts[t]);
        cr_assert_not_null(j.w);
        for (int rep = 0; rep < 50; rep++) {
            for (int c = 0; c < OUTER; c++) atomic_init(&j.inner_done[c], 0);
            atomic_init(&j.errors, 0);
            fc_workers_run(j.w, OUTER, outer_chunk, &j);
            cr_assert_eq(atomic_load(&j.errors), 0);
            for (int c = 0; c < OUTER; c++) cr_assert_eq(atomic_load(&j.inner_done[c]), 1);
        }
        fc_workers_free(j.w);
    }
}

/* ---- concurrent callers from other threads are serialized ----------------- */

typedef struct {
    fc_workers *w;
    int n_threads;
    _Atomic int64_t sum;
    _Atomic int bad_worker;
} caller_job;

/* A pool of n threads and a job over it, sums at zero. */
static fc_workers *pool_with_job(int n, caller_job *j)
{
    fc_workers *w = fc_workers_new(n);
    cr_assert_not_null(w);
    *j = (caller_job){.w = w, .n_threads = n};
    atomic_init(&j->sum, 0);
    atomic_init(&j->bad_worker, 0);
    return w;
}

static void add_chunk(void *p, int64_t c, int worker)
{
    caller_job *j = p;
    if (worker < 0 || worker >= j->n_threads) atomic_store(&j->bad_worker, 1);
    atomic_fetch_add_explicit(&j->sum, c + 1, memory_order_relaxed);
}

enum { CALLER_RUNS = 2000, CALLER_CHUNKS = 37 };

static void *caller_main(void *p)
{
    caller_job *j = p;
    for (int r = 0; r < CALLER_RUNS; r++) fc_workers_run(j->w, CALLER_CHUNKS, add_chunk, j);
    return NULL;
}

Test(workers, concurrent_callers)
{
    for (size_t t = 0; t < N_ELEMS(thread_counts); t++) {
        fc_workers *w = fc_workers_new(thread_counts[t]);
        cr_assert_not_null(w);
        caller_job jobs[3];
        for (int i = 0; i < 3; i++) {
            jobs[i].w = w;
            jobs[i].n_threads = thread_counts[t];
            atomic_init(&jobs[i].sum, 0);
            atomic_init(&jobs[i].bad_worker, 0);
        }
        pthread_t th[2];
        for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&th[i], NULL, caller_main, &jobs[i]), 0);
        caller_main(&jobs[2]); /* and this thread too */
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        const int64_t want = (int64_t)CALLER_RUNS * CALLER_CHUNKS * (CALLER_CHUNKS + 1) / 2;
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(atomic_load(&jobs[i].sum), want, "threads %d caller %d", thread_counts[t], i);
            cr_assert_eq(atomic_load(&jobs[i].bad_worker), 0);
        }
        fc_workers_free(w);
    }
}

/* ---- many small loops back to back ---------------------------------------- */

Test(workers, many_small_runs_back_to_back)
{
    for (size_t t = 0; t < N_ELEMS(thread_counts); t++) {
        fc_workers *w = fc_workers_new(thread_counts[t]);
        cr_assert_not_null(w);
        caller_job j = {.w = w, .n_threads = thread_counts[t]};
        atomic_init(&j.sum, 0);
        atomic_init(&j.bad_worker, 0);
        int64_t want = 0;
        for (int r = 0; r < 10000; r++) {
            int64_t n = 2 + r % 7;
            fc_workers_run(w, n, add_chunk, &j);
            want += n * (n + 1) / 2;
        }
        cr_assert_eq(atomic_load(&j.sum), want, "threads %d", thread_counts[t]);
        cr_assert_eq(atomic_load(&j.bad_worker), 0);
        fc_workers_free(w);
    }
}

/* Loops separated by pauses long enough for the workers to park. */
Test(workers, runs_after_workers_park)
{
    caller_job j;
    fc_workers *w = pool_with_job(4, &j);
    fc_workers_set_spin(w, 100000); /* 0.1 ms: the 2 ms pauses park them */
    for (int r = 0; r < 20; r++) {
        nanosleep(&(struct timespec){0, 2000000}, NULL);
        fc_workers_run(w, 100, add_chunk, &j);
    }
    cr_assert_eq(atomic_load(&j.sum), 20 * 100 * 101 / 2);
    fc_workers_set_spin(w, 0); /* park at once, between loops run back to back too */
    for (int r = 0; r < 200; r++) fc_workers_run(w, 100, add_chunk, &j);
    cr_assert_eq(atomic_load(&j.sum), 220 * 100 * 101 / 2);
    fc_workers_free(w);
}

static double process_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* After the spin, idle workers use no CPU: over a 100 ms pause, 3 workers
 * spinning would burn 300 ms of CPU; parked after their spin (the default
 * 1 ms, or none) they burn at most a few. */
Test(workers, idle_workers_park_after_their_spin)
{
    caller_job j;
    fc_workers *w = pool_with_job(4, &j);
    const uint64_t spins[] = {1000000, 0};
    for (size_t i = 0; i < N_ELEMS(spins); i++) {
        fc_workers_set_spin(w, spins[i]);
        fc_workers_run(w, 100, add_chunk, &j);
        double t0 = process_cpu_seconds();
        nanosleep(&(struct timespec){0, 100000000}, NULL);
        double used = process_cpu_seconds() - t0;
        cr_assert_lt(used, 0.05, "spin %llu ns: %.1f ms of CPU over a 100 ms idle pause", (unsigned long long)spins[i],
                     used * 1e3);
    }
    fc_workers_free(w);
}

/* Prefetch hints change nothing a loop computes, never fault (any address,
 * posted before, between and during loops) and never hold a loop up. */
Test(workers, prefetch_hints_are_harmless)
{
    caller_job j;
    fc_workers *w = pool_with_job(3, &j);
    size_t n = (size_t)8 << 20;
    char *buf = malloc(n);
    cr_assert_not_null(buf);
    memset(buf, 1, n);
    fc_workers_prefetch(NULL, buf, n); /* no pool: nothing */
    for (int r = 0; r < 100; r++) {
        fc_workers_prefetch(w, buf, n);
        if (r % 3 == 0) fc_workers_prefetch(w, (const void *)(uintptr_t)0x10, (size_t)1 << 20); /* unmapped */
        if (r % 10 == 0) nanosleep(&(struct timespec){0, 200000}, NULL); /* taken while idle */
        fc_workers_run(w, 100, add_chunk, &j);
    }
    cr_assert_eq(atomic_load(&j.sum), 100 * 100 * 101 / 2);
    cr_assert_eq(atomic_load(&j.bad_worker), 0);
    free(buf);
    fc_workers_free(w);
}

/* ---- FUCINA_SPIN_US ---------------------------------------------------------- */

Test(workers, fucina_spin_us_values)
{
    static const struct { const char *text; uint64_t ns; } cases[] = {
        {"0", 0}, {"50", 50000}, {" 250 ", 250000}, {"1000000", 1000000000},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        setenv("FUCINA_SPIN_US", cases[i].text, 1);
        char err[256] = "";
        uint64_t ns = 1;
        cr_assert_eq(fc_workers_spin_from_env(&ns, err, sizeof err), 0, "FUCINA_SPIN_US='%s': %s", cases[i].text, err);
        cr_assert_eq(ns, cases[i].ns, "FUCINA_SPIN_US='%s'", cases[i].text);
    }
    unsetenv("FUCINA_SPIN_US");
    uint64_t ns = 0;
    cr_assert_eq(fc_workers_spin_from_env(&ns, NULL, 0), 0);
    cr_assert_gt(ns, 0, "unset: the default spin");
}

Test(workers, fucina_spin_us_bad_values)
{
    static const char *bad[] = {"-1", "abc", "", "  ", "1000001", "99999999999999999999999", "2x", "+5", "1 2"};
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        setenv("FUCINA_SPIN_US", bad[i], 1);
        char err[256] = "";
        uint64_t ns;
        cr_assert_eq(fc_workers_spin_from_env(&ns, err, sizeof err), -1, "FUCINA_SPIN_US='%s' accepted", bad[i]);
        cr_assert(strstr(err, "FUCINA_SPIN_US") != NULL && strstr(err, bad[i]) != NULL, "message: %s", err);
    }
    unsetenv("FUCINA_SPIN_US");
}

/* ---- create/free repeatedly (leaks show under ASan/LSan) ------------------ */

Test(workers, create_free_repeatedly)
{
    for (int i = 0; i < 100; i++) {
        int n = 1 + i % 8;
        fc_workers *w = fc_workers_new(n);
        cr_assert_not_null(w);
        if (i % 3 == 0) {
            caller_job j = {.w = w, .n_threads = n};
            atomic_init(&j.sum, 0);
            atomic_init(&j.bad_worker, 0);
            fc_workers_run(w, 10, add_chunk, &j);
            cr_assert_eq(atomic_load(&j.sum), 55);
        }
        fc_workers_free(w);
    }
    fc_workers_free(NULL);
}

/* ---- FUCINA_THREADS and the default ---------------------------------------- */

Test(workers, fucina_threads_valid_values)
{
    static const struct { const char *text; int want; } cases[] = {
        {"1", 1}, {"4", 4}, {" 8 ", 8}, {"\t3\n", 3}, {"1024", 1024}, {"007", 7},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        setenv("FUCINA_THREADS", cases[i].text, 1);
        char err[256] = "";
        cr_assert_eq(fc_default_threads(err, sizeof err), cases[i].want, "FUCINA_THREADS='%s': %s", cases[i].text,
                     err);
    }
    unsetenv("FUCINA_THREADS");
}

Test(workers, fucina_threads_bad_values)
{
    static const char *bad[] = {"0", "-1", "abc", "2x", "", "   ", "1025", "99999999999999999999999", "+4", "4 4",
                                "0x10"};
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        setenv("FUCINA_THREADS", bad[i], 1);
        char err[256] = "";
        cr_assert_eq(fc_default_threads(err, sizeof err), -1, "FUCINA_THREADS='%s' accepted", bad[i]);
        cr_assert(strstr(err, "FUCINA_THREADS") != NULL, "message: %s", err);
        cr_assert(strstr(err, bad[i]) != NULL, "message does not name the value '%s': %s", bad[i], err);
        cr_assert(fc_default_threads(NULL, 0) == -1); /* no buffer: still an error */
    }
    unsetenv("FUCINA_THREADS");
}

Test(workers, default_threads_without_env)
{
    unsetenv("FUCINA_THREADS");
    char err[256] = "";
    int n = fc_default_threads(err, sizeof err);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_geq(n, 1);
    if (online > 0) cr_assert_leq(n, online);
    int phys = fc_cpu_physical_cores(), aff = fc_cpu_affinity_count(), cg = fc_cgroup_cpu_limit();
    cr_assert_geq(phys, 0);
    cr_assert_geq(aff, 0);
    cr_assert_geq(cg, 0);
    if (phys > 0) cr_assert_leq(n, phys);
    if (aff > 0) cr_assert_leq(n, aff);
    if (cg > 0) cr_assert_leq(n, cg);
}

Test(workers, cgroup_cpu_max_text)
{
    static const struct { const char *text; int want; } cases[] = {
        {"max 100000", 0},
        {"max 100000\n", 0},
        {"150000 100000", 2},
        {"150000 100000\n", 2},
        {"100000 100000", 1},
        {"50000 100000", 1},
        {"400000 100000\n", 4},
        {"200001 100000", 3},
        {"", 0},
        {"garbage", 0},
        {"max", 0},
        {"150000", 0},
        {"150000 ", 0},
        {"150000 0", 0},
        {"0 100000", 0},
        {"-1 100000", 0},
        {"150000 100000 7", 0},
        {"150000 100000x", 0},
        {"1.5 1", 0},
        {"maxi 100000", 0},
        {"99999999999999999999999 1", 0},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++)
        cr_assert_eq(fc_cgroup_cpu_limit_from_text(cases[i].text), cases[i].want, "'%s'", cases[i].text);
    cr_assert_eq(fc_cgroup_cpu_limit_from_text(NULL), 0);
}
