/* SPDX-License-Identifier: MIT */
/* The harness's clock: CLOCK_MONOTONIC, in seconds. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "fcb.h"

double fcb_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
