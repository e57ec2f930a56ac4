# Checks that libcc_coll_preload.so defines exactly the dynamic symbols its
# version script exports (the interposed MPI entry points), and no cc_coll_*
# or C++ symbol. Run with -DNM=<nm> -DLIBRARY=<.so> -DMAP=<preload.map>.
file(READ "${MAP}" _map)
string(REGEX MATCH "global:(.*)local:" _globals "${_map}")
string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*" _expected "${CMAKE_MATCH_1}")
list(REMOVE_ITEM _expected global)
list(SORT _expected)

execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
  OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIBRARY}")
endif()
string(REGEX MATCHALL "[^\n]+" _lines "${_out}")
set(_actual "")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^[0-9a-fA-F]+ [A-Za-z] ([^ ]+)$")
    list(APPEND _actual "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(SORT _actual)

if(NOT _actual STREQUAL _expected)
  set(_extra ${_actual})
  list(REMOVE_ITEM _extra ${_expected})
  set(_missing ${_expected})
  list(REMOVE_ITEM _missing ${_actual})
  message(FATAL_ERROR "exported symbols differ from preload.map\n  unexpected: ${_extra}\n  missing: ${_missing}")
endif()
list(LENGTH _actual _n)
message(STATUS "preload_exported_symbols: ${_n} symbols, all interposed MPI entry points")
