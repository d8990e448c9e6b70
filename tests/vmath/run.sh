#!/bin/sh
# Build and run the vocabulary / vmath checks on avx2, avx512 (if this CPU has
# it) and neon (under qemu-aarch64, if the cross compiler is installed).
# Run from the repo root: sh tests/vmath/run.sh [STRIDE]
#   STRIDE: f16/bf16 store sweep stride on x86 (default 1 = all 2^32 patterns);
#   neon always uses 61 (qemu is slow).
set -e
STRIDE=${1:-1}
CC=${CC:-gcc}
O=${TMPDIR:-/tmp}/fck_vmath
mkdir -p "$O"
F="-std=c11 -O2 -ffp-contract=off -Wall -Wextra -Werror -I include -I templates/_vocab"
X512="-mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c"
$CC $F -mavx2 -mfma -mf16c tests/vmath/vocab.c -o "$O/vocab_avx2" -lm
$CC $F -mavx2 -mfma -mf16c tests/vmath/xisa.c -o "$O/xisa_avx2" -lm
"$O/vocab_avx2" "$STRIDE"
"$O/xisa_avx2" "$O/avx2.bin"
if grep -q avx512bw /proc/cpuinfo; then
    $CC $F $X512 tests/vmath/vocab.c -o "$O/vocab_avx512" -lm
    $CC $F $X512 tests/vmath/xisa.c -o "$O/xisa_avx512" -lm
    "$O/vocab_avx512" "$STRIDE"
    "$O/xisa_avx512" "$O/avx512.bin"
    cmp "$O/avx2.bin" "$O/avx512.bin"
    echo "vmath: avx2 == avx512 bit for bit"
fi
if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then
    Q="qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu"
    aarch64-linux-gnu-gcc $F tests/vmath/vocab.c -o "$O/vocab_neon" -lm
    aarch64-linux-gnu-gcc $F tests/vmath/xisa.c -o "$O/xisa_neon" -lm
    $Q "$O/vocab_neon" 61
    $Q "$O/xisa_neon" "$O/neon.bin"
    cmp "$O/avx2.bin" "$O/neon.bin"
    echo "vmath: avx2 == neon bit for bit"
fi
