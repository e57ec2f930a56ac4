"""Checks the JSON of cc_coll_perf -N -J on stdin (CTest perf_smoke_overlap_*).

    cc_coll_perf -N -J ... | python3 perf_overlap_check.py --progress auto|caller --test-calls N

The document must parse and hold, besides the blocking fields, the
non-blocking settings (the progress mode the library used, which must be
the one --progress implies: auto means thread exactly when MPI provides
MPI_THREAD_MULTIPLE) and, on every row, OSU's quantities as finite
non-negative numbers, with every method measured and no wrong element.
Times are not compared with anything: they are wall-clock times on a
shared machine.
"""

import argparse
import json
import math
import sys

BLOCKING = ("bytes", "count", "method", "in_place", "time_us", "algbw_GBps", "busbw_GBps", "wire_bytes", "ratio",
            "rel_err", "wrong", "speedup")
NONBLOCKING = ("pure_us", "init_us", "compute_us", "test_us", "wait_us", "overall_us", "overlap_pct",
               "compute_rate_pct")
METHODS = ("mpi", "none", "topk", "sketch", "lowrank")


def fail(msg):
    sys.stderr.write("perf_overlap_check.py: %s\n" % msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--progress", choices=("auto", "caller", "thread"), required=True,
                    help="the CC_COLL_PROGRESS the run had")
    ap.add_argument("--test-calls", type=int, required=True, help="the -t the run had")
    args = ap.parse_args()

    text = sys.stdin.read()
    try:
        d = json.loads(text)
    except ValueError as e:
        fail("stdout is not one JSON document (%s):\n%s" % (e, text[:2000]))
    if d.get("tool") != "cc_coll_perf":
        fail("tool is %r, not cc_coll_perf" % d.get("tool"))
    if not isinstance(d.get("lowrank_rank"), int) or d["lowrank_rank"] < 1:
        fail("lowrank_rank missing or not a positive integer: %r" % d.get("lowrank_rank"))

    nb = d.get("nonblocking")
    if not isinstance(nb, dict):
        fail("no top-level 'nonblocking' object (was -N given?)")
    for key in ("method", "progress", "progress_setting", "thread_level", "test_calls"):
        if key not in nb:
            fail("nonblocking.%s is missing" % key)
    if nb["method"] != "osu_iallreduce":
        fail("nonblocking.method is %r" % nb["method"])
    if nb["test_calls"] != args.test_calls:
        fail("nonblocking.test_calls is %r, the run had -t %d" % (nb["test_calls"], args.test_calls))
    if args.progress == "caller":
        want = "caller"
    else:
        want = "thread" if nb["thread_level"] == "multiple" else ("caller" if args.progress == "auto" else
                                                                  "unavailable")
    if nb["progress"] != want:
        fail("progress %r under CC_COLL_PROGRESS=%s and MPI thread level %s; expected %r"
             % (nb["progress"], args.progress, nb["thread_level"], want))
    if nb["progress_setting"] != args.progress:
        fail("progress_setting %r, the run had CC_COLL_PROGRESS=%s" % (nb["progress_setting"], args.progress))

    results = d.get("results")
    if not isinstance(results, list) or not results:
        fail("no results")
    seen = set()
    for r in results:
        where = "%s at %s bytes (in place: %s)" % (r.get("method"), r.get("bytes"), r.get("in_place"))
        for key in BLOCKING:
            if key not in r:
                fail("%s: blocking field %s is missing" % (where, key))
        o = r.get("nonblocking")
        if not isinstance(o, dict):
            fail("%s: no 'nonblocking' object" % where)
        for key in NONBLOCKING:
            v = o.get(key)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                fail("%s: nonblocking.%s is %r, not a finite number >= 0" % (where, key, v))
        if o["overlap_pct"] > 100:
            fail("%s: overlap_pct %r is above 100" % (where, o["overlap_pct"]))
        if "wrong" not in o:
            fail("%s: nonblocking.wrong is missing" % where)
        if o["wrong"] is None and r["method"] != "mpi":
            fail("%s: the non-blocking result was not checked against the blocking one" % where)
        if o["wrong"] not in (None, 0):
            fail("%s: %r elements of the non-blocking result differ from the blocking result" % (where, o["wrong"]))
        if r["wrong"] not in (None, 0):
            fail("%s: %r wrong elements in the blocking result" % (where, r["wrong"]))
        seen.add(r["method"])
    missing = [m for m in METHODS if m not in seen]
    if missing:
        fail("methods not measured: %s" % ", ".join(missing))
    print("perf_overlap_check.py: %d rows, progress %s (CC_COLL_PROGRESS=%s, MPI thread level %s), %d test calls: OK"
          % (len(results), nb["progress"], args.progress, nb["thread_level"], nb["test_calls"]))


if __name__ == "__main__":
    main()
