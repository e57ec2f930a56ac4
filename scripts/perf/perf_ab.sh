#!/bin/sh
# A/B of one setting on the emulated cluster (docs/performance.md,
# "Hierarchical allreduce" and "TOPK's split algorithm"): one cluster session
# of HOSTS hosts x RANKS ranks per host, in which cc_coll_perf runs with the
# setting at value A and at value B alternately, ROUNDS times, at one size.
# Nodes are the cluster's hosts, as MPI sees them (MPI_COMM_TYPE_SHARED).
#
#   scripts/perf/perf_ab.sh [--help]
#
# Settings (environment):
#   CC_AB_VAR     the variable (default CC_COLL_HIERARCHY)
#   CC_AB_A, CC_AB_B  its two values (default off, on)
#   CC_AB_HOSTS   hosts (default 2)          CC_AB_RANKS   ranks per host (2)
#   CC_AB_RATE    link rate (1gbit)          CC_AB_SIZE    bytes per rank (64M)
#   CC_AB_ROUNDS  A/B rounds (3)             CC_AB_ITERS   timed iterations (3)
#   CC_AB_METHODS cc_coll_perf -m list (mpi,none,topk,sketch,lowrank)
#   CC_AB_OUT     JSON output (docs/perf/ab_<var>_<H>x<R>_<rate>.json)
#   CC_AB_BUILD   build folder with cc_coll_perf (build)
# Needs root (network namespaces). Prints a markdown table of the medians
# over rounds: time per call of every method at A and at B, their ratio,
# wire bytes, and the speedup over MPI_Allreduce at B; the JSON keeps every
# round's records. TOPK and SKETCH at density 0.01, LOWRANK at rank 4 (the
# buffer viewed near-square), Gaussian data, in place.
set -eu
case "${1:-}" in -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
var=${CC_AB_VAR:-CC_COLL_HIERARCHY}
va=${CC_AB_A:-off}
vb=${CC_AB_B:-on}
hosts=${CC_AB_HOSTS:-2}
ranks=${CC_AB_RANKS:-2}
rate=${CC_AB_RATE:-1gbit}
size=${CC_AB_SIZE:-64M}
rounds=${CC_AB_ROUNDS:-3}
iters=${CC_AB_ITERS:-3}
methods=${CC_AB_METHODS:-mpi,none,topk,sketch,lowrank}
build=${CC_AB_BUILD:-build}
lvar=$(echo "$var" | sed 's/^CC_COLL_//' | tr 'A-Z' 'a-z')
out=${CC_AB_OUT:-docs/perf/ab_${lvar}_${hosts}x${ranks}_${rate}.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# The perf binary writes JSON on stdout; each run's file is named by round
# and setting.
scripts/cluster/cc_cluster.sh -N "$hosts" -n "$ranks" -r "$rate" -t 3000 -p ccab -- sh -c '
  r=1
  while [ $r -le '"$rounds"' ]; do
    for h in '"$va $vb"'; do
      $CC_CLUSTER_MPIRUN -x '"$var"'=$h '"$build"'/cc_coll_perf -b '"$size"' -e '"$size"' \
        -n '"$iters"' -w 1 -J -q -m '"$methods"' -D 0.01 -R 4 -r normal -i 0 \
        > '"$tmp"'/run_${r}_$h.json || exit 1
    done
    r=$((r + 1))
  done'
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$tmp" "$out" "$hosts" "$ranks" "$rate" "$size" "$load_before" "$load_after" "$var" "$va" "$vb" <<'EOF'
import glob, json, os, statistics, subprocess, sys, time
tmp, out, hosts, ranks, rate, size, lb, la, var, va, vb = sys.argv[1:]
runs = []
for path in sorted(glob.glob(os.path.join(tmp, "run_*.json"))):
    r, h = os.path.basename(path)[4:-5].split("_", 1)
    with open(path) as f:
        runs.append({"round": int(r), "value": h, "perf": json.load(f)})
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit, "setting": var,
       "values": [va, vb], "hosts": int(hosts),
       "ranks_per_host": int(ranks), "rate": rate, "size": size, "load_before": lb, "load_after": la, "runs": runs}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
def med(h, method):
    return statistics.median(x["time_us"] for run in runs if run["value"] == h
                             for x in run["perf"]["results"] if x["method"] == method) / 1e3
def wire(h, method):
    return statistics.median(x["wire_bytes"] for run in runs if run["value"] == h
                             for x in run["perf"]["results"] if x["method"] == method)
mpi = statistics.median([med(va, "mpi"), med(vb, "mpi")])
methods = [x["method"] for x in runs[0]["perf"]["results"] if x["method"] != "mpi"]
print(f"{hosts} hosts x {ranks} ranks, {rate}, {size} f32 per rank; {var} = {va} / {vb}; medians of "
      f"{len(runs) // 2} rounds ({va}/{vb} alternating); load average {lb} before, {la} after; commit {commit}\n")
print(f"| method | {va} (ms) | {vb} (ms) | {va} / {vb} | wire {va} (B) | wire {vb} (B) "
      f"| speedup over MPI_Allreduce, {va} | speedup, {vb} |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for m in methods:
    a, b = med(va, m), med(vb, m)
    print(f"| {m} | {a:.1f} | {b:.1f} | {a / b:.2f}x | {wire(va, m):.0f} | {wire(vb, m):.0f} | {mpi / a:.1f}x "
          f"| {mpi / b:.1f}x |")
print(f"\nMPI_Allreduce: {mpi:.1f} ms")
EOF
