/* SPDX-License-Identifier: MIT */
/* The header and footer of the suites that race a peer in this process
 * (quant, llm): one place for what both print before their table, so the
 * two stay comparable line by line. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fcb.h"

/* getloadavg's 1-minute figure, printed as "load average at WHEN: ...";
 * NaN (and no line) where the system does not say. */
static double print_load(const char *when)
{
    double load[3];
    if (getloadavg(load, 3) != 3) return NAN;
    printf("load average at %s: %.2f %.2f %.2f\n", when, load[0], load[1], load[2]);
    return load[0];
}

int fcb_suite_start(const fcb_suite_opts *o, int *peer, fcb_suite_env *e)
{
    fcb_machine_probe(&e->mach);
    fcb_machine_print(stdout, &e->mach);
    const char *why = NULL;
    if (*peer && !o->peer_available(&why)) {
        printf("%s peer skipped: %s\n", o->peer_name, why);
        *peer = 0;
    }
    int maxt = 1;
    for (int i = 0; i < o->nthreads; i++) maxt = o->threads[i] > maxt ? o->threads[i] : maxt;
    memset(&e->rl, 0, sizeof e->rl);
    e->rl.read.gbps_1 = e->rl.read.gbps_all = NAN;
    e->ncpus = fcb_cpu_list(e->cpus, (int)(sizeof e->cpus / sizeof e->cpus[0]));
    if (o->roofline) {
        fcb_probe_opts po = {.threads = maxt > 1 ? maxt : 0, .repeats = 3, .fma_time = 0.02,
                             .array_bytes = fcb_default_array_bytes(&e->mach), .all_fma_arms = 0, .copy = 0};
        if (fcb_probe_run(&po, e->cpus, e->ncpus, &e->rl)) {
            fprintf(stderr, "fucina-bench %s: roofline: out of memory\n", o->cmd);
            return FCB_EXIT_FAIL;
        }
        fcb_unpin_self(); /* the suite's first rounds run on any CPU, whatever the probe left */
        printf("roofline now: DRAM read %.1f GB/s (1 thread)", e->rl.read.gbps_1);
        if (maxt > 1) printf(", %.1f GB/s (%d threads)", e->rl.read.gbps_all, maxt);
        printf("; peak FMA %.1f GFLOP/s (1 thread)", e->rl.peak_1);
        printf("\n");
    }
    e->load_start = print_load("start");
    return FCB_EXIT_OK;
}

/* Other processes on the machine take CPUs from both sides (and a peer's
 * spin-waiting threadpool suffers most when threads exceed free CPUs), so
 * the load is reported at both ends of the run. */
double fcb_suite_end(void)
{
    return print_load("end");
}
