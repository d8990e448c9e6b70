/* SPDX-License-Identifier: MIT */
/* Shared by the GGUF reader and writer: the type tables and limits. */
#ifndef FC_IO_GGUF_INTERNAL_H
#define FC_IO_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/dtype.h"
#include "fucina/gguf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF is little-endian and is read and written as is: a big-endian host needs byte swapping"
#endif

/* Caps that bound memory on hostile files (ggml#1516 proposes the same
 * order of magnitude; real keys are < 100 bytes, real values < 64 MiB). */
#define GGUF_KEY_MAX ((uint64_t)1 << 20)
#define GGUF_STR_MAX ((uint64_t)64 << 20)
#define GGUF_ALIGN_MAX ((uint32_t)1 << 20)

typedef struct gguf_type_info {
    const char *name;
    uint32_t blck;  /* elements per block */
    uint32_t bytes; /* bytes per block */
    int dtype;      /* its fc_dtype (every known id has one, block formats included) */
} gguf_type_info;

/* NULL for an unknown id. */
const gguf_type_info *fc_gguf_type_info(uint32_t type);
/* The ggml type of a plain dtype, -1 when there is none (u8, bool). */
int fc_gguf_type_of_dtype(fc_dtype dt);
/* Bytes of one element of a scalar value type (bool 1); 0 for STR, ARR and
 * invalid types. */
size_t fc_gguf_vtype_size(uint32_t vtype);
/* Byte size of a tensor: 0 and *why set when invalid (not a multiple of
 * the block, overflow). ne has n_dims entries. */
int fc_gguf_tensor_nbytes(const gguf_type_info *ti, int n_dims, const int64_t *ne, uint64_t *out, const char **why);

/* One KV pair, as read or as to be written. */
typedef struct gguf_kv {
    char *key;
    uint32_t type;        /* fc_gguf_vtype */
    uint32_t elem;        /* ARR: element type */
    uint64_t n;           /* STR: byte length; ARR: element count */
    unsigned char raw[8]; /* scalars, little-endian as in the file */
    char *str;            /* STR: NUL-terminated copy */
    void *data;           /* non-string ARR: the elements (NULL when empty) */
    char **strs;          /* string ARR: NUL-terminated copies ... */
    uint64_t *lens;       /* ... and their lengths */
} gguf_kv;

void fc_gguf_kv_free(gguf_kv *kv);
/* Deep copy; 0 when out of memory (dst is then empty). */
int fc_gguf_kv_clone(gguf_kv *dst, const gguf_kv *src);
/* The reader's KV i (NULL out of range). */
const gguf_kv *fc_gguf_kv_at(const fc_gguf *g, int64_t i);

/* Streaming writes (the quantizer: data produced tensor by tensor, never the
 * whole model in memory). Tensors are declared with add_info (type and dims:
 * the sizes are known up front); begin writes the header to a temporary
 * file; write appends the data in tensor order, in pieces of any size (the
 * padding after each tensor is added when its last byte arrives); finish
 * checks every tensor is complete and renames the file into place; abort
 * (also done by fc_gguf_writer_free and on any failure) removes it. The
 * bytes are exactly those fc_gguf_writer_save would write. */
fc_status fc_gguf_writer_add_info(fc_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne);
fc_status fc_gguf_writer_begin(fc_gguf_writer *w, const char *path);
fc_status fc_gguf_writer_write(fc_gguf_writer *w, const void *data, uint64_t nbytes);
fc_status fc_gguf_writer_finish(fc_gguf_writer *w);
void fc_gguf_writer_abort(fc_gguf_writer *w);

#endif
