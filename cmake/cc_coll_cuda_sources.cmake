# The library's GPU sources outside src/compressors (whose .cu files the top
# CMakeLists.txt picks up by folder), compiled only when CUDA is on.
set(CC_COLL_CUDA_SOURCES
  # gpu: element-wise kernels every GPU algorithm shares
  src/gpu/elementwise.cu
  # transport: device buffers to MPI, direct or staged
  src/transport/device_transport.cc
  # exec: the device execution backend of the collective algorithms
  src/exec/cuda_exec.cc
)
