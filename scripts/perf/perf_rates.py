#!/usr/bin/env python3
"""perf_rates.py: the markdown tables of scripts/perf/perf_rates.sh from its
JSON files (docs/perf/rates_<rate>_<N>hosts.json).

  scripts/perf/perf_rates.py [--dir docs/perf]

Per rate and host count: every method's time per call, its speedup over
MPI_Allreduce in the same session, the bytes one rank hands to MPI, the
wire-time limit of those bytes (the time a host's link needs, at its nominal
rate, for what the method's exchange makes it carry: 2 (N-1)/N x bytes for
an allreduce of them (NONE, SKETCH, LOWRANK), (N-1) x bytes for TOPK's
allgather, the bytes themselves for the element codecs, whose statistics
count what a rank sends), the call's time over that limit, and the library's own split of
the call into compress, communicate and decompress (its statistics, the
slowest rank's).
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_summary  # noqa: E402  (the rows of a rates file)

RATE = {"mbit": 1e6, "gbit": 1e9, "kbit": 1e3}


def rate_bps(text):
    m = re.fullmatch(r"([0-9.]+)(kbit|mbit|gbit)", text)
    return float(m.group(1)) * RATE[m.group(2)] / 8


# The element codecs' statistics count what a rank sends (reduce-scatter
# and allgather of coded blocks: 2 (N-1) blocks), not the buffer's bytes.
SENT_BYTES = ("half", "quant", "onebit")


def limit(method, wire, hosts, bps):
    f = (hosts - 1) / hosts
    if method == "topk":
        return (hosts - 1) * wire / bps
    if method in SENT_BYTES:
        return wire / bps
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
        mpi = next(x for x in d["runs"]["r1"]["results"] if x["method"] == "mpi")
        for name, x in perf_summary.rates_runs(d):
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
