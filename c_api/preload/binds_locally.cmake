# Checks that libcc_coll_preload_core.so imports none of the MPI entry
# points the front (libcc_coll_preload.so) interposes: libcc_coll's objects
# in the core call MPI_Allreduce, MPI_Iallreduce, MPI_Test, ... by name, and
# those calls must bind to the core's own local definitions (which forward
# to PMPI), never reach the front through the dynamic linker.
# Run with -DNM=<nm> -DLIBRARY=<core .so> -DMAP=<preload.map>.
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)
file(READ "${MAP}" _map)
string(REGEX MATCH "global:(.*)local:" _globals "${_map}")
string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*" _interposed "${CMAKE_MATCH_1}")
list(REMOVE_ITEM _interposed global)

execute_process(COMMAND "${NM}" -D --undefined-only "${LIBRARY}"
  OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIBRARY}")
endif()
string(REGEX MATCHALL "[^\n]+" _lines "${_out}")
set(_imported "")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^ *[A-Za-z] ([^ @]+)")
    list(APPEND _imported "${CMAKE_MATCH_1}")
  endif()
endforeach()

set(_bad "")
foreach(_s IN LISTS _imported)
  if(_s IN_LIST _interposed)
    list(APPEND _bad "${_s}")
  endif()
endforeach()
if(_bad)
  string(JOIN ", " _bad ${_bad})
  message(FATAL_ERROR "libcc_coll_preload_core.so imports interposed MPI entry points (${_bad}): libcc_coll's "
                      "calls to them would reach the front; define them in mpi_forward.cc")
endif()
list(LENGTH _imported _n)
message(STATUS "preload_core_binds_locally: ${_n} imported symbols, none interposed")
