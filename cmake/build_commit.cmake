# SPDX-License-Identifier: MIT
# Writes OUT with the commit the fucina command is built from, for
# `fucina bench`'s build_commit / build_number (llama-bench's LLAMA_COMMIT =
# `git rev-parse --short HEAD`, LLAMA_BUILD_NUMBER = `git rev-list --count
# HEAD`). Run at every build, not at configure time (that would stamp every
# later build with the commit cmake first ran on); OUT is rewritten only when
# its text changes, so an unchanged tree recompiles nothing. SRC must be the
# top of its own repository: a tarball unpacked inside some other checkout
# would otherwise take that checkout's commit. No git, no repository:
# "unknown" and 0.
set(_commit "unknown")
set(_number 0)
if(GIT)
  execute_process(COMMAND ${GIT} -C ${SRC} rev-parse --show-toplevel OUTPUT_VARIABLE _top
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0)
    get_filename_component(_top "${_top}" REALPATH)
    get_filename_component(_src "${SRC}" REALPATH)
  endif()
  if(_rc EQUAL 0 AND _top STREQUAL _src)
    execute_process(COMMAND ${GIT} -C ${SRC} rev-parse --short HEAD OUTPUT_VARIABLE _c
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc1)
    execute_process(COMMAND ${GIT} -C ${SRC} rev-list --count HEAD OUTPUT_VARIABLE _n
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc2)
    if(_rc1 EQUAL 0 AND _c MATCHES "^[0-9a-f]+$")
      set(_commit "${_c}")
    endif()
    if(_rc2 EQUAL 0 AND _n MATCHES "^[0-9]+$")
      set(_number "${_n}")
    endif()
  endif()
endif()
set(_text "#define FC_BUILD_COMMIT \"${_commit}\"\n#define FC_BUILD_NUMBER ${_number}\n")
include(${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake)
fc_write_if_changed(${OUT} "${_text}")
