# Shared by every folder that registers mpirun tests (included once from the
# top-level CMakeLists.txt before any of them, after cc_coll_mpi.cmake).

# One BLAS thread per rank: the tests run several ranks on few cores. The
# OMPI_* pair lets Open MPI's mpirun run as root; other MPIs ignore it. In a
# sanitizer build, also the runtimes' options (cmake/cc_coll_sanitizers.cmake).
set(CC_COLL_MPI_TEST_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1"
    ${CC_COLL_SANITIZER_TEST_ENV})

# The launcher, from its --version: CC_COLL_MPIEXEC_KIND is "openmpi"
# (Open MPI's mpirun), "hydra" (MPICH's mpiexec, also Intel MPI's and
# MVAPICH's) or "" (another; the tests then use Open MPI's syntax).
# CC_COLL_MPI_IS_OPEN_MPI: the launcher is Open MPI's.
# cc_coll_mpiexec_kind(<launcher> <out var>): that kind, for any launcher.
function(cc_coll_mpiexec_kind launcher out)
  set(_kind "")
  if(launcher)
    execute_process(COMMAND "${launcher}" --version
      OUTPUT_VARIABLE _version ERROR_VARIABLE _version RESULT_VARIABLE _rc TIMEOUT 30)
    if(_version MATCHES "Open MPI|OpenRTE")
      set(_kind openmpi)
    elseif(_version MATCHES "HYDRA|Hydra|Intel\\(R\\) MPI")
      set(_kind hydra)
    endif()
  endif()
  set(${out} "${_kind}" PARENT_SCOPE)
endfunction()

separate_arguments(CC_COLL_MPIEXEC_PREFLAGS UNIX_COMMAND "${MPIEXEC_PREFLAGS}")
separate_arguments(CC_COLL_MPIEXEC_POSTFLAGS UNIX_COMMAND "${MPIEXEC_POSTFLAGS}")
cc_coll_mpiexec_kind("${MPIEXEC_EXECUTABLE}" CC_COLL_MPIEXEC_KIND)
set(CC_COLL_MPI_IS_OPEN_MPI OFF)
if(CC_COLL_MPIEXEC_KIND STREQUAL "openmpi")
  set(CC_COLL_MPI_IS_OPEN_MPI ON)
  # Open MPI refuses more ranks than cores unless told to oversubscribe.
  list(APPEND CC_COLL_MPIEXEC_PREFLAGS --oversubscribe)
endif()

# A launcher of one MPI starting programs of another runs each rank as a
# singleton (or not at all): every multi-rank test would fail. Say so now.
set(_cc_coll_launcher_family "")
if(CC_COLL_MPIEXEC_KIND STREQUAL "openmpi")
  set(_cc_coll_launcher_family "Open MPI")
elseif(CC_COLL_MPIEXEC_KIND STREQUAL "hydra")
  set(_cc_coll_launcher_family "MPICH")
endif()
if(_cc_coll_launcher_family AND NOT CC_COLL_MPI_FAMILY STREQUAL "other" AND
   NOT _cc_coll_launcher_family STREQUAL CC_COLL_MPI_FAMILY)
  message(FATAL_ERROR
    "MPIEXEC_EXECUTABLE=${MPIEXEC_EXECUTABLE} is ${_cc_coll_launcher_family}'s launcher, but the library is built "
    "with ${CC_COLL_MPI_FAMILY} (${MPI_C_COMPILER}). Pass the same MPI's launcher, -DMPIEXEC_EXECUTABLE=<path> "
    "(Debian: /usr/bin/mpiexec.mpich or /usr/bin/mpiexec.openmpi), or -DMPI_EXECUTABLE_SUFFIX=<suffix> in a fresh "
    "build folder; or build without the tests (-DCC_COLL_BUILD_TESTS=OFF).")
endif()

# cc_coll_mpiexec_env(<out var> NAME=VALUE...): the launcher arguments that
# give each rank NAME=VALUE: Open MPI's "-x NAME=VALUE", Hydra's
# "-genv NAME VALUE". VALUE may hold generator expressions.
# cc_coll_mpiexec_env_of(<kind> <out var> NAME=VALUE...): the same for a
# launcher of that kind.
function(cc_coll_mpiexec_env out)
  cc_coll_mpiexec_env_of("${CC_COLL_MPIEXEC_KIND}" _args ${ARGN})
  set(${out} ${_args} PARENT_SCOPE)
endfunction()
function(cc_coll_mpiexec_env_of kind out)
  set(_args "")
  foreach(_kv IN LISTS ARGN)
    string(FIND "${_kv}" "=" _eq)
    if(_eq LESS 1)
      message(FATAL_ERROR "cc_coll_mpiexec_env: \"${_kv}\" is not NAME=VALUE")
    endif()
    if(kind STREQUAL "hydra")
      string(SUBSTRING "${_kv}" 0 ${_eq} _name)
      math(EXPR _from "${_eq} + 1")
      string(SUBSTRING "${_kv}" ${_from} -1 _value)
      list(APPEND _args -genv "${_name}" "${_value}")
    else()
      list(APPEND _args -x "${_kv}")
    endif()
  endforeach()
  set(${out} ${_args} PARENT_SCOPE)
endfunction()

# Several ranks under Hydra: MPICH's ch4:ucx device never yields the
# processor while it waits, which makes a test crawl wherever its ranks
# outnumber the free cores (more ranks than cores, or a machine busy with
# other work). The ranks of such tests preload mpi_tests/yield_when_idle.c
# (its header says why), added to the LD_PRELOAD the test gives its ranks,
# if any.
if(CC_COLL_MPIEXEC_KIND STREQUAL "hydra")
  add_library(cc_coll_test_yield_when_idle SHARED ${PROJECT_SOURCE_DIR}/mpi_tests/yield_when_idle.c)
  target_link_libraries(cc_coll_test_yield_when_idle PRIVATE ${CMAKE_DL_LIBS})
endif()

# cc_coll_add_mpi_test(<name> <nprocs> <labels> <command...>)
function(cc_coll_add_mpi_test name nprocs labels)
  set(_args ${ARGN})
  set(_yield "")
  if(CC_COLL_MPIEXEC_KIND STREQUAL "hydra" AND nprocs GREATER 1)
    set(_yield $<TARGET_FILE:cc_coll_test_yield_when_idle>)
    list(FIND _args LD_PRELOAD _at)
    if(_at GREATER 0)
      math(EXPR _genv "${_at} - 1")
      list(GET _args ${_genv} _flag)
    endif()
    if(_at GREATER 0 AND _flag STREQUAL "-genv")
      math(EXPR _value "${_at} + 1")
      list(GET _args ${_value} _preloads)
      list(REMOVE_AT _args ${_value})
      list(INSERT _args ${_value} "${_preloads}:${_yield}")
      set(_yield "")
    else()
      set(_yield -genv LD_PRELOAD ${_yield})
    endif()
  endif()
  add_test(NAME ${name}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${nprocs} ${CC_COLL_MPIEXEC_PREFLAGS} ${_yield} ${_args}
            ${CC_COLL_MPIEXEC_POSTFLAGS})
  set_tests_properties(${name} PROPERTIES
    PROCESSORS ${nprocs}
    LABELS "${labels}"
    ENVIRONMENT "${CC_COLL_MPI_TEST_ENV}"
    TIMEOUT 300)
endfunction()

# cc_coll_add_skipped_test(<name> <labels> <reason>): a test that prints
# <reason> and is counted as skipped, for a test this build cannot run.
function(cc_coll_add_skipped_test name labels reason)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "${name}: skipped: ${reason}")
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" SKIP_REGULAR_EXPRESSION "${name}: skipped: ")
endfunction()

# cc_coll_python_mpi_family(<python> <out var>): "Open MPI" or "MPICH" for
# the MPI <python>'s mpi4py is built for, or empty (no mpi4py, or another).
function(cc_coll_python_mpi_family python out)
  set(${out} "" PARENT_SCOPE)
  execute_process(COMMAND "${python}" -c
      "import mpi4py; mpi4py.rc.initialize = False; mpi4py.rc.finalize = False; from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0].strip())"
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _version ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 60)
  if(NOT _rc EQUAL 0)
    return()
  endif()
  if(_version MATCHES "Open MPI")
    set(${out} "Open MPI" PARENT_SCOPE)
  elseif(_version MATCHES "MPICH|MVAPICH|Intel\\(R\\) MPI")
    set(${out} "MPICH" PARENT_SCOPE)
  endif()
  string(REGEX REPLACE "[,;].*" "" _short "${_version}")
  set(${out}_VERSION "${_short}" PARENT_SCOPE)
endfunction()

# cc_coll_python_mpi_mismatch(<python> <out var>): empty when <python>'s
# mpi4py runs on the MPI this build uses (or either cannot be told), else
# why not, e.g. "/usr/bin/python3's mpi4py is built for Open MPI (Open MPI
# v4.1.4), this build for MPICH". mpi4py and libcc_coll in one process must
# share one MPI; Debian's python3-mpi4py is an Open MPI build.
function(cc_coll_python_mpi_mismatch python out)
  set(${out} "" PARENT_SCOPE)
  cc_coll_python_mpi_family("${python}" _family)
  if(_family AND NOT CC_COLL_MPI_FAMILY STREQUAL "other" AND NOT _family STREQUAL CC_COLL_MPI_FAMILY)
    set(${out} "${python}'s mpi4py is built for ${_family} (${_family_VERSION}), this build for ${CC_COLL_MPI_FAMILY}: the test needs an mpi4py of the same MPI" PARENT_SCOPE)
  endif()
endfunction()
