#!/usr/bin/env python3
"""Low-rank results of docs/perf/kernels.md from one cc_coll_bench_lowrank run.

    scripts/perf/perf_lowrank.py docs/perf/lowrank.json docs/perf/kernels.md

reads the Google Benchmark JSON output of
  OPENBLAS_NUM_THREADS=1 cc_coll_bench_lowrank --benchmark_repetitions=5
      --benchmark_report_aggregates_only=true
      --benchmark_out=<json> --benchmark_out_format=json ...
(the medians of the repetitions; the "cv" aggregates for the spread) and
rewrites the part of the Markdown file between
  <!-- BEGIN lowrank-results --> and <!-- END lowrank-results -->
with the machine, the command, the table and two sentences computed from it;
text outside the markers is left alone. When the file has neither marker
they are inserted before <!-- BEGIN cluster-results -->, or appended. The
output depends only on the JSON file, so running it twice gives the same
page.

    scripts/perf/perf_lowrank.py --run [--build-dir build] [--min-time SECONDS]

first runs the program from the build folder (from the repository root,
with the flags above, --benchmark_min_time=0.2, into docs/perf/lowrank.json,
OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1) and annotates its JSON;
scripts/perf/perf_lowrank.sh builds the program and calls this.

    scripts/perf/perf_lowrank.py --annotate docs/perf/lowrank.json \\
        --command '<the benchmark command>' [--build-dir build]

adds what Google Benchmark does not record to the JSON's "context", as
perf_selection.py --annotate does; with a build folder outside the
checkout, the context's "executable" shows it as $CC_COLL_BUILD_DIR.

The command line, the run, the JSON's annotations, the machine and load
lines and the formatting are scripts/perf/perf_driver.py's.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_driver as drv  # noqa: E402  (scripts/perf/perf_driver.py)

SHAPES = ((768, 3072), (3072, 768), (4096, 4096))
RANKS = (1, 4, 16, 32)
ES = 4  # fp32

CV_GROUPS = ((("BM_lowrank_compress<",), "the compress rows"),
             (("BM_lowrank_decompress<",), "the decompress rows"),
             (("BM_memcpy/",), "`memcpy`"))


def compress_name(rows, cols, rank):
    return "BM_lowrank_compress<float>/rows:%d/cols:%d/rank:%d" % (rows, cols, rank)


def decompress_name(rows, cols, rank):
    return "BM_lowrank_decompress<float>/rows:%d/cols:%d/rank:%d" % (rows, cols, rank)


class Row:
    """One (shape, rank): compress and decompress medians, and memcpy of the same bytes from the same run."""

    def __init__(self, run, rows, cols, rank):
        self.rows, self.cols, self.rank = rows, cols, rank
        self.comp, self.dec = compress_name(rows, cols, rank), decompress_name(rows, cols, rank)
        self.mcp = drv.mcp(rows * cols)
        if self.mcp not in run.med:
            drv.die("%s is missing from the JSON: the run was filtered, or the program is not "
                   "cc_coll_bench_lowrank (rerun scripts/perf/perf_lowrank.sh)" % self.mcp)
        c, d = run.get(self.comp), run.get(self.dec)
        self.dense = rows * cols * ES
        self.wire = (rows + cols) * rank * ES
        self.wire_ratio = rows * cols / ((rows + cols) * rank)
        for b, name in ((c, self.comp), (d, self.dec)):
            if round(b["dense_bytes"]) != self.dense or round(b["wire_bytes"]) != self.wire:
                drv.die("%s: dense_bytes / wire_bytes are not rows x cols x 4 / (rows + cols) x r x 4" % name)
            if abs(b["wire_ratio"] - self.wire_ratio) > 1e-9 * self.wire_ratio:
                drv.die("%s: wire_ratio %g is not rows x cols / ((rows + cols) x r) = %g"
                       % (name, b["wire_ratio"], self.wire_ratio))
        self.threads = sorted({round(c.get("blas_threads", -1)), round(d.get("blas_threads", -1))})
        self.comp_ms, self.dec_ms = run.ms(self.comp), run.ms(self.dec)
        self.comp_gbs, self.dec_gbs = run.gbs(self.comp), run.gbs(self.dec)
        self.mcp_gbs = run.gbs(self.mcp)
        self.comp_x, self.dec_x = self.comp_gbs / self.mcp_gbs, self.dec_gbs / self.mcp_gbs

    def shape(self):
        return "%d × %d" % (self.rows, self.cols)


def table(rows):
    out = ["| shape (rows × cols) | rank | wire ratio (dense / P + Q) | compress CPU time (ms) | compress GB/s "
           "| compress / memcpy | decompress CPU time (ms) | decompress GB/s | decompress / memcpy "
           "| memcpy GB/s (same bytes, same run) |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r.shape(), r.rank, drv.g3(r.wire_ratio), drv.g3(r.comp_ms), drv.g3(r.comp_gbs), drv.ratio(r.comp_x),
            drv.g3(r.dec_ms), drv.g3(r.dec_gbs), drv.ratio(r.dec_x), drv.g3(r.mcp_gbs)))
    return out


def interpretation(rows):
    """Two sentences: where the time goes, and the link speed below which the CPU time is repaid."""
    by = {(r.rows, r.cols, r.rank): r for r in rows}
    r1 = [r for r in rows if r.rank == RANKS[0]]
    big = SHAPES[-1]
    lo, hi = by[big + (RANKS[0],)], by[big + (RANKS[-1],)]
    dec_cheaper = all(r.dec_ms < r.comp_ms for r in rows)
    s1 = ("**Time:** compression makes two passes over M (P = M Q, then Q = Mᵀ P), about the bytes one `memcpy` "
          "reads and writes, yet even at rank 1 it reaches only %s of the `memcpy` rate, and its time grows with "
          "the rank (%s ms at rank %d to %s ms at rank %d on %s, %.1f×) as the 4·rows·cols·r floating-point "
          "operations of the two products add up; decompression writes M once and %s."
          % (drv.span([r.comp_x for r in r1], drv.ratio), drv.g3(lo.comp_ms), lo.rank, drv.g3(hi.comp_ms), hi.rank,
             lo.shape(), hi.comp_ms / lo.comp_ms,
             "takes %s of the compress time at every shape and rank"
             % drv.span([r.dec_ms / r.comp_ms for r in rows], lambda v: "%.2f×" % v) if dec_cheaper
             else "is cheaper than compression in %d of the %d rows" % (sum(r.dec_ms < r.comp_ms for r in rows),
                                                                         len(rows))))
    # A ring allreduce moves about 2 bytes per byte of the buffer per rank; LOWRANK moves 2 (P + Q).
    k = 4 if 4 in RANKS else RANKS[0]
    be = [(r, 2 * (r.dense - r.wire) / ((r.comp_ms + r.dec_ms) * 1e-3)) for r in rows if r.rank == k]
    worst = min(be, key=lambda t: t[1])
    best = max(be, key=lambda t: t[1])
    s2 = ("**When it pays:** a ring allreduce moves about 2 bytes per byte of M on every rank against 2 (P + Q) "
          "for LOWRANK, so at rank %d this core's compress + decompress time is repaid on links slower than "
          "2 (dense − wire) / time = %s GB/s (%s Gbit/s) for %s to %s GB/s (%s Gbit/s) for %s, ignoring the "
          "error-feedback and residual passes the library adds and the allreduces' latency, which both lower it."
          % (k, drv.g3(worst[1] / 1e9), drv.g3(worst[1] * 8 / 1e9), worst[0].shape(), drv.g3(best[1] / 1e9),
             drv.g3(best[1] * 8 / 1e9), best[0].shape()))
    return [s1, "", s2]


def threads_line(run, rows):
    c = run.ctx
    threads = sorted({t for r in rows for t in r.threads})
    blas = c.get("cc_coll_blas")
    env = c.get("cc_coll_openblas_num_threads")
    s = "- BLAS: %s" % ("`%s`" % blas if blas else "not recorded")
    if env is not None:
        s += "; `OPENBLAS_NUM_THREADS` was %s" % ("`%s`" % env if env != "unset" else "unset")
    if threads == [1]:
        s += "; OpenBLAS ran 1 thread in every row (the benchmark's `blas_threads` counter)"
    elif threads == [-1]:
        s += "; the thread count is unknown (not OpenBLAS)"
    else:
        s += "; **OpenBLAS ran %s threads** (`blas_threads`): these rows are not per core" % "/".join(
            str(t) for t in threads)
    return s + "."


def section(run, json_rel):
    rows = [Row(run, r, c, k) for r, c in SHAPES for k in RANKS]
    out = drv.opening_lines(GENERATOR, json_rel)
    out += ["",
            "## PowerSGD compress and decompress",
            "",
            "The CPU side of the LOWRANK method (`src/compressors/lowrank/powersgd.cc`, `docs/algorithms.md` section 4): "
            "`bench/bench_lowrank.cc` builds `cc_coll_bench_lowrank`, which, like the benchmarks above, calls "
            "the internal functions directly without MPI. It runs with `OPENBLAS_NUM_THREADS=1`: one BLAS "
            "thread, **one rank per core**, as an MPI job with a rank on every core would run it, so every "
            "figure is per core. *Compress* is what one rank computes between receiving the tensor and the "
            "second allreduce: restore the warm-start Q (a copy of cols × r values), orthogonalise Q, P = M Q, "
            "orthogonalise P, Q = Mᵀ P (the library sums P across ranks between the two products; nothing sits "
            "there here). Orthogonalisation is the library's fp32 choice: Gram–Schmidt for r ≤ 2, Householder "
            "QR (LAPACK `geqrf` + `orgqr`) above. *Decompress* is M̂ = P Qᵀ. M is rows × cols fp32 normal "
            "values; GB/s counts the **M bytes** (rows·cols·4) per iteration for compress, decompress and "
            "`memcpy` alike, and `BM_memcpy` copies those same bytes in the same run (`bench/bench_common.hpp`), "
            "so the `/ memcpy` columns divide the two rates. The wire ratio is rows·cols / ((rows + cols)·r): "
            "the dense tensor against P and Q, the two buffers LOWRANK allreduces.",
            ""]
    out += drv.command_lines(run, GENERATOR)
    out += drv.regenerate_lines(GENERATOR, json_rel)
    out += drv.machine_lines(run, json_rel)
    out += [threads_line(run, rows)]
    out += drv.load_lines(run, CV_GROUPS)
    shared = ("These are **single-core CPU times**: the benchmark and its BLAS run on one thread, and the times "
              "are what that thread's core spent")
    load = drv.load_range(run)
    if load:
        lo, hi, ncpu, busy = load
        shared += (" (1-minute load average %.2f–%.2f on %d CPUs at the start and end%s)"
                   % (lo, hi, ncpu,
                      "; other jobs ran beside it, and their use of the caches and memory bandwidth may have "
                      "lowered the rates" if busy else ", so the run mostly had a core to itself"))
    out += ["",
            shared + ". Every figure below is the median of the repetitions, copied from the JSON and only "
            "converted to milliseconds, GB/s and ratios.",
            "",
            "### fp32, ranks 1, 4, 16, 32",
            ""]
    out += table(rows)
    out += [""]
    out += interpretation(rows)
    return drv.closing(GENERATOR, out)


# One BLAS thread (OMP_NUM_THREADS too, for an OpenMP build of OpenBLAS): the figures are per core, as with one
# MPI rank per core. The page shows OPENBLAS_NUM_THREADS=1 in front of the command.
GENERATOR = drv.Generator("lowrank", "cc_coll_bench_lowrank", section, repetitions=5, min_time="0.2",
                          env=(("OPENBLAS_NUM_THREADS", "1"),), quiet_env=(("OMP_NUM_THREADS", "1"),), doc=__doc__)

if __name__ == "__main__":
    sys.exit(drv.main(GENERATOR))
