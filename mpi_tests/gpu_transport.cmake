# The staged device transport's chunk pipeline, with a host copy engine
# standing in for the GPU's: built and run in every build, with or without
# CUDA (np 1..4).
add_executable(mpi_staged_transport staged_transport.cc)
target_link_libraries(mpi_staged_transport PRIVATE cc_coll_static MPI::MPI_C)
foreach(n 1 2 3 4)
  cc_coll_add_mpi_test(mpi_staged_transport_np${n} ${n} "mpi" $<TARGET_FILE:mpi_staged_transport>)
endforeach()
# With CUDA the same program also runs DeviceTransport: on device buffers
# where there is a GPU, and its failure report where there is none. So it is
# labelled gpu too: `ctest -L gpu` on a GPU machine runs it on device buffers.
if(CC_COLL_HAVE_CUDA)
  target_compile_definitions(mpi_staged_transport PRIVATE CC_COLL_HAVE_CUDA)
  foreach(n 1 2 3 4)
    set_property(TEST mpi_staged_transport_np${n} APPEND PROPERTY LABELS gpu)
  endforeach()
endif()
