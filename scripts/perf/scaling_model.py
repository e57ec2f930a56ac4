#!/usr/bin/env python3
"""scaling_model.py: the time of one allreduce as a function of ranks, nodes
and link rate, for every method and algorithm (docs/performance.md,
"Scaling model"), checked against the emulated-cluster measurements and
extrapolated to 8-256 nodes.

  scripts/perf/scaling_model.py [--docs DIR]

Reads DIR/allreduce_1gbit_2hosts.json, allreduce_1gbit_4hosts.json,
ab_hierarchy_2x2_1gbit.json and ab_topk_algorithm_4x1_1gbit.json (DIR:
docs/perf) and prints the model's constants, a predicted-against-measured
table and the extrapolation, in markdown.

The model (S: bytes per rank; w: the method's bytes per rank on the wire,
from the measurements; N nodes of L ranks, P = N L; B: bytes per second of
one node's link, each direction; C: cores that the ranks share):

  wire, dense allreduce (MPI, NONE)       2 (N-1)/N S / B
  wire, allreduce of w (SKETCH, LOWRANK)  2 (N-1)/N L w / B
  wire, TOPK allgather                    (N-1)/N P w / B
  wire, TOPK split                        2 (N-1)/N L w / B
  compute                                 c(method) max(1, P/C) / h
  hierarchical, node exchange             + x S (dense, inside the node)

where c(method) is the one-core compute time of the method's call on S
bytes, h = L for the hierarchical algorithm (each rank compresses 1/L of the
tensor) and 1 otherwise, and the hierarchical algorithm's wire terms use its
rails' w. B is calibrated on MPI_Allreduce with 2 hosts, c(method) on each
method's 2-host call (LOWRANK, not in that table: its flat 2 x 2 call), x
on TOPK's hierarchical 2 x 2 call; every other measured point is a
prediction.
"""
import argparse
import json
import os
import statistics

MB = 1e6


def load(path):
    with open(path) as f:
        return json.load(f)


def at64(doc):
    return {x["method"]: x for x in doc["results"] if x["bytes"] == 64 << 20}


def ab_medians(doc):
    out = {}
    for v in doc["values"]:
        rows = [x for run in doc["runs"] if run["value"] == v for x in run["perf"]["results"]]
        out[v] = {m: {"time": statistics.median(x["time_us"] for x in rows if x["method"] == m) / 1e6,
                      "wire": statistics.median(x["wire_bytes"] for x in rows if x["method"] == m)}
                  for m in {x["method"] for x in rows}}
    return out


def wire_time(kind, S, w, N, L, B):
    P = N * L
    f = (N - 1) / N
    if kind == "dense":
        return 2 * f * S / B
    if kind == "allgather":
        return f * P * w / B
    return 2 * f * L * w / B  # allreduce of w, TOPK split


KIND = {"mpi": "dense", "none": "dense", "topk": "allgather", "topk-split": "split", "sketch": "reduce",
        "lowrank": "reduce"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", default=os.path.join(os.path.dirname(__file__), "..", "..", "docs", "perf"))
    a = ap.parse_args()
    two = at64(load(os.path.join(a.docs, "allreduce_1gbit_2hosts.json")))
    four = at64(load(os.path.join(a.docs, "allreduce_1gbit_4hosts.json")))
    hier = ab_medians(load(os.path.join(a.docs, "ab_hierarchy_2x2_1gbit.json")))
    split = ab_medians(load(os.path.join(a.docs, "ab_topk_algorithm_4x1_1gbit.json")))
    S = float(64 << 20)
    C = 2  # the cores of the machine the emulated cluster runs on

    # Calibration.
    B = 2 * 0.5 * S / (two["mpi"]["time_us"] / 1e6)
    c = {}
    for m in ("topk", "sketch"):
        c[m] = two[m]["time_us"] / 1e6 - wire_time(KIND[m], S, two[m]["wire_bytes"], 2, 1, B)
    flat = hier["off"]
    c["lowrank"] = (flat["lowrank"]["time"] - wire_time("reduce", S, flat["lowrank"]["wire"], 2, 2, B)) / 2
    c["none"] = c["mpi"] = 0.0
    c["topk-split"] = c["topk"]
    on = hier["on"]
    # The node's exchange, from the hierarchical TOPK call: what its wire
    # and compute terms leave of the measured time.
    x = max(0.0, (on["topk"]["time"] - wire_time("allgather", S, on["topk"]["wire"], 2, 2, B) -
                  c["topk"] * 2 / 2) / S)

    def predict(m, N, L, w, hierarchical=False, Bl=B, cores=C):
        P = N * L
        t = wire_time(KIND[m], S, w, N, L, Bl) + c[m] * max(1.0, P / cores) / (L if hierarchical else 1)
        return t + (x * S if hierarchical else 0.0)

    print("Constants: link B = %.1f MB/s per direction (nominal 125); one-core compute per 64 MiB call: %s; "
          "node exchange x S = %.0f ms.\n" % (B / MB, ", ".join("%s %.0f ms" % (m, c[m] * 1e3) for m in
                                                              ("topk", "sketch", "lowrank")), x * S * 1e3))
    print("| point | method | measured (ms) | model (ms) | model / measured |")
    print("| --- | --- | ---: | ---: | ---: |")
    rows = []
    for m in ("mpi", "topk", "sketch"):
        rows.append(("4 hosts x 1", m, four[m]["time_us"] / 1e6, predict(m, 4, 1, four[m]["wire_bytes"])))
    rows.append(("4 hosts x 1, split", "topk", split["split"]["topk"]["time"],
                 predict("topk-split", 4, 1, split["split"]["topk"]["wire"])))
    for m in ("mpi", "none", "topk", "sketch"):
        rows.append(("2 hosts x 2, flat", m, flat[m]["time"], predict(m, 2, 2, flat[m]["wire"])))
    for m in ("none", "sketch", "lowrank"):
        rows.append(("2 hosts x 2, hierarchical", m, on[m]["time"], predict(m, 2, 2, on[m]["wire"], True)))
    for point, m, meas, model in rows:
        print("| %s | %s | %.0f | %.0f | %.2f |" % (point, m, meas * 1e3, model * 1e3, model / meas))

    # Extrapolation: one rank per node with a core of its own, 64 MiB, the
    # wire bytes of the measured calls (they do not depend on P).
    w = {"topk": two["topk"]["wire_bytes"], "topk-split": two["topk"]["wire_bytes"],
         "sketch": two["sketch"]["wire_bytes"], "lowrank": flat["lowrank"]["wire"]}
    print("\nExtrapolation, 64 MiB per rank, one rank per node, speedup over a dense ring allreduce "
          "(compute as measured on one core here):\n")
    print("| nodes | link | dense ring (ms) | TOPK allgather | TOPK split | SKETCH | LOWRANK r4 |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for gbit in (10, 25, 100):
        Bl = gbit * 1e9 / 8
        for N in (8, 16, 64, 256):
            dense = wire_time("dense", S, S, N, 1, Bl)
            cells = []
            for m in ("topk", "topk-split", "sketch", "lowrank"):
                t = predict(m, N, 1, w[m], Bl=Bl, cores=N)
                cells.append("%.2fx" % (dense / t))
            print("| %d | %d Gbit/s | %.1f | %s |" % (N, gbit, dense * 1e3, " | ".join(cells)))


if __name__ == "__main__":
    main()
