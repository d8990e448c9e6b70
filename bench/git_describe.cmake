# Writes OUT with `#define FUCINA_GIT_DESCRIBE "<git describe --always --tags
# --dirty>"` of SRC at build time (configure-time would stamp every later
# build with the commit cmake first ran on), rewriting it only when the text
# changes so an unchanged tree recompiles nothing. No git or no repository:
# an empty string.
set(_desc "")
if(GIT)
  execute_process(COMMAND ${GIT} describe --always --tags --dirty WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE _desc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    set(_desc "")
  endif()
endif()
set(_text "#define FUCINA_GIT_DESCRIBE \"${_desc}\"\n")
include(${CMAKE_CURRENT_LIST_DIR}/../cmake/write_if_changed.cmake)
fc_write_if_changed(${OUT} "${_text}")
