#!/usr/bin/env python3
"""perf_rates.py: the markdown tables of scripts/perf/perf_rates.sh from its
JSON files (docs/perf/rates_<rate>_<N>hosts.json).

  scripts/perf/perf_rates.py [--dir docs/perf]

Per rate and host count: every method's time per call, its speedup over
MPI_Allreduce in the same session, the bytes one rank hands to MPI, the
wire-time limit of those bytes (the time a host's link needs, at its nominal
rate, for what the method's exchange makes it carry: 2 (N-1)/N x bytes for
an allreduce of them (NONE, SKETCH, LOWRANK), (N-1) x bytes for TOPK's
allgather), the call's time over that limit, and the library's own split of
the call into compress, communicate and decompress (its statistics, the
slowest rank's).
"""
import argparse
import glob
import json
import os
import re

RATE = {"mbit": 1e6, "gbit": 1e9, "kbit": 1e3}


def rate_bps(text):
    m = re.fullmatch(r"([0-9.]+)(kbit|mbit|gbit)", text)
    return float(m.group(1)) * RATE[m.group(2)] / 8


def limit(method, wire, hosts, bps):
    f = (hosts - 1) / hosts
    if method == "topk":
        return (hosts - 1) * wire / bps
    return 2 * f * wire / bps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="docs/perf")
    a = ap.parse_args()
    docs = [json.load(open(p)) for p in glob.glob(os.path.join(a.dir, "rates_*hosts.json"))]
    docs.sort(key=lambda d: (rate_bps(d["rate"]), d["hosts"]))
    for d in docs:
        bps = rate_bps(d["rate"])
        rows = []
        mpi = None
        for tag, run in (("r1", d["runs"]["r1"]), ("r4", d["runs"]["r4"]), ("r16", d["runs"]["r16"])):
            for x in run["results"]:
                if x["method"] == "mpi":
                    if tag == "r1":
                        mpi = x
                    continue
                if tag != "r1" and x["method"] != "lowrank":
                    continue
                name = x["method"] + (" r" + tag[1:] if x["method"] == "lowrank" else "")
                rows.append((name, x, x["time_us"] / 1e3))
        print(f"### {d['rate']}, {d['hosts']} hosts\n")
        print(f"{d['date']}, commit {d['commit']}; load average {d['load_before']} before, {d['load_after']} after. "
              f"MPI_Allreduce: {mpi['time_us'] / 1e3:.1f} ms (wire-time limit "
              f"{limit('none', mpi['wire_bytes'], d['hosts'], bps) * 1e3:.1f} ms).\n")
        print("| method | time (ms) | speedup | wire (B) | wire-time limit (ms) | time / limit | compress (ms) "
              "| communicate (ms) | decompress (ms) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, x, t in rows:
            lim = limit(x["method"], x["wire_bytes"], d["hosts"], bps) * 1e3
            print(f"| {name} | {t:.1f} | {x['speedup']:.2f}x | {x['wire_bytes']:.0f} | {lim:.2f} | {t / lim:.1f} "
                  f"| {x.get('compress_us', 0) / 1e3:.1f} | {x.get('communicate_us', 0) / 1e3:.1f} "
                  f"| {x.get('decompress_us', 0) / 1e3:.1f} |")
        print()


if __name__ == "__main__":
    main()
