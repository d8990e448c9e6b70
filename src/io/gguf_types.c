/* GGUF / ggml type tables. Block sizes from ggml's type traits (checked
 * against gguf-py's GGML_QUANT_SIZES); the gaps are ids ggml removed. */
#include "io/gguf_internal.h"

#include <stdint.h>

static const gguf_type_info types[] = {
    [FC_GGML_F32] = {"F32", 1, 4, FC_F32},        [FC_GGML_F16] = {"F16", 1, 2, FC_F16},
    [FC_GGML_Q4_0] = {"Q4_0", 32, 18, -1},        [FC_GGML_Q4_1] = {"Q4_1", 32, 20, -1},
    [FC_GGML_Q5_0] = {"Q5_0", 32, 22, -1},        [FC_GGML_Q5_1] = {"Q5_1", 32, 24, -1},
    [FC_GGML_Q8_0] = {"Q8_0", 32, 34, -1},        [FC_GGML_Q8_1] = {"Q8_1", 32, 36, -1},
    [FC_GGML_Q2_K] = {"Q2_K", 256, 84, -1},       [FC_GGML_Q3_K] = {"Q3_K", 256, 110, -1},
    [FC_GGML_Q4_K] = {"Q4_K", 256, 144, -1},      [FC_GGML_Q5_K] = {"Q5_K", 256, 176, -1},
    [FC_GGML_Q6_K] = {"Q6_K", 256, 210, -1},      [FC_GGML_Q8_K] = {"Q8_K", 256, 292, -1},
    [FC_GGML_IQ2_XXS] = {"IQ2_XXS", 256, 66, -1}, [FC_GGML_IQ2_XS] = {"IQ2_XS", 256, 74, -1},
    [FC_GGML_IQ3_XXS] = {"IQ3_XXS", 256, 98, -1}, [FC_GGML_IQ1_S] = {"IQ1_S", 256, 50, -1},
    [FC_GGML_IQ4_NL] = {"IQ4_NL", 32, 18, -1},    [FC_GGML_IQ3_S] = {"IQ3_S", 256, 110, -1},
    [FC_GGML_IQ2_S] = {"IQ2_S", 256, 82, -1},     [FC_GGML_IQ4_XS] = {"IQ4_XS", 256, 136, -1},
    [FC_GGML_I8] = {"I8", 1, 1, FC_I8},           [FC_GGML_I16] = {"I16", 1, 2, FC_I16},
    [FC_GGML_I32] = {"I32", 1, 4, FC_I32},        [FC_GGML_I64] = {"I64", 1, 8, FC_I64},
    [FC_GGML_F64] = {"F64", 1, 8, FC_F64},        [FC_GGML_IQ1_M] = {"IQ1_M", 256, 56, -1},
    [FC_GGML_BF16] = {"BF16", 1, 2, FC_BF16},     [FC_GGML_TQ1_0] = {"TQ1_0", 256, 54, -1},
    [FC_GGML_TQ2_0] = {"TQ2_0", 256, 66, -1},     [FC_GGML_MXFP4] = {"MXFP4", 32, 17, -1},
};

const gguf_type_info *fc_gguf_type_info(uint32_t type)
{
    if (type >= sizeof types / sizeof types[0] || !types[type].name) return NULL;
    return &types[type];
}

const char *fc_ggml_type_name(uint32_t type)
{
    const gguf_type_info *t = fc_gguf_type_info(type);
    return t ? t->name : NULL;
}

int fc_ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    const gguf_type_info *t = fc_gguf_type_info(type);
    if (!t) return 0;
    if (block_elems) *block_elems = t->blck;
    if (block_bytes) *block_bytes = t->bytes;
    return 1;
}

int fc_gguf_type_of_dtype(fc_dtype dt)
{
    switch (dt) {
    case FC_F32: return FC_GGML_F32;
    case FC_F16: return FC_GGML_F16;
    case FC_BF16: return FC_GGML_BF16;
    case FC_F64: return FC_GGML_F64;
    case FC_I8: return FC_GGML_I8;
    case FC_I16: return FC_GGML_I16;
    case FC_I32: return FC_GGML_I32;
    case FC_I64: return FC_GGML_I64;
    case FC_U8:
    case FC_BOOL: return -1;
    }
    return -1;
}

static const char *const vnames[] = {"UINT8", "INT8",  "UINT16", "INT16",  "UINT32", "INT32", "FLOAT32",
                                     "BOOL",  "STRING", "ARRAY", "UINT64", "INT64",  "FLOAT64"};

const char *fc_gguf_vtype_name(int vtype)
{
    return vtype >= 0 && vtype <= FC_GGUF_F64 ? vnames[vtype] : "?";
}

size_t fc_gguf_vtype_size(uint32_t vtype)
{
    switch (vtype) {
    case FC_GGUF_U8: case FC_GGUF_I8: case FC_GGUF_BOOL: return 1;
    case FC_GGUF_U16: case FC_GGUF_I16: return 2;
    case FC_GGUF_U32: case FC_GGUF_I32: case FC_GGUF_F32: return 4;
    case FC_GGUF_U64: case FC_GGUF_I64: case FC_GGUF_F64: return 8;
    default: return 0;
    }
}

int fc_gguf_tensor_nbytes(const gguf_type_info *ti, int n_dims, const int64_t *ne, uint64_t *out, const char **why)
{
    /* The element count must fit in int64 (ggml_nelements), checked step by
     * step so that no product wraps (#27203). */
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 1) return *why = "a dimension is < 1", 0;
        if (n > INT64_MAX / ne[i]) return *why = "the element count overflows int64", 0;
        n *= ne[i];
    }
    if (ne[0] % ti->blck != 0) return *why = "ne[0] is not a multiple of the type's block size", 0;
    uint64_t blocks = (uint64_t)n / ti->blck;
    if (blocks > UINT64_MAX / ti->bytes || blocks * ti->bytes > (uint64_t)INT64_MAX)
        return *why = "the byte size overflows", 0;
    *out = blocks * ti->bytes;
    return 1;
}
