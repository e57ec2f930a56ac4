#!/bin/sh
# Method AUTO against NONE and TOPK (its default candidate) from 4 KiB to
# 256 MiB per rank, in every setup a user runs it (docs/perf/auto.md), each
# run three times:
#   shm2, shm4   2 and 4 ranks on this machine (shared memory; 4 ranks
#                oversubscribe a 2-core machine)
#   busy2        2 ranks on this machine beside a busy process (one core
#                taken by a spinning loop)
#   <rate>       the emulated cluster (scripts/cluster/cc_cluster.sh), 2 hosts
#                of one rank, links of 100mbit, 1gbit, 10gbit or 25gbit
# Each run is one cc_coll_perf -m none,topk,auto -I (interleaved: the three
# methods' calls in turns, each method on its own communicator, so that all
# three meet the same moments of the machine) of 4 KiB .. 1 MiB and one of
# 4 MiB .. 256 MiB. On one node (CC_A_BUSY) the small sizes run one call a
# turn, 3000 timed calls after CC_A_WARMUP_SMALL (40) warm-up calls: where
# the ranks leave no core free, a call the machine delays waits
# milliseconds for the scheduler, and 30 calls meet too few such delays for
# their share to be alike in every row; the large sizes run 60 timed calls
# after CC_A_WARMUP_LARGE, in turns of 5 calls of a method in a row (-B 5).
# On the emulated cluster the small sizes run in turns of 15 calls in a row
# (-B 15), 180 timed calls (360 on the setups CC_A_LONG names: some of
# their calls wait for the shaper) after CC_A_WARMUP_SMALL (60): the
# shaper's bucket makes a call's time depend on the bytes of the calls
# before it, and in turns of one call every row met the bucket that the
# other rows' calls, AUTO's choice among them, had left (docs/perf/auto.md);
# in turns of 15 a row's calls follow its own, as a training job's do, and
# 12 rounds are three cycles of the Latin square of the four rows (mpi is
# always measured). The large sizes run 30
# timed calls after CC_A_WARMUP_LARGE in turns of 5 (on 100mbit 6 timed
# calls in turns of 3 up to 64 MiB after at most 6 warm-up calls: NONE
# takes 11 s a call at 64 MiB). Every row
# gives its calls' mean, median, 90th percentile and slowest; the table
# takes the median call, and gives the worst cells by the mean too. The warm-up
# calls cover AUTO's learning in each size class: its first look at the
# runner-up (its 3rd and 4th calls) and the communicator's first
# agreements (after 8 and 16 calls; docs/algorithms.md 8.3), so the timed
# calls are the steady state a training run's later steps see. With CC_A_BUCKET=1 the cluster setups also run the
# GPT-2-small bucket through every method (scripts/perf/perf_bucket.py, "A
# GPT-2-small bucket"). Then it prints the markdown table
# (scripts/perf/perf_tables.py auto).
#
#   scripts/perf/perf_auto.sh [--help]
#
# Settings (environment):
#   CC_A_SETUPS  setups (default "shm2 shm4 busy2 100mbit 1gbit 10gbit 25gbit")
#   CC_A_RUNS    runs per setup (default 3)
#   CC_A_OUT     folder of the JSON files (docs/perf): auto_<setup>.json,
#                bucket_<rate>_2hosts.json
#   CC_A_BUILD   build folder with cc_coll_perf and the Python package (build)
#   CC_A_BUCKET  0 (default) or 1: the bucket too, on the cluster setups
#   CC_A_INTERLEAVE 1 (default) or 0: -I (the turns above; alternating
#                single 256 MiB calls of different methods made every one of
#                them up to twice as slow, docs/perf/auto.md), or each
#                method's calls in a row (5 timed, 3 on 100mbit)
#   CC_A_LONG    cluster setups with twice the small timed calls (default
#                "100mbit")
#   CC_A_BUSY    the one-node setups (default "shm2 shm4 busy2")
#   CC_A_WARMUP_SMALL, CC_A_WARMUP_LARGE
#                warm-up calls per size and method (default 40 on one node,
#                60 on the cluster, and 12)
# The cluster setups need root (network namespaces); the bucket needs mpi4py
# and numpy for /usr/bin/python3 (Debian: python3-mpi4py python3-numpy).
# Takes about an hour with the defaults.
set -eu
case "${1:-}" in -h | --help) sed -n '2,/^# Takes about/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
setups=${CC_A_SETUPS:-shm2 shm4 busy2 100mbit 1gbit 10gbit 25gbit}
runs=${CC_A_RUNS:-3}
out=${CC_A_OUT:-docs/perf}
build=${CC_A_BUILD:-build}
bucket=${CC_A_BUCKET:-0}
wlarge=${CC_A_WARMUP_LARGE:-12}
case $bucket in 0 | 1) ;; *) echo "perf_auto.sh: CC_A_BUCKET must be 0 or 1" >&2; exit 2 ;; esac
long_setups=${CC_A_LONG-100mbit}
busy_setups=${CC_A_BUSY-shm2 shm4 busy2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
busy=
trap 'rm -rf "$tmp"; [ -z "$busy" ] || kill "$busy" 2>/dev/null || true' EXIT
# A signal ends the script through its EXIT trap (sh runs that trap on exit
# only), so a stopped sweep leaves no busy process behind.
trap 'exit 143' TERM
trap 'exit 130' INT HUP
lib=$(cd "$build" && pwd)/libcc_coll.so
interleave=${CC_A_INTERLEAVE:-1}
case $interleave in 0 | 1) ;; *) echo "perf_auto.sh: CC_A_INTERLEAVE must be 0 or 1" >&2; exit 2 ;; esac
perf="$build/cc_coll_perf -i 0 -r normal -D 0.01 -J -q -m none,topk,auto"
for setup in $setups; do
  case " $busy_setups " in
    *" $setup "*)
      # One node: no bucket, and scheduler waits that need many calls.
      turn=
      small="-b 4K -e 1M -f 4 -n 3000 -w ${CC_A_WARMUP_SMALL:-40}"
      large="-I -B 5 -b 4M -e 256M -f 4 -n 60 -w $wlarge"
      ;;
    *)
      # The cluster: turns of 15 calls in a row, three cycles of the square.
      nsmall=180
      case " $long_setups " in *" $setup "*) nsmall=360 ;; esac
      turn="-B 15"
      small="-b 4K -e 1M -f 4 -n $nsmall -w ${CC_A_WARMUP_SMALL:-60}"
      large="-I -B 5 -b 4M -e 256M -f 4 -n 30 -w $wlarge"
      [ "$setup" = 100mbit ] && large="-I -B 3 -b 4M -e 64M -f 4 -n 6 -w $((wlarge < 6 ? wlarge : 6))"
      ;;
  esac
  if [ "$interleave" = 1 ]; then
    small="-I $turn $small"
  else
    large="-b 4M -e 256M -f 4 -n 5 -w $wlarge"
    [ "$setup" = 100mbit ] && large="-b 4M -e 64M -f 4 -n 3 -w $((wlarge < 6 ? wlarge : 6))"
  fi
  run=1
  while [ "$run" -le "$runs" ]; do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    case $setup in
      shm2 | shm4 | busy2)
        np=${setup#shm}
        [ "$setup" = busy2 ] && np=2
        if [ "$setup" = busy2 ]; then
          /usr/bin/python3 -c 'while True: pass' &
          busy=$!
        fi
        mpirun --oversubscribe -np "$np" $perf $small > "$tmp/small.json"
        mpirun --oversubscribe -np "$np" $perf $large > "$tmp/large.json"
        if [ -n "$busy" ]; then kill "$busy"; wait "$busy" 2>/dev/null || true; busy=; fi
        ;;
      *)
        extra=:
        if [ "$bucket" = 1 ] && [ "$run" = 1 ]; then
          extra='$CC_CLUSTER_MPIRUN -x PYTHONPATH='"$PWD"'/python -x CC_COLL_LIBRARY='"$lib"' /usr/bin/python3 scripts/perf/perf_bucket.py '"$tmp"'/bucket.json --iters 10'
        fi
        scripts/cluster/cc_cluster.sh -N 2 -r "$setup" -t 3000 -p ccauto -- sh -c '
          $CC_CLUSTER_MPIRUN '"$perf $small"' > '"$tmp"'/small.json &&
          $CC_CLUSTER_MPIRUN '"$perf $large"' > '"$tmp"'/large.json && '"$extra"
        ;;
    esac
    after=$(cut -d' ' -f1-3 /proc/loadavg)
    python3 - "$tmp" "$out" "$setup" "$run" "$load" "$after" <<'EOF'
import json, os, subprocess, sys, time
tmp, out, setup, run, lb, la = sys.argv[1:]
path = os.path.join(out, "auto_%s.json" % setup)
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
d = json.load(open(path)) if run != "1" and os.path.exists(path) else {"setup": setup, "runs": []}
d["runs"].append({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
                  "load_before": lb, "load_after": la,
                  "small": json.load(open(os.path.join(tmp, "small.json"))),
                  "large": json.load(open(os.path.join(tmp, "large.json")))})
json.dump(d, open(path, "w"), indent=1)
bucket = os.path.join(tmp, "bucket.json")
if os.path.exists(bucket):
    meta = {"date": d["runs"][-1]["date"], "commit": commit, "rate": setup, "hosts": 2, "load_before": lb,
            "load_after": la}
    json.dump(dict(meta, run=json.load(open(bucket))), open(os.path.join(out, "bucket_%s_2hosts.json" % setup), "w"),
              indent=1)
    os.remove(bucket)
EOF
    run=$((run + 1))
  done
done
python3 scripts/perf/perf_tables.py auto $(for s in $setups; do echo "$out/auto_$s.json"; done)
