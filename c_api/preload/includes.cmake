# Checks the shim's layering: its core, c_api/preload/*.cc and *.hpp,
# includes, of the project's headers, only the public C ABI (cc_coll.h), its
# settings lookup (core/preload_settings.hpp), the table it gives the front
# (core_api.h) and its own headers (c_api/preload/*.hpp); the settings
# header includes no project header but cc_coll.h; the front (front.c,
# built_mpi.c) includes core_api.h only, and core_api.h nothing. System
# and MPI headers (<...>) are not restricted.
# Run with -DSOURCE_DIR=<project source directory>.
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)

# check(<file> <allowed quoted includes...>)
function(check file)
  file(STRINGS "${SOURCE_DIR}/${file}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  set(_bad "")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" _header "${_line}")
    if(NOT _header IN_LIST ARGN)
      list(APPEND _bad "${_header}")
    endif()
  endforeach()
  if(_bad)
    string(JOIN ", " _bad ${_bad})
    string(JOIN ", " _allowed ${ARGN})
    message(FATAL_ERROR "${file} includes ${_bad}: the shim may use only ${_allowed} (docs/preload.md, "
                        "\"How the shim uses libcc_coll\")")
  endif()
  list(LENGTH _lines _n)
  message(STATUS "${file}: ${_n} project includes, all allowed")
endfunction()

file(GLOB _core_headers RELATIVE "${SOURCE_DIR}/c_api/preload" "${SOURCE_DIR}/c_api/preload/*.hpp")
file(GLOB _core_files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/c_api/preload/*.cc" "${SOURCE_DIR}/c_api/preload/*.hpp")
if(NOT _core_files)
  message(FATAL_ERROR "no source of the shim's core in ${SOURCE_DIR}/c_api/preload")
endif()
foreach(_file IN LISTS _core_files)
  check(${_file} cc_coll.h core/preload_settings.hpp core_api.h ${_core_headers})
endforeach()
check(src/core/preload_settings.hpp cc_coll.h)
check(c_api/preload/front.c core_api.h)
check(c_api/preload/built_mpi.c core_api.h)
check(c_api/preload/core_api.h)
