/* SPDX-License-Identifier: MIT */
/* Fucina: CPU features and the kernel dispatch table.
 *
 * Every (kernel, dtype) slot resolves once, on first use, to the best arm the
 * CPU and OS support. FUCINA_ISA=scalar|avx2|avx_vnni|avx512|neon caps the
 * choice (an arm above the cap is never chosen; a cap above what the CPU has
 * changes nothing). An unknown FUCINA_ISA value is an error: fc_ctx_new
 * fails with it (as with a bad FUCINA_THREADS), the table resolves with the
 * scalar cap and fc_dispatch_error() says what was wrong. */
#ifndef FUCINA_DISPATCH_H
#define FUCINA_DISPATCH_H

#include <stddef.h>

#include "fucina/export.h"
#include "fucina/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One slot of the dispatch table and the arm chosen for it. */
typedef struct fc_kernel_slot {
    const char *slot;   /* "f32_exp" */
    const char *kernel; /* "exp" */
    const char *family; /* "unary" */
    const char *dtype;  /* "f32" */
    const char *isa;    /* the chosen arm's ISA, "avx512" */
    const char *symbol; /* "fck_f32_exp__avx512_u64" */
    const char *tile;   /* elements per main-loop step ("64"), or a register tile ("6x32") */
} fc_kernel_slot;

/* Resolve the table now if it has not been (it resolves on first use anyway).
 * Returns FC_ERR_ENV if FUCINA_ISA is invalid. */
FC_API fc_status fc_dispatch_init(void);

/* NULL, or the message of an invalid FUCINA_ISA (names the valid values). */
FC_API const char *fc_dispatch_error(void);

/* The cap in force: the FUCINA_ISA value, or the best ISA of the CPU. */
FC_API const char *fc_dispatch_cap(void);

FC_API size_t fc_kernel_slot_count(void);
/* Fill *out for slot i; FC_ERR_INVALID_ARG if i is out of range. */
FC_API fc_status fc_kernel_slot_get(size_t i, fc_kernel_slot *out);

/* The architecture's known CPU features: name of feature i, and whether this
 * CPU (and OS) has it. NULL past the last one. */
FC_API const char *fc_cpu_feature_name(size_t i);
FC_API int fc_cpu_feature_present(size_t i);

/* The ISAs of this build: name of ISA i (NULL past the last), whether this
 * CPU supports it. */
FC_API const char *fc_isa_name(size_t i);
FC_API int fc_isa_supported(size_t i);

#ifdef __cplusplus
}
#endif
#endif
