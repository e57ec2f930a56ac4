# The library's GPU sources, compiled only when CUDA is on. One line per
# file, grouped by layer (gpu support, compressors, transport, execution backend).
set(CC_COLL_CUDA_SOURCES
  # gpu: element-wise kernels every GPU algorithm shares
  src/gpu/elementwise.cu
  # compressors
  src/compressors/topk/topk_cuda.cu
  src/compressors/threshold/threshold_cuda.cu
  src/compressors/sketch/count_sketch_cuda.cu
  src/compressors/lowrank/powersgd_cuda.cu
  # transport: device buffers to MPI, direct or staged
  src/transport/device_transport.cc
  # exec: the device execution backend of the collective algorithms
  src/exec/cuda_exec.cc
)
