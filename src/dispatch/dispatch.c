/* SPDX-License-Identifier: MIT */
/* Dispatch: detect once, resolve every slot once, cache (Highway's model);
 * cap by FUCINA_ISA (oneDNN's model: a cap, never a force, so an arm the CPU
 * lacks can never run); validate and report the choice (BLIS's model). */
#define _GNU_SOURCE
#include "dispatch/dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_features.h"
#include "fucina/dispatch.h"

static fck_table table;
static unsigned char chosen[FCK_SLOT_COUNT];
static fck_isa cap_isa;
static char cap_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

int fck_isa_supported(fck_isa isa)
{
    uint64_t need = fck_isa_table[isa].requires;
    return (fc_cpu_features_detect() & need) == need;
}

int fck_isa_twin_supported(fck_isa isa)
{
    uint64_t need = fck_isa_table[isa].twin_requires;
    return need != 0 && (fc_cpu_features_detect() & need) == need;
}

const char *fck_isa_missing_features(fck_isa isa)
{
    static _Thread_local char buf[256];
    uint64_t missing = fck_isa_table[isa].requires & ~fc_cpu_features_detect();
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < FCK_FEAT_COUNT && len < sizeof buf; i++)
        if (missing & (UINT64_C(1) << i))
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? ", " : "this CPU lacks ",
                                    fck_feature_names[i]);
    return buf;
}

int fck_isa_parse_cap(const char *name, fck_isa *out, char *err, size_t errlen)
{
    for (int i = 0; i < FCK_ISA_COUNT; i++)
        if (fck_isa_table[i].cap == (fck_isa)i && strcmp(fck_isa_table[i].name, name) == 0) {
            *out = (fck_isa)i;
            return 1;
        }
    if (err && errlen) {
        size_t len = (size_t)snprintf(err, errlen, "FUCINA_ISA='%s' is not an ISA of this build; valid values:", name);
        for (int i = 0; i < FCK_ISA_COUNT && len < errlen; i++)
            if (fck_isa_table[i].cap == (fck_isa)i)
                len += (size_t)snprintf(err + len, errlen - len, " %s", fck_isa_table[i].name);
    }
    return 0;
}

static int usable(fck_isa isa)
{
    return fck_isa_table[fck_isa_table[isa].cap].rank <= fck_isa_table[cap_isa].rank && fck_isa_supported(isa);
}

static int resolve_with_cap(const char *cap, char *err, size_t errlen)
{
    fck_isa c = (fck_isa)(FCK_ISA_COUNT - 1); /* the highest rank: no cap */
    int ok = 1;
    if (cap && *cap && !fck_isa_parse_cap(cap, &c, err, errlen)) {
        c = FCK_ISA_SCALAR; /* safe fallback while the error is reported */
        ok = 0;
    }
    cap_isa = c;
    fck_table_resolve(&table, chosen, usable);
    return ok;
}

static void init(void)
{
    if (!resolve_with_cap(getenv("FUCINA_ISA"), cap_error, sizeof cap_error)) return;
    cap_error[0] = 0;
    if (getenv("FUCINA_VERBOSE_DISPATCH")) {
        for (size_t i = 0; i < FCK_SLOT_COUNT; i++)
            fprintf(stderr, "fucina: %s -> %s\n", fck_slot_descs[i].slot, fck_slot_descs[i].symbols[chosen[i]]);
    }
}

int fck_dispatch_resolve(const char *cap, char *err, size_t errlen)
{
    pthread_once(&once, init);
    return resolve_with_cap(cap, err, errlen);
}

const fck_table *fck_kernels(void)
{
    pthread_once(&once, init);
    return &table;
}

fck_isa fck_dispatch_chosen_isa(size_t slot)
{
    pthread_once(&once, init);
    return fck_slot_descs[slot].isas[chosen[slot]];
}

const char *fck_dispatch_chosen_tile(size_t slot)
{
    pthread_once(&once, init);
    return fck_slot_descs[slot].tiles[chosen[slot]];
}

int fck_tile_parse(const char *tile, size_t *mr, size_t *nr)
{
    size_t a = 0, b = 0;
    const char *p = tile;
    if (!p) return -1;
    while (*p >= '0' && *p <= '9' && a < 100000) a = a * 10 + (size_t)(*p++ - '0');
    if (*p++ != 'x') return -1;
    while (*p >= '0' && *p <= '9' && b < 100000) b = b * 10 + (size_t)(*p++ - '0');
    if (*p || a == 0 || b == 0) return -1;
    *mr = a;
    *nr = b;
    return 0;
}

size_t fck_dispatch_slot_index(const char *name)
{
    for (size_t i = 0; i < FCK_SLOT_COUNT; i++)
        if (strcmp(fck_slot_descs[i].slot, name) == 0) return i;
    return FCK_SLOT_COUNT;
}

/* ---- public API ---- */

fc_status fc_dispatch_init(void)
{
    pthread_once(&once, init);
    return cap_error[0] ? FC_ERR_ENV : FC_OK;
}

const char *fc_dispatch_error(void)
{
    pthread_once(&once, init);
    return cap_error[0] ? cap_error : NULL;
}

const char *fc_dispatch_cap(void)
{
    pthread_once(&once, init);
    if (cap_isa == (fck_isa)(FCK_ISA_COUNT - 1)) {
        /* no cap: report the best ISA this CPU supports */
        for (int i = FCK_ISA_COUNT - 1; i >= 0; i--)
            if (fck_isa_table[i].cap == (fck_isa)i && fck_isa_supported((fck_isa)i)) return fck_isa_table[i].name;
    }
    return fck_isa_table[cap_isa].name;
}

size_t fc_kernel_slot_count(void) { return FCK_SLOT_COUNT; }

fc_status fc_kernel_slot_get(size_t i, fc_kernel_slot *out)
{
    if (i >= FCK_SLOT_COUNT || !out) return FC_ERR_INVALID_ARG;
    pthread_once(&once, init);
    const fck_slot_desc *d = &fck_slot_descs[i];
    unsigned k = chosen[i];
    out->slot = d->slot;
    out->kernel = d->kernel;
    out->family = d->family;
    out->dtype = d->dtype;
    out->isa = fck_isa_table[d->isas[k]].name;
    out->symbol = d->symbols[k];
    out->tile = d->tiles[k];
    return FC_OK;
}

const char *fc_cpu_feature_name(size_t i) { return i < FCK_FEAT_COUNT ? fck_feature_names[i] : NULL; }

int fc_cpu_feature_present(size_t i)
{
    return i < FCK_FEAT_COUNT && (fc_cpu_features_detect() >> i) & 1;
}

const char *fc_isa_name(size_t i) { return i < FCK_ISA_COUNT ? fck_isa_table[i].name : NULL; }

int fc_isa_supported(size_t i) { return i < FCK_ISA_COUNT && fck_isa_supported((fck_isa)i); }
