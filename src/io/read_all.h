/* SPDX-License-Identifier: MIT */
/* Whole files and streams into memory (src/io/read_all.c): the one reader
 * behind the commands' -f FILE, prompt files, grammars and training text. */
#ifndef FC_IO_READ_ALL_H
#define FC_IO_READ_ALL_H

#include <stddef.h>
#include <stdio.h>

/* The rest of stream f, NUL-terminated (*n excludes the NUL). NULL with
 * errno set: ENOMEM, EFBIG when it holds more than max bytes (max 0: no
 * bound), or the read error (EIO when the stream set none). */
char *fc_read_stream(FILE *f, size_t max, size_t *n);
/* The whole of the file at path ("-": standard input), as fc_read_stream;
 * NULL with errno set, also when it cannot be opened. */
char *fc_read_path(const char *path, size_t max, size_t *n);

#endif
