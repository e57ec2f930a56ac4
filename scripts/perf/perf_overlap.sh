#!/bin/bash
# perf_overlap.sh: measures how much of the non-blocking allreduce
# (cc_coll_iallreduce) hides behind computation on the emulated cluster
# (scripts/cluster/cc_cluster.sh), the way OSU's osu_iallreduce measures it,
# and regenerates docs/perf/overlap.json and the overlap-results section of
# docs/perf/overlap.md. One command, as root, on a machine with nothing else
# running:
#
#   scripts/perf/perf_overlap.sh
#
# Steps: installs the Debian packages unless CC_COLL_SKIP_APT=1; configures
# and builds cc_coll_perf in ${CC_COLL_BUILD_DIR:-build}; then, for each run
# of CC_OVL_RUNS (a progress mode, optionally with test calls), one cluster
# session of <hosts> hosts at <rate>:
#   CC_COLL_PROGRESS=<progress> scripts/cluster/cc_cluster.sh -N <hosts> -r <rate> -t <timeout> -p ccovl -- \
#       sh -c '$CC_CLUSTER_MPIRUN cc_coll_perf -N -t <tests> -b 4M -e 64M -f 4 -n <iters> -w <warmup> -J -q \
#           -m mpi,none,topk,sketch,lowrank -D 0.01 -R 4 -r normal -i 0'
# recording the load average before and after each; then
#   python3 scripts/perf/perf_overlap.py --collect <runs> --out docs/perf/overlap.json
#   python3 scripts/perf/perf_overlap.py docs/perf/overlap.json docs/perf/overlap.md
# gather the runs, the machine and the settings into one JSON file and
# rewrite the section between <!-- BEGIN overlap-results --> and
# <!-- END overlap-results --> from it (the second command alone redoes the
# section from the committed JSON, byte for byte). For every method and
# size the JSON has the blocking call's time (cc_coll_allreduce, in the same
# run), the pure communication time of iallreduce + wait, the time of
# iallreduce + a dummy compute of that length + wait, and OSU's overlap %
# (cc_coll_perf --help defines every column). LOWRANK views each buffer
# near-square (4 MiB: 1024 x 1024, 16 MiB: 2048 x 2048, 64 MiB: 4096 x 4096).
# About 5 minutes on an idle 2-core machine with the defaults.
#
# Settings (environment):
#   CC_OVL_RUNS      runs: <progress>[:<test calls>] each, progress thread or
#                    caller (CC_COLL_PROGRESS)     ["thread caller caller:10"]
#   CC_OVL_HOSTS     hosts (cc_cluster.sh -N)       [2]
#   CC_OVL_RATE      link rate, tc syntax           [1gbit]
#   CC_OVL_MIN, CC_OVL_MAX, CC_OVL_FACTOR   sizes   [4M, 64M, 4]
#   CC_OVL_ITERS     timed iterations (-n)          [5]
#   CC_OVL_WARMUP    warm-up iterations (-w)        [1]
#   CC_OVL_METHODS   -m                             [mpi,none,topk,sketch,lowrank]
#   CC_OVL_DENSITY   topk density (-D)              [0.01]
#   CC_OVL_RANK      lowrank rank (-R)              [4]
#   CC_OVL_DATA      -r input data                  [normal]
#   CC_OVL_MODE      -i: 0 in place, 1 out of place [0]
#   CC_OVL_EXTRA     more cc_coll_perf options      []
#   CC_OVL_TIMEOUT   seconds per run (cc_cluster.sh -t)  [1800]
#   CC_OVL_JSON      the results                    [docs/perf/overlap.json]
#   CC_OVL_DOC       Markdown file                  [docs/perf/overlap.md]
#   CC_OVL_SKIP_BUILD=1  use the existing build
#   CC_COLL_BUILD_DIR, CC_COLL_JOBS, CC_COLL_SKIP_APT   as for every script
# Exit status: 0 when every run was measured and reported; 1 when one failed
# (the others are still reported); 2 for a setup error.
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"
set -o pipefail

me=perf_overlap.sh
cc_coll_help "${1:-}"
[ "$#" -eq 0 ] || die "no arguments expected (settings come from the environment; see --help)"

runs_list=${CC_OVL_RUNS:-thread caller caller:10}
hosts=${CC_OVL_HOSTS:-2}
rate=${CC_OVL_RATE:-1gbit}
min_size=${CC_OVL_MIN:-4M}
max_size=${CC_OVL_MAX:-64M}
factor=${CC_OVL_FACTOR:-4}
iters=${CC_OVL_ITERS:-5}
warmup=${CC_OVL_WARMUP:-1}
methods=${CC_OVL_METHODS:-mpi,none,topk,sketch,lowrank}
density=${CC_OVL_DENSITY:-0.01}
lr_rank=${CC_OVL_RANK:-4}
data=${CC_OVL_DATA:-normal}
mode=${CC_OVL_MODE:-0}
extra=${CC_OVL_EXTRA:-}
tmo=${CC_OVL_TIMEOUT:-1800}
json_out=${CC_OVL_JSON:-$CC_COLL_ROOT/docs/perf/overlap.json}
doc=${CC_OVL_DOC:-$CC_COLL_ROOT/docs/perf/overlap.md}
python=/usr/bin/python3

[ "$(id -u)" = 0 ] || die "must run as root (scripts/cluster/cc_cluster.sh creates network namespaces)"
case $hosts in 2 | 3 | 4) ;; *) die "CC_OVL_HOSTS: 2..4 hosts (got '$hosts')" ;; esac
[[ $rate =~ ^[0-9.]+[A-Za-z]*$ ]] || die "CC_OVL_RATE: cannot read '$rate'"
for v in iters warmup tmo lr_rank; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v: not a whole number: '${!v}'"
done
runs=()
for r in $runs_list; do
    [[ $r =~ ^(thread|caller)(:[0-9]+)?$ ]] || die "CC_OVL_RUNS: '$r' is not <thread|caller>[:<test calls>]"
    runs+=("$r")
done
[ "${#runs[@]}" -gt 0 ] || die "CC_OVL_RUNS is empty"

# 1. Packages.
cc_coll_install_deps
cc_coll_need_cluster_tools || exit 1

# 2. Build.
perf=$(cc_coll_build_perf "${CC_OVL_SKIP_BUILD:-0}") || exit 1

# 3. Measure, into a staging folder; the JSON is replaced only at the end.
perf_args="-b $min_size -e $max_size -f $factor -n $iters -w $warmup -J -q -m $methods -D $density -R $lr_rank -r $data -i $mode${extra:+ $extra}"
# The command as the page shows it: the build folder relative to the checkout
# when it lies inside it.
# shellcheck disable=SC2016  # $CC_COLL_BUILD_DIR is shown literally on the page
case $perf in
    "$CC_COLL_ROOT"/*) shown_perf=${perf#"$CC_COLL_ROOT"/} ;;
    *) shown_perf='$CC_COLL_BUILD_DIR/cc_coll_perf' ;;
esac
cluster_opts="-N $hosts -r $rate -t $tmo -p ccovl"
stage=$(mktemp -d /tmp/cc_perf_overlap.XXXXXX)
trap 'rm -rf "$stage"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
cores=$(nproc)
failed=0
measured=0
cd "$CC_COLL_ROOT" || exit 2
for r in "${runs[@]}"; do
    progress=${r%%:*}
    tests=0
    case $r in *:*) tests=${r#*:} ;; esac
    name=run.${progress}_t${tests}
    args="-N -t $tests $perf_args"
    shown="CC_COLL_PROGRESS=$progress scripts/cluster/cc_cluster.sh $cluster_opts -- sh -c '\$CC_CLUSTER_MPIRUN $shown_perf $args'"
    lb=$(load)
    if awk -v l="${lb%% *}" -v c="$cores" 'BEGIN { exit !(l > 0.5 * c) }'; then
        echo "$me: warning: load average ${lb%% *} on $cores cores: other work is running and will distort the times" >&2
    fi
    echo "== progress $progress, $tests test calls: cc_coll_perf $args (load $lb; at most ${tmo}s)"
    start=$(date +%s)
    rc=0
    # shellcheck disable=SC2086  # cluster_opts: several words
    CC_COLL_PROGRESS=$progress scripts/cluster/cc_cluster.sh $cluster_opts -- sh -c "\$CC_CLUSTER_MPIRUN $perf $args" \
        >"$stage/$name.json" 2>"$stage/$name.log" || rc=$?
    end=$(date +%s)
    la=$(load)
    echo "   exit status $rc after $((end - start)) s (load $la)"
    "$python" - "$stage/$name.meta" "$progress" "$tests" "$lb" "$la" "$rc" "$start" "$end" "$shown" <<'EOF'
import json, sys
path, progress, tests, lb, la, rc, start, end, shown = sys.argv[1:]
with open(path, "w") as f:
    json.dump({"progress": progress, "test_calls": int(tests), "load_before": [float(x) for x in lb.split()],
               "load_after": [float(x) for x in la.split()], "exit": int(rc), "start": int(start),
               "end": int(end), "command": shown}, f)
EOF
    if ! "$python" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["tool"]=="cc_coll_perf" and d["results"]' \
        "$stage/$name.json" 2>/dev/null; then
        echo "$me: progress $progress, $tests test calls: no valid JSON (exit status $rc); last lines of its log:" >&2
        tail -n 20 "$stage/$name.log" >&2
        failed=1
        continue
    fi
    [ "$rc" = 0 ] || {
        echo "$me: progress $progress, $tests test calls: cc_coll_perf exited with $rc (a check failed?); its JSON is kept" >&2
        failed=1
    }
    measured=$((measured + 1))
done
[ "$measured" -gt 0 ] || die "nothing was measured; $json_out is unchanged"

# 4. One JSON file with the runs, the machine and the settings; then the section.
export CC_OVL_HOSTS="$hosts" CC_OVL_RATE="$rate" CC_OVL_ARGS="$perf_args"
"$python" "$CC_COLL_ROOT/scripts/perf/perf_overlap.py" --collect "$stage" --out "$stage/overlap.json" || exit 2
mkdir -p "$(dirname "$json_out")"
cp "$stage/overlap.json" "$json_out"
"$python" "$CC_COLL_ROOT/scripts/perf/perf_overlap.py" "$json_out" "$doc" || failed=1
echo "== results in $json_out; section overlap-results rewritten in $doc"
exit "$failed"
