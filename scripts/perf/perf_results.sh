#!/bin/bash
# perf_results.sh: measures libcc_coll against MPI_Allreduce on the emulated
# cluster (scripts/cluster/cc_cluster.sh) and regenerates docs/perf/ and the
# cluster-results section of docs/perf/history.md. One command, as root:
#
#   scripts/perf/perf_results.sh
#
# Steps: installs the Debian packages (build deps, python3-matplotlib) unless
# CC_COLL_SKIP_APT=1; configures and builds cc_coll_perf in
# ${CC_COLL_BUILD_DIR:-build}; for each host count runs
#   cc_cluster.sh -N <N> -r <rate> -- cc_coll_perf -b 4K -e 256M -f 4 -n <iters> \
#       -w <warmup> -J -q -m mpi,none,topk,sketch -D 0.01 -r normal -i <mode>
# saving docs/perf/allreduce_<rate>_<N>hosts.json; then scripts/perf/perf_plot.py
# draws docs/perf/speedup_*.png and relerr_*.png and rewrites the section of
# docs/perf/history.md between its markers.
#
# Settings (environment):
#   CC_PERF_HOSTS    host counts                 ["2 4"]
#   CC_PERF_RATE     link rate, tc syntax         [1gbit]
#   CC_PERF_DELAY    added delay (needs netem)    [none]
#   CC_PERF_ITERS    timed iterations (-n)        [3]
#   CC_PERF_WARMUP   warm-up iterations (-w)      [1]
#   CC_PERF_MODE     -i: 0 in place, 1 out of place, 2 both   [0]
#   CC_PERF_MIN, CC_PERF_MAX, CC_PERF_FACTOR   sizes [4K, 256M, 4]
#   CC_PERF_METHODS  -m                           [mpi,none,topk,sketch]
#   CC_PERF_DENSITY  -D                           [0.01]
#   CC_PERF_DATA     -r input data: normal (gradient-like) or int  [normal]
#   CC_PERF_EXTRA    more cc_coll_perf options (e.g. "-E 1")   []
#   CC_PERF_TIMEOUT  seconds per host count (cc_cluster.sh -t)  [1200]
#   CC_PERF_OUT      output folder                [docs/perf]
#   CC_PERF_DOC      Markdown file                [docs/perf/history.md]
#   CC_PERF_SKIP_BUILD=1  use the existing build
# Exit status: 0 when every host count was measured and reported; 1 when one
# failed (the others are still reported); 2 for a setup error.
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"
set -o pipefail

me=perf_results.sh
cc_coll_help "${1:-}"
[ "$#" -eq 0 ] || die "no arguments expected (settings come from the environment; see --help)"

hosts_list=${CC_PERF_HOSTS:-2 4}
rate=${CC_PERF_RATE:-1gbit}
delay=${CC_PERF_DELAY:-}
iters=${CC_PERF_ITERS:-3}
warmup=${CC_PERF_WARMUP:-1}
mode=${CC_PERF_MODE:-0}
min_size=${CC_PERF_MIN:-4K}
max_size=${CC_PERF_MAX:-256M}
factor=${CC_PERF_FACTOR:-4}
methods=${CC_PERF_METHODS:-mpi,none,topk,sketch}
density=${CC_PERF_DENSITY:-0.01}
data=${CC_PERF_DATA:-normal}
extra=${CC_PERF_EXTRA:-}
tmo=${CC_PERF_TIMEOUT:-1200}
out=${CC_PERF_OUT:-$CC_COLL_ROOT/docs/perf}
doc=${CC_PERF_DOC:-$CC_COLL_ROOT/docs/perf/history.md}
python=/usr/bin/python3

[ "$(id -u)" = 0 ] || die "must run as root (scripts/cluster/cc_cluster.sh creates network namespaces)"
for n in $hosts_list; do
    case $n in 2 | 3 | 4) ;; *) die "CC_PERF_HOSTS: host counts must be 2..4 (got '$n')" ;; esac
done
[[ $rate =~ ^[0-9.]+[A-Za-z]*$ ]] || die "CC_PERF_RATE: cannot read '$rate'"

# 1. Packages.
cc_coll_install_deps
if ! "$python" -c 'import matplotlib' 2>/dev/null; then
    [ "${CC_COLL_SKIP_APT:-0}" = 1 ] && die "python3-matplotlib is missing and CC_COLL_SKIP_APT=1: apt-get install python3-matplotlib"
    echo "== installing python3-matplotlib"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-matplotlib
fi
cc_coll_need_cluster_tools || exit 1

# 2. Build.
perf=$(cc_coll_build_perf "${CC_PERF_SKIP_BUILD:-0}") || exit 1

# 3. Measure, into a staging folder; docs/perf/ is replaced only at the end.
perf_args="-b $min_size -e $max_size -f $factor -n $iters -w $warmup -J -q -m $methods -D $density -r $data -i $mode${extra:+ $extra}"
rel_perf=${perf#"$CC_COLL_ROOT"/}
cluster_opts="-r $rate${delay:+ -d $delay} -t $tmo -p ccperf"
command_template="scripts/cluster/cc_cluster.sh -N <N> $cluster_opts -- sh -c '\$CC_CLUSTER_MPIRUN $rel_perf $perf_args'"
stage=$(mktemp -d /tmp/cc_perf.XXXXXX)
trap 'rm -rf "$stage"' EXIT

export CC_PERF_RATE=$rate CC_PERF_DELAY=$delay CC_PERF_HOSTS="$hosts_list"
export CC_PERF_ARGS="$perf_args" CC_PERF_COMMAND="$command_template"
export CC_PERF_SHAPING="tc tbf at the rate on each host's egress and on the switch port towards it (both directions); bucket max(1 ms at the rate, 64 KiB), queue up to 20 ms; MTU 1500. MPI: ob1 over TCP only, --bind-to none, mpi_yield_when_idle 1 when hosts > cores (docs/cluster.md)"
CC_PERF_LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
export CC_PERF_LOAD_BEFORE
load1=${CC_PERF_LOAD_BEFORE%% *}
if awk -v l="$load1" -v c="$(nproc)" 'BEGIN { exit !(l > 0.5 * c) }'; then
    echo "$me: warning: load average $load1 on $(nproc) cores: other work is running and will distort the times" >&2
fi

failed=0
measured=0
cd "$CC_COLL_ROOT" || exit 2
for n in $hosts_list; do
    name=allreduce_${rate}_${n}hosts
    echo "== $n hosts at $rate: cc_coll_perf $perf_args (at most ${tmo}s)"
    start=$(date +%s)
    rc=0
    # shellcheck disable=SC2086  # cluster_opts: several words
    scripts/cluster/cc_cluster.sh -N "$n" $cluster_opts -- sh -c "\$CC_CLUSTER_MPIRUN $perf $perf_args" \
        >"$stage/$name.json" 2>"$stage/$name.log" || rc=$?
    echo "   exit status $rc after $(($(date +%s) - start)) s"
    if ! "$python" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["tool"]=="cc_coll_perf" and d["results"]' \
        "$stage/$name.json" 2>/dev/null; then
        echo "$me: $n hosts: no valid JSON (exit status $rc); last lines of its log:" >&2
        tail -n 20 "$stage/$name.log" >&2
        rm -f "$stage/$name.json"
        failed=1
        continue
    fi
    [ "$rc" = 0 ] || {
        echo "$me: $n hosts: cc_coll_perf exited with $rc (a check failed?); its JSON is kept" >&2
        failed=1
    }
    measured=$((measured + 1))
done
[ "$measured" -gt 0 ] || die "nothing was measured; $out is unchanged"
"$python" "$CC_COLL_ROOT/scripts/perf/perf_plot.py" --write-meta "$stage/meta.json"

# 4. Replace the results, then plot and rewrite the Markdown section.
mkdir -p "$out"
rm -f "$out"/allreduce_*hosts.json "$out"/speedup_*hosts.png "$out"/relerr_*hosts.png "$out"/meta.json
cp "$stage"/*.json "$out"/
"$python" "$CC_COLL_ROOT/scripts/perf/perf_plot.py" --dir "$out" --doc "$doc" || failed=1
echo "== results in $out; section rewritten in $doc"
exit "$failed"
