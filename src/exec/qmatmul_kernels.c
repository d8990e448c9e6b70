/* SPDX-License-Identifier: MIT */
/* The integer kernels of each weight format, from the dispatch table: the
 * generated slots <fmt>_qgemm (prefill tile MR x NR), <fmt>_qgemms (small-M
 * tile, for the formats that have one), <fmt>_qgemv (MR = 1) and the
 * activation quantizers q8_0 / q8_1 / q8_K_quantize
 * (registry/quant.yaml). Re-read on every call, like exec/gemm.c: tests
 * re-resolve dispatch with an ISA cap. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "exec/qmatmul_internal.h"

int fc_qm_force_decode_flag;

/* Slot indices of <fmt>_qgemm / <fmt>_qgemv / <fmt>_qgemms, looked up once
 * (a name search over every slot would cost microseconds per call at M = 1). */
static size_t slot_idx[FCQ_TYPE_LIMIT][3];
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;

static void find_slots(void)
{
    for (uint32_t t = 0; t < FCQ_TYPE_LIMIT; t++) {
        const fcq_traits *tr = fcq_traits_of(t);
        char name[32];
        for (int v = 0; v < 3; v++) {
            static const char *const kind[3] = {"qgemm", "qgemv", "qgemms"};
            slot_idx[t][v] = FCK_SLOT_COUNT;
            if (!tr) continue;
            snprintf(name, sizeof name, "%s_%s", tr->name, kind[v]);
            slot_idx[t][v] = fck_dispatch_slot_index(name);
        }
    }
}

static int add_tile(fc_qm_plan *p, size_t s, fc_qgemm_fn fn)
{
    size_t mr, nr;
    if (s >= FCK_SLOT_COUNT || !fn || fck_tile_parse(fck_dispatch_chosen_tile(s), &mr, &nr) != 0) return -1;
    int i = p->ntiles++;
    /* Keep tiles in descending MR (the driver takes the first that fits). */
    while (i > 0 && p->tile[i - 1].mr < mr) {
        p->tile[i] = p->tile[i - 1];
        i--;
    }
    p->tile[i].mr = mr;
    p->tile[i].nr = nr;
    p->tile[i].fn = fn;
    return 0;
}

int fc_qm_plan_for(uint32_t wtype, fc_qm_plan *p)
{
    memset(p, 0, sizeof *p);
    p->wt = fcq_traits_of(wtype);
    if (!p->wt) return -1;
    p->at = fcq_traits_of(p->wt->dot_partner);
    if (fc_qm_force_decode_flag) return 0;
    const fck_table *kt = fck_kernels();
    fc_qgemm_fn gemm = NULL, gemv = NULL, small = NULL;
#define K(FMT, fmt)                   \
    case FCQ_##FMT:                   \
        gemm = kt->fmt##_qgemm;       \
        gemv = kt->fmt##_qgemv;       \
        break;
    /* formats with a small-M tile (registry/quant.yaml, kernel qgemms) */
#define KS(FMT, fmt)                  \
    case FCQ_##FMT:                   \
        gemm = kt->fmt##_qgemm;       \
        gemv = kt->fmt##_qgemv;       \
        small = kt->fmt##_qgemms;     \
        break;
    switch ((fcq_type)wtype) {
        KS(Q8_0, q8_0) KS(Q4_0, q4_0) K(Q4_1, q4_1) K(Q5_0, q5_0) K(Q5_1, q5_1) K(IQ4_NL, iq4_nl)
        K(Q2_K, q2_K) K(Q3_K, q3_K) KS(Q4_K, q4_K) KS(Q5_K, q5_K) KS(Q6_K, q6_K)
    /* No integer kernel (yet): the decode path. q8_1 and q8_K are activation
     * formats; the rest wait for their generated kernels. */
    case FCQ_Q8_1:
    case FCQ_Q8_K:
    case FCQ_IQ2_XXS:
    case FCQ_IQ2_XS:
    case FCQ_IQ3_XXS:
    case FCQ_IQ1_S:
    case FCQ_IQ3_S:
    case FCQ_IQ2_S:
    case FCQ_IQ4_XS:
    case FCQ_IQ1_M:
    case FCQ_TQ1_0:
    case FCQ_TQ2_0:
    case FCQ_MXFP4:
    case FCQ_NVFP4:
    case FCQ_Q1_0:
    case FCQ_Q2_0:
        return 0;
    }
#undef K
#undef KS
    fcq_type pt = p->wt->dot_partner;
    p->quant = pt == FCQ_Q8_0 ? kt->q8_0_quantize : pt == FCQ_Q8_1 ? kt->q8_1_quantize
             : pt == FCQ_Q8_K ? kt->q8_K_quantize : NULL;
    pthread_once(&slots_once, find_slots);
    if (!p->quant || add_tile(p, slot_idx[wtype][0], gemm) != 0) return p->ntiles = 0, 0;
    if (add_tile(p, slot_idx[wtype][1], gemv) != 0) return p->ntiles = 0, 0;
    /* The small-M tile only when its MR lies strictly between qgemv's and
     * qgemm's (on an ISA where it equals the prefill tile it adds nothing). */
    if (small && slot_idx[wtype][2] < FCK_SLOT_COUNT) {
        fc_qm_plan q = *p;
        if (add_tile(&q, slot_idx[wtype][2], small) == 0 && q.tile[1].mr < q.tile[0].mr && q.tile[1].mr > 1) *p = q;
    }
    if (p->ntiles == 3)
        snprintf(p->name, sizeof p->name, "int %zux%zu/%zux%zu/%zux%zu", p->tile[0].mr, p->tile[0].nr, p->tile[1].mr,
                 p->tile[1].nr, p->tile[2].mr, p->tile[2].nr);
    else
        snprintf(p->name, sizeof p->name, "int %zux%zu/%zux%zu", p->tile[0].mr, p->tile[0].nr,
                 p->tile[p->ntiles - 1].mr, p->tile[p->ntiles - 1].nr);
    return 0;
}
