#!/bin/sh
# perf_sketch.sh: measures the count sketch's encode and decode on one core
# (bench/bench_sketch.cc) and regenerates the sketch results of
# docs/performance.md. One command, from anywhere in the checkout:
#
#   scripts/perf/perf_sketch.sh
#
# Steps: installs the Debian packages (scripts/common.sh) unless
# CC_COLL_SKIP_APT=1; configures and builds Release in
# ${CC_COLL_BUILD_DIR:-build} (tests off); from the repository root runs
#   build/bench/cc_coll_bench_sketch --benchmark_repetitions=3
#       --benchmark_report_aggregates_only=true --benchmark_min_time=0.5
#       --benchmark_out=docs/perf/sketch.json --benchmark_out_format=json
# (one command line); records the machine, the load average at the end and
# the command in the JSON's context (scripts/perf/perf_sketch.py --annotate); then
#   python3 scripts/perf/perf_sketch.py docs/perf/sketch.json docs/performance.md
# rewrites the part of docs/performance.md between
# <!-- BEGIN sketch-results --> and <!-- END sketch-results -->.
# The benchmark runs for under a minute; its rates are per core (CPU time).
#
# Environment:
#   CC_COLL_BUILD_DIR     build folder                       [build]
#   CC_COLL_SKIP_APT=1    do not run apt-get
#   CC_COLL_JOBS          parallel build jobs                [nproc]
me=perf_sketch.sh
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"

fail() {
    echo "$me: $*" >&2
    exit 2
}
if [ "$#" -gt 0 ]; then
    if [ "$1" = -h ] || [ "$1" = --help ]; then
        sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
        exit 0
    fi
    fail "no arguments expected (settings come from the environment; see --help)"
fi

cc_coll_install_deps
cc_coll_build -DCC_COLL_BUILD_TESTS=OFF -DCC_COLL_BUILD_BENCHMARKS=ON

build_dir=$(cd "$CC_COLL_BUILD_DIR" && pwd)
program=bench/cc_coll_bench_sketch
test -x "$build_dir/$program" || fail "$build_dir/$program was not built (is libbenchmark-dev installed?)"
# Shown on the page as it ran, so relative to the checkout when it can be.
bench=$build_dir/$program
if [ "${build_dir#"$CC_COLL_ROOT"/}" != "$build_dir" ]; then
    bench=${build_dir#"$CC_COLL_ROOT"/}/$program
fi
if printf '%s' "$bench" | grep -q '[[:space:]]'; then
    fail "white space in the build folder's path is not supported: $bench"
fi

cd "$CC_COLL_ROOT" || exit 2
mkdir -p docs/perf
out=docs/perf/sketch.json
ncpu=$(nproc)
read -r load1 _ </proc/loadavg
if awk -v l="$load1" -v c="$ncpu" 'BEGIN { exit !(l > c / 2) }'; then
    echo "$me: warning: the machine is busy (load average $load1, $ncpu CPUs);" \
        "wall-clock times will be longer than the CPU times the page uses" >&2
fi

cmd="$bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true"
cmd="$cmd --benchmark_min_time=0.5 --benchmark_out=$out --benchmark_out_format=json"
echo "== $cmd"
# shellcheck disable=SC2086  # several words, none with white space
$cmd
python3 scripts/perf/perf_sketch.py --annotate "$out" --command "$cmd" --build-dir "$build_dir"
echo "== python3 scripts/perf/perf_sketch.py $out docs/performance.md"
python3 scripts/perf/perf_sketch.py "$out" docs/performance.md
