#!/bin/sh
# perf_lowrank.sh: measures PowerSGD's compress and decompress on one core
# (bench/bench_lowrank.cc) and regenerates the low-rank results of
# docs/perf/kernels.md. One command, from anywhere in the checkout:
#
#   scripts/perf/perf_lowrank.sh
#
# Steps (scripts/perf/perf_bench.sh): installs the Debian packages
# (scripts/common.sh) unless CC_COLL_SKIP_APT=1; configures Release in
# ${CC_COLL_BUILD_DIR:-build} (tests off) and builds the one program it
# runs, cc_coll_bench_lowrank; then
#   python3 scripts/perf/perf_lowrank.py --run --build-dir <build folder>
# runs, from the repository root, with OPENBLAS_NUM_THREADS=1 (one BLAS
# thread: one rank per core, as an MPI job would run it),
#   build/bench/cc_coll_bench_lowrank --benchmark_repetitions=5
#       --benchmark_report_aggregates_only=true --benchmark_min_time=0.2
#       --benchmark_out=docs/perf/lowrank.json --benchmark_out_format=json
# (one command line); records the machine, the load average at the end and
# the command in the JSON's context; and rewrites the part of
# docs/perf/kernels.md between
# <!-- BEGIN lowrank-results --> and <!-- END lowrank-results -->, as
#   python3 scripts/perf/perf_lowrank.py docs/perf/lowrank.json docs/perf/kernels.md
# does from the JSON alone.
# The benchmark runs for about a minute and a half; its rates are per core
# (CPU time).
#
# Settings (environment):
#   CC_COLL_BUILD_DIR     build folder                       [build]
#   CC_COLL_SKIP_APT=1    do not run apt-get
#   CC_COLL_JOBS          parallel build jobs                [nproc]
me=perf_lowrank.sh
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"
# shellcheck source=scripts/perf/perf_bench.sh
. "$(dirname "$0")/perf_bench.sh"

perf_bench_main cc_coll_bench_lowrank perf_lowrank.py "$@"
