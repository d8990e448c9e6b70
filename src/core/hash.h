/* SPDX-License-Identifier: MIT */
/* FNV-1a, the byte hash of the tokenizer's lookup table, the demo's
 * parameter fingerprint and Mistral's call ids: fast, stable across
 * platforms and runs (no seed), not for anything an attacker picks. */
#ifndef FC_CORE_HASH_H
#define FC_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FC_FNV1A_INIT 0xcbf29ce484222325ull

/* h continued over p[0..n) (start from FC_FNV1A_INIT). */
static inline uint64_t fc_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

#endif
