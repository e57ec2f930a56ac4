#!/bin/sh
# perf_selection.sh: measures the top-k selection and compress step on one
# core (bench/bench_topk_select.cc) and regenerates the selection results of
# docs/perf/kernels.md. One command, from anywhere in the checkout:
#
#   scripts/perf/perf_selection.sh
#
# Steps (scripts/perf/perf_bench.sh): installs the Debian packages
# (scripts/common.sh) unless CC_COLL_SKIP_APT=1; configures Release in
# ${CC_COLL_BUILD_DIR:-build} (tests off) and builds the one program it
# runs, cc_coll_bench_topk; then
#   python3 scripts/perf/perf_selection.py --run --build-dir <build folder>
# runs, from the repository root,
#   build/bench/cc_coll_bench_topk --benchmark_repetitions=3
#       --benchmark_report_aggregates_only=true --benchmark_min_time=0.5
#       --benchmark_out=docs/perf/selection.json --benchmark_out_format=json
# (one command line); records the CPU model, the load average at the end, the
# OS, compiler and CMake versions and the command in the JSON's context; and
# rewrites the part of docs/perf/kernels.md between
# <!-- BEGIN selection-results --> and <!-- END selection-results -->, as
#   python3 scripts/perf/perf_selection.py docs/perf/selection.json docs/perf/kernels.md
# does from the JSON alone.
# Takes a few minutes; the rates are per core and use CPU time.
#
# Settings (environment):
#   CC_COLL_BUILD_DIR     build folder                       [build]
#   CC_COLL_SKIP_APT=1    do not run apt-get
#   CC_COLL_JOBS          parallel build jobs                [nproc]
me=perf_selection.sh
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"
# shellcheck source=scripts/perf/perf_bench.sh
. "$(dirname "$0")/perf_bench.sh"

perf_bench_main cc_coll_bench_topk perf_selection.py "$@"
