#!/bin/sh
# The hierarchical allreduce against the flat one on the emulated cluster
# (docs/performance.md, "Hierarchical allreduce"): one cluster session of
# HOSTS hosts x RANKS ranks per host, in which cc_coll_perf runs with
# CC_COLL_HIERARCHY=off and =on alternately, ROUNDS times, at one size.
# Nodes are the cluster's hosts, as MPI sees them (MPI_COMM_TYPE_SHARED).
#
#   scripts/perf/perf_hierarchy.sh [--help]
#
# Settings (environment):
#   CC_H_HOSTS   hosts (default 2)          CC_H_RANKS   ranks per host (2)
#   CC_H_RATE    link rate (1gbit)          CC_H_SIZE    bytes per rank (64M)
#   CC_H_ROUNDS  off/on rounds (2)          CC_H_ITERS   timed iterations (3)
#   CC_H_OUT     JSON output (docs/perf/hierarchy_<H>x<R>_<rate>.json)
#   CC_H_BUILD   build folder with cc_coll_perf (build)
# Needs root (network namespaces). Prints a markdown table of the medians
# over rounds: time per call of every method, flat and hierarchical, their
# ratio, and MPI_Allreduce; the JSON keeps every round's records.
set -eu
case "${1:-}" in -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
hosts=${CC_H_HOSTS:-2}
ranks=${CC_H_RANKS:-2}
rate=${CC_H_RATE:-1gbit}
size=${CC_H_SIZE:-64M}
rounds=${CC_H_ROUNDS:-2}
iters=${CC_H_ITERS:-3}
build=${CC_H_BUILD:-build}
out=${CC_H_OUT:-docs/perf/hierarchy_${hosts}x${ranks}_${rate}.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# The perf binary writes JSON on stdout; each run's file is named by round
# and setting.
scripts/cluster/cc_cluster.sh -N "$hosts" -n "$ranks" -r "$rate" -t 3000 -p cchier -- sh -c '
  r=1
  while [ $r -le '"$rounds"' ]; do
    for h in off on; do
      $CC_CLUSTER_MPIRUN -x CC_COLL_HIERARCHY=$h '"$build"'/cc_coll_perf -b '"$size"' -e '"$size"' \
        -n '"$iters"' -w 1 -J -q -m mpi,none,topk,sketch,lowrank -D 0.01 -R 4 -r normal -i 0 \
        > '"$tmp"'/run_${r}_$h.json || exit 1
    done
    r=$((r + 1))
  done'
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$tmp" "$out" "$hosts" "$ranks" "$rate" "$size" "$load_before" "$load_after" <<'EOF'
import glob, json, os, statistics, subprocess, sys, time
tmp, out, hosts, ranks, rate, size, lb, la = sys.argv[1:]
runs = []
for path in sorted(glob.glob(os.path.join(tmp, "run_*.json"))):
    r, h = os.path.basename(path)[4:-5].split("_")
    with open(path) as f:
        runs.append({"round": int(r), "hierarchy": h, "perf": json.load(f)})
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit, "hosts": int(hosts),
       "ranks_per_host": int(ranks), "rate": rate, "size": size, "load_before": lb, "load_after": la, "runs": runs}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
def med(h, method):
    return statistics.median(x["time_us"] for run in runs if run["hierarchy"] == h
                             for x in run["perf"]["results"] if x["method"] == method) / 1e3
def wire(h, method):
    return statistics.median(x["wire_bytes"] for run in runs if run["hierarchy"] == h
                             for x in run["perf"]["results"] if x["method"] == method)
mpi = statistics.median([med("off", "mpi"), med("on", "mpi")])
print(f"{hosts} hosts x {ranks} ranks, {rate}, {size} f32 per rank; medians of {len(runs) // 2} rounds "
      f"(off/on alternating); load average {lb} before, {la} after; commit {commit}\n")
print("| method | flat (ms) | hierarchical (ms) | flat / hierarchical | wire flat (B) | wire hierarchical (B) "
      "| speedup over MPI_Allreduce, hierarchical |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for m in ("none", "topk", "sketch", "lowrank"):
    f, h = med("off", m), med("on", m)
    print(f"| {m} | {f:.1f} | {h:.1f} | {f / h:.2f}x | {wire('off', m):.0f} | {wire('on', m):.0f} | {mpi / h:.1f}x |")
print(f"\nMPI_Allreduce: {mpi:.1f} ms")
EOF
