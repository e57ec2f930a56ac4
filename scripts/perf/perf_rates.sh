#!/bin/sh
# Every method at 64 MiB on the emulated cluster at several link rates and
# host counts (docs/performance.md, "Every method at 100 Mbit/s, 1 Gbit/s
# and 10 Gbit/s"): for each rate and host count, one cluster session that
# runs cc_coll_perf with every method (LOWRANK at rank 1, then 4, then 16, on
# the buffer viewed near-square: 4096 x 4096; TOPK also at density 0.05 with
# its full values and with 4-bit values and coded indices,
# CC_COLL_TOPK_VALUE_BITS=4; QUANT and ONEBIT also in 1 MiB parts,
# CC_COLL_PIPELINE_BYTES=1M), then a markdown table with the
# wire-time limit of each method's bytes and the library's own split into
# compress, communicate and decompress.
#
#   scripts/perf/perf_rates.sh [--help]
#
# Settings (environment):
#   CC_R_RATES   link rates (default "100mbit 1gbit 10gbit")
#   CC_R_HOSTS   host counts (default "2 4"), one rank per host
#   CC_R_SIZE    bytes per rank (64M)
#   CC_R_ITERS   timed iterations (2; one warm-up call before them)
#   CC_R_METHODS the methods of the first run (mpi,none,topk,sketch,lowrank,half,quant,onebit)
#   CC_R_OUT     folder of the JSON files (docs/perf): rates_<rate>_<N>hosts.json
#   CC_R_BUILD   build folder with cc_coll_perf (build)
# Needs root (network namespaces). Takes about 12 minutes with the defaults.
set -eu
case "${1:-}" in -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
rates=${CC_R_RATES:-100mbit 1gbit 10gbit}
hosts_list=${CC_R_HOSTS:-2 4}
size=${CC_R_SIZE:-64M}
iters=${CC_R_ITERS:-2}
methods=${CC_R_METHODS:-mpi,none,topk,sketch,lowrank,half,quant,onebit}
out=${CC_R_OUT:-docs/perf}
build=${CC_R_BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for rate in $rates; do
  for hosts in $hosts_list; do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    perf="$build/cc_coll_perf -b $size -e $size -n $iters -w 1 -J -q -r normal -i 0"
    scripts/cluster/cc_cluster.sh -N "$hosts" -r "$rate" -t 3000 -p ccrate -- sh -c '
      $CC_CLUSTER_MPIRUN '"$perf"' -D 0.01 -m '"$methods"' -R 1 > '"$tmp"'/r1.json &&
      $CC_CLUSTER_MPIRUN '"$perf"' -D 0.01 -m lowrank -R 4 > '"$tmp"'/r4.json &&
      $CC_CLUSTER_MPIRUN '"$perf"' -D 0.01 -m lowrank -R 16 > '"$tmp"'/r16.json &&
      $CC_CLUSTER_MPIRUN '"$perf"' -D 0.05 -m topk > '"$tmp"'/topk_d05.json &&
      $CC_CLUSTER_MPIRUN -x CC_COLL_TOPK_VALUE_BITS=4 '"$perf"' -D 0.05 -m topk > '"$tmp"'/topk_d05_v4.json &&
      $CC_CLUSTER_MPIRUN -x CC_COLL_PIPELINE_BYTES=1M '"$perf"' -m quant > '"$tmp"'/quant_parts.json &&
      $CC_CLUSTER_MPIRUN -x CC_COLL_PIPELINE_BYTES=1M '"$perf"' -m onebit > '"$tmp"'/onebit_parts.json'
    python3 - "$tmp" "$out/rates_${rate}_${hosts}hosts.json" "$rate" "$hosts" "$load" \
      "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, os, subprocess, sys, time
tmp, path, rate, hosts, lb, la = sys.argv[1:]
runs = {r: json.load(open(os.path.join(tmp, r + ".json")))
        for r in ("r1", "r4", "r16", "topk_d05", "topk_d05_v4", "quant_parts", "onebit_parts")}
runs["topk_d05"]["label"] = "topk density 0.05"
runs["topk_d05_v4"]["label"] = "topk density 0.05, 4-bit values"
runs["quant_parts"]["label"] = "quant in 1 MiB parts"
runs["onebit_parts"]["label"] = "onebit in 1 MiB parts"
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit, "rate": rate,
           "hosts": int(hosts), "load_before": lb, "load_after": la, "runs": runs}, open(path, "w"), indent=1)
EOF
  done
done
python3 scripts/perf/perf_rates.py --dir "$out"
