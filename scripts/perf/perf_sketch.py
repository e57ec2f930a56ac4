#!/usr/bin/env python3
"""Sketch results of docs/perf/kernels.md from one cc_coll_bench_sketch run.

    scripts/perf/perf_sketch.py docs/perf/sketch.json docs/perf/kernels.md

reads the Google Benchmark JSON output of
  cc_coll_bench_sketch --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
                       --benchmark_out=<json> --benchmark_out_format=json ...
(the medians of the repetitions; the "cv" aggregates for the spread) and
rewrites the part of the Markdown file between
  <!-- BEGIN sketch-results --> and <!-- END sketch-results -->
with the machine, the command, the table and a paragraph computed from it;
text outside the markers is left alone. When the file has neither marker
they are inserted before <!-- BEGIN cluster-results -->, or appended. The
output depends only on the JSON file, so running it twice gives the same
page.

    scripts/perf/perf_sketch.py --run [--build-dir build] [--min-time SECONDS]

first runs the program from the build folder (from the repository root,
with the flags above, --benchmark_min_time=0.5, into docs/perf/sketch.json)
and annotates its JSON; scripts/perf/perf_sketch.sh builds the program and
calls this.

    scripts/perf/perf_sketch.py --annotate docs/perf/sketch.json \\
        --command '<the benchmark command>' [--build-dir build]

adds what Google Benchmark does not record to the JSON's "context", as
perf_selection.py --annotate does.

The command line, the run, the JSON's annotations, the machine and load
lines and the formatting are scripts/perf/perf_driver.py's.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_driver as drv  # noqa: E402  (scripts/perf/perf_driver.py)

N = 16 * drv.MI
PER_MILLE = (1, 10, 100)
ES = {"float": 4, "double": 8}
BLOCK = 1024  # cells per sketch row (sketch::kBlock): a sub-table of m rows has m * 1024 cells

CV_GROUPS = ((("BM_sketch_encode<",), "the encode rows"),
             (("BM_sketch_decode<",), "the decode rows"),
             (("BM_sketch_rows_per_table/", "BM_threshold_"), "the sizing and threshold rows"),
             (("BM_memcpy/",), "`memcpy`"))


def encode_name(w, pm):
    return "BM_sketch_encode<%s>/n:%d/per_mille:%d" % (w, N, pm)


def decode_name(w, pm):
    return "BM_sketch_decode<%s>/n:%d/per_mille:%d" % (w, N, pm)


def rows_name(pm):
    return "BM_sketch_rows_per_table/n:%d/per_mille:%d" % (N, pm)


def memcpy_gbs(run):
    """GB/s of BM_memcpy at the table's n, from the same run (bench/bench_common.hpp)."""
    name = drv.mcp(N)
    if name not in run.med:
        drv.die("%s is missing from the JSON: it comes from a cc_coll_bench_sketch without the memcpy "
               "yardstick (rebuild it and rerun scripts/perf/perf_sketch.sh), or the run was filtered" % name)
    return run.gbs(name)


def rows_of(run):
    """(type, per mille) of the rows in the table: fp32 at every density, then fp64 where the run has it."""
    rows = [("float", pm) for pm in PER_MILLE]
    rows += [("double", pm) for pm in PER_MILLE if encode_name("double", pm) in run.med]
    return rows


class Row:
    """One (type, density): the encode and decode medians and the sizes they report."""

    def __init__(self, run, w, pm):
        self.w, self.pm = w, pm
        self.enc, self.dec = encode_name(w, pm), decode_name(w, pm)
        d = run.get(self.dec)
        e = run.get(self.enc)
        self.k = round(d["k"])
        self.m = round(d["m"])
        if round(e["k"]) != self.k or round(e["m"]) != self.m:
            drv.die("%s and %s report different k or m" % (self.enc, self.dec))
        self.wire = round(d["sketch_bytes"])
        self.dense = round(d["dense_bytes"])
        self.bitmap = (N + 7) // 8
        self.sketch = self.wire - self.bitmap
        if self.sketch != 3 * self.m * BLOCK * ES[w]:
            drv.die("%s: sketch_bytes %d is not 3m x 1024 x %d + n/8 (m = %d)" % (self.dec, self.wire, ES[w], self.m))
        self.peeled = d["peeled"]
        self.estimated = d["estimated"]
        self.enc_ms, self.dec_ms = run.ms(self.enc), run.ms(self.dec)
        self.enc_gbs, self.dec_gbs = run.gbs(self.enc), run.gbs(self.dec)
        self.mcp_gbs = memcpy_gbs(run)
        self.enc_x, self.dec_x = self.enc_gbs / self.mcp_gbs, self.dec_gbs / self.mcp_gbs

    def label(self):
        return "fp32" if self.w == "float" else "fp64"

    def peel_cell(self):
        peeled = round(self.peeled)
        if peeled == self.k and self.peeled == peeled:
            return "%d / %d (all)" % (peeled, self.k)
        return "%s / %d (%s left to the estimate)" % (drv.g3(self.peeled), self.k, drv.g3(self.estimated))


def table(rows):
    out = ["| type | density | support k | m | encode CPU time (ms) | encode GB/s | decode CPU time (ms) "
           "| decode GB/s | memcpy GB/s (same run, same n) | encode / memcpy | decode / memcpy |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append("| %s | %g | %d | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            r.label(), r.pm / 1000, r.k, r.m, drv.g3(r.enc_ms), drv.g3(r.enc_gbs), drv.g3(r.dec_ms),
            drv.g3(r.dec_gbs), drv.g3(r.mcp_gbs), drv.ratio(r.enc_x), drv.ratio(r.dec_x)))
    return out


def bytes_table(rows):
    out = ["| type | density | sketch + bitmap bytes | dense bytes | wire / dense | dense / wire | peeled / support |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append("| %s | %g | %d + %d = %d | %d | %.3f | %.1f× | %s |" % (
            r.label(), r.pm / 1000, r.sketch, r.bitmap, r.wire, r.dense, r.wire / r.dense, r.dense / r.wire,
            r.peel_cell()))
    return out


def memcpy_prose(rows):
    """How encode and decode compare with the memcpy bandwidth of the same run."""
    f32 = [r for r in rows if r.w == "float"]
    lo = f32[0]
    listed = lambda items: (items[0] if len(items) == 1 else "%s and %s" % (", ".join(items[:-1]), items[-1]))
    at = lambda rs: listed(["%g" % (r.pm / 1000) for r in rs])
    s = ("**Against memcpy:** copying the n fp32 values (%s) ran at %s GB/s in the same run. For fp32, "
         "encode / memcpy is %s; decode / memcpy is %s. "
         % (drv.bytes_name(4 * N), drv.g3(lo.mcp_gbs),
            listed(["%s at density %g" % (drv.ratio(r.enc_x), r.pm / 1000) if r is lo else
                    "%s at %g" % (drv.ratio(r.enc_x), r.pm / 1000) for r in f32]),
            listed([drv.ratio(r.dec_x) for r in f32])))
    s += ("Encode never reads the dense buffer: it zeroes the 3m × 1024-cell sketch and adds the k support "
          "values, so its time follows k and m, not n")
    enc_above = [r for r in f32 if r.enc_x > 1]
    s += ("; at %s %s it finishes sooner than one copy of the buffer it stands for. "
          % ("density" if len(enc_above) == 1 else "densities", at(enc_above))
          if enc_above else ". ")
    s += ("Decode writes all n outputs, a pass over half the bytes of a copy (which also reads them), and peels "
          "the support on top of it")
    dec_above = [r for r in f32 if r.dec_x > 1]
    dec_below = [r for r in f32 if r.dec_x <= 1]
    if dec_above and dec_below:
        s += (": faster than a copy at density %s and slower at %s, as the peeling grows with k."
              % (at(dec_above), at(dec_below)))
    elif dec_above:
        s += ": faster than a copy at every density."
    else:
        s += ": slower than a copy at every density."
    if any(r.w == "double" for r in rows):
        s += (" The fp64 rows count 8n input bytes against the same fp32 copy of 4n, so their ratios are about "
              "twice what the same time would give for fp32.")
    return [s]


def prose(rows):
    f32 = [r for r in rows if r.w == "float"]
    lo, hi = f32[0], f32[-1]
    dec_over_enc = [r.dec_ms / r.enc_ms for r in f32]
    ns_enc = [r.enc_ms * 1e6 / r.k for r in f32]
    ns_dec = [r.dec_ms * 1e6 / r.k for r in f32]
    x = lambda v: "%.1f×" % v
    ns = lambda v: drv.g3(v)
    if min(dec_over_enc) > 1:
        time = ("**Time: decoding dominates.** For fp32 it takes %s the encode time (%s ms against %s ms at "
                "density %g, %s against %s ms at %g)"
                % (drv.span(dec_over_enc, x), drv.g3(lo.dec_ms), drv.g3(lo.enc_ms), lo.pm / 1000,
                   drv.g3(hi.dec_ms), drv.g3(hi.enc_ms), hi.pm / 1000))
    elif max(dec_over_enc) < 1:
        time = ("**Time: encoding dominates.** For fp32 decoding takes %s the encode time"
                % drv.span(dec_over_enc, lambda v: "%.2f×" % v))
    else:
        time = ("**Time:** for fp32 decoding takes %s the encode time, depending on the density"
                % drv.span(dec_over_enc, lambda v: "%.2f×" % v))
    rising = all(a.enc_ms < b.enc_ms and a.dec_ms < b.dec_ms for a, b in zip(f32, f32[1:]))
    time += ("; %s. Per support element, encoding costs %s ns and decoding %s ns from density %g to %g"
             % ("with n fixed, both times grow with the support k, so the GB/s of input fall as the density "
                "rises" if rising else "with n fixed, the times do not grow steadily with the support k",
                " → ".join(ns(v) for v in ns_enc), " → ".join(ns(v) for v in ns_dec), lo.pm / 1000, hi.pm / 1000))
    falling = all(a > b for a, b in zip(ns_dec, ns_dec[1:]))
    time += (": the work that does not depend on k (decode writes all n outputs) weighs most at low density."
             if falling else ".")
    share = [r.bitmap / r.wire for r in f32]
    wire = ("**Bytes:** the support bitmap is %s of the wire bytes at density %g and %s at %g: "
            % (drv.pct(share[0]), lo.pm / 1000, drv.pct(share[-1]), hi.pm / 1000))
    bitmap_heavy = [r for r in f32 if r.bitmap > r.sketch]
    sketch_heavy = [r for r in f32 if r.sketch >= r.bitmap]
    parts = []
    if bitmap_heavy:
        parts.append("the bitmap outweighs the sketch at density %s"
                     % " and ".join("%g" % (r.pm / 1000) for r in bitmap_heavy))
    if sketch_heavy:
        parts.append("the sketch (3m × 1024 cells) outweighs the bitmap at %s"
                     % " and ".join("%g" % (r.pm / 1000) for r in sketch_heavy))
    wire += "; ".join(parts) + ". "
    bound = lo.dense / lo.bitmap
    best = max(f32, key=lambda r: r.dense / r.wire)
    wire += ("The bitmap alone (n/8 = %d bytes, one bit per element whatever the density) bounds the compression: "
             "dense / wire < dense / bitmap = %d × 8 bits / 1 bit = **%.0f× for fp32**%s. This run reaches %.1f× at "
             "density %g, %.0f %% of that bound; at %g it reaches %.1f×."
             % (lo.bitmap, ES["float"], bound,
                " (64× for fp64)" if any(r.w == "double" for r in rows) else "",
                best.dense / best.wire, best.pm / 1000, 100 * (best.dense / best.wire) / bound,
                hi.pm / 1000, hi.dense / hi.wire))
    peel = [r for r in rows if round(r.peeled) != r.k or r.peeled != round(r.peeled)]
    if peel:
        tail = ("**Peeling:** not every support element peeled in %s; the rest got the median-of-3 estimate."
                % ", ".join("`%s`" % r.dec for r in peel))
    else:
        tail = ("**Peeling:** every support element was recovered exactly in every row (sized at load 0.77, "
                "the benchmark's `kLoad`); none was left to the median-of-3 estimate.")
    return time, wire, tail


def other_table(run):
    out = ["| benchmark | what it does | CPU time (ms) | input GB/s |",
           "| --- | --- | ---: | ---: |"]
    what = {}
    for pm in PER_MILLE:
        b = run.get(rows_name(pm))
        what[rows_name(pm)] = "sizing: m = %d from the support bitmap at density %g" % (round(b["m"]), pm / 1000)
    pick = "BM_threshold_pick<float>/n:%d" % N
    collect = "BM_threshold_collect<float>/n:%d" % N
    what[pick] = "TAGC threshold ladder: pick the rung that zeroes at most 80 % (one pass)"
    what[collect] = "collect the %d indices at or above that rung" % round(run.get(collect)["kept"])
    for name, text in what.items():
        out.append("| `%s` | %s | %s | %s |" % (name, text, drv.g3(run.ms(name)), drv.g3(run.gbs(name))))
    return out


def shared_line(run):
    s = ("These are **single-core CPU times on a shared machine**: the benchmark runs on one thread, the times "
         "are what that thread's core spent, and other jobs ran beside it")
    load = drv.load_range(run)
    if load:
        lo, hi, ncpu, busy = load
        s += (" (1-minute load average %.2f–%.2f on %d CPUs at the start and end)%s"
              % (lo, hi, ncpu,
                 "; their use of the caches and memory bandwidth may have lowered the rates"
                 if busy else ", so the run mostly had a core to itself"))
    return s + "."


def section(run, json_rel):
    rows = [Row(run, w, pm) for w, pm in rows_of(run)]
    out = drv.opening_lines(GENERATOR, json_rel)
    out += ["",
            "## Count-sketch encode and decode",
            "",
            "The CPU side of the SKETCH method (`src/compressors/sketch/count_sketch.cc`, the layout in "
            "`docs/api.md`): `bench/bench_sketch.cc` builds `cc_coll_bench_sketch`, which, like the top-k "
            "benchmark, calls the internal functions directly on one thread without MPI. Encode zeroes the "
            "sketch and adds the k support elements (normal values at random positions, each kept with "
            "probability = density) to their three cells; decode peels a copy of that sketch, restored outside "
            "the timing, given the support bitmap, and writes all n outputs. m is sized by `rows_per_table` at "
            "load 0.77. GB/s is of **input**, n·sizeof(W) bytes per iteration (the dense buffer the sketch "
            "stands for), so it compares with the top-k rates above. Wire bytes are the benchmark's "
            "`sketch_bytes`: the sketch, 3m·1024 cells of the element type, plus the n/8-byte support bitmap "
            "(the library adds one flag byte), i.e. the two buffers an allreduce sums and ORs; `dense_bytes` is "
            "n·sizeof(W). `BM_memcpy` copies the n fp32 values (4n bytes read, 4n written) to another buffer "
            "in the same run: the memory-bandwidth yardstick, the same code as the top-k benchmark's "
            "(`bench/bench_common.hpp`), and the encode / memcpy and decode / memcpy columns divide the input "
            "GB/s by its GB/s.",
            ""]
    out += drv.command_lines(run, GENERATOR)
    out += drv.regenerate_lines(GENERATOR, json_rel)
    out += drv.machine_lines(run, json_rel)
    out += drv.load_lines(run, CV_GROUPS)
    out += ["",
            shared_line(run) + " Every figure below is the median of the repetitions, copied from the JSON and "
            "only converted to milliseconds, GB/s and ratios.",
            "",
            "### n = 16Mi (%s of fp32)" % drv.bytes_name(4 * N),
            "",
            "m is the rows per sub-table (the sketch has 3 sub-tables of m rows of 1024 cells).",
            "",
            "#### Throughput against memcpy",
            ""]
    out += table(rows)
    out += [""]
    time, wire, peeling = prose(rows)
    out += memcpy_prose(rows)
    out += ["", time, "",
            "#### Wire bytes and peeling",
            ""]
    out += bytes_table(rows)
    out += ["", wire, "", peeling]
    out += ["",
            "### Sizing and the threshold ladder (fp32, n = 16Mi)",
            "",
            "The other steps the SKETCH method runs on the CPU, from the same run:",
            ""]
    out += other_table(run)
    return drv.closing(GENERATOR, out)


GENERATOR = drv.Generator("sketch", "cc_coll_bench_sketch", section, repetitions=3, min_time="0.5", doc=__doc__)

if __name__ == "__main__":
    sys.exit(drv.main(GENERATOR))
