#!/bin/bash
# smoke_test.sh: scripts/quality.sh end to end on a tiny model (CTest:
# quality_smoke_np2): 2 ranks, a few steps, the rows below, no cluster, into
# a temporary folder; then checks what it wrote:
#   - every row's record: finite losses, replicas bit-identical;
#   - ddp and none: gradient bytes per step = the model's dense size;
#   - the compressing rows: dense bytes during the first --start-iter steps,
#     fewer after; lowrank's bytes on the wire after them = the payload of
#     powerSGD_hook's allreduces (the same matrices at the same rank);
#   - the sweep's run (CC_Q_SWEEP): its options taken (rank 2, 4 dense steps);
#   - the page: one table row per record, the plot a PNG, and
#     quality_report.py --check agreeing with it;
#   - scripts/quality/frontier.sh on a short run list (every route, two
#     seeds of ddp): one record per run and seed, replicas bit-identical,
#     the local rows' bytes (dense warm-up, nothing between
#     synchronisations), its page (quality/frontier.md) and
#     frontier_report.py --check;
#   - as root with ip and tc: scripts/quality/time_to_target.sh on the
#     emulated cluster (ddp and a local row at 1 Gbit/s): the records' clock
#     and time_report.py --check (skipped otherwise, saying so).
# Uses the build in $CC_COLL_BUILD_DIR (CTest sets it); skipped, saying so,
# where /usr/bin/python3 cannot import torch, mpi4py and matplotlib.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python=/usr/bin/python3
if ! "$python" -c 'import torch, mpi4py, matplotlib' 2>/dev/null; then
    echo "quality_smoke: skipped: $python cannot import torch, mpi4py and matplotlib"
    exit 0
fi
tmp=$(mktemp -d /tmp/cc_quality_smoke.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
printf '# Training quality\n\nText kept.\n' >"$tmp/quality.md"
start_iter=3
CC_COLL_SKIP_APT=1 CC_Q_SKIP_BUILD=1 CC_Q_CLUSTER=0 CC_Q_FRONTIER=0 CC_Q_RANKS=2 \
    CC_Q_ROWS="ddp none topk sketch lowrank lowrank-noef powersgd" CC_Q_SWEEP="lowrank:--rank=2,--start-iter=4" \
    CC_Q_ARGS="--steps 10 --layers 1 --dmodel 32 --heads 2 --ctx 16 --batch 8 --eval-every 5 --start-iter $start_iter --min-elements 256 --density 0.05" \
    CC_Q_DIR="$tmp/quality" CC_Q_DOC="$tmp/quality.md" "$root/scripts/quality.sh"
"$python" - "$tmp" "$start_iter" <<'EOF'
import json, math, os, sys
tmp, start_iter = sys.argv[1], int(sys.argv[2])
runs = {r["label"]: r for r in json.load(open(os.path.join(tmp, "quality", "runs.json")))["runs"]}
fail = []
def check(ok, what):
    if not ok:
        fail.append(what)
sweep = "lowrank --rank=2 --start-iter=4"
check(sorted(runs) == sorted("ddp none topk sketch lowrank lowrank-noef powersgd".split() + [sweep]),
      "rows: %s" % sorted(runs))
b = runs[sweep]["bytes_per_step"]
check(runs[sweep]["settings"]["rank"] == 2 and b[:4] == [4 * runs[sweep]["params"]] * 4 and max(b[4:]) < b[0],
      "the sweep's run did not take its options: rank %d, bytes %s" % (runs[sweep]["settings"]["rank"], b))
for row, r in runs.items():
    check(r["ranks"] == 2, "%s: ranks %s" % (row, r["ranks"]))
    check(r["identical"], "%s: replicas differ: %s" % (row, r["digests"]))
    check(all(math.isfinite(x) for x in r["train_loss"]) and all(math.isfinite(v) for _, v in r["val_loss"]),
          "%s: a loss is not finite" % row)
    check(len(r["bytes_per_step"]) == r["settings"]["steps"], "%s: bytes per step" % row)
dense = runs["ddp"]["dense_bytes_per_step"]
check(dense == 4 * runs["ddp"]["params"], "dense bytes %d for %d parameters" % (dense, runs["ddp"]["params"]))
for row in ("ddp", "none"):
    check(runs[row]["bytes_per_step"] == [dense] * len(runs[row]["bytes_per_step"]),
          "%s: bytes per step %s, not the dense %d" % (row, runs[row]["bytes_per_step"], dense))
for row in ("topk", "sketch", "lowrank", "lowrank-noef", "powersgd"):
    b = runs[row]["bytes_per_step"]
    check(b[:start_iter] == [dense] * start_iter, "%s: dense warm-up steps %s" % (row, b[:start_iter]))
    check(max(b[start_iter:]) < dense, "%s: compressed steps %s not below %d" % (row, b[start_iter:], dense))
check(runs["lowrank"]["bytes_per_step"][start_iter:] == runs["powersgd"]["bytes_per_step"][start_iter:],
      "lowrank %s vs powerSGD_hook %s bytes per step" % (runs["lowrank"]["bytes_per_step"][start_iter:],
                                                         runs["powersgd"]["bytes_per_step"][start_iter:]))
page = open(os.path.join(tmp, "quality.md")).read()
check(page.startswith("# Training quality\n\nText kept.\n"), "the text before the section was changed")
check(page.count("<!-- BEGIN quality-results -->") == 1 and page.count("<!-- END quality-results -->") == 1,
      "markers")
check(sum(1 for line in page.splitlines() if line.startswith("| cc_coll ") or line.startswith("| uncompressed")
          or line.startswith("| PyTorch")) == len(runs), "one table row per record")
png = os.path.join(tmp, "quality", "loss_2ranks.png")
check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "loss_2ranks.png is not a PNG")
if fail:
    print("quality_smoke: FAILED:\n  " + "\n  ".join(fail))
    sys.exit(1)
print("quality_smoke: %d rows checked" % len(runs))
EOF
"$python" "$root/scripts/quality/quality_report.py" --check --dir "$tmp/quality" --doc "$tmp/quality.md"

# The frontier on a short run list.
cat >"$tmp/runs.txt" <<'RUNS'
# id model ranks seeds row options
ddp              a 2 0,1 ddp
powersgd-r2      a 2 0 powersgd --rank 2
postlocal2       a 2 0 postlocal --local-steps 2
local2-topk      a 2 0 local --local-steps 2 --density 0.1
local2-topk-noef a 2 0 local-noef --local-steps 2 --density 0.1
RUNS
tiny="--steps 10 --layers 1 --dmodel 32 --heads 2 --ctx 16 --batch 8 --eval-every 5 --start-iter $start_iter --min-elements 256"
CC_COLL_SKIP_APT=1 CC_Q_FRONTIER_RUNS="$tmp/runs.txt" CC_Q_FRONTIER_ARGS="$tiny" CC_Q_FRONTIER_STAGE="$tmp/stage" \
    CC_Q_DIR="$tmp/quality" "$root/scripts/quality/frontier.sh"
"$python" - "$tmp" "$start_iter" <<'EOF'
import json, os, sys
tmp, start_iter = sys.argv[1], int(sys.argv[2])
runs = json.load(open(os.path.join(tmp, "quality", "frontier.json")))["runs"]
fail = []
def check(ok, what):
    if not ok:
        fail.append(what)
got = sorted((r["run"], r["settings"]["seed"]) for r in runs)
check(got == sorted([("ddp", 0), ("ddp", 1), ("powersgd-r2", 0), ("postlocal2", 0), ("local2-topk", 0),
                     ("local2-topk-noef", 0)]), "runs: %s" % got)
for r in runs:
    check(r["identical"], "%s: replicas differ" % r["run"])
    check(r["model"] == "a" and len(r["bytes_per_step"]) == 10, "%s: model or steps" % r["run"])
    if r["row"] in ("local", "local-noef", "postlocal"):
        b, dense = r["bytes_per_step"], r["dense_bytes_per_step"]
        # dense warm-up; then a synchronisation every 2 steps (postlocal:
        # PeriodicModelAverager's from the warm-up's end, the local rows' 2
        # steps later), nothing between, and one at the end before the
        # final evaluation
        check(all(x >= dense for x in b[:start_iter]), "%s: warm-up bytes %s" % (r["run"], b))
        sync = [i for i in range(start_iter, 10) if b[i]]
        first = start_iter if r["row"] == "postlocal" else start_iter + 1
        every = list(range(first, 10, 2))
        check(sync == every + ([9] if every[-1] != 9 else []), "%s: synchronisations at %s" % (r["run"], sync))
        if r["row"] != "postlocal":
            check(all(0 < b[i] < dense for i in every), "%s: compressed bytes %s" % (r["run"], b))
page = open(os.path.join(tmp, "quality", "frontier.md")).read()
check(page.count("<!-- BEGIN quality-frontier -->") == 1, "frontier markers")
for png in ("frontier_a.png", "frontier_curves_a.png"):
    path = os.path.join(tmp, "quality", png)
    check(os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % png)
if fail:
    print("quality_smoke: frontier FAILED:\n  " + "\n  ".join(fail))
    sys.exit(1)
print("quality_smoke: frontier: %d records checked" % len(runs))
EOF
"$python" "$root/scripts/quality/frontier_report.py" --check --dir "$tmp/quality" --doc "$tmp/quality/frontier.md"

# Time to target on the emulated cluster (root, ip and tc).
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    echo "quality_smoke: time to target skipped: the emulated cluster needs root, ip and tc"
    exit 0
fi
CC_COLL_SKIP_APT=1 CC_Q_TTT_RATES=1gbit CC_Q_TTT_EVAL=5 CC_Q_TTT_ARGS="$tiny" \
    CC_Q_TTT_RUNS="ddp:ddp local2:local,--local-steps=2,--density=0.1" \
    CC_Q_DIR="$tmp/quality" "$root/scripts/quality/time_to_target.sh"
"$python" - "$tmp" <<'EOF'
import json, os, sys
runs = json.load(open(os.path.join(sys.argv[1], "quality", "time_to_target.json")))["runs"]
ok = sorted(r["run"] for r in runs) == ["ddp", "local2"] and all(
    r["rate"] == "1gbit" and len(r["val_time"]) == len(r["val_loss"]) == 3 and r["val_time"][0] == 0
    and r["val_time"] == sorted(r["val_time"]) and r["val_time"][-1] > 0 for r in runs)
print("quality_smoke: time to target: %s" % ("checked" if ok else "FAILED: %s" % runs))
sys.exit(0 if ok else 1)
EOF
"$python" "$root/scripts/quality/time_report.py" --check --dir "$tmp/quality" --doc "$tmp/quality/time_to_target.md"
