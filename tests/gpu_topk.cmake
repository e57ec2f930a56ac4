# The device top-k and threshold ladder, host side: the shared host/device
# functions of topk_keys.hpp and threshold_bins.hpp, and a step-by-step
# replay of the device radix select, checked against the host compressors.
# Runs without a GPU.
add_executable(cc_coll_unit_topk_cuda test_topk_cuda_host.cc)
target_link_libraries(cc_coll_unit_topk_cuda PRIVATE cc_coll_static GTest::gtest_main Threads::Threads)
target_compile_options(cc_coll_unit_topk_cuda PRIVATE ${CC_COLL_TEST_WARNINGS})
gtest_discover_tests(cc_coll_unit_topk_cuda
  TEST_PREFIX "unit_topk_cuda."
  DISCOVERY_TIMEOUT 30
  PROPERTIES LABELS unit TIMEOUT 60)

# The device top-k and threshold ladder run on a GPU against the host
# compressors: selected indices, payload bytes, scatter-add, the residual
# after the error-feedback step, pick and collect. Every test is skipped
# without a CUDA device.
add_executable(cc_coll_unit_topk_cuda_device test_topk_cuda_device.cc)
target_link_libraries(cc_coll_unit_topk_cuda_device PRIVATE cc_coll_static GTest::gtest_main Threads::Threads)
target_compile_options(cc_coll_unit_topk_cuda_device PRIVATE ${CC_COLL_TEST_WARNINGS})
gtest_discover_tests(cc_coll_unit_topk_cuda_device
  TEST_PREFIX "unit_topk_cuda_device."
  TEST_LIST cc_coll_unit_topk_cuda_device_TESTS
  DISCOVERY_TIMEOUT 30
  PROPERTIES TIMEOUT 300)
cc_coll_label_gpu_tests(cc_coll_unit_topk_cuda_device)
