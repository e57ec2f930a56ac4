#!/usr/bin/env python3
"""The report of scripts/perf/perf_compare.sh (run by it; not a measuring tool).

Reads the runs folder perf_compare.sh fills -- for every run <name>.out (the
program's JSON: Google Benchmark's for kernel.<program>.<label>.r<round>.a<attempt>,
cc_coll_perf -J's for cluster.<label>.r<round>.a<attempt>) and <name>.meta
(label, round, attempt, load averages before and after, exit status,
accepted) -- and writes

  --json   every run, raw, with its load averages, the machine and the
           commands, and the summary below
  --md     the tables: HEAD/BASE time ratios per kernel benchmark (CPU time)
           and per method and size on the cluster (time per call), with the
           load averages of every run

A ratio is median(HEAD) / median(BASE) over the accepted rounds; "rounds"
gives HEAD/BASE round by round (round i of HEAD ran right after round i of
BASE); "spread" is the largest max/min - 1 of one build's own rounds, the
noise between two runs of the same binary.
"""

import argparse
import glob
import json
import math
import os
import platform
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_driver as drv  # noqa: E402  (scripts/perf/perf_driver.py)

PROG = "perf_compare.py"


def die(msg):
    raise SystemExit(PROG + ": " + msg)


NAME = re.compile(r"^(kernel\.(?P<program>[A-Za-z0-9_]+)|cluster)\.(?P<label>base|head)\.r(?P<round>\d+)\.a(?P<attempt>\d+)$")


def read_runs(folder):
    runs = []
    for meta_path in sorted(glob.glob(os.path.join(folder, "*.meta"))):
        name = os.path.basename(meta_path)[: -len(".meta")]
        m = NAME.match(name)
        if not m:
            continue
        with open(meta_path) as f:
            meta = json.loads(f.read())
        meta["load_before"] = [float(x) for x in meta["load_before"].split()]
        meta["load_after"] = [float(x) for x in meta["load_after"].split()]
        run = {"name": name, "kind": "cluster" if m.group("program") is None else "kernel"}
        if m.group("program"):
            run["program"] = m.group("program")
        run.update(meta)
        out = os.path.join(folder, name + ".out")
        try:
            with open(out) as f:
                run["output"] = json.load(f)
        except (OSError, ValueError) as e:
            run["output"] = None
            run["error"] = "no valid JSON: %s" % e
        ctx = (run["output"] or {}).get("context") if isinstance(run["output"], dict) else None
        if isinstance(ctx, dict) and "executable" in ctx:
            # The build folder is temporary: keep the program's place in it only.
            ctx["executable"] = "<%s build>/bench/%s" % (run["label"], os.path.basename(ctx["executable"]))
        runs.append(run)
    runs.sort(key=lambda r: (r.get("start", 0), r["name"]))
    return runs


def machine():
    return {
        "cpu": drv.cpu_model(),
        "cores": os.cpu_count(),
        "os": drv.os_name(),
        "kernel": platform.release(),
        "compiler": drv.first_line(["c++", "--version"]),
        "mpirun": drv.first_line(["mpirun", "--version"]),
    }


def med(xs):
    return statistics.median(xs) if xs else None


def spread(xs):
    return max(xs) / min(xs) - 1 if len(xs) > 1 and min(xs) > 0 else None


def compare(base, head):
    """base, head: {round: value}. The summary of one benchmark or one method and size."""
    b = [base[r] for r in sorted(base)]
    h = [head[r] for r in sorted(head)]
    pairs = [head[r] / base[r] for r in sorted(set(base) & set(head)) if base[r] > 0]
    s = [x for x in (spread(b), spread(h)) if x is not None]
    return {
        "base": b,
        "head": h,
        "base_median": med(b),
        "head_median": med(h),
        "ratio": med(h) / med(b) if b and h and med(b) > 0 else None,
        "round_ratios": pairs,
        "spread": max(s) if s else None,
    }


def kernel_summary(runs):
    values = {}  # (program, benchmark) -> label -> round -> cpu ms
    for run in runs:
        if run["kind"] != "kernel" or not run["accepted"] or not run["output"]:
            continue
        for bm in run["output"].get("benchmarks", []):
            if bm.get("run_type", "iteration") != "iteration" or "error_occurred" in bm:
                continue
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[bm.get("time_unit", "ns")]
            key = (run["program"], bm["name"])
            values.setdefault(key, {}).setdefault(run["label"], {})[run["round"]] = bm["cpu_time"] * scale
    out = []
    for (program, name), v in values.items():
        row = {"program": program, "benchmark": name, "unit": "ms (CPU)"}
        row.update(compare(v.get("base", {}), v.get("head", {})))
        out.append(row)
    return out


def cluster_summary(runs):
    values = {}  # (method, bytes) -> label -> round -> ms
    for run in runs:
        if run["kind"] != "cluster" or not run["accepted"] or not run["output"]:
            continue
        for res in run["output"].get("results", []):
            if not res.get("in_place", True) or res.get("time_us") is None:
                continue
            key = (res["method"], res["bytes"])
            values.setdefault(key, {}).setdefault(run["label"], {})[run["round"]] = res["time_us"] / 1e3
    order = {}
    for run in runs:
        if run["kind"] == "cluster" and run["output"]:
            for res in run["output"].get("results", []):
                order.setdefault(res["method"], len(order))
    out = []
    for (method, nbytes) in sorted(values, key=lambda k: (order.get(k[0], 99), k[1])):
        v = values[(method, nbytes)]
        row = {"method": method, "bytes": nbytes, "unit": "ms per call"}
        row.update(compare(v.get("base", {}), v.get("head", {})))
        out.append(row)
    return out


def size_name(n):
    for unit, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= s and n % s == 0:
            return "%d %s" % (n // s, unit)
    return "%d B" % n


def g3(x):
    if x is None:
        return "–"
    if x == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return "%.*f" % (digits, x)


def r3(x):
    return "–" if x is None else "%.3f" % x


def pct(x):
    return "–" if x is None else "%.0f %%" % (100 * x)


def loads(run):
    return "%s → %s" % (" ".join("%.2f" % x for x in run["load_before"]), " ".join("%.2f" % x for x in run["load_after"]))


def others(run, hosts):
    """A rough estimate of the runnable processes other than the run's own
    during it, from the 1-minute load average before and after: it decays by
    exp(-t/60) and moves towards the number runnable. Own: 1 for a kernel
    benchmark, one busy rank per host on the cluster."""
    t = run.get("end", 0) - run.get("start", 0)
    if t < 10:
        return None
    d = math.exp(-t / 60.0)
    own = 1 if run["kind"] == "kernel" else hosts
    return max(0.0, (run["load_after"][0] - run["load_before"][0] * d) / (1 - d) - own)


def kept(run, max_load):
    if not run["accepted"]:
        return "no (load)"
    if max(run["load_before"][0], run["load_after"][0]) > max_load:
        return "yes (repeats used up)"
    return "yes"


def markdown(doc):
    s = doc["summary"]
    lines = []
    w = lines.append
    w("HEAD = `%s` (%s), BASE = `%s` (%s). Ratio: median HEAD / median BASE over the"
      % (doc["head"]["rev"], doc["head"]["commit"][:12], doc["base"]["rev"], doc["base"]["commit"][:12]))
    w("accepted rounds (below 1: HEAD is faster); rounds: HEAD/BASE round by round; spread:")
    w("the largest max/min − 1 of one build's own rounds (the noise between runs of the same binary).")
    w("")
    if s["cluster"]:
        sizes = sorted({r["bytes"] for r in s["cluster"]})
        methods = []
        for r in s["cluster"]:
            if r["method"] not in methods:
                methods.append(r["method"])
        by = {(r["method"], r["bytes"]): r for r in s["cluster"]}
        w("**Cluster**, %d hosts at %s: HEAD/BASE time per call (`mpi` is MPI_Allreduce, the same code in both builds):"
          % (doc["settings"]["hosts"], doc["settings"]["rate"]))
        w("")
        w("| method | " + " | ".join(size_name(n) for n in sizes) + " |")
        w("| --- |" + " ---: |" * len(sizes))
        for m in methods:
            w("| %s | " % m + " | ".join(r3(by[(m, n)]["ratio"]) if (m, n) in by else "–" for n in sizes) + " |")
        w("")
        w("| method | size | BASE ms | HEAD ms | HEAD/BASE | rounds | spread |")
        w("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
        for r in s["cluster"]:
            w("| %s | %s | %s | %s | %s | %s | %s |" % (
                r["method"], size_name(r["bytes"]), " / ".join(g3(x) for x in r["base"]),
                " / ".join(g3(x) for x in r["head"]), r3(r["ratio"]),
                " ".join(r3(x) for x in r["round_ratios"]), pct(r["spread"])))
        w("")
    if s["kernels"]:
        w("**Kernel micro-benchmarks** (one core, CPU time per iteration, ms):")
        w("")
        w("| program | benchmark | BASE | HEAD | HEAD/BASE | rounds | spread |")
        w("| --- | --- | ---: | ---: | ---: | --- | ---: |")
        for r in s["kernels"]:
            w("| %s | `%s` | %s | %s | %s | %s | %s |" % (
                r["program"].replace("cc_coll_bench_", ""), r["benchmark"],
                " / ".join(g3(x) for x in r["base"]), " / ".join(g3(x) for x in r["head"]), r3(r["ratio"]),
                " ".join(r3(x) for x in r["round_ratios"]), pct(r["spread"])))
        w("")
        w("| program | benchmarks | geometric mean of HEAD/BASE | lowest | highest |")
        w("| --- | ---: | ---: | ---: | ---: |")
        for p in s["kernel_programs"]:
            w("| %s | %d | %s | %s | %s |" % (p["program"].replace("cc_coll_bench_", ""), p["benchmarks"],
                                            r3(p["geomean"]), r3(p["min"]), r3(p["max"])))
        w("")
    w("**Load averages** (1, 5, 15 minutes; before → after each run; runs above %s were repeated). "
      "others (est.): other runnable processes during the run, estimated from the 1-minute average "
      "before and after (it decays by exp(−t/60)) less the run's own (1 for a kernel benchmark, one "
      "busy rank per host); rough, from values sampled every 5 s:" % doc["settings"]["max_load"])
    w("")
    w("| run | build | round | attempt | seconds | load before → after | others (est.) | kept |")
    w("| --- | --- | ---: | ---: | ---: | --- | ---: | --- |")
    for run in doc["runs"]:
        what = run.get("program", "cc_coll_perf").replace("cc_coll_bench_", "")
        secs = run["end"] - run["start"] if "end" in run and "start" in run else None
        o = others(run, doc["settings"]["hosts"])
        w("| %s %s | %s | %d | %d | %s | %s | %s | %s |" % (
            run["kind"], what, run["label"].upper(), run["round"], run["attempt"], "–" if secs is None else secs,
            loads(run), "–" if o is None else "%.1f" % o, kept(run, doc["settings"]["max_load"])))
    w("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--base-commit", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--head-commit", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--cluster-command", required=True)
    ap.add_argument("--kernel-command", required=True)
    ap.add_argument("--max-load", type=float, required=True)
    ap.add_argument("--rate", required=True)
    ap.add_argument("--hosts", type=int, required=True)
    a = ap.parse_args()

    runs = read_runs(a.runs)
    if not runs:
        die("no runs in %s" % a.runs)
    kernels = kernel_summary(runs)
    programs = []
    for p in sorted({k["program"] for k in kernels}):
        rs = [k["ratio"] for k in kernels if k["program"] == p and k["ratio"]]
        if rs:
            programs.append({"program": p, "benchmarks": len(rs),
                             "geomean": math.exp(sum(math.log(x) for x in rs) / len(rs)),
                             "min": min(rs), "max": max(rs)})
    doc = {
        "tool": "perf_compare.sh",
        "command": a.command,
        "base": {"rev": a.base, "commit": a.base_commit},
        "head": {"rev": a.head, "commit": a.head_commit},
        "machine": machine(),
        "settings": {"cluster_command": a.cluster_command, "kernel_command": a.kernel_command,
                     "max_load": a.max_load, "rate": a.rate, "hosts": a.hosts},
        "summary": {"cluster": cluster_summary(runs), "kernels": kernels, "kernel_programs": programs},
        "runs": runs,
    }
    md = markdown(doc)
    for path in (a.json, a.md):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(a.md, "w") as f:
        f.write(md)
    sys.stdout.write(md)
    bad = [r["name"] for r in runs if r["accepted"] and (r["output"] is None or r["exit"] != 0)]
    if bad:
        print("%s: failed runs: %s" % (PROG, ", ".join(bad)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
