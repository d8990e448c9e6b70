/* SPDX-License-Identifier: MIT */
/* Fucina core: small string tests (internal). */
#ifndef FC_CORE_STR_H
#define FC_CORE_STR_H

#include <string.h>

/* 1 when s ends with suffix (".jsonl", "_norm.weight"). */
static inline int fc_str_ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

#endif
