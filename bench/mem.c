/* SPDX-License-Identifier: MIT */
/* Benchmark buffers: aligned allocation, valid inputs per dtype, checksums. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fcb.h"
#include "fucina/half.h"

#define PATTERN_ELEMS 16384 /* a pattern this long is tiled over large buffers */

void *fcb_alloc(size_t bytes)
{
    size_t align = bytes >= 4 * FCB_MIB ? 2 * FCB_MIB : 64;
    size_t rounded = (bytes + align - 1) / align * align;
    void *p = NULL;
    if (rounded == 0) rounded = align;
    if (posix_memalign(&p, align, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (align > 64) madvise(p, rounded, MADV_HUGEPAGE); /* fewer page faults and TLB misses; advisory */
#endif
    return p;
}

void fcb_free(void *p) { free(p); }

size_t fcb_dtype_size(const char *dt)
{
    if (!strcmp(dt, "f32") || !strcmp(dt, "i32")) return 4;
    if (!strcmp(dt, "f64")) return 8;
    if (!strcmp(dt, "f16") || !strcmp(dt, "bf16")) return 2;
    if (!strcmp(dt, "i8")) return 1;
    return 0;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void store(const char *dt, void *p, size_t i, double v)
{
    if (!strcmp(dt, "f32")) ((float *)p)[i] = (float)v;
    else if (!strcmp(dt, "f64")) ((double *)p)[i] = v;
    else if (!strcmp(dt, "f16")) ((fc_f16 *)p)[i] = fc_f32_to_f16((float)v);
    else if (!strcmp(dt, "bf16")) ((fc_bf16 *)p)[i] = fc_f32_to_bf16((float)v);
    else if (!strcmp(dt, "i8")) ((int8_t *)p)[i] = (int8_t)v;
    else if (!strcmp(dt, "i32")) ((int32_t *)p)[i] = (int32_t)v;
}

static double load(const char *dt, const void *p, size_t i)
{
    if (!strcmp(dt, "f32")) return ((const float *)p)[i];
    if (!strcmp(dt, "f64")) return ((const double *)p)[i];
    if (!strcmp(dt, "f16")) return fc_f16_to_f32(((const fc_f16 *)p)[i]);
    if (!strcmp(dt, "bf16")) return fc_bf16_to_f32(((const fc_bf16 *)p)[i]);
    if (!strcmp(dt, "i8")) return ((const int8_t *)p)[i];
    if (!strcmp(dt, "i32")) return ((const int32_t *)p)[i];
    return 0;
}

int fcb_fill(const char *dt, void *p, size_t n, double lo, double hi, uint64_t seed)
{
    size_t es = fcb_dtype_size(dt);
    if (es == 0) return -1;
    int integer = !strcmp(dt, "i8") || !strcmp(dt, "i32");
    size_t pat = n < PATTERN_ELEMS ? n : PATTERN_ELEMS;
    for (size_t i = 0; i < pat; i++) {
        uint64_t r = splitmix(&seed);
        double u = (double)(r >> 11) * 0x1p-53;
        store(dt, p, i, integer ? (double)((int)(r % 9) - 4) : lo + (hi - lo) * u);
    }
    unsigned char *b = p;
    size_t done = pat * es, total = n * es;
    while (done < total) { /* double the filled prefix: memcpy speed */
        size_t chunk = done < total - done ? done : total - done;
        memcpy(b + done, b, chunk);
        done += chunk;
    }
    return 0;
}

void fcb_fill_block_bytes(void *p, size_t nbytes, uint64_t seed)
{
    /* every byte in [0x30, 0x3B]: any f16 made of two of them has exponent
     * field 12..14 and any f32 of four has a biased exponent 96..119, so
     * every scale field, wherever a format puts it, is a normal number
     * (uniform random bytes make subnormal scales, whose products take
     * microcode assists and time the assists instead of the kernel) */
    unsigned char *b = p;
    for (size_t i = 0; i < nbytes; i++) b[i] = (unsigned char)(0x30 + splitmix(&seed) % 12);
}

double fcb_checksum(const char *dt, const void *p, size_t n)
{
    if (!p || n == 0) return 0;
    size_t step = n > 4096 ? n / 4096 : 1;
    double s = 0;
    for (size_t i = 0; i < n; i += step) {
        double v = load(dt, p, i);
        if (isfinite(v)) s += v;
    }
    return s;
}
