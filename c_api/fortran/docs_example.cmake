# Checks that docs/fortran.md shows the tested example verbatim: the fenced
# block after the line "<!-- example: examples/fortran/allreduce.f90 -->"
# must equal the file.
#
#   cmake -DDOC=docs/fortran.md -DEXAMPLE=examples/fortran/allreduce.f90 -P docs_example.cmake
foreach(_v DOC EXAMPLE)
  if(NOT DEFINED ${_v} OR NOT EXISTS "${${_v}}")
    message(FATAL_ERROR "docs_example.cmake: -D${_v}=<existing file> is required")
  endif()
endforeach()
file(READ "${DOC}" doc)
file(READ "${EXAMPLE}" example)
set(marker "<!-- example: examples/fortran/allreduce.f90 -->\n```fortran\n")
string(FIND "${doc}" "${marker}" start)
if(start EQUAL -1)
  message(FATAL_ERROR "${DOC} has no block introduced by:\n${marker}")
endif()
string(LENGTH "${marker}" mlen)
math(EXPR start "${start} + ${mlen}")
string(SUBSTRING "${doc}" ${start} -1 rest)
string(FIND "${rest}" "\n```" stop)
if(stop EQUAL -1)
  message(FATAL_ERROR "${DOC}: the example block is not closed")
endif()
math(EXPR stop "${stop} + 1")
string(SUBSTRING "${rest}" 0 ${stop} block)
if(NOT block STREQUAL example)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/fortran_md_example.f90" "${block}")
  message(FATAL_ERROR "the example in ${DOC} differs from ${EXAMPLE}; compare with "
                      "${CMAKE_CURRENT_BINARY_DIR}/fortran_md_example.f90 (diff -u)")
endif()
message(STATUS "${DOC} shows ${EXAMPLE} verbatim")
