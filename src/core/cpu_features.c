/* SPDX-License-Identifier: MIT */
/* CPU feature detection. See cpu_features.h.
 *
 * Traps handled here:
 *  - CPUID says what the core can do, XCR0 says what the OS saves: AVX/AVX2
 *    need XCR0 bits 1-2 (SSE, YMM) and AVX-512 also bits 5-7 (opmask, ZMM
 *    halves). A VM may hide AVX-512 state while CPUID still reports it.
 *  - AVX-VNNI (VEX) is CPUID.(7,1):EAX bit 4, a different leaf than
 *    AVX512-VNNI (7,0):ECX bit 11; a CPU may have either without the other.
 */
#define _GNU_SOURCE
#include "core/cpu_features.h"

#include <pthread.h>

#include "fucina/gen/fck_isa.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static uint64_t detect(void)
{
    uint64_t f = FCK_FEAT_SSE2; /* x86-64 baseline */
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    int osxsave = (c >> 27) & 1;
    int fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    int os_ymm = (xcr0 & 0x6) == 0x6;
    int os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;
    if (fma) f |= FCK_FEAT_FMA;
    if (f16c) f |= FCK_FEAT_F16C;
    if (os_ymm) f |= FCK_FEAT_OS_YMM;
    if (os_zmm) f |= FCK_FEAT_OS_ZMM;
    unsigned max_leaf = __get_cpuid_max(0, 0);
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        if ((b >> 5) & 1) f |= FCK_FEAT_AVX2;
        if ((b >> 16) & 1) f |= FCK_FEAT_AVX512F;
        if ((b >> 17) & 1) f |= FCK_FEAT_AVX512DQ;
        if ((b >> 30) & 1) f |= FCK_FEAT_AVX512BW;
        if ((b >> 31) & 1) f |= FCK_FEAT_AVX512VL;
        if ((c >> 11) & 1) f |= FCK_FEAT_AVX512_VNNI;
        unsigned max_sub = a;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            if ((a >> 4) & 1) f |= FCK_FEAT_AVX_VNNI;
            if ((a >> 5) & 1) f |= FCK_FEAT_AVX512_BF16;
        }
    }
    return f;
}

#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1UL << 9)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)
#endif

static uint64_t detect(void)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    uint64_t f = 0;
    if (hw & HWCAP_ASIMD) f |= FCK_FEAT_ASIMD;
    if (hw & HWCAP_FPHP) f |= FCK_FEAT_FPHP;
    if (hw & HWCAP_ASIMDDP) f |= FCK_FEAT_ASIMDDP;
    if (hw2 & HWCAP2_I8MM) f |= FCK_FEAT_I8MM;
    if (hw2 & HWCAP2_BF16) f |= FCK_FEAT_BF16;
    return f;
}
#else
static uint64_t detect(void) { return 0; }
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t features;

static void init(void) { features = detect(); }

uint64_t fc_cpu_features_detect(void)
{
    pthread_once(&once, init);
    return features;
}
