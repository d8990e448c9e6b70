# SPDX-License-Identifier: MIT
# fc_write_if_changed(FILE TEXT): write TEXT to FILE only when FILE does not
# already hold it, so the build-time stamps (cmake/build_commit.cmake,
# bench/git_describe.cmake) recompile nothing in an unchanged tree.
function(fc_write_if_changed file text)
  set(_old "")
  if(EXISTS ${file})
    file(READ ${file} _old)
  endif()
  if(NOT "${_old}" STREQUAL "${text}")
    file(WRITE ${file} "${text}")
  endif()
endfunction()
