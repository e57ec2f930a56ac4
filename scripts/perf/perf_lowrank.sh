#!/bin/sh
# perf_lowrank.sh: measures PowerSGD's compress and decompress on one core
# (bench/bench_lowrank.cc) and regenerates the low-rank results of
# docs/performance.md. One command, from anywhere in the checkout:
#
#   scripts/perf/perf_lowrank.sh
#
# Steps: installs the Debian packages (scripts/common.sh) unless
# CC_COLL_SKIP_APT=1; configures Release in ${CC_COLL_BUILD_DIR:-build}
# (tests off) and builds the one program it runs, cc_coll_bench_lowrank;
# from the repository root runs, with OPENBLAS_NUM_THREADS=1 (one BLAS
# thread: one rank per core, as an MPI job would run it),
#   build/bench/cc_coll_bench_lowrank --benchmark_repetitions=5
#       --benchmark_report_aggregates_only=true --benchmark_min_time=0.2
#       --benchmark_out=docs/perf/lowrank.json --benchmark_out_format=json
# (one command line); records the machine, the load average at the end and
# the command in the JSON's context (scripts/perf/perf_lowrank.py --annotate);
# then
#   python3 scripts/perf/perf_lowrank.py docs/perf/lowrank.json docs/performance.md
# rewrites the part of docs/performance.md between
# <!-- BEGIN lowrank-results --> and <!-- END lowrank-results -->.
# The benchmark runs for about a minute and a half; its rates are per core
# (CPU time).
#
# Environment:
#   CC_COLL_BUILD_DIR     build folder                       [build]
#   CC_COLL_SKIP_APT=1    do not run apt-get
#   CC_COLL_JOBS          parallel build jobs                [nproc]
me=perf_lowrank.sh
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
# Only the benchmark program is built (cc_coll_build would build everything).
echo "== configuring in $CC_COLL_BUILD_DIR and building cc_coll_bench_lowrank"
cmake -S "$CC_COLL_ROOT" -B "$CC_COLL_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DCC_COLL_BUILD_TESTS=OFF -DCC_COLL_BUILD_BENCHMARKS=ON
cmake --build "$CC_COLL_BUILD_DIR" -j "$CC_COLL_JOBS" --target cc_coll_bench_lowrank

build_dir=$(cd "$CC_COLL_BUILD_DIR" && pwd)
program=bench/cc_coll_bench_lowrank
test -x "$build_dir/$program" || fail "$build_dir/$program was not built (is libbenchmark-dev installed?)"
# Shown on the page as it ran: relative to the checkout when it can be,
# else through $CC_COLL_BUILD_DIR (the page never shows absolute paths).
bench=$build_dir/$program
shown=$bench
if [ "${build_dir#"$CC_COLL_ROOT"/}" != "$build_dir" ]; then
    bench=${build_dir#"$CC_COLL_ROOT"/}/$program
    shown=$bench
else
    shown="\$CC_COLL_BUILD_DIR/$program"
fi
if printf '%s' "$bench" | grep -q '[[:space:]]'; then
    fail "white space in the build folder's path is not supported: $bench"
fi

cd "$CC_COLL_ROOT" || exit 2
mkdir -p docs/perf
out=docs/perf/lowrank.json
ncpu=$(nproc)
read -r load1 _ </proc/loadavg
if awk -v l="$load1" -v c="$ncpu" 'BEGIN { exit !(l > c / 2) }'; then
    echo "$me: warning: the machine is busy (load average $load1, $ncpu CPUs);" \
        "wall-clock times will be longer than the CPU times the page uses" >&2
fi

args="--benchmark_repetitions=5 --benchmark_report_aggregates_only=true"
args="$args --benchmark_min_time=0.2 --benchmark_out=$out --benchmark_out_format=json"
echo "== OPENBLAS_NUM_THREADS=1 $bench $args"
# One BLAS thread (OMP_NUM_THREADS too, for an OpenMP build of OpenBLAS):
# the figures are per core, as with one MPI rank per core.
# shellcheck disable=SC2086  # several words, none with white space
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $bench $args
python3 scripts/perf/perf_lowrank.py --annotate "$out" --command "OPENBLAS_NUM_THREADS=1 $shown $args" \
    --build-dir "$build_dir"
echo "== python3 scripts/perf/perf_lowrank.py $out docs/performance.md"
python3 scripts/perf/perf_lowrank.py "$out" docs/performance.md
