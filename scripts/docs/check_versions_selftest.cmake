# Shows that check_versions.cmake can fail, and fails only where it should
# (CTest: docs_versions_selftest). It builds a small source tree under
# WORK_DIR with the repository's header and packaging files and a README.md
# that states, line by line, stale versions of libcc_coll in each form the
# rule knows (derived from the header, so they stay stale after a bump),
# versions of other software, and a recorded run; then it runs the check and
# requires that it fails, reports every stale line and no other.
#
#   cmake -DSOURCE_DIR=<source dir> -DWORK_DIR=<scratch dir> -P scripts/docs/check_versions_selftest.cmake
cmake_minimum_required(VERSION 3.18)
foreach(_v SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "check_versions_selftest.cmake: -D${_v}=... is required")
  endif()
endforeach()

file(STRINGS "${SOURCE_DIR}/include/cc_coll.h" _defs
     REGEX "^#define CC_COLL_VERSION_(MAJOR|MINOR|PATCH) [0-9]+$")
foreach(_d IN LISTS _defs)
  string(REGEX MATCH "CC_COLL_VERSION_(MAJOR|MINOR|PATCH) ([0-9]+)" _ "${_d}")
  set(${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
endforeach()
math(EXPR NEXT_MINOR "${MINOR} + 1")
math(EXPR NEXT_MAJOR "${MAJOR} + 1")
math(EXPR STALE_INT "${MAJOR} * 10000 + ${NEXT_MINOR} * 100 + ${PATCH}")
set(OLD3 "${MAJOR}.${NEXT_MINOR}.${PATCH}")   # any other version will do
set(OLD2 "${MAJOR}.${NEXT_MINOR}")
set(CUR3 "${MAJOR}.${MINOR}.${PATCH}")

set(tree "${WORK_DIR}/check_versions_selftest")
file(REMOVE_RECURSE "${tree}")
foreach(_f include/cc_coll.h CMakeLists.txt python/cc_coll/_version.py python/pyproject.toml c_api/fortran/cc_coll.F90)
  get_filename_component(_dir "${tree}/${_f}" DIRECTORY)
  file(COPY "${SOURCE_DIR}/${_f}" DESTINATION "${_dir}")
endforeach()

# One list per kind of line: stale ones must be reported, the others not.
set(stale
  "libcc_coll ${OLD3} on 2 ranks"
  "the cc_coll_perf ${OLD3} tool"
  "requires cc_coll version ${OLD2}"
  "find_package(cc_coll ${OLD2} REQUIRED)"
  "cc_coll >= ${OLD2}"
  "pkg-config --atleast-version=${OLD2} cc_coll"
  "`lib/libcc_coll.so.${MAJOR}` (SONAME), `.so.${OLD3}`"
  "links libcc_coll.so.${NEXT_MAJOR}"
  "`cc_coll.version()` | the library's version, `\"${OLD3}\"`"
  "`cc_coll.version_info()` | `(${MAJOR}, ${NEXT_MINOR}, ${PATCH})`"
  "integer(c_int), parameter :: CC_COLL_VERSION_MINOR = ${NEXT_MINOR}"
  "#if CC_COLL_VERSION >= ${STALE_INT}"
  "version = \"${OLD3}\"")
set(fine
  "libcc_coll ${CUR3} on 2 ranks, cc_coll >= ${MAJOR}.${MINOR}, libcc_coll.so.${MAJOR}"
  "Debian 12.11, Open MPI 4.1.4, OpenBLAS 0.3.21, CUDA 13.0, torch 1.13.0a0, glibc 2.36"
  "largest relative differences, libcc_coll ${CUR3} vs torch 1.13.0a0 powerSGD_hook"
  "C++ compiler GNU 12.2.0, CMake 3.25.1, Google Benchmark 1.7.1-1, mpirun (Open MPI) 4.1.4"
  "libmpi.so.40.30.2 next to `lib/libcc_coll.so.${MAJOR}`, python3.11, version 2.1 of the wire"
  "density 0.01, load factor 0.77, `--pos 0.9`, cc_coll_bench_topk --benchmark_min_time=0.5"
  "torch.__version__ == \"1.13.0\", MPI_VERSION 3")
set(recorded
  "<!-- versions: recorded run at commit 0000000 -->"
  "# libcc_coll ${OLD3} pipeline example"
  "<!-- versions: end -->")

set(readme "")
set(n 0)
set(want_lines "")
set(other_lines "")
foreach(_kind stale fine recorded)
  foreach(_line IN LISTS ${_kind})
    math(EXPR n "${n} + 1")
    string(APPEND readme "${_line}\n")
    if(_kind STREQUAL "stale")
      list(APPEND want_lines ${n})
    else()
      list(APPEND other_lines ${n})
    endif()
  endforeach()
endforeach()
file(WRITE "${tree}/README.md" "${readme}")

execute_process(COMMAND ${CMAKE_COMMAND} "-DSOURCE_DIR=${tree}" -P "${CMAKE_CURRENT_LIST_DIR}/check_versions.cmake"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(out "${out}${err}")
set(problems "")
if(rc EQUAL 0)
  string(APPEND problems "\n  the check passed on stale versions")
endif()
foreach(_l IN LISTS want_lines)
  if(NOT out MATCHES "README\\.md:${_l}: ")
    math(EXPR _i "${_l} - 1")
    list(GET stale ${_i} _text)
    string(APPEND problems "\n  README.md:${_l} is stale and was not reported: ${_text}")
  endif()
endforeach()
foreach(_l IN LISTS other_lines)
  if(out MATCHES "README\\.md:${_l}: ")
    string(APPEND problems "\n  README.md:${_l} was reported but states no stale version of libcc_coll")
  endif()
endforeach()
if(out MATCHES "(CMakeLists\\.txt|_version\\.py|pyproject\\.toml|cc_coll\\.F90)[: ]")
  string(APPEND problems "\n  a file copied from the repository was reported")
endif()
if(NOT problems STREQUAL "")
  message(FATAL_ERROR "check_versions.cmake does not follow its rule:${problems}\nIts output:\n${out}")
endif()
list(LENGTH want_lines _nw)
list(LENGTH other_lines _no)
message(STATUS "check_versions.cmake reports the ${_nw} stale lines and none of the ${_no} others")
