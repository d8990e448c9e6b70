/* Dispatch: for every FUCINA_ISA cap, every slot reports the best arm at or
 * below the cap that this CPU supports; unknown caps are errors that list the
 * valid names; the fucina command honours the environment variable. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "fct_golden.h"
#include "fucina/dispatch.h"
#include "fucina/fucina.h"

static int rank_of(const char *isa)
{
    for (int i = 0; i < FCK_ISA_COUNT; i++)
        if (!strcmp(fck_isa_table[i].name, isa)) return fck_isa_table[fck_isa_table[i].cap].rank;
    return -1;
}

Test(dispatch, every_cap_picks_the_best_arm_at_or_below_it)
{
    for (int c = 0; c < FCK_ISA_COUNT; c++) {
        if (fck_isa_table[c].cap != (fck_isa)c) continue; /* variants are not cap names */
        char err[256];
        cr_assert(fck_dispatch_resolve(fck_isa_table[c].name, err, sizeof err), "cap %s rejected: %s",
                  fck_isa_table[c].name, err);
        int cap_rank = fck_isa_table[c].rank;
        for (size_t s = 0; s < FCK_SLOT_COUNT; s++) {
            const fck_slot_desc *d = &fck_slot_descs[s];
            /* the expected arm: the first candidate (best first) within the cap and supported */
            unsigned want = d->n_candidates - 1;
            for (unsigned k = 0; k < d->n_candidates; k++) {
                fck_isa isa = d->isas[k];
                if (fck_isa_table[fck_isa_table[isa].cap].rank <= cap_rank && fck_isa_supported(isa)) {
                    want = k;
                    break;
                }
            }
            fc_kernel_slot info;
            cr_assert_eq(fc_kernel_slot_get(s, &info), FC_OK);
            cr_expect_str_eq(info.symbol, d->symbols[want], "cap %s slot %s", fck_isa_table[c].name, d->slot);
            cr_expect(rank_of(info.isa) <= cap_rank, "cap %s slot %s: chose %s above the cap", fck_isa_table[c].name,
                      d->slot, info.isa);
            cr_expect(!strcmp(info.isa, "scalar") || fck_isa_supported(d->isas[want]));
        }
    }
    cr_assert_eq(fc_kernel_slot_get(FCK_SLOT_COUNT, &(fc_kernel_slot){0}), FC_ERR_INVALID_ARG);
}

Test(dispatch, unknown_cap_lists_the_valid_names)
{
    char err[512];
    cr_assert_not(fck_dispatch_resolve("avx1024", err, sizeof err));
    cr_expect(strstr(err, "avx1024") != NULL, "%s", err);
    cr_expect(strstr(err, "scalar") != NULL, "%s", err);
    for (int i = 0; i < FCK_ISA_COUNT; i++)
        if (fck_isa_table[i].cap == (fck_isa)i) cr_expect(strstr(err, fck_isa_table[i].name) != NULL, "%s", err);
    /* the fallback after an error is the scalar arm everywhere */
    for (size_t s = 0; s < FCK_SLOT_COUNT; s++) {
        fc_kernel_slot info;
        fc_kernel_slot_get(s, &info);
        cr_expect_str_eq(info.isa, "scalar");
    }
}

Test(dispatch, fucina_info_honours_fucina_isa)
{
    const char *cli = getenv("FUCINA_FUCINA_CLI");
    if (!cli) cr_skip_test("FUCINA_FUCINA_CLI is not set (run through ctest)");
    static char out[1 << 20];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "FUCINA_ISA=scalar '%s' info --slots 2>&1", cli);
    cr_assert_eq(fct_run(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "isa cap: scalar") != NULL, "%s", out);
    size_t slots = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "fck_", 4) == 0 || !strstr(line, " fck_")) continue;
        slots++;
        cr_expect(strstr(line, "__scalar_") != NULL, "not scalar: %s", line);
    }
    cr_expect_eq(slots, FCK_SLOT_COUNT);
    snprintf(cmd, sizeof cmd, "FUCINA_ISA=bogus '%s' info 2>&1", cli);
    cr_expect_eq(fct_run(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "bogus") && strstr(out, "valid values") && strstr(out, "scalar"), "%s", out);
}

/* An invalid FUCINA_ISA fails every context, as an invalid FUCINA_THREADS
 * does (it used to be reported only by `fucina info` while every kernel ran
 * scalar): fc_ctx_new returns NULL naming the variable, the value and the
 * valid names. Each Criterion test runs in a fresh process, so the table is
 * resolved here, after setenv. */
Test(dispatch, invalid_fucina_isa_fails_fc_ctx_new)
{
    cr_assert_eq(setenv("FUCINA_ISA", "AVX2", 1), 0);
    char err[512] = "";
    fc_ctx *ctx = fc_ctx_new(NULL, err, sizeof err);
    cr_assert_null(ctx, "a context despite FUCINA_ISA=AVX2");
    cr_expect(strstr(err, "FUCINA_ISA='AVX2'") && strstr(err, "valid values") && strstr(err, "scalar"), "%s", err);
    for (int i = 0; i < FCK_ISA_COUNT; i++)
        if (fck_isa_table[i].cap == (fck_isa)i) cr_expect(strstr(err, fck_isa_table[i].name) != NULL, "%s", err);
    cr_expect_eq(fc_dispatch_init(), FC_ERR_ENV);
}

Test(dispatch, invalid_fucina_isa_fails_the_cli)
{
    const char *cli = getenv("FUCINA_FUCINA_CLI");
    if (!cli) cr_skip_test("FUCINA_FUCINA_CLI is not set (run through ctest)");
    static char out[1 << 16];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "FUCINA_ISA=bogus '%s' demo spirals --optimizer sgd --steps 1 --min-accuracy 0 2>&1", cli);
    cr_expect_neq(fct_run(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "FUCINA_ISA='bogus'") && strstr(out, "valid values"), "%s", out);
}
