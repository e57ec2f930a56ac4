# Shared by every folder that registers mpirun tests (included once from the
# top-level CMakeLists.txt before any of them).

# One BLAS thread per rank: the tests run several ranks on few cores. In a
# sanitizer build, also the runtimes' options (cmake/cc_coll_sanitizers.cmake).
set(CC_COLL_MPI_TEST_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1"
    ${CC_COLL_SANITIZER_TEST_ENV})

# Flags before the program. Open MPI refuses more ranks than cores unless
# told to oversubscribe.
separate_arguments(CC_COLL_MPIEXEC_PREFLAGS UNIX_COMMAND "${MPIEXEC_PREFLAGS}")
separate_arguments(CC_COLL_MPIEXEC_POSTFLAGS UNIX_COMMAND "${MPIEXEC_POSTFLAGS}")
set(CC_COLL_MPI_IS_OPEN_MPI OFF)
if(MPIEXEC_EXECUTABLE)
  execute_process(COMMAND "${MPIEXEC_EXECUTABLE}" --version
    OUTPUT_VARIABLE _cc_coll_mpiexec_version ERROR_VARIABLE _cc_coll_mpiexec_version
    RESULT_VARIABLE _cc_coll_mpiexec_rc TIMEOUT 30)
  if(_cc_coll_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(CC_COLL_MPI_IS_OPEN_MPI ON)
    list(APPEND CC_COLL_MPIEXEC_PREFLAGS --oversubscribe)
  endif()
endif()

# cc_coll_add_mpi_test(<name> <nprocs> <labels> <command...>)
function(cc_coll_add_mpi_test name nprocs labels)
  add_test(NAME ${name}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${nprocs} ${CC_COLL_MPIEXEC_PREFLAGS} ${ARGN}
            ${CC_COLL_MPIEXEC_POSTFLAGS})
  set_tests_properties(${name} PROPERTIES
    PROCESSORS ${nprocs}
    LABELS "${labels}"
    ENVIRONMENT "${CC_COLL_MPI_TEST_ENV}"
    TIMEOUT 300)
endfunction()

