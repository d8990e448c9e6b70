/* SPDX-License-Identifier: MIT */
/* Pinned thread teams for the all-cores roofline numbers (pthreads). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "fcb.h"

static cpu_set_t original_mask;
static int have_original;

static void save_mask(void)
{
    if (!have_original && sched_getaffinity(0, sizeof original_mask, &original_mask) == 0) have_original = 1;
}

int fcb_cpu_list(int *cpus, int max)
{
    save_mask();
    int n = 0;
    if (have_original)
        for (int c = 0; c < CPU_SETSIZE && n < max; c++)
            if (CPU_ISSET(c, &original_mask)) cpus[n++] = c;
    if (n == 0) cpus[n++] = 0;
    return n;
}

int fcb_pin_self(int cpu)
{
    save_mask();
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void fcb_unpin_self(void)
{
    if (have_original) pthread_setaffinity_np(pthread_self(), sizeof original_mask, &original_mask);
}

typedef struct worker {
    fcb_team_job *job;
    pthread_barrier_t *barrier;
    int tid, pinned;
    double *t0, *t1; /* [repeats] */
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    fcb_team_job *j = w->job;
    w->pinned = j->cpus ? fcb_pin_self(j->cpus[w->tid % j->ncpus]) == 0 : 0;
    if (j->setup) j->setup(w->tid, j->nthreads, j->ctx);
    for (int r = 0; r < j->repeats; r++) {
        pthread_barrier_wait(w->barrier);
        w->t0[r] = fcb_now();
        j->work(w->tid, j->nthreads, j->ctx);
        w->t1[r] = fcb_now();
    }
    return NULL;
}

int fcb_team_run(fcb_team_job *j)
{
    int n = j->nthreads, rc = 0;
    if (n < 1 || j->repeats < 1) return -1;
    worker *ws = calloc((size_t)n, sizeof *ws);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    double *t = calloc((size_t)n * (size_t)j->repeats * 2, sizeof *t);
    pthread_barrier_t barrier;
    if (!ws || !th || !t || pthread_barrier_init(&barrier, NULL, (unsigned)n) != 0) {
        free(ws);
        free(th);
        free(t);
        return -1;
    }
    int started = 0;
    for (int i = 0; i < n; i++) {
        ws[i] = (worker){j, &barrier, i, 0, t + (size_t)i * (size_t)j->repeats * 2,
                         t + (size_t)i * (size_t)j->repeats * 2 + j->repeats};
        if (pthread_create(&th[i], NULL, worker_main, &ws[i]) != 0) {
            rc = -1;
            break;
        }
        started++;
    }
    if (rc != 0) {
        /* The barrier counts n threads: the started ones would wait forever. */
        fprintf(stderr, "fucina-bench: cannot start thread %d of %d\n", started + 1, n);
        exit(FCB_EXIT_FAIL);
    }
    j->pinned = 1;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (!ws[i].pinned) j->pinned = 0;
    }
    for (int r = 0; r < j->repeats; r++) {
        double first = ws[0].t0[r], last = ws[0].t1[r];
        for (int i = 1; i < n; i++) {
            if (ws[i].t0[r] < first) first = ws[i].t0[r];
            if (ws[i].t1[r] > last) last = ws[i].t1[r];
        }
        j->times[r] = last - first;
    }
    pthread_barrier_destroy(&barrier);
    free(ws);
    free(th);
    free(t);
    return 0;
}
