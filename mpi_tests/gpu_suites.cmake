# GPU suites (builds with CUDA only): cc_coll_allreduce on device buffers.
#
#   ctest -L gpu     mpi_gpu_allreduce_{staged,direct}_np{1..4}
#
# Each runs with CC_COLL_CUDA_TRANSPORT set to the transport in its name.
# Exit status 77 is reported as skipped: no CUDA device, a compute mode that
# refuses ranks sharing a device, or the direct transport with an MPI that is
# not CUDA-aware (the program first checks that device calls then fail with
# CC_COLL_ERR_NOT_SUPPORTED). A run should take a minute at most; the
# timeout bounds what a hung kernel costs a time-limited GPU session.
if(NOT CC_COLL_HAVE_CUDA)
  return()
endif()

add_executable(mpi_gpu_allreduce gpu_allreduce.c)
target_link_libraries(mpi_gpu_allreduce PRIVATE cc_coll CUDA::cudart)
if(NOT WIN32)
  target_link_libraries(mpi_gpu_allreduce PRIVATE m)
endif()

foreach(_cc_coll_transport staged direct)
  foreach(n 1 2 3 4)
    set(_name mpi_gpu_allreduce_${_cc_coll_transport}_np${n})
    cc_coll_add_mpi_test(${_name} ${n} "mpi;gpu" $<TARGET_FILE:mpi_gpu_allreduce>)
    set_tests_properties(${_name} PROPERTIES
      ENVIRONMENT "${CC_COLL_MPI_TEST_ENV};CC_COLL_CUDA_TRANSPORT=${_cc_coll_transport}"
      SKIP_RETURN_CODE 77
      TIMEOUT 300)
  endforeach()
endforeach()
