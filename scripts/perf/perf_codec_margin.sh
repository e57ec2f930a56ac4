#!/bin/sh
# QUANT and ONEBIT against MPI_Allreduce on the emulated cluster (the
# quantisation targets at 1 Gbit/s: QUANT 4-bit 6x, ONEBIT 15x faster),
# 64 MiB of f32 per rank, one rank per host. MPI_Allreduce's own time on the
# shaped link varies from call to call (600 to 1000 ms at 1 Gbit/s), so each
# of ROUNDS rounds runs one cluster session of three cc_coll_perf runs (the
# call whole, in 1 MiB parts and in 4 MiB parts, CC_COLL_PIPELINE_BYTES),
# each timing mpi, quant and onebit in the same run; the table gives every
# round's speedup over that run's MPI_Allreduce and their median.
#
#   scripts/perf/perf_codec_margin.sh [--help]
#
# Settings (environment):
#   CC_M_RATE    link rate (1gbit)
#   CC_M_HOSTS   hosts (2)
#   CC_M_ROUNDS  rounds (3)
#   CC_M_ITERS   timed calls per method and run (5; one warm-up call before them)
#   CC_M_OUT     the JSON of every run (docs/perf/codec_margin_<rate>_<N>hosts.json)
#   CC_M_BUILD   build folder with cc_coll_perf (build)
# Needs root (network namespaces). About 1 minute a round at 1 Gbit/s.
set -eu
case "${1:-}" in -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
rate=${CC_M_RATE:-1gbit}
hosts=${CC_M_HOSTS:-2}
rounds=${CC_M_ROUNDS:-3}
iters=${CC_M_ITERS:-5}
out=${CC_M_OUT:-docs/perf/codec_margin_${rate}_${hosts}hosts.json}
build=${CC_M_BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
perf="$build/cc_coll_perf -b 64M -e 64M -n $iters -w 1 -J -q -r normal -i 0 -m mpi,quant,onebit"
r=1
while [ "$r" -le "$rounds" ]; do
  scripts/cluster/cc_cluster.sh -N "$hosts" -r "$rate" -t 3000 -p ccmargin -- sh -c '
    $CC_CLUSTER_MPIRUN -x CC_COLL_PIPELINE_BYTES=0 '"$perf"' > '"$tmp"'/'"$r"'_whole.json &&
    $CC_CLUSTER_MPIRUN -x CC_COLL_PIPELINE_BYTES=1M '"$perf"' > '"$tmp"'/'"$r"'_1M.json &&
    $CC_CLUSTER_MPIRUN -x CC_COLL_PIPELINE_BYTES=4M '"$perf"' > '"$tmp"'/'"$r"'_4M.json'
  r=$((r + 1))
done
python3 - "$tmp" "$out" "$rate" "$hosts" "$rounds" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, os, statistics, subprocess, sys, time
tmp, path, rate, hosts, rounds, lb, la = sys.argv[1:]
rounds = int(rounds)
parts = ["whole", "1M", "4M"]
runs = {f"{r}_{p}": json.load(open(os.path.join(tmp, f"{r}_{p}.json"))) for r in range(1, rounds + 1) for p in parts}
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit, "rate": rate,
           "hosts": int(hosts), "load_before": lb, "load_after": la, "runs": runs}, open(path, "w"), indent=1)
def row(run, method):
    return next(x for x in run["results"] if x["method"] == method)
print(f"{rate}, {hosts} hosts, commit {commit}, {rounds} rounds; load average {lb} before, {la} after\n")
print("| method | parts | MPI_Allreduce (ms), per round | time (ms), per round | speedup, per round | median speedup |")
print("| --- | --- | --- | --- | --- | ---: |")
for method in ("quant", "onebit"):
    for p in parts:
        rs = [runs[f"{r}_{p}"] for r in range(1, rounds + 1)]
        mpi = [row(x, "mpi")["time_us"] / 1e3 for x in rs]
        t = [row(x, method)["time_us"] / 1e3 for x in rs]
        s = [m / v for m, v in zip(mpi, t)]
        label = {"whole": "whole", "1M": "1 MiB", "4M": "4 MiB"}[p]
        print(f"| {method} | {label} | {', '.join(f'{v:.1f}' for v in mpi)} | {', '.join(f'{v:.1f}' for v in t)} | "
              f"{', '.join(f'{v:.2f}x' for v in s)} | {statistics.median(s):.2f}x |")
PY
