#!/bin/sh
# Method AUTO against NONE and TOPK from 4 KiB to 256 MiB per rank on the
# emulated cluster (docs/performance.md, "The cost model: predicted against
# measured"), and one GPT-2-small bucket through every method ("A
# GPT-2-small bucket"). For each rate, one cluster session of 2 hosts runs:
#   cc_coll_perf -m none,topk,auto  4 KiB .. 1 MiB (30 timed calls)
#   cc_coll_perf -m none,topk,auto  4 MiB .. 256 MiB (5 timed calls)
#   scripts/perf/perf_bucket.py     (every method on the bucket)
# then prints the markdown tables (scripts/perf/perf_tables.py).
#
#   scripts/perf/perf_auto.sh [--help]
#
# Settings (environment):
#   CC_A_RATES   link rates (default "1gbit 10gbit")
#   CC_A_HOSTS   hosts, one rank each (default 2)
#   CC_A_OUT     folder of the JSON files (docs/perf): auto_<rate>_<N>hosts.json,
#                bucket_<rate>_<N>hosts.json
#   CC_A_BUILD   build folder with cc_coll_perf and the Python package (build)
#   CC_A_SWEEP   1 (default): the AUTO sweeps and the bucket; 0: the bucket only
# Needs root (network namespaces), and mpi4py and numpy for /usr/bin/python3
# (Debian: python3-mpi4py python3-numpy). Takes about 3 minutes.
set -eu
case "${1:-}" in -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
rates=${CC_A_RATES:-1gbit 10gbit}
hosts=${CC_A_HOSTS:-2}
out=${CC_A_OUT:-docs/perf}
build=${CC_A_BUILD:-build}
sweep=${CC_A_SWEEP:-1}
case $sweep in 0 | 1) ;; *) echo "perf_auto.sh: CC_A_SWEEP must be 0 or 1" >&2; exit 2 ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lib=$(cd "$build" && pwd)/libcc_coll.so
for rate in $rates; do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  perf="$build/cc_coll_perf -i 0 -r normal -D 0.01 -J -q -m none,topk,auto"
  scripts/cluster/cc_cluster.sh -N "$hosts" -r "$rate" -t 1500 -p ccauto -- sh -c '
    if [ '"$sweep"' = 1 ]; then
      $CC_CLUSTER_MPIRUN '"$perf"' -b 4K -e 1M -f 4 -n 30 -w 3 > '"$tmp"'/small.json &&
      $CC_CLUSTER_MPIRUN '"$perf"' -b 4M -e 256M -f 4 -n 5 -w 1 > '"$tmp"'/large.json || exit 1
    fi
    $CC_CLUSTER_MPIRUN -x PYTHONPATH='"$PWD"'/python -x CC_COLL_LIBRARY='"$lib"' \
      /usr/bin/python3 scripts/perf/perf_bucket.py '"$tmp"'/bucket.json --iters 10'
  after=$(cut -d' ' -f1-3 /proc/loadavg)
  python3 - "$tmp" "$out" "$rate" "$hosts" "$load" "$after" <<'EOF'
import json, os, subprocess, sys, time
tmp, out, rate, hosts, lb, la = sys.argv[1:]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit, "rate": rate,
        "hosts": int(hosts), "load_before": lb, "load_after": la}
if os.path.exists(os.path.join(tmp, "small.json")):
    runs = {r: json.load(open(os.path.join(tmp, r + ".json"))) for r in ("small", "large")}
    json.dump(dict(meta, runs=runs), open(os.path.join(out, "auto_%s_%shosts.json" % (rate, hosts)), "w"), indent=1)
json.dump(dict(meta, run=json.load(open(os.path.join(tmp, "bucket.json")))),
          open(os.path.join(out, "bucket_%s_%shosts.json" % (rate, hosts)), "w"), indent=1)
EOF
done
python3 scripts/perf/perf_tables.py auto "$out"/auto_*hosts.json
python3 scripts/perf/perf_tables.py bucket "$out"/bucket_*hosts.json
