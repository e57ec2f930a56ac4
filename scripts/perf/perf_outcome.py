#!/usr/bin/python3
"""The cost of the outcome exchange (docs/wire.md, "Fault containment"): the
same cc_coll_perf run of two builds, BASE and HEAD, alternately, round after
round, on this machine's ranks (shared memory), and each method's median time per size, the median over the rounds of
the ratio HEAD / BASE (each round runs BASE, then HEAD), and the load
averages.

    scripts/perf/perf_outcome.py BASE_BUILD HEAD_BUILD [--rounds R] [--ranks P]
        [--sizes 8,64K,64M] [--methods none,topk,sketch,lowrank] [--iters N] [--md FILE]

BASE_BUILD and HEAD_BUILD are build folders that hold cc_coll_perf (for
example a Release build of `git archive <rev>` with CC_COLL_BUILD_TESTS=OFF).
mpi (plain MPI_Allreduce) is measured by both: its ratio is the noise;
none pays the agreement only, the lossy methods the agreement and the
outcome exchange.
Every run uses -i 0 (in place), -r normal and -D 0.01.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def size_bytes(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(build, ranks, size, methods, iters):
    n = iters if size < (1 << 20) else max(3, iters // 100)
    cmd = ["mpirun", "-np", str(ranks)]
    if ranks > 2:
        cmd.append("--oversubscribe")
    cmd += [os.path.join(build, "cc_coll_perf"), "-b", str(size), "-e", str(size), "-n", str(n), "-w",
            str(max(1, n // 10)), "-i", "0", "-r", "normal", "-D", "0.01", "-m", "mpi," + methods, "-J", "-q"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    doc = json.loads(out[out.index("{"):])
    return {r["method"]: r["time_us"] for r in doc["results"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("head")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--sizes", default="8,64K,64M")
    ap.add_argument("--methods", default="none,topk,sketch,lowrank")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--md", help="also write the table to this file")
    a = ap.parse_args()
    sizes = [size_bytes(s) for s in a.sizes.split(",")]
    times = {}  # (label, size, method) -> [us]
    loads = []
    for r in range(a.rounds):
        for label, build in (("base", a.base), ("head", a.head)):
            for size in sizes:
                before = load()
                res = run(build, a.ranks, size, a.methods, a.iters)
                loads.append(before)
                for m, t in res.items():
                    times.setdefault((label, size, m), []).append(t)
                print(f"round {r + 1} {label} {size} B: " + ", ".join(f"{m} {t:.2f} us" for m, t in res.items())
                      + f"  (load {before})", file=sys.stderr)
    lines = [f"{a.ranks} ranks, one node, {a.rounds} rounds, BASE and HEAD alternately; "
             f"load averages from {loads[0]} to {loads[-1]}", "",
             "| size | method | BASE µs (median) | HEAD µs (median) | HEAD / BASE (median of the rounds' ratios) |",
             "| --- | --- | --- | --- | --- |"]
    for size in sizes:
        for m in ["mpi"] + a.methods.split(","):
            bs, hs = times[("base", size, m)], times[("head", size, m)]
            ratio = statistics.median(h / b for b, h in zip(bs, hs))
            lines.append(f"| {size} B | {m} | {statistics.median(bs):.2f} | {statistics.median(hs):.2f} | {ratio:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
