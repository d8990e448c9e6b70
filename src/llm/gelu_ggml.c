/* SPDX-License-Identifier: MIT */
/* Fucina llm: GELU gating as ggml's CPU backend computes it.
 *
 * ggml's CPU GELU (ggml-cpu/vec.h, GGML_GELU_FP16, on by default) does not
 * evaluate the function for f32 inputs: it rounds the input to f16 and
 * reads a 65536-entry table of f16 results built at start-up from
 *   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
 * in float. So its f32 GELU is good to about f16 precision: an exact GELU
 * sits ~7e-4 (relative to the logits) from it on a tiny gemma3. Matching it
 * is what makes our gemma logits agree with llama.cpp's to ~1e-6 instead;
 * llama.cpp is the oracle users compare with. The table is built once (a
 * few hundred microseconds), and the lookup per element is a scalar loop:
 * the FFN's matmuls cost three orders of magnitude more. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "fucina/half.h"
#include "llm/forward.h"

static float table[65536];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void) {
    const float coef_a = 0.044715f, sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    for (uint32_t i = 0; i < 65536; i++) {
        const float x = fc_f16_to_f32((fc_f16){.bits = (uint16_t)i});
        const float g = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + coef_a * x * x)));
        table[i] = fc_f16_to_f32(fc_f32_to_f16(g));
    }
}

void fc_llm_geglu_ggml(size_t n, const float *a, const float *b, float *y) {
    pthread_once(&once, build);
    for (size_t i = 0; i < n; i++) {
        const float x = a[i];
        if (x <= -10.0f) y[i] = 0.0f;
        else if (x >= 10.0f) y[i] = x * b[i];
        else y[i] = table[fc_f32_to_f16(x).bits] * b[i];
    }
}
