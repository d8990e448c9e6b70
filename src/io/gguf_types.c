/* SPDX-License-Identifier: MIT */
/* GGUF / ggml type tables. The ids, names and block sizes are not listed
 * here: they come from the dtypes (fc_dtype_from_ggml_type and the block
 * table in core/dtype_table.h, itself checked against src/quant and, in the
 * tests, against ggml), so a format is described in one place. Names are
 * the dtype's in upper case, as gguf-py and llama.cpp print them ("Q4_K",
 * "IQ2_XXS", "BF16"). The gaps are ids ggml removed (4, 5, 31-33, 36-38). */
#include "io/gguf_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>

#include "core/dtype_table.h"

static gguf_type_info types[FC_GGML_ID_LIMIT];
static char names[FC_GGML_ID_LIMIT][12];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void)
{
    for (uint32_t id = 0; id < FC_GGML_ID_LIMIT; id++) {
        fc_dtype dt;
        if (!fc_dtype_from_ggml_type(id, &dt)) continue;
        const char *n = fc_dtype_name(dt);
        size_t i = 0;
        for (; n[i] && i + 1 < sizeof names[id]; i++) names[id][i] = (char)toupper((unsigned char)n[i]);
        names[id][i] = 0;
        types[id] = (gguf_type_info){names[id], (uint32_t)fc_dtype_block_elems(dt), (uint32_t)fc_dtype_block_bytes(dt),
                                     (int)dt};
    }
}

const gguf_type_info *fc_gguf_type_info(uint32_t type)
{
    pthread_once(&once, build);
    if (type >= FC_GGML_ID_LIMIT || !types[type].name) return NULL;
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

int fc_gguf_type_of_dtype(fc_dtype dt) { return fc_dtype_ggml_type(dt); }

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
