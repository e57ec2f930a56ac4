#!/usr/bin/env python3
"""Selection results of docs/perf/kernels.md from one cc_coll_bench_topk run.

    scripts/perf/perf_selection.py docs/perf/selection.json docs/perf/kernels.md

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

    scripts/perf/perf_selection.py --run [--build-dir build] [--min-time SECONDS]

first runs the program from the build folder (from the repository root,
with the flags above, --benchmark_min_time=0.5, into
docs/perf/selection.json) and annotates its JSON; scripts/perf/perf_selection.sh
builds the program and calls this.

    scripts/perf/perf_selection.py --annotate docs/perf/selection.json \\
        --command '<the benchmark command>' [--build-dir build]

adds what Google Benchmark does not record to the JSON's "context" (keys
starting with cc_coll_): the /proc/cpuinfo model name, the load average now
(the end of the run), the OS, the compiler, CMake and Google Benchmark
versions and libcc_coll's CMAKE_BUILD_TYPE, and the command line.

The command line, the run, the JSON's annotations, the machine and load
lines and the formatting are scripts/perf/perf_driver.py's (shared with
perf_sketch.py and perf_lowrank.py).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_driver as drv  # noqa: E402  (scripts/perf/perf_driver.py)

MI = drv.MI
SIZES = (1 * MI, 16 * MI)
PER_MILLE = (1, 10, 100)
N16 = 16 * MI
TARGET_GBS = 1.0


# --------------------------------------------------------------------------
# the tables


def sel(w, n, pm):
    return "BM_topk_select<%s>/n:%d/per_mille:%d" % (w, n, pm)


def full(w, n, pm):
    return "BM_topk_select_full<%s>/n:%d/per_mille:%d" % (w, n, pm)


def enc(w, n, pm):
    return "BM_topk_sparse_encode<%s>/n:%d/per_mille:%d" % (w, n, pm)


def path_label(b):
    if b.get("sampled", 0) < 0.5:
        return "full"
    if b.get("fell_back", 0) > 0:
        return "sampled, fell back to full" if b["fell_back"] >= 0.5 else "sampled, fell back sometimes"
    return "sampled"


# drv.load_lines' coefficient-of-variation groups: (run-name prefixes, what the rows are).
SELECTION_CV_GROUPS = ((("BM_topk_select<", "BM_topk_select_full<"), "every selection row"),
                       (("BM_topk_sparse_encode<",), "the compress-step rows"),
                       (("BM_memcpy/",), "`memcpy`"))


def select_table(run):
    out = ["| n | density | k | path | candidates | selection CPU time (ms) | selection GB/s "
           "| memcpy GB/s (same n) | selection / memcpy |",
           "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for n in SIZES:
        m = run.gbs(drv.mcp(n))
        for pm in PER_MILLE:
            name = sel("float", n, pm)
            b = run.get(name)
            cand = "%d" % round(b["candidates"]) if b.get("sampled", 0) >= 0.5 else "–"
            out.append("| %s | %g | %d | %s | %s | %s | %s | %s | %.2f |" % (
                drv.size_name(n), pm / 1000, round(b["k"]), path_label(b), cand, drv.g3(run.ms(name)),
                drv.g3(run.gbs(name)), drv.g3(m), run.gbs(name) / m))
    return out


def select_prose(run):
    m16 = run.gbs(drv.mcp(N16))
    r = {pm: run.gbs(sel("float", N16, pm)) for pm in PER_MILLE}
    met = r[10] >= TARGET_GBS
    out = ["**Target: at least %g GB/s of fp32 input per core for density 0.01 on 16Mi elements — %s**: "
           "%s GB/s, %.2f of the `memcpy` bandwidth measured in the same run."
           % (TARGET_GBS, "met" if met else "not met", drv.g3(r[10]), r[10] / m16)]
    others = ["density %g %s %s GB/s (%s %g GB/s)"
              % (pm / 1000, verb, drv.g3(r[pm]), "≥" if r[pm] >= TARGET_GBS else "<", TARGET_GBS)
              for pm, verb in ((1, "runs at"), (100, "at"))]
    out[0] += " At 16Mi, " + " and ".join(others) + "."
    paths = {path_label(run.get(sel("float", n, pm))) for n in SIZES for pm in PER_MILLE}
    if paths == {"sampled"}:
        out[0] += " Every fp32 row took the sampled path and none fell back."
    out.append("")
    # Is the 1Mi working set (source and destination of memcpy) inside the last-level cache?
    llc = max((c["size"] for c in run.ctx.get("caches", []) if c.get("type") != "Instruction"), default=0)
    if llc and 2 * 4 * SIZES[0] <= llc:
        m1 = run.gbs(drv.mcp(SIZES[0]))
        out.append("At 1Mi the buffers (4 MiB each) fit in the %s last-level cache, so `memcpy` runs at cache "
                   "rather than DRAM bandwidth (%s against %s GB/s at 16Mi) and the ratio is lower; compare "
                   "the selection's own GB/s across the two sizes instead."
                   % (drv.bytes_name(llc), drv.g3(m1), drv.g3(m16)))
    return out


def full_table(run):
    m16 = run.gbs(drv.mcp(N16))
    out = ["| benchmark | path | CPU time (ms) | input GB/s | ratio to memcpy 16Mi |",
           "| --- | --- | ---: | ---: | ---: |"]
    for w in ("float", "double"):
        for name in (sel(w, N16, 10), full(w, N16, 10)):
            b = run.get(name)
            label = path_label(b) if name.startswith("BM_topk_select<") else "full (`select_full`)"
            out.append("| `%s` | %s | %s | %s | %.2f |" % (name, label, drv.g3(run.ms(name)), drv.g3(run.gbs(name)),
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
    rows = [("float", n, pm, drv.size_name(n)) for n in SIZES for pm in PER_MILLE]
    rows.append(("double", N16, 10, "16Mi (fp64)"))
    for w, n, pm, label in rows:
        name = enc(w, n, pm)
        b = run.get(name)
        out.append("| %s | %g | %d | %d | %s | %s | %s |" % (
            label, pm / 1000, round(b["k"]), round(b["payload_B"]), drv.g3(run.ms(name)), drv.g3(run.gbs(name)),
            drv.g3(run.gbs(sel(w, n, pm)))))
    return out


def section(run, json_rel):
    out = drv.opening_lines(GENERATOR, json_rel)
    out += ["",
            "## Results",
            ""]
    out += drv.command_lines(run, GENERATOR)
    out += drv.machine_lines(run, json_rel)
    out += drv.load_lines(run, SELECTION_CV_GROUPS)
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
    return drv.closing(GENERATOR, out)


GENERATOR = drv.Generator("selection", "cc_coll_bench_topk", section, repetitions=3, min_time="0.5", doc=__doc__)

if __name__ == "__main__":
    sys.exit(drv.main(GENERATOR))
