#!/bin/sh
# Installs the dependencies, builds libcc_coll and runs the whole test suite
# (unit tests, mpirun suites with 1-4 ranks, post-install consumer test),
# then builds it again with MPICH and runs the suite there (cc_coll_test_mpich
# in common.sh).
# Extra arguments go to ctest, e.g.  scripts/test.sh -L mpi
. "$(dirname "$0")/common.sh"

cc_coll_install_deps
cc_coll_build -DCC_COLL_BUILD_TESTS=ON
echo "== running the test suite"
cd "$CC_COLL_BUILD_DIR"
ctest --output-on-failure --timeout 600 -j "$CC_COLL_JOBS" "$@"
cc_coll_test_mpich "$@"
