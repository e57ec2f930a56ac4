#!/bin/sh
# Builds libcc_coll with CUDA on a machine with a GPU and runs the GPU tests
# and benchmarks, from the repository root, without a network: the Debian
# packages it needs (Open MPI, OpenBLAS/LAPACKE, GoogleTest, Google
# Benchmark) come from .gpu-debs, downloaded beforehand on a machine with apt
# by scripts/gpu_deps.sh, and are unpacked with dpkg -x (or ar + tar) into a
# private prefix, never into /.
#
#   scripts/gpu_run.sh [STAGE...]
#
# Stages, in order (default: all of them):
#   deps    unpack the packages into the prefix, create the links Debian's
#           alternatives would, and check that mpirun starts from there
#   build   configure (CUDA on, Fortran off) and build with -j16 (the
#           stage configure does only the first half)
#   test    ctest -L gpu, then ctest -L unit (-j16: tests run side by side
#           on the cores and the GPU)
#   bench   cc_coll_bench_gpu_kernels (JSON + markdown table) and
#           cc_coll_gpu_transport_perf under mpirun -np 2 (markdown table)
# Every stage sets up the environment first, so stages can run in separate
# invocations (e.g. one per 10-minute call on a lent machine) as long as the
# prefix and the build folder stay.
#
# Logs and tables go to $OUT when it is set, else ./gpu-results (git-ignored);
# SUMMARY.md there says what ran and how it ended. The exit status is that of
# the first stage that failed (0 if none).
#
# Environment:
#   CC_COLL_GPU_DEBS      the .deb folder (default .gpu-debs)
#   CC_COLL_DEPS_PREFIX   the private prefix (default /opt/ccdeps)
#   CC_COLL_BUILD_DIR     the build folder (default build-gpu)
#   CC_COLL_JOBS          build parallelism (default 16)
#   CC_COLL_CUDA_ARCHS    CMAKE_CUDA_ARCHITECTURES (default 90: H100/H200)
#   CC_COLL_TEST_LABELS   the ctest labels the test stage runs (default "gpu unit")
#   CC_COLL_BENCH_ARGS    extra arguments for cc_coll_bench_gpu_kernels
#                         (e.g. --benchmark_filter=topk)
set -u

cd "$(dirname "$0")/.." || exit 1
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

note() { echo "gpu_run: $*"; echo "- $*" >> "$summary"; }

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
  ln -sfn "pmix2/lib/libpmix.so.2" "$lib/libpmix.so.2" 2> /dev/null || true
}

stage_deps() {
  [ -d "$debs" ] || { echo "gpu_run: $debs is missing: run scripts/gpu_deps.sh on a machine with apt first" >&2; return 1; }
  stamp=$prefix/.manifest
  if [ -f "$stamp" ] && cmp -s "$stamp" "$debs/MANIFEST"; then
    note "deps: $prefix already holds the packages of $debs/MANIFEST"
  else
    rm -rf "$prefix/main" "$prefix/fallback"
    mkdir -p "$prefix/main" "$prefix/fallback" || return 1
    for deb in "$debs"/*.deb; do
      pkg=$(basename "$deb" | sed 's/_.*//')
      if grep -qx "$pkg" "$debs/FALLBACK" 2> /dev/null; then dir=$prefix/fallback; else dir=$prefix/main; fi
      extract_deb "$deb" "$dir" || { echo "gpu_run: cannot unpack $deb" >&2; return 1; }
    done
    link_alternatives
    cp "$debs/MANIFEST" "$stamp"
    note "deps: unpacked $(ls "$debs"/*.deb | wc -l) packages into $prefix"
  fi
  setup_env
  if ! mpirun --version > "$out/mpirun-version.txt" 2>&1; then
    cat "$out/mpirun-version.txt" >&2
    note "deps: mpirun --version FAILED from $main/bin"
    return 1
  fi
  note "deps: $(head -1 "$out/mpirun-version.txt") from $(command -v mpirun)"
  if ! mpirun -np 2 sh -c 'echo rank $OMPI_COMM_WORLD_RANK' > "$out/mpirun-smoke.txt" 2>&1; then
    cat "$out/mpirun-smoke.txt" >&2
    note "deps: mpirun -np 2 FAILED (see mpirun-smoke.txt)"
    return 1
  fi
}

# ---- environment ------------------------------------------------------------

setup_env() {
  lib=$main/lib/$multiarch
  # Open MPI and PMIx find their components and help files from these
  # (Debian's PMIx spells some of its directories out, so name them all).
  export OPAL_PREFIX="$main"
  export PMIX_PREFIX="$lib/pmix2" PMIX_EXEC_PREFIX="$lib/pmix2" PMIX_LIBDIR="$lib/pmix2/lib" \
    PMIX_PKGLIBDIR="$lib/pmix2/lib/pmix" PMIX_DATAROOTDIR="$lib/pmix2/share" PMIX_DATADIR="$lib/pmix2/share" \
    PMIX_PKGDATADIR="$lib/pmix2/share/pmix"
  export PATH="$main/bin:$PATH"
  # The machine's own copies of the fallback libraries win where it has them.
  export LD_LIBRARY_PATH="$lib/openblas-pthread:$lib:$lib/openmpi/lib:$lib/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$fallback/usr/lib/$multiarch:$fallback/lib/$multiarch"
  export CMAKE_PREFIX_PATH="$main${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CMAKE_LIBRARY_PATH="$lib/openblas-pthread:$lib"
  export CMAKE_INCLUDE_PATH="$main/include/$multiarch/openblas-pthread:$main/include"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # One node, no ssh needed: local ranks are forked.
  if ! command -v ssh > /dev/null 2>&1 && ! command -v rsh > /dev/null 2>&1; then
    export OMPI_MCA_plm_rsh_agent=false
  fi
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
}

# ---- build ------------------------------------------------------------------

stage_configure() {
  setup_env
  lib=$main/lib/$multiarch
  glibc=$(ldd --version 2> /dev/null | head -1)
  note "build: host $(uname -m), $glibc; Debian 12's packages need glibc >= 2.36"
  {
    echo "## Machine"
    nvidia-smi 2>&1 || echo "(nvidia-smi failed)"
    nvcc --version 2>&1 | tail -2
    cmake --version | head -1
    echo "cores: $(nproc)"
  } > "$out/machine.txt"
  if ! cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DCC_COLL_ENABLE_CUDA=ON -DCC_COLL_ENABLE_FORTRAN=OFF \
        -DCMAKE_CUDA_ARCHITECTURES="$archs" \
        -DMPI_C_COMPILER="$main/bin/mpicc.openmpi" \
        -DMPIEXEC_EXECUTABLE="$main/bin/mpiexec.openmpi" \
        -DGTest_DIR="$lib/cmake/GTest" \
        -Dbenchmark_DIR="$lib/cmake/benchmark" \
        > "$out/configure.log" 2>&1; then
    tail -30 "$out/configure.log" >&2
    note "build: configure FAILED (configure.log)"
    return 1
  fi
  grep -E "libcc_coll .*CUDA|Python tests" "$out/configure.log" | sed 's/^-- //' | while read -r l; do note "build: $l"; done
  grep -E "^(MPI_C_COMPILER|MPIEXEC_EXECUTABLE|CC_COLL_CBLAS_INCLUDE_DIR|CC_COLL_LAPACKE_LIBRARY|GTest_DIR|benchmark_DIR)[:=]" \
    "$build/CMakeCache.txt" > "$out/configure-found.txt"
}

stage_build() {
  stage_configure || return 1
  if cmake --build "$build" --parallel "$jobs" > "$out/build.log" 2>&1; then
    note "build: everything built"
    return 0
  fi
  # Build what the later stages need, one target at a time, so one broken
  # target elsewhere does not hide the rest.
  note "build: the full build FAILED (build.log); building the GPU targets one by one"
  rc=1
  for t in cc_coll mpi_gpu_allreduce cc_coll_bench_gpu_kernels cc_coll_gpu_transport_perf; do
    if cmake --build "$build" --parallel "$jobs" --target "$t" >> "$out/build-targets.log" 2>&1; then
      note "build: target $t built"
    else
      note "build: target $t FAILED (build-targets.log)"
    fi
  done
  grep -E "error|Error" "$out/build.log" | head -40 > "$out/build-errors.txt"
  return $rc
}

# ---- test -------------------------------------------------------------------

run_ctest() {  # run_ctest <label> <parallel jobs>
  (cd "$build" && ctest -L "$1" --output-on-failure --timeout 900 -j "${2:-1}") > "$out/ctest-$1.log" 2>&1
  status=$?
  note "test: ctest -L $1: $(grep -E 'tests passed|tests failed' "$out/ctest-$1.log" | tail -1) (ctest-$1.log)"
  # ctest's closing list: the tests that were skipped, failed or timed out.
  grep -E "^[[:space:]]+[0-9]+ - " "$out/ctest-$1.log" | sed 's/^[[:space:]]*/    - /' >> "$summary"
  return $status
}

stage_test() {
  setup_env
  [ -d "$build" ] || { note "test: no build folder $build: run the build stage first"; return 1; }
  rc=0
  # Tests declare their rank counts (PROCESSORS), so ctest -j packs them
  # onto the cores; the ranks of concurrent tests share the GPU.
  for label in ${CC_COLL_TEST_LABELS:-gpu unit}; do
    run_ctest "$label" "$jobs" || rc=1
  done
  return $rc
}

# ---- bench ------------------------------------------------------------------

kernels_table() {  # kernels_table <json> <md>
  python3 - "$1" "$2" << 'EOF'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src) as f:
    d = json.load(f)
# Medians when the run had repetitions, else every iteration row.
rows = [b for b in d["benchmarks"] if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
if not rows:
    rows = [b for b in d["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
ctx = d.get("context", {})
out = ["## GPU kernels against the device copy bandwidth", "",
       "- GPU: %s; %s SMs; host: %s" % (ctx.get("gpu", "?"), ctx.get("gpu_sm_count", "?"), ctx.get("host_name", "?")),
       "- Source: `%s` (medians over the repetitions; event-timed)" % src.split("/")[-1], "",
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
EOF
}

stage_bench() {
  setup_env
  rc=0
  kb=$build/bench/cc_coll_bench_gpu_kernels
  if [ -x "$kb" ]; then
    # shellcheck disable=SC2086
    if "$kb" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 \
         --benchmark_out="$out/gpu_kernels.json" --benchmark_out_format=json ${CC_COLL_BENCH_ARGS:-} \
         > "$out/gpu_kernels.txt" 2>&1; then
      if command -v python3 > /dev/null 2>&1 && kernels_table "$out/gpu_kernels.json" "$out/gpu_kernels.md"; then
        note "bench: kernels: gpu_kernels.md (table), gpu_kernels.json, gpu_kernels.txt"
      else
        note "bench: kernels ran (gpu_kernels.json, gpu_kernels.txt); no markdown table (python3 missing or failed)"
      fi
    else
      note "bench: cc_coll_bench_gpu_kernels FAILED (gpu_kernels.txt)"
      rc=1
    fi
  else
    note "bench: $kb was not built"
    rc=1
  fi
  tp=$build/bench/cc_coll_gpu_transport_perf
  if [ -x "$tp" ]; then
    if mpirun -np 2 --oversubscribe -x OPENBLAS_NUM_THREADS=1 \
         "$tp" > "$out/gpu_transport.md" 2> "$out/gpu_transport.err"; then
      note "bench: transport: gpu_transport.md"
    else
      note "bench: cc_coll_gpu_transport_perf FAILED (gpu_transport.err)"
      rc=1
    fi
  else
    note "bench: $tp was not built"
    rc=1
  fi
  return $rc
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
  if [ "$s" != deps ] && [ ! -f "$prefix/.manifest" ]; then
    stage_deps || { status=1; break; }
  fi
  "stage_$s"
  rc=$?
  if [ $rc -ne 0 ] && [ $status -eq 0 ]; then status=$rc; fi
  # Without the packages or a build nothing later can run.
  if [ $rc -ne 0 ] && [ "$s" = deps ]; then break; fi
done
for f in gpu_transport.md gpu_kernels.md; do
  [ -f "$out/$f" ] && { echo; cat "$out/$f"; } >> "$summary"
done
echo "gpu_run: results in $out (SUMMARY.md); exit status $status"
exit $status
