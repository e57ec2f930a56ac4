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
#     quality_report.py --check agreeing with it.
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
CC_COLL_SKIP_APT=1 CC_Q_SKIP_BUILD=1 CC_Q_CLUSTER=0 CC_Q_RANKS=2 \
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
