/* SPDX-License-Identifier: MIT */
/* Fucina: std::mt19937 and libstdc++'s uniform_real_distribution<double>,
 * bit for bit, so that a seeded sampler draws what llama.cpp's dist sampler
 * draws (llama-sampler.cpp: std::mt19937 rng(seed); each token one
 * std::uniform_real_distribution<double>(0, 1)(rng)). Internal to src/llm. */
#ifndef FUCINA_LLM_SAMPLER_RNG_H
#define FUCINA_LLM_SAMPLER_RNG_H

#include <stdint.h>

typedef struct fc_mt19937 {
    uint32_t mt[624];
    int idx;
} fc_mt19937;

/* std::mt19937::seed(s) (the standard's initialization, multiplier 1812433253). */
void fc_mt19937_seed(fc_mt19937 *r, uint32_t seed);
/* The next 32-bit output (operator()). */
uint32_t fc_mt19937_next(fc_mt19937 *r);
/* std::uniform_real_distribution<double>(0, 1)(r) as libstdc++ computes it:
 * generate_canonical<double, 53> takes k = ceil(53 / 32) = 2 outputs,
 * (x0 + x1 * 2^32) / 2^64 in double, clamped below 1 (nextafter(1, 0)),
 * then u * (1 - 0) + 0. */
double fc_mt19937_uniform01(fc_mt19937 *r);

#endif
