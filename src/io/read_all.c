/* SPDX-License-Identifier: MIT */
/* Whole files and streams into memory: reads of 64 KiB into a buffer that
 * doubles, so a file of n bytes costs O(n) copies at most. */
#include "io/read_all.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

char *fc_read_stream(FILE *f, size_t max, size_t *n)
{
    size_t cap = 0, len = 0;
    char *p = NULL;
    for (;;) {
        if (max && len > max) {
            free(p);
            errno = EFBIG;
            return NULL;
        }
        if (cap - len < 65536 + 1) {
            const size_t ncap = cap ? cap * 2 : 65536 + 1;
            char *q = ncap > cap ? realloc(p, ncap) : NULL;
            if (!q) {
                free(p);
                errno = ENOMEM;
                return NULL;
            }
            p = q, cap = ncap;
        }
        const size_t r = fread(p + len, 1, cap - len - 1, f);
        len += r;
        if (r == 0) break;
    }
    if (ferror(f)) {
        const int e = errno ? errno : EIO;
        free(p);
        errno = e;
        return NULL;
    }
    if (max && len > max) {
        free(p);
        errno = EFBIG;
        return NULL;
    }
    p[len] = 0;
    *n = len;
    return p;
}

char *fc_read_path(const char *path, size_t max, size_t *n)
{
    if (!strcmp(path, "-")) return fc_read_stream(stdin, max, n);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    errno = 0;
    char *p = fc_read_stream(f, max, n);
    const int e = errno;
    fclose(f);
    errno = e;
    return p;
}
