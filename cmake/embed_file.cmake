# Write a C file defining a byte array with a file's contents (the chat page
# of fucina serve): cmake -DIN=FILE -DOUT=FILE.c -DNAME=symbol -P embed_file.cmake
file(READ "${IN}" _hex HEX)
string(LENGTH "${_hex}" _n)
math(EXPR _bytes "${_n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _arr "${_hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" _arr "${_arr}")
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed_file.cmake: do not edit. */\n#include <stddef.h>\n"
  "const unsigned char ${NAME}[] = {\n${_arr}0x00};\nconst size_t ${NAME}_len = ${_bytes};\n")
