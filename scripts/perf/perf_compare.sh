#!/bin/bash
# perf_compare.sh: measures two revisions of libcc_coll side by side, the
# kernel micro-benchmarks and the allreduce on the emulated cluster, and
# writes the raw results (JSON) and a table of HEAD/BASE time ratios
# (Markdown). One command, as root, from anywhere in the checkout:
#
#   scripts/perf/perf_compare.sh [BASE [HEAD]]      (defaults 882cb72 and HEAD)
#
# Steps:
#  1. Installs the Debian packages (scripts/common.sh) unless CC_COLL_SKIP_APT=1.
#  2. Exports each revision with `git archive` into a temporary folder (the
#     checkout and its working tree are not touched) and builds it there,
#     Release, tests, examples, CUDA and Fortran off, the same options for
#     both, only cc_coll_perf, cc_coll_bench_topk, cc_coll_bench_sketch and
#     cc_coll_bench_lowrank (nice, CC_CMP_JOBS jobs).
#  3. Kernels: each micro-benchmark of BASE, then of HEAD, round after round
#     (BASE HEAD BASE HEAD ...), with OPENBLAS_NUM_THREADS=1, pinned to one
#     core with taskset, --benchmark_min_time=CC_CMP_MIN_TIME.
#  4. Cluster: one scripts/cluster/cc_cluster.sh session (-N 2 -r 1gbit)
#     running both builds' cc_coll_perf in turn, BASE HEAD BASE HEAD ...:
#       $CC_CLUSTER_MPIRUN <build>/cc_coll_perf -b 1M -e 64M -f 4 -n 5 -w 1 -J -q \
#           -m mpi,none,topk,sketch,lowrank -D 0.01 -r normal -i 0
#  5. Writes CC_CMP_JSON (every run, raw, with its load averages) and
#     CC_CMP_MD (the ratio tables), through scripts/perf/perf_compare.py.
# Before every run the 1-minute load average must be at most CC_CMP_MAX_LOAD
# (it waits up to CC_CMP_LOAD_WAIT seconds for it); a run with a load
# average above it, before or after, is repeated up to CC_CMP_RETRIES times
# and kept in the JSON marked as rejected. The load averages before and after
# every run are recorded. mpi (plain MPI_Allreduce, measured by both builds)
# is the same code in both: its ratio shows the noise of the cluster.
#
# Settings (environment; arguments take precedence over CC_CMP_BASE/HEAD):
#   CC_CMP_BASE, CC_CMP_HEAD   the two revisions             [882cb72, HEAD]
#   CC_CMP_ROUNDS     rounds of each build, kernels and cluster   [3]
#   CC_CMP_MIN_TIME   --benchmark_min_time (seconds)         [0.1]
#   CC_CMP_CPU        core the micro-benchmarks are pinned to ('' = none) [last core]
#   CC_CMP_HOSTS      cluster hosts (-N)                     [2]
#   CC_CMP_RATE       link rate (-r)                         [1gbit]
#   CC_CMP_MIN, CC_CMP_MAX, CC_CMP_FACTOR   sizes            [1M, 64M, 4]
#   CC_CMP_ITERS, CC_CMP_WARMUP   -n and -w of cc_coll_perf  [5, 1]
#   CC_CMP_METHODS    -m                                     [mpi,none,topk,sketch,lowrank]
#   CC_CMP_DENSITY    -D                                     [0.01]
#   CC_CMP_DATA       -r                                     [normal]
#   CC_CMP_MAX_LOAD   highest accepted 1-minute load average [2.5]
#   CC_CMP_LOAD_WAIT  seconds to wait for it before a run    [120]
#   CC_CMP_RETRIES    repeats of a run above it              [1]
#   CC_CMP_RUN_TIMEOUT  seconds per micro-benchmark run      [300]
#   CC_CMP_TIMEOUT    seconds for the whole cluster session  [1800]
#   CC_CMP_JOBS       parallel build jobs                    [2]
#   CC_CMP_JSON       raw results        [docs/perf/refactor_compare.json]
#   CC_CMP_MD         ratio tables       [docs/perf/refactor_compare.md]
#   CC_CMP_WORK       keep the exports, builds and logs in this folder and
#                     reuse a build whose revision matches   [a temporary folder, removed]
#   CC_CMP_SKIP_KERNELS=1, CC_CMP_SKIP_CLUSTER=1   leave a part out
# Exit status: 0 when everything was measured and reported; 1 when a run
# failed (the rest is reported); 2 for a usage or setup error.
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"
set -o pipefail

cc_coll_help "${1:-}"
[ "$#" -le 2 ] || die "at most two arguments, BASE and HEAD (see --help)"

base_rev=${1:-${CC_CMP_BASE:-882cb72}}
head_rev=${2:-${CC_CMP_HEAD:-HEAD}}
rounds=${CC_CMP_ROUNDS:-3}
min_time=${CC_CMP_MIN_TIME:-0.1}
cpu=${CC_CMP_CPU-$(($(nproc) - 1))}
hosts=${CC_CMP_HOSTS:-2}
rate=${CC_CMP_RATE:-1gbit}
min_size=${CC_CMP_MIN:-1M}
max_size=${CC_CMP_MAX:-64M}
factor=${CC_CMP_FACTOR:-4}
iters=${CC_CMP_ITERS:-5}
warmup=${CC_CMP_WARMUP:-1}
methods=${CC_CMP_METHODS:-mpi,none,topk,sketch,lowrank}
density=${CC_CMP_DENSITY:-0.01}
data=${CC_CMP_DATA:-normal}
max_load=${CC_CMP_MAX_LOAD:-2.5}
load_wait=${CC_CMP_LOAD_WAIT:-120}
retries=${CC_CMP_RETRIES:-1}
run_tmo=${CC_CMP_RUN_TIMEOUT:-300}
tmo=${CC_CMP_TIMEOUT:-1800}
jobs=${CC_CMP_JOBS:-2}
json_out=${CC_CMP_JSON:-$CC_COLL_ROOT/docs/perf/refactor_compare.json}
md_out=${CC_CMP_MD:-$CC_COLL_ROOT/docs/perf/refactor_compare.md}
skip_kernels=${CC_CMP_SKIP_KERNELS:-0}
skip_cluster=${CC_CMP_SKIP_CLUSTER:-0}
programs="cc_coll_bench_topk cc_coll_bench_sketch cc_coll_bench_lowrank"

for v in rounds iters warmup retries load_wait run_tmo tmo jobs hosts; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v: not a whole number: '${!v}'"
done
[ "$rounds" -ge 1 ] || die "CC_CMP_ROUNDS must be at least 1"
[[ $max_load =~ ^[0-9.]+$ ]] || die "CC_CMP_MAX_LOAD: cannot read '$max_load'"
[[ $min_time =~ ^[0-9.]+$ ]] || die "CC_CMP_MIN_TIME: cannot read '$min_time'"
[ -z "$cpu" ] || [[ $cpu =~ ^[0-9]+$ ]] || die "CC_CMP_CPU: not a core number: '$cpu'"
if [ "$skip_cluster" != 1 ]; then
    [ "$(id -u)" = 0 ] || die "must run as root (scripts/cluster/cc_cluster.sh creates network namespaces); CC_CMP_SKIP_CLUSTER=1 runs the micro-benchmarks alone"
fi
command -v git >/dev/null 2>&1 || die "git is missing"
git -C "$CC_COLL_ROOT" rev-parse --git-dir >/dev/null 2>&1 || die "$CC_COLL_ROOT is not a git checkout"
base_commit=$(git -C "$CC_COLL_ROOT" rev-parse --verify --quiet "$base_rev^{commit}") || die "BASE: no revision '$base_rev'"
head_commit=$(git -C "$CC_COLL_ROOT" rev-parse --verify --quiet "$head_rev^{commit}") || die "HEAD: no revision '$head_rev'"

# 1. Packages.
cc_coll_install_deps

# The work folder: exports, builds, raw outputs.
if [ -n "${CC_CMP_WORK:-}" ]; then
    work=$CC_CMP_WORK
    mkdir -p "$work" || die "cannot create $work"
    work=$(cd "$work" && pwd)
else
    work=$(mktemp -d /tmp/cc_perf_compare.XXXXXX) || die "cannot create a temporary folder"
    trap 'rm -rf "$work"' EXIT
fi
case $work in *[[:space:]]*) die "the work folder's path must not contain white space: $work" ;; esac
# Runs of the parts measured now are replaced; a part left out keeps those of
# an earlier run in the same CC_CMP_WORK (the report takes both).
mkdir -p "$work/runs"
[ "$skip_kernels" = 1 ] || rm -f "$work"/runs/kernel.*
[ "$skip_cluster" = 1 ] || rm -f "$work"/runs/cluster.*

load() { cut -d' ' -f1-3 /proc/loadavg; }
load1() { cut -d' ' -f1 /proc/loadavg; }
above() { awk -v l="$1" -v m="$max_load" 'BEGIN { exit !(l > m) }'; }

# 2. Export and build each revision.
build_rev() { # label commit
    local label=$1 commit=$2 dir=$work/$1
    if [ -f "$dir/commit" ] && [ "$(cat "$dir/commit")" = "$commit" ] && [ -d "$dir/src" ]; then
        echo "== $label: reusing the export of ${commit:0:12} in $dir"
    else
        echo "== $label: exporting ${commit:0:12} (git archive)"
        rm -rf "$dir"
        mkdir -p "$dir/src"
        git -C "$CC_COLL_ROOT" archive --format=tar "$commit" | tar -x -C "$dir/src" || die "$label: git archive failed"
        echo "$commit" >"$dir/commit"
    fi
    echo "== $label: configuring and building in $dir/build"
    nice cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release \
        -DCC_COLL_BUILD_TESTS=OFF -DCC_COLL_BUILD_EXAMPLES=OFF -DCC_COLL_BUILD_BENCHMARKS=ON \
        -DCC_COLL_ENABLE_CUDA=OFF -DCC_COLL_ENABLE_FORTRAN=OFF >"$dir/configure.log" 2>&1 ||
        { tail -n 20 "$dir/configure.log" >&2; die "$label: cmake configure failed"; }
    local help t
    help=$(cmake --build "$dir/build" --target help) || die "$label: cmake --build --target help failed"
    for t in cc_coll_perf $programs; do
        grep -qE "(^|[ .:])$t(:|$| )" <<<"$help" || die "$label: no build target $t (cmake --build $dir/build --target help)"
    done
    # shellcheck disable=SC2086  # programs: several words
    nice cmake --build "$dir/build" -j "$jobs" --target cc_coll_perf $programs >"$dir/build.log" 2>&1 ||
        { tail -n 30 "$dir/build.log" >&2; die "$label: build failed"; }
    [ -x "$dir/build/cc_coll_perf" ] || die "$label: $dir/build/cc_coll_perf was not built"
    for t in $programs; do
        [ -x "$dir/build/bench/$t" ] || die "$label: $dir/build/bench/$t was not built"
    done
}
build_rev base "$base_commit"
build_rev head "$head_commit"

# Waits (bounded) until the 1-minute load average is at most CC_CMP_MAX_LOAD.
wait_for_load() {
    local waited=0
    while above "$(load1)" && [ "$waited" -lt "$load_wait" ]; do
        [ "$waited" = 0 ] && echo "   load average $(load1) > $max_load: waiting (at most ${load_wait}s)"
        sleep 10
        waited=$((waited + 10))
    done
}

failed=0
runs=$work/runs
# Each run leaves <name>.out (the program's JSON) and <name>.meta (one JSON
# line: label, round, attempt, load averages, exit status, accepted).
meta_line() { # label round attempt load_before load_after rc accepted uptime start end
    printf '{"label":"%s","round":%s,"attempt":%s,"load_before":"%s","load_after":"%s","exit":%s,"accepted":%s,"uptime":"%s","start":%s,"end":%s}\n' "$@"
}

# 3. Kernel micro-benchmarks, interleaved.
if [ "$skip_kernels" != 1 ]; then
    pin=()
    [ -n "$cpu" ] && pin=(taskset -c "$cpu")
    for r in $(seq 1 "$rounds"); do
        for p in $programs; do
            for label in base head; do
                a=0
                while :; do
                    name=kernel.$p.$label.r$r.a$a
                    wait_for_load
                    lb=$(load)
                    start=$(date +%s)
                    echo "== round $r: $label $p (load $lb)"
                    rc=0
                    timeout -k 10 "$run_tmo" env OPENBLAS_NUM_THREADS=1 "${pin[@]}" "$work/$label/build/bench/$p" \
                        --benchmark_min_time="$min_time" --benchmark_format=json >"$runs/$name.out" 2>"$runs/$name.log" || rc=$?
                    la=$(load)
                    ok=true
                    if above "${lb%% *}" || above "${la%% *}"; then ok=false; fi
                    if [ "$ok" = false ] && [ "$a" -lt "$retries" ]; then
                        meta_line "$label" "$r" "$a" "$lb" "$la" "$rc" false "$(uptime)" "$start" "$(date +%s)" >"$runs/$name.meta"
                        echo "   load average $la above $max_load: repeating"
                        a=$((a + 1))
                        continue
                    fi
                    meta_line "$label" "$r" "$a" "$lb" "$la" "$rc" true "$(uptime)" "$start" "$(date +%s)" >"$runs/$name.meta"
                    [ "$rc" = 0 ] || {
                        echo "$me: $label $p round $r: exit status $rc" >&2
                        tail -n 5 "$runs/$name.log" >&2
                        failed=1
                    }
                    break
                done
            done
        done
    done
fi

# 4. The cluster: one session, the two builds' cc_coll_perf in turn.
perf_args="-b $min_size -e $max_size -f $factor -n $iters -w $warmup -J -q -m $methods -D $density -r $data -i 0"
if [ "$skip_cluster" != 1 ]; then
    cat >"$work/cluster_runs.sh" <<'EOF'
#!/bin/bash
# Runs inside the cluster's host 0: BASE HEAD BASE HEAD ... with
# $CC_CLUSTER_MPIRUN, repeating a run whose load average was too high.
# Arguments: work rounds max_load load_wait retries perf_args...
work=$1 rounds=$2 max_load=$3 load_wait=$4 retries=$5
shift 5
load() { cut -d' ' -f1-3 /proc/loadavg; }
above() { awk -v l="$1" -v m="$max_load" 'BEGIN { exit !(l > m) }'; }
meta_line() {
    printf '{"label":"%s","round":%s,"attempt":%s,"load_before":"%s","load_after":"%s","exit":%s,"accepted":%s,"uptime":"%s","start":%s,"end":%s}\n' "$@"
}
status=0
for r in $(seq 1 "$rounds"); do
    for label in base head; do
        a=0
        while :; do
            name=cluster.$label.r$r.a$a
            waited=0
            while above "$(cut -d' ' -f1 /proc/loadavg)" && [ "$waited" -lt "$load_wait" ]; do
                sleep 10
                waited=$((waited + 10))
            done
            lb=$(load)
            echo "== round $r: $label cc_coll_perf (load $lb)" >&2
            start=$(date +%s)
            rc=0
            # shellcheck disable=SC2086  # CC_CLUSTER_MPIRUN: several words
            $CC_CLUSTER_MPIRUN "$work/$label/build/cc_coll_perf" "$@" >"$work/runs/$name.out" 2>"$work/runs/$name.log" || rc=$?
            la=$(load)
            echo "   exit status $rc after $(($(date +%s) - start)) s (load $la)" >&2
            ok=true
            if above "${lb%% *}" || above "${la%% *}"; then ok=false; fi
            if [ "$ok" = false ] && [ "$a" -lt "$retries" ]; then
                meta_line "$label" "$r" "$a" "$lb" "$la" "$rc" false "$(uptime)" "$start" "$(date +%s)" >"$work/runs/$name.meta"
                echo "   load average above $max_load: repeating" >&2
                a=$((a + 1))
                continue
            fi
            meta_line "$label" "$r" "$a" "$lb" "$la" "$rc" true "$(uptime)" "$start" "$(date +%s)" >"$work/runs/$name.meta"
            [ "$rc" = 0 ] || status=1
            break
        done
    done
done
exit "$status"
EOF
    echo "== cluster: $hosts hosts at $rate, cc_coll_perf $perf_args, $rounds rounds of each (at most ${tmo}s)"
    rc=0
    # shellcheck disable=SC2086  # perf_args: several words
    "$CC_COLL_ROOT/scripts/cluster/cc_cluster.sh" -N "$hosts" -r "$rate" -t "$tmo" -p cccmp -- \
        bash "$work/cluster_runs.sh" "$work" "$rounds" "$max_load" "$load_wait" "$retries" $perf_args || rc=$?
    if [ "$rc" != 0 ]; then
        echo "$me: the cluster session exited with $rc" >&2
        for f in "$runs"/cluster.*.log; do
            [ -s "$f" ] && { echo "-- $f" >&2; tail -n 5 "$f" >&2; }
        done
        failed=1
    fi
fi

# 5. Report. The command as run: the CC_CMP_* settings given (but the work
# folder, a path of this machine), then the script and its revisions.
settings=$(env | grep -E '^CC_CMP_[A-Z_]+=' | grep -vE '^CC_CMP_(WORK|JSON|MD)=' | sort | tr '\n' ' ' || true)
cluster_command="scripts/cluster/cc_cluster.sh -N $hosts -r $rate -- sh -c '\$CC_CLUSTER_MPIRUN <build>/cc_coll_perf $perf_args'"
kernel_command="OPENBLAS_NUM_THREADS=1${cpu:+ taskset -c $cpu} <build>/bench/<program> --benchmark_min_time=$min_time --benchmark_format=json"
python3 "$CC_COLL_ROOT/scripts/perf/perf_compare.py" --runs "$runs" --json "$json_out" --md "$md_out" \
    --base "$base_rev" --base-commit "$base_commit" --head "$head_rev" --head-commit "$head_commit" \
    --command "${settings}scripts/perf/perf_compare.sh $base_rev $head_rev" \
    --cluster-command "$cluster_command" --kernel-command "$kernel_command" \
    --max-load "$max_load" --rate "$rate" --hosts "$hosts" || failed=1
echo "== raw results in $json_out, ratios in $md_out"
exit "$failed"
