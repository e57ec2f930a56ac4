# Shared steps of scripts/perf/perf_selection.sh, perf_sketch.sh and
# perf_lowrank.sh (sourced after scripts/common.sh, not run):
#
#   perf_bench_main PROGRAM GENERATOR [ARGUMENTS...]
#
# prints the calling script's header on -h/--help and refuses any other
# argument; installs the Debian packages unless CC_COLL_SKIP_APT=1;
# configures Release in $CC_COLL_BUILD_DIR (tests off, benchmarks on) and
# builds PROGRAM alone; then hands over to
#   python3 scripts/perf/GENERATOR --run --build-dir $CC_COLL_BUILD_DIR
# which runs the program from the repository root, annotates its JSON and
# rewrites the generator's section of docs/perf/kernels.md
# (scripts/perf/perf_driver.py does all three for every generator).
perf_bench_main() {
    program=$1
    generator=$2
    shift 2
    if [ "$#" -gt 0 ]; then
        if [ "$1" = -h ] || [ "$1" = --help ]; then
            sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
            exit 0
        fi
        echo "$me: no arguments expected (settings come from the environment; see --help)" >&2
        exit 2
    fi

    cc_coll_install_deps
    # Only the benchmark program is built (cc_coll_build would build everything).
    echo "== configuring in $CC_COLL_BUILD_DIR and building $program"
    cmake -S "$CC_COLL_ROOT" -B "$CC_COLL_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
        -DCC_COLL_BUILD_TESTS=OFF -DCC_COLL_BUILD_BENCHMARKS=ON
    cmake --build "$CC_COLL_BUILD_DIR" -j "$CC_COLL_JOBS" --target "$program"
    exec python3 "$CC_COLL_ROOT/scripts/perf/$generator" --run --build-dir "$CC_COLL_BUILD_DIR"
}
