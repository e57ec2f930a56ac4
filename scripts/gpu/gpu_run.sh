#!/bin/sh
# Builds libcc_coll with CUDA on a machine with a GPU and runs the GPU tests
# and benchmarks, from the repository root, without a network: the Debian
# packages it needs (Open MPI, OpenBLAS/LAPACKE, GoogleTest, Google
# Benchmark) come from .gpu-debs, downloaded beforehand on a machine with apt
# by scripts/gpu/gpu_deps.sh, and are unpacked with dpkg -x (or ar + tar) into a
# private prefix, never into /.
#
#   scripts/gpu/gpu_run.sh [STAGE...]
#
# Stages, in order (default: all of them):
#   deps    unpack the packages into the prefix, create the links Debian's
#           alternatives would, and check that mpirun starts from there and
#           that two ranks can allreduce 8 MiB through shared memory
#   build   configure (CUDA on, Fortran off) and build with -j16 (the
#           stage configure does only the first half)
#   test    ctest -L gpu, then ctest -L unit (-j16: tests run side by side
#           on the cores and the GPU), each within a time budget
#   bench   cc_coll_bench_gpu_kernels (JSON + markdown table) and
#           cc_coll_gpu_transport_perf under mpirun -np 2 (markdown table),
#           each within a time budget; fails when no CUDA device is visible
# Every stage sets up the environment first, and test and bench unpack the
# packages and build first where the prefix or the build folder is missing
# (a lent machine given back between two calls comes back bare), so stages
# can run in separate invocations, e.g. one 10-minute call for
# "deps build test" and one for "bench". Every step that can run long has a
# time budget, cut to what is left of CC_COLL_CALL_SECONDS since the
# invocation started; what had finished when a step was stopped is still
# reported, and a stopped build resumes on the next invocation.
#
# Logs and tables go to $OUT when it is set, else ./gpu-results (git-ignored);
# SUMMARY.md there says what ran and how it ended. An invocation writes at
# most 8 files there (SUMMARY.md, build.log, ctest-gpu.log, ctest-unit.log,
# gpu_kernels.json, gpu_kernels.md, gpu_transport.md, bench.log); with $OUT
# set and more than 8 (more test labels), all but SUMMARY.md are packed into
# logs.tar.gz. The exit status is that of the first stage that failed (0 if
# none).
#
# Environment:
#   CC_COLL_GPU_DEBS      the .deb folder (default .gpu-debs)
#   CC_COLL_DEPS_PREFIX   the private prefix (default /opt/ccdeps)
#   CC_COLL_BUILD_DIR     the build folder (default build-gpu)
#   CC_COLL_JOBS          build and ctest parallelism (default 16)
#   CC_COLL_CALL_SECONDS  the invocation's time limit (default 570: a
#                         10-minute call less time to pack and send results)
#   CC_COLL_CUDA_ARCHS    CMAKE_CUDA_ARCHITECTURES (default 90: H100/H200)
#   CC_COLL_TEST_LABELS   the ctest labels the test stage runs (default "gpu unit")
#   CC_COLL_TEST_SECONDS  time budget of each label's ctest run (default 270)
#   CC_COLL_BENCH_ARGS    extra arguments for cc_coll_bench_gpu_kernels
#                         (e.g. --benchmark_filter=topk)
#   CC_COLL_KERNELS_SECONDS, CC_COLL_TRANSPORT_SECONDS
#                         time budgets of the two benchmarks (default 300, 150)
#   OMPI_MCA_*, PMIX_MCA_* Open MPI settings; setup_env sets defaults for a
#                         single node in a container (below) only where unset
set -u

cd "$(dirname "$0")/../.." || exit 1
repo=$(pwd)
debs=${CC_COLL_GPU_DEBS:-.gpu-debs}
prefix=${CC_COLL_DEPS_PREFIX:-/opt/ccdeps}
build=${CC_COLL_BUILD_DIR:-build-gpu}
jobs=${CC_COLL_JOBS:-16}
archs=${CC_COLL_CUDA_ARCHS:-90}
out=${OUT:-$repo/gpu-results}
case $debs in /*) ;; *) debs=$repo/$debs ;; esac
case $build in /*) ;; *) build=$repo/$build ;; esac
mkdir -p "$out"
summary=$out/SUMMARY.md
multiarch=x86_64-linux-gnu
main=$prefix/main/usr
fallback=$prefix/fallback
user_single_copy=${OMPI_MCA_btl_vader_single_copy_mechanism:-}

call_start=$(date +%s)
call_secs=${CC_COLL_CALL_SECONDS:-570}

note() { echo "gpu_run: $*"; echo "- $*" >> "$summary"; }
# budget <seconds>: those, or what is left of the invocation's time if less
# (10 s kept for the summary).
budget() {
  left=$((call_start + call_secs - $(date +%s) - 10))
  if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}
# block <title> <file-or->: a fenced block in SUMMARY.md (stdin with -)
block() {
  { echo; echo "$1:"; echo; echo '```'; if [ "$2" = - ]; then cat; else cat "$2"; fi; echo '```'; echo; } >> "$summary"
}
# within <seconds> <command...>: the command, stopped (its process group
# too) after that many seconds; status 124 then.
within() {
  secs=$1
  shift
  if command -v timeout > /dev/null 2>&1; then timeout -k 20 "$secs" "$@"; else "$@"; fi
}

# ---- deps: unpack and link --------------------------------------------------

extract_deb() {  # extract_deb <file.deb> <dir>
  if command -v dpkg-deb > /dev/null 2>&1; then
    dpkg-deb -x "$1" "$2"
  else
    member=$(ar t "$1" | grep '^data\.tar')
    case $member in
      *.xz) ar p "$1" "$member" | xz -dc | tar -x -C "$2" ;;
      *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$2" ;;
      *.gz) ar p "$1" "$member" | gzip -dc | tar -x -C "$2" ;;
      *) ar p "$1" "$member" | tar -x -C "$2" ;;
    esac
  fi
}

# What Debian's update-alternatives would create (dpkg -x runs no scripts).
link_alternatives() {
  lib=$main/lib/$multiarch
  for tool in mpicc mpicxx mpic++ mpiCC mpirun mpiexec; do
    [ -e "$main/bin/$tool.openmpi" ] && ln -sfn "$tool.openmpi" "$main/bin/$tool"
  done
  mkdir -p "$main/include/$multiarch"
  ln -sfn "../../lib/$multiarch/openmpi/include" "$main/include/$multiarch/mpi"
  ln -sfn "openmpi/lib/libmpi.so" "$lib/libmpi.so"
  for so in libblas.so libblas.so.3 liblapack.so liblapack.so.3 libopenblas.so libopenblas.so.0; do
    [ -e "$lib/openblas-pthread/$so" ] && ln -sfn "openblas-pthread/$so" "$lib/$so"
  done
  # Open MPI's PSM and OFI components load this one.
  [ -e "$main/lib/libpsm1/libpsm_infinipath.so.1.16" ] &&
    ln -sfn "../libpsm1/libpsm_infinipath.so.1.16" "$lib/libpsm_infinipath.so.1"
  ln -sfn "pmix2/lib/libpmix.so.2" "$lib/libpmix.so.2" 2> /dev/null || true
}

# Two ranks allreduce 8 MiB: MPI_Init, the shared-memory transport and its
# large-message path, which mpirun --version and a shell command never reach.
mpi_smoke() {
  dir=$(mktemp -d) || return 1
  cat > "$dir/smoke.c" << 'EOF'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    const int n = 1 << 21;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (int i = 0; i < n; ++i) x[i] = (float)(rank + 1);
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) bad += y[i] != (float)(size * (size + 1) / 2);
    if (rank == 0) printf("smoke: %d ranks allreduced %d floats, %d wrong\n", size, n, bad);
    MPI_Finalize();
    return bad != 0;
}
EOF
  "$main/bin/mpicc.openmpi" -O2 -o "$dir/smoke" "$dir/smoke.c" > "$dir/log" 2>&1 &&
    within 60 mpirun -np 2 "$dir/smoke" >> "$dir/log" 2>&1
  smoke_rc=$?
  cat "$dir/log"
  rm -rf "$dir"
  return $smoke_rc
}

stage_deps() {
  [ -d "$debs" ] || { note "deps: $debs is missing: run scripts/gpu/gpu_deps.sh on a machine with apt first"; return 1; }
  stamp=$prefix/.manifest
  if [ -f "$stamp" ] && cmp -s "$stamp" "$debs/MANIFEST"; then
    note "deps: $prefix already holds the packages of $debs/MANIFEST"
  else
    rm -rf "$prefix/main" "$prefix/fallback" "$stamp"
    mkdir -p "$prefix/main" "$prefix/fallback" || return 1
    for deb in "$debs"/*.deb; do
      pkg=$(basename "$deb" | sed 's/_.*//')
      if grep -qx "$pkg" "$debs/FALLBACK" 2> /dev/null; then dir=$prefix/fallback; else dir=$prefix/main; fi
      extract_deb "$deb" "$dir" || { note "deps: cannot unpack $deb"; return 1; }
    done
    link_alternatives
    cp "$debs/MANIFEST" "$stamp"
    note "deps: unpacked $(ls "$debs"/*.deb | wc -l) packages into $prefix"
  fi
  setup_env
  if ! ver=$(mpirun --version 2>&1); then
    echo "$ver" | block "mpirun --version" -
    note "deps: mpirun --version FAILED from $main/bin"
    return 1
  fi
  note "deps: $(echo "$ver" | head -1) from $(command -v mpirun)"
  # Open MPI's single-copy path for large messages (CMA: process_vm_readv)
  # where the kernel allows it, else none (sandboxes often refuse it); the
  # choice stays in the prefix for later invocations.
  smoke_ok=""
  if [ -z "$user_single_copy" ]; then
    export OMPI_MCA_btl_vader_single_copy_mechanism=cma
    if smoke=$(mpi_smoke 2>&1); then
      smoke_ok=1
    else
      echo "$smoke" | tail -15 | block "MPI smoke test with the CMA single copy (failed: using none)" -
      export OMPI_MCA_btl_vader_single_copy_mechanism=none
    fi
    echo "$OMPI_MCA_btl_vader_single_copy_mechanism" > "$prefix/single-copy"
  fi
  if [ -z "$smoke_ok" ] && ! smoke=$(mpi_smoke 2>&1); then
    echo "$smoke" | tail -40 | block "MPI smoke test" -
    note "deps: two ranks could not allreduce under mpirun (output above)"
    return 1
  fi
  note "deps: $(echo "$smoke" | grep '^smoke:' | sed 's/^smoke: //') (OMPI_MCA_pml=$OMPI_MCA_pml, btl=$OMPI_MCA_btl, single copy: $OMPI_MCA_btl_vader_single_copy_mechanism)"
  # Anything else it printed (warnings from components) is worth a look.
  if echo "$smoke" | grep -qv '^smoke:'; then echo "$smoke" | grep -v '^smoke:' | head -20 | block "MPI smoke test printed" -; fi
}

# ---- environment ------------------------------------------------------------

setup_env() {
  lib=$main/lib/$multiarch
  [ -n "${env_done:-}" ] && return 0
  env_done=1
  # Open MPI and PMIx find their components and help files from these
  # (Debian's PMIx spells some of its directories out, so name them all).
  export OPAL_PREFIX="$main"
  export PMIX_PREFIX="$lib/pmix2" PMIX_EXEC_PREFIX="$lib/pmix2" PMIX_LIBDIR="$lib/pmix2/lib" \
    PMIX_PKGLIBDIR="$lib/pmix2/lib/pmix" PMIX_DATAROOTDIR="$lib/pmix2/share" PMIX_DATADIR="$lib/pmix2/share" \
    PMIX_PKGDATADIR="$lib/pmix2/share/pmix"
  export PATH="$main/bin:$PATH"
  # The machine's own copies of the fallback libraries win where it has them
  # (libnl-3, which Open MPI's netlink component loads, lives in /lib).
  export LD_LIBRARY_PATH="$lib/openblas-pthread:$lib:$prefix/main/lib/$multiarch:$lib/openmpi/lib:$lib/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$fallback/usr/lib/$multiarch:$fallback/lib/$multiarch"
  export CMAKE_PREFIX_PATH="$main${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CMAKE_LIBRARY_PATH="$lib/openblas-pthread:$lib"
  export CMAKE_INCLUDE_PATH="$main/include/$multiarch/openblas-pthread:$main/include"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # One node, no ssh needed: local ranks are forked.
  if ! command -v ssh > /dev/null 2>&1 && ! command -v rsh > /dev/null 2>&1; then
    export OMPI_MCA_plm_rsh_agent=false
  fi
  # Open MPI on one node in a container (gVisor, Firecracker), where the
  # settings a machine with InfiniBand wants fail or warn: ob1 over shared
  # memory, not UCX (which probes devices; Debian's Open MPI is not
  # CUDA-aware either way); the single copy the deps stage found to work
  # (none before it ran); no binding (ctest -j runs many mpiruns at once,
  # each of which would bind its ranks to the same first cores); more ranks
  # than cores allowed; PMIx's hash store, not its shared-memory one. Values
  # already in the environment (or --mca on a command line) win.
  : "${OMPI_MCA_pml:=ob1}" "${OMPI_MCA_btl:=self,vader}" "${OMPI_MCA_osc:=^ucx}"
  : "${OMPI_MCA_btl_vader_single_copy_mechanism:=$(cat "$prefix/single-copy" 2> /dev/null || echo none)}"
  : "${OMPI_MCA_hwloc_base_binding_policy:=none}"
  : "${OMPI_MCA_rmaps_base_oversubscribe:=1}" "${OMPI_MCA_btl_base_warn_component_unused:=0}"
  : "${PMIX_MCA_gds:=hash}" "${HWLOC_HIDE_ERRORS:=1}"
  export OMPI_MCA_pml OMPI_MCA_btl OMPI_MCA_osc OMPI_MCA_btl_vader_single_copy_mechanism \
    OMPI_MCA_hwloc_base_binding_policy OMPI_MCA_rmaps_base_oversubscribe \
    OMPI_MCA_btl_base_warn_component_unused PMIX_MCA_gds HWLOC_HIDE_ERRORS
  # Shared-memory segments go to /dev/shm; where it is missing, read-only or
  # small (a container's default is 64 MiB), to /tmp.
  if [ -z "${OMPI_MCA_btl_vader_backing_directory:-}" ]; then
    shm_kib=$(df -Pk /dev/shm 2> /dev/null | awk 'NR == 2 { print $4 }')
    if [ ! -w /dev/shm ] || [ "${shm_kib:-0}" -lt 1048576 ]; then
      export OMPI_MCA_btl_vader_backing_directory=/tmp
    fi
  fi
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
  # The driver's own folder, where a container mounts it (nvidia-smi, libcuda).
  [ -x /usr/local/nvidia/bin/nvidia-smi ] && export PATH="$PATH:/usr/local/nvidia/bin"
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    [ -e "$d/libcuda.so.1" ] || continue
    case ":$LD_LIBRARY_PATH:" in *":$d:"*) ;; *) LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d" ;; esac
  done
  return 0
}

# The CUDA devices the library sees (cc_coll_info), or "?" without a build.
cuda_devices() {
  info=$build/cc_coll_info
  [ -x "$info" ] || { echo "?"; return; }
  within 60 "$info" 2> /dev/null | sed -n 's/^#   CUDA devices *: *//p' | head -1 | grep . || echo "?"
}

# ---- build ------------------------------------------------------------------

stage_configure() {
  setup_env
  lib=$main/lib/$multiarch
  glibc=$(ldd --version 2> /dev/null | head -1)
  note "build: host $(uname -m), $(nproc) cores, $glibc; Debian 12's packages need glibc >= 2.36"
  note "build: $(nvcc --version 2>&1 | tail -1), $(cmake --version | head -1)"
  if ! command -v nvidia-smi > /dev/null 2>&1; then
    note "build: no nvidia-smi on PATH"
  elif gpus=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader 2>&1); then
    echo "$gpus" | while read -r l; do note "build: GPU $l"; done
    # Ranks of one test and tests side by side share the GPU.
    echo "$gpus" | grep -qi exclusive && note "build: WARNING: the GPU is in an exclusive compute mode: multi-rank GPU tests will fail"
  else
    note "build: nvidia-smi failed: $(echo "$gpus" | head -1)"
  fi
  # Make, or Ninja where the machine has no make (CMAKE_GENERATOR and an
  # existing build folder's choice win).
  set --
  if [ -z "${CMAKE_GENERATOR:-}" ] && [ ! -f "$build/CMakeCache.txt" ] &&
     ! command -v make > /dev/null 2>&1 && command -v ninja > /dev/null 2>&1; then
    set -- -G Ninja
    note "build: no make here: configuring for Ninja"
  fi
  if ! cmake -S "$repo" -B "$build" "$@" -DCMAKE_BUILD_TYPE=Release \
        -DCC_COLL_ENABLE_CUDA=ON -DCC_COLL_ENABLE_FORTRAN=OFF \
        -DCMAKE_CUDA_ARCHITECTURES="$archs" \
        -DMPI_C_COMPILER="$main/bin/mpicc.openmpi" \
        -DMPIEXEC_EXECUTABLE="$main/bin/mpiexec.openmpi" \
        -DGTest_DIR="$lib/cmake/GTest" \
        -Dbenchmark_DIR="$lib/cmake/benchmark" \
        > "$out/build.log" 2>&1; then
    tail -30 "$out/build.log" | block "configure (end of build.log)" -
    note "build: configure FAILED (build.log)"
    return 1
  fi
  grep -E "libcc_coll .*CUDA|Python tests" "$out/build.log" | sed 's/^-- //' | while read -r l; do note "build: $l"; done
  grep -E "^(MPI_C_COMPILER|MPIEXEC_EXECUTABLE|CC_COLL_CBLAS_INCLUDE_DIR|CC_COLL_LAPACKE_LIBRARY|GTest_DIR|benchmark_DIR|CMAKE_CUDA_COMPILER)[:=]" \
    "$build/CMakeCache.txt" | block "found by configure" -
}

stage_build() {
  stage_configure || return 1
  echo "==== cmake --build" >> "$out/build.log"
  secs=$(budget 100000)
  within "$secs" cmake --build "$build" --parallel "$jobs" >> "$out/build.log" 2>&1
  case $? in
    0) note "build: everything built; cc_coll_info sees $(cuda_devices) CUDA device(s)"; return 0 ;;
    124 | 137) note "build: STOPPED after ${secs}s, at the end of this invocation's time (CC_COLL_CALL_SECONDS=$call_secs): run the build stage again to resume"; return 1 ;;
  esac
  grep -E "error|Error" "$out/build.log" | head -40 | block "first errors of the full build" -
  # Build what the later stages need, one target at a time, so one broken
  # target elsewhere does not hide the rest.
  note "build: the full build FAILED (build.log); building the GPU targets one by one"
  for t in cc_coll cc_coll_info mpi_gpu_allreduce cc_coll_bench_gpu_kernels cc_coll_gpu_transport_perf; do
    echo "==== cmake --build --target $t" >> "$out/build.log"
    if cmake --build "$build" --parallel "$jobs" --target "$t" >> "$out/build.log" 2>&1; then
      note "build: target $t built"
    else
      note "build: target $t FAILED (build.log)"
    fi
  done
  return 1
}

# ensure_build <stage>: bring the build up to date with the working tree (a
# no-op when it is), or build first where this machine has none (a fresh
# machine: only the working tree and carried paths travel).
ensure_build() {
  if [ -f "$build/CMakeCache.txt" ] && [ -x "$build/cc_coll_info" ]; then
    echo "==== cmake --build (before $1)" >> "$out/build.log"
    if within "$(budget 100000)" cmake --build "$build" --parallel "$jobs" >> "$out/build.log" 2>&1; then
      return 0
    fi
    note "$1: bringing the build up to date FAILED (build.log); going on with what is built"
    return 0
  fi
  note "$1: no build in $build (a fresh machine?): building first"
  stage_build
  [ -x "$build/cc_coll_info" ]
}

# ---- test -------------------------------------------------------------------

run_ctest() {  # run_ctest <label> <parallel jobs> [ctest arguments...]
  ct_label=$1 par=$2
  log=$out/ctest-$ct_label.log
  secs=$(budget "${CC_COLL_TEST_SECONDS:-270}")
  if [ "$(budget 30)" -lt 30 ]; then
    note "test: ctest -L $ct_label NOT RUN: no time left in this invocation (CC_COLL_CALL_SECONDS=$call_secs); run the test stage again"
    return 1
  fi
  start=$(date +%s)
  shift 2
  last=$build/Testing/Temporary/LastTest.log
  rm -f "$last"
  (cd "$build" && within "$secs" ctest -L "$ct_label" "$@" --output-on-failure --timeout 900 -j "$par") > "$log" 2>&1
  ct_status=$?
  took=$(($(date +%s) - start))
  # "N% tests passed, F tests failed out of T", or "100% tests passed out
  # of T" (CMake 4) when none failed.
  total=$(sed -n 's/.*tests.* out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)
  [ -z "$failed" ] && grep -q '100% tests passed' "$log" && failed=0
  skipped=$(grep -cE "^[[:space:]]+[0-9]+ - .*\(Skipped\)" "$log")
  if [ "$ct_status" -eq 124 ] || [ "$ct_status" -eq 137 ]; then
    # The tests ctest had started and not finished when it was stopped.
    unfinished=$(awk '/^ *Start +[0-9]+: / { s[$3] = 1 } / Test +#[0-9]+: / { for (i = 1; i <= NF; ++i) if ($i ~ /^#[0-9]+:$/) { delete s[$(i + 1)] } }
                      END { for (t in s) printf " %s", t }' "$log")
    note "test: ctest -L $ct_label STOPPED after ${took}s (budget ${secs}s: CC_COLL_TEST_SECONDS, CC_COLL_CALL_SECONDS); $(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$log") tests had finished; still running:${unfinished:- none} (ctest-$ct_label.log)"
  else
    note "test: ctest -L $ct_label: ${total:-?} tests, ${failed:-?} failed, $skipped skipped, in ${took}s (ctest-$ct_label.log)"
  fi
  # ctest's closing list: the tests that were skipped, failed or timed out,
  # each with the first line of its output that gives a reason.
  grep -E "^[[:space:]]+[0-9]+ - " "$log" | head -60 | sed 's/^[[:space:]]*[0-9]* - //' | while read -r name why; do
    reason=$(awk -v t="$name" '/^[0-9]+\/[0-9]+ Test: / { cur = $3; inside = 0; next }
                               /^Output:$/ { inside = 1; next } /^<end of output>$/ { inside = 0 }
                               inside && cur == t && /[Ss]kip|SKIP|[Ee]rror|FAIL|[Ff]ail|[Aa]bort|[Tt]imeout/ { print; exit }' "$last" 2> /dev/null)
    [ -n "$reason" ] && why="$why: $(echo "$reason" | cut -c1-160)"
    echo "    - $name $why" >> "$summary"
  done
  # The whole output of every test (ctest keeps it for the last run only).
  [ -f "$last" ] && { echo; echo "==== Testing/Temporary/LastTest.log"; cat "$last"; } >> "$log"
  return $ct_status
}

stage_test() {
  setup_env
  ensure_build test || { note "test: nothing to test: the build failed"; return 1; }
  test_rc=0
  ndev=$(cuda_devices)
  note "test: cc_coll_info sees $ndev CUDA device(s)"
  [ "$ndev" = 0 ] && note "test: WARNING: no CUDA device visible: the GPU tests will be skipped"
  # Tests declare their rank counts (PROCESSORS), so ctest -j packs them
  # onto the cores; the ranks of concurrent tests share the GPU. A test with
  # two of the labels (unit;gpu) runs once, with the first.
  done_labels=""
  for label in ${CC_COLL_TEST_LABELS:-gpu unit}; do
    if [ -z "$done_labels" ]; then
      run_ctest "$label" "$jobs" --no-tests=error || test_rc=1
    else
      run_ctest "$label" "$jobs" -LE "^($done_labels)\$" || test_rc=1
    fi
    done_labels=${done_labels:+$done_labels|}$label
  done
  return $test_rc
}

# ---- bench ------------------------------------------------------------------

kernels_table() {  # kernels_table <json> <md>
  python3 - "$1" "$2" << 'EOF'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src) as f:
    text = f.read()
try:
    d = json.loads(text)
    note = ""
except ValueError:
    # Stopped before the end: keep the benchmarks written so far.
    cut = text.rfind("\n    }")
    if cut < 0:
        raise
    d = json.loads(text[:cut + 6] + "\n  ]\n}")
    note = " (the run was stopped: the benchmarks it had finished)"
# Medians when the run had repetitions, else every iteration row.
rows = [b for b in d["benchmarks"] if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
if not rows:
    rows = [b for b in d["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
ctx = d.get("context", {})
out = ["## GPU kernels against the device copy bandwidth", "",
       "- GPU: %s; %s SMs; host: %s" % (ctx.get("gpu", "?"), ctx.get("gpu_sm_count", "?"), ctx.get("host_name", "?")),
       "- Source: `%s` (medians over the repetitions; event-timed)%s" % (src.split("/")[-1], note), "",
       "| benchmark | time (us) | GB/s | copy GB/s | / copy | target | met | extra |",
       "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
for b in rows:
    name = b.get("run_name", b["name"]).replace("/manual_time", "")
    t = b.get("real_time", 0.0)
    unit = b.get("time_unit", "us")
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}.get(unit, 1.0)
    frac, target = b.get("frac_of_copy"), b.get("target", 0.0)
    met = "" if not target else ("yes" if frac is not None and frac >= target else "NO")
    extra = ", ".join("%s=%g" % (k, b[k]) for k in ("k", "m", "peeled", "support", "wire_ratio") if k in b)
    out.append("| `%s` | %.1f | %.1f | %.1f | %.2f | %s | %s | %s |" % (
        name, t * scale, b.get("GBps", 0.0), b.get("copy_GBps", 0.0), frac or 0.0,
        ("%.2f" % target) if target else "-", met, extra))
with open(dst, "w") as f:
    f.write("\n".join(out) + "\n")
print(len(rows))
EOF
}

stage_bench() {
  setup_env
  ensure_build bench || { note "bench: nothing to run: the build failed"; return 1; }
  ndev=$(cuda_devices)
  if [ "$ndev" = 0 ]; then
    note "bench: FAILED: no CUDA device visible (cc_coll_info: CUDA devices 0), nothing to measure"
    return 1
  fi
  bench_rc=0
  log=$out/bench.log
  : > "$log"
  rm -f "$out/gpu_kernels.json" "$out/gpu_kernels.md" "$out/gpu_transport.md"
  kb=$build/bench/cc_coll_bench_gpu_kernels
  secs=$(budget "${CC_COLL_KERNELS_SECONDS:-300}")
  # What is left after the kernels goes to the transport benchmark.
  tsecs=${CC_COLL_TRANSPORT_SECONDS:-150}
  [ "$(budget 100000)" -lt $((secs + tsecs)) ] && secs=$(($(budget 100000) - tsecs))
  if [ "$(budget 30)" -lt 30 ] || [ "$secs" -lt 1 ]; then
    note "bench: cc_coll_bench_gpu_kernels NOT RUN: no time left in this invocation (CC_COLL_CALL_SECONDS=$call_secs)"
    bench_rc=1
  elif [ -x "$kb" ]; then
    start=$(date +%s)
    echo "==== cc_coll_bench_gpu_kernels" >> "$log"
    # shellcheck disable=SC2086
    within "$secs" "$kb" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.1 \
      --benchmark_out="$out/gpu_kernels.json" --benchmark_out_format=json ${CC_COLL_BENCH_ARGS:-} >> "$log" 2>&1
    st=$?
    took=$(($(date +%s) - start))
    case $st in
      0) what="ran in ${took}s" ;;
      124 | 137) what="STOPPED after ${took}s (budget ${secs}s: CC_COLL_KERNELS_SECONDS, CC_COLL_CALL_SECONDS)"; bench_rc=1 ;;
      *) what="FAILED with status $st after ${took}s"; bench_rc=1 ;;
    esac
    if [ ! -s "$out/gpu_kernels.json" ]; then
      note "bench: cc_coll_bench_gpu_kernels $what and wrote no JSON: $(grep -v '^\[' "$log" | tail -1) (bench.log)"
      bench_rc=1
    elif n=$(kernels_table "$out/gpu_kernels.json" "$out/gpu_kernels.md" 2>> "$log"); then
      note "bench: cc_coll_bench_gpu_kernels $what: $n rows in gpu_kernels.md (table), gpu_kernels.json, bench.log"
    else
      note "bench: cc_coll_bench_gpu_kernels $what (gpu_kernels.json, bench.log); no markdown table (python3 missing or failed)"
      bench_rc=1
    fi
  else
    note "bench: $kb was not built"
    bench_rc=1
  fi
  tp=$build/bench/cc_coll_gpu_transport_perf
  secs=$(budget "$tsecs")
  if [ "$(budget 30)" -lt 30 ]; then
    note "bench: cc_coll_gpu_transport_perf NOT RUN: no time left in this invocation (CC_COLL_CALL_SECONDS=$call_secs)"
    bench_rc=1
  elif [ -x "$tp" ]; then
    start=$(date +%s)
    echo "==== mpirun -np 2 cc_coll_gpu_transport_perf" >> "$log"
    within "$secs" mpirun -np 2 --oversubscribe -x OPENBLAS_NUM_THREADS=1 "$tp" > "$out/gpu_transport.md" 2>> "$log"
    st=$?
    took=$(($(date +%s) - start))
    if [ $st -eq 0 ] && grep -q '^|' "$out/gpu_transport.md"; then
      note "bench: cc_coll_gpu_transport_perf ran in ${took}s: gpu_transport.md"
    else
      case $st in
        124 | 137) what="STOPPED after ${took}s (budget ${secs}s: CC_COLL_TRANSPORT_SECONDS, CC_COLL_CALL_SECONDS)" ;;
        0) what="printed no table: $(tail -1 "$out/gpu_transport.md")" ;;
        *) what="FAILED with status $st after ${took}s" ;;
      esac
      note "bench: cc_coll_gpu_transport_perf $what (gpu_transport.md, bench.log)"
      bench_rc=1
    fi
  else
    note "bench: $tp was not built"
    bench_rc=1
  fi
  return $bench_rc
}

# ---- main -------------------------------------------------------------------

stages=${*:-deps build test bench}
{
  echo "# GPU run of libcc_coll $(git -C "$repo" rev-parse --short HEAD 2> /dev/null || echo '(no git)')"
  echo
  echo "Stages: $stages; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
} >> "$summary"
status=0
for s in $stages; do
  case $s in
    deps | configure | build | test | bench) ;;
    *) echo "gpu_run: unknown stage '$s' (deps, configure, build, test, bench)" >&2; exit 2 ;;
  esac
done
for s in $stages; do
  if [ "$s" != deps ] && [ ! -f "$prefix/.manifest" ]; then
    stage_deps || { status=1; break; }
  fi
  stage_start=$(date +%s)
  "stage_$s"
  stage_rc=$?
  note "$s: stage ended with status $stage_rc after $(($(date +%s) - stage_start))s"
  if [ $stage_rc -ne 0 ] && [ $status -eq 0 ]; then status=$stage_rc; fi
  # Without the packages nothing later can run (after a failed build, what
  # was built still runs).
  if [ $stage_rc -ne 0 ] && [ "$s" = deps ]; then break; fi
done
for f in gpu_transport.md gpu_kernels.md; do
  [ -f "$out/$f" ] && grep -q '^|' "$out/$f" && { echo; cat "$out/$f"; } >> "$summary"
done
# A lent machine sends back at most 8 files from $OUT: pack the rest.
if [ -n "${OUT:-}" ] && [ "$(find "$out" -type f | wc -l)" -gt 8 ]; then
  (cd "$out" && find . -type f ! -name SUMMARY.md ! -name logs.tar.gz | sed 's|^\./||' > .packed &&
    tar -czf logs.tar.gz -T .packed && xargs rm -f < .packed; rm -f .packed)
  note "more than 8 files: all but SUMMARY.md packed into logs.tar.gz"
fi
echo "gpu_run: results in $out (SUMMARY.md); exit status $status"
exit $status
