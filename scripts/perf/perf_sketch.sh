#!/bin/sh
# perf_sketch.sh: measures the count sketch's encode and decode on one core
# (bench/bench_sketch.cc) and regenerates the sketch results of
# docs/perf/kernels.md. One command, from anywhere in the checkout:
#
#   scripts/perf/perf_sketch.sh
#
# Steps (scripts/perf/perf_bench.sh): installs the Debian packages
# (scripts/common.sh) unless CC_COLL_SKIP_APT=1; configures Release in
# ${CC_COLL_BUILD_DIR:-build} (tests off) and builds the one program it
# runs, cc_coll_bench_sketch; then
#   python3 scripts/perf/perf_sketch.py --run --build-dir <build folder>
# runs, from the repository root,
#   build/bench/cc_coll_bench_sketch --benchmark_repetitions=3
#       --benchmark_report_aggregates_only=true --benchmark_min_time=0.5
#       --benchmark_out=docs/perf/sketch.json --benchmark_out_format=json
# (one command line); records the machine, the load average at the end and
# the command in the JSON's context; and rewrites the part of
# docs/perf/kernels.md between
# <!-- BEGIN sketch-results --> and <!-- END sketch-results -->, as
#   python3 scripts/perf/perf_sketch.py docs/perf/sketch.json docs/perf/kernels.md
# does from the JSON alone.
# The benchmark runs for under a minute; its rates are per core (CPU time).
#
# Settings (environment):
#   CC_COLL_BUILD_DIR     build folder                       [build]
#   CC_COLL_SKIP_APT=1    do not run apt-get
#   CC_COLL_JOBS          parallel build jobs                [nproc]
me=perf_sketch.sh
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"
# shellcheck source=scripts/perf/perf_bench.sh
. "$(dirname "$0")/perf_bench.sh"

perf_bench_main cc_coll_bench_sketch perf_sketch.py "$@"
