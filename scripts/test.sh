#!/bin/sh
# Installs the dependencies, builds libcc_coll and runs the whole test suite
# (unit tests, mpirun suites with 1-4 ranks, post-install consumer test) with
# Open MPI, then builds it again with MPICH and runs the suite there, less
# the unit and docs tests (cc_coll_test_mpich in common.sh; CC_COLL_SKIP_MPICH=1
# skips it), then with AddressSanitizer + UndefinedBehaviorSanitizer in a
# third build folder (build-sanitize) and runs the suite there too, less the
# tests that add no code path there (below); a sanitizer report fails its
# test. CC_COLL_SANITIZE=0 skips that part. Extra arguments go to every
# ctest run, e.g.  scripts/test.sh -L mpi
. "$(dirname "$0")/common.sh"

# What the sanitizer suite leaves out: the docs, examples, install and
# Python tests (scripts, builds of consumers, and the C entry points through
# ctypes: no code path of the library that the other tests do not run
# there), the 4-rank runs but those of the hierarchical allreduce and of
# the conformance suite (the 2- and 3-rank runs take the same code paths,
# even and uneven blocks), the shim's 3-rank runs (its own code does not
# depend on the rank count; the library's 3-rank runs stay), and two of the
# three Fortran MPI interfaces of the shim's non-blocking test (mpi_f08
# stays).
CC_COLL_SANITIZE_SKIP_LABELS='^(docs|examples|install|python)$'
cc_coll_sanitize_skip_tests() {
    (cd "$CC_COLL_SANITIZE_BUILD_DIR" && ctest -N) |
        sed -n 's/^ *Test *#[0-9]*: \([^ ]*\)$/\1/p' |
        grep -E '_np4$|^preload_.*_np3$|^preload_fortran_iallreduce_(use_mpi|mpif_h)_np2$' |
        grep -vE '^mpi_(hierarchical|conformance)_np4$' | paste -sd'|' | sed 's/^\(..*\)$/^(\1)$/'
}

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
echo "== running the test suite under ASan + UBSan (less what adds no code path there; docs/building.md, \"Sanitizers\")"
start=$(date +%s)
(cd "$CC_COLL_SANITIZE_BUILD_DIR" &&
    ctest --output-on-failure --timeout 600 -j "$CC_COLL_JOBS" -LE "$CC_COLL_SANITIZE_SKIP_LABELS" \
        -E "$(cc_coll_sanitize_skip_tests)" "$@")
echo "== the test suite under ASan + UBSan took $(($(date +%s) - start)) s"
