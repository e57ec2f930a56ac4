# The device count sketch's host-testable parts (count_sketch_hash.hpp): the
# shared hashing against the host's, the device's bitmap reads, the round-
# based peeling emulated on the host against sketch::decode, and the sizing
# rule the device applies to column loads. Runs without a GPU.
add_executable(cc_coll_unit_sketch_cuda test_sketch_cuda_host.cc)
target_link_libraries(cc_coll_unit_sketch_cuda PRIVATE cc_coll_static GTest::gtest_main Threads::Threads)
target_compile_options(cc_coll_unit_sketch_cuda PRIVATE ${CC_COLL_TEST_WARNINGS})
gtest_discover_tests(cc_coll_unit_sketch_cuda
  TEST_PREFIX "unit_sketch_cuda."
  DISCOVERY_TIMEOUT 30
  PROPERTIES LABELS unit TIMEOUT 120)

# The device count sketch run on a GPU against the host's: bitmap, column
# loads and rows per table, encode (bit for bit on integer data, within the
# rounding of the atomics otherwise), decode (the host's result, and the
# same bits on every rerun: deterministic peeling), median fallback, both
# sides of the small-rounds threshold. Every test is skipped without a CUDA
# device.
add_executable(cc_coll_unit_sketch_cuda_device test_sketch_cuda_device.cc)
target_link_libraries(cc_coll_unit_sketch_cuda_device PRIVATE cc_coll_static GTest::gtest_main Threads::Threads)
target_compile_options(cc_coll_unit_sketch_cuda_device PRIVATE ${CC_COLL_TEST_WARNINGS})
gtest_discover_tests(cc_coll_unit_sketch_cuda_device
  TEST_PREFIX "unit_sketch_cuda_device."
  TEST_LIST cc_coll_unit_sketch_cuda_device_TESTS
  DISCOVERY_TIMEOUT 30
  PROPERTIES TIMEOUT 300)
cc_coll_label_gpu_tests(cc_coll_unit_sketch_cuda_device)
