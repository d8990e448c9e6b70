/* SPDX-License-Identifier: MIT */
/* CPU feature detection, done once: CPUID + XGETBV on x86-64 (so a feature
 * the OS does not save across context switches counts as absent), getauxval
 * hwcaps on AArch64. Bits are the generated FCK_FEAT_* of this architecture. */
#ifndef FC_CORE_CPU_FEATURES_H
#define FC_CORE_CPU_FEATURES_H

#include <stdint.h>

/* The detected features (cached after the first call; thread-safe). */
uint64_t fc_cpu_features_detect(void);

#endif
