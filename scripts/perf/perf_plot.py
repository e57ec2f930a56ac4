#!/usr/bin/python3
"""Plots and tabulates cc_coll_perf results from the emulated cluster.

    scripts/perf/perf_plot.py [--dir docs/perf] [--doc docs/perf/history.md]

Reads every docs/perf/allreduce_<rate>_<N>hosts.json (cc_coll_perf -J output)
and docs/perf/meta.json (the settings and the machine, written by
scripts/perf/perf_results.sh through --write-meta), writes for each file
  speedup_<rate>_<N>hosts.png   speedup over MPI_Allreduce vs size
  relerr_<rate>_<N>hosts.png    relative error vs size
and rewrites the part of docs/perf/history.md between
  <!-- BEGIN cluster-results --> and <!-- END cluster-results -->
(appending the two markers at the end of the file when missing; text outside
them is never touched).

    scripts/perf/perf_plot.py --write-meta docs/perf/meta.json

records the machine (CPU, cores, kernel, Open MPI, ...) and the CC_PERF_*
settings from the environment; scripts/perf/perf_results.sh calls it before it
measures.
"""

import argparse
import datetime
import glob
import json
import math
import os
import platform
import re
import subprocess
import sys

BEGIN = "<!-- BEGIN cluster-results -->"
END = "<!-- END cluster-results -->"
TARGET_BYTES = 64 << 20
TARGET_SPEEDUP = 10.0
TARGET_DENSITY = 0.01
FILE_RE = re.compile(r"^allreduce_(?P<rate>[A-Za-z0-9.]+)_(?P<hosts>\d+)hosts\.json$")


# --------------------------------------------------------------------------
# Machine and settings
# --------------------------------------------------------------------------

def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gib = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    ompi = _run(["mpirun", "--version"]).splitlines()
    os_name = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "kernel": platform.release(),
        "os": os_name,
        "mpi": ompi[0] if ompi else "unknown",
    }


def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return ""


def write_meta(path):
    env = os.environ
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/perf/ -> root
    commit = _run(["git", "-C", root, "rev-parse", "--short", "HEAD"])
    if commit and _run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"]):
        commit += " (with uncommitted changes)"
    meta = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit or "unknown",
        "machine": machine_info(),
        "rate": env.get("CC_PERF_RATE", "1gbit"),
        "delay": env.get("CC_PERF_DELAY", "") or "none",
        "hosts": [int(h) for h in env.get("CC_PERF_HOSTS", "2 4").split()],
        "perf_args": env.get("CC_PERF_ARGS", ""),
        "command": env.get("CC_PERF_COMMAND", ""),
        "shaping": env.get("CC_PERF_SHAPING", ""),
        "load_before": env.get("CC_PERF_LOAD_BEFORE", ""),
        "load_after": _loadavg(),
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------

def fmt_bytes(b):
    if b is None:
        return "–"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= (1 << shift):
            v = b / (1 << shift)
            return ("%d %s" % (v, unit)) if v == int(v) else ("%.3g %s" % (v, unit))
    return "%d B" % b


def fmt_time(us):
    if us is None:
        return "–"
    if us >= 1e6:
        return "%.3g s" % (us / 1e6)
    if us >= 1e3:
        return "%.3g ms" % (us / 1e3)
    return "%.3g µs" % us


def fmt_num(v, spec="%.3g"):
    return "–" if v is None else spec % v


def fmt_speedup(v):
    if v is None:
        return "–"
    return ("%.3g×" % v) if v < 100 else ("%.0f×" % v)


def fmt_wire(w):
    if w is None:
        return "–"
    return fmt_bytes(int(round(w)))


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

def load_runs(perf_dir):
    runs = []
    for path in sorted(glob.glob(os.path.join(perf_dir, "allreduce_*hosts.json"))):
        m = FILE_RE.match(os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            doc = json.load(f)
        if doc.get("tool") != "cc_coll_perf" or not isinstance(doc.get("results"), list):
            raise SystemExit("perf_plot.py: %s is not cc_coll_perf JSON" % path)
        results = doc["results"]
        # In-place rows when there are any (that is what -i 0 measures), else
        # out-of-place ones: one mode per table and plot.
        in_place = any(r.get("in_place") for r in results)
        rows = [r for r in results if bool(r.get("in_place")) == in_place]
        methods = []
        for r in rows:
            if r["method"] not in methods:
                methods.append(r["method"])
        by = {}
        for r in rows:
            by[(r["bytes"], r["method"])] = r
        sizes = sorted({r["bytes"] for r in rows})
        runs.append({
            "path": path,
            "name": os.path.basename(path),
            "rate": m.group("rate"),
            "hosts": int(m.group("hosts")),
            "doc": doc,
            "in_place": in_place,
            "methods": methods,
            "others": [x for x in methods if x != "mpi"],
            "sizes": sizes,
            "by": by,
        })
    runs.sort(key=lambda r: (r["rate"], r["hosts"]))
    return runs


def speedup_of(run, size, method):
    r = run["by"].get((size, method))
    if r is None:
        return None
    if r.get("speedup") is not None:
        return r["speedup"]
    mpi = run["by"].get((size, "mpi"))
    if mpi and mpi.get("time_us") and r.get("time_us"):
        return mpi["time_us"] / r["time_us"]
    return None


def crossover(run, method):
    """Smallest size from which the speedup stays >= 1 for all larger sizes."""
    sizes = [s for s in run["sizes"] if speedup_of(run, s, method) is not None]
    if not sizes:
        return None, "not measured"
    start = None
    for s in reversed(sizes):
        if speedup_of(run, s, method) >= 1.0:
            start = s
        else:
            break
    if start is None:
        return None, "none in range (%s – %s)" % (fmt_bytes(sizes[0]), fmt_bytes(sizes[-1]))
    if start == sizes[0]:
        return start, "%s (the smallest size measured: faster at every size)" % fmt_bytes(start)
    return start, fmt_bytes(start)


# --------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------

def plot_run(run, perf_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tag = "%s_%dhosts" % (run["rate"], run["hosts"])
    doc = run["doc"]
    title_tail = "%d hosts, %s links, %s, %s" % (
        run["hosts"], run["rate"], doc.get("dtype", "?"), "in place" if run["in_place"] else "out of place")
    files = {}

    # Speedup over MPI_Allreduce.
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for method in run["others"]:
        xs, ys = [], []
        for s in run["sizes"]:
            v = speedup_of(run, s, method)
            if v is not None and v > 0:
                xs.append(s)
                ys.append(v)
        if xs:
            label = method
            if method in ("topk", "sketch") and doc.get("density") is not None:
                label = "%s (density %g)" % (method, doc["density"])
            ax.plot(xs, ys, marker="o", label=label)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--", label="MPI_Allreduce (1.0)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(run["sizes"])
    ax.set_xticklabels([fmt_bytes(s).replace(" ", "") for s in run["sizes"]], rotation=45, ha="right")
    ax.minorticks_off()
    ax.set_xlabel("buffer size per rank")
    lo, hi = ax.get_ylim()
    ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
             if lo <= t <= hi]
    ax.set_yticks(ticks)
    ax.set_yticklabels(["%g" % t for t in ticks])
    ax.set_ylabel("speedup over MPI_Allreduce (log)")
    ax.set_title("Allreduce speedup: " + title_tail, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["speedup"] = "speedup_%s.png" % tag
    fig.savefig(os.path.join(perf_dir, files["speedup"]))
    plt.close(fig)

    # Relative error.
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for method in run["others"]:
        xs, ys = [], []
        for s in run["sizes"]:
            r = run["by"].get((s, method))
            if r is not None and r.get("rel_err") is not None:
                xs.append(s)
                ys.append(r["rel_err"])
        if xs:
            ax.plot(xs, ys, marker="o", label=method)
    ax.set_xscale("log", base=2)
    ax.set_xticks(run["sizes"])
    ax.set_xticklabels([fmt_bytes(s).replace(" ", "") for s in run["sizes"]], rotation=45, ha="right")
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.set_xlabel("buffer size per rank")
    ax.set_ylabel("relative L2 error vs MPI_Allreduce (one step)")
    ax.set_title("Allreduce relative error: " + title_tail, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["relerr"] = "relerr_%s.png" % tag
    fig.savefig(os.path.join(perf_dir, files["relerr"]))
    plt.close(fig)
    return files


# --------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------

def table(run):
    head = ["size", "MPI_Allreduce"]
    align = ["---:", "---:"]
    for m in run["others"]:
        head += ["%s time" % m, "%s speedup" % m, "%s wire" % m, "%s ratio" % m, "%s rel. error" % m]
        align += ["---:"] * 5
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for s in run["sizes"]:
        mpi = run["by"].get((s, "mpi"))
        cells = [fmt_bytes(s), fmt_time(mpi.get("time_us") if mpi else None)]
        for m in run["others"]:
            r = run["by"].get((s, m))
            if r is None:
                cells += ["–"] * 5
                continue
            cells += [
                fmt_time(r.get("time_us")),
                fmt_speedup(speedup_of(run, s, m)),
                fmt_wire(r.get("wire_bytes")),
                fmt_num(r.get("ratio"), "%.3g"),
                fmt_num(r.get("rel_err"), "%.2e"),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def target_statement(runs):
    run = next((r for r in runs if r["hosts"] == 2 and r["rate"].lower() == "1gbit"), None)
    goal = ("Target: TOPK at 1% density at least 10× faster than MPI_Allreduce at 1 Gbit/s, "
            "2 hosts, 64 MiB.")
    if run is None:
        return goal + " **Not measured** (no 1gbit, 2-host run)."
    if "topk" not in run["methods"]:
        return goal + " **Not measured** (no topk rows)."
    r = run["by"].get((TARGET_BYTES, "topk"))
    mpi = run["by"].get((TARGET_BYTES, "mpi"))
    if r is None or mpi is None:
        return goal + " **Not measured** (no 64 MiB row)."
    sp = speedup_of(run, TARGET_BYTES, "topk")
    density = run["doc"].get("density")
    lines = [goal, ""]
    lines.append("| 64 MiB, 2 hosts, 1gbit | MPI_Allreduce | topk | speedup | wire | ratio | rel. error |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    lines.append("| measured | %s | %s | %s | %s | %s | %s |" % (
        fmt_time(mpi.get("time_us")), fmt_time(r.get("time_us")), fmt_speedup(sp),
        fmt_wire(r.get("wire_bytes")), fmt_num(r.get("ratio")), fmt_num(r.get("rel_err"), "%.2e")))
    lines.append("")
    caveat = ""
    if density is None or abs(density - TARGET_DENSITY) > 1e-12:
        caveat = " (but measured at density %s, not 0.01)" % density
    if sp is not None and sp >= TARGET_SPEEDUP:
        lines.append("**Met**%s: TOPK is %.3g× faster than MPI_Allreduce at 64 MiB." % (caveat, sp))
    else:
        lines.append("**Not met**%s: TOPK is %s faster than MPI_Allreduce at 64 MiB; the target is 10×." % (
            caveat, fmt_speedup(sp)))
    return "\n".join(lines)


def section(runs, meta, plots, rel="perf"):
    mach = meta.get("machine", {}) if meta else {}
    out = [BEGIN, "", "## Emulated-cluster results", ""]
    out.append("Generated by `scripts/perf/perf_results.sh` (measurements) and `scripts/perf/perf_plot.py` "
               "(plots, this section); do not edit by hand between the markers. The cluster is "
               "`scripts/cluster/cc_cluster.sh`: network namespaces on one machine, links rate-limited "
               "with tc tbf (see `docs/cluster.md`). Every \"host\" shares the same CPU cores, so "
               "compression costs real CPU time on a shared CPU, and 4 ranks oversubscribe 2 cores.")
    out.append("")
    if meta:
        out.append("- Date: %s; commit %s" % (meta.get("date_utc", "?"), meta.get("commit", "?")))
        out.append("- Machine: %s, %s cores, %s GiB; %s; kernel %s; %s" % (
            mach.get("cpu", "?"), mach.get("cores", "?"), mach.get("memory_gib", "?"),
            mach.get("os", "?"), mach.get("kernel", "?"), mach.get("mpi", "?")))
        lb, la = meta.get("load_before", ""), meta.get("load_after", "")
        if lb or la:
            out.append("- Load average (1, 5, 15 min) before measuring: %s; after: %s" % (lb or "?", la or "?"))
            try:
                busy = float(lb.split()[0]) if lb else 0.0
            except ValueError:
                busy = 0.0
            cores = mach.get("cores") or 1
            if busy > 0.5 * cores:
                out.append("- **Warning**: other work was running on the machine (load %.2f on %d cores) "
                           "when the measurement started; times, compressed methods' above all, are "
                           "inflated and noisy." % (busy, cores))
        out.append("- Links: %s per host, each direction; added delay: %s%s" % (
            meta.get("rate", "?"), meta.get("delay", "none"),
            ("; " + meta["shaping"]) if meta.get("shaping") else ""))
    if runs:
        d = runs[0]["doc"]
        out.append("- cc_coll_perf %s: dtype %s, op %s, %d timed iterations after %d warm-up, "
                   "topk density %s, error feedback %s, %s, input data %s" % (
                       d.get("version", "?"), d.get("dtype", "?"), d.get("op", "?"), d.get("iters", 0),
                       d.get("warmup", 0), d.get("density"), "on" if d.get("ef") else "off",
                       "in place" if runs[0]["in_place"] else "out of place", d.get("data", "int")))
        out.append("- Hosts (one rank each): %s" % ", ".join(str(r["hosts"]) for r in runs))
        out.append("- Times: per call, the average over the timed iterations of the slowest rank's "
                   "time; speedup = MPI_Allreduce time / method time; wire = bytes one rank hands "
                   "to MPI per call; ratio = size / wire; rel. error = one-step relative L2 error "
                   "against MPI_Allreduce on the same inputs (cc_coll_perf -r: 'normal' is gradient-like "
                   "data with distinct magnitudes, 'int' small repeating integers).")
    if meta and meta.get("command"):
        out += ["", "Command, per host count `<N>`:", "", "```sh", meta["command"], "```"]
    out.append("")
    out.append("### Target")
    out.append("")
    out.append(target_statement(runs))
    out.append("")
    for run in runs:
        out.append("### %d hosts, %s" % (run["hosts"], run["rate"]))
        out.append("")
        out.append("Data: [`%s`](%s/%s)." % (run["name"], rel, run["name"]))
        out.append("")
        out.append(table(run))
        out.append("")
        out.append("Crossover (smallest size from which the speedup stays ≥ 1 up to the largest size):")
        out.append("")
        for m in run["others"]:
            out.append("- %s: %s" % (m, crossover(run, m)[1]))
        out.append("")
        wrong = [(s, m, run["by"][(s, m)]["wrong"]) for s in run["sizes"] for m in run["methods"]
                 if (s, m) in run["by"] and run["by"][(s, m)].get("wrong")]
        if wrong:
            out.append("**Check failed**: elements differing from the exact result: " + ", ".join(
                "%s at %s: %d" % (m, fmt_bytes(s), k) for s, m, k in wrong) + ".")
            out.append("")
        files = plots.get(run["name"])
        if files:
            out.append("![speedup, %d hosts](%s/%s)" % (run["hosts"], rel, files["speedup"]))
            out.append("![relative error, %d hosts](%s/%s)" % (run["hosts"], rel, files["relerr"]))
            out.append("")
    if not runs:
        out.append("No results yet: run `scripts/perf/perf_results.sh`.")
        out.append("")
    out.append(END)
    return "\n".join(out)


def rewrite_doc(doc_path, text):
    old = ""
    if os.path.exists(doc_path):
        with open(doc_path) as f:
            old = f.read()
    else:
        old = "# Performance\n"
    b = old.find(BEGIN)
    e = old.find(END, b + len(BEGIN)) if b >= 0 else -1
    if b >= 0 and e >= 0:
        new = old[:b] + text + old[e + len(END):]
    else:
        if b >= 0 or old.find(END) >= 0:
            raise SystemExit("perf_plot.py: %s has only one of the markers %s / %s; fix it by hand"
                             % (doc_path, BEGIN, END))
        sep = "" if old.endswith("\n\n") else ("\n" if old.endswith("\n") else "\n\n")
        new = old + sep + text + "\n"
    tmp = doc_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, doc_path)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/perf/ -> root
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.path.join(root, "docs", "perf"),
                    help="where the JSON results are and the plots go [docs/perf]")
    ap.add_argument("--doc", default=os.path.join(root, "docs", "perf", "history.md"),
                    help="the Markdown file whose cluster-results section is rewritten")
    ap.add_argument("--no-doc", action="store_true", help="only the plots")
    ap.add_argument("--write-meta", metavar="FILE",
                    help="record the machine and the CC_PERF_* settings in FILE, then exit")
    args = ap.parse_args()

    if args.write_meta:
        write_meta(args.write_meta)
        return 0

    runs = load_runs(args.dir)
    if not runs:
        print("perf_plot.py: no allreduce_<rate>_<N>hosts.json in %s" % args.dir, file=sys.stderr)
    meta = None
    meta_path = os.path.join(args.dir, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    plots = {}
    for run in runs:
        plots[run["name"]] = plot_run(run, args.dir)
        print("perf_plot.py: %s -> %s, %s" % (run["name"], plots[run["name"]]["speedup"],
                                              plots[run["name"]]["relerr"]))
    if not args.no_doc:
        rel = os.path.relpath(os.path.abspath(args.dir), os.path.dirname(os.path.abspath(args.doc)))
        rewrite_doc(args.doc, section(runs, meta, plots, rel.replace(os.sep, "/")))
        print("perf_plot.py: rewrote the cluster-results section of %s" % args.doc)
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
