/* SPDX-License-Identifier: MIT */
/* Fucina: run-time access to ggml / llama.cpp as an independent oracle.
 *
 * The npm package @node-llama-cpp/linux-x64 (pinned by .ci/setup) ships
 * llama.cpp's prebuilt shared libraries without headers: libggml-base.so
 * (reference quantizers, dequantizers, the GGUF codec), one libggml-cpu-<cpu>.so
 * per x86 micro-architecture (vec_dot kernels, the CPU backend) and libllama.
 * Tests and benchmarks load them with dlopen and resolve symbols by name; the
 * prototypes they call through are declared where they are used, from the
 * headers of the matching llama.cpp release.
 *
 * Where the libraries are: $FUCINA_GGML_DIR, else the directory .ci/setup
 * installs into (FCO_GGML_DEFAULT_DIR, set by CMake). Which CPU variant:
 * $FUCINA_GGML_CPU (e.g. "icelake"), else the variant whose
 * ggml_backend_score() is highest on this CPU, as ggml's own loader picks.
 *
 * Not part of the library: tests/ and bench/ link it. */
#ifndef FUCINA_GGML_ORACLE_H
#define FUCINA_GGML_ORACLE_H

/* Loads libggml-base and the best libggml-cpu variant once (thread-safe).
 * Returns 1 when loaded; 0 otherwise, with *why (if non-NULL) set to a
 * sentence saying what is missing and how to install it. */
int fco_ggml_available(const char **why);

/* A symbol from libggml-base, then the CPU variant, then libggml; NULL when
 * the oracle is absent or no library exports it. */
void *fco_ggml_sym(const char *name);

/* libllama (loaded on first use, after ggml); NULL when absent. */
void *fco_llama_sym(const char *name);

/* The chosen CPU variant's name ("icelake") or "" when not loaded. */
const char *fco_ggml_cpu_variant(void);

/* The directory the libraries were looked for in. */
const char *fco_ggml_dir(void);

#endif
