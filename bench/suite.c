/* SPDX-License-Identifier: MIT */
/* `fucina-bench kernels`: every generated arm of the bench table, timed on
 * valid inputs, against the roofline measured at the start of the run. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "fcb.h"
#include "fucina/dispatch.h"
#include "quant/quant.h"

#define MAX_SIZES 32
#define MAX_FILTERS 64
#define GEMM_MIN_LD 64

typedef struct opts {
    const char *filters[MAX_FILTERS];
    int nfilters;
    int isa_set;
    fck_isa isa;
    size_t sizes[MAX_SIZES];
    int nsizes, sizes_set;
    long repeats;
    double min_ms, max_ms;
    int repeats_set, min_ms_set, max_ms_set;
    const char *json;
    int quick, compare_scalar, dispatch_only, list_only, no_roofline, no_pin;
    long kc;
} opts;

typedef struct record {
    const fcb_arm *arm;
    size_t n, rows, cols;
    fcb_timing t;
    double bytes, flops; /* per call, from the traffic model */
    double gbps, gflops;
    const char *basis;   /* roofline the fraction is of: "peak_fma", "dram_read", "dram_copy", NULL */
    double fraction;     /* NaN when there is nothing to compare with */
    double speedup;      /* vs the scalar arm of the slot, same size; NaN if not measured */
    double checksum;
    int reference;       /* a scalar arm measured only for --compare-scalar */
} record;

typedef struct suite {
    opts o;
    unsigned char *chosen; /* [fcb_arm_count]: the arm dispatch resolves its slot to */
    int chosen_only;       /* this size: time only those (--quick, large sizes) */
    fcb_machine m;
    fcb_roofline roof;
    int have_roof;
    record *recs;
    size_t nrecs, caprecs;
    int failed;
} suite;

static void help(FILE *f)
{
    fprintf(f,
            "usage: fucina-bench kernels [--filter PATTERN[,PATTERN...]] [--isa ISA] [--sizes N,N,...]\n"
            "                            [--repeats R] [--min-time MS] [--kc K] [--quick] [--dispatch-only]\n"
            "                            [--compare-scalar] [--no-roofline] [--no-pin] [--list] [--json FILE]\n"
            "\n"
            "Times every arm of the generated bench table (fcb_arms[], one per kernel x dtype x ISA x tile)\n"
            "on 64-byte aligned buffers of valid inputs (uniform in [0.5, 2]; integers in [-4, 4] for i8;\n"
            "quantized blocks of bytes 0x30-0x3B, so that every f16/f32 scale in them is a normal number),\n"
            "single-threaded and pinned. For each arm and size: median ns per call over R repeats (each\n"
            "repeat times enough calls to last --min-time), CV, GB/s and GFLOP/s from the family's traffic\n"
            "model, the fraction of the roofline measured at the start of the run (working set > LLC: the\n"
            "DRAM bandwidth of the same kind, copy-style for arms that write, read-only otherwise; else the\n"
            "1-core peak FMA rate), and the speedup over the scalar arm of the same slot and size.\n"
            "Arms whose ISA this CPU lacks are listed as skipped, with the missing features.\n"
            "\n"
            "  --filter P,...      keep arms whose symbol or slot contains P, or matches P if P is a glob\n"
            "                      (*, ?, [...]); several patterns: any matches. Examples: f32_add,\n"
            "                      'f32_*' (the f32 slots; plain f32_ also matches ..._to_f32__...), '*exp*avx2*'\n"
            "  --isa ISA           keep arms of this ISA only (exact name: ");
    fcb_print_isa_names(f);
    fprintf(f,
            ")\n"
            "  --sizes N,...       element counts (k, M, G: x1024); default 4096,262144,16M (in L1/L2,\n"
            "                      in L2/L3, out of cache). Row kernels (shape rows) use a rows x cols\n"
            "                      grid of about N elements. GEMM micro-kernels run at kc = --kc only.\n"
            "  --repeats R         timed repeats per arm and size (default 7; --quick 3)\n"
            "  --min-time MS       minimum duration of one repeat (default 5; --quick 2)\n"
            "  --max-time MS       when R repeats of one arm would last longer, time fewer (>= 3)\n"
            "                      (default 200; --quick 100; 0: no limit)\n"
            "  --kc K              depth of the GEMM micro-kernel calls (default 256)\n"
            "  --quick             sizes 4096,16M, 3 repeats of >= 2 ms, --dispatch-only; at sizes of 1M\n"
            "                      elements or more only the arm dispatch chooses on this CPU\n"
            "  --dispatch-only     only the tile of each ISA that dispatch uses\n"
            "  --compare-scalar    also time the scalar arm of every selected slot (when --isa or\n"
            "                      --filter left it out), for the speedup column\n"
            "  --no-roofline       skip the bandwidth/FMA probes at the start (no roofline column)\n"
            "  --no-pin            do not pin the benchmark thread to one CPU\n"
            "  --list              list the selected arms (and the skipped ones) without timing them\n"
            "  --json FILE         also write a header record (machine, roofline) and one record per\n"
            "                      (arm, size) as JSON (FILE '-' is stdout)\n"
            "  -h, --help          this text\n");
}

/* ---- selection --------------------------------------------------------------- */

static int has_glob(const char *p) { return strpbrk(p, "*?[") != NULL; }

static int filter_ok(const opts *o, const fcb_arm *a)
{
    if (o->nfilters == 0) return 1;
    for (int i = 0; i < o->nfilters; i++) {
        const char *f = o->filters[i];
        if (has_glob(f) ? (fnmatch(f, a->symbol, 0) == 0 || fnmatch(f, a->slot, 0) == 0)
                        : (strstr(a->symbol, f) || strstr(a->slot, f)))
            return 1;
    }
    return 0;
}

static int selected(const opts *o, const fcb_arm *a)
{
    return a->shape != FCB_SHAPE_PROBE && filter_ok(o, a) && (!o->isa_set || a->isa == o->isa) &&
           (!o->dispatch_only || a->is_dispatch);
}

/* A scalar arm timed only as the reference of selected arms of its slot. */
static int reference_only(const opts *o, const fcb_arm *a)
{
    if (!o->compare_scalar || a->isa != FCK_ISA_SCALAR || a->shape == FCB_SHAPE_PROBE || selected(o, a)) return 0;
    for (size_t i = 0; i < fcb_arm_count; i++) {
        const fcb_arm *b = &fcb_arms[i];
        if (b != a && strcmp(b->slot, a->slot) == 0 && selected(o, b) &&
            (a->is_dispatch || strcmp(a->tile, b->tile) == 0))
            return 1;
    }
    return 0;
}

static int wanted(const opts *o, const fcb_arm *a) { return selected(o, a) || reference_only(o, a); }

/* ---- geometry and buffers ------------------------------------------------- */

/* Row shapes: a near-square rows x cols grid of about n elements, cols a power of two <= 4096. */
static void rows_geometry(size_t n, size_t *rows, size_t *cols)
{
    size_t c = 1;
    while (c < 4096 && c * c < n) c *= 2;
    if (c > n) c = n;
    *cols = c;
    *rows = n / c ? n / c : 1;
}

typedef struct bufs {
    size_t cap; /* elements of the widest dtype (8 bytes) each buffer holds */
    void *x, *y, *z, *w;
    float *mask;
    const char *dtype;     /* what x, y, z, w hold now; NULL: nothing yet */
    const char *last_slot; /* the slot of the last arm run since y, z, w were filled, or NULL */
} bufs;

static void bufs_free(bufs *b)
{
    fcb_free(b->x);
    fcb_free(b->y);
    fcb_free(b->z);
    fcb_free(b->w);
    fcb_free(b->mask);
    memset(b, 0, sizeof *b);
}

static int bufs_alloc(bufs *b, size_t n)
{
    size_t rows, cols;
    rows_geometry(n, &rows, &cols);
    size_t side = rows > cols ? rows : cols;
    /* Row families may need a square of the longer side (a transposed
     * operand) and whole register panels past the last row or column. */
    size_t cap = (n > side * side ? n : side * side) + 64 * (side + 64);
    memset(b, 0, sizeof *b);
    b->cap = cap;
    b->x = fcb_alloc(cap * 8);
    b->y = fcb_alloc(cap * 8);
    b->z = fcb_alloc(cap * 8);
    b->w = fcb_alloc(cap * 8);
    b->mask = fcb_alloc(cap * sizeof(float));
    if (!b->x || !b->y || !b->z || !b->w || !b->mask) {
        bufs_free(b);
        return -1;
    }
    memset(b->mask, 0, cap * sizeof(float)); /* an additive mask of zeros */
    return 0;
}

/* x, y, z, w: all `cap` elements of x; the first n of the others (all when n is 0). */
static void bufs_fill(bufs *b, const char *dtype, size_t n)
{
    size_t m = n ? n : b->cap;
    if (!n) fcb_fill(dtype, b->x, b->cap, 0.5, 2.0, 1);
    fcb_fill(dtype, b->y, m, 0.5, 2.0, 2);
    fcb_fill(dtype, b->z, m, 0.5, 2.0, 3);
    fcb_fill(dtype, b->w, m, 0.5, 2.0, 4);
    b->dtype = dtype;
    b->last_slot = NULL;
}

/* ---- running one arm -------------------------------------------------------- */

typedef struct call_ctx {
    const fcb_arm *arm;
    fcb_args args;
} call_ctx;

static void call_arm(void *p)
{
    call_ctx *c = p;
    c->arm->run(&c->args);
}

static int parse_tile(const char *tile, size_t *mr, size_t *nr)
{
    char *end;
    unsigned long a = strtoul(tile, &end, 10);
    if (*end != 'x') return 0;
    unsigned long b = strtoul(end + 1, &end, 10);
    if (*end || a == 0 || b == 0) return 0;
    *mr = a;
    *nr = b;
    return 1;
}

static record *new_record(suite *s)
{
    if (s->nrecs == s->caprecs) {
        size_t cap = s->caprecs ? 2 * s->caprecs : 256;
        record *r = realloc(s->recs, cap * sizeof *r);
        if (!r) {
            fprintf(stderr, "fucina-bench kernels: out of memory\n");
            exit(FCB_EXIT_FAIL);
        }
        s->recs = r;
        s->caprecs = cap;
    }
    record *r = &s->recs[s->nrecs++];
    memset(r, 0, sizeof *r);
    r->fraction = r->speedup = NAN;
    return r;
}

/* The scalar reference of arm a at size n: the scalar arm of the slot with
 * the same tile, else the scalar arm dispatch uses. */
static const record *scalar_ref(const suite *s, const fcb_arm *a, size_t n)
{
    const record *same_tile = NULL, *dispatch = NULL;
    for (size_t i = 0; i < s->nrecs; i++) {
        const record *r = &s->recs[i];
        if (r->n != n || r->arm->isa != FCK_ISA_SCALAR || strcmp(r->arm->slot, a->slot) != 0) continue;
        if (strcmp(r->arm->tile, a->tile) == 0) same_tile = r;
        if (r->arm->is_dispatch) dispatch = r;
    }
    return same_tile ? same_tile : dispatch;
}

static void finish_record(suite *s, record *r, double footprint)
{
    const fcb_arm *a = r->arm;
    double t = r->t.median_s;
    r->gbps = r->bytes > 0 ? r->bytes / t * 1e-9 : NAN;
    r->gflops = r->flops > 0 ? r->flops / t * 1e-9 : NAN;
    if (s->have_roof) {
        int out_of_cache = s->m.llc ? footprint > (double)s->m.llc : footprint > 32.0 * FCB_MIB;
        if (out_of_cache && r->bytes > 0) {
            int copy = a->write > 0 && isfinite(s->roof.copy.gbps_1);
            double bw = copy ? s->roof.copy.gbps_1 : s->roof.read.gbps_1;
            r->basis = copy ? "dram_copy" : "dram_read";
            r->fraction = r->gbps / bw;
        } else if (!out_of_cache && r->flops > 0) {
            r->basis = "peak_fma";
            r->fraction = r->gflops / s->roof.peak_1;
        }
    }
    /* A rate ratio: the scalar reference of a register tile may have another
     * geometry (when its own tile was not timed), so another work per call. */
    const record *ref = scalar_ref(s, a, r->n);
    if (ref) {
        double w = r->flops > 0 ? r->flops : r->bytes > 0 ? r->bytes : 1;
        double wref = ref->flops > 0 ? ref->flops : ref->bytes > 0 ? ref->bytes : 1;
        r->speedup = (w / t) / (wref / ref->t.median_s);
    }
}

static void print_header_row(void)
{
    printf("  %-40s %10s %6s %8s %8s %12s %9s\n", "arm", "time/call", "cv%", "GB/s", "GFLOP/s", "roofline",
           "x scalar");
}

static void fmt_time(char *buf, size_t len, double s)
{
    if (s < 1e-5) snprintf(buf, len, "%.1f ns", s * 1e9);
    else if (s < 1e-2) snprintf(buf, len, "%.2f us", s * 1e6);
    else snprintf(buf, len, "%.2f ms", s * 1e3);
}

static void print_record(const record *r)
{
    char tm[24], gb[16] = "-", gf[16] = "-", roof[24] = "-", sp[16] = "-";
    fmt_time(tm, sizeof tm, r->t.median_s);
    if (isfinite(r->gbps)) snprintf(gb, sizeof gb, "%.2f", r->gbps);
    if (isfinite(r->gflops)) snprintf(gf, sizeof gf, "%.2f", r->gflops);
    if (isfinite(r->fraction))
        snprintf(roof, sizeof roof, "%5.1f%% %s", 100 * r->fraction,
                 !strcmp(r->basis, "peak_fma") ? "fma" : !strcmp(r->basis, "dram_copy") ? "copy" : "read");
    if (isfinite(r->speedup) && r->arm->isa != FCK_ISA_SCALAR) snprintf(sp, sizeof sp, "%.2fx", r->speedup);
    printf("  %-40s %10s %6.1f %8s %8s %12s %9s%s\n", r->arm->symbol, tm, 100 * r->t.cv, gb, gf, roof, sp,
           r->reference ? "  (reference)" : "");
    fflush(stdout);
}

static void run_vector_arm(suite *s, const fcb_arm *a, size_t n, bufs *b)
{
    /* Only y, z, w are ever written (x is every family's first input). An arm
     * that reads more than x gets fresh y, z, w when another slot's arm may
     * have left its outputs there (the arms of one slot leave the same kind
     * of values). */
    if (!b->dtype || strcmp(b->dtype, a->dtype) != 0) bufs_fill(b, a->dtype, 0);
    else if (a->read > 1 && b->last_slot && strcmp(b->last_slot, a->slot) != 0)
        bufs_fill(b, a->dtype, a->shape == FCB_SHAPE_ROWS ? b->cap : n);
    call_ctx c;
    memset(&c, 0, sizeof c);
    c.arm = a;
    double sink = 0;
    c.args.n = n;
    c.args.x = b->x;
    c.args.y = b->y;
    c.args.z = b->z;
    c.args.w = b->w;
    c.args.mask = b->mask;
    c.args.alpha = 0.75f;
    c.args.alpha_d = 0.75;
    c.args.sink = &sink;
    size_t n_eff = n;
    if (a->shape == FCB_SHAPE_ROWS) {
        rows_geometry(n, &c.args.rows, &c.args.cols);
        n_eff = c.args.rows * c.args.cols;
    } else {
        c.args.rows = 1;
        c.args.cols = n;
    }
    record *r = new_record(s);
    r->arm = a;
    r->reference = !selected(&s->o, a);
    r->n = n;
    r->rows = c.args.rows;
    r->cols = c.args.cols;
    r->t = fcb_measure(call_arm, &c, (int)s->o.repeats, s->o.min_ms * 1e-3, s->o.max_ms * 1e-3);
    b->last_slot = a->slot;
    r->bytes = (a->read + a->write) * (double)a->elem_size * (double)n_eff;
    r->flops = a->flops * (double)n_eff;
    r->checksum = sink + fcb_checksum(a->dtype, b->y, n_eff) + fcb_checksum(a->dtype, b->z, n_eff) +
                  fcb_checksum(a->dtype, b->w, n_eff);
    finish_record(s, r, r->bytes);
    print_record(r);
}

static void run_gemm_arm(suite *s, const fcb_arm *a)
{
    size_t mr, nr, kc = (size_t)s->o.kc;
    if (!parse_tile(a->tile, &mr, &nr)) {
        printf("  %-40s skipped: tile '%s' is not MRxNR\n", a->symbol, a->tile);
        return;
    }
    size_t ldc = nr > GEMM_MIN_LD ? nr : GEMM_MIN_LD, crows = mr > GEMM_MIN_LD ? mr : GEMM_MIN_LD;
    float *x = fcb_alloc(kc * mr * sizeof(float)), *y = fcb_alloc(kc * nr * sizeof(float));
    float *z = fcb_alloc(crows * ldc * sizeof(float));
    if (!x || !y || !z) {
        fprintf(stderr, "fucina-bench kernels: out of memory for %s\n", a->symbol);
        s->failed = 1;
    } else {
        fcq_type bt;
        if (fcq_type_parse(a->dtype, &bt)) { /* quantized tiles: blocks with normal scales */
            fcb_fill_block_bytes(x, kc * mr * sizeof(float), 5);
            fcb_fill_block_bytes(y, kc * nr * sizeof(float), 6);
        } else {
            fcb_fill("f32", x, kc * mr, 0.5, 2.0, 5);
            fcb_fill("f32", y, kc * nr, 0.5, 2.0, 6);
        }
        memset(z, 0, crows * ldc * sizeof(float));
        call_ctx c;
        memset(&c, 0, sizeof c);
        double sink = 0;
        c.arm = a;
        c.args = (fcb_args){.n = kc, .rows = mr, .cols = ldc, .x = x, .y = y, .z = z, .alpha = 1.0f,
                            .alpha_d = 1.0, .sink = &sink};
        record *r = new_record(s);
        r->arm = a;
        r->reference = !selected(&s->o, a);
        r->n = kc;
        r->rows = mr;
        r->cols = ldc;
        r->t = fcb_measure(call_arm, &c, (int)s->o.repeats, s->o.min_ms * 1e-3, s->o.max_ms * 1e-3);
        r->bytes = 0; /* in cache by construction: the roofline is the FMA peak */
        r->flops = 2.0 * (double)mr * (double)nr * (double)kc;
        r->checksum = sink + fcb_checksum("f32", z, crows * ldc);
        finish_record(s, r, (double)((mr + nr) * kc + mr * ldc) * sizeof(float));
        print_record(r);
    }
    fcb_free(x);
    fcb_free(y);
    fcb_free(z);
}

/* Runnable wanted arms of one slot [lo, hi) of fcb_arms, scalar arms first. */
static void run_slot(suite *s, size_t lo, size_t hi, int gemm, size_t n, bufs *b)
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = lo; i < hi; i++) {
            const fcb_arm *a = &fcb_arms[i];
            if ((a->isa == FCK_ISA_SCALAR) != (pass == 0)) continue;
            if (!wanted(&s->o, a) || !fck_isa_supported(a->isa)) continue;
            if (s->chosen_only && !s->chosen[i]) continue;
            if ((a->shape == FCB_SHAPE_GEMM) != gemm) continue;
            if (gemm) run_gemm_arm(s, a);
            else run_vector_arm(s, a, n, b);
        }
}

static void for_each_slot(suite *s, int gemm, size_t n, bufs *b)
{
    for (size_t lo = 0; lo < fcb_arm_count;) {
        size_t hi = lo + 1;
        while (hi < fcb_arm_count && strcmp(fcb_arms[hi].slot, fcb_arms[lo].slot) == 0) hi++;
        run_slot(s, lo, hi, gemm, n, b);
        lo = hi;
    }
}

/* ---- summary ------------------------------------------------------------------ */

/* Per size, ISA and dtype: the dispatched arms' speedup over scalar. */
static void print_summary(const suite *s)
{
    int printed = 0;
    for (int si = 0; si <= s->o.nsizes; si++) {
        for (int isa = 1; isa < FCK_ISA_COUNT; isa++) {
            const char *dtypes[8];
            int nd = 0;
            for (size_t i = 0; i < s->nrecs; i++) {
                const record *r = &s->recs[i];
                int is_gemm = r->arm->shape == FCB_SHAPE_GEMM;
                if ((si == s->o.nsizes) != is_gemm || (!is_gemm && r->n != s->o.sizes[si])) continue;
                if ((int)r->arm->isa != isa || !r->arm->is_dispatch || !isfinite(r->speedup)) continue;
                int seen = 0;
                for (int d = 0; d < nd; d++) seen |= !strcmp(dtypes[d], r->arm->dtype);
                if (!seen && nd < 8) dtypes[nd++] = r->arm->dtype;
            }
            for (int d = 0; d < nd; d++) {
                double logsum = 0, mn = INFINITY;
                const char *worst = "";
                int count = 0, ge4 = 0;
                for (size_t i = 0; i < s->nrecs; i++) {
                    const record *r = &s->recs[i];
                    int is_gemm = r->arm->shape == FCB_SHAPE_GEMM;
                    if ((si == s->o.nsizes) != is_gemm || (!is_gemm && r->n != s->o.sizes[si])) continue;
                    if ((int)r->arm->isa != isa || !r->arm->is_dispatch || !isfinite(r->speedup)) continue;
                    if (strcmp(r->arm->dtype, dtypes[d]) != 0) continue;
                    logsum += log(r->speedup);
                    count++;
                    ge4 += r->speedup >= 4;
                    if (r->speedup < mn) {
                        mn = r->speedup;
                        worst = r->arm->slot;
                    }
                }
                if (!printed++) {
                    printf("\nspeedup of the dispatched arms over scalar (geometric mean, minimum, slots >= 4x):\n");
                }
                char where[48];
                if (si == s->o.nsizes) snprintf(where, sizeof where, "gemm kc=%ld", s->o.kc);
                else snprintf(where, sizeof where, "n=%zu", s->o.sizes[si]);
                printf("  %-14s %-8s %-5s %7.2fx   min %6.2fx %-22s %3d/%d >= 4x\n", where,
                       fcb_isa_name((fck_isa)isa), dtypes[d], exp(logsum / count), mn, worst, ge4, count);
            }
        }
    }
}

/* ---- JSON ----------------------------------------------------------------------- */

static void write_json(const suite *s, fcb_json *j)
{
    fcb_json_begin(j, NULL, '{');
    fcb_json_begin(j, "header", '{');
    fcb_json_str(j, "tool", "fucina-bench");
    fcb_json_str(j, "command", "kernels");
    fcb_json_begin(j, "options", '{');
    fcb_json_begin(j, "filters", '[');
    for (int i = 0; i < s->o.nfilters; i++) fcb_json_str(j, NULL, s->o.filters[i]);
    fcb_json_end(j, ']');
    fcb_json_str(j, "isa", s->o.isa_set ? fcb_isa_name(s->o.isa) : NULL);
    fcb_json_begin(j, "sizes", '[');
    for (int i = 0; i < s->o.nsizes; i++) fcb_json_int(j, NULL, (long long)s->o.sizes[i]);
    fcb_json_end(j, ']');
    fcb_json_int(j, "repeats", s->o.repeats);
    fcb_json_num(j, "min_time_ms", s->o.min_ms);
    fcb_json_num(j, "max_time_ms", s->o.max_ms);
    fcb_json_int(j, "gemm_kc", s->o.kc);
    fcb_json_bool(j, "quick", s->o.quick);
    fcb_json_bool(j, "dispatch_only", s->o.dispatch_only);
    fcb_json_bool(j, "pinned", !s->o.no_pin);
    fcb_json_end(j, '}');
    fcb_json_machine(j, &s->m);
    if (s->have_roof) fcb_roofline_json(j, &s->roof);
    fcb_json_end(j, '}');
    fcb_json_begin(j, "records", '[');
    for (size_t i = 0; i < s->nrecs; i++) {
        const record *r = &s->recs[i];
        const fcb_arm *a = r->arm;
        fcb_json_begin(j, NULL, '{');
        fcb_json_str(j, "symbol", a->symbol);
        fcb_json_str(j, "slot", a->slot);
        fcb_json_str(j, "family", a->family);
        fcb_json_str(j, "isa", fcb_isa_name(a->isa));
        fcb_json_str(j, "tile", a->tile);
        fcb_json_str(j, "dtype", a->dtype);
        fcb_json_bool(j, "dispatch", a->is_dispatch);
        fcb_json_int(j, "n", (long long)r->n);
        fcb_json_int(j, "rows", (long long)r->rows);
        fcb_json_int(j, "cols", (long long)r->cols);
        fcb_json_num(j, "median_ns", r->t.median_s * 1e9);
        fcb_json_num(j, "min_ns", r->t.min_s * 1e9);
        fcb_json_num(j, "cv", r->t.cv);
        fcb_json_int(j, "calls_per_repeat", (long long)r->t.iters);
        fcb_json_int(j, "repeats", r->t.repeats);
        fcb_json_num(j, "bytes_per_call", r->bytes);
        fcb_json_num(j, "flops_per_call", r->flops);
        fcb_json_num(j, "gbps", r->gbps);
        fcb_json_num(j, "gflops", r->gflops);
        fcb_json_num(j, "roofline_fraction", r->fraction);
        fcb_json_str(j, "roofline_basis", r->basis);
        fcb_json_num(j, "speedup_vs_scalar", r->speedup);
        fcb_json_num(j, "checksum", r->checksum);
        if (r->reference) fcb_json_bool(j, "reference_only", 1);
        fcb_json_end(j, '}');
    }
    for (size_t i = 0; i < fcb_arm_count; i++) {
        const fcb_arm *a = &fcb_arms[i];
        if (!wanted(&s->o, a) || fck_isa_supported(a->isa)) continue;
        fcb_json_begin(j, NULL, '{');
        fcb_json_str(j, "symbol", a->symbol);
        fcb_json_str(j, "slot", a->slot);
        fcb_json_str(j, "isa", fcb_isa_name(a->isa));
        fcb_json_str(j, "tile", a->tile);
        fcb_json_str(j, "dtype", a->dtype);
        fcb_json_str(j, "skipped", fck_isa_missing_features(a->isa));
        fcb_json_end(j, '}');
    }
    fcb_json_end(j, ']');
    fcb_json_end(j, '}');
}

/* ---- the command ------------------------------------------------------------------ */

static int parse(int argc, char **argv, opts *o)
{
    fcb_argv a = {argc, 1, argv, "kernels"};
    const char *v;
    memset(o, 0, sizeof *o);
    o->repeats = 7;
    o->min_ms = 5;
    o->max_ms = 200;
    o->kc = 256;
    while (a.i < argc) {
        if (fcb_arg_is(&a, "--help", NULL) || fcb_arg_is(&a, "-h", NULL)) {
            help(stdout);
            exit(FCB_EXIT_OK);
        } else if (fcb_arg_is(&a, "--filter", &v)) {
            char *list = strdup(v);
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                if (o->nfilters == MAX_FILTERS) {
                    fprintf(stderr, "fucina-bench kernels: --filter: at most %d patterns\n", MAX_FILTERS);
                    return 0;
                }
                o->filters[o->nfilters++] = tok;
            }
            if (o->nfilters == 0) {
                fprintf(stderr, "fucina-bench kernels: --filter: empty pattern\n");
                return 0;
            }
        } else if (fcb_arg_is(&a, "--isa", &v)) {
            if (!fcb_isa_by_name(v, &o->isa)) {
                fprintf(stderr, "fucina-bench kernels: --isa: unknown ISA '%s' (this build has: ", v);
                fcb_print_isa_names(stderr);
                fprintf(stderr, ")\n");
                return 0;
            }
            o->isa_set = 1;
        } else if (fcb_arg_is(&a, "--sizes", &v)) {
            if (!fcb_parse_sizes(a.cmd, "--sizes", v, o->sizes, MAX_SIZES, &o->nsizes)) return 0;
            o->sizes_set = 1;
        } else if (fcb_arg_is(&a, "--repeats", &v)) {
            if (!fcb_parse_int(a.cmd, "--repeats", v, 1, FCB_MAX_REPEATS, &o->repeats)) return 0;
            o->repeats_set = 1;
        } else if (fcb_arg_is(&a, "--min-time", &v)) {
            if (!fcb_parse_double(a.cmd, "--min-time", v, 0, 60000, &o->min_ms)) return 0;
            o->min_ms_set = 1;
        } else if (fcb_arg_is(&a, "--max-time", &v)) {
            if (!fcb_parse_double(a.cmd, "--max-time", v, 0, 3600000, &o->max_ms)) return 0;
            o->max_ms_set = 1;
        } else if (fcb_arg_is(&a, "--kc", &v)) {
            if (!fcb_parse_int(a.cmd, "--kc", v, 1, 1 << 20, &o->kc)) return 0;
        } else if (fcb_arg_is(&a, "--json", &v)) {
            o->json = v;
        } else if (fcb_arg_is(&a, "--quick", NULL)) {
            o->quick = 1;
        } else if (fcb_arg_is(&a, "--dispatch-only", NULL)) {
            o->dispatch_only = 1;
        } else if (fcb_arg_is(&a, "--compare-scalar", NULL)) {
            o->compare_scalar = 1;
        } else if (fcb_arg_is(&a, "--no-roofline", NULL)) {
            o->no_roofline = 1;
        } else if (fcb_arg_is(&a, "--no-pin", NULL)) {
            o->no_pin = 1;
        } else if (fcb_arg_is(&a, "--list", NULL)) {
            o->list_only = 1;
        } else {
            fprintf(stderr, "fucina-bench kernels: unknown option '%s' (see fucina-bench kernels --help)\n",
                    argv[a.i]);
            return 0;
        }
    }
    if (o->quick) {
        o->dispatch_only = 1;
        if (!o->repeats_set) o->repeats = 3;
        if (!o->min_ms_set) o->min_ms = 2;
        if (!o->max_ms_set) o->max_ms = 100;
    }
    if (!o->sizes_set) {
        size_t def[] = {4096, 262144, 16 * FCB_MIB}, quick[] = {4096, 16 * FCB_MIB};
        const size_t *src = o->quick ? quick : def;
        o->nsizes = o->quick ? 2 : 3;
        memcpy(o->sizes, src, (size_t)o->nsizes * sizeof *src);
    }
    return 1;
}

static void list_arms(const suite *s, size_t *n_run, size_t *n_skip)
{
    *n_run = *n_skip = 0;
    for (size_t i = 0; i < fcb_arm_count; i++) {
        const fcb_arm *a = &fcb_arms[i];
        if (!wanted(&s->o, a)) continue;
        if (fck_isa_supported(a->isa)) {
            (*n_run)++;
            if (s->o.list_only)
                printf("  %-40s %-18s %-8s %-6s %-5s %s%s\n", a->symbol, a->slot, fcb_isa_name(a->isa), a->tile,
                       a->dtype, a->is_dispatch ? "dispatch" : "", reference_only(&s->o, a) ? " (reference)" : "");
        } else {
            (*n_skip)++;
        }
    }
}

static void print_skipped(const suite *s)
{
    int first = 1;
    for (size_t i = 0; i < fcb_arm_count; i++) {
        const fcb_arm *a = &fcb_arms[i];
        if (!wanted(&s->o, a) || fck_isa_supported(a->isa)) continue;
        if (first) printf("\nskipped (this CPU cannot run them):\n");
        first = 0;
        printf("  %-40s %s\n", a->symbol, fck_isa_missing_features(a->isa));
    }
}

int fcb_cmd_kernels(int argc, char **argv)
{
    static suite s;
    memset(&s, 0, sizeof s);
    if (!parse(argc, argv, &s.o)) return FCB_EXIT_USAGE;
    if (fc_dispatch_init() != FC_OK) {
        fprintf(stderr, "fucina-bench: %s\n", fc_dispatch_error());
        return FCB_EXIT_USAGE;
    }
    fcb_machine_probe(&s.m);
    size_t n_run, n_skip;
    if (s.o.list_only) printf("%-42s %-18s %-8s %-6s %-5s\n", "  arm", "slot", "isa", "tile", "dtype");
    list_arms(&s, &n_run, &n_skip);
    if (s.o.list_only) {
        print_skipped(&s);
        printf("\n%zu arms selected, %zu skipped\n", n_run, n_skip);
        return FCB_EXIT_OK;
    }
    if (n_run + n_skip == 0) {
        fprintf(stderr, "fucina-bench kernels: no arm matches the selection (see fucina-bench kernels --list)\n");
        return FCB_EXIT_USAGE;
    }
    fcb_json j;
    if (s.o.json && fcb_json_open(&j, s.o.json) != 0) {
        fprintf(stderr, "fucina-bench kernels: --json: cannot write '%s'\n", s.o.json);
        return FCB_EXIT_FAIL;
    }
    double t_start = fcb_now();
    s.chosen = calloc(fcb_arm_count ? fcb_arm_count : 1, 1);
    if (!s.chosen) return FCB_EXIT_FAIL;
    for (size_t i = 0; i < fc_kernel_slot_count(); i++) {
        fc_kernel_slot ks;
        if (fc_kernel_slot_get(i, &ks) != FC_OK) continue;
        for (size_t k = 0; k < fcb_arm_count; k++)
            if (strcmp(fcb_arms[k].symbol, ks.symbol) == 0) s.chosen[k] = 1;
    }
    int cpus[1024];
    int ncpus = fcb_cpu_list(cpus, 1024);
    printf("fucina-bench kernels: %zu arms, %d size%s, %ld repeats of >= %g ms%s\n", n_run, s.o.nsizes,
           s.o.nsizes == 1 ? "" : "s", s.o.repeats, s.o.min_ms, s.o.quick ? " (--quick)" : "");
    fcb_machine_print(stdout, &s.m);
    if (!s.o.no_roofline) {
        fcb_probe_opts po = {0, 5, 0.02, fcb_default_array_bytes(&s.m), 0, 1};
        fflush(stdout);
        if (fcb_probe_run(&po, cpus, ncpus, &s.roof) == 0) {
            s.have_roof = 1;
            printf("roofline (measured now, 1 thread): peak FMA %.1f GFLOP/s (%s); DRAM read %.1f GB/s, "
                   "copy %.1f GB/s\n",
                   s.roof.peak_1, s.roof.peak_arm ? s.roof.peak_arm->symbol : "-", s.roof.read.gbps_1,
                   s.roof.copy.gbps_1);
        } else {
            printf("roofline: could not allocate the bandwidth arrays; no roofline column\n");
        }
    }
    if (!s.o.no_pin) fcb_pin_self(cpus[0]);

    for (int si = 0; si < s.o.nsizes; si++) {
        size_t n = s.o.sizes[si], rows, cols;
        int any = 0;
        for (size_t i = 0; i < fcb_arm_count && !any; i++)
            any = wanted(&s.o, &fcb_arms[i]) && fck_isa_supported(fcb_arms[i].isa) &&
                  fcb_arms[i].shape != FCB_SHAPE_GEMM;
        if (!any) break;
        rows_geometry(n, &rows, &cols);
        s.chosen_only = s.o.quick && n >= FCB_MIB;
        printf("\nn = %zu elements (row kernels: %zu x %zu)%s\n", n, rows, cols,
               s.chosen_only ? "; --quick: only the arm dispatch chooses" : "");
        print_header_row();
        bufs b;
        if (bufs_alloc(&b, n) != 0) {
            fprintf(stderr, "fucina-bench kernels: out of memory for n = %zu; size skipped\n", n);
            s.failed = 1;
            continue;
        }
        for_each_slot(&s, 0, n, &b);
        bufs_free(&b);
    }
    s.chosen_only = 0;
    int any_gemm = 0;
    for (size_t i = 0; i < fcb_arm_count; i++)
        any_gemm |= wanted(&s.o, &fcb_arms[i]) && fck_isa_supported(fcb_arms[i].isa) &&
                    fcb_arms[i].shape == FCB_SHAPE_GEMM;
    if (any_gemm) {
        printf("\nGEMM micro-kernels: kc = %ld, C tile of ldc >= %d (in cache)\n", s.o.kc, GEMM_MIN_LD);
        print_header_row();
        for_each_slot(&s, 1, 0, NULL);
    }
    if (!s.o.no_pin) fcb_unpin_self();

    print_summary(&s);
    print_skipped(&s);
    double checksum = 0;
    for (size_t i = 0; i < s.nrecs; i++) checksum += s.recs[i].checksum;
    printf("\n%zu measurements, %zu arms skipped, %.1f s; output checksum %.6g\n", s.nrecs, n_skip,
           fcb_now() - t_start, checksum);
    int rc = s.failed ? FCB_EXIT_FAIL : FCB_EXIT_OK;
    if (s.o.json) {
        write_json(&s, &j);
        if (fcb_json_close(&j) != 0) {
            fprintf(stderr, "fucina-bench kernels: --json: error writing '%s'\n", s.o.json);
            rc = FCB_EXIT_FAIL;
        }
    }
    free(s.recs);
    free(s.chosen);
    return rc;
}
