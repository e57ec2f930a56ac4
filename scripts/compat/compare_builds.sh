#!/bin/bash
# compare_builds.sh: are two builds of libcc_coll bit-identical in their
# results? Builds scripts/compat/results_digest.c against each build's own
# cc_coll.h and library, runs it under mpirun on 1 to 4 ranks for every
# method of 0.6 (none, topk, sketch, lowrank, auto: AUTO three times, a slow
# given link with TOPK and with LOWRANK as its lossy method, so that it
# compresses, and a fast one, so that it runs NONE) and for the algorithm
# settings of 0.6 (TOPK's split algorithm and its pipelined allgather; the
# hierarchical allreduce with nodes of 2 ranks for TOPK, SKETCH and LOWRANK),
# and compares the digests of every call's results and residual, line by
# line.
#
#   scripts/compat/compare_builds.sh BEFORE_BUILD AFTER_BUILD
#
# BEFORE_BUILD and AFTER_BUILD are CMake build folders in which the target
# cc_coll (libcc_coll.so) was built; the header is taken from the source
# folder of each (CMakeCache.txt). The environment's CC_COLL_* settings are
# cleared for the runs.
#
# Settings (environment):
#   CC_COMPAT_RANKS    rank counts                    [1 2 3 4]
#   CC_COMPAT_RUNS     runs (LABEL=METHOD[:VAR=VALUE,...])   [all, see below]
#   CC_COMPAT_OUT      folder for the digests and logs [a temporary folder, removed]
#   CC_COMPAT_TIMEOUT  seconds per mpirun             [900]
# Exit status: 0 when every digest matches; 1 on a difference or a failed
# run; 2 for a usage or setup error. The counters of cc_coll_comm_get_stats
# (lines starting with '#') are compared too, and a difference there is
# reported but does not fail the comparison.
set -u -o pipefail
me=$(basename "$0")
die() { echo "$me: $*" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)

[ "$#" = 2 ] || die "usage: $me BEFORE_BUILD AFTER_BUILD"
ranks=${CC_COMPAT_RANKS:-1 2 3 4}
tmo=${CC_COMPAT_TIMEOUT:-900}
runs=${CC_COMPAT_RUNS:-"none=none topk=topk sketch=sketch lowrank=lowrank auto-slow=auto:CC_COLL_LINK=0.01,1000 auto-lowrank-slow=auto:CC_COLL_LINK=0.01,1000,CC_COLL_AUTO_METHOD=lowrank auto-fast=auto:CC_COLL_LINK=100000,1 topk-split=topk:CC_COLL_TOPK_ALGORITHM=split topk-pipeline=topk:CC_COLL_PIPELINE_BYTES=64K hier-topk=topk:CC_COLL_HIERARCHY=on,CC_COLL_NODES=2 hier-sketch=sketch:CC_COLL_HIERARCHY=on,CC_COLL_NODES=2 hier-lowrank=lowrank:CC_COLL_HIERARCHY=on,CC_COLL_NODES=2"}
command -v mpicc >/dev/null || die "mpicc is missing"
command -v mpirun >/dev/null || die "mpirun is missing"

if [ -n "${CC_COMPAT_OUT:-}" ]; then
    out=$CC_COMPAT_OUT
    mkdir -p "$out" || die "cannot create $out"
else
    out=$(mktemp -d /tmp/cc_compat.XXXXXX) || die "cannot create a temporary folder"
    trap 'rm -rf "$out"' EXIT
fi

# The source folder of a build (its cc_coll.h) and the folder of its library.
source_of() { sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt"; }
prepare() { # label build
    local label=$1 build src lib
    build=$(cd "$2" 2>/dev/null && pwd) || die "$label: no folder $2"
    [ -f "$build/CMakeCache.txt" ] || die "$label: $build is not a CMake build folder"
    src=$(source_of "$build")
    [ -f "$src/include/cc_coll.h" ] || die "$label: no include/cc_coll.h under $src"
    lib=$(find "$build" -maxdepth 2 -name 'libcc_coll.so' -print -quit)
    [ -n "$lib" ] || die "$label: no libcc_coll.so in $build (make cc_coll)"
    lib=$(dirname "$lib")
    mpicc -std=c11 -O2 -Wall -Wextra -Werror -I"$src/include" "$here/results_digest.c" \
        -L"$lib" -lcc_coll -Wl,-rpath,"$lib" -o "$out/results_digest.$label" ||
        die "$label: results_digest.c does not build against $src/include/cc_coll.h"
    echo "== $label: $(git -C "$src" log -1 --format='%h %s' 2>/dev/null | cut -c1-70) ($lib)"
}
prepare before "$1"
prepare after "$2"

failed=0
mpi=(mpirun --oversubscribe --bind-to none)
for label in before after; do
    : >"$out/$label.txt"
    for np in $ranks; do
        for run in $runs; do
            name=${run%%=*} spec=${run#*=}
            method=${spec%%:*} vars=()
            [ "$spec" != "$method" ] && IFS=, read -r -a vars <<<"${spec#*:}"
            # CC_COLL_LINK=a,b splits on its comma: join the pieces back.
            env_args=()
            for v in "${vars[@]}"; do
                if [[ $v == *=* ]]; then env_args+=("$v"); else env_args[-1]+=",$v"; fi
            done
            log=$out/$label.np$np.$name.log
            start=$(date +%s)
            rc=0
            # shellcheck disable=SC2046  # the names of the CC_COLL_* settings to clear
            timeout -k 10 "$tmo" env $(env | sed -n 's/^\(CC_COLL_[A-Z0-9_]*\)=.*/-u \1/p') \
                OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 "${env_args[@]}" \
                "${mpi[@]}" -np "$np" "$out/results_digest.$label" "np$np.$name" "$method" \
                >>"$out/$label.txt" 2>"$log" || rc=$?
            echo "   $label np=$np $name: exit $rc, $(($(date +%s) - start)) s"
            if [ "$rc" != 0 ]; then
                failed=1
                tail -n 5 "$log" >&2
            fi
        done
    done
done

grep -v '^#' "$out/before.txt" >"$out/before.digests"
grep -v '^#' "$out/after.txt" >"$out/after.digests"
lines=$(wc -l <"$out/before.digests")
if cmp -s "$out/before.digests" "$out/after.digests"; then
    echo "== all $lines lines match: $((2 * lines)) digests (results and residuals), every (run, call, step, rank)"
else
    failed=1
    diff "$out/before.digests" "$out/after.digests" >"$out/digests.diff"
    echo "== DIFFERENT: $(grep -c '^<' "$out/digests.diff") of $lines lines differ (before < > after); first ones:"
    head -n 20 "$out/digests.diff"
    echo "   per run and call kind (before's differing lines):"
    grep '^<' "$out/digests.diff" | awk '{ split($3, c, "."); print "   ", $2, c[1] }' | sort | uniq -c
fi
if ! diff <(grep '^#' "$out/before.txt") <(grep '^#' "$out/after.txt") >"$out/stats.diff"; then
    echo "== note: the counters of cc_coll_comm_get_stats differ (not a result difference):"
    head -n 20 "$out/stats.diff"
fi
[ -n "${CC_COMPAT_OUT:-}" ] && echo "== digests and logs in $out"
exit "$failed"
