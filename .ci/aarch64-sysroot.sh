#!/usr/bin/env bash
# Fucina: arm64 Criterion for the NEON cross leg (Debian 12; apt steps as
# root, through sudo when not root).
#
#   .ci/aarch64-sysroot.sh [DIR]     (default: <repo>/.cache/aarch64-sysroot,
#                                     or $FUCINA_AARCH64_SYSROOT)
#
# libcriterion-dev (amd64) and libcriterion3:arm64 cannot be co-installed:
# both pull libnanomsg5, whose amd64 and arm64 builds have different Debian
# versions (1.1.5+dfsg-1.1+b1 vs 1.1.5+dfsg-1.1), and multiarch needs them
# equal. So the co-installable arm64 runtime deps of libcriterion3 go in with
# apt (multiarch, /usr/lib/aarch64-linux-gnu), and libcriterion3:arm64 and
# libnanomsg5:arm64 are unpacked with dpkg -x into DIR, which
# cmake/toolchain-aarch64.cmake links against (and rpaths). The headers are
# the amd64 package's /usr/include/criterion (arch-independent).
#
# Idempotent: when DIR already holds the libraries it only checks the apt
# packages and rebuilds the shim if its source changed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
dir=${1:-${FUCINA_AARCH64_SYSROOT:-$root/.cache/aarch64-sysroot}}
libdir=$dir/usr/lib/aarch64-linux-gnu
export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
else
  as_root=(sudo -E)
fi

need_update=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "aarch64-sysroot: dpkg --add-architecture arm64"
  "${as_root[@]}" dpkg --add-architecture arm64
  need_update=1
fi
if [ "$need_update" = 1 ] || ! apt-cache show libcriterion3:arm64 >/dev/null 2>&1; then
  "${as_root[@]}" apt-get update -q </dev/null
fi

# Runtime deps of libcriterion3:arm64 except libnanomsg5:arm64 (see above):
# every Depends of libcriterion3 and libnanomsg5, minus those two.
deps=$(apt-cache depends libcriterion3:arm64 libnanomsg5:arm64 \
        | awk '$1 == "Depends:" { print $2 }' \
        | grep -v -e '^libnanomsg5' -e '^libcriterion3' | sort -u | tr '\n' ' ')
missing=""
for p in $deps; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "aarch64-sysroot: apt-get install$missing"
  "${as_root[@]}" apt-get install -y -q --no-install-recommends $missing </dev/null
fi

# The exec shim (see .ci/qemu-exec-shim.c): Criterion's workers under
# qemu-user without binfmt_misc. Rebuilt when its source is newer.
shim_src=$here/qemu-exec-shim.c
shim=$dir/usr/lib/fucina/qemu-exec-shim.so
build_shim() {
  if [ ! -e "$shim" ] || [ "$shim_src" -nt "$shim" ]; then
    mkdir -p "$(dirname "$shim")"
    echo "aarch64-sysroot: building $shim"
    aarch64-linux-gnu-gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$shim" "$shim_src" -ldl
  fi
}

if [ -e "$libdir/libcriterion.so.3" ] && [ -e "$libdir/libnanomsg.so.5" ]; then
  build_shim
  echo "aarch64-sysroot: $dir is ready"
  exit 0
fi

mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# apt-get download writes to the cwd, and as root drops to the _apt user for
# the fetch: the directory must be writable by it.
chmod 0777 "$tmp"
(cd "$tmp" && apt-get download -q libcriterion3:arm64 libnanomsg5:arm64 </dev/null)
for deb in "$tmp"/*.deb; do
  echo "aarch64-sysroot: dpkg -x $(basename "$deb") $dir"
  dpkg -x "$deb" "$dir"
done
# The link-time name (the -dev symlink is in the package we cannot install).
ln -sf libcriterion.so.3 "$libdir/libcriterion.so"
test -e "$libdir/libcriterion.so.3" && test -e "$libdir/libnanomsg.so.5"
build_shim
echo "aarch64-sysroot: $dir is ready"
