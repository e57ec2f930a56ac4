#!/bin/sh
# perf_selection.sh: measures the top-k selection and compress step on one
# core (bench/bench_topk_select.cc) and regenerates the selection results of
# docs/performance.md. One command, from anywhere in the checkout:
#
#   scripts/perf/perf_selection.sh
#
# Steps: installs the Debian packages (scripts/common.sh) unless
# CC_COLL_SKIP_APT=1; configures and builds Release in
# ${CC_COLL_BUILD_DIR:-build} (tests off); from the repository root runs
#   build/bench/cc_coll_bench_topk --benchmark_repetitions=3
#       --benchmark_report_aggregates_only=true --benchmark_min_time=0.5
#       --benchmark_out=docs/perf/selection.json --benchmark_out_format=json
# (one command line); records the CPU model, the load average at the end, the
# OS, compiler and CMake versions and the command in the JSON's context; then
#   python3 scripts/perf/perf_selection.py docs/perf/selection.json docs/performance.md
# rewrites the part of docs/performance.md between
# <!-- BEGIN selection-results --> and <!-- END selection-results -->.
# Takes a few minutes; the rates are per core and use CPU time.
#
# Settings (environment):
#   CC_COLL_BUILD_DIR     build folder                       [build]
#   CC_COLL_SKIP_APT=1    do not run apt-get
#   CC_COLL_JOBS          parallel build jobs                [nproc]
me=perf_selection.sh
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"

die() {
    echo "$me: $*" >&2
    exit 2
}
case ${1:-} in
    -h | --help)
        sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
        exit 0
        ;;
    '') ;;
    *) die "no arguments expected (settings come from the environment; see --help)" ;;
esac

cc_coll_install_deps
cc_coll_build -DCC_COLL_BUILD_TESTS=OFF -DCC_COLL_BUILD_BENCHMARKS=ON

build_abs=$(cd "$CC_COLL_BUILD_DIR" && pwd)
[ -x "$build_abs/bench/cc_coll_bench_topk" ] ||
    die "$build_abs/bench/cc_coll_bench_topk was not built (is libbenchmark-dev installed?)"
# The page shows the command as it ran; keep it relative to the checkout.
case $build_abs in
    "$CC_COLL_ROOT"/*) bench=${build_abs#"$CC_COLL_ROOT"/}/bench/cc_coll_bench_topk ;;
    *) bench=$build_abs/bench/cc_coll_bench_topk ;;
esac
case $bench in *[[:space:]]*) die "the build folder's path must not contain white space: $bench" ;; esac

cd "$CC_COLL_ROOT" || exit 2
mkdir -p docs/perf
load1=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load1" -v c="$(nproc)" 'BEGIN { exit !(l > 0.5 * c) }'; then
    echo "$me: warning: load average $load1 on $(nproc) CPUs: other work is running;" \
        "the rates use CPU time, but wall-clock times will be longer" >&2
fi

cmd="$bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.5"
cmd="$cmd --benchmark_out=docs/perf/selection.json --benchmark_out_format=json"
echo "== $cmd"
# shellcheck disable=SC2086  # cmd: several words, none with white space
$cmd
python3 scripts/perf/perf_selection.py --annotate docs/perf/selection.json --command "$cmd" --build-dir "$build_abs"
echo "== python3 scripts/perf/perf_selection.py docs/perf/selection.json docs/performance.md"
python3 scripts/perf/perf_selection.py docs/perf/selection.json docs/performance.md
