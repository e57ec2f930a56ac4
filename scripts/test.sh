#!/bin/sh
# Installs the dependencies, builds libcc_coll and runs the whole test suite
# (unit tests, mpirun suites with 1-4 ranks, post-install consumer test) with
# Open MPI, then builds it again with MPICH and runs the suite there
# (cc_coll_test_mpich in common.sh; CC_COLL_SKIP_MPICH=1 skips it), then with
# AddressSanitizer + UndefinedBehaviorSanitizer in a third build folder
# (build-sanitize) and runs the whole suite there too; a sanitizer report
# fails its test. CC_COLL_SANITIZE=0 skips that part.
# Extra arguments go to every ctest run, e.g.  scripts/test.sh -L mpi
. "$(dirname "$0")/common.sh"

cc_coll_install_deps
cc_coll_build -DCC_COLL_BUILD_TESTS=ON
echo "== running the test suite"
start=$(date +%s)
(cd "$CC_COLL_BUILD_DIR" && ctest --output-on-failure --timeout 600 -j "$CC_COLL_JOBS" "$@")
echo "== the test suite took $(($(date +%s) - start)) s"

start=$(date +%s)
cc_coll_test_mpich "$@"
echo "== the MPICH build and suite took $(($(date +%s) - start)) s"

if [ "${CC_COLL_SANITIZE:-1}" = 0 ]; then
    echo "== skipping the sanitizer build and suite (CC_COLL_SANITIZE=0)"
    exit 0
fi
start=$(date +%s)
cc_coll_build_sanitize -DCC_COLL_BUILD_TESTS=ON
echo "== the sanitizer build took $(($(date +%s) - start)) s"
echo "== running the test suite under ASan + UBSan"
start=$(date +%s)
(cd "$CC_COLL_SANITIZE_BUILD_DIR" && ctest --output-on-failure --timeout 600 -j "$CC_COLL_JOBS" "$@")
echo "== the test suite under ASan + UBSan took $(($(date +%s) - start)) s"
