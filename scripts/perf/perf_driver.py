"""The driver the three benchmark generators share (a module, not run).

scripts/perf/perf_selection.py, perf_sketch.py and perf_lowrank.py each turn
one Google Benchmark program's JSON output into a section of
docs/perf/kernels.md. Everything but the tables and the prose is here:

  Generator            what a generator is: its name (the markers
                       <!-- BEGIN <name>-results --> / <!-- END <name>-results -->,
                       docs/perf/<name>.json, scripts/perf/perf_<name>.sh),
                       the program, the benchmark flags, the environment
                       it runs in, and the function that writes its section
  main                 the command line: --run (run the program, annotate
                       the JSON, rewrite the page), --annotate,
                       JSON DOC (rewrite the page from the JSON alone), or
                       --check JSON DOC (compare only: CTest docs_perf_<name>)
  run_benchmark        the --run step: the program from the build folder,
                       the load check before it, the command as the page
                       shows it (relative to the checkout, never absolute)
  annotate             what Google Benchmark does not record, added to the
                       JSON's context: CPU model, load average at the end,
                       OS, compiler, CMake, Google Benchmark and build type,
                       the command
  Run                  the JSON read back: medians and "cv" aggregates
  opening_lines, command_lines, regenerate_lines, machine_lines,
  load_lines, load_range, closing
                       the lines every section opens and ends with
  g3, pct, ratio, span, size_name, bytes_name
                       number formatting
  joined_without_absolute_paths, rewrite_doc, display_path
                       writing the section between its markers

scripts/perf/perf_<name>.sh (through perf_bench.sh) builds the program and
calls scripts/perf/perf_<name>.py --run.
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

# The checkout: this file is scripts/perf/perf_driver.py.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLUSTER_BEGIN = "<!-- BEGIN cluster-results -->"
MI = 1 << 20

PROG = "perf_driver.py"  # die()'s prefix; main() sets the generator's


def die(msg):
    raise SystemExit(PROG + ": " + msg)


class Generator:
    """One generator: perf_<name>.py, run by perf_<name>.sh, writing <name>-results from docs/perf/<name>.json.

    program      the benchmark program in <build>/bench/
    section      section(run, json_rel) -> the text between and including the markers
    repetitions, min_time
                 --benchmark_repetitions and --benchmark_min_time of the recorded run
    env          variables set for the run, shown in front of the command on the page
    quiet_env    variables also set for the run, not shown
    doc          the generator's docstring (its --help)
    """

    def __init__(self, name, program, section, repetitions, min_time, env=(), quiet_env=(), doc=""):
        self.name = name
        self.program = program
        self.section = section
        self.repetitions = repetitions
        self.min_time = min_time
        self.env = tuple(env)
        self.quiet_env = tuple(quiet_env)
        self.doc = doc
        self.prog = "perf_%s.py" % name
        self.script = "perf_%s.sh" % name
        self.begin = "<!-- BEGIN %s-results -->" % name
        self.end = "<!-- END %s-results -->" % name
        self.json = "docs/perf/%s.json" % name


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


def load_average():
    with open("/proc/loadavg") as f:
        return [float(v) for v in f.read().split()[:3]]


def annotate(json_path, command, build_dir):
    """Adds the cc_coll_* keys to the JSON's context. With a build folder outside the checkout, the context's
    "executable" loses that folder's absolute path too, as the recorded command shows it ($CC_COLL_BUILD_DIR)."""
    with open(json_path) as f:
        d = json.load(f)
    ctx = d.setdefault("context", {})
    extra = {
        "cc_coll_command": command,
        "cc_coll_cpu_model": cpu_model(),
        "cc_coll_load_avg_after": load_average(),
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
    if build_dir:
        exe = ctx.get("executable", "")
        bdir = os.path.abspath(build_dir)
        if os.path.isabs(exe) and exe.startswith(bdir + os.sep) and not bdir.startswith(ROOT + os.sep):
            ctx["executable"] = "$CC_COLL_BUILD_DIR" + exe[len(bdir):]
    tmp = json_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    os.replace(tmp, json_path)


# --------------------------------------------------------------------------
# --run


def checkout_relative(path):
    """path relative to the checkout when it lies inside it, else None."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return None if rel == ".." or rel.startswith(".." + os.sep) else rel


def run_benchmark(gen, build_dir, json_path, doc_path, min_time=None):
    """Runs the program from the checkout's root, annotates its JSON and rewrites the page's section."""
    build_dir = os.path.abspath(build_dir)
    json_path = os.path.abspath(json_path)
    doc_path = os.path.abspath(doc_path)
    exe = os.path.join(build_dir, "bench", gen.program)
    if not os.access(exe, os.X_OK):
        die("%s was not built (is libbenchmark-dev installed?)" % exe)
    # The page shows the command as it ran: relative to the checkout when it can be, else through
    # $CC_COLL_BUILD_DIR (the page never shows absolute paths).
    rel = checkout_relative(exe)
    bench = rel if rel is not None else exe
    shown_bench = rel if rel is not None else "$CC_COLL_BUILD_DIR/bench/" + gen.program
    if re.search(r"\s", bench):
        die("white space in the build folder's path is not supported: %s" % bench)
    out = checkout_relative(json_path) or json_path
    args = ["--benchmark_repetitions=%d" % gen.repetitions, "--benchmark_report_aggregates_only=true",
            "--benchmark_min_time=%s" % (min_time or gen.min_time),
            "--benchmark_out=%s" % out, "--benchmark_out_format=json"]
    shown = " ".join(["%s=%s" % kv for kv in gen.env] + [shown_bench] + args)

    os.chdir(ROOT)
    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    ncpu = os.cpu_count() or 1
    load1 = load_average()[0]
    if load1 > 0.5 * ncpu:
        sys.stderr.write("%s: warning: load average %.2f on %d CPUs: other work is running; the rates use CPU "
                         "time, but wall-clock times will be longer\n" % (gen.script, load1, ncpu))
    print("== " + shown, flush=True)
    env = dict(os.environ)
    env.update(gen.env + gen.quiet_env)
    rc = subprocess.call([bench] + args, env=env)
    if rc != 0:
        sys.stderr.write("%s: %s exited with status %d\n" % (gen.prog, gen.program, rc))
        return rc if rc > 0 else 1
    annotate(json_path, shown, build_dir)
    doc_shown = checkout_relative(doc_path) or doc_path
    print("== python3 scripts/perf/%s %s %s" % (gen.prog, out, doc_shown), flush=True)
    return regenerate(gen, json_path, doc_path, doc_shown)


# The page being written, relative to the checkout, as the sections name it.
DOC_REL = os.path.join("docs", "perf", "kernels.md")


def set_doc(doc_path):
    global DOC_REL
    DOC_REL = checkout_relative(doc_path) or doc_path


def check(gen, json_path, doc_path):
    """Changes nothing: 0 when the generator's section of doc_path is what the JSON gives, byte for byte, else 1
    with a diff (CTest docs_perf_<name>)."""
    import difflib

    set_doc(doc_path)

    with open(json_path) as f:
        run = Run(json.load(f))
    text = gen.section(run, display_path(json_path, doc_path))
    with open(doc_path) as f:
        old = f.read()
    b = old.find(gen.begin)
    e = old.find(gen.end, b + len(gen.begin)) if b >= 0 else -1
    if b < 0 or e < 0:
        print("%s: %s lacks the markers %s / %s" % (gen.prog, doc_path, gen.begin, gen.end))
        return 1
    new = old[:b] + text + old[e + len(gen.end):]
    if new == old:
        print("%s: the %s-results section of %s is what %s gives" % (gen.prog, gen.name, doc_path, json_path))
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), doc_path,
                                               "regenerated from " + json_path))
    print("%s: the %s-results section of %s differs from what %s gives; rewrite it with: python3 "
          "scripts/perf/%s %s %s" % (gen.prog, gen.name, doc_path, json_path, gen.prog, json_path, doc_path))
    return 1


def regenerate(gen, json_path, doc_path, doc_shown=None):
    """Rewrites the generator's section of doc_path from the JSON alone."""
    set_doc(doc_path)
    with open(json_path) as f:
        run = Run(json.load(f))
    changed = rewrite_doc(doc_path, gen.section(run, display_path(json_path, doc_path)), gen.begin, gen.end)
    print("%s: %s %s" % (gen.prog, doc_shown or doc_path, "rewritten" if changed else "unchanged"))
    return 0


# --------------------------------------------------------------------------
# reading the JSON, formatting


def g3(v):
    """Three significant digits, no exponent for the magnitudes used here."""
    if v == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(v)))))
    return "%.*f" % (digits, round(v, digits))


def ratio(v):
    """A throughput ratio: two decimals below 10, three significant digits above."""
    return "%.2f" % v if v < 10 else g3(v)


def span(values, fmt):
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else "%s–%s" % (fmt(lo), fmt(hi))


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


def mcp(n):
    """BM_memcpy of n fp32 values, the yardstick every program runs (bench/bench_common.hpp)."""
    return "BM_memcpy/n:%d" % n


# --------------------------------------------------------------------------
# the lines every section opens with


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


def load_lines(run, cv_groups):
    """The load and CPU-time lines; cv_groups: ((run-name prefixes, what the rows are), ...), one
    coefficient-of-variation bound per group."""
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


def load_range(run):
    """(lowest, highest 1-minute load average of the start and the end, CPUs, busy) or None when not recorded;
    busy: the highest above half the CPUs."""
    c = run.ctx
    ncpu = c.get("num_cpus")
    loads = [la[0] for la in (c.get("load_avg"), c.get("cc_coll_load_avg_after")) if la]
    if not (ncpu and loads):
        return None
    return min(loads), max(loads), ncpu, max(loads) > 0.5 * ncpu


def opening_lines(gen, json_rel):
    """The begin marker and the "Generated by" comment."""
    return [gen.begin,
            "<!-- Generated by scripts/perf/%s from %s (scripts/perf/%s); "
            "do not edit by hand between these markers. -->" % (gen.prog, json_rel, gen.script)]


def command_lines(run, gen):
    """"One run of scripts/perf/<script>, which ran:" and the command as recorded by --annotate."""
    c = run.ctx
    command = c.get("cc_coll_command")
    return ["One run of `scripts/perf/%s`, which ran:" % gen.script if command else "One run of the benchmark:",
            "",
            "```sh",
            command if command else "%s --benchmark_repetitions=3 --benchmark_report_aggregates_only=true "
            "(command line not recorded in the JSON)" % c.get("executable", gen.program),
            "```",
            ""]


def regenerate_lines(gen, json_rel):
    """How to redo the section from the JSON alone (after command_lines)."""
    return ["then `python3 scripts/perf/%s %s %s`, which regenerates this section "
            "from the JSON alone (`CC_COLL_SKIP_APT=1 scripts/perf/%s` skips apt-get; "
            "`CC_COLL_BUILD_DIR` sets the build folder)." % (gen.prog, json_rel, DOC_REL, gen.script),
            ""]


def closing(gen, out):
    """out, the end marker added, as one string; refuses absolute paths."""
    return joined_without_absolute_paths(out + ["", gen.end])


# --------------------------------------------------------------------------
# writing the page


def joined_without_absolute_paths(out):
    for line in out:
        if re.search(r"(^|[\s`(\"'])/(work|home|root|tmp|usr|opt)/", line):
            die("refusing to write an absolute path into the page: %s" % line)
    return "\n".join(out)


def rewrite_doc(doc_path, text, begin, end):
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
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return os.path.basename(path) if rel.startswith("..") else rel


# --------------------------------------------------------------------------
# the command line


def main(gen):
    global PROG
    PROG = gen.prog
    doc = gen.doc or ""
    ap = argparse.ArgumentParser(prog=gen.prog, description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    ap.add_argument("json", nargs="?",
                    help="Google Benchmark JSON output (%s; the default with --run)" % gen.json)
    ap.add_argument("doc", nargs="?", help="Markdown file to rewrite (docs/perf/kernels.md)")
    ap.add_argument("--run", action="store_true",
                    help="run %s from --build-dir first, from the checkout's root, and annotate its JSON "
                         "(what scripts/perf/%s does after building)" % (gen.program, gen.script))
    ap.add_argument("--min-time", help="with --run: --benchmark_min_time instead of %s (a quick check)"
                                       % gen.min_time)
    ap.add_argument("--annotate", action="store_true", help="add machine details to the JSON, then exit")
    ap.add_argument("--check", action="store_true",
                    help="with JSON DOC: change nothing; exit status 1 (with a diff) when the section is not "
                         "what the JSON gives")
    ap.add_argument("--command", help="with --annotate: the benchmark command line, as the page shows it")
    ap.add_argument("--build-dir", help="the CMake build folder (--run: where the program is [build]; "
                                        "--annotate: where the compiler and build type are read)")
    args = ap.parse_args()
    if args.run:
        return run_benchmark(gen, args.build_dir or os.path.join(ROOT, "build"),
                             args.json or os.path.join(ROOT, gen.json),
                             args.doc or os.path.join(ROOT, "docs", "perf", "kernels.md"), args.min_time)
    if args.json is None:
        ap.error("the JSON file is required (or --run)")
    if args.annotate:
        if args.command is None:
            die("--annotate needs --command")
        annotate(args.json, args.command, args.build_dir)
        return 0
    if args.doc is None:
        ap.error("the Markdown file to rewrite is required (or --annotate)")
    if args.check:
        return check(gen, args.json, args.doc)
    return regenerate(gen, args.json, args.doc)
