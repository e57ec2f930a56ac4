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
