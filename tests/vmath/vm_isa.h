/* SPDX-License-Identifier: MIT */
/* Pick the vocabulary of the ISA this translation unit is compiled for. */
#if defined(__AVX512F__)
#include "avx512.h"
#define VM_ISA "avx512"
#elif defined(__AVX2__)
#include "avx2.h"
#define VM_ISA "avx2"
#elif defined(__aarch64__)
#include "neon.h"
#define VM_ISA "neon"
#else
#error "tests/vmath: compile with -mavx2 -mfma -mf16c, AVX-512 flags, or for aarch64"
#endif
