# Cross toolchain: AArch64 Linux with Debian's gcc-aarch64-linux-gnu; tests
# run under qemu-user. The NEON leg of .ci/run:
#
#   .ci/aarch64-sysroot.sh          # arm64 Criterion + exec shim (once; root)
#   cmake -S . -B build-aarch64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
#         -DFUCINA_BUILD_BENCH=OFF
#   cmake --build build-aarch64 && (cd build-aarch64 && ctest)
#
# Packages: gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libcriterion-dev
# (for the arch-independent headers), and what .ci/aarch64-sysroot.sh
# installs. That script unpacks the arm64 libcriterion.so.3 and libnanomsg.so.5
# into a private directory, FUCINA_AARCH64_SYSROOT (environment or cache
# variable; default <repo>/.cache/aarch64-sysroot); their other deps (libgit2,
# libffi, ...) are multiarch arm64 packages in /usr/lib/aarch64-linux-gnu.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(_fc_triple aarch64-linux-gnu)
set(_fc_cross_root /usr/${_fc_triple})
set(CMAKE_C_COMPILER ${_fc_triple}-gcc)
set(CMAKE_CXX_COMPILER ${_fc_triple}-g++)

# Toolchain files are re-read in every try_compile project: the sysroot comes
# from the cache, the environment, or a default relative to this file.
if(NOT FUCINA_AARCH64_SYSROOT)
  if(NOT "$ENV{FUCINA_AARCH64_SYSROOT}" STREQUAL "")
    set(_fc_sysroot "$ENV{FUCINA_AARCH64_SYSROOT}")
  else()
    get_filename_component(_fc_sysroot "${CMAKE_CURRENT_LIST_DIR}/../.cache/aarch64-sysroot" ABSOLUTE)
  endif()
  set(FUCINA_AARCH64_SYSROOT "${_fc_sysroot}" CACHE PATH
      "Directory holding the unpacked arm64 libcriterion3 (made by .ci/aarch64-sysroot.sh)")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FUCINA_AARCH64_SYSROOT)
set(_fc_crit_libdir "${FUCINA_AARCH64_SYSROOT}/usr/lib/${_fc_triple}")
set(_fc_shim "${FUCINA_AARCH64_SYSROOT}/usr/lib/fucina/qemu-exec-shim.so")

# Target libraries and headers from the cross root and the private sysroot
# only; programs (python3, objdump) from the host.
set(CMAKE_FIND_ROOT_PATH ${_fc_cross_root} "${FUCINA_AARCH64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# tests/CMakeLists.txt finds Criterion with find_path/find_library: preset
# their results (headers: the arch-independent /usr/include/criterion).
if(EXISTS "${_fc_crit_libdir}/libcriterion.so")
  set(CRITERION_LIBRARY "${_fc_crit_libdir}/libcriterion.so" CACHE FILEPATH "arm64 Criterion")
elseif(EXISTS "${_fc_crit_libdir}/libcriterion.so.3")
  set(CRITERION_LIBRARY "${_fc_crit_libdir}/libcriterion.so.3" CACHE FILEPATH "arm64 Criterion")
endif()
if(EXISTS /usr/include/criterion/criterion.h)
  set(CRITERION_INCLUDE_DIR /usr/include CACHE PATH "Criterion headers (arch-independent)")
endif()
if(NOT EXISTS "${_fc_crit_libdir}/libcriterion.so.3" AND NOT _FC_TOOLCHAIN_WARNED)
  set(_FC_TOOLCHAIN_WARNED ON)
  message(WARNING "toolchain-aarch64: no arm64 Criterion in ${FUCINA_AARCH64_SYSROOT}; "
                  "run .ci/aarch64-sysroot.sh (as root) or configure with -DFUCINA_BUILD_TESTS=OFF")
endif()

# Runtime search path of every AArch64 executable and library:
#  - the private Criterion dir (libcriterion, and libnanomsg which it needs);
#  - the cross glibc in ${_fc_cross_root}/lib, ahead of the ld.so cache, so
#    that libc.so.6 comes from the same glibc build as the ELF interpreter qemu
#    loads from -L ${_fc_cross_root}. (The cache would give the multiarch
#    libc6:arm64, a different Debian build: with the cross ld.so it hangs at
#    start-up.)
# DT_RPATH, not DT_RUNPATH (--disable-new-dtags): only DT_RPATH also applies to
# the dependencies of dependencies (libcriterion -> libnanomsg, libc).
# -rpath-link: where ld finds those dependencies at link time.
set(_fc_link "-Wl,--disable-new-dtags -Wl,-rpath,${_fc_crit_libdir}:${_fc_cross_root}/lib")
string(APPEND _fc_link " -Wl,-rpath-link,${_fc_crit_libdir}:/usr/lib/${_fc_triple}:/lib/${_fc_triple}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_fc_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_fc_link}")

# qemu-user. -cpu max has dotprod, so the neon and neon_dotprod arms both run.
# -L: the ELF interpreter and glibc from the cross root; a path that is not
# under it (/usr/lib/aarch64-linux-gnu, the rpath above) is taken from the host.
# Criterion runs each test in a worker it re-executes from /proc/self/exe; the
# host kernel cannot exec an AArch64 binary without binfmt_misc, so the exec
# shim (.ci/qemu-exec-shim.c, preloaded in the guest) routes that exec through
# qemu with the same options (FUCINA_QEMU).
find_program(FUCINA_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(NOT FUCINA_QEMU_AARCH64)
  set(FUCINA_QEMU_AARCH64 /usr/bin/qemu-aarch64)
endif()
set(_fc_qemu_args -cpu max -L ${_fc_cross_root})
set(CMAKE_CROSSCOMPILING_EMULATOR ${FUCINA_QEMU_AARCH64} ${_fc_qemu_args})
if(EXISTS "${_fc_shim}")
  string(REPLACE ";" " " _fc_qemu_cmd "${FUCINA_QEMU_AARCH64};${_fc_qemu_args}")
  list(APPEND CMAKE_CROSSCOMPILING_EMULATOR -E "LD_PRELOAD=${_fc_shim}" -E "FUCINA_QEMU=${_fc_qemu_cmd}")
endif()
