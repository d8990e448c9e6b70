/* Element type facts. Every switch is exhaustive over fc_dtype so a new
 * dtype fails the build until each place handles it. */
#include "fucina/dtype.h"

#include <string.h>

size_t fc_dtype_size(fc_dtype t)
{
    switch (t) {
    case FC_BOOL: case FC_U8: case FC_I8: return 1;
    case FC_I16: case FC_F16: case FC_BF16: return 2;
    case FC_I32: case FC_F32: return 4;
    case FC_I64: case FC_F64: return 8;
    }
    return 0;
}

const char *fc_dtype_name(fc_dtype t)
{
    switch (t) {
    case FC_BOOL: return "bool";
    case FC_U8: return "u8";
    case FC_I8: return "i8";
    case FC_I16: return "i16";
    case FC_I32: return "i32";
    case FC_I64: return "i64";
    case FC_F16: return "f16";
    case FC_BF16: return "bf16";
    case FC_F32: return "f32";
    case FC_F64: return "f64";
    }
    return "?";
}

int fc_dtype_parse(const char *name, fc_dtype *out)
{
    for (int i = 0; i < FC_DTYPE_COUNT; i++) {
        if (name && strcmp(name, fc_dtype_name((fc_dtype)i)) == 0) {
            *out = (fc_dtype)i;
            return 1;
        }
    }
    return 0;
}

int fc_dtype_is_float(fc_dtype t)
{
    switch (t) {
    case FC_F16: case FC_BF16: case FC_F32: case FC_F64: return 1;
    case FC_BOOL: case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: return 0;
    }
    return 0;
}

int fc_dtype_is_integer(fc_dtype t)
{
    switch (t) {
    case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: return 1;
    case FC_BOOL: case FC_F16: case FC_BF16: case FC_F32: case FC_F64: return 0;
    }
    return 0;
}
