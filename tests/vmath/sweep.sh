#!/bin/sh
# Accuracy sweeps quoted in templates/_vocab/vmath.h (x86 with AVX-512; the
# results are bit-identical on avx2 and neon, see xisa.c). Run from the repo
# root: sh tests/vmath/sweep.sh [quick]   (quick: every 97th float)
set -e
S=${1:+97}
S=${S:-1}
cc=${CC:-gcc}
$cc -std=c11 -O2 -ffp-contract=off -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c \
    -Wall -Wextra -Werror -I include -I templates/_vocab tests/vmath/acc.c -o /tmp/vmath_acc -lm -lpthread
A=/tmp/vmath_acc
$A exp -87 88 $S
$A exp -104 -87 $S
$A exp 88 89 $S
$A log 0x1p-149 0x1.fffffep127 $S
$A sin -10000 10000 $S
$A cos -10000 10000 $S
$A tanh 0 10 $S
$A tanh -10 0 $((S * 13))
$A erf 0 4 $S
$A erf -4 0 $((S * 13))
# beyond the main domains, sampled
$A sin 10000 0x1p20 $((S * 7))
$A cos 10000 0x1p20 $((S * 7))
$A sin 0x1p20 0x1p21 $((S * 3))
$A cos 0x1p20 0x1p21 $((S * 3))
