/* SPDX-License-Identifier: MIT */
/* Fucina: GGUF files (llama.cpp / ggml, versions 2 and 3).
 *
 * A file is: "GGUF", u32 version, u64 tensor count, u64 KV count; the KV
 * pairs (key string, u32 value type, value); the tensor infos (name, u32
 * n_dims, n_dims x u64 dims with ne[0] innermost, u32 ggml type, u64 offset
 * into the data section); padding to the alignment ("general.alignment",
 * u32, default 32); the data section. Everything is little-endian; strings
 * are a u64 length and the bytes (no NUL).
 *
 * Reading validates the whole header before anything is returned (rules in
 * docs/IO.md); a malformed file is an FC_ERR_FORMAT error (FC_ERR_IO for
 * read failures) whose message names the file, the field, its byte offset
 * and the reason. Split files (-0000N-of-0000M) are not handled. */
#ifndef FUCINA_GGUF_H
#define FUCINA_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/export.h"
#include "fucina/status.h"
#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_gguf fc_gguf;
typedef struct fc_gguf_writer fc_gguf_writer;

/* KV value types (the numbers are the file's). */
typedef enum fc_gguf_vtype {
    FC_GGUF_U8 = 0,
    FC_GGUF_I8 = 1,
    FC_GGUF_U16 = 2,
    FC_GGUF_I16 = 3,
    FC_GGUF_U32 = 4,
    FC_GGUF_I32 = 5,
    FC_GGUF_F32 = 6,
    FC_GGUF_BOOL = 7,
    FC_GGUF_STR = 8,
    FC_GGUF_ARR = 9,
    FC_GGUF_U64 = 10,
    FC_GGUF_I64 = 11,
    FC_GGUF_F64 = 12,
} fc_gguf_vtype;

/* ggml tensor type ids (the file's numbers; ids 4, 5, 31-33, 36-38 were
 * removed from ggml and are rejected). */
enum {
    FC_GGML_F32 = 0, FC_GGML_F16 = 1, FC_GGML_Q4_0 = 2, FC_GGML_Q4_1 = 3, FC_GGML_Q5_0 = 6, FC_GGML_Q5_1 = 7,
    FC_GGML_Q8_0 = 8, FC_GGML_Q8_1 = 9, FC_GGML_Q2_K = 10, FC_GGML_Q3_K = 11, FC_GGML_Q4_K = 12, FC_GGML_Q5_K = 13,
    FC_GGML_Q6_K = 14, FC_GGML_Q8_K = 15, FC_GGML_IQ2_XXS = 16, FC_GGML_IQ2_XS = 17, FC_GGML_IQ3_XXS = 18,
    FC_GGML_IQ1_S = 19, FC_GGML_IQ4_NL = 20, FC_GGML_IQ3_S = 21, FC_GGML_IQ2_S = 22, FC_GGML_IQ4_XS = 23,
    FC_GGML_I8 = 24, FC_GGML_I16 = 25, FC_GGML_I32 = 26, FC_GGML_I64 = 27, FC_GGML_F64 = 28, FC_GGML_IQ1_M = 29,
    FC_GGML_BF16 = 30, FC_GGML_TQ1_0 = 34, FC_GGML_TQ2_0 = 35, FC_GGML_MXFP4 = 39, FC_GGML_NVFP4 = 40,
    FC_GGML_Q1_0 = 41, FC_GGML_Q2_0 = 42,
};

#define FC_GGUF_READ 1               /* read the file into memory instead of mmap'ing it */
#define FC_GGUF_DEFAULT_ALIGNMENT 32
#define FC_GGUF_MAX_DIMS 4           /* GGML_MAX_DIMS */
#define FC_GGUF_MAX_NAME 63          /* tensor name bytes (ggml's GGML_MAX_NAME is 64 with the NUL) */

/* "F32", "Q4_K", ... ; NULL for an unknown id. */
FC_API const char *fc_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; 0 for an unknown id. */
FC_API int fc_ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
/* "UINT8", ..., "ARRAY"; "?" when invalid. */
FC_API const char *fc_gguf_vtype_name(int vtype);

/* ---- reading ---------------------------------------------------------------- */

/* Open and validate. Default: mmap (private, copy-on-write); FC_GGUF_READ
 * reads the file into memory. NULL + error in ctx on failure.
 *
 * Split models (llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf, keys
 * split.no / split.count / split.tensors.count): open the first file; the
 * others are found next to it, validated the same way, and their tensors
 * join this handle (metadata comes from the first file). Opening a later
 * split, a missing split, or splits that disagree is an error naming it. */
FC_API fc_gguf *fc_gguf_open(fc_ctx *ctx, const char *path, int flags);
/* 1 for a plain file, N for a model in N split files. */
FC_API int fc_gguf_split_count(const fc_gguf *g);
/* Tensors from fc_gguf_tensor stay valid after close. */
FC_API void fc_gguf_close(fc_gguf *g);

FC_API uint32_t fc_gguf_version(const fc_gguf *g);
FC_API uint32_t fc_gguf_alignment(const fc_gguf *g);
FC_API uint64_t fc_gguf_data_offset(const fc_gguf *g); /* file offset of the data section */

/* KV pairs in file order. */
FC_API int64_t fc_gguf_kv_count(const fc_gguf *g);
FC_API const char *fc_gguf_kv_key(const fc_gguf *g, int64_t i);   /* NULL out of range */
FC_API int fc_gguf_kv_type(const fc_gguf *g, int64_t i);          /* fc_gguf_vtype, -1 out of range */
FC_API int64_t fc_gguf_find_kv(const fc_gguf *g, const char *key); /* -1 when absent */

/* Typed getters by key. Absent key: FC_ERR_INVALID_ARG; another type:
 * FC_ERR_DTYPE naming the key and both types. No conversions. */
FC_API fc_status fc_gguf_get_u8(fc_gguf *g, const char *key, uint8_t *out);
FC_API fc_status fc_gguf_get_i8(fc_gguf *g, const char *key, int8_t *out);
FC_API fc_status fc_gguf_get_u16(fc_gguf *g, const char *key, uint16_t *out);
FC_API fc_status fc_gguf_get_i16(fc_gguf *g, const char *key, int16_t *out);
FC_API fc_status fc_gguf_get_u32(fc_gguf *g, const char *key, uint32_t *out);
FC_API fc_status fc_gguf_get_i32(fc_gguf *g, const char *key, int32_t *out);
FC_API fc_status fc_gguf_get_u64(fc_gguf *g, const char *key, uint64_t *out);
FC_API fc_status fc_gguf_get_i64(fc_gguf *g, const char *key, int64_t *out);
FC_API fc_status fc_gguf_get_f32(fc_gguf *g, const char *key, float *out);
FC_API fc_status fc_gguf_get_f64(fc_gguf *g, const char *key, double *out);
FC_API fc_status fc_gguf_get_bool(fc_gguf *g, const char *key, int *out);
/* A NUL-terminated copy owned by g (the value may itself contain NULs:
 * len, when not NULL, is the real length). */
FC_API fc_status fc_gguf_get_str(fc_gguf *g, const char *key, const char **out, size_t *len);
/* Arrays: element type and length. */
FC_API fc_status fc_gguf_get_arr(fc_gguf *g, const char *key, int *elem_type, uint64_t *n);
/* The elements of a non-string array, native layout (bool: one byte each),
 * owned by g; NULL data for an empty array. */
FC_API fc_status fc_gguf_get_arr_data(fc_gguf *g, const char *key, int elem_type, const void **data, uint64_t *n);
/* Element i of a string array. */
FC_API fc_status fc_gguf_get_arr_str(fc_gguf *g, const char *key, uint64_t i, const char **out, size_t *len);

/* Tensor infos in file order. */
typedef struct fc_gguf_tensor_info {
    const char *name;
    uint32_t type;           /* ggml type id */
    const char *type_name;   /* "F32", "Q4_K", ... */
    int n_dims;
    int64_t ne[FC_GGUF_MAX_DIMS]; /* GGUF order: ne[0] innermost; 1 past n_dims */
    uint64_t nbytes;
    uint64_t offset;         /* relative to the data section */
    const void *data;        /* the bytes (mapped or read) */
    int split;               /* split file holding the data: 0 the file opened, k its split k+1 */
} fc_gguf_tensor_info;

FC_API int64_t fc_gguf_tensor_count(const fc_gguf *g);
/* Returns 0 when i is out of range. */
FC_API int fc_gguf_tensor_info_at(const fc_gguf *g, int64_t i, fc_gguf_tensor_info *out);
FC_API int64_t fc_gguf_find_tensor(const fc_gguf *g, const char *name); /* -1 when absent */

/* The tensor `name` as a new fc_tensor: F32 F16 BF16 F64 I8 I16 I32 I64,
 * zero-copy over the file bytes (kept alive after close), or a copy when
 * they are not aligned to the element size. Block types (Q4_0, Q4_K, ...)
 * become block tensors of the matching dtype (fucina/qtensor.h), always
 * zero-copy. Axes positional, sizes = the GGUF dims reversed (row-major:
 * ne[0] is the last axis). */
FC_API fc_tensor *fc_gguf_tensor(fc_gguf *g, const char *name);

/* ---- writing ---------------------------------------------------------------- */

/* A file built in memory (version 3) and saved with llama.cpp's exact layout:
 * KVs and tensor infos in insertion order, padding to the alignment after
 * the infos, each tensor's data padded with zeros to the alignment. Errors
 * are returned (and recorded in ctx); a failed add leaves the writer as it
 * was. Duplicate keys or tensor names are rejected when added. */
FC_API fc_gguf_writer *fc_gguf_writer_new(fc_ctx *ctx);
FC_API void fc_gguf_writer_free(fc_gguf_writer *w);

FC_API fc_status fc_gguf_set_u8(fc_gguf_writer *w, const char *key, uint8_t v);
FC_API fc_status fc_gguf_set_i8(fc_gguf_writer *w, const char *key, int8_t v);
FC_API fc_status fc_gguf_set_u16(fc_gguf_writer *w, const char *key, uint16_t v);
FC_API fc_status fc_gguf_set_i16(fc_gguf_writer *w, const char *key, int16_t v);
FC_API fc_status fc_gguf_set_u32(fc_gguf_writer *w, const char *key, uint32_t v);
FC_API fc_status fc_gguf_set_i32(fc_gguf_writer *w, const char *key, int32_t v);
FC_API fc_status fc_gguf_set_u64(fc_gguf_writer *w, const char *key, uint64_t v);
FC_API fc_status fc_gguf_set_i64(fc_gguf_writer *w, const char *key, int64_t v);
FC_API fc_status fc_gguf_set_f32(fc_gguf_writer *w, const char *key, float v);
FC_API fc_status fc_gguf_set_f64(fc_gguf_writer *w, const char *key, double v);
FC_API fc_status fc_gguf_set_bool(fc_gguf_writer *w, const char *key, int v);
/* len bytes of s (may contain NULs); fc_gguf_set_str uses strlen. */
FC_API fc_status fc_gguf_set_strn(fc_gguf_writer *w, const char *key, const char *s, size_t len);
FC_API fc_status fc_gguf_set_str(fc_gguf_writer *w, const char *key, const char *s);
/* n elements of a non-string type, native layout (copied). */
FC_API fc_status fc_gguf_set_arr(fc_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n);
/* n strings (lens NULL: strlen each). */
FC_API fc_status fc_gguf_set_arr_str(fc_gguf_writer *w, const char *key, const char *const *s, const size_t *lens,
                                     uint64_t n);
/* KV i of a file that was read, copied as is. */
FC_API fc_status fc_gguf_writer_copy_kv(fc_gguf_writer *w, const fc_gguf *g, int64_t i);

/* A tensor from raw bytes (nbytes must match type and dims; dims in GGUF
 * order, ne[0] a multiple of the block size). Not copied: data must stay
 * valid until the save (so a mapped file can be re-emitted without a copy). */
FC_API fc_status fc_gguf_writer_add_raw(fc_gguf_writer *w, const char *name, uint32_t type, int n_dims,
                                        const int64_t *ne, const void *data, uint64_t nbytes);
/* A tensor of a plain dtype (f32 f16 bf16 f64 i8 i16 i32 i64) or a block
 * dtype (its blocks as they are: a block tensor read from a file is written
 * back byte for byte), rank 0..4, copied now in row-major order; its sizes
 * reversed become the GGUF dims (rank 0 is written as one dim of 1). */
FC_API fc_status fc_gguf_writer_add_tensor(fc_gguf_writer *w, const char *name, const fc_tensor *t);

/* Write atomically (temporary file, fsync, rename); every check (e.g. a
 * "general.alignment" that is not a u32 power of two) happens before a file
 * is created, and on failure the destination is untouched. */
FC_API fc_status fc_gguf_writer_save(fc_gguf_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif
