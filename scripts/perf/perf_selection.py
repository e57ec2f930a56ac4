#!/usr/bin/env python3
"""Selection results of docs/performance.md from one cc_coll_bench_topk run.

    scripts/perf/perf_selection.py docs/perf/selection.json docs/performance.md

reads the Google Benchmark JSON output of
  cc_coll_bench_topk --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
                     --benchmark_out=<json> --benchmark_out_format=json ...
(the medians of the repetitions; the "cv" aggregates for the spread) and
rewrites the part of the Markdown file between
  <!-- BEGIN selection-results --> and <!-- END selection-results -->
with the machine, the command, and the tables; text outside the markers is
left alone. When the file has neither marker they are inserted before
<!-- BEGIN cluster-results -->, or appended. The output depends only on the
JSON file (plus /proc/cpuinfo when the JSON does not record the model name),
so running it twice gives the same page.

    scripts/perf/perf_selection.py --annotate docs/perf/selection.json \\
        --command '<the benchmark command>' [--build-dir build]

adds what Google Benchmark does not record to the JSON's "context" (keys
starting with cc_coll_): the /proc/cpuinfo model name, the load average now
(the end of the run), the OS, the compiler, CMake and Google Benchmark
versions and libcc_coll's CMAKE_BUILD_TYPE, and the command line.
scripts/perf/perf_selection.sh does this right after the run.
"""

import argparse
import glob
import json
import math
import os
import re
import socket
import subprocess
import sys

BEGIN = "<!-- BEGIN selection-results -->"
END = "<!-- END selection-results -->"
CLUSTER_BEGIN = "<!-- BEGIN cluster-results -->"

MI = 1 << 20
SIZES = (1 * MI, 16 * MI)
PER_MILLE = (1, 10, 100)
N16 = 16 * MI
TARGET_GBS = 1.0


PROG = "perf_selection.py"  # die()'s prefix; a script importing this module sets its own


def die(msg):
    raise SystemExit(PROG + ": " + msg)


# --------------------------------------------------------------------------
# --annotate


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    out = out.strip().splitlines()
    return out[0].strip() if out else None


def os_name():
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def cmake_cache_value(build_dir, key):
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def compiler(build_dir):
    # CMakeFiles/<cmake version>/CMakeCXXCompiler.cmake, written at configure time.
    for path in sorted(glob.glob(os.path.join(build_dir, "CMakeFiles", "*", "CMakeCXXCompiler.cmake"))):
        with open(path) as f:
            text = f.read()
        cid = re.search(r'set\(CMAKE_CXX_COMPILER_ID "([^"]*)"\)', text)
        ver = re.search(r'set\(CMAKE_CXX_COMPILER_VERSION "([^"]*)"\)', text)
        if cid and ver:
            return "%s %s" % (cid.group(1), ver.group(1))
    return None


def annotate(json_path, command, build_dir):
    with open(json_path) as f:
        d = json.load(f)
    ctx = d.setdefault("context", {})
    with open("/proc/loadavg") as f:
        load = [float(v) for v in f.read().split()[:3]]
    extra = {
        "cc_coll_command": command,
        "cc_coll_cpu_model": cpu_model(),
        "cc_coll_load_avg_after": load,
        "cc_coll_os": os_name(),
        "cc_coll_cmake": first_line(["cmake", "--version"]),
        "cc_coll_benchmark_version": first_line(["dpkg-query", "-W", "-f", "${Version}", "libbenchmark-dev"]),
    }
    if build_dir:
        extra["cc_coll_compiler"] = compiler(build_dir)
        extra["cc_coll_build_type"] = cmake_cache_value(build_dir, "CMAKE_BUILD_TYPE")
    for key, value in extra.items():
        if value is not None:
            ctx[key] = value
    tmp = json_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    os.replace(tmp, json_path)


# --------------------------------------------------------------------------
# the tables


def g3(v):
    """Three significant digits, no exponent for the magnitudes used here."""
    if v == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(v)))))
    return "%.*f" % (digits, round(v, digits))


def size_name(n):
    return "%dMi" % (n // MI) if n % MI == 0 else str(n)


def bytes_name(b):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= size and b % size == 0:
            return "%d %s" % (b // size, unit)
    return "%d B" % b


def pct(v):
    return "%.0f %%" % (100.0 * v) if v >= 0.01 else "%.1f %%" % (100.0 * v)


class Run:
    def __init__(self, d):
        self.ctx = d.get("context", {})
        self.med = {}
        self.cv = {}
        for b in d.get("benchmarks", []):
            if b.get("run_type") != "aggregate":
                continue
            if b.get("aggregate_name") == "median":
                self.med[b["run_name"]] = b
            elif b.get("aggregate_name") == "cv":
                self.cv[b["run_name"]] = b
        if not self.med:
            die("no median rows in the JSON: run with --benchmark_repetitions=3 "
                "--benchmark_report_aggregates_only=true")

    def get(self, name):
        b = self.med.get(name)
        if b is None:
            die("benchmark %s is missing from the JSON (was the run filtered?)" % name)
        return b

    def gbs(self, name):
        return self.get(name)["bytes_per_second"] / 1e9

    def ms(self, name):
        b = self.get(name)
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        return b["cpu_time"] * scale


def sel(w, n, pm):
    return "BM_topk_select<%s>/n:%d/per_mille:%d" % (w, n, pm)


def full(w, n, pm):
    return "BM_topk_select_full<%s>/n:%d/per_mille:%d" % (w, n, pm)


def enc(w, n, pm):
    return "BM_topk_sparse_encode<%s>/n:%d/per_mille:%d" % (w, n, pm)


def mcp(n):
    return "BM_memcpy/n:%d" % n


def path_label(b):
    if b.get("sampled", 0) < 0.5:
        return "full"
    if b.get("fell_back", 0) > 0:
        return "sampled, fell back to full" if b["fell_back"] >= 0.5 else "sampled, fell back sometimes"
    return "sampled"


def machine_lines(run, json_rel):
    c = run.ctx
    lines = []
    model = c.get("cc_coll_cpu_model")
    model_note = ""
    if model is None and c.get("host_name") == socket.gethostname():
        model = cpu_model()
        model_note = " (read now, not recorded in the JSON)"
    ncpu = c.get("num_cpus")
    mhz = c.get("mhz_per_cpu")
    parts = ["host `%s`" % c.get("host_name", "?")]
    if ncpu is not None:
        parts.append("%d CPUs at %s MHz (Google Benchmark's count and clock)" % (ncpu, mhz if mhz is not None else "?"))
    if model:
        parts.append('`/proc/cpuinfo` model name "%s"%s' % (model, model_note))
    caches = []
    for cache in c.get("caches", []):
        kind = {"Data": "d", "Instruction": "i", "Unified": ""}.get(cache.get("type"), "")
        if kind == "i":
            continue
        share = cache.get("num_sharing", 1)
        caches.append("L%d%s %s%s" % (cache["level"], kind, bytes_name(cache["size"]),
                                       " per core" if share == 1 else " shared by %d" % share))
    if caches:
        parts.append("caches " + ", ".join(caches))
    lines.append("- Machine: " + "; ".join(parts) + ".")
    sw = []
    if c.get("cc_coll_os"):
        sw.append(c["cc_coll_os"])
    if c.get("cc_coll_compiler"):
        sw.append("C++ compiler " + c["cc_coll_compiler"])
    if c.get("cc_coll_cmake"):
        sw.append(c["cc_coll_cmake"].replace("cmake version", "CMake"))
    if c.get("cc_coll_benchmark_version"):
        sw.append("Google Benchmark %s (Debian `libbenchmark-dev`)" % c["cc_coll_benchmark_version"])
    bt = c.get("cc_coll_build_type")
    sw.append("libcc_coll built `%s`" % bt if bt else "libcc_coll build type not recorded")
    lines.append("- Software: " + "; ".join(sw) + ".")
    lib = c.get("library_build_type")
    if lib:
        s = "- Google Benchmark's own library build type: `%s`" % lib
        if lib == "debug":
            s += (" (this is what the console's `***WARNING*** Library was built as DEBUG` refers to: "
                  "the harness library, not libcc_coll; it only runs between iterations, which take "
                  "milliseconds here)")
        lines.append(s + ".")
    lines.append("- Date: %s; raw results: `%s` (all repetitions' aggregates; "
                 "the tables use the medians)." % (c.get("date", "?"), json_rel))
    return lines


# load_lines' coefficient-of-variation groups: (run-name prefixes, what the rows are).
SELECTION_CV_GROUPS = ((("BM_topk_select<", "BM_topk_select_full<"), "every selection row"),
                       (("BM_topk_sparse_encode<",), "the compress-step rows"),
                       (("BM_memcpy/",), "`memcpy`"))


def load_lines(run, cv_groups=SELECTION_CV_GROUPS):
    c = run.ctx
    ncpu = c.get("num_cpus")
    before = c.get("load_avg")
    after = c.get("cc_coll_load_avg_after")
    fmt = lambda la: ", ".join("%.2f" % v for v in la)
    s = "- Load: "
    if before:
        s += "load average %s (1, 5, 15 min) when the run started" % fmt(before)
        s += ", %s when it ended" % fmt(after) if after else " (the end was not recorded)"
    else:
        s += "not recorded"
    if ncpu:
        s += ", on %d CPUs" % ncpu
    ratios = sorted(b["real_time"] / b["cpu_time"] for b in run.med.values() if b.get("cpu_time"))
    if ratios:
        s += ("; wall-clock time was %.1f–%.1f× the CPU time (median %.1f×) across the rows"
              % (ratios[0], ratios[-1], ratios[len(ratios) // 2]))
    busy = (before and ncpu and before[0] > 0.5 * ncpu) or (after and ncpu and after[0] > 0.5 * ncpu)
    if busy:
        s += ". The machine was shared with other work during the run"
    s += "."
    lines = [s]

    def spread(prefixes):
        vals = [b["cpu_time"] for name, b in run.cv.items() if name.startswith(prefixes)]
        return max(vals) if vals else None

    t = ("- The rates use **CPU time** (Google Benchmark's default): what the work costs the core that runs "
         "it, which other processes on the machine inflate far less than the wall-clock time; sharing the "
         "caches and the memory bandwidth with them can still only lower the rates")
    cvs = []
    for prefixes, what in cv_groups:
        sp = spread(prefixes)
        if sp is not None:
            cvs.append("≤ %s for %s" % (pct(sp), what))
    if cvs:
        reps = next(iter(run.med.values())).get("repetitions")
        t += (". Coefficient of variation of the CPU time over the %s repetitions: %s"
              % (reps if reps else "", "; ".join(cvs)))
    lines.append(t + ".")
    return lines


def select_table(run):
    out = ["| n | density | k | path | candidates | selection CPU time (ms) | selection GB/s "
           "| memcpy GB/s (same n) | selection / memcpy |",
           "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for n in SIZES:
        m = run.gbs(mcp(n))
        for pm in PER_MILLE:
            name = sel("float", n, pm)
            b = run.get(name)
            cand = "%d" % round(b["candidates"]) if b.get("sampled", 0) >= 0.5 else "–"
            out.append("| %s | %g | %d | %s | %s | %s | %s | %s | %.2f |" % (
                size_name(n), pm / 1000, round(b["k"]), path_label(b), cand, g3(run.ms(name)),
                g3(run.gbs(name)), g3(m), run.gbs(name) / m))
    return out


def select_prose(run):
    m16 = run.gbs(mcp(N16))
    r = {pm: run.gbs(sel("float", N16, pm)) for pm in PER_MILLE}
    met = r[10] >= TARGET_GBS
    out = ["**Target: at least %g GB/s of fp32 input per core for density 0.01 on 16Mi elements — %s**: "
           "%s GB/s, %.2f of the `memcpy` bandwidth measured in the same run."
           % (TARGET_GBS, "met" if met else "not met", g3(r[10]), r[10] / m16)]
    others = ["density %g %s %s GB/s (%s %g GB/s)"
              % (pm / 1000, verb, g3(r[pm]), "≥" if r[pm] >= TARGET_GBS else "<", TARGET_GBS)
              for pm, verb in ((1, "runs at"), (100, "at"))]
    out[0] += " At 16Mi, " + " and ".join(others) + "."
    paths = {path_label(run.get(sel("float", n, pm))) for n in SIZES for pm in PER_MILLE}
    if paths == {"sampled"}:
        out[0] += " Every fp32 row took the sampled path and none fell back."
    out.append("")
    # Is the 1Mi working set (source and destination of memcpy) inside the last-level cache?
    llc = max((c["size"] for c in run.ctx.get("caches", []) if c.get("type") != "Instruction"), default=0)
    if llc and 2 * 4 * SIZES[0] <= llc:
        m1 = run.gbs(mcp(SIZES[0]))
        out.append("At 1Mi the buffers (4 MiB each) fit in the %s last-level cache, so `memcpy` runs at cache "
                   "rather than DRAM bandwidth (%s against %s GB/s at 16Mi) and the ratio is lower; compare "
                   "the selection's own GB/s across the two sizes instead."
                   % (bytes_name(llc), g3(m1), g3(m16)))
    return out


def full_table(run):
    m16 = run.gbs(mcp(N16))
    out = ["| benchmark | path | CPU time (ms) | input GB/s | ratio to memcpy 16Mi |",
           "| --- | --- | ---: | ---: | ---: |"]
    for w in ("float", "double"):
        for name in (sel(w, N16, 10), full(w, N16, 10)):
            b = run.get(name)
            label = path_label(b) if name.startswith("BM_topk_select<") else "full (`select_full`)"
            out.append("| `%s` | %s | %s | %s | %.2f |" % (name, label, g3(run.ms(name)), g3(run.gbs(name)),
                                                         run.gbs(name) / m16))
    return out


def full_prose(run):
    sp = {w: run.ms(full(w, N16, 10)) / run.ms(sel(w, N16, 10)) for w in ("float", "double")}
    per_elem = run.ms(sel("double", N16, 10)) / run.ms(sel("float", N16, 10))
    s = ("The sampled path is %.1f× faster than the full selection for fp32 and %.1f× for fp64. "
         "Per element, fp64 selection takes %.2f× the CPU time of fp32 (the input is twice as many bytes, "
         "so its GB/s figure is correspondingly higher)." % (sp["float"], sp["double"], per_elem))
    fell = sorted(name for name, b in run.med.items()
                  if name.startswith(("BM_topk_select<", "BM_topk_sparse_encode<")) and b.get("fell_back", 0) > 0)
    if fell:
        s += " Rows where the estimate missed and the full selection ran: " + ", ".join("`%s`" % f for f in fell) + "."
    else:
        s += " No `select` row fell back (`fell_back` = 0 in every row, fp32 and fp64)."
    return [s]


def encode_table(run):
    out = ["| n | density | k | payload bytes | CPU time (ms) | input GB/s | selection alone GB/s |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = [("float", n, pm, size_name(n)) for n in SIZES for pm in PER_MILLE]
    rows.append(("double", N16, 10, "16Mi (fp64)"))
    for w, n, pm, label in rows:
        name = enc(w, n, pm)
        b = run.get(name)
        out.append("| %s | %g | %d | %d | %s | %s | %s |" % (
            label, pm / 1000, round(b["k"]), round(b["payload_B"]), g3(run.ms(name)), g3(run.gbs(name)),
            g3(run.gbs(sel(w, n, pm)))))
    return out


def command_lines(run, script, program):
    """"One run of scripts/perf/<script>, which ran:" and the command as recorded by --annotate."""
    c = run.ctx
    command = c.get("cc_coll_command")
    return ["One run of `scripts/perf/%s`, which ran:" % script if command else "One run of the benchmark:",
            "",
            "```sh",
            command if command else "%s --benchmark_repetitions=3 --benchmark_report_aggregates_only=true "
            "(command line not recorded in the JSON)" % c.get("executable", program),
            "```",
            ""]


def section(run, json_rel):
    out = [BEGIN,
           "<!-- Generated by scripts/perf/perf_selection.py from %s (scripts/perf/perf_selection.sh); "
           "do not edit by hand between these markers. -->" % json_rel,
           "",
           "## Results",
           ""]
    out += command_lines(run, "perf_selection.sh", "cc_coll_bench_topk")
    out += machine_lines(run, json_rel)
    out += load_lines(run)
    out += ["",
            "Every figure below is the median of the repetitions, copied from the JSON and only converted "
            "from bytes/s to GB/s and to milliseconds.",
            "",
            "### Selection throughput against memcpy (fp32)",
            ""]
    out += select_table(run)
    out += [""]
    out += select_prose(run)
    out += ["",
            "### The full-selection fallback, and fp64",
            "",
            "n = 16Mi, density 0.01, through `select` and through `select_full` (the full selection, what runs "
            "when the sampled estimate misses); fp64 rows count 8 bytes per input element:",
            ""]
    out += full_table(run)
    out += [""]
    out += full_prose(run)
    out += ["",
            "### The whole compress step (fp32 unless marked)",
            "",
            "What one rank does before the `MPI_Allgather`: g' = g + e, select, encode, and the residual update, "
            "in GB/s of gradient input. \"selection alone\" is `BM_topk_select` from the same run.",
            ""]
    out += encode_table(run)
    out += ["", END]
    return joined_without_absolute_paths(out)


def joined_without_absolute_paths(out):
    for line in out:
        if re.search(r"(^|[\s`(\"'])/(work|home|root|tmp|usr|opt)/", line):
            die("refusing to write an absolute path into the page: %s" % line)
    return "\n".join(out)


def rewrite_doc(doc_path, text, begin=BEGIN, end=END):
    """Replaces the text between begin and end, or inserts it before the cluster results."""
    with open(doc_path) as f:
        old = f.read()
    b = old.find(begin)
    e = old.find(end, b + len(begin)) if b >= 0 else -1
    if b >= 0 and e >= 0:
        new = old[:b] + text + old[e + len(end):]
    elif b >= 0 or old.find(end) >= 0:
        die("%s has only one of the markers %s / %s; fix it by hand" % (doc_path, begin, end))
    else:
        cb = old.find(CLUSTER_BEGIN)
        if cb >= 0:
            new = old[:cb] + text + "\n\n" + old[cb:]
        else:
            sep = "" if old.endswith("\n\n") else ("\n" if old.endswith("\n") else "\n\n")
            new = old + sep + text + "\n"
    if new != old:
        tmp = doc_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(new)
        os.replace(tmp, doc_path)
    return new != old


def display_path(path, doc_path):
    """The JSON's path as the page shows it: relative to the repository root."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/perf/ -> root
    rel = os.path.relpath(os.path.abspath(path), root)
    return os.path.basename(path) if rel.startswith("..") else rel


def main(doc=__doc__, make_section=None, markers=(BEGIN, END), name="selection"):
    """The command line; perf_sketch.py calls it with its own docstring, section, markers and name."""
    make_section = make_section or section
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    ap.add_argument("json", help="Google Benchmark JSON output (docs/perf/%s.json)" % name)
    ap.add_argument("doc", nargs="?", help="Markdown file to rewrite (docs/performance.md)")
    ap.add_argument("--annotate", action="store_true", help="add machine details to the JSON, then exit")
    ap.add_argument("--command", help="with --annotate: the benchmark command line, as the page shows it")
    ap.add_argument("--build-dir", help="with --annotate: the CMake build folder")
    args = ap.parse_args()
    if args.annotate:
        if args.command is None:
            die("--annotate needs --command")
        annotate(args.json, args.command, args.build_dir)
        return 0
    if args.doc is None:
        die("usage: %s RESULTS.json DOC.md   (or --annotate RESULTS.json --command ...)" % PROG)
    with open(args.json) as f:
        run = Run(json.load(f))
    changed = rewrite_doc(args.doc, make_section(run, display_path(args.json, args.doc)), *markers)
    print("%s: %s %s" % (PROG, args.doc, "rewritten" if changed else "unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
