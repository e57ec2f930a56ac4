# The library's GPU sources, compiled only when CUDA is on. One line per
# file, grouped by layer (gpu support, compressors, transport, collectives).
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
  # collectives: cc_coll_allreduce on device buffers
  src/collectives/allreduce_device.cc
)
