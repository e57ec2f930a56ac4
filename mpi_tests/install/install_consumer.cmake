# Post-install test: installs the built tree into a fresh prefix, builds the
# consumer project against it with find_package(cc_coll) and, for the C
# program, with pkg-config, then runs the three programs under mpirun.
#
#   cmake -DBUILD_DIR=<top build dir> -DWORK_DIR=<scratch dir> -DCONSUMER_DIR=<mpi_tests/install/consumer>
#         -DLIBDIR=<CMAKE_INSTALL_LIBDIR> -DINCLUDEDIR=<CMAKE_INSTALL_INCLUDEDIR>
#         -DC_COMPILER=<cc> -DCXX_COMPILER=<c++> -DGENERATOR=<generator> [-DCONFIG=<config>]
#         -DPKG_CONFIG=<pkg-config> -DMPIEXEC=<mpiexec> -DMPIEXEC_NUMPROC_FLAG=-n
#         -DMPIEXEC_PREFLAGS=<|-list> -DMPIEXEC_POSTFLAGS=<|-list> -P install_consumer.cmake
foreach(_v BUILD_DIR WORK_DIR CONSUMER_DIR LIBDIR INCLUDEDIR C_COMPILER CXX_COMPILER GENERATOR MPIEXEC
           MPIEXEC_NUMPROC_FLAG)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "install_consumer.cmake: -D${_v}=... is required")
  endif()
endforeach()
# MPIEXEC_PREFLAGS / MPIEXEC_POSTFLAGS come joined with '|'.
string(REPLACE "|" ";" MPIEXEC_PREFLAGS "${MPIEXEC_PREFLAGS}")
string(REPLACE "|" ";" MPIEXEC_POSTFLAGS "${MPIEXEC_POSTFLAGS}")
if(NOT CONFIG)
  set(CONFIG Release)
endif()

set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)

# Runs a command, echoes it, and fails the test with its output if it fails.
function(run_step what)
  message(STATUS "${what}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(STEP_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# 1. Install into a fresh prefix.
run_step("install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")
if(IS_ABSOLUTE "${LIBDIR}")
  message(FATAL_ERROR "CMAKE_INSTALL_LIBDIR is absolute (${LIBDIR}): it cannot follow --prefix")
endif()
set(libdir "${prefix}/${LIBDIR}")
foreach(_f "${INCLUDEDIR}/cc_coll.h" "${INCLUDEDIR}/cc_coll.hpp" "${LIBDIR}/libcc_coll.so"
           "${LIBDIR}/cmake/cc_coll/cc_collConfig.cmake" "${LIBDIR}/cmake/cc_coll/cc_collConfigVersion.cmake"
           "${LIBDIR}/cmake/cc_coll/cc_collTargets.cmake" "${LIBDIR}/pkgconfig/cc_coll.pc")
  if(NOT EXISTS "${prefix}/${_f}")
    file(GLOB_RECURSE _all RELATIVE "${prefix}" "${prefix}/*")
    string(REPLACE ";" "\n  " _all "${_all}")
    message(FATAL_ERROR "not installed: ${prefix}/${_f}\ninstalled files:\n  ${_all}")
  endif()
endforeach()
# Nothing may point back into the build or source tree.
file(GLOB _cmake_files "${libdir}/cmake/cc_coll/*.cmake")
foreach(_f IN LISTS _cmake_files "${libdir}/pkgconfig/cc_coll.pc")
  file(READ "${_f}" _text)
  string(FIND "${_text}" "${BUILD_DIR}" _pos)
  if(NOT _pos EQUAL -1)
    message(FATAL_ERROR "${_f} refers to the build tree ${BUILD_DIR}")
  endif()
endforeach()

# 2. Consumer with find_package(cc_coll).
set(cbuild "${WORK_DIR}/build")
run_step("configure consumer" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${cbuild}" -G "${GENERATOR}"
         "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_BUILD_TYPE=${CONFIG}"
         "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
string(FIND "${STEP_OUTPUT}" " from ${prefix}/${LIBDIR}/cmake/cc_coll" _found_at)
if(_found_at EQUAL -1)
  message(FATAL_ERROR "the consumer did not find cc_coll in ${prefix}:\n${STEP_OUTPUT}")
endif()
run_step("build consumer" "${CMAKE_COMMAND}" --build "${cbuild}" --config "${CONFIG}")
find_program(_c "consumer_c" PATHS "${cbuild}" "${cbuild}/${CONFIG}" NO_DEFAULT_PATH REQUIRED)
find_program(_cxx "consumer_cxx" PATHS "${cbuild}" "${cbuild}/${CONFIG}" NO_DEFAULT_PATH REQUIRED)

# 3. The C program with pkg-config and the main build's C compiler.
if(NOT PKG_CONFIG)
  find_program(PKG_CONFIG pkg-config REQUIRED)
endif()
set(ENV{PKG_CONFIG_PATH} "${libdir}/pkgconfig")
run_step("pkg-config" "${PKG_CONFIG}" --cflags --libs cc_coll)
string(STRIP "${STEP_OUTPUT}" _pc_flags)
separate_arguments(_pc_flags UNIX_COMMAND "${_pc_flags}")
set(_pc "${WORK_DIR}/consumer_c_pkgconfig")
run_step("compile with pkg-config flags" "${C_COMPILER}" -std=c99 -o "${_pc}" "${CONSUMER_DIR}/consumer.c" ${_pc_flags})

# 4. Every program links the installed library, not the build tree's.
find_program(_ldd ldd)
if(_ldd)
  foreach(_exe "${_c}" "${_cxx}" "${_pc}")
    run_step("ldd" "${_ldd}" "${_exe}")
    if(NOT STEP_OUTPUT MATCHES "libcc_coll\\.so[.0-9]* => ([^ \t\n]+)")
      message(FATAL_ERROR "${_exe} does not load libcc_coll at all:\n${STEP_OUTPUT}")
    endif()
    file(REAL_PATH "${CMAKE_MATCH_1}" _loaded)
    file(REAL_PATH "${libdir}/libcc_coll.so" _installed)
    if(NOT _loaded STREQUAL _installed)
      message(FATAL_ERROR "${_exe} loads ${_loaded}, not the installed ${_installed}:\n${STEP_OUTPUT}")
    endif()
  endforeach()
endif()

# 5. Run them with 2 ranks.
foreach(_exe "${_c}" "${_cxx}" "${_pc}")
  run_step("run" "${MPIEXEC}" ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} "${_exe}" ${MPIEXEC_POSTFLAGS})
  if(NOT STEP_OUTPUT MATCHES "2 ranks: passed")
    message(FATAL_ERROR "${_exe} did not report success:\n${STEP_OUTPUT}")
  endif()
  message(STATUS "  ${STEP_OUTPUT}")
endforeach()
message(STATUS "install_consumer: all steps passed")
