/* SPDX-License-Identifier: MIT */
/* Conformance-test harness shared by the generated kernel tests.
 *
 * The generated tests (build tree, tests/test_<family>.c) are thin: they call
 * an arm and its scalar twin on the same inputs and hand both outputs to
 * fct_compare(), which knows the registry's tolerance kinds and NaN policies.
 * This file holds everything that is not specific to one family: guarded and
 * misaligned buffers, seeded inputs with special values, ULP distances, and
 * failure reports that print seed, index, inputs and got/want in hex.
 */
#ifndef FCT_H
#define FCT_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/gen/fck_isa.h"
#include "fucina/half.h"

typedef enum fct_dtype {
    FCT_F32,
    FCT_F64,
    FCT_F16,
    FCT_BF16,
    FCT_I8,
    FCT_I32,
} fct_dtype;

typedef enum fct_tol_kind { FCT_TOL_EXACT, FCT_TOL_BOUND } fct_tol_kind;

/* Pass if exact, or within `ulp` units in the last place of the stored dtype,
 * or within abs + rel*|want|, or (reductions) within sum_bound*n*eps*sum|terms|. */
typedef struct fct_tol {
    fct_tol_kind kind;
    int ulp;
    double abs;
    double rel;
    double sum_bound;
} fct_tol;

typedef enum fct_nan {
    FCT_NAN_PROPAGATE, /* want NaN <=> got NaN */
    FCT_NAN_ANY,       /* where want is NaN, got may be anything */
    FCT_NAN_UNCHECKED, /* elements where either side is NaN are skipped */
} fct_nan;

/* splitmix64: tiny, seedable, good enough for test inputs. */
typedef struct fct_rng { uint64_t s; } fct_rng;
uint64_t fct_next(fct_rng *r);
double fct_uniform(fct_rng *r, double lo, double hi);
uint64_t fct_seed_of(const char *name);

/* A buffer with 64 canary bytes before and after, placed `misalign` bytes
 * past a 64-byte boundary. */
typedef struct fct_buf {
    unsigned char *base;
    unsigned char *data;
    size_t bytes;
} fct_buf;
fct_buf fct_buf_new(size_t bytes, size_t misalign);
int fct_buf_guards_ok(const fct_buf *b);
void fct_buf_free(fct_buf *b);

size_t fct_dtype_size(fct_dtype dt);
const char *fct_dtype_name(fct_dtype dt);
double fct_get(fct_dtype dt, const void *p, size_t i);
void fct_set(fct_dtype dt, void *p, size_t i, double v);

/* Fill n elements with values uniform in [lo, hi]; when `specials` is set,
 * about one element in eight is a special value (+-0, +-Inf, NaN, subnormal
 * of the dtype and of f32, largest finite, values that overflow f16/bf16). */
void fct_fill(fct_dtype dt, void *p, size_t n, double lo, double hi, int specials, fct_rng *r);
/* `specials` value: special values, but none near the largest finite value. */
#define FCT_SPECIALS_NO_HUGE 2

/* Compare got to want elementwise. `ins` are up to three input arrays (may
 * be NULL) printed on failure. `sum_abs` (may be NULL) gives, per element,
 * sum|terms| for sum_bound tolerances and `nterms` their count.
 * Returns 1 on success; on failure prints a report (with `what`, the seed and
 * the first few bad indices) and returns 0. */
int fct_compare(const char *what, uint64_t seed, fct_dtype dt, const void *got, const void *want, size_t n,
                fct_tol tol, fct_nan nan, fct_dtype in_dt, const void *const ins[3], const double *sum_abs,
                size_t nterms);

/* Is the arm's ISA executable here? If not, *why says why. */
int fct_isa_runnable(fck_isa isa, const char **why);

#endif /* FCT_H */
