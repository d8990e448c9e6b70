/* SPDX-License-Identifier: MIT */
/* fucina demo: small end-to-end examples. `demo spirals` trains the
 * two-spirals classifier (src/train/spirals.c) with each chosen optimizer
 * and reports the training accuracy; it fails (exit 1) when an optimizer
 * ends below --min-accuracy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "fucina/fucina.h"
#include "train/spirals.h"

static void demo_usage(FILE *f)
{
    fprintf(f,
            "usage: fucina demo spirals [options]\n\n"
            "Trains a 2-64-64-2 tanh MLP on two interleaved spirals (400 points),\n"
            "full batch, cross-entropy, warmup + cosine learning rate.\n\n"
            "Options:\n"
            "  --optimizer NAME   sgd, adam, adamw, muon or all (default all)\n"
            "  --steps N          optimizer steps (default: 2000 for sgd, 800 otherwise)\n"
            "  --lr X             peak learning rate (default per optimizer)\n"
            "  --seed N           initialisation seed (default 1)\n"
            "  --dropout P        dropout on the hidden layers while training (default 0)\n"
            "  --min-accuracy A   exit 1 if an optimizer ends below A (default 0.99)\n"
            "  --save PATH        write a checkpoint (safetensors) after --save-at steps\n"
            "  --save-at N        (default: the last step)\n"
            "  --resume PATH      continue from a checkpoint\n"
            "  --log N            print the loss every N steps\n");
}

static int parse_num(const char *opt, const char *s, double *out)
{
    char *end = NULL;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end) {
        fprintf(stderr, "fucina demo: %s needs a number, got '%s'\n", opt, s ? s : "(nothing)");
        return 0;
    }
    *out = v;
    return 1;
}

/* A finite number option within [lo, hi] ((lo, hi] when lo_open; whole when
 * integer), else 0 after saying which option, the value and what it must be. */
static int in_range(const char *opt, const char *s, double *out, double lo, int lo_open, double hi, int integer,
                    const char *what)
{
    double v;
    if (!parse_num(opt, s, &v)) return 0;
    if (!isfinite(v) || v < lo || (lo_open && v == lo) || v > hi || (integer && v != floor(v))) {
        fprintf(stderr, "fucina demo spirals: %s '%s' must be %s\n", opt, s, what);
        return 0;
    }
    *out = v;
    return 1;
}

int fc_cmd_demo(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        demo_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "spirals") != 0) {
        fprintf(stderr, "fucina demo: unknown demo '%s' (known: spirals)\n", argv[1]);
        return 2;
    }
    fc_spirals_config cfg = {.seed = 1};
    const char *which = "all";
    double min_acc = 0.99, v = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            demo_usage(stdout);
            return 0;
        }
        int num = 1;
        if (!strcmp(a, "--optimizer") && val) which = val;
        else if (!strcmp(a, "--save") && val) cfg.save_path = val;
        else if (!strcmp(a, "--resume") && val) cfg.resume_path = val;
        else if (!strcmp(a, "--steps")) { if (!in_range(a, val, &v, 1, 0, 1e15, 1, "an integer >= 1")) return 2; cfg.steps = (int64_t)v; }
        else if (!strcmp(a, "--lr")) { if (!in_range(a, val, &v, 0, 1, INFINITY, 0, "a finite number > 0")) return 2; cfg.lr = v; }
        else if (!strcmp(a, "--seed")) { if (!in_range(a, val, &v, 0, 0, 9007199254740992.0, 1, "an integer >= 0")) return 2; cfg.seed = (uint64_t)v; }
        else if (!strcmp(a, "--dropout")) { if (!in_range(a, val, &v, 0, 0, nextafter(1.0, 0.0), 0, "a number in [0, 1)")) return 2; cfg.dropout = v; }
        else if (!strcmp(a, "--min-accuracy")) { if (!in_range(a, val, &v, 0, 0, 1, 0, "a number in [0, 1]")) return 2; min_acc = v; }
        else if (!strcmp(a, "--save-at")) { if (!in_range(a, val, &v, 1, 0, 1e15, 1, "an integer >= 1")) return 2; cfg.save_at = (int64_t)v; }
        else if (!strcmp(a, "--log")) { if (!in_range(a, val, &v, 1, 0, 1e15, 1, "an integer >= 1")) return 2; cfg.log_every = (int64_t)v; cfg.log = stdout; }
        else {
            fprintf(stderr, "fucina demo spirals: unknown option or missing value: '%s'\n", a);
            return 2;
        }
        i += num;
    }
    fc_optim_kind kinds[FC_OPTIM_KIND_COUNT];
    int nk = 0;
    for (int k = 0; k < FC_OPTIM_KIND_COUNT; k++)
        if (!strcmp(which, "all") || !strcmp(which, fc_optim_kind_name((fc_optim_kind)k))) kinds[nk++] = (fc_optim_kind)k;
    if (!nk) {
        fprintf(stderr, "fucina demo spirals: unknown optimizer '%s' (sgd, adam, adamw, muon, all)\n", which);
        return 2;
    }
    char err[256];
    fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "fucina demo: %s\n", err);
        return 1;
    }
    int rc = 0;
    for (int k = 0; k < nk; k++) {
        fc_spirals_config c = cfg;
        c.optim = kinds[k];
        if (c.save_path && !c.save_at) c.save_at = c.steps > 0 ? c.steps : 0;
        fc_spirals_result r;
        if (fc_spirals_train(ctx, &c, &r) != FC_OK) {
            fprintf(stderr, "fucina demo spirals (%s): %s\n", fc_optim_kind_name(kinds[k]), fc_ctx_error(ctx));
            rc = 1;
            fc_ctx_clear_error(ctx);
            continue;
        }
        int ok = r.accuracy >= min_acc;
        printf("%-6s steps %5lld  loss %.6f  accuracy %.4f  params %016llx  %s\n", fc_optim_kind_name(kinds[k]),
               (long long)r.steps, r.loss, r.accuracy, (unsigned long long)r.param_hash, ok ? "ok" : "BELOW TARGET");
        if (!ok) rc = 1;
    }
    fc_ctx_free(ctx);
    return rc;
}
