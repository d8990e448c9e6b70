/* SPDX-License-Identifier: MIT */
/* `fucina-bench roofline`: this machine's limits, measured in this run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "fcb.h"
#include "fucina/dispatch.h"

static void help(FILE *f)
{
    fprintf(f,
            "usage: fucina-bench roofline [--threads N] [--repeats R] [--fma-ms MS] [--array-mib MIB]\n"
            "                             [--no-copy] [--json FILE]\n"
            "\n"
            "Measures this machine's limits with generated probe arms (registry/bench.yaml):\n"
            "  peak f32 FMA   every runnable fck_f32_peak_fma arm (independent FMA chains) on 1 pinned\n"
            "                 thread and on N pinned threads; the best arm is the peak;\n"
            "  DRAM read      the dispatched f32_stream_read arm summing arrays >= 8x the LLC;\n"
            "  DRAM copy      the dispatched f32_neg arm (read x, write y; write-allocate not counted).\n"
            "Every figure is the best of R repeats (the median is printed in parentheses).\n"
            "\n"
            "  --threads N     threads for the all-cores figures (default: the CPUs this process may\n"
            "                  use; 0: 1-thread figures only). Threads are pinned when possible.\n"
            "  --repeats R     repeats of each probe (default 5, 1..%d)\n"
            "  --fma-ms MS     duration of one timed FMA call (default 50)\n"
            "  --array-mib MIB total size of the bandwidth arrays (default max(512, 8 x LLC), at most\n"
            "                  half the available memory)\n"
            "  --no-copy       skip the copy-style bandwidth\n"
            "  --json FILE     also write the results as JSON (FILE '-' is stdout)\n"
            "  -h, --help      this text\n",
            FCB_MAX_REPEATS);
}

void fcb_roofline_json(fcb_json *j, const fcb_roofline *r)
{
    fcb_json_begin(j, "roofline", '{');
    fcb_json_num(j, "peak_fma_gflops_1thread", r->peak_1);
    fcb_json_num(j, "peak_fma_gflops_all", r->peak_all);
    fcb_json_str(j, "peak_fma_symbol", r->peak_arm ? r->peak_arm->symbol : NULL);
    fcb_json_num(j, "dram_read_gbps_1thread", r->read.gbps_1);
    fcb_json_num(j, "dram_read_gbps_all", r->read.gbps_all);
    fcb_json_str(j, "dram_read_symbol", r->read.arm ? r->read.arm->symbol : NULL);
    fcb_json_num(j, "dram_copy_gbps_1thread", r->copy.gbps_1);
    fcb_json_num(j, "dram_copy_gbps_all", r->copy.gbps_all);
    fcb_json_str(j, "dram_copy_symbol", r->copy.arm ? r->copy.arm->symbol : NULL);
    fcb_json_int(j, "threads", r->threads);
    fcb_json_bool(j, "pinned", r->pinned);
    fcb_json_int(j, "array_bytes", (long long)r->array_bytes);
    fcb_json_end(j, '}');
}

static void print_bw(const char *what, const fcb_bw_result *b, int threads)
{
    if (!b->arm) {
        printf("  %-5s (no arm in this build)\n", what);
        return;
    }
    printf("  %-5s %-36s %7.1f (%5.1f)", what, b->arm->symbol, b->gbps_1, b->med_1);
    if (threads > 0) printf("   %7.1f (%5.1f)", b->gbps_all, b->med_all);
    printf("\n");
}

static void json_fma(fcb_json *j, const fcb_fma_result *f, int threads, double best, double med)
{
    fcb_json_begin(j, NULL, '{');
    fcb_json_str(j, "probe", "peak_fma");
    fcb_json_str(j, "symbol", f->arm->symbol);
    fcb_json_str(j, "isa", fcb_isa_name(f->arm->isa));
    fcb_json_str(j, "tile", f->arm->tile);
    fcb_json_int(j, "threads", threads);
    fcb_json_num(j, "gflops", best);
    fcb_json_num(j, "gflops_median", med);
    fcb_json_end(j, '}');
}

static void json_bw(fcb_json *j, const char *probe, const fcb_bw_result *b, int threads, double best, double med)
{
    fcb_json_begin(j, NULL, '{');
    fcb_json_str(j, "probe", probe);
    fcb_json_str(j, "symbol", b->arm->symbol);
    fcb_json_str(j, "isa", fcb_isa_name(b->arm->isa));
    fcb_json_int(j, "threads", threads);
    fcb_json_num(j, "bytes_per_pass", b->bytes);
    fcb_json_num(j, "gbps", best);
    fcb_json_num(j, "gbps_median", med);
    fcb_json_end(j, '}');
}

int fcb_cmd_roofline(int argc, char **argv)
{
    fcb_argv a = {argc, 1, argv, "roofline"};
    const char *v, *json_path = NULL;
    long threads = -1, repeats = 5, array_mib = 0;
    double fma_ms = 50;
    int copy = 1;
    while (a.i < argc) {
        if (fcb_arg_is(&a, "--help", NULL) || fcb_arg_is(&a, "-h", NULL)) {
            help(stdout);
            return FCB_EXIT_OK;
        } else if (fcb_arg_is(&a, "--threads", &v)) {
            if (!fcb_parse_int(a.cmd, "--threads", v, 0, 1024, &threads)) return FCB_EXIT_USAGE;
        } else if (fcb_arg_is(&a, "--repeats", &v)) {
            if (!fcb_parse_int(a.cmd, "--repeats", v, 1, FCB_MAX_REPEATS, &repeats)) return FCB_EXIT_USAGE;
        } else if (fcb_arg_is(&a, "--fma-ms", &v)) {
            if (!fcb_parse_double(a.cmd, "--fma-ms", v, 1, 10000, &fma_ms)) return FCB_EXIT_USAGE;
        } else if (fcb_arg_is(&a, "--array-mib", &v)) {
            if (!fcb_parse_int(a.cmd, "--array-mib", v, 1, 1 << 20, &array_mib)) return FCB_EXIT_USAGE;
        } else if (fcb_arg_is(&a, "--no-copy", NULL)) {
            copy = 0;
        } else if (fcb_arg_is(&a, "--json", &v)) {
            json_path = v;
        } else {
            fprintf(stderr, "fucina-bench roofline: unknown option '%s' (see fucina-bench roofline --help)\n",
                    argv[a.i]);
            return FCB_EXIT_USAGE;
        }
    }
    if (fc_dispatch_init() != FC_OK) {
        fprintf(stderr, "fucina-bench: %s\n", fc_dispatch_error());
        return FCB_EXIT_USAGE;
    }
    fcb_machine m;
    fcb_machine_probe(&m);
    int cpus[1024];
    int ncpus = fcb_cpu_list(cpus, 1024);
    fcb_probe_opts o = {threads >= 0 ? (int)threads : ncpus, (int)repeats, fma_ms * 1e-3,
                        array_mib ? (size_t)array_mib * FCB_MIB : fcb_default_array_bytes(&m), 1, copy};
    fcb_json j;
    if (json_path && fcb_json_open(&j, json_path) != 0) {
        fprintf(stderr, "fucina-bench roofline: --json: cannot write '%s'\n", json_path);
        return FCB_EXIT_FAIL;
    }
    printf("fucina-bench roofline\n");
    fcb_machine_print(stdout, &m);
    if (o.threads > ncpus)
        printf("note: %d threads on %d usable CPUs: the all-threads figures oversubscribe\n", o.threads, ncpus);
    fflush(stdout);

    fcb_roofline r;
    if (fcb_probe_run(&o, cpus, ncpus, &r) != 0) {
        fprintf(stderr, "fucina-bench roofline: out of memory for %zu MiB of bandwidth arrays (try --array-mib)\n",
                o.array_bytes / FCB_MIB);
        if (json_path) fcb_json_close(&j);
        return FCB_EXIT_FAIL;
    }

    char allt[32];
    snprintf(allt, sizeof allt, "%d thread%s", o.threads, o.threads == 1 ? "" : "s");
    printf("\npeak f32 FMA, GFLOP/s: best of %d (median)%s\n", o.repeats, r.pinned ? "" : "  [threads NOT pinned]");
    printf("  %-36s %-7s %6s  %15s", "arm", "isa", "chains", "1 thread");
    if (o.threads > 0) printf("  %15s", allt);
    printf("\n");
    for (int i = 0; i < r.n_fma; i++) {
        const fcb_fma_result *f = &r.fma[i];
        printf("  %-36s %-7s %6s  ", f->arm->symbol, fcb_isa_name(f->arm->isa), f->arm->tile);
        if (!f->runnable) {
            printf("skipped: %s\n", f->why);
            continue;
        }
        printf("%7.1f (%5.1f)", f->gflops_1, f->med_1);
        if (o.threads > 0) printf("  %7.1f (%5.1f)", f->gflops_all, f->med_all);
        printf("\n");
    }
    printf("  peak: %.1f GFLOP/s on 1 core", r.peak_1);
    if (o.threads > 0) printf(", %.1f on %s", r.peak_all, allt);
    printf(" (%s)\n", r.peak_arm ? r.peak_arm->symbol : "no runnable peak_fma arm");

    char arr[32], llc[32];
    fcb_fmt_bytes(arr, sizeof arr, (double)o.array_bytes);
    fcb_fmt_bytes(llc, sizeof llc, (double)m.llc);
    printf("\nDRAM bandwidth, GB/s: best of %d (median); arrays %s in total", o.repeats, arr);
    if (m.llc) printf(" = %.1f x LLC (%s)%s", (double)o.array_bytes / (double)m.llc, llc,
                      o.array_bytes < 8 * m.llc ? "  [less than 8 x LLC: caches inflate these figures]" : "");
    printf("\n  %-5s %-36s %15s", "", "arm", "1 thread");
    if (o.threads > 0) printf("  %15s", allt);
    printf("\n");
    print_bw("read", &r.read, o.threads);
    if (copy) print_bw("copy", &r.copy, o.threads);
    if (r.read.arm && isfinite(r.peak_1)) {
        printf("\nmachine balance (peak FMA / DRAM read): %.1f flop/byte on 1 core", r.peak_1 / r.read.gbps_1);
        if (o.threads > 0) printf(", %.1f on %s", r.peak_all / r.read.gbps_all, allt);
        printf("\n");
    }

    int rc = FCB_EXIT_OK;
    if (json_path) {
        fcb_json_begin(&j, NULL, '{');
        fcb_json_begin(&j, "header", '{');
        fcb_json_str(&j, "tool", "fucina-bench");
        fcb_json_str(&j, "command", "roofline");
        fcb_json_int(&j, "repeats", o.repeats);
        fcb_json_machine(&j, &m);
        fcb_roofline_json(&j, &r);
        fcb_json_end(&j, '}');
        fcb_json_begin(&j, "records", '[');
        for (int i = 0; i < r.n_fma; i++) {
            const fcb_fma_result *f = &r.fma[i];
            if (!f->runnable) {
                fcb_json_begin(&j, NULL, '{');
                fcb_json_str(&j, "probe", "peak_fma");
                fcb_json_str(&j, "symbol", f->arm->symbol);
                fcb_json_str(&j, "isa", fcb_isa_name(f->arm->isa));
                fcb_json_str(&j, "skipped", f->why);
                fcb_json_end(&j, '}');
                continue;
            }
            json_fma(&j, f, 1, f->gflops_1, f->med_1);
            if (o.threads > 0) json_fma(&j, f, o.threads, f->gflops_all, f->med_all);
        }
        const fcb_bw_result *bws[2] = {&r.read, &r.copy};
        const char *names[2] = {"dram_read", "dram_copy"};
        for (int k = 0; k < 2; k++) {
            if (!bws[k]->arm) continue;
            json_bw(&j, names[k], bws[k], 1, bws[k]->gbps_1, bws[k]->med_1);
            if (o.threads > 0) json_bw(&j, names[k], bws[k], o.threads, bws[k]->gbps_all, bws[k]->med_all);
        }
        fcb_json_end(&j, ']');
        fcb_json_end(&j, '}');
        if (fcb_json_close(&j) != 0) {
            fprintf(stderr, "fucina-bench roofline: --json: error writing '%s'\n", json_path);
            rc = FCB_EXIT_FAIL;
        }
    }
    return rc;
}
