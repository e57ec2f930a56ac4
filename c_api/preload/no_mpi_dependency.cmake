# Checks that libcc_coll_preload.so (the front) needs no MPI library: none
# of MPI_LIBRARIES (the build's MPI::MPI_C libraries) is among its NEEDED
# entries, whatever their version suffix. Run with -DREADELF=<readelf>
# -DLIBRARY=<.so> -DMPI_LIBRARIES=<list>.
if(NOT READELF)
  message(FATAL_ERROR "no readelf (CMAKE_READELF) to read ${LIBRARY}'s NEEDED entries")
endif()
execute_process(COMMAND "${READELF}" -d "${LIBRARY}" OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${LIBRARY} failed")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" _needed "${_out}")
set(_names "")
foreach(_line IN LISTS _needed)
  string(REGEX REPLACE ".*\\[([^]]+)\\]" "\\1" _name "${_line}")
  list(APPEND _names "${_name}")
endforeach()
foreach(_lib IN LISTS MPI_LIBRARIES)
  get_filename_component(_base "${_lib}" NAME)
  string(REGEX REPLACE "\\.so.*$" "" _stem "${_base}")
  foreach(_name IN LISTS _names)
    if(_name MATCHES "^${_stem}\\.so")
      message(FATAL_ERROR "${LIBRARY} needs ${_name}, an MPI library (${_lib}): preloading it would bring this MPI "
                          "into programs of another")
    endif()
  endforeach()
endforeach()
message(STATUS "${LIBRARY} needs ${_names}: no MPI library")
