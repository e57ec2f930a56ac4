"""Markdown tables of docs/performance.md from the JSON the perf scripts write:

    python3 scripts/perf/perf_tables.py auto    docs/perf/auto_<rate>_<N>hosts.json ...
    python3 scripts/perf/perf_tables.py bucket  docs/perf/bucket_<rate>_<N>hosts.json ...
    python3 scripts/perf/perf_tables.py kernels docs/perf/host_kernels.json

auto:    per size, MPI_Allreduce, NONE, TOPK and AUTO (time in us), what AUTO
         ran, its predicted time, measured / predicted, and AUTO against the
         better of NONE and TOPK (scripts/perf/perf_auto.sh).
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


def auto_tables(paths):
    for path in paths:
        d = json.load(open(path))
        print("#### %s, %d hosts\n" % (d["rate"], d["hosts"]))
        print("%s, commit %s; load average %s before, %s after.\n" % (d["date"], d["commit"], d["load_before"],
                                                                      d["load_after"]))
        print("| size per rank | MPI_Allreduce (us) | none (us) | topk (us) | auto (us) | auto ran | auto predicted (us) "
              "| measured / predicted | auto / best of none, topk |")
        print("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
        worst = 0.0
        for run in ("small", "large"):
            rows = {}
            for r in d["runs"][run]["results"]:
                rows.setdefault(r["bytes"], {})[r["method"]] = r
            for b in sorted(rows):
                m = rows[b]
                a = m["auto"]
                share = a.get("auto_lossy_share", -1)
                ran = "topk" if share == 1 else "none" if share == 0 else "mixed (%.0f%% topk)" % (100 * share)
                best = min(m["none"]["time_us"], m["topk"]["time_us"])
                ratio = a["time_us"] / best
                worst = max(worst, ratio)
                pred = a.get("auto_predicted_us", float("nan"))
                print("| %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |" % (
                    size_label(b), fmt(m["mpi"]["time_us"]), fmt(m["none"]["time_us"]), fmt(m["topk"]["time_us"]),
                    fmt(a["time_us"]), ran, fmt(pred), a["time_us"] / pred, ratio))
        print("\nWorst auto / best: %.2f.\n" % worst)


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
                               "residual_store", "round_store", "lowrank_unfused", "lowrank_fused")
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
    {"auto": auto_tables, "bucket": bucket_tables, "kernels": kernel_tables}[kind](paths)


if __name__ == "__main__":
    main()
