/* SPDX-License-Identifier: MIT */
/* The bytes of a model file, shared by a reader's handle and every
 * zero-copy tensor over them: mmap'd (private and writable, so a tensor
 * written in place never changes the file) or read into 64-byte aligned
 * memory, and refcounted so tensors outlive the handle. */
#ifndef FC_IO_FILE_MAP_H
#define FC_IO_FILE_MAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fucina/tensor.h"

typedef struct fc_file_map {
    atomic_long refs;
    void *base;  /* mmap: the file's byte 0; read: the file's byte `off` */
    size_t len;
    int mapped;  /* 1: munmap, 0: free */
} fc_file_map;

/* mmap the whole file (fsize bytes), or, when read_mode, read `len` bytes at
 * `off`. NULL on failure with *st = FC_ERR_OOM or FC_ERR_IO and errno set
 * (0 when the file shrank while being read): the caller words the error. */
fc_file_map *fc_file_map_new(int fd, int read_mode, uint64_t fsize, uint64_t off, uint64_t len, fc_status *st);
void fc_file_map_unref(fc_file_map *m);
/* A tensor over `nbytes` at p (inside m) that keeps m alive. */
fc_tensor *fc_file_map_wrap(fc_ctx *ctx, fc_file_map *m, fc_dtype dt, const fc_dim *dims, int rank, void *p,
                            size_t nbytes);
/* pread exactly n bytes at off: 1, or 0 with errno (0 at end of file). */
int fc_file_read_at(int fd, void *buf, size_t n, uint64_t off);
/* strerror(errno), or "the file shrank while being read" when errno is 0. */
const char *fc_file_read_error(void);

#endif
