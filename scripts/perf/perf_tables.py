"""Markdown tables of docs/performance.md from the JSON the perf scripts write:

    python3 scripts/perf/perf_tables.py auto    docs/perf/auto_<setup>.json ...
    python3 scripts/perf/perf_tables.py auto-spread docs/perf/auto_<setup>.json
    python3 scripts/perf/perf_tables.py bucket  docs/perf/bucket_<rate>_<N>hosts.json ...
    python3 scripts/perf/perf_tables.py kernels docs/perf/host_kernels.json

auto:    per size and setup, AUTO's time over the faster of NONE and TOPK in
         the same run, each row's median call (median of the runs), what
         AUTO ran, and the faster one where it differs; the worst cell of
         each setup, and the worst by the mean of the calls
         (scripts/perf/perf_auto.sh).
auto-spread: per size, of one setup's runs: that ratio's least, median and
         largest, by the median call and by the mean, in how many runs AUTO
         ran NONE, TOPK or both, and NONE's median call over
         MPI_Allreduce's (the same exchange but for the library's
         agreement: how far two rows of one method move apart).
bucket:  per method, the GPT-2-small bucket's time, speedup over
         MPI_Allreduce, bytes and the library's split (perf_bucket.py).
kernels: cc_coll_bench_host_kernels' medians: each kernel's GB/s of fp32
         input per thread count, against memcpy on as many threads.
"""
import json
import re
import sys


def size_label(b):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return "%g %s" % (b / scale, unit)
    return "%d B" % b


def fmt(us):
    return "%.1f" % us if us < 1e4 else "%.0f" % us


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def call_time(r, stat):
    """A row's time per call: "median", its median call (cc_coll_perf
    writes it since the sweep of docs/perf/auto.md; older files give their
    mean), or "mean", the mean of its calls."""
    return r.get("time_median_us", r["time_us"]) if stat == "median" else r["time_us"]


def auto_ratio(m, stat):
    """AUTO's time over the faster of NONE and TOPK, rows m by method, by
    call_time's stat."""
    t = {k: call_time(m[k], stat) for k in ("none", "topk", "auto")}
    return t["auto"] / min(t["none"], t["topk"])


def auto_cells(d):
    """Each run's sizes that have NONE, TOPK and AUTO rows: (bytes, the rows
    by method, auto_ratio by the median call, what AUTO ran)."""
    for run in d["runs"]:
        for part in ("small", "large"):
            rows = {}
            for r in run[part]["results"]:
                rows.setdefault(r["bytes"], {})[r["method"]] = r
            for b, m in rows.items():
                if not all(k in m for k in ("none", "topk", "auto")):
                    continue
                share = m["auto"].get("auto_lossy_share", -1)
                ran = "topk" if share == 1 else "none" if share == 0 else "mixed"
                yield b, m, auto_ratio(m, "median"), ran


def auto_tables(paths):
    """One table: per size (rows) and setup (columns), the median over the
    runs of AUTO's time over the faster of NONE and TOPK in the same run,
    what AUTO ran in most runs, and the faster one where it differs."""
    setups, cells, sizes, worst_mean = [], {}, set(), {}
    for path in paths:
        d = json.load(open(path))
        setup = d["setup"]
        setups.append((setup, d["runs"]))
        per_size, by_mean = {}, {}
        for b, m, ratio, ran in auto_cells(d):
            faster = "none" if call_time(m["none"], "median") <= call_time(m["topk"], "median") else "topk"
            per_size.setdefault(b, []).append((ratio, ran, faster))
            by_mean.setdefault(b, []).append(auto_ratio(m, "mean"))
        worst_mean[setup] = max(median(xs) for xs in by_mean.values())
        for b, xs in per_size.items():
            sizes.add(b)
            ran = max(("none", "topk", "mixed"), key=lambda k: sum(1 for x in xs if x[1] == k))
            faster = max(("none", "topk"), key=lambda k: sum(1 for x in xs if x[2] == k))
            cells[(setup, b)] = (median([x[0] for x in xs]), ran, faster, len(xs))
    print("| size per rank | " + " | ".join(s for s, _ in setups) + " |")
    print("| ---: |" + " --- |" * len(setups))
    for b in sorted(sizes):
        row = []
        for setup, _ in setups:
            c = cells.get((setup, b))
            if c is None:
                row.append("")
                continue
            ratio, ran, faster, n = c
            row.append("%.2f %s%s" % (ratio, ran, "" if ran == faster else " (faster: %s)" % faster))
        print("| %s | %s |" % (size_label(b), " | ".join(row)))
    worst = [max((c[0] for (s, _), c in cells.items() if s == setup), default=float("nan")) for setup, _ in setups]
    print("| worst | " + " | ".join("%.2f" % w for w in worst) + " |")
    print("| worst, by the calls' mean | " + " | ".join("%.2f" % worst_mean[s] for s, _ in setups) + " |")
    print()
    for setup, runs in setups:
        print("- %s: %d runs, %s to %s, commit %s; load average %s." % (
            setup, len(runs), runs[0]["date"], runs[-1]["date"], runs[-1]["commit"],
            "; ".join("%s before, %s after" % (r["load_before"], r["load_after"]) for r in runs)))
    print()


def auto_spread_tables(paths):
    for path in paths:
        d = json.load(open(path))
        per_size = {}
        for b, m, ratio, ran in auto_cells(d):
            if "mpi" in m:
                per_size.setdefault(b, []).append(
                    (ratio, ran, call_time(m["none"], "median") / call_time(m["mpi"], "median"), auto_ratio(m, "mean")))
        print("| size per rank | runs | AUTO over the faster: least, median, largest | the same by the calls' "
              "mean | AUTO ran none, topk, both (runs) | NONE over `MPI_Allreduce`: least, median, largest |")
        print("| ---: | ---: | --- | --- | --- | --- |")
        for b in sorted(per_size):
            xs = per_size[b]
            r = sorted(x[0] for x in xs)
            q = sorted(x[2] for x in xs)
            mm = sorted(x[3] for x in xs)
            print("| %s | %d | %.2f, %.2f, %.2f | %.2f, %.2f, %.2f | %d, %d, %d | %.2f, %.2f, %.2f |" % (
                size_label(b), len(xs), r[0], median(r), r[-1], mm[0], median(mm), mm[-1],
                sum(1 for x in xs if x[1] == "none"), sum(1 for x in xs if x[1] == "topk"),
                sum(1 for x in xs if x[1] == "mixed"), q[0], median(q), q[-1]))
        runs = d["runs"]
        print()
        print("- %s: %d runs, %s to %s, commit %s; load average %s." % (
            d["setup"], len(runs), runs[0]["date"], runs[-1]["date"], runs[-1]["commit"],
            "; ".join("%s before, %s after" % (r["load_before"], r["load_after"]) for r in runs)))
        print()


def bucket_tables(paths):
    for path in paths:
        d = json.load(open(path))
        run = d["run"]
        print("#### %s, %d hosts\n" % (d["rate"], d["hosts"]))
        print("%s, commit %s; load average %s before, %s after; %d elements (%.1f MiB), %d timed calls.\n" % (
            d["date"], d["commit"], d["load_before"], d["load_after"], run["elements"], run["bytes"] / 2 ** 20,
            run["iters"]))
        print("| method | time (ms) | speedup | wire (B) | compress (ms) | communicate (ms) | decompress (ms) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in run["results"]:
            if r["row"] == "mpi":
                print("| MPI_Allreduce (flat bucket) | %.1f | 1.00x | %d | | | |" % (r["time_us"] / 1e3, r["wire_bytes"]))
                continue
            row = r["row"]
            if "auto_lossy_share" in r:
                row += " (ran %s)" % ("the lossy method" if r["auto_lossy_share"] == 1 else
                                      "none" if r["auto_lossy_share"] == 0 else "both")
            print("| %s | %.1f | %.2fx | %d | %.1f | %.1f | %.1f |" % (
                row, r["time_us"] / 1e3, r["speedup"], r["wire_bytes"], r["compress_us"] / 1e3,
                r["communicate_us"] / 1e3, r["decompress_us"] / 1e3))
        print()


def kernel_tables(paths):
    for path in paths:
        d = json.load(open(path))
        rates = {}
        for b in d["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            m = re.match(r"BM_(\w+)/n:(\d+)/threads:(\d+)", b["run_name"])
            if m:
                rates[(m.group(1), int(m.group(3)))] = (b["bytes_per_second"] / 1e9, b["real_time"])
        threads = sorted({t for _, t in rates})
        kernels = [k for k in ("memcpy_par", "ef_add", "topk_select", "topk_compress", "scatter_add",
                               "residual_store", "round_store", "lowrank_unfused", "lowrank_fused",
                               "quant4_encode", "quant4_decode", "onebit_encode", "onebit_decode")
                   if any(k == kk for kk, _ in rates)]
        head = "| kernel | " + " | ".join("%d thread%s: ms, GB/s, / memcpy" % (t, "s" if t > 1 else "") for t in threads)
        print(head + " |")
        print("| --- |" + " ---: |" * len(threads))
        for k in kernels:
            cells = []
            for t in threads:
                gbs, ms = rates[(k, t)]
                cells.append("%.2f, %.2f, %.2f" % (ms, gbs, gbs / rates[("memcpy_par", t)][0]))
            print("| %s | %s |" % (k, " | ".join(cells)))
        print()


def main():
    kind, paths = sys.argv[1], sys.argv[2:]
    {"auto": auto_tables, "auto-spread": auto_spread_tables, "bucket": bucket_tables,
     "kernels": kernel_tables}[kind](paths)


if __name__ == "__main__":
    main()
