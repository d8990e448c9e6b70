/* SPDX-License-Identifier: MIT */
/* The worker pool: n-1 threads plus the caller run chunked loops.
 *
 * Protocol. One 64-bit atomic `state` holds (seq << 32) | active:
 *   - seq odd: a job is open and workers may join it; seq even: closed.
 *   - active: how many workers have joined the current job and not left it.
 * The caller (holding run_lock) writes the job fields while the state is
 * closed with active == 0, then stores the next (odd) seq: a release that
 * publishes the fields. A worker joins only with a CAS that keeps seq and
 * adds one to active, so it can never join a job that was closed or replaced
 * since it looked. Caller and joined workers claim chunks from `next`. When
 * the caller runs out of chunks it closes the job (seq += 1) and waits for
 * active to reach 0: every chunk was claimed by the caller or by a joined
 * worker, and joined workers leave only after their last chunk, so then all
 * chunks are done and no worker reads the job fields any more.
 *
 * Idle workers spin on `state` for spin_ns, then park on the futex word
 * `wake_word` (a pthread condition variable off Linux). Parking is a Dekker
 * handshake on seq_cst operations: a worker increments n_parked, reads
 * wake_word, re-checks state, then waits while wake_word is unchanged; the
 * caller stores state, increments wake_word, and wakes only if n_parked > 0,
 * so a loop with spinning workers makes no system call. The caller waits for
 * the last workers the same way (spin, then park on done_word). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ALLOC, syscall */
#include "exec/workers.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#define FC_HAVE_FUTEX 1
#else
#define FC_HAVE_FUTEX 0
#endif

/* How long an idle worker (or a waiting caller) spins before parking, by
 * default (FUCINA_SPIN_US overrides it). Decode-shaped work alternates
 * parallel matmuls of tens of microseconds with serial steps (norms, rope,
 * attention bookkeeping, sampling): a worker parked in such a gap costs a
 * futex wake-up, tens of microseconds on a VM, at the start of the next
 * matmul, and on 2 CPUs the first half of that matmul runs on one thread.
 * 1 ms covers the gaps of a decode step (measured: q4_K decode matmuls
 * 5% faster than with 50 us); ggml's threadpool spins far longer. */
#define FC_SPIN_DEFAULT_NS 1000000
/* The largest FUCINA_SPIN_US accepted: one second. */
#define FC_SPIN_MAX_US 1000000
/* Upper bound on the number of threads FUCINA_THREADS may ask for. */
#define FC_MAX_THREADS 1024

#define FC_ACTIVE_MASK UINT64_C(0xffffffff)
#define FC_SEQ_ONE (UINT64_C(1) << 32)

struct fc_worker_slot {
    struct fc_workers *pool;
    int index;
};

struct fc_workers {
    int n;                       /* threads in total, the caller included */
    int n_started;               /* pool threads actually created */
    pthread_t *threads;
    struct fc_worker_slot *slots;
    pthread_mutex_t run_lock;    /* serializes callers of fc_workers_run */

    /* the job: written by the caller only while closed with active == 0 */
    fc_chunk_fn fn;
    void *arg;
    int64_t n_chunks;

    _Alignas(64) _Atomic uint64_t state; /* (seq << 32) | active */
    _Alignas(64) _Atomic int64_t next;   /* next chunk to claim */
    _Alignas(64) _Atomic uint32_t wake_word; /* futex: bumped on every publish */
    _Atomic int n_parked;                /* workers parked or about to park */
    _Atomic bool stop;
    _Alignas(64) _Atomic uint32_t done_word; /* futex: bumped when the last worker leaves */
    _Atomic int caller_parked;
    _Atomic uint64_t spin_ns; /* spin before parking (fc_workers_set_spin) */
    /* fc_workers_prefetch's hint: taken (exchanged to 0) by one spinning worker */
    _Alignas(64) _Atomic int pf_pending;
    _Atomic(const char *) pf_ptr;
    _Atomic size_t pf_bytes;
#if !FC_HAVE_FUTEX
    pthread_mutex_t park_mu;
    pthread_cond_t park_cv;
#endif
};

/* The pool whose loop this thread is running (NULL outside loops) and its
 * worker index there. Pool threads keep theirs for life. */
static _Thread_local struct fc_workers *tls_pool;
static _Thread_local int tls_index;

static inline void cpu_relax(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait while *word == expected (may return spuriously); wake up to n waiters. */
static void park_wait(struct fc_workers *w, _Atomic uint32_t *word, uint32_t expected)
{
#if FC_HAVE_FUTEX
    (void)w;
    syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    pthread_mutex_lock(&w->park_mu);
    while (atomic_load(word) == expected) pthread_cond_wait(&w->park_cv, &w->park_mu);
    pthread_mutex_unlock(&w->park_mu);
#endif
}

static void park_wake(struct fc_workers *w, _Atomic uint32_t *word, int n)
{
#if FC_HAVE_FUTEX
    (void)w;
    syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
#else
    (void)word;
    (void)n;
    pthread_mutex_lock(&w->park_mu);
    pthread_mutex_unlock(&w->park_mu);
    pthread_cond_broadcast(&w->park_cv);
#endif
}

static inline bool job_is_new(uint64_t s, uint32_t last_seq)
{
    uint32_t seq = (uint32_t)(s >> 32);
    return (seq & 1u) && seq != last_seq;
}

/* A spinning worker's prefetch of the posted range, a cache line at a
 * time; it stops as soon as a new job opens (the caller must not run a
 * job's chunks alone because its helper is busy warming caches). Locality 2
 * (x86 prefetcht1, AArch64 pldl2keep): into L2, and from there to the core
 * that claims the chunk. A hint: the range is not dereferenced, and a range
 * read torn between two posts only prefetches the wrong lines. */
static void run_prefetch(struct fc_workers *w, uint32_t last_seq)
{
    const char *p = atomic_load_explicit(&w->pf_ptr, memory_order_relaxed);
    size_t n = atomic_load_explicit(&w->pf_bytes, memory_order_relaxed);
    for (size_t o = 0; o < n; o += 64) {
        if ((o & 4095) == 0 && job_is_new(atomic_load_explicit(&w->state, memory_order_relaxed), last_seq)) return;
        __builtin_prefetch(p + o, 0, 2);
    }
}

/* Returns a state holding an open job other than last_seq, or 0 on stop. */
static uint64_t wait_for_job(struct fc_workers *w, uint32_t last_seq)
{
    for (;;) {
        uint64_t deadline = now_ns() + atomic_load_explicit(&w->spin_ns, memory_order_relaxed);
        for (unsigned i = 1;; i++) {
            if (atomic_load_explicit(&w->stop, memory_order_acquire)) return 0;
            uint64_t s = atomic_load_explicit(&w->state, memory_order_acquire);
            if (job_is_new(s, last_seq)) return s;
            if (atomic_load_explicit(&w->pf_pending, memory_order_relaxed) &&
                atomic_exchange_explicit(&w->pf_pending, 0, memory_order_acquire))
                run_prefetch(w, last_seq);
            cpu_relax();
            if ((i & 63u) == 0 && now_ns() >= deadline) break;
        }
        atomic_fetch_add(&w->n_parked, 1);
        uint32_t word = atomic_load(&w->wake_word);
        uint64_t s = atomic_load(&w->state);
        if (!job_is_new(s, last_seq) && !atomic_load(&w->stop)) park_wait(w, &w->wake_word, word);
        atomic_fetch_sub(&w->n_parked, 1);
    }
}

static void *worker_main(void *p)
{
    struct fc_worker_slot *slot = p;
    struct fc_workers *w = slot->pool;
    int index = slot->index;
    tls_pool = w;
    tls_index = index;
    uint32_t last_seq = 0;
    for (;;) {
        uint64_t s = wait_for_job(w, last_seq);
        if (s == 0) break;
        uint32_t seq = (uint32_t)(s >> 32);
        last_seq = seq;
        /* join: only while the job we saw is still open */
        bool joined = false;
        while ((uint32_t)(s >> 32) == seq) {
            if (atomic_compare_exchange_weak(&w->state, &s, s + 1)) {
                joined = true;
                break;
            }
        }
        if (!joined) continue;
        fc_chunk_fn fn = w->fn;
        void *arg = w->arg;
        int64_t n = w->n_chunks;
        for (;;) {
            int64_t c = atomic_fetch_add_explicit(&w->next, 1, memory_order_relaxed);
            if (c >= n) break;
            fn(arg, c, index);
        }
        uint64_t prev = atomic_fetch_sub(&w->state, 1);
        if ((prev & FC_ACTIVE_MASK) == 1 && !((prev >> 32) & 1u)) {
            /* the last to leave a closed job: the caller may be parked */
            atomic_fetch_add(&w->done_word, 1);
            if (atomic_load(&w->caller_parked)) park_wake(w, &w->done_word, 1);
        }
    }
    return NULL;
}

static void stop_threads(struct fc_workers *w)
{
    atomic_store(&w->stop, true);
    atomic_fetch_add(&w->wake_word, 1);
    park_wake(w, &w->wake_word, INT_MAX);
    for (int i = 0; i < w->n_started; i++) pthread_join(w->threads[i], NULL);
    w->n_started = 0;
}

fc_workers *fc_workers_new(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    /* aligned_alloc: the struct keeps its hot atomics on separate lines */
    size_t size = (sizeof(struct fc_workers) + 63) / 64 * 64;
    struct fc_workers *w = aligned_alloc(64, size);
    if (!w) return NULL;
    memset(w, 0, size);
    w->n = n_threads;
    atomic_init(&w->state, 0);
    atomic_init(&w->next, 0);
    atomic_init(&w->wake_word, 0);
    atomic_init(&w->n_parked, 0);
    atomic_init(&w->stop, false);
    atomic_init(&w->done_word, 0);
    atomic_init(&w->caller_parked, 0);
    atomic_init(&w->spin_ns, FC_SPIN_DEFAULT_NS);
    atomic_init(&w->pf_pending, 0);
    atomic_init(&w->pf_ptr, NULL);
    atomic_init(&w->pf_bytes, 0);
    int err = pthread_mutex_init(&w->run_lock, NULL);
    if (err) {
        free(w);
        errno = err;
        return NULL;
    }
#if !FC_HAVE_FUTEX
    pthread_mutex_init(&w->park_mu, NULL);
    pthread_cond_init(&w->park_cv, NULL);
#endif
    if (n_threads > 1) {
        w->threads = calloc((size_t)n_threads - 1, sizeof *w->threads);
        w->slots = calloc((size_t)n_threads - 1, sizeof *w->slots);
        if (!w->threads || !w->slots) {
            err = ENOMEM;
            goto fail;
        }
        for (int i = 0; i < n_threads - 1; i++) {
            w->slots[i].pool = w;
            w->slots[i].index = i + 1;
            err = pthread_create(&w->threads[i], NULL, worker_main, &w->slots[i]);
            if (err) goto fail;
            w->n_started++;
        }
    }
    return w;
fail:
    fc_workers_free(w);
    errno = err;
    return NULL;
}

void fc_workers_free(fc_workers *w)
{
    if (!w) return;
    stop_threads(w);
    pthread_mutex_destroy(&w->run_lock);
#if !FC_HAVE_FUTEX
    pthread_cond_destroy(&w->park_cv);
    pthread_mutex_destroy(&w->park_mu);
#endif
    free(w->threads);
    free(w->slots);
    free(w);
}

int fc_workers_count(const fc_workers *w) { return w ? w->n : 1; }

static void run_inline(fc_workers *w, int64_t n_chunks, fc_chunk_fn fn, void *arg)
{
    /* nested in a loop of the same pool: keep this thread's index, so
     * per-worker scratch stays private; otherwise the caller's index 0 */
    int index = (w && tls_pool == w) ? tls_index : 0;
    for (int64_t c = 0; c < n_chunks; c++) fn(arg, c, index);
}

void fc_workers_run(fc_workers *w, int64_t n_chunks, fc_chunk_fn fn, void *arg)
{
    if (n_chunks <= 0) return;
    if (!w || w->n_started == 0 || n_chunks == 1 || tls_pool) {
        run_inline(w, n_chunks, fn, arg);
        return;
    }
    pthread_mutex_lock(&w->run_lock);
    tls_pool = w;
    tls_index = 0;

    /* publish: closed with active == 0 here, so no worker reads the fields */
    w->fn = fn;
    w->arg = arg;
    w->n_chunks = n_chunks;
    atomic_store_explicit(&w->next, 0, memory_order_relaxed);
    uint64_t s = atomic_load_explicit(&w->state, memory_order_relaxed);
    atomic_store(&w->state, s + FC_SEQ_ONE); /* seq even -> odd: open */
    atomic_fetch_add(&w->wake_word, 1);
    if (atomic_load(&w->n_parked) > 0) {
        int64_t helpers = n_chunks - 1 < w->n_started ? n_chunks - 1 : w->n_started;
        park_wake(w, &w->wake_word, (int)helpers);
    }

    for (;;) {
        int64_t c = atomic_fetch_add_explicit(&w->next, 1, memory_order_relaxed);
        if (c >= n_chunks) break;
        fn(arg, c, 0);
    }

    /* close, then wait for the workers that joined */
    uint64_t prev = atomic_fetch_add(&w->state, FC_SEQ_ONE);
    if (prev & FC_ACTIVE_MASK) {
        uint64_t deadline = now_ns() + atomic_load_explicit(&w->spin_ns, memory_order_relaxed);
        for (unsigned i = 1; atomic_load_explicit(&w->state, memory_order_acquire) & FC_ACTIVE_MASK; i++) {
            cpu_relax();
            if ((i & 63u) == 0 && now_ns() >= deadline) {
                atomic_store(&w->caller_parked, 1);
                uint32_t word = atomic_load(&w->done_word);
                if (atomic_load(&w->state) & FC_ACTIVE_MASK) park_wait(w, &w->done_word, word);
                atomic_store(&w->caller_parked, 0);
            }
        }
    }

    tls_pool = NULL;
    pthread_mutex_unlock(&w->run_lock);
}

/* ---- default thread count ------------------------------------------------ */

static void threads_env_error(char *err, size_t errlen, const char *value, const char *why)
{
    if (err && errlen) snprintf(err, errlen, "FUCINA_THREADS='%s': %s", value, why);
}

/* Reads a small text file into buf (NUL-terminated); false when absent. */
static bool read_text(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t got = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[got] = '\0';
    return got > 0;
}

/* Strict unsigned decimal: digits only, no sign; false on overflow. */
static bool parse_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s)) return false;
    uint64_t v = 0;
    while (isdigit((unsigned char)*s)) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
        s++;
    }
    *p = s;
    *out = v;
    return true;
}

static bool read_long(const char *path, long *out)
{
    char buf[64];
    if (!read_text(path, buf, sizeof buf)) return false;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (end == buf || errno) return false;
    while (isspace((unsigned char)*end)) end++;
    if (*end) return false;
    *out = v;
    return true;
}

int fc_cpu_physical_cores(void)
{
#if defined(__linux__)
    DIR *d = opendir("/sys/devices/system/cpu");
    if (d) {
        /* distinct (package, die, core) triples among online CPUs */
        struct core { long pkg, die, core; } *seen = NULL;
        size_t n_seen = 0, cap = 0;
        bool ok = true;
        struct dirent *e;
        while (ok && (e = readdir(d))) {
            const char *nm = e->d_name;
            if (strncmp(nm, "cpu", 3) != 0 || !isdigit((unsigned char)nm[3])) continue;
            bool digits = true;
            for (const char *q = nm + 3; *q; q++) digits = digits && isdigit((unsigned char)*q);
            if (!digits) continue;
            char path[512];
            long v;
            snprintf(path, sizeof path, "/sys/devices/system/cpu/%s/online", nm);
            if (read_long(path, &v) && v == 0) continue; /* offline (cpu0 has no such file) */
            struct core c = {0, 0, 0};
            snprintf(path, sizeof path, "/sys/devices/system/cpu/%s/topology/core_id", nm);
            if (!read_long(path, &c.core)) {
                ok = false; /* no topology: fall back below */
                break;
            }
            snprintf(path, sizeof path, "/sys/devices/system/cpu/%s/topology/physical_package_id", nm);
            if (!read_long(path, &c.pkg)) c.pkg = 0;
            snprintf(path, sizeof path, "/sys/devices/system/cpu/%s/topology/die_id", nm);
            if (!read_long(path, &c.die)) c.die = 0;
            bool dup = false;
            for (size_t i = 0; i < n_seen && !dup; i++)
                dup = seen[i].pkg == c.pkg && seen[i].die == c.die && seen[i].core == c.core;
            if (dup) continue;
            if (n_seen == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                struct core *grown = realloc(seen, ncap * sizeof *grown);
                if (!grown) {
                    ok = false;
                    break;
                }
                seen = grown;
                cap = ncap;
            }
            seen[n_seen++] = c;
        }
        closedir(d);
        free(seen);
        if (ok && n_seen > 0) return n_seen > INT_MAX ? INT_MAX : (int)n_seen;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (n > INT_MAX ? INT_MAX : (int)n) : 0;
}

int fc_cpu_affinity_count(void)
{
#if defined(__linux__)
    for (int ncpu = 1024; ncpu <= (1 << 20); ncpu *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpu);
        if (!set) return 0;
        size_t size = CPU_ALLOC_SIZE(ncpu);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            int n = CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return n;
        }
        int e = errno;
        CPU_FREE(set);
        if (e != EINVAL) return 0; /* EINVAL: the kernel's mask is larger */
    }
#endif
    return 0;
}

int fc_cgroup_cpu_limit_from_text(const char *text)
{
    if (!text) return 0;
    const char *p = text;
    while (*p == ' ' || *p == '\t') p++;
    uint64_t quota = 0, period = 0;
    bool unlimited = false;
    if (strncmp(p, "max", 3) == 0) {
        unlimited = true;
        p += 3;
    } else if (!parse_u64(&p, &quota)) {
        return 0;
    }
    if (*p != ' ' && *p != '\t') return 0; /* a period must follow */
    while (*p == ' ' || *p == '\t') p++;
    if (!parse_u64(&p, &period)) return 0;
    while (isspace((unsigned char)*p)) p++;
    if (*p) return 0;
    if (unlimited || quota == 0 || period == 0) return 0;
    uint64_t n = quota / period + (quota % period != 0);
    return n > (uint64_t)INT_MAX ? INT_MAX : (int)n;
}

#if defined(__linux__)
/* cgroup v2: the cpu.max of this process's cgroup and its ancestors; the
 * tightest limit wins. Returns 0 when none is found or none limits. */
static int cgroup_v2_limit(void)
{
    char line[4096], rel[4096] = "";
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "0::", 3) == 0) {
                size_t len = strcspn(line + 3, "\n");
                memcpy(rel, line + 3, len);
                rel[len] = '\0';
                break;
            }
        }
        fclose(f);
    }
    int best = 0;
    char path[4200], text[128];
    for (;;) {
        size_t len = strlen(rel);
        while (len > 0 && rel[len - 1] == '/') rel[--len] = '\0';
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", rel);
        if (read_text(path, text, sizeof text)) {
            int n = fc_cgroup_cpu_limit_from_text(text);
            if (n > 0 && (best == 0 || n < best)) best = n;
        }
        if (len == 0) break;
        char *slash = strrchr(rel, '/');
        if (!slash) break;
        *slash = '\0';
    }
    return best;
}

static int cgroup_v1_limit(const char *dir)
{
    char path[256];
    long quota, period;
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    if (!read_long(path, &quota) || quota <= 0) return 0; /* -1: no limit */
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    if (!read_long(path, &period) || period <= 0) return 0;
    long n = quota / period + (quota % period != 0);
    return n > INT_MAX ? INT_MAX : (int)n;
}
#endif

int fc_cgroup_cpu_limit(void)
{
#if defined(__linux__)
    int n = cgroup_v2_limit();
    if (n > 0) return n;
    n = cgroup_v1_limit("/sys/fs/cgroup/cpu");
    if (n > 0) return n;
    return cgroup_v1_limit("/sys/fs/cgroup/cpu,cpuacct");
#else
    return 0;
#endif
}

int fc_default_threads(char *err, size_t errlen)
{
    const char *env = getenv("FUCINA_THREADS");
    if (env) {
        const char *p = env;
        while (isspace((unsigned char)*p)) p++;
        if (!*p) {
            threads_env_error(err, errlen, env, "empty; expected a positive integer");
            return -1;
        }
        uint64_t v;
        bool num = parse_u64(&p, &v);
        if (num)
            while (isspace((unsigned char)*p)) p++;
        if (!num || *p) {
            threads_env_error(err, errlen, env, "not a positive integer");
            return -1;
        }
        if (v == 0) {
            threads_env_error(err, errlen, env, "must be at least 1");
            return -1;
        }
        if (v > FC_MAX_THREADS) {
            threads_env_error(err, errlen, env, "more than the maximum of 1024 threads");
            return -1;
        }
        return (int)v;
    }
    int n = 0;
    int parts[3] = {fc_cpu_physical_cores(), fc_cpu_affinity_count(), fc_cgroup_cpu_limit()};
    for (int i = 0; i < 3; i++)
        if (parts[i] > 0 && (n == 0 || parts[i] < n)) n = parts[i];
    if (n < 1) n = 1;
    if (n > FC_MAX_THREADS) n = FC_MAX_THREADS;
    return n;
}

/* ---- spin before parking -------------------------------------------------- */

void fc_workers_set_spin(fc_workers *w, uint64_t ns)
{
    if (w) atomic_store_explicit(&w->spin_ns, ns, memory_order_relaxed);
}

int fc_workers_spin_from_env(uint64_t *ns, char *err, size_t errlen)
{
    *ns = FC_SPIN_DEFAULT_NS;
    const char *env = getenv("FUCINA_SPIN_US");
    if (!env) return 0;
    const char *p = env;
    while (isspace((unsigned char)*p)) p++;
    uint64_t v;
    bool num = *p && parse_u64(&p, &v);
    if (num)
        while (isspace((unsigned char)*p)) p++;
    if (!num || *p || v > FC_SPIN_MAX_US) {
        if (err && errlen)
            snprintf(err, errlen, "FUCINA_SPIN_US='%s': %s", env,
                     num && !*p ? "more than the maximum of 1000000 microseconds" : "not a non-negative integer");
        return -1;
    }
    *ns = v * 1000;
    return 0;
}

/* ---- prefetch hints ---------------------------------------------------------- */

void fc_workers_prefetch(fc_workers *w, const void *p, size_t bytes)
{
    if (!w || w->n_started == 0 || !p || !bytes) return;
    atomic_store_explicit(&w->pf_ptr, (const char *)p, memory_order_relaxed);
    atomic_store_explicit(&w->pf_bytes, bytes, memory_order_relaxed);
    atomic_store_explicit(&w->pf_pending, 1, memory_order_release);
}
