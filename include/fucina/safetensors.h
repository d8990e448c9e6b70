/* SPDX-License-Identifier: MIT */
/* Fucina: safetensors files (https://huggingface.co/docs/safetensors).
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 *     {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...,
 *      "__metadata__": {"key": "value", ...}}
 * and the data buffer (offsets are relative to its start). dtypes F64 F32
 * F16 BF16 I64 I32 I16 I8 U8 BOOL map to fc_dtype; others are rejected.
 *
 * Reading validates the whole header before anything is returned (see
 * docs/IO.md for every rule); a malformed file is an FC_ERR_FORMAT error
 * whose message names the file, the tensor or field, the byte offset and the
 * reason. Tensors come back zero-copy over the mapped file; they keep the
 * mapping alive after fc_safetensors_close.
 *
 * Axis names: the writer stores them in __metadata__ under
 * "fucina.axes.<tensor name>" as a comma-separated list ("batch,in"); the
 * reader applies them when present and valid, else the positional names
 * _0, _1, ... */
#ifndef FUCINA_SAFETENSORS_H
#define FUCINA_SAFETENSORS_H

#include <stdint.h>

#include "fucina/ctx.h"
#include "fucina/dtype.h"
#include "fucina/export.h"
#include "fucina/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fc_safetensors fc_safetensors;

/* A tensor and the name it has (or gets) in a file. */
typedef struct fc_named_tensor {
    const char *name;
    fc_tensor *tensor;
} fc_named_tensor;

/* Flags for fc_safetensors_open and fc_safetensors_load_into. */
#define FC_ST_READ 1   /* read the data into memory instead of mmap'ing the file */
#define FC_ST_STRICT 2 /* load_into: a file tensor that was not asked for is an error */

/* The metadata key prefix that carries axis names. */
#define FC_ST_AXES_PREFIX "fucina.axes."

/* Open and validate a file. Default: mmap (private, copy-on-write: writing
 * into a returned tensor never changes the file). FC_ST_READ reads the data
 * into memory. NULL on failure, with the error in ctx. */
FC_API fc_safetensors *fc_safetensors_open(fc_ctx *ctx, const char *path, int flags);
/* Tensors obtained with fc_safetensors_get stay valid after close. */
FC_API void fc_safetensors_close(fc_safetensors *f);

/* Tensors in header order. */
FC_API int fc_safetensors_count(const fc_safetensors *f);
FC_API const char *fc_safetensors_name(const fc_safetensors *f, int i); /* NULL if out of range */
/* Index of a tensor by name, -1 when absent. */
FC_API int fc_safetensors_find(const fc_safetensors *f, const char *name);

/* What the header says about tensor i, without touching its data. */
typedef struct fc_safetensors_entry {
    const char *name;
    fc_dtype dtype;
    int rank;
    int64_t dim[FC_MAX_RANK];
    uint64_t begin, end; /* byte range in the data buffer */
} fc_safetensors_entry;
/* Returns 0 when i is out of range. */
FC_API int fc_safetensors_info(const fc_safetensors *f, int i, fc_safetensors_entry *out);

/* __metadata__: value of key (NULL when absent); entries in header order. */
FC_API const char *fc_safetensors_meta(const fc_safetensors *f, const char *key);
FC_API int fc_safetensors_meta_count(const fc_safetensors *f);
FC_API const char *fc_safetensors_meta_key(const fc_safetensors *f, int i);

/* The tensor `name` (a new reference): zero-copy over the file's bytes,
 * or a copy when they are not aligned to the element size. Axis names from
 * "fucina.axes.<name>" when valid, else positional. NULL + error in the
 * context when absent. */
FC_API fc_tensor *fc_safetensors_get(fc_safetensors *f, const char *name);

/* Write n tensors (in this order, row-major, any strides accepted) and
 * n_meta metadata entries (meta_kv = key0, value0, key1, value1, ...) to
 * path atomically: a temporary file in the same directory, fsync, rename.
 * On failure the destination is untouched and no temporary remains.
 * Rejected: duplicate or empty names, names that are not UTF-8,
 * "__metadata__", duplicate metadata keys, metadata keys starting with
 * "fucina.axes." (the writer owns those). */
FC_API fc_status fc_safetensors_save(fc_ctx *ctx, const char *path, const fc_named_tensor *ts, int n,
                                     const char *const *meta_kv, int n_meta);

/* Copy each named tensor of the file into ts[i].tensor (an existing tensor
 * of the same dtype and sizes; axis names are not compared; it may be a
 * view). Every request is checked before anything is written, so on error
 * no tensor was modified. FC_ST_STRICT: file tensors not requested are an
 * error too. FC_ST_READ: as in fc_safetensors_open. */
FC_API fc_status fc_safetensors_load_into(fc_ctx *ctx, const char *path, const fc_named_tensor *ts, int n,
                                          int flags);

#ifdef __cplusplus
}
#endif
#endif
