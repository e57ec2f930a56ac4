# Checks the dynamic symbol table of the shared library:
#  - every defined dynamic symbol starts with `cc_coll_` (a version suffix
#    such as "@@cc_coll_0" is ignored);
#  - every function the public header declares with CC_COLL_API is exported.
#
#   cmake -DNM=<nm> -DLIBRARY=<libcc_coll.so> -DHEADER=<include/cc_coll.h> -P exported_symbols.cmake
foreach(_v NM LIBRARY HEADER)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "exported_symbols.cmake: -D${_v}=... is required")
  endif()
endforeach()
if(NOT EXISTS "${LIBRARY}")
  message(FATAL_ERROR "library not found: ${LIBRARY} (build it first)")
endif()

execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${_rc}): ${_err}")
endif()

string(REPLACE "\n" ";" _lines "${_out}")
set(_exported "")
set(_bad "")
foreach(_line IN LISTS _lines)
  string(STRIP "${_line}" _line)
  if(_line STREQUAL "")
    continue()
  endif()
  # "<address> <type> <name>[@[@]version]"; the name is the last field.
  string(REGEX REPLACE "^.*[ \t]" "" _name "${_line}")
  string(REGEX REPLACE "@.*$" "" _name "${_name}")
  if(_name MATCHES "^cc_coll_")
    list(APPEND _exported "${_name}")
  else()
    list(APPEND _bad "${_line}")
  endif()
endforeach()

if(_bad)
  list(JOIN _bad "\n  " _bad_text)
  message(FATAL_ERROR "${LIBRARY} exports symbols outside the cc_coll_ namespace:\n  ${_bad_text}")
endif()

# Every CC_COLL_API function of the header must be there.
file(READ "${HEADER}" _header)
string(REGEX MATCHALL "CC_COLL_API[^;(]*[ *]cc_coll_[A-Za-z0-9_]+[ \t]*\\(" _decls "${_header}")
set(_missing "")
set(_declared 0)
foreach(_decl IN LISTS _decls)
  string(REGEX MATCH "cc_coll_[A-Za-z0-9_]+[ \t]*\\($" _fn "${_decl}")
  string(REGEX REPLACE "[ \t]*\\($" "" _fn "${_fn}")
  math(EXPR _declared "${_declared} + 1")
  list(FIND _exported "${_fn}" _i)
  if(_i EQUAL -1)
    list(APPEND _missing "${_fn}")
  endif()
endforeach()
if(_declared LESS 10)
  message(FATAL_ERROR "found only ${_declared} CC_COLL_API declarations in ${HEADER}: the parser is broken")
endif()
if(_missing)
  message(FATAL_ERROR "declared with CC_COLL_API in ${HEADER} but not exported by ${LIBRARY}: ${_missing}")
endif()

list(LENGTH _exported _n)
message(STATUS "${LIBRARY}: ${_n} defined dynamic symbols, all cc_coll_*; all ${_declared} CC_COLL_API functions exported")
