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
