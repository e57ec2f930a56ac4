#!/bin/sh
# perf_all.sh: regenerates the kernel, cluster and overlap figures of
# docs/perf/kernels.md, docs/perf/overlap.md and docs/perf/history.md, and
# the plots in docs/perf/.
# One command, as root, from anywhere in the checkout, on a machine with
# nothing else running:
#
#   scripts/perf/perf_all.sh
#
# Runs, in this order, stopping at the first that fails:
#   1. scripts/perf/perf_selection.sh  top-k selection and compress step
#        -> docs/perf/selection.json, section selection-results
#   2. scripts/perf/perf_sketch.sh     count-sketch encode and decode
#        -> docs/perf/sketch.json, section sketch-results
#   3. scripts/perf/perf_lowrank.sh    PowerSGD compress and decompress
#        -> docs/perf/lowrank.json, section lowrank-results
#   4. scripts/perf/perf_results.sh    speedups on the emulated cluster
#        -> ${CC_PERF_OUT:-docs/perf}/allreduce_*hosts.json, meta.json,
#           speedup_*.png, relerr_*.png; section cluster-results
#   5. scripts/perf/perf_overlap.sh    overlap of the non-blocking allreduce
#        on the emulated cluster (OSU osu_iallreduce's method)
#        -> ${CC_OVL_JSON:-docs/perf/overlap.json}, section overlap-results
# The sections are rewritten in docs/perf/kernels.md (the cluster one in
# ${CC_PERF_DOC:-docs/perf/history.md}, the overlap one in
# ${CC_OVL_DOC:-docs/perf/overlap.md}). Each script gets the caller's
# environment. apt-get runs once: the first script gets the caller's
# CC_COLL_SKIP_APT, the others CC_COLL_SKIP_APT=1; only when
# python3-matplotlib, ip or tc is missing (perf_results.sh alone installs
# them) does perf_results.sh keep the caller's setting too. Checks for
# root and those tools come first, so a run that could not finish does not
# start. Takes about 13 minutes; to redo one part, run its script alone.
#
# Options:
#   -n, --dry-run   print the checks' outcome and the commands, run nothing
#                   (status 2 when a check would stop the run)
#   -h, --help      this text
#
# Settings (environment): those of the five scripts (see their --help),
# among them
#   CC_COLL_BUILD_DIR     build folder                       [build]
#   CC_COLL_SKIP_APT=1    do not run apt-get at all
#   CC_COLL_JOBS          parallel build jobs                [nproc]
#   CC_PERF_*             the cluster run (scripts/perf/perf_results.sh --help)
#   CC_OVL_*              the overlap run (scripts/perf/perf_overlap.sh --help)
# Exit status: 0 when all five succeeded; otherwise the failing script's
# status (perf_results.sh: 1 when a host count failed; perf_overlap.sh: 1
# when a run failed), 2 for a usage or setup error.
set -eu
me=perf_all.sh
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

die() {
    echo "$me: $*" >&2
    exit 2
}

dry=0
case ${1:-} in
    -h | --help)
        sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
        exit 0
        ;;
    -n | --dry-run) dry=1 ;;
    '') ;;
    *) die "unknown argument '$1' (settings come from the environment; see --help)" ;;
esac
[ "$#" -le 1 ] || die "one option at most (see --help)"

for s in perf_selection.sh perf_sketch.sh perf_lowrank.sh perf_results.sh perf_overlap.sh; do
    [ -x "$here/$s" ] || die "$here/$s is missing or not executable"
done

# perf_results.sh and perf_overlap.sh, the last and longest steps, need
# root, and perf_results.sh installs python3-matplotlib, ip and tc itself
# only when apt-get is allowed (perf_overlap.sh then finds ip and tc): check
# before the first three steps spend their minutes. A dry run reports it and
# ends with status 2.
blocked=0
stop() {
    if [ "$dry" = 1 ]; then
        echo "$me: would stop here: $*"
        blocked=1
    else
        die "$*"
    fi
}
caller_skip=${CC_COLL_SKIP_APT:-0}
results_skip=1
missing=""
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || missing="$missing python3-matplotlib"
for tool in ip tc; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
    if [ "$caller_skip" = 1 ]; then
        stop "missing:$missing, and CC_COLL_SKIP_APT=1: apt-get install python3-matplotlib iproute2 first"
    else
        results_skip=$caller_skip
        echo "$me: missing:$missing; perf_results.sh will install it (apt-get runs in steps 1 and 4)"
    fi
fi
if [ "$(id -u)" != 0 ]; then
    stop "must run as root (the emulated cluster of perf_results.sh and perf_overlap.sh creates network namespaces)"
fi

# step NUMBER SCRIPT SKIP_APT: runs scripts/perf/SCRIPT with CC_COLL_SKIP_APT=SKIP_APT.
step() {
    echo "== perf_all.sh: step $1 of 5: CC_COLL_SKIP_APT=$3 scripts/perf/$2"
    if [ "$dry" = 1 ]; then
        return 0
    fi
    start=$(date +%s)
    rc=0
    CC_COLL_SKIP_APT=$3 "$here/$2" || rc=$?
    if [ "$rc" != 0 ]; then
        case $1 in
            1) kept="nothing was regenerated" ;;
            2) kept="step 1's results are in place" ;;
            3) kept="steps 1 and 2's results are in place" ;;
            4) kept="steps 1 to 3's results are in place" ;;
            *) kept="steps 1 to 4's results are in place" ;;
        esac
        echo "$me: FAILED: step $1 of 5, scripts/perf/$2, exited with status $rc after" \
            "$(($(date +%s) - start)) s; stopped here ($kept; see its messages above)" >&2
        exit "$rc"
    fi
    echo "== perf_all.sh: step $1 of 5 done in $(($(date +%s) - start)) s"
}

began=$(date +%s)
step 1 perf_selection.sh "$caller_skip"
step 2 perf_sketch.sh 1
step 3 perf_lowrank.sh 1
step 4 perf_results.sh "$results_skip"
step 5 perf_overlap.sh 1
if [ "$dry" = 1 ]; then
    echo "$me: dry run: nothing was run"
    exit $((2 * blocked))
fi

out=${CC_PERF_OUT:-$root/docs/perf}
doc=${CC_PERF_DOC:-$root/docs/perf/history.md}
rel() {
    case $1 in "$root"/*) echo "${1#"$root"/}" ;; *) echo "$1" ;; esac
}
echo "== perf_all.sh: all five steps done in $(($(date +%s) - began)) s. Results:"
printf '   %-26s %s\n' \
    docs/perf/selection.json "top-k selection: section selection-results of docs/perf/kernels.md" \
    docs/perf/sketch.json "count sketch: section sketch-results of docs/perf/kernels.md" \
    docs/perf/lowrank.json "PowerSGD: section lowrank-results of docs/perf/kernels.md" \
    "$(rel "$out")/" "emulated cluster: allreduce_*hosts.json, meta.json, speedup_*.png, relerr_*.png;" \
    "" "section cluster-results of $(rel "$doc")" \
    "$(rel "${CC_OVL_JSON:-$root/docs/perf/overlap.json}")" \
    "overlap of the non-blocking allreduce: section overlap-results of $(rel "${CC_OVL_DOC:-$root/docs/perf/overlap.md}")"
echo "   Review with: git diff --stat -- docs/"
