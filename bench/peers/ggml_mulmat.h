/* SPDX-License-Identifier: MIT */
/* The `quant` suite's peer: ggml's CPU backend computing Y = W·X (ggml_mul_mat)
 * on the same weight bytes, through the oracle libraries (oracle/ggml_oracle.h). */
#ifndef FCB_PEERS_GGML_MULMAT_H
#define FCB_PEERS_GGML_MULMAT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fcb_ggml_mm fcb_ggml_mm;

/* 1 when the oracle is loaded and exports what the peer calls; else 0 with
 * *why set to a sentence. */
int fcb_ggml_mm_available(const char **why);

/* ggml_quantize_chunk: n_rows rows of n_per_row floats into `type` blocks
 * (ggml's reference quantizers); returns the bytes written, 0 on failure. */
size_t fcb_ggml_quantize(uint32_t type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row);

/* Would llama.cpp repack a [n, k] weight of this type on this CPU (the CPU
 * "extra" buffer type, ggml-cpu/repack.cpp)? */
int fcb_ggml_mm_repackable(uint32_t type, int64_t n);

/* A product of W (type, k x n, `w` holding n rows of ggml_row_size bytes)
 * and X (f32, m rows of k), computed by a CPU backend with a persistent
 * threadpool of n_threads. repack: W lives in the repack buffer type (as
 * llama.cpp loads it), else in the plain CPU buffer. NULL on failure, *why
 * set. copies (1..256): that many copies of W, each with its own graph;
 * successive runs rotate through them (so a set larger than the LLC is
 * streamed from DRAM). poll: the threadpool's polling level (ggml's 0..100,
 * how long workers spin before sleeping), or -1 for ggml's default (50). */
fcb_ggml_mm *fcb_ggml_mm_new(uint32_t type, int64_t m, int64_t n, int64_t k, const void *w, const float *x,
                             int n_threads, int repack, int copies, int poll, const char **why);
/* One graph compute (the next copy); 0 on success. */
int fcb_ggml_mm_run(fcb_ggml_mm *p);
/* Copy Y (m rows of n floats) out. */
void fcb_ggml_mm_result(fcb_ggml_mm *p, float *y);
/* Park ggml's pool threads (they poll after a compute) while the other side runs. */
void fcb_ggml_mm_pause(fcb_ggml_mm *p);
void fcb_ggml_mm_free(fcb_ggml_mm *p);

#endif
