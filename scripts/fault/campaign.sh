#!/bin/sh
# The long fault-injection campaign: runs mpi_fault_driver (mpi_tests/fault/)
# with 2, 3 and 4 ranks, seed after seed, in each build folder given, until
# the runs have corrupted at least CC_FAULT_CALLS MPI calls in all (the
# corrupting rank and the progress mode change from run to run), then
# prints a table by build and rank count: seeds, runs, library calls,
# corrupted MPI calls, calls that returned an error, calls whose statuses
# differed between ranks, crashes, hangs and sanitizer reports. Exit status
# 1 when any run crashed, hung, differed or had a sanitizer report, else 0.
# The logs of those runs are kept (their folder is printed) and their first
# findings are printed under the table.
#
#   scripts/fault/campaign.sh [BUILD_DIR...]
#
# BUILD_DIR: build folders holding mpi_tests/fault/mpi_fault_driver
# (cmake --build <dir> --target mpi_fault_driver); default: build, and
# build-sanitize where it has the driver (an ASan + UBSan build: its runs
# make a quarter of the calls each). Settings (environment):
#   CC_FAULT_CALLS        corrupted MPI calls to reach, over every run
#                         (default 100000)
#   CC_FAULT_RANKS        rank counts (default "2 3 4")
#   CC_FAULT_SEED         the first seed; each run takes the next (default 1)
#   CC_FAULT_RUN_CALLS    library calls per run (default 3000)
#   CC_FAULT_PROBABILITY  chance that an eligible MPI call is corrupted
#                         (default 0.5)
#   CC_FAULT_MAX_COUNT    largest tensor in elements (default 20000)
#   CC_FAULT_PROGRESS     caller, thread, or both (default: runs alternate)
#   CC_FAULT_P2P          0: no point-to-point calls (default 1: with them)
#   CC_FAULT_TIMEOUT      seconds before a run counts as hung (default 600)
#   CC_FAULT_CALL_TIMEOUT seconds before one call counts as hung: the driver
#                         names it and stops (default 60)
#   CC_FAULT_MAX_MINUTES  start no run after this many minutes (default 90):
#                         a run that hangs or crashes early counts only the
#                         corrupted calls of its last progress line
#   CC_FAULT_LOGS         folder for the failing runs' logs (default: a new
#                         folder under ${TMPDIR:-/tmp})
#   CC_FAULT_ARGS         more mpi_fault_driver options, e.g. "--kinds topk"
#
# Time, measured on two cores with a Release build of a library that
# contains every fault: about 700 corrupted MPI calls a second (a run of
# 3000 calls takes 3 to 5 s with 2 to 4 ranks), so the default 100000 takes
# about 3 minutes. The runs of a sanitizer build make a quarter of the calls
# and run several times slower; the rounds alternate between the builds, so
# with both default builds expect 10 to 20 minutes (estimated, assuming
# ASan + UBSan are 5 to 10 times slower). A library that hangs costs
# CC_FAULT_CALL_TIMEOUT per run and counts few corrupted calls, so such a
# campaign ends at CC_FAULT_MAX_MINUTES. A short check:
#   CC_FAULT_CALLS=2000 scripts/fault/campaign.sh
set -u

case ${1:-} in
    -h | --help)
        sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
        exit 0
        ;;
esac

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$ROOT/include/cc_coll.h" ] || { echo "campaign.sh: no include/cc_coll.h in $ROOT" >&2; exit 2; }

TARGET=${CC_FAULT_CALLS:-100000}
RANKS=${CC_FAULT_RANKS:-2 3 4}
SEED=${CC_FAULT_SEED:-1}
RUN_CALLS=${CC_FAULT_RUN_CALLS:-3000}
PROBABILITY=${CC_FAULT_PROBABILITY:-0.5}
MAX_COUNT=${CC_FAULT_MAX_COUNT:-20000}
PROGRESS=${CC_FAULT_PROGRESS:-both}
TIMEOUT=${CC_FAULT_TIMEOUT:-600}
CALL_TIMEOUT=${CC_FAULT_CALL_TIMEOUT:-60}
MAX_MINUTES=${CC_FAULT_MAX_MINUTES:-90}
EXTRA=${CC_FAULT_ARGS:-}
P2P=""
[ "${CC_FAULT_P2P:-1}" = 1 ] && P2P=--p2p
case $PROGRESS in caller | thread | both) ;; *) echo "campaign.sh: CC_FAULT_PROGRESS must be caller, thread or both" >&2; exit 2 ;; esac

if [ $# -gt 0 ]; then
    BUILDS="$*"
else
    BUILDS="$ROOT/build"
    [ -x "$ROOT/build-sanitize/mpi_tests/fault/mpi_fault_driver" ] && BUILDS="$BUILDS $ROOT/build-sanitize"
fi
for b in $BUILDS; do
    [ -x "$b/mpi_tests/fault/mpi_fault_driver" ] || {
        echo "campaign.sh: $b/mpi_tests/fault/mpi_fault_driver is missing: cmake --build $b --target mpi_fault_driver" >&2
        exit 2
    }
done

LOGS=${CC_FAULT_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/cc_fault.XXXXXX")}
mkdir -p "$LOGS" || exit 2
STATE=$(mktemp "${TMPDIR:-/tmp}/cc_fault_state.XXXXXX")
RUNLOG=$(mktemp "${TMPDIR:-/tmp}/cc_fault_run.XXXXXX")
trap 'rm -f "$STATE" "$RUNLOG"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# The sanitizer runtimes' options of the test suite (cmake/cc_coll_sanitizers.cmake),
# unless set already; they matter only to sanitizer builds.
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:fast_unwind_on_malloc=0}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$ROOT/cmake/sanitizers/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# The launcher a build was configured with (its CMakeCache.txt), else mpirun.
launcher() {
    l=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$1/CMakeCache.txt" 2>/dev/null)
    echo "${l:-mpirun}"
}
sanitized() {
    grep -Eq '^CC_COLL_ENABLE_(ASAN|UBSAN):BOOL=(ON|1|TRUE)' "$1/CMakeCache.txt" 2>/dev/null
}

for b in $BUILDS; do
    if ! "$(launcher "$b")" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
        echo "campaign.sh: $b: the campaign needs Open MPI's mpirun (interposing MPI's collectives hangs a rank under MPICH)" >&2
        exit 2
    fi
done

# One line of $STATE per build and rank count:
#   build ranks first_seed last_seed runs calls corrupted errors differs crashes hangs sanitizer
for b in $BUILDS; do
    for n in $RANKS; do
        echo "$b $n - - 0 0 0 0 0 0 0 0" >>"$STATE"
    done
done

# get KEY-from-summary: "calls=123" -> 123 (0 when absent).
field() {
    v=$(sed -n "s/^fault_driver: ranks=.* $1=\([0-9]*\).*/\1/p" "$RUNLOG" | head -n 1)
    echo "${v:-0}"
}

start=$(date +%s)
total=0
run=0
failed=0
findings=""
stopped=""
while [ "$total" -lt "$TARGET" ]; do
    for b in $BUILDS; do
        calls=$RUN_CALLS
        sanitized "$b" && calls=$(((RUN_CALLS + 3) / 4))
        for n in $RANKS; do
            [ "$total" -lt "$TARGET" ] || break
            if [ $(($(date +%s) - start)) -ge $((MAX_MINUTES * 60)) ]; then
                stopped="stopped after $MAX_MINUTES minutes (CC_FAULT_MAX_MINUTES) with $total corrupted calls"
                break 3
            fi
            seed=$((SEED + run))
            # This cell's runs so far: the progress mode alternates, and
            # the corrupting rank moves on every second run (first rank 1).
            cell=$(awk -v b="$b" -v n="$n" '$1 == b && $2 == n { print $5 }' "$STATE")
            corrupt=$(((cell / 2 + 1) % n))
            mode=$PROGRESS
            [ "$mode" = both ] && { [ $((cell % 2)) = 0 ] && mode=caller || mode=thread; }
            # shellcheck disable=SC2086
            timeout -k 10 "$TIMEOUT" "$(launcher "$b")" -np "$n" --oversubscribe \
                "$b/mpi_tests/fault/mpi_fault_driver" --calls "$calls" --seed "$seed" \
                --probability "$PROBABILITY" --max-count "$MAX_COUNT" --progress "$mode" \
                --corrupt-rank "$corrupt" --call-timeout "$CALL_TIMEOUT" $P2P $EXTRA \
                >"$RUNLOG" 2>&1
            rc=$?
            run=$((run + 1))
            summary=0
            grep -q '^fault_driver: ranks=' "$RUNLOG" && summary=1
            c=$(field calls)
            k=$(field corrupted)
            e=$(field error_calls)
            d=$(field status_differs)
            if [ $summary = 0 ]; then # ended early: its last progress line
                c=$(sed -n 's/^fault_driver: progress calls=\([0-9]*\) .*/\1/p' "$RUNLOG" | tail -n 1)
                k=$(sed -n 's/^fault_driver: progress .* corrupted=\([0-9]*\) .*/\1/p' "$RUNLOG" | tail -n 1)
                d=$(grep -c 'STATUSES DIFFER' "$RUNLOG")
                c=${c:-0} k=${k:-0}
            fi
            crash=0
            hang=0
            san=0
            grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:' "$RUNLOG" && san=1
            if [ $rc = 124 ] || [ $rc = 137 ] || grep -q 'fault_driver: HANG' "$RUNLOG"; then
                hang=1
            elif [ $summary = 0 ] || { [ $rc != 0 ] && [ "$d" = 0 ] && [ $san = 0 ]; }; then
                crash=1
            fi
            total=$((total + k))
            bad=$((crash + hang + san))
            [ "$d" != 0 ] && bad=$((bad + 1))
            tag=$(basename "$b")-np$n-seed$seed-$mode-rank$corrupt
            line="$(date +%H:%M:%S) $tag: exit $rc, calls $c, corrupted $k, errors $e, differ $d"
            [ $crash = 1 ] && line="$line, CRASH"
            [ $hang = 1 ] && line="$line, HANG"
            [ $san = 1 ] && line="$line, SANITIZER"
            echo "$line (total corrupted $total of $TARGET)"
            if [ $bad != 0 ]; then
                failed=$((failed + 1))
                cp "$RUNLOG" "$LOGS/$tag.log"
                first=$(grep -m 3 -E 'STATUSES DIFFER|fault_driver: (HANG|CRASH)|ERROR: AddressSanitizer|runtime error:|exited on signal' "$RUNLOG" | cut -c1-400)
                [ -n "$first" ] || first=$(tail -n 5 "$RUNLOG" | cut -c1-400)
                findings="$findings
== $tag (exit $rc): $LOGS/$tag.log
$first"
            fi
            awk -v b="$b" -v n="$n" -v s="$seed" -v c="$c" -v k="$k" -v e="$e" -v d="$d" \
                -v cr="$crash" -v h="$hang" -v sa="$san" '
                $1 == b && $2 == n { if ($3 == "-") $3 = s; $4 = s; $5++; $6 += c; $7 += k; $8 += e;
                                     $9 += d; $10 += cr; $11 += h; $12 += sa }
                { print }' "$STATE" >"$STATE.new" && mv "$STATE.new" "$STATE"
        done
    done
done

echo
printf '%-24s %5s %13s %5s %8s %10s %8s %8s %7s %5s %9s\n' build ranks seeds runs calls corrupted errors differs crashes hangs sanitizer
while read -r b n s0 s1 runs c k e d cr h sa; do
    [ "$runs" = 0 ] && continue
    printf '%-24s %5s %13s %5s %8s %10s %8s %8s %7s %5s %9s\n' "$(basename "$b")" "$n" "$s0..$s1" "$runs" "$c" "$k" "$e" "$d" "$cr" "$h" "$sa"
done <"$STATE"
elapsed=$(($(date +%s) - start))
echo "== $run runs, $total corrupted MPI calls, $failed failing runs, $((elapsed / 60)) min $((elapsed % 60)) s"
[ -n "$stopped" ] && echo "== $stopped"
if [ $failed != 0 ]; then
    echo "== findings (logs in $LOGS):$findings"
    exit 1
fi
rmdir "$LOGS" 2>/dev/null
exit 0
