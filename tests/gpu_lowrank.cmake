# PowerSGD's device linear algebra (powersgd_cuda.hpp): its cuBLAS/cuSOLVER
# arguments interpreted on the host against the host products, Gram-Schmidt
# and QR, the Gaussian seed rule and the workspace layouts; the device
# functions against the host ones where a GPU is present (skipped otherwise).
add_executable(cc_coll_unit_lowrank_cuda test_lowrank_cuda_host.cc)
target_link_libraries(cc_coll_unit_lowrank_cuda PRIVATE cc_coll_static GTest::gtest_main Threads::Threads)
target_compile_options(cc_coll_unit_lowrank_cuda PRIVATE ${CC_COLL_TEST_WARNINGS})
gtest_discover_tests(cc_coll_unit_lowrank_cuda
  TEST_PREFIX "unit_lowrank_cuda."
  TEST_LIST cc_coll_unit_lowrank_cuda_TESTS
  DISCOVERY_TIMEOUT 30
  PROPERTIES TIMEOUT 60)
cc_coll_label_gpu_tests(cc_coll_unit_lowrank_cuda)
