#!/usr/bin/env python3
"""Overlap results of docs/perf/overlap.md from docs/perf/overlap.json.

    scripts/perf/perf_overlap.py docs/perf/overlap.json docs/perf/overlap.md

rewrites the part of the Markdown file between
  <!-- BEGIN overlap-results --> and <!-- END overlap-results -->
from the JSON file alone (appending the markers when the file has neither;
text outside them is left alone), so running it twice gives the same page.
Without the JSON file the section says that nothing was measured yet and
gives the command that measures it.

    scripts/perf/perf_overlap.py --check docs/perf/overlap.json docs/perf/overlap.md

changes nothing: exit status 0 when the section is what the JSON gives,
byte for byte, 1 (with a diff) when it is not (CTest docs_perf_sections).

    scripts/perf/perf_overlap.py --collect <runs folder> --out <json>

is the step of scripts/perf/perf_overlap.sh that gathers its runs into one
JSON file: for each run.<progress>_t<tests>.meta (progress mode, test
calls, load averages before and after, exit status, times, the command) the
run's cc_coll_perf -N -J output (run.<...>.json; on failure the end of its
log instead), with the date, the commit, the machine and the settings
(CC_OVL_HOSTS, CC_OVL_RATE, CC_OVL_ARGS from the environment).
"""

import argparse
import datetime
import difflib
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_driver as drv  # noqa: E402  (scripts/perf/perf_driver.py)
import perf_plot  # noqa: E402  (machine_info; matplotlib is imported only to plot)

PROG = "perf_overlap.py"
BEGIN = "<!-- BEGIN overlap-results -->"
END = "<!-- END overlap-results -->"
JSON_REL = "docs/perf/overlap.json"
# The page the section lies in, relative to the checkout (main sets it from its argument).
DOC_REL = "docs/perf/overlap.md"
TARGET_BYTES = 64 << 20
TARGET_PCT = 80.0
LOSSY = ("topk", "sketch", "lowrank")
# The revision before the non-blocking collectives, for "blocking calls no slower than before".
BEFORE_NONBLOCKING = "5a7fcba"
SHAPING = ("tc tbf at the rate on each host's egress and on the switch port towards it (both directions); "
           "bucket max(1 ms at the rate, 64 KiB), queue up to 20 ms; MTU 1500. MPI: ob1 over TCP only, "
           "--bind-to none, mpi_yield_when_idle 1 when hosts > cores (docs/cluster.md)")


def die(msg):
    raise SystemExit(PROG + ": " + msg)


# --------------------------------------------------------------------------
# --collect


def git(*args):
    try:
        return subprocess.run(["git", "-C", drv.ROOT] + list(args), capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


ABS_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|tmp|usr|opt)/\S*")


def scrub(line):
    """A log line without this machine's paths: the checkout's relative, others reduced to their last part."""
    line = line.replace(drv.ROOT + "/", "")
    return ABS_PATH.sub(lambda m: "<...>/" + os.path.basename(m.group(0).rstrip("/")), line)


def collect(folder, out_path):
    runs = []
    for meta_path in sorted(glob.glob(os.path.join(folder, "run.*.meta"))):
        base = meta_path[: -len(".meta")]
        with open(meta_path) as f:
            run = json.load(f)
        try:
            with open(base + ".json") as f:
                output = json.load(f)
            if output.get("tool") != "cc_coll_perf" or not output.get("results"):
                raise ValueError("not cc_coll_perf output with results")
            run["output"] = output
        except OSError as e:
            run["output"] = None
            run["error"] = "no output: %s: %s" % (os.path.basename(base + ".json"), e.strerror)
        except ValueError as e:
            run["output"] = None
            run["error"] = "no valid JSON in %s: %s" % (os.path.basename(base + ".json"), e)
        if run["output"] is None:
            try:
                with open(base + ".log") as f:
                    run["log_tail"] = [scrub(x) for x in f.read().splitlines()[-20:]]
            except OSError:
                pass
        runs.append(run)
    if not runs:
        die("no run.*.meta in %s" % folder)
    runs.sort(key=lambda r: (r.get("start", 0), r["progress"], r["test_calls"]))
    commit = git("rev-parse", "--short", "HEAD")
    if commit and git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    env = os.environ
    doc = {
        "tool": "perf_overlap",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit or "unknown",
        "machine": perf_plot.machine_info(),
        "hosts": int(env.get("CC_OVL_HOSTS", "2")),
        "rate": env.get("CC_OVL_RATE", "1gbit"),
        "perf_args": env.get("CC_OVL_ARGS", ""),
        "shaping": SHAPING,
        "runs": runs,
    }
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, out_path)
    print("%s: %d runs -> %s" % (PROG, len(runs), out_path))


# --------------------------------------------------------------------------
# formatting


def fmt_time(us):
    if us is None:
        return "–"
    if us >= 1e6:
        return "%s s" % drv.g3(us / 1e6)
    if us >= 1e3:
        return "%s ms" % drv.g3(us / 1e3)
    return "%s µs" % drv.g3(us)


def fmt_pct(v):
    return "–" if v is None else "%.0f %%" % v


def fmt_load(la):
    return " ".join("%.2f" % v for v in la) if la else "?"


def run_label(run):
    calls = run["test_calls"]
    return "progress %s, %s" % (run["progress"], "no test calls" if calls == 0 else
                                "%d test call%s" % (calls, "" if calls == 1 else "s"))


def rows_of(run):
    """{(bytes, method): row} of the run's rows in its one in-place mode (in place when there are any)."""
    out = run.get("output") or {}
    results = out.get("results") or []
    in_place = any(r.get("in_place") for r in results)
    return {(r["bytes"], r["method"]): r for r in results if bool(r.get("in_place")) == in_place}


def ordered_keys(runs):
    """(bytes, method) keys of the runs' rows: by size, then methods in the order cc_coll_perf measured them."""
    order, keys = [], set()
    for run in runs:
        for r in ((run.get("output") or {}).get("results") or []):
            if r["method"] not in order:
                order.append(r["method"])
        keys.update(rows_of(run))
    return sorted(keys, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else len(order), k[1]))


def nb(row, key):
    o = (row or {}).get("nonblocking") or {}
    return o.get(key)


# --------------------------------------------------------------------------
# the section


def intro_lines():
    return [
        "`cc_coll_perf -N` measures `cc_coll_iallreduce` (and, in the rows `mpi`, `MPI_Iallreduce`) the way "
        "OSU's `osu_iallreduce` measures `MPI_Iallreduce`. For each method and size, after the blocking call "
        "(`cc_coll_allreduce`, timed in the same run): the **pure** communication time, iallreduce and at once "
        "wait; then iallreduce, a **dummy compute** on the caller's thread for the rank's own pure time (OSU's "
        "25 × 25 float kernel, repeated until that much wall-clock time has passed; with `-t N`, N calls to "
        "`cc_coll_test` spread over it), and wait. **Overall** is the time of the three, **init**, **test** and "
        "**wait** the time in the calls, **compute** the dummy compute's without the test calls. Every time is "
        "averaged over the timed iterations on each rank, then over the ranks, and",
        "",
        "    overlap = max(0, 100 × (1 − (overall − compute) / pure)) %",
        "",
        "is 100 when the collective completed entirely behind the compute and 0 when it added its whole pure "
        "time to it. **Compute rate** is the dummy compute's work rate during the overlapped run against its rate "
        "with nothing in flight, right before: below 100 % when the collective took CPU time from the caller's "
        "thread (the progress thread on a shared core, or work done inside test calls), which the overlap cannot "
        "show, since the compute runs for a set wall-clock time, as in OSU.",
        "",
        "With `CC_COLL_PROGRESS=thread` the library's progress thread runs the compression, the MPI calls and the "
        "decompression while the caller computes (`cc_coll_perf -N` initialises MPI with "
        "`MPI_THREAD_MULTIPLE`); with `caller` a request advances only inside `cc_coll_test` and `cc_coll_wait`, "
        "so without test calls little more than its first step can overlap. Every emulated host shares the "
        "machine's cores: with 2 hosts on 2 cores, the two ranks' dummy computes and their two progress threads "
        "compete for them.",
        "",
    ]


def command_block():
    return ["```sh",
            "scripts/perf/perf_overlap.sh      # as root, on an otherwise idle machine; --help",
            "```"]


def placeholder_lines():
    return ["**Not measured yet.** As root on an otherwise idle machine,", ""] + command_block() + [
        "",
        "measures it on the emulated cluster (2 hosts at 1 Gbit/s; 4, 16 and 64 MiB of f32 per rank; every "
        "method: NONE, TOPK at density 0.01, SKETCH, LOWRANK at rank 4 on the near-square view of each buffer; "
        "the progress thread, then the caller without and with 10 test calls), writes `%s` and rewrites this "
        "section from it; `python3 scripts/perf/perf_overlap.py %s %s` redoes the section from "
        "the JSON alone." % (JSON_REL, JSON_REL, DOC_REL),
    ]


def json_link():
    """The JSON file's path relative to the page's folder, for a Markdown link."""
    return os.path.relpath(JSON_REL, os.path.dirname(DOC_REL) or ".")


def setting_lines(data):
    lines = []
    mach = data.get("machine") or {}
    lines.append("- Date: %s; commit %s; raw results: [`%s`](%s) (every run's cc_coll_perf "
                 "output, its command and load averages)." % (data.get("date_utc", "?"), data.get("commit", "?"),
                                                              JSON_REL, json_link()))
    lines.append("- Machine: %s, %s cores, %s GiB; %s; kernel %s; %s." % (
        mach.get("cpu", "?"), mach.get("cores", "?"), mach.get("memory_gib", "?"), mach.get("os", "?"),
        mach.get("kernel", "?"), mach.get("mpi", "?")))
    lines.append("- Links: %d hosts (one rank each), %s per host, each direction; %s." % (
        data.get("hosts", 0), data.get("rate", "?"), data.get("shaping", "")))
    first = next((r["output"] for r in data["runs"] if r.get("output")), None)
    if first:
        nbs = first.get("nonblocking") or {}
        lines.append("<!-- versions: recorded run of cc_coll_perf -N, %s -->" % JSON_REL)
        lines.append("- cc_coll_perf of libcc_coll %s: dtype %s, op %s, %d timed iterations after %d warm-up "
                     "(each phase), topk density %s, lowrank rank %s, error feedback %s, %s, input data %s; "
                     "MPI thread level %s." % (
                         first.get("version", "?"), first.get("dtype", "?"), first.get("op", "?"),
                         first.get("iters", 0), first.get("warmup", 0), first.get("density"),
                         first.get("lowrank_rank", "?"), "on" if first.get("ef") else "off",
                         "in place" if any(r.get("in_place") for r in first.get("results", [])) else "out of place",
                         first.get("data", "?"), nbs.get("thread_level", "?")))
        lines.append("<!-- versions: end -->")
    cores = mach.get("cores") or 1
    busy = [r for r in data["runs"]
            if max((r.get("load_before") or [0])[0], (r.get("load_after") or [0])[0]) > 0.5 * cores]
    lines += ["", "| run | load average before (1, 5, 15 min) | after | exit status | duration |",
              "| --- | --- | --- | ---: | ---: |"]
    for r in data["runs"]:
        lines.append("| %s | %s | %s | %d | %d s |" % (run_label(r), fmt_load(r.get("load_before")),
                                                       fmt_load(r.get("load_after")), r.get("exit", -1),
                                                       r.get("end", 0) - r.get("start", 0)))
    if busy:
        lines += ["", "**Warning**: the 1-minute load average was above half the %d cores before or after %s "
                  "(%s): other work shared the machine, and the times, the compressed methods' above all, are "
                  "inflated and noisy." % (cores, "a run" if len(busy) == 1 else "%d runs" % len(busy),
                                           "; ".join(run_label(r) for r in busy))]
    lines += ["", "Commands, one cluster session each, from the checkout's root:", "", "```sh"]
    lines += [r.get("command", "?") for r in data["runs"]]
    lines += ["```", "",
              "run by `scripts/perf/perf_overlap.sh`; `python3 scripts/perf/perf_overlap.py %s %s` "
              "regenerates this section from the JSON alone." % (JSON_REL, DOC_REL)]
    return lines


def target_lines(data):
    goal = ("Target: at least %.0f %% overlap for 64 MiB of f32 per rank at 1 Gbit/s on 2 hosts, for every lossy "
            "method (%s), with a compute phase about as long as the communication." % (TARGET_PCT, ", ".join(LOSSY)))
    if data.get("hosts") != 2 or str(data.get("rate", "")).lower() != "1gbit":
        return [goal, "", "**Not measured** (this run: %s hosts at %s)." % (data.get("hosts"), data.get("rate"))]
    lines = [goal, "", "| 64 MiB | " + " | ".join(LOSSY) + " | target |", "| --- |" + " ---: |" * len(LOSSY) + " --- |"]
    verdicts = []
    for run in data["runs"]:
        rows = rows_of(run)
        cells, ok, measured = [], True, True
        for m in LOSSY:
            row = rows.get((TARGET_BYTES, m))
            ov = nb(row, "overlap_pct")
            if ov is None:
                cells.append("–")
                measured = False
                continue
            cells.append("%s (compute rate %s)" % (fmt_pct(ov), fmt_pct(nb(row, "compute_rate_pct"))))
            ok = ok and ov >= TARGET_PCT
        verdict = "not measured" if not measured else ("**met**" if ok else "not met")
        lines.append("| %s | %s | %s |" % (run_label(run), " | ".join(cells), verdict))
        verdicts.append((run, measured, ok))
    met = [run_label(r) for r, measured, ok in verdicts if measured and ok]
    lines.append("")
    if met:
        lines.append("**Met** with %s." % "; ".join(met))
    elif any(measured for _, measured, _ in verdicts):
        lines.append("**Not met** in any run.")
    else:
        lines.append("**Not measured** (no 64 MiB rows).")
    return lines


def blocking_lines(data):
    runs = [r for r in data["runs"] if r.get("output")]
    if not runs:
        return []
    keys = ordered_keys(runs)
    head = "| size | method | " + " | ".join("blocking, %s" % run_label(r) for r in runs) + " |"
    lines = ["The blocking calls of the same runs, time per call (speedup over `MPI_Allreduce` of the same run): "
             "the non-blocking work must not slow them, and runs with the progress thread initialise MPI with "
             "`MPI_THREAD_MULTIPLE`. The comparison with the revision before the non-blocking collectives, for "
             "the same sizes and methods, is `scripts/perf/perf_compare.sh %s HEAD` (see \"Architecture "
             "refactor: before and after\" below for the method)." % BEFORE_NONBLOCKING, "",
             head, "| ---: | --- |" + " ---: |" * len(runs)]
    for k in keys:
        cells = []
        for r in runs:
            row = rows_of(r).get(k)
            if row is None:
                cells.append("–")
                continue
            sp = row.get("speedup")
            cells.append("%s (%s×)" % (fmt_time(row.get("time_us")), drv.ratio(sp)) if sp else
                         fmt_time(row.get("time_us")))
        lines.append("| %s | %s | %s |" % (drv.bytes_name(k[0]), k[1], " | ".join(cells)))
    return lines


def run_table(run):
    lines = ["### %s" % run_label(run).capitalize(), ""]
    out = run.get("output")
    if not out:
        lines.append("**Failed** (exit status %d): %s." % (run.get("exit", -1), run.get("error", "no results")))
        tail = run.get("log_tail") or []
        if tail:
            lines += ["", "```"] + tail + ["```"]
        return lines
    nbs = out.get("nonblocking") or {}
    lines.append("Progress mode used: %s (CC_COLL_PROGRESS=%s, MPI thread level %s), %s test calls." % (
        nbs.get("progress", "?"), nbs.get("progress_setting", "?"), nbs.get("thread_level", "?"),
        nbs.get("test_calls", "?")))
    lines += ["", "| size | method | blocking | pure | init | compute | test | wait | overall | overlap | "
              "compute rate |", "| ---: | --- |" + " ---: |" * 9]
    rows = rows_of(run)
    wrong = []
    for k in ordered_keys([run]):
        r = rows[k]
        lines.append("| %s | %s | %s |" % (drv.bytes_name(k[0]), k[1], " | ".join([
            fmt_time(r.get("time_us")), fmt_time(nb(r, "pure_us")), fmt_time(nb(r, "init_us")),
            fmt_time(nb(r, "compute_us")), fmt_time(nb(r, "test_us")), fmt_time(nb(r, "wait_us")),
            fmt_time(nb(r, "overall_us")), fmt_pct(nb(r, "overlap_pct")), fmt_pct(nb(r, "compute_rate_pct"))])))
        for what, v in (("blocking", r.get("wrong")), ("non-blocking", nb(r, "wrong"))):
            if v:
                wrong.append("%s %s at %s: %d" % (k[1], what, drv.bytes_name(k[0]), v))
    if wrong:
        lines += ["", "**Check failed**: elements differing from the reference: " + ", ".join(wrong) + "."]
    if run.get("exit", 0) != 0:
        lines += ["", "cc_coll_perf exited with status %d." % run["exit"]]
    return lines


def section(data):
    out = [BEGIN,
           "<!-- Generated by scripts/perf/perf_overlap.py from %s (scripts/perf/perf_overlap.sh); do not edit "
           "by hand between these markers. -->" % JSON_REL,
           "",
           "## Overlap of the non-blocking allreduce",
           ""]
    out += intro_lines()
    if data is None:
        out += placeholder_lines()
    else:
        out += setting_lines(data)
        out += ["", "### Target", ""] + target_lines(data)
        bl = blocking_lines(data)
        if bl:
            out += ["", "### Blocking calls", ""] + bl
        for run in data["runs"]:
            out += [""] + run_table(run)
    out += ["", END]
    return drv.joined_without_absolute_paths(out)


# --------------------------------------------------------------------------
# the page


def load(json_path):
    """The JSON, or None when the file does not exist."""
    if not os.path.exists(json_path):
        return None
    with open(json_path) as f:
        data = json.load(f)
    if data.get("tool") != "perf_overlap" or not isinstance(data.get("runs"), list):
        die("%s is not scripts/perf/perf_overlap.sh's output" % json_path)
    return data


def new_page(old, text):
    b = old.find(BEGIN)
    e = old.find(END, b + len(BEGIN)) if b >= 0 else -1
    if b >= 0 and e >= 0:
        return old[:b] + text + old[e + len(END):]
    if b >= 0 or old.find(END) >= 0:
        die("the page has only one of the markers %s / %s; fix it by hand" % (BEGIN, END))
    sep = "" if old.endswith("\n\n") else ("\n" if old.endswith("\n") else "\n\n")
    return old + sep + text + "\n"


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("json", nargs="?", help="the results (%s)" % JSON_REL)
    ap.add_argument("doc", nargs="?", help="the Markdown file (docs/perf/overlap.md)")
    ap.add_argument("--check", action="store_true", help="compare only: exit status 1 when the section differs")
    ap.add_argument("--collect", metavar="FOLDER", help="gather perf_overlap.sh's runs from FOLDER")
    ap.add_argument("--out", metavar="JSON", help="with --collect: the JSON file to write")
    args = ap.parse_args()
    if args.collect:
        if not args.out:
            ap.error("--collect needs --out")
        collect(args.collect, args.out)
        return 0
    if args.json is None or args.doc is None:
        ap.error("the JSON file and the Markdown file are required (or --collect)")
    global DOC_REL
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rel = os.path.relpath(os.path.abspath(args.doc), root)
    DOC_REL = args.doc if rel.startswith("..") else rel
    text = section(load(args.json))
    with open(args.doc) as f:
        old = f.read()
    new = new_page(old, text)
    if args.check:
        if new == old:
            print("%s: the overlap-results section of %s is what %s gives" % (PROG, args.doc, args.json))
            return 0
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), args.doc,
                                                   "regenerated from " + args.json))
        print("%s: the overlap-results section of %s differs from what %s gives; rewrite it with: python3 "
              "scripts/perf/perf_overlap.py %s %s" % (PROG, args.doc, args.json, args.json, args.doc))
        return 1
    if new != old:
        tmp = args.doc + ".tmp"
        with open(tmp, "w") as f:
            f.write(new)
        os.replace(tmp, args.doc)
    print("%s: %s %s" % (PROG, args.doc, "rewritten" if new != old else "unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
