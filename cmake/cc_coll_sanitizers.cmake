# The sanitizer builds (included once from the top-level CMakeLists.txt,
# before any target or test).
#
#   CC_COLL_ENABLE_ASAN   AddressSanitizer (and LeakSanitizer, which comes
#                         with it) on the C, C++ and Fortran code
#   CC_COLL_ENABLE_UBSAN  UndefinedBehaviorSanitizer on the C and C++ code
#
# Either stops a program at its first report: ASan always does (no
# -fsanitize-recover=address), UBSan is built with
# -fno-sanitize-recover=undefined, and LeakSanitizer makes the exit status
# non-zero. Use a build directory of its own, with CUDA off
# (docs/building.md; scripts/test.sh runs both in build-sanitize).
#
# For the tests this sets
#   CC_COLL_SANITIZER_TEST_ENV       environment every test runs with (the
#                                    runtimes' options, the LSan suppressions)
#   CC_COLL_SANITIZER_PRELOAD        with ASan: the ASan runtime, which a
#                                    program not built with it (python3, an
#                                    installed consumer) must load first,
#                                    through LD_PRELOAD, before it loads
#                                    libcc_coll; empty otherwise
#   CC_COLL_SANITIZER_MPIEXEC_FLAGS  with ASan: "-x LD_PRELOAD=<runtime>",
#                                    mpiexec flags that preload it into the
#                                    ranks only (mpiexec itself stays
#                                    uninstrumented); empty otherwise
#   CC_COLL_SANITIZER_PYTHON_ASAN_OPTIONS
#                                    with ASan: "ASAN_OPTIONS=..." for python3
#                                    processes (below); empty otherwise
#   CC_COLL_SANITIZER_FAIL_REGEX     a sanitizer report in a test's output
#   CC_COLL_SANITIZED                ON in a sanitizer build: the few tests
#                                    whose work dominates the suite's time
#                                    there do less of it
# and the function cc_coll_sanitizer_fail_on_report() below.

option(CC_COLL_ENABLE_ASAN
  "Build the C, C++ and Fortran code with -fsanitize=address (LeakSanitizer included), stopping at the first report"
  OFF)
option(CC_COLL_ENABLE_UBSAN
  "Build the C and C++ code with -fsanitize=undefined, stopping at the first report" OFF)

set(CC_COLL_SANITIZER_TEST_ENV "")
set(CC_COLL_SANITIZER_PRELOAD "")
set(CC_COLL_SANITIZER_MPIEXEC_FLAGS "")
set(CC_COLL_SANITIZER_PYTHON_ASAN_OPTIONS "")
set(CC_COLL_SANITIZED OFF)
if(CC_COLL_ENABLE_ASAN OR CC_COLL_ENABLE_UBSAN)
  set(CC_COLL_SANITIZED ON)
endif()
set(CC_COLL_SANITIZER_FAIL_REGEX "ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error: |UndefinedBehaviorSanitizer")

# cc_coll_sanitizer_fail_on_report(): in a sanitizer build, every test
# registered so far in the calling folder fails when its output holds a
# sanitizer report. A test with PASS_REGULAR_EXPRESSION passes on its output
# whatever its exit status, so a folder that has such tests calls this at its
# end (the others fail on the non-zero status a report gives).
function(cc_coll_sanitizer_fail_on_report)
  if(NOT CC_COLL_ENABLE_ASAN AND NOT CC_COLL_ENABLE_UBSAN)
    return()
  endif()
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _tests)
    get_test_property(${_t} FAIL_REGULAR_EXPRESSION _fail)
    if(_fail)
      list(APPEND _fail "${CC_COLL_SANITIZER_FAIL_REGEX}")
    else()
      set(_fail "${CC_COLL_SANITIZER_FAIL_REGEX}")
    endif()
    set_tests_properties(${_t} PROPERTIES FAIL_REGULAR_EXPRESSION "${_fail}")
  endforeach()
endfunction()

if(NOT CC_COLL_ENABLE_ASAN AND NOT CC_COLL_ENABLE_UBSAN)
  return()
endif()
if(NOT CMAKE_C_COMPILER_ID MATCHES "GNU|Clang" OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  message(FATAL_ERROR "CC_COLL_ENABLE_ASAN / CC_COLL_ENABLE_UBSAN need GCC or Clang")
endif()

# Frame pointers give the reports whole stacks at any optimisation level.
add_compile_options($<$<COMPILE_LANGUAGE:C,CXX,Fortran>:-fno-omit-frame-pointer>)
if(CC_COLL_ENABLE_ASAN)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX,Fortran>:-fsanitize=address>)
  add_link_options(-fsanitize=address)
endif()
if(CC_COLL_ENABLE_UBSAN)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=undefined)
endif()

# The runtimes' options. halt_on_error: stop at the first report (ASan and
# UBSan); print_stacktrace: UBSan reports with a stack. With ASan,
# LeakSanitizer runs at every instrumented program's exit and makes its
# status non-zero; the only leaks it may pass over are those of
# cmake/sanitizers/lsan.supp, where each entry says whose they are. Those
# entries name Open MPI's functions, which are built without frame pointers:
# fast_unwind_on_malloc=0 records allocation stacks through them.
set(CC_COLL_SANITIZER_SUPPRESSIONS_DIR "${CMAKE_CURRENT_LIST_DIR}/sanitizers")
set(_cc_coll_asan_options "halt_on_error=1:check_initialization_order=1:strict_init_order=1")
if(CC_COLL_ENABLE_ASAN)
  list(APPEND CC_COLL_SANITIZER_TEST_ENV
    "ASAN_OPTIONS=${_cc_coll_asan_options}:detect_leaks=1:fast_unwind_on_malloc=0"
    "LSAN_OPTIONS=suppressions=${CC_COLL_SANITIZER_SUPPRESSIONS_DIR}/lsan.supp:print_suppressions=0")
  # python3 processes (the Python package's tests, mpi4py under the preload
  # shim) run with leak detection off. CPython frees few of its objects at
  # exit (interned strings, static types, the state of numpy, mpi4py and
  # PyTorch), so LeakSanitizer reports thousands of blocks there, every one
  # with the interpreter's frames beneath it: a suppression would have to
  # match every stack of the process (the same as turning it off) and would
  # need the slow unwinder, which makes these tests up to 6 times slower.
  # Leaks are the interpreter's there; libcc_coll's allocations are
  # leak-checked by the C, C++ and Fortran programs, which call the same
  # entry points. ASan's other checks stay on in python3.
  set(CC_COLL_SANITIZER_PYTHON_ASAN_OPTIONS "ASAN_OPTIONS=${_cc_coll_asan_options}:detect_leaks=0")
endif()
if(CC_COLL_ENABLE_UBSAN)
  list(APPEND CC_COLL_SANITIZER_TEST_ENV "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endif()

if(CC_COLL_ENABLE_ASAN)
  # The compiler's own runtime, the one its -fsanitize=address links.
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE _cc_coll_libasan OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0 OR NOT IS_ABSOLUTE "${_cc_coll_libasan}" OR NOT EXISTS "${_cc_coll_libasan}")
    message(FATAL_ERROR "CC_COLL_ENABLE_ASAN: ${CMAKE_C_COMPILER} -print-file-name=libasan.so "
                        "does not name the ASan runtime (\"${_cc_coll_libasan}\")")
  endif()
  get_filename_component(CC_COLL_SANITIZER_PRELOAD "${_cc_coll_libasan}" REALPATH)
  # Open MPI's flag (the preload suite passes its settings the same way).
  set(CC_COLL_SANITIZER_MPIEXEC_FLAGS -x "LD_PRELOAD=${CC_COLL_SANITIZER_PRELOAD}")
endif()

set(_cc_coll_san "")
if(CC_COLL_ENABLE_ASAN)
  list(APPEND _cc_coll_san address)
endif()
if(CC_COLL_ENABLE_UBSAN)
  list(APPEND _cc_coll_san undefined)
endif()
message(STATUS "libcc_coll: sanitizers ${_cc_coll_san}; runtime to preload: ${CC_COLL_SANITIZER_PRELOAD}")
