# Checks every version of libcc_coll that the documentation and the
# packaging files state against CC_COLL_VERSION_{MAJOR,MINOR,PATCH} of
# include/cc_coll.h, the single source of the version (CTest: docs_versions).
#
#   cmake -DSOURCE_DIR=<source dir> [-DPROJECT_VERSION=<CMake's>] [-DVERBOSE=ON] -P scripts/docs/check_versions.cmake
#
# VERBOSE lists every version mention the rule recognises.
# Files read: README.md, docs/*.md, docs/perf/*.md, python/*.md, python/cc_coll/_version.py,
# python/pyproject.toml, c_api/fortran/cc_coll.F90, cmake/*.in, and the
# project() call of CMakeLists.txt. PROJECT_VERSION, when given, is the
# version CMake read from the header; it must be the header's too.
#
# The rule. Only text that names libcc_coll (or one of its interfaces) next to
# the number counts as a version of libcc_coll; a number elsewhere (Open MPI
# 4.1.4, CUDA 13, Debian 12, torch 1.13, glibc 2.36, a density 0.01) is never
# read. A line states libcc_coll's version where it has:
#   A. `libcc_coll`, `cc_coll` or `cc_coll_<word>` (a tool, e.g. cc_coll_perf,
#      which prints the library's version), as a whole word, then a version
#      N.N or N.N.N, separated by `-`, or by blanks with an optional
#      `version` / `version:` and `v`, or by a comparison (`>=`, `=`, ...):
#      "libcc_coll 0.3.0", "cc_coll version 0.3", "cc_coll-0.3.0",
#      "cc_coll >= 0.3" (pkg-config), "find_package(cc_coll 0.3 REQUIRED)";
#   B. a shared object of the library, `libcc_coll<word>.so.N[.N[.N]]`, or a
#      bare `.so.N[.N[.N]]` (after a blank, a backquote, `(` or `,`) on a line
#      that names libcc_coll: "libcc_coll.so.0" (the SONAME: the major
#      version), "`.so.0.3.0`";
#   C. pkg-config's `--atleast-version=N.N cc_coll` (also exact-, max-);
#   D. on a line naming `cc_coll.version()`, `cc_coll.version_info()`,
#      `cc_coll.__version__`, `cc_coll_version_string` or
#      `cc_coll_get_version`, or starting with `__version__ =`: a quoted
#      "N.N.N" and a tuple (N, N, N);
#   E. `CC_COLL_VERSION_{MAJOR,MINOR,PATCH}`, `CC_COLL_FORTRAN_VERSION_*` or
#      `ABI_{MAJOR,MINOR,PATCH}` followed by a number (after blanks, `=` or
#      `:`), and `CC_COLL_VERSION` followed by its integer
#      (MAJOR*10000 + MINOR*100 + PATCH);
#   F. a line `version = "N.N.N"` (pyproject.toml) or `Version: N.N.N` (.pc).
# N.N.N must equal MAJOR.MINOR.PATCH; N.N must equal MAJOR.MINOR; a `.so.`
# suffix must equal as many leading components as it has.
#
# Recorded runs are exempt: a program's output reproduced as it was printed
# at a named commit states the version of that commit, and rewriting it
# would misreport the run. Such a region is enclosed in the lines
#   <!-- versions: recorded ... -->   (the rest of the line says which run)
#   <!-- versions: end -->
# and the test lists how many lines it skipped that way. Everything else
# that matches the rule must agree with the header, so a version bump in
# include/cc_coll.h makes this test fail until the documents follow.
cmake_minimum_required(VERSION 3.18)
if(NOT DEFINED SOURCE_DIR)
  message(FATAL_ERROR "check_versions.cmake: -DSOURCE_DIR=... is required")
endif()

# --- the header's version ---------------------------------------------------
file(STRINGS "${SOURCE_DIR}/include/cc_coll.h" _defs
     REGEX "^#define CC_COLL_VERSION_(MAJOR|MINOR|PATCH) [0-9]+$")
foreach(_d IN LISTS _defs)
  string(REGEX MATCH "CC_COLL_VERSION_(MAJOR|MINOR|PATCH) ([0-9]+)" _ "${_d}")
  set(V_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
endforeach()
foreach(_c MAJOR MINOR PATCH)
  if(NOT DEFINED V_${_c})
    message(FATAL_ERROR "include/cc_coll.h has no line '#define CC_COLL_VERSION_${_c} <number>'")
  endif()
endforeach()
set(V3 "${V_MAJOR}.${V_MINOR}.${V_PATCH}")
set(V2 "${V_MAJOR}.${V_MINOR}")
math(EXPR VINT "${V_MAJOR} * 10000 + ${V_MINOR} * 100 + ${V_PATCH}")

set(failures "")
set(checked 0)
set(skipped 0)
set(files_read 0)

if(DEFINED PROJECT_VERSION AND NOT PROJECT_VERSION STREQUAL V3)
  string(APPEND failures "\n  CMake's PROJECT_VERSION is ${PROJECT_VERSION}, include/cc_coll.h says ${V3}")
endif()

# Lines become list elements: ; [ ] \ would split or escape them, so they are
# replaced by control characters while the rules run and put back in messages.
string(ASCII 1 _semi)
string(ASCII 2 _lb)
string(ASCII 3 _rb)
string(ASCII 4 _bs)
function(decode text out)
  string(REPLACE "${_semi}" ";" text "${text}")
  string(REPLACE "${_lb}" "[" text "${text}")
  string(REPLACE "${_rb}" "]" text "${text}")
  string(REPLACE "${_bs}" "\\" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Compares one stated version with the header's: `stated` is N.N or N.N.N
# (kind "version"), 1 to 3 dot-separated components (kind "so") or an integer
# (kind "int"), or one component (kind MAJOR, MINOR or PATCH).
function(expect where excerpt stated kind)
  math(EXPR checked "${checked} + 1")
  set(checked "${checked}" PARENT_SCOPE)
  if(kind STREQUAL "int")
    set(want "${VINT}")
  elseif(kind MATCHES "^(MAJOR|MINOR|PATCH)$")
    set(want "${V_${kind}}")
  elseif(stated MATCHES "^[0-9]+$")
    set(want "${V_MAJOR}")
  elseif(stated MATCHES "^[0-9]+\\.[0-9]+$")
    set(want "${V2}")
  elseif(stated MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
    set(want "${V3}")
  else()
    set(want "${V3} (at most three components)")
  endif()
  decode("${excerpt}" ex)
  if(VERBOSE)
    message(STATUS "${where}: '${ex}' states ${stated}")
  endif()
  if(NOT stated STREQUAL want)
    string(APPEND failures "\n  ${where}: '${ex}' states ${stated}, include/cc_coll.h says ${want}")
    set(failures "${failures}" PARENT_SCOPE)
  endif()
endfunction()

set(_ver "[0-9]+\\.[0-9]+(\\.[0-9]+)?")
set(_rule_a "(^|[^A-Za-z0-9_])(lib)?cc_coll[A-Za-z0-9_]*`?(-|,? +(version:? +)?v?| *[<>=~]+ *)${_ver}")
set(_rule_b_named "libcc_coll[A-Za-z0-9_]*\\.so(\\.[0-9]+)+")
set(_rule_b_bare "(^|[ `(,])\\.so(\\.[0-9]+)+")
set(_rule_c "--(atleast|exact|max)-version[= ]+${_ver} +(lib)?cc_coll")
set(_rule_d_line "cc_coll\\.(version|version_info)\\(\\)|cc_coll\\.__version__|cc_coll_version_string|cc_coll_get_version|^__version__ *=")
set(_rule_d_str "[\"'][0-9]+\\.[0-9]+\\.[0-9]+[\"']")
set(_rule_d_tuple "\\( *[0-9]+, *[0-9]+, *[0-9]+ *\\)")
set(_rule_e_comp "(CC_COLL_VERSION_|CC_COLL_FORTRAN_VERSION_|ABI_)(MAJOR|MINOR|PATCH)`?( +|`? *[=:] *`?)[0-9]+")
set(_rule_e_int "CC_COLL_VERSION`?( +|`? *[=<>]+ *`?)[0-9]+")
set(_rule_f "^ *version *= *[\"'][0-9.]+[\"']|^Version: *[0-9.]+")

function(scan_file path rel)
  file(READ "${path}" text)
  string(REPLACE "\\" "${_bs}" text "${text}")
  string(REPLACE ";" "${_semi}" text "${text}")
  string(REPLACE "[" "${_lb}" text "${text}")
  string(REPLACE "]" "${_rb}" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(n 0)
  set(in_recorded 0)
  set(file_checked_before ${checked})
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    set(where "${rel}:${n}")
    if(line MATCHES "^<!-- versions: recorded")
      if(in_recorded)
        string(APPEND failures "\n  ${where}: '<!-- versions: recorded' inside a recorded region")
      endif()
      set(in_recorded ${n})
      continue()
    elseif(line MATCHES "^<!-- versions: end -->")
      if(NOT in_recorded)
        string(APPEND failures "\n  ${where}: '<!-- versions: end -->' without '<!-- versions: recorded ...'")
      endif()
      set(in_recorded 0)
      continue()
    endif()
    if(in_recorded)
      math(EXPR skipped "${skipped} + 1")
      continue()
    endif()
    # A
    string(REGEX MATCHALL "${_rule_a}" hits "${line}")
    foreach(h IN LISTS hits)
      string(REGEX MATCH "[0-9]+\\.[0-9]+(\\.[0-9]+)?$" v "${h}")
      string(REGEX REPLACE "^[^A-Za-z]" "" h "${h}")
      expect("${where}" "${h}" "${v}" version)
    endforeach()
    # B
    string(REGEX MATCHALL "${_rule_b_named}" hits "${line}")
    if(line MATCHES "libcc_coll")
      string(REGEX MATCHALL "${_rule_b_bare}" bare "${line}")
      list(APPEND hits ${bare})
    endif()
    foreach(h IN LISTS hits)
      string(REGEX MATCH "\\.so\\.(.*)$" _ "${h}")
      set(v "${CMAKE_MATCH_1}")
      string(REGEX REPLACE "^[ `(,]" "" h "${h}")
      expect("${where}" "${h}" "${v}" so)
    endforeach()
    # C
    string(REGEX MATCHALL "${_rule_c}" hits "${line}")
    foreach(h IN LISTS hits)
      string(REGEX MATCH "${_ver}" v "${h}")
      expect("${where}" "${h}" "${v}" version)
    endforeach()
    # D
    if(line MATCHES "${_rule_d_line}")
      string(REGEX MATCHALL "${_rule_d_str}" hits "${line}")
      foreach(h IN LISTS hits)
        string(REGEX MATCH "[0-9.]+" v "${h}")
        expect("${where}" "${h}" "${v}" version)
      endforeach()
      string(REGEX MATCHALL "${_rule_d_tuple}" hits "${line}")
      foreach(h IN LISTS hits)
        string(REGEX REPLACE "[( )]" "" v "${h}")
        string(REPLACE "," "." v "${v}")
        expect("${where}" "${h}" "${v}" version)
      endforeach()
    endif()
    # E
    string(REGEX MATCHALL "${_rule_e_comp}" hits "${line}")
    foreach(h IN LISTS hits)
      if(h MATCHES "^(CC_COLL_VERSION_|CC_COLL_FORTRAN_VERSION_|ABI_)(MAJOR|MINOR|PATCH)")
        set(c "${CMAKE_MATCH_2}")
        string(REGEX MATCH "[0-9]+$" v "${h}")
        expect("${where}" "${h}" "${v}" "${c}")
      endif()
    endforeach()
    string(REGEX MATCHALL "${_rule_e_int}" hits "${line}")
    foreach(h IN LISTS hits)
      string(REGEX MATCH "[0-9]+$" v "${h}")
      expect("${where}" "${h}" "${v}" int)
    endforeach()
    # F
    if(line MATCHES "${_rule_f}")
      set(h "${CMAKE_MATCH_0}")
      string(REGEX MATCH "[0-9.]+[\"']?$" v "${h}")
      string(REGEX REPLACE "[\"']" "" v "${v}")
      string(REGEX REPLACE "^ +" "" h "${h}")
      expect("${where}" "${h}" "${v}" version)
    endif()
  endforeach()
  if(in_recorded)
    string(APPEND failures "\n  ${rel}:${in_recorded}: recorded region not closed by '<!-- versions: end -->'")
  endif()
  math(EXPR file_checked "${checked} - ${file_checked_before}")
  math(EXPR files_read "${files_read} + 1")
  set(failures "${failures}" PARENT_SCOPE)
  set(checked "${checked}" PARENT_SCOPE)
  set(skipped "${skipped}" PARENT_SCOPE)
  set(files_read "${files_read}" PARENT_SCOPE)
  set(file_checked "${file_checked}" PARENT_SCOPE)
endfunction()

# --- the documents and packaging files ---------------------------------------
file(GLOB _docs RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/*.md" "${SOURCE_DIR}/docs/*.md" "${SOURCE_DIR}/docs/perf/*.md" "${SOURCE_DIR}/python/*.md" "${SOURCE_DIR}/cmake/*.in")
list(SORT _docs)
list(APPEND _docs python/pyproject.toml c_api/fortran/cc_coll.F90)
foreach(_f IN LISTS _docs)
  if(NOT EXISTS "${SOURCE_DIR}/${_f}")
    string(APPEND failures "\n  ${_f} does not exist (update the list in scripts/docs/check_versions.cmake)")
    continue()
  endif()
  scan_file("${SOURCE_DIR}/${_f}" "${_f}")
endforeach()

# python/cc_coll/_version.py names the version four times (ABI_MAJOR,
# ABI_MINOR, ABI_PATCH, __version__); each must be seen, so that a change of
# its layout cannot silently take it out of the check.
scan_file("${SOURCE_DIR}/python/cc_coll/_version.py" "python/cc_coll/_version.py")
if(NOT file_checked EQUAL 4)
  string(APPEND failures "\n  python/cc_coll/_version.py: ${file_checked} versions recognised, expected 4 "
                         "(ABI_MAJOR = N, ABI_MINOR = N, ABI_PATCH = N, __version__ = \"N.N.N\")")
endif()

# CMakeLists.txt: project() takes the header's version (a literal VERSION
# there must equal it).
file(READ "${SOURCE_DIR}/CMakeLists.txt" _cml)
if(NOT _cml MATCHES "project\\(cc_coll[^)]*VERSION +([^ \n)]+)")
  string(APPEND failures "\n  CMakeLists.txt: no 'project(cc_coll ... VERSION ...)'")
elseif(CMAKE_MATCH_1 MATCHES "^[0-9]")
  expect("CMakeLists.txt project()" "VERSION ${CMAKE_MATCH_1}" "${CMAKE_MATCH_1}" version)
endif()
math(EXPR files_read "${files_read} + 1")

if(NOT failures STREQUAL "")
  message(FATAL_ERROR "Stale versions of libcc_coll (the rule is at the top of "
                      "scripts/docs/check_versions.cmake):${failures}")
endif()
message(STATUS "libcc_coll ${V3}: ${checked} version mentions in ${files_read} files agree with include/cc_coll.h; "
               "${skipped} lines in recorded runs not checked")
