#!/bin/bash
# quality.sh: the training-quality benchmark. Trains a small character-level
# transformer language model with PyTorch DDP on CPU under mpirun, once per
# row (how the gradients are averaged) and rank count, and regenerates
# docs/quality/results.md (its quality-results section),
# docs/quality/runs.json and the loss-curve plots
# docs/quality/loss_<N>ranks.png; then times the rows of
# CC_Q_CLUSTER_ROWS on the emulated 1 Gbit/s cluster
# (scripts/cluster/cc_cluster.sh, needs root) into docs/quality/cluster.json.
# One command, as root, on a machine with nothing else running:
#
#   scripts/quality.sh
#
# Rows (scripts/quality/train_lm.py --row): ddp (DDP's default hook, dense
# gloo allreduce: the uncompressed reference), none (cc_coll.torch, method
# NONE), topk, sketch, lowrank (cc_coll.torch with error feedback) and
# topk-noef, sketch-noef, lowrank-noef (without), powersgd (PyTorch's
# powerSGD_hook over gloo at the same rank). Every run starts from the same
# initial model and sees the same data; see docs/quality/benchmark.md for
# the model, the corpus and why the settings are what they are. About 30
# minutes on an idle 2-core machine with the defaults.
#
# Steps: installs the Debian packages (the build's, python3-torch,
# python3-mpi4py, python3-matplotlib; iproute2 for the cluster) unless
# CC_COLL_SKIP_APT=1; configures and
# builds libcc_coll in ${CC_COLL_BUILD_DIR:-build}; runs every row with
#   mpirun -np <ranks> /usr/bin/python3 scripts/quality/train_lm.py --row <row> <options>
# then
#   python3 scripts/quality/quality_report.py
# which alone redoes the plots and the section from the committed JSON.
#
# Settings (environment):
#   CC_Q_RANKS          rank counts                       ["2 4"]
#                       (CC_Q_RANKS= CC_Q_SWEEP= : no training runs, the
#                       committed docs/quality/runs.json stays: the cluster step alone)
#   CC_Q_ROWS           rows                              [all nine]
#   CC_Q_ARGS           more train_lm.py options for every run  []
#   CC_Q_SWEEP          more runs: <row>:<train_lm.py options, comma-separated>
#                       each, e.g. lowrank:--rank=4 (labelled "lowrank --rank=4")
#                                   ["lowrank:--rank=2 lowrank:--rank=4 topk:--density=0.05"]
#   CC_Q_SWEEP_RANKS    rank counts of those runs         ["2"]
#   CC_Q_CLUSTER        1: time rows on the emulated cluster, 0: skip   [1]
#   CC_Q_CLUSTER_ROWS   rows timed there                  ["ddp none lowrank powersgd"]
#   CC_Q_CLUSTER_RING_ROWS  rows timed there again with Open MPI's non-blocking
#                       allreduce on its ring algorithm
#                       (--mca coll_libnbc_iallreduce_algorithm 1)  ["none lowrank"]
#   CC_Q_CLUSTER_HOSTS  hosts (ranks) there               [2]
#   CC_Q_CLUSTER_RATE   link rate                         [1gbit]
#   CC_Q_CLUSTER_STEPS  steps per timed run               [60]
#   CC_Q_CLUSTER_REPEATS  rounds of the rows, in turn     [3]
#   CC_Q_DIR            results folder                    [docs/quality]
#   CC_Q_DOC            Markdown page                     [docs/quality/results.md]
#   CC_Q_FRONTIER       1: the loss-gap-against-ratio frontier of every route
#                       (scripts/quality/frontier.sh, its own settings and page,
#                       $CC_Q_DIR/frontier.md), 0: skip  [1]
#   CC_Q_TTT            1: time to target loss on the emulated cluster
#                       (scripts/quality/time_to_target.sh, its own settings and
#                       page, $CC_Q_DIR/time_to_target.md) when CC_Q_CLUSTER=1, 0: skip  [1]
#   CC_Q_SKIP_BUILD=1   use the existing build
#   CC_COLL_BUILD_DIR, CC_COLL_JOBS, CC_COLL_SKIP_APT   as for every script
# Exit status: 0 when every run finished and the page was written; 1 when a
# run failed (nothing is rewritten); 2 for a setup error.
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/common.sh"
set -o pipefail
shopt -s extglob

me=quality.sh
cc_coll_help "${1:-}"
[ "$#" -eq 0 ] || die "no arguments expected (settings come from the environment; see --help)"

ranks_list=${CC_Q_RANKS-2 4}
rows=${CC_Q_ROWS:-ddp none topk topk-noef sketch sketch-noef lowrank lowrank-noef powersgd}
args=${CC_Q_ARGS:-}
sweep=${CC_Q_SWEEP-lowrank:--rank=2 lowrank:--rank=4 topk:--density=0.05}
sweep_ranks=${CC_Q_SWEEP_RANKS:-2}
cluster=${CC_Q_CLUSTER:-1}
cluster_rows=${CC_Q_CLUSTER_ROWS-ddp none lowrank powersgd}
ring_rows=${CC_Q_CLUSTER_RING_ROWS-none lowrank}
cluster_hosts=${CC_Q_CLUSTER_HOSTS:-2}
cluster_rate=${CC_Q_CLUSTER_RATE:-1gbit}
cluster_steps=${CC_Q_CLUSTER_STEPS:-60}
repeats=${CC_Q_CLUSTER_REPEATS:-3}
out_dir=${CC_Q_DIR:-$CC_COLL_ROOT/docs/quality}
doc=${CC_Q_DOC:-$CC_COLL_ROOT/docs/quality/results.md}
python=/usr/bin/python3
trainer=$CC_COLL_ROOT/scripts/quality/train_lm.py
report=$CC_COLL_ROOT/scripts/quality/quality_report.py

valid_rows=" ddp none topk topk-noef sketch sketch-noef lowrank lowrank-noef powersgd "
for r in $rows $cluster_rows $ring_rows ${sweep//:*([^ ])/}; do
    case $valid_rows in *" $r "*) ;; *) die "unknown row '$r' (rows:$valid_rows)" ;; esac
done
for item in $sweep; do
    [[ $item =~ ^[a-z-]+:--[a-z-]+(=[^,]*)?(,--[a-z-]+(=[^,]*)?)*$ ]] ||
        die "CC_Q_SWEEP: '$item' is not <row>:--<option>[=<value>][,--<option>[=<value>]...]"
done
for n in $ranks_list $sweep_ranks; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "CC_Q_RANKS: not a rank count: '$n'"
done
for v in cluster_steps repeats; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v: not a positive whole number: '${!v}'"
done
case $cluster in 0 | 1) ;; *) die "CC_Q_CLUSTER must be 0 or 1 (got '$cluster')" ;; esac
if [ "$cluster" = 1 ]; then
    [ "$(id -u)" = 0 ] || die "the cluster step must run as root (network namespaces); CC_Q_CLUSTER=0 skips it"
    case $cluster_hosts in 2 | 3 | 4) ;; *) die "CC_Q_CLUSTER_HOSTS: 2..4 (got '$cluster_hosts')" ;; esac
fi

# 1. Packages (python3-torch, python3-mpi4py and python3-matplotlib among them).
cc_coll_install_deps
"$python" -c 'import torch, mpi4py, matplotlib' ||
    die "$python cannot import torch, mpi4py and matplotlib (apt-get install python3-torch python3-mpi4py python3-matplotlib)"
if [ "$cluster" = 1 ]; then
    cc_coll_need_cluster_tools || exit 2
fi

# 2. The library.
if [ "${CC_Q_SKIP_BUILD:-0}" != 1 ]; then
    echo "== configuring and building libcc_coll in $CC_COLL_BUILD_DIR"
    cmake -S "$CC_COLL_ROOT" -B "$CC_COLL_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        cmake --build "$CC_COLL_BUILD_DIR" -j "$CC_COLL_JOBS" --target cc_coll >/dev/null || die "the build failed"
fi
lib=$CC_COLL_BUILD_DIR/libcc_coll.so
[ -e "$lib" ] || die "$lib was not built"
case $lib in *[[:space:]]*) die "the build folder's path must not contain white space: $lib" ;; esac
export PYTHONPATH=$CC_COLL_ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export CC_COLL_LIBRARY=$lib
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

stage=$(mktemp -d /tmp/cc_quality.XXXXXX)
trap 'rm -rf "$stage"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
cores=$(nproc)
warn_load() {
    if awk -v l="${1%% *}" -v c="$cores" 'BEGIN { exit !(l > 0.5 * c) }'; then
        echo "$me: warning: load average ${1%% *} on $cores cores: other work is running and will distort the times" >&2
    fi
}

# 3. The training runs.
cd "$CC_COLL_ROOT" || exit 2
records=()
start_all=$(date +%s)
# train <ranks> <row> [<label> <more options...>]
train() {
    local n=$1 r=$2 label=${3:-$2} over= name
    shift 2
    [ "$#" -gt 0 ] && shift
    [ "$n" -gt "$cores" ] && over=--oversubscribe
    name=$(printf '%s' "$label" | tr -c 'A-Za-z0-9.-' _).$n
    lb=$(load)
    warn_load "$lb"
    echo "== $n ranks, $label (load $lb)"
    # shellcheck disable=SC2086  # args: several words
    if ! mpirun -np "$n" $over --bind-to none "$python" "$trainer" --row "$r" --label "$label" \
        --out "$stage/$name.json" $args "$@" >"$stage/$name.log" 2>&1; then
        cat "$stage/$name.log" >&2
        echo "$me: the run '$label' on $n ranks failed; nothing rewritten" >&2
        exit 1
    fi
    grep '^train_lm.py:' "$stage/$name.log"
    records+=("$stage/$name.json")
}
for n in $ranks_list; do
    for r in $rows; do
        train "$n" "$r"
    done
done
for n in $sweep_ranks; do
    for item in $sweep; do
        r=${item%%:*}
        opts=${item#*:}
        # shellcheck disable=SC2086  # the options: one word each
        train "$n" "$r" "$r ${opts//,/ }" ${opts//,/ }
    done
done
echo "== training runs: $(($(date +%s) - start_all)) s"

# 4. Step times on the emulated cluster: the rows in turn, repeated; the rows
# of CC_Q_CLUSTER_RING_ROWS also with Open MPI's non-blocking allreduce on
# its ring algorithm (the library's hooks post MPI_Iallreduce; gloo's
# allreduce is a ring too).
crecords=()
ring_mca="--mca coll_libnbc_iallreduce_algorithm 1"
# cluster_run <round> <row> [<label> <mpirun options...>]
cluster_run() {
    local i=$1 r=$2 label=${3:-$2} name
    shift 2
    [ "$#" -gt 0 ] && shift
    name=cluster.$(printf '%s' "$label" | tr -c 'A-Za-z0-9.-' _).$i
    echo "== cluster ($cluster_hosts hosts, $cluster_rate), round $i, $label (load $(load))"
    # GLOO_SOCKET_IFNAME: gloo (DDP's broadcasts, the ddp and powersgd
    # rows' allreduce) on the emulated link too.
    # shellcheck disable=SC2086
    if ! scripts/cluster/cc_cluster.sh $copts -- sh -c "\$CC_CLUSTER_MPIRUN $* -x PYTHONPATH -x CC_COLL_LIBRARY \
        -x OPENBLAS_NUM_THREADS -x GLOO_SOCKET_IFNAME=eth0 $python $trainer --row $r --label '$label' \
        --out $stage/$name.json $cargs" >"$stage/$name.log" 2>&1; then
        cat "$stage/$name.log" >&2
        echo "$me: the cluster run '$label' failed; nothing rewritten" >&2
        exit 1
    fi
    grep '^train_lm.py:' "$stage/$name.log"
    crecords+=("$stage/$name.json")
}
if [ "$cluster" = 1 ]; then
    copts="-N $cluster_hosts -r $cluster_rate -t 1800 -p ccq"
    cargs="${args:+$args }--steps $cluster_steps --eval-every $cluster_steps"
    clb=$(load)
    warn_load "$clb"
    for i in $(seq "$repeats"); do
        for r in $cluster_rows; do
            cluster_run "$i" "$r"
        done
        for r in $ring_rows; do
            # shellcheck disable=SC2086
            cluster_run "$i" "$r" "$r, libnbc ring" $ring_mca
        done
    done
    cla=$(load)
fi

# 5. Results and the page. Without training runs (CC_Q_RANKS and CC_Q_SWEEP
# empty) the committed runs.json stays.
mkdir -p "$out_dir"
commit=$(git -C "$CC_COLL_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "${#records[@]}" -gt 0 ]; then
    "$python" "$report" --collect "${records[@]}" --out "$out_dir/runs.json" \
        --meta "commit=$commit" "date=$(date -u +%Y-%m-%d)" "command=scripts/quality.sh" "args=$args" || exit 1
fi
[ -e "$out_dir/runs.json" ] || die "no training runs (CC_Q_RANKS and CC_Q_SWEEP are empty) and no $out_dir/runs.json"
if [ "$cluster" = 1 ]; then
    "$python" "$report" --collect "${crecords[@]}" --out "$out_dir/cluster.json" \
        --meta "commit=$commit" "date=$(date -u +%Y-%m-%d)" "hosts=$cluster_hosts" "rate=$cluster_rate" \
        "steps=$cluster_steps" "repeats=$repeats" "load_before=$clb" "load_after=$cla" "ring_mca=$ring_mca" \
        "command=scripts/cluster/cc_cluster.sh $copts -- sh -c '\$CC_CLUSTER_MPIRUN [$ring_mca] ... train_lm.py --row <row> $cargs'" ||
        exit 1
fi
"$python" "$report" --dir "$out_dir" --doc "$doc" || exit 1

# 6. The frontier (every route, three seeds for the headline runs, a second
# model) and time to target on the emulated cluster: their own scripts.
if [ "${CC_Q_FRONTIER:-1}" = 1 ]; then
    CC_COLL_SKIP_APT=1 CC_Q_DIR=$out_dir "$CC_COLL_ROOT/scripts/quality/frontier.sh" || exit 1
fi
if [ "$cluster" = 1 ] && [ "${CC_Q_TTT:-1}" = 1 ]; then
    CC_COLL_SKIP_APT=1 CC_Q_DIR=$out_dir "$CC_COLL_ROOT/scripts/quality/time_to_target.sh" || exit 1
fi
