/* SPDX-License-Identifier: MIT */
/* Element type facts. Every switch is exhaustive over fc_dtype so a new
 * dtype fails the build until each place handles it. The block formats
 * come from one table (core/dtype_table.h). */
#include "fucina/dtype.h"

#include <ctype.h>
#include <string.h>

#include "core/dtype_table.h"

typedef struct block_info {
    const char *name;
    int ggml;
    unsigned elems, bytes;
} block_info;

/* Row i describes dtype FC_Q4_0 + i. The enum below numbers the table's rows
 * from FC_Q4_0; asserting it equal to fc_dtype row by row pins the order (a
 * reordered enum or table fails the build). */
enum {
    ROW_BEFORE_FIRST = FC_Q4_0 - 1,
#define ENUM(U, l, id, be, bb) ROW_##U,
    FC_BLOCK_DTYPE_TABLE(ENUM)
#undef ENUM
    ROW_END
};
#define SAME(U, l, id, be, bb) _Static_assert((int)ROW_##U == (int)FC_##U, "dtype_table.h order differs from fc_dtype: " #l);
FC_BLOCK_DTYPE_TABLE(SAME)
#undef SAME
_Static_assert(FC_Q4_0 == FC_DTYPE_PLAIN_COUNT && (int)ROW_END == FC_DTYPE_COUNT && FC_Q2_0 == FC_DTYPE_COUNT - 1,
               "the block dtypes follow the element dtypes and end the enum");

#define ROW(U, l, id, be, bb) {#l, id, be, bb},
static const block_info blocks[] = {FC_BLOCK_DTYPE_TABLE(ROW)};
#undef ROW

static const block_info *block_of(fc_dtype t)
{
    return fc_dtype_is_block(t) ? &blocks[t - FC_Q4_0] : NULL;
}

size_t fc_dtype_size(fc_dtype t)
{
    switch (t) {
    case FC_BOOL: case FC_U8: case FC_I8: return 1;
    case FC_I16: case FC_F16: case FC_BF16: return 2;
    case FC_I32: case FC_F32: return 4;
    case FC_I64: case FC_F64: return 8;
    /* No element size: arithmetic that multiplies by it must fail loudly
     * (fct_alloc refuses 0) rather than address blocks as elements. */
    FC_CASE_BLOCK_DTYPES: return 0;
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
    FC_CASE_BLOCK_DTYPES: return block_of(t)->name;
    }
    return "?";
}

static int same_nocase(const char *a, const char *b)
{
    while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
    return *a == 0 && *b == 0;
}

int fc_dtype_parse(const char *name, fc_dtype *out)
{
    if (!name) return 0;
    for (int i = 0; i < FC_DTYPE_COUNT; i++) {
        if (strcmp(name, fc_dtype_name((fc_dtype)i)) == 0) {
            *out = (fc_dtype)i;
            return 1;
        }
    }
    /* "Q4_K", "IQ2_XXS": the spelling of GGUF type names. Block names differ
     * in more than case, so this is unambiguous. */
    for (int i = FC_DTYPE_PLAIN_COUNT; i < FC_DTYPE_COUNT; i++) {
        if (same_nocase(name, fc_dtype_name((fc_dtype)i))) {
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
    FC_CASE_BLOCK_DTYPES: return 0;
    }
    return 0;
}

int fc_dtype_is_integer(fc_dtype t)
{
    switch (t) {
    case FC_U8: case FC_I8: case FC_I16: case FC_I32: case FC_I64: return 1;
    case FC_BOOL: case FC_F16: case FC_BF16: case FC_F32: case FC_F64: return 0;
    FC_CASE_BLOCK_DTYPES: return 0;
    }
    return 0;
}

int fc_dtype_is_block(fc_dtype t) { return (int)t >= FC_Q4_0 && (int)t < FC_DTYPE_COUNT; }

size_t fc_dtype_block_elems(fc_dtype t)
{
    if (fc_dtype_is_block(t)) return block_of(t)->elems;
    return fc_dtype_size(t) ? 1 : 0;
}

size_t fc_dtype_block_bytes(fc_dtype t)
{
    if (fc_dtype_is_block(t)) return block_of(t)->bytes;
    return fc_dtype_size(t);
}

size_t fc_dtype_row_bytes(fc_dtype t, int64_t n)
{
    size_t be = fc_dtype_block_elems(t);
    if (be == 0 || n < 0 || (uint64_t)n % be != 0) return 0;
    return (size_t)((uint64_t)n / be) * fc_dtype_block_bytes(t);
}

int fc_dtype_ggml_type(fc_dtype t)
{
    switch (t) {
    case FC_F32: return FC_GGML_ID_F32;
    case FC_F16: return FC_GGML_ID_F16;
    case FC_BF16: return FC_GGML_ID_BF16;
    case FC_F64: return FC_GGML_ID_F64;
    case FC_I8: return FC_GGML_ID_I8;
    case FC_I16: return FC_GGML_ID_I16;
    case FC_I32: return FC_GGML_ID_I32;
    case FC_I64: return FC_GGML_ID_I64;
    case FC_BOOL: case FC_U8: return -1;
    FC_CASE_BLOCK_DTYPES: return block_of(t)->ggml;
    }
    return -1;
}

int fc_dtype_from_ggml_type(uint32_t ggml_type, fc_dtype *out)
{
    for (int i = 0; i < FC_DTYPE_COUNT; i++) {
        if (fc_dtype_ggml_type((fc_dtype)i) == (int64_t)ggml_type) {
            if (out) *out = (fc_dtype)i;
            return 1;
        }
    }
    return 0;
}
