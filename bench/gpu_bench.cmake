# GPU benchmarks (builds with CUDA only; run them on a machine with a GPU).
#
#  cc_coll_bench_gpu_kernels  Google Benchmark: every compression kernel
#                       (top-k select, encode + scatter-add, count-sketch
#                       encode/decode, threshold ladder, element-wise EF
#                       kernels, PowerSGD compress/decompress) timed with
#                       CUDA events, beside the device-to-device copy
#                       bandwidth of the same bytes in the same run
#                       (counter frac_of_copy). Links cc_coll_static for the
#                       internal device functions.
#  cc_coll_gpu_transport_perf  mpirun -np 2 on one GPU: cc_coll_allreduce on
#                       device buffers (staged, and direct when MPI is
#                       CUDA-aware) against host buffers, 1-64 MiB f32, every
#                       method; prints a markdown table. Public C API only.
#
# scripts/gpu/gpu_run.sh builds and runs both; docs/performance.md ("GPU kernels
# and transport") says what they measure.
if(NOT CC_COLL_HAVE_CUDA)
  return()
endif()

add_executable(cc_coll_bench_gpu_kernels bench_gpu_kernels.cu)
target_link_libraries(cc_coll_bench_gpu_kernels PRIVATE cc_coll_static benchmark::benchmark)
set_target_properties(cc_coll_bench_gpu_kernels PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
target_compile_options(cc_coll_bench_gpu_kernels PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra>)

add_executable(cc_coll_gpu_transport_perf gpu_transport_perf.c)
target_link_libraries(cc_coll_gpu_transport_perf PRIVATE cc_coll CUDA::cudart m)
target_compile_options(cc_coll_gpu_transport_perf PRIVATE
  $<$<COMPILE_LANG_AND_ID:C,GNU,Clang>:-Wall -Wextra>)
