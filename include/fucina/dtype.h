/* Fucina: element types.
 *
 * Casting rules (fc_cast and every conversion inside an op):
 *   - float -> float rounds to nearest-even once (f32 -> f16/bf16 as in half.h);
 *   - float -> integer truncates toward zero and saturates to the target's
 *     range; NaN becomes 0;
 *   - integer -> integer saturates (i64 300 -> u8 255, -5 -> u8 0);
 *   - anything -> bool is (x != 0) (NaN is true); bool -> number is 0 or 1;
 *   - integer -> float rounds to nearest-even (i64 beyond 2^24 -> f32 loses bits).
 * No op promotes implicitly: operands of a binary op have the same dtype. */
#ifndef FUCINA_DTYPE_H
#define FUCINA_DTYPE_H

#include <stddef.h>

#include "fucina/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fc_dtype {
    FC_BOOL = 0, /* one byte, 0 or 1 */
    FC_U8,
    FC_I8,
    FC_I16,
    FC_I32,
    FC_I64,
    FC_F16,  /* fc_f16 storage; computed in f32, rounded once */
    FC_BF16, /* fc_bf16 storage; computed in f32, rounded once */
    FC_F32,
    FC_F64,
} fc_dtype;

#define FC_DTYPE_COUNT 10

/* Bytes per element; 0 for an invalid value. */
FC_API size_t fc_dtype_size(fc_dtype t);
/* "f32", "bf16", "bool", ...; "?" for an invalid value. */
FC_API const char *fc_dtype_name(fc_dtype t);
/* Parse a name; returns 0 when unknown. */
FC_API int fc_dtype_parse(const char *name, fc_dtype *out);
FC_API int fc_dtype_is_float(fc_dtype t);   /* f16 bf16 f32 f64 */
FC_API int fc_dtype_is_integer(fc_dtype t); /* u8 i8 i16 i32 i64 (not bool) */

#ifdef __cplusplus
}
#endif
#endif
