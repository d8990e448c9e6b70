/* SPDX-License-Identifier: MIT */
/* std::mt19937 (Matsumoto & Nishimura 1998, as [rand.eng.mers] specifies it)
 * and libstdc++'s uniform real draw; see sampler_rng.h. */
#include "llm/sampler_rng.h"

#include <math.h>

enum { MT_N = 624, MT_M = 397 };

void fc_mt19937_seed(fc_mt19937 *r, uint32_t seed) {
    r->mt[0] = seed;
    for (int i = 1; i < MT_N; i++)
        r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->idx = MT_N; /* the first draw regenerates the whole state */
}

static void mt_twist(fc_mt19937 *r) {
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (r->mt[i] & 0x80000000u) | (r->mt[(i + 1) % MT_N] & 0x7fffffffu);
        uint32_t v = r->mt[(i + MT_M) % MT_N] ^ (y >> 1);
        if (y & 1u) v ^= 0x9908b0dfu;
        r->mt[i] = v;
    }
    r->idx = 0;
}

uint32_t fc_mt19937_next(fc_mt19937 *r) {
    if (r->idx >= MT_N) mt_twist(r);
    uint32_t y = r->mt[r->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

double fc_mt19937_uniform01(fc_mt19937 *r) {
    /* libstdc++ generate_canonical: sum = 0, mult = 1; for k times
     * { sum += (g() - min) * mult; mult *= 2^32 }; ret = sum / mult. The
     * second term rounds to double (x1 * 2^32 is exact, the add is not). */
    double sum = 0.0, mult = 1.0;
    for (int k = 0; k < 2; k++) {
        sum += (double)fc_mt19937_next(r) * mult;
        mult *= 4294967296.0;
    }
    double ret = sum / mult;
    if (ret >= 1.0) ret = nextafter(1.0, 0.0);
    return ret * (1.0 - 0.0) + 0.0;
}
