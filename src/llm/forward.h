/* SPDX-License-Identifier: MIT */
/* Fucina llm: the forward's sizes and its non-kernel activation (internal). */
#ifndef FC_LLM_FORWARD_H
#define FC_LLM_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "fucina/llm.h"

/* Floats of the rows one pass of n rows needs (src/llm/forward.c). */
size_t fc_llm_forward_floats(const fc_llm_hparams *hp, int64_t n);

/* y[i] = gelu(a[i]) * b[i] as ggml's CPU backend computes it for f32
 * (src/llm/gelu_ggml.c): a at or below -10 gives 0, at or above 10 gives
 * a * b, otherwise the GELU(tanh) of a rounded to f16, itself rounded to
 * f16 (a 65536-entry table), times b in f32. y may alias a or b. */
void fc_llm_geglu_ggml(size_t n, const float *a, const float *b, float *y);

#endif
