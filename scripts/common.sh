# Shared steps of scripts/demo.sh, scripts/test.sh and the other scripts
# (sourced, not run; also from scripts/<group>/, e.g. scripts/perf/).
# Installs libcc_coll's dependencies from Debian and configures + builds the
# project into ${CC_COLL_BUILD_DIR:-build} (and, for scripts/test.sh, the
# sanitizer build into ${CC_COLL_SANITIZE_BUILD_DIR:-<that>-sanitize}).

set -eu

# The checkout's root: the nearest folder at or above the running script's
# that holds include/cc_coll.h (scripts/ and scripts/<group>/ alike).
CC_COLL_ROOT=$(
    cd "$(dirname "$0")" || exit 1
    while [ ! -f include/cc_coll.h ]; do
        [ "$(pwd)" != / ] || { echo "common.sh: no include/cc_coll.h above $0" >&2; exit 1; }
        cd ..
    done
    pwd
)
CC_COLL_BUILD_DIR=${CC_COLL_BUILD_DIR:-$CC_COLL_ROOT/build}
CC_COLL_SANITIZE_BUILD_DIR=${CC_COLL_SANITIZE_BUILD_DIR:-$CC_COLL_BUILD_DIR-sanitize}
CC_COLL_JOBS=${CC_COLL_JOBS:-$(nproc)}

# Debian packages the build, the tests and the demo need. MPICH (mpich
# libmpich-dev) is installed beside Open MPI for the tests' second build;
# Open MPI stays the system's default MPI (the alternatives rank it higher).
CC_COLL_DEB_PACKAGES="build-essential cmake pkg-config gfortran openmpi-bin libopenmpi-dev libucx-dev \
libgtest-dev libgmock-dev libbenchmark-dev binutils python3-numpy python3-mpi4py python3-setuptools python3-pip \
libopenblas-dev liblapacke-dev python3-torch python3-matplotlib mpich libmpich-dev"

cc_coll_install_deps() {
    if [ "${CC_COLL_SKIP_APT:-0}" = 1 ]; then
        echo "== skipping apt-get (CC_COLL_SKIP_APT=1)"
        return
    fi
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        SUDO=sudo
    fi
    echo "== installing Debian packages: $CC_COLL_DEB_PACKAGES"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $CC_COLL_DEB_PACKAGES
}

# cc_coll_build_in <dir> [cmake arguments...]: configure + build into <dir>
# (Release unless the arguments say otherwise).
# Shared by the scripts: die prints "<script>: <message>" and exits 2 (a
# usage or setup error); cc_coll_help, given the script's first argument,
# prints the script's leading comment block and exits 0 for -h or --help.
die() {
    echo "$(basename "$0"): $*" >&2
    exit 2
}

cc_coll_help() {
    case ${1:-} in
        -h | --help)
            sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
            exit 0
            ;;
    esac
}

# The emulated cluster's tools (ip and tc, Debian's iproute2), installed
# unless CC_COLL_SKIP_APT=1, where their absence is an error.
cc_coll_need_cluster_tools() {
    for tool in ip tc; do
        command -v "$tool" >/dev/null 2>&1 && continue
        if [ "${CC_COLL_SKIP_APT:-0}" = 1 ]; then
            echo "'$tool' is missing: apt-get install iproute2" >&2
            return 1
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2
    done
}

# Configures (Release) and builds cc_coll_perf in $CC_COLL_BUILD_DIR unless
# the first argument is 1, checks that it is there and that its path has no
# white space (the cluster's command line splits on it); prints its path.
cc_coll_build_perf() {
    perf=$CC_COLL_BUILD_DIR/cc_coll_perf
    if [ "${1:-0}" != 1 ]; then
        echo "== configuring and building cc_coll_perf in $CC_COLL_BUILD_DIR" >&2
        cmake -S "$CC_COLL_ROOT" -B "$CC_COLL_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2 &&
            cmake --build "$CC_COLL_BUILD_DIR" -j "$CC_COLL_JOBS" --target cc_coll_perf >&2 || return 1
    fi
    if [ ! -x "$perf" ]; then
        echo "$perf was not built" >&2
        return 1
    fi
    case $perf in *[[:space:]]*)
        echo "the build folder's path must not contain white space: $perf" >&2
        return 1 ;;
    esac
    printf '%s\n' "$perf"
}

cc_coll_build_in() {
    _cc_coll_dir=$1
    shift
    echo "== configuring and building in $_cc_coll_dir"
    cmake -S "$CC_COLL_ROOT" -B "$_cc_coll_dir" -DCMAKE_BUILD_TYPE=Release "$@"
    cmake --build "$_cc_coll_dir" -j "$CC_COLL_JOBS"
}

cc_coll_build() {
    cc_coll_build_in "$CC_COLL_BUILD_DIR" "$@"
}

# The ASan + UBSan build (docs/building.md, "Sanitizers"): -O1 with line
# tables (-g1) for the reports' stacks (ASan's advice; it compiles two to
# three times faster than -O2 -g), no CUDA, no micro-benchmarks (nothing
# runs them there).
cc_coll_build_sanitize() {
    cc_coll_build_in "$CC_COLL_SANITIZE_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DCMAKE_Fortran_FLAGS_RELWITHDEBINFO="-O1 -g1" \
        -DCC_COLL_ENABLE_ASAN=ON -DCC_COLL_ENABLE_UBSAN=ON -DCC_COLL_ENABLE_CUDA=OFF \
        -DCC_COLL_BUILD_BENCHMARKS=OFF "$@"
}

# The test suite again with MPICH (Debian's mpich, beside Open MPI): a second
# build in ${CC_COLL_MPICH_BUILD_DIR:-build-mpich} made with MPICH's
# wrappers and mpiexec (-DMPI_EXECUTABLE_SUFFIX=.mpich), without CUDA, the
# Google Benchmark programs and the unit test programs (no test it runs uses
# them), whose cross-MPI preload
# tests also use the build in $CC_COLL_BUILD_DIR; then its ctest, with the
# arguments given, less the unit tests (no MPI in them) and the docs checks
# (the same files as the first build's). CC_COLL_SKIP_MPICH=1 skips it.
cc_coll_test_mpich() {
    if [ "${CC_COLL_SKIP_MPICH:-0}" = 1 ]; then
        echo "== skipping the MPICH build (CC_COLL_SKIP_MPICH=1)"
        return
    fi
    if ! command -v mpicc.mpich > /dev/null || ! command -v mpiexec.mpich > /dev/null; then
        echo "== MPICH: no mpicc.mpich and mpiexec.mpich; install mpich libmpich-dev or set CC_COLL_SKIP_MPICH=1" >&2
        return 1
    fi
    mpich_dir=${CC_COLL_MPICH_BUILD_DIR:-$CC_COLL_ROOT/build-mpich}
    cross=""
    if [ -f "$CC_COLL_BUILD_DIR/CMakeCache.txt" ]; then
        cross=$(cd "$CC_COLL_BUILD_DIR" && pwd)
    fi
    echo "== MPICH: configuring and building in $mpich_dir"
    cmake -S "$CC_COLL_ROOT" -B "$mpich_dir" -DCMAKE_BUILD_TYPE=Release -DCC_COLL_BUILD_TESTS=ON \
        -DMPI_EXECUTABLE_SUFFIX=.mpich -DCC_COLL_ENABLE_CUDA=OFF -DCC_COLL_BUILD_BENCHMARKS=OFF \
        -DCC_COLL_BUILD_UNIT_TESTS=OFF \
        -DCC_COLL_CROSS_MPI_BUILD="$cross"
    cmake --build "$mpich_dir" -j "$CC_COLL_JOBS"
    echo "== MPICH: running the test suite"
    (cd "$mpich_dir" && ctest --output-on-failure --timeout 600 -j "$CC_COLL_JOBS" -LE '^(unit|docs)$' "$@")
}

# mpirun as root needs Open MPI's explicit consent; more ranks than cores
# need --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# One OpenBLAS thread per rank (LOWRANK's products): ranks already fill the
# cores. Set OPENBLAS_NUM_THREADS yourself to change it.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
