/* SPDX-License-Identifier: MIT */
/* Internal side of dispatch: the resolved kernel table and ISA queries.
 * Runtime code calls kernels only through fck_kernels(). */
#ifndef FC_DISPATCH_DISPATCH_H
#define FC_DISPATCH_DISPATCH_H

#include <stddef.h>

#include "fucina/gen/fck_isa.h"
#include "fucina/gen/fck_kernels.h"

/* The resolved table (resolves on first call; thread-safe). */
const fck_table *fck_kernels(void);

/* Does this CPU (and OS) support the ISA / its test-only twin? */
int fck_isa_supported(fck_isa isa);
int fck_isa_twin_supported(fck_isa isa);
/* A static string naming the features the ISA needs and the CPU lacks. */
const char *fck_isa_missing_features(fck_isa isa);

/* Re-resolve with a cap ("avx2", NULL for none). Returns 0 and fills err on
 * an unknown name. For tests and tools; not safe while kernels run. */
int fck_dispatch_resolve(const char *cap, char *err, size_t errlen);

/* The ISA chosen for slot i (after resolution). */
fck_isa fck_dispatch_chosen_isa(size_t slot);
/* The tile string of the arm chosen for slot i ("64", "6x64"). */
const char *fck_dispatch_chosen_tile(size_t slot);
/* The index of the slot named `name` ("f32_gemm"), or FCK_SLOT_COUNT. */
size_t fck_dispatch_slot_index(const char *name);
/* A register tile "MRxNR" (e.g. the chosen tile of a gemm or qgemm slot):
 * 0 with *mr, *nr set, or -1 when it is not two positive decimals joined by x. */
int fck_tile_parse(const char *tile, size_t *mr, size_t *nr);

/* Parse a cap name; returns 0 (and fills err with the valid names) if unknown. */
int fck_isa_parse_cap(const char *name, fck_isa *out, char *err, size_t errlen);

#endif
