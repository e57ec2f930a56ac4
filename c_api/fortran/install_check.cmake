# Post-install test of the Fortran interface: installs the build tree into a
# fresh prefix, checks the library, its SONAME link and the .mod file are
# there, then builds examples/fortran/allreduce.f90 against the prefix twice
# and runs each program with 2 ranks:
#   a. by hand: <fc> -I<prefix>/<moddir> <MPI compile flags> allreduce.f90
#               -L<prefix>/<libdir> -lcc_coll_fortran -lcc_coll <MPI link flags>
#   b. with CMake: examples/fortran/CMakeLists.txt, find_package(cc_coll) and
#      cc_coll::cc_coll_fortran (which also builds lowrank.f90, run with 2
#      ranks as well).
#
#   cmake -DBUILD_DIR=<top build dir> -DWORK_DIR=<scratch dir> -DEXAMPLE_DIR=<examples/fortran>
#         -DLIBDIR=<CMAKE_INSTALL_LIBDIR> -DMODDIR=<.mod dir under the prefix> -DSOVERSION=<major>
#         -DFortran_COMPILER=<fc> -DC_COMPILER=<cc> -DGENERATOR=<generator> [-DCONFIG=<config>]
#         -DMPI_Fortran_COMPILE=<|-list> -DMPI_Fortran_LINK=<|-list>
#         -DMPIEXEC=<mpiexec> -DMPIEXEC_NUMPROC_FLAG=-n -DMPIEXEC_PREFLAGS=<|-list>
#         -DMPIEXEC_POSTFLAGS=<|-list> -P install_check.cmake
foreach(_v BUILD_DIR WORK_DIR EXAMPLE_DIR LIBDIR MODDIR SOVERSION Fortran_COMPILER C_COMPILER GENERATOR MPIEXEC
           MPIEXEC_NUMPROC_FLAG)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "install_check.cmake: -D${_v}=... is required")
  endif()
endforeach()
foreach(_v MPI_Fortran_COMPILE MPI_Fortran_LINK MPIEXEC_PREFLAGS MPIEXEC_POSTFLAGS)
  string(REPLACE "|" ";" ${_v} "${${_v}}")
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()
if(IS_ABSOLUTE "${LIBDIR}" OR IS_ABSOLUTE "${MODDIR}")
  message(FATAL_ERROR "LIBDIR (${LIBDIR}) and MODDIR (${MODDIR}) must be relative to follow --prefix")
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
  set(STEP_ERROR "${err}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
set(libdir "${prefix}/${LIBDIR}")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# 1. Install into a fresh prefix.
run_step("install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")
foreach(_f "${LIBDIR}/libcc_coll_fortran.so" "${LIBDIR}/libcc_coll_fortran.so.${SOVERSION}"
           "${MODDIR}/cc_coll.mod" "${LIBDIR}/cmake/cc_coll/cc_collTargets.cmake")
  if(NOT EXISTS "${prefix}/${_f}")
    file(GLOB_RECURSE _all RELATIVE "${prefix}" "${prefix}/*")
    string(REPLACE ";" "\n  " _all "${_all}")
    message(FATAL_ERROR "not installed: ${prefix}/${_f}\ninstalled files:\n  ${_all}")
  endif()
endforeach()
# The exported target names the installed .mod folder, not the build tree.
file(GLOB _targets "${libdir}/cmake/cc_coll/cc_collTargets*.cmake")
set(_all_targets "")
foreach(_f IN LISTS _targets)
  file(READ "${_f}" _text)
  string(APPEND _all_targets "${_text}")
endforeach()
foreach(_want "cc_coll::cc_coll_fortran" "\${_IMPORT_PREFIX}/${MODDIR}")
  string(FIND "${_all_targets}" "${_want}" _pos)
  if(_pos EQUAL -1)
    message(FATAL_ERROR "${libdir}/cmake/cc_coll/cc_collTargets*.cmake does not mention ${_want}")
  endif()
endforeach()
string(FIND "${_all_targets}" "${BUILD_DIR}" _pos)
if(NOT _pos EQUAL -1)
  message(FATAL_ERROR "the installed cc_collTargets*.cmake refer to the build tree ${BUILD_DIR}")
endif()
# SONAME carries the major version.
find_program(_readelf readelf)
if(_readelf)
  run_step("readelf" "${_readelf}" -d "${libdir}/libcc_coll_fortran.so")
  if(NOT STEP_OUTPUT MATCHES "SONAME[^\n]*\\[libcc_coll_fortran\\.so\\.${SOVERSION}\\]")
    message(FATAL_ERROR "libcc_coll_fortran.so has no SONAME libcc_coll_fortran.so.${SOVERSION}:\n${STEP_OUTPUT}")
  endif()
endif()

# 2a. By hand, with the module folder and the two libraries on the command line.
set(_by_hand "${WORK_DIR}/allreduce_by_hand")
run_step("compile by hand" "${Fortran_COMPILER}" -o "${_by_hand}" "-I${prefix}/${MODDIR}" ${MPI_Fortran_COMPILE}
         "${EXAMPLE_DIR}/allreduce.f90" "-L${libdir}" "-Wl,-rpath,${libdir}" -lcc_coll_fortran -lcc_coll
         ${MPI_Fortran_LINK})

# 2b. With CMake: find_package(cc_coll) and cc_coll::cc_coll_fortran.
set(cbuild "${WORK_DIR}/build")
run_step("configure examples/fortran" "${CMAKE_COMMAND}" -S "${EXAMPLE_DIR}" -B "${cbuild}" -G "${GENERATOR}"
         "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_BUILD_TYPE=${CONFIG}"
         "-DCMAKE_Fortran_COMPILER=${Fortran_COMPILER}" "-DCMAKE_C_COMPILER=${C_COMPILER}")
run_step("build examples/fortran" "${CMAKE_COMMAND}" --build "${cbuild}" --config "${CONFIG}")
find_program(_with_cmake "cc_coll_example_fortran" PATHS "${cbuild}" "${cbuild}/${CONFIG}" NO_DEFAULT_PATH REQUIRED)
find_program(_lowrank_with_cmake "cc_coll_example_fortran_lowrank" PATHS "${cbuild}" "${cbuild}/${CONFIG}"
             NO_DEFAULT_PATH REQUIRED)

# 3. Both programs load the installed libraries, not the build tree's.
find_program(_ldd ldd)
foreach(_exe "${_by_hand}" "${_with_cmake}")
  if(NOT _ldd)
    break()
  endif()
  run_step("ldd" "${_ldd}" "${_exe}")
  foreach(_lib libcc_coll_fortran libcc_coll)
    if(NOT STEP_OUTPUT MATCHES "${_lib}\\.so[.0-9]* => ([^ \t\n]+)")
      message(FATAL_ERROR "${_exe} does not load ${_lib}:\n${STEP_OUTPUT}")
    endif()
    file(REAL_PATH "${CMAKE_MATCH_1}" _loaded)
    file(REAL_PATH "${libdir}/${_lib}.so" _installed)
    if(NOT _loaded STREQUAL _installed)
      message(FATAL_ERROR "${_exe} loads ${_loaded}, not the installed ${_installed}:\n${STEP_OUTPUT}")
    endif()
  endforeach()
endforeach()

# 4. Run them with 2 ranks.
foreach(_exe "${_by_hand}" "${_with_cmake}")
  run_step("run" "${MPIEXEC}" ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} "${_exe}" ${MPIEXEC_POSTFLAGS})
  if(NOT STEP_OUTPUT MATCHES "allreduce_example: 2 ranks: passed")
    message(FATAL_ERROR "${_exe} did not report success:\n${STEP_OUTPUT}\n${STEP_ERROR}")
  endif()
  message(STATUS "  ${STEP_OUTPUT}")
endforeach()
run_step("run" "${MPIEXEC}" ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} "${_lowrank_with_cmake}" ${MPIEXEC_POSTFLAGS})
if(NOT STEP_OUTPUT MATCHES "lowrank_example: 2 ranks: passed")
  message(FATAL_ERROR "${_lowrank_with_cmake} did not report success:\n${STEP_OUTPUT}\n${STEP_ERROR}")
endif()
message(STATUS "  ${STEP_OUTPUT}")
message(STATUS "fortran_install: all steps passed")
