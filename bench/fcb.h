/* SPDX-License-Identifier: MIT */
/* fucina-bench internals: what the harness's files share (one subject per
 * file; see bench/README.md). Nothing here is part of the library. */
#ifndef FCB_H
#define FCB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fck_bench_table.h"

#define FCB_EXIT_OK 0
#define FCB_EXIT_FAIL 1  /* a run-time failure (memory, output file) */
#define FCB_EXIT_USAGE 2 /* a bad command line */

#define FCB_KIB ((size_t)1024)
#define FCB_MIB ((size_t)1024 * 1024)

/* ---- clock.c: the one clock every measurement uses ---------------------- */
double fcb_now(void); /* seconds, CLOCK_MONOTONIC */

/* ---- stats.c ------------------------------------------------------------ */
double fcb_median(const double *v, size_t n);
double fcb_min(const double *v, size_t n);
double fcb_max(const double *v, size_t n);
double fcb_cv(const double *v, size_t n); /* stddev / mean, as a fraction (0 for n < 2) */

/* ---- measure.c: calibrated, repeated timing of one call ----------------- */
typedef void (*fcb_call_fn)(void *ctx);
#define FCB_MAX_REPEATS 1000
typedef struct fcb_timing {
    double median_s, min_s, cv; /* per call */
    size_t iters;               /* calls per repeat */
    int repeats;
} fcb_timing;
/* Calls fn until one batch lasts >= min_time_s (the first calls are the
 * warm-up), then times `repeats` batches of that many calls, or fewer (not
 * below 3) if they would last longer than max_time_s (0: no limit). */
fcb_timing fcb_measure(fcb_call_fn fn, void *ctx, int repeats, double min_time_s, double max_time_s);

/* ---- mem.c: buffers and their contents ---------------------------------- */
/* 64-byte aligned (2 MiB aligned and THP-advised when large); NULL on failure. */
void *fcb_alloc(size_t bytes);
void fcb_free(void *p);
/* Size in bytes of a dtype name ("f32", "f16", "bf16", "f64", "i8", "i32"), 0 if unknown. */
size_t fcb_dtype_size(const char *dtype);
/* Fill n elements with finite values uniform in [lo, hi] (integers in
 * [-4, 4] for i8/i32), from `seed`; cheap for large n (a pattern is tiled). */
int fcb_fill(const char *dtype, void *p, size_t n, double lo, double hi, uint64_t seed);
/* Fill nbytes of block-quantized operands (weights and activations of the
 * quantized kernels) with bytes whose every f16 and f32 field is normal. */
void fcb_fill_block_bytes(void *p, size_t nbytes, uint64_t seed);
/* A sum of up to 4096 evenly spaced elements, as doubles. */
double fcb_checksum(const char *dtype, const void *p, size_t n);

/* ---- threads.c: pinned thread teams -------------------------------------- */
/* The CPUs this process may run on (sched_getaffinity), at most max; >= 1. */
int fcb_cpu_list(int *cpus, int max);
/* Pin the calling thread to one CPU; returns 0 on success. */
int fcb_pin_self(int cpu);
/* Unpin: allow every CPU of the process's original mask. */
void fcb_unpin_self(void);

typedef struct fcb_team_job {
    int nthreads;
    const int *cpus; /* thread t runs on cpus[t % ncpus]; NULL: unpinned */
    int ncpus;
    int repeats;
    void (*setup)(int tid, int nthreads, void *ctx); /* once per thread, untimed (may be NULL) */
    void (*work)(int tid, int nthreads, void *ctx);  /* timed, `repeats` times */
    void *ctx;
    double *times; /* out, [repeats]: first start to last finish, seconds */
    int pinned;    /* out: every thread was pinned */
} fcb_team_job;
/* Runs the job on nthreads new threads (barrier before each repeat);
 * returns 0 on success. */
int fcb_team_run(fcb_team_job *job);

/* ---- machine.c: what the run happened on ------------------------------- */
typedef struct fcb_machine {
    char cpu_model[128];
    int cpus_online, cpus_allowed;
    size_t l1d, l2, llc; /* bytes, 0 if unknown */
    size_t mem_available; /* bytes, 0 if unknown */
    char date[32];        /* ISO 8601, UTC */
    char kernel[256];     /* uname -srm */
    char git[64];         /* FUCINA_GIT_DESCRIBE (env or compile define), or "" */
} fcb_machine;
void fcb_machine_probe(fcb_machine *m);
void fcb_machine_print(FILE *f, const fcb_machine *m);

/* ---- json.c: a small streaming JSON writer ------------------------------ */
typedef struct fcb_json {
    FILE *f;
    int depth;
    int first[16]; /* per depth: no member written yet */
    int err;
} fcb_json;
int fcb_json_open(fcb_json *j, const char *path); /* "-" is stdout; 0 on success */
int fcb_json_close(fcb_json *j);                  /* 0 on success */
void fcb_json_begin(fcb_json *j, const char *key, char bracket); /* '{' or '['; key NULL in arrays */
void fcb_json_end(fcb_json *j, char bracket);
void fcb_json_str(fcb_json *j, const char *key, const char *v); /* NULL -> null */
void fcb_json_num(fcb_json *j, const char *key, double v);       /* NaN/Inf -> null */
void fcb_json_int(fcb_json *j, const char *key, long long v);
void fcb_json_bool(fcb_json *j, const char *key, int v);
void fcb_json_machine(fcb_json *j, const fcb_machine *m); /* "machine": {...} */

/* ---- args.c: command-line values ---------------------------------------- */
typedef struct fcb_argv {
    int argc, i;
    char **argv;
    const char *cmd; /* "kernels", for messages */
} fcb_argv;
/* If argv[i] is `name` or `name=VALUE`, consume it (and its value) and return 1. */
int fcb_arg_is(fcb_argv *a, const char *name, const char **value);
/* Parsers: 0 and a message naming `flag` on stderr if the value is bad. */
int fcb_parse_int(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);
int fcb_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
/* "1,2,8": at most max integers, each in [lo, hi]; 0 after naming the flag,
 * the list and the rule on stderr. */
int fcb_parse_int_list(const char *cmd, const char *flag, const char *s, int lo, int hi, int *out, int max,
                       int *count);
/* "4096,256k,16M" (k, M, G: powers of 1024); at most max values, each >= 1. */
int fcb_parse_sizes(const char *cmd, const char *flag, const char *s, size_t *out, int max, int *count);
/* Does `name` pass a --filter list: contains one of the patterns, or
 * matches one that is a glob (has * ? or [)? An empty list keeps all. */
int fcb_name_matches(const char *const *filters, int n, const char *name);
/* Does an ISA of this build have this name? */
int fcb_isa_by_name(const char *name, fck_isa *out);
const char *fcb_isa_name(fck_isa isa);
void fcb_print_isa_names(FILE *f);
void fcb_fmt_bytes(char *buf, size_t len, double bytes); /* "48 MiB" */

/* ---- probes.c: the roofline probes (generated peak_fma family) ----------- */
typedef struct fcb_fma_result {
    const fcb_arm *arm;
    int runnable;
    const char *why; /* when not runnable */
    double gflops_1, gflops_all; /* best over repeats */
    double med_1, med_all;       /* median over repeats */
} fcb_fma_result;
typedef struct fcb_bw_result {
    const fcb_arm *arm; /* NULL if the build has no such arm */
    double bytes;       /* counted bytes per pass over the whole array set */
    double gbps_1, gbps_all, med_1, med_all;
} fcb_bw_result;
typedef struct fcb_roofline {
    int threads, pinned;
    size_t array_bytes;
    int n_fma;
    fcb_fma_result fma[16];
    double peak_1, peak_all; /* best arm */
    const fcb_arm *peak_arm;
    fcb_bw_result read, copy;
} fcb_roofline;
typedef struct fcb_probe_opts {
    int threads;         /* 0: 1-thread numbers only */
    int repeats;         /* per probe */
    double fma_time;     /* seconds per timed FMA call */
    size_t array_bytes;  /* total bytes of the bandwidth arrays */
    int all_fma_arms;    /* every runnable peak_fma arm (else the best ISA's only) */
    int copy;            /* measure the copy-style bandwidth too */
} fcb_probe_opts;
/* The best runnable arm of `slot` as resolved by the dispatch table, or NULL. */
const fcb_arm *fcb_dispatched_arm(const char *slot);
/* The default bandwidth array size: max(512 MiB, 8 x LLC), capped by memory. */
size_t fcb_default_array_bytes(const fcb_machine *m);
/* Measure; returns 0 on success (1 if memory could not be allocated). */
int fcb_probe_run(const fcb_probe_opts *o, const int *cpus, int ncpus, fcb_roofline *r);

/* A read-bandwidth probe for benches to interleave with their cases: a
 * shared VM's memory bandwidth moves by up to 2x between minutes, so a
 * fraction of a roofline measured once at the start compares different
 * machines. The probe runs the dispatched f32_stream_read arm over its own
 * array (array_bytes, first touched by the team) on `threads` pinned threads. */
typedef struct fcb_bw_probe fcb_bw_probe;
fcb_bw_probe *fcb_bw_probe_new(size_t array_bytes, int threads, const int *cpus, int ncpus); /* NULL: no arm or memory */
double fcb_bw_probe_read(fcb_bw_probe *p, int passes); /* GB/s, best of `passes` passes; NaN on failure */
void fcb_bw_probe_free(fcb_bw_probe *p);

/* ---- roofline.c: the `roofline` command, and the summary both commands report */
void fcb_roofline_json(fcb_json *j, const fcb_roofline *r); /* "roofline": {...} */

/* ---- suite_start.c: the header and footer of the suites racing a peer (quant, llm) */
typedef struct fcb_suite_opts {
    const char *cmd;                         /* "quant": names the suite in messages */
    const char *peer_name;                   /* "ggml": in "ggml peer skipped: WHY" */
    int (*peer_available)(const char **why); /* 0 and a reason when the peer cannot run */
    int roofline;                            /* run the roofline probe, print "roofline now:" */
    const int *threads;                      /* the suite's thread counts: the probe's */
    int nthreads;                            /* all-thread figure uses the largest */
} fcb_suite_opts;
typedef struct fcb_suite_env {
    fcb_machine mach;
    fcb_roofline rl;      /* read.gbps_1/_all NaN when the probe did not run */
    int cpus[256], ncpus; /* the CPUs this process may use (for fcb_bw_probe_new) */
    double load_start;    /* 1-minute load average at the start, NaN if unknown */
} fcb_suite_env;
/* Probes and prints the machine line, drops *peer (printing why) when the
 * peer is not available, runs and prints the roofline, prints the load
 * average; returns FCB_EXIT_OK, or FCB_EXIT_FAIL (message on stderr). */
int fcb_suite_start(const fcb_suite_opts *o, int *peer, fcb_suite_env *e);
/* Prints the load average at the end; returns its 1-minute figure (NaN if unknown). */
double fcb_suite_end(void);

/* ---- the commands ---------------------------------------------------------- */
int fcb_cmd_roofline(int argc, char **argv);
int fcb_cmd_kernels(int argc, char **argv);
int fcb_cmd_ops(int argc, char **argv); /* ops_gemm.c */
int fcb_cmd_train(int argc, char **argv); /* train.c */
int fcb_cmd_quant(int argc, char **argv); /* quant.c */
int fcb_cmd_quantize(int argc, char **argv); /* quantize.c */
int fcb_cmd_llm(int argc, char **argv); /* llm.c */
int fcb_cmd_serve(int argc, char **argv); /* serve.c */
int fcb_cmd_grammar(int argc, char **argv); /* grammar.c */

#endif /* FCB_H */
