#!/bin/bash
# frontier.sh: the loss-gap-against-ratio frontier, docs/quality/frontier.md
# (summed up in docs/quality.md, "Routes at high compression"): every run of
# scripts/quality/frontier_runs.txt (how the gradients' or the parameters'
# information travels, per model, rank count and seed) with
# scripts/quality/train_lm.py under mpirun, then
# scripts/quality/frontier_report.py, which writes docs/quality/frontier.json,
# the plots docs/quality/frontier_<model>.png and the page's section.
# scripts/quality.sh calls it (CC_Q_FRONTIER=0 skips it); alone:
#
#   CC_COLL_SKIP_APT=1 CC_Q_SKIP_BUILD=1 scripts/quality/frontier.sh
#
# after a build (it uses ${CC_COLL_BUILD_DIR:-build}/libcc_coll.so). About 275
# minutes on an idle 2-core machine (docs/quality/benchmark.md).
# Settings (environment):
#   CC_Q_FRONTIER_RUNS   the run list                  [scripts/quality/frontier_runs.txt]
#   CC_Q_FRONTIER_ONLY   run only the lines whose id matches this extended regex []
#   CC_Q_FRONTIER_KEEP=1 keep the records already in the records folder and
#                        those of the committed page ($CC_Q_DIR/frontier.json):
#                        resume a campaign, or add runs to the page; default:
#                        rerun all
#   CC_Q_FRONTIER_ARGS   more train_lm.py options for every run (the smoke test's tiny model) []
#   CC_Q_FRONTIER_STAGE  where each run's record is kept  [$CC_COLL_BUILD_DIR/quality_frontier]
#   CC_Q_DIR             results folder               [docs/quality]
#   CC_Q_FRONTIER_DOC    the page                     [$CC_Q_DIR/frontier.md]
# Exit status: 0 when every run finished and the page was written, 1 when a
# run failed, 2 for a setup error.
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"
set -o pipefail

me=frontier.sh
cc_coll_help "${1:-}"
[ "$#" -eq 0 ] || die "no arguments expected (settings come from the environment; see --help)"
runs=${CC_Q_FRONTIER_RUNS:-$CC_COLL_ROOT/scripts/quality/frontier_runs.txt}
only=${CC_Q_FRONTIER_ONLY:-}
keep=${CC_Q_FRONTIER_KEEP:-0}
args=${CC_Q_FRONTIER_ARGS:-}
out_dir=${CC_Q_DIR:-$CC_COLL_ROOT/docs/quality}
doc=${CC_Q_FRONTIER_DOC:-$out_dir/frontier.md}
python=/usr/bin/python3
trainer=$CC_COLL_ROOT/scripts/quality/train_lm.py
report=$CC_COLL_ROOT/scripts/quality/frontier_report.py
[ -r "$runs" ] || die "cannot read the run list $runs"
case $keep in 0 | 1) ;; *) die "CC_Q_FRONTIER_KEEP must be 0 or 1 (got '$keep')" ;; esac

# The models: the options that make each one.
model_opts() {
    case $1 in
    a) echo "" ;;
    b) echo "--layers 4 --corpus /usr/lib/python3.11 --steps 800 --beta2 0.95" ;;
    a-tuned) echo "$(model_opts a) --lr 0.006" ;;
    b-tuned) echo "$(model_opts b) --lr 0.0042" ;;
    *) return 1 ;;
    esac
}

lib=$CC_COLL_BUILD_DIR/libcc_coll.so
[ -e "$lib" ] || die "$lib was not built (scripts/quality.sh builds it)"
export PYTHONPATH=$CC_COLL_ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export CC_COLL_LIBRARY=$lib
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
records=${CC_Q_FRONTIER_STAGE:-$CC_COLL_BUILD_DIR/quality_frontier}
mkdir -p "$records"
cores=$(nproc)
cd "$CC_COLL_ROOT" || exit 2

# Check the whole list before running anything.
n=0
while read -r id model ranks seeds row opts; do
    case $id in '' | '#'*) continue ;; esac
    model_opts "$model" >/dev/null || die "$runs: run '$id': unknown model '$model' (a or b)"
    [[ $ranks =~ ^[1-9][0-9]*$ ]] || die "$runs: run '$id': not a rank count: '$ranks'"
    [[ $seeds =~ ^[0-9]+(,[0-9]+)*$ ]] || die "$runs: run '$id': seeds must be comma-separated numbers: '$seeds'"
    [[ $id =~ ^[a-z0-9.-]+$ ]] || die "$runs: run id '$id': lower-case letters, digits, '.' and '-' only"
    [ -n "$row" ] || die "$runs: run '$id': no row"
    n=$((n + 1))
done <"$runs"
[ "$n" -gt 0 ] || die "$runs lists no run"
[ "$keep" = 1 ] || rm -f "$records"/*.json
# With CC_Q_FRONTIER_KEEP=1 the runs of the committed page count as made too
# (a fresh build folder holds no record): each run of $out_dir/frontier.json
# whose record is missing is written back, so the page keeps it.
if [ "$keep" = 1 ] && [ -s "$out_dir/frontier.json" ]; then
    "$python" - "$out_dir/frontier.json" "$records" <<'PY' || exit 2
import json, os, sys
page, folder = sys.argv[1:]
n = 0
for r in json.load(open(page))["runs"]:
    path = os.path.join(folder, "%s.%s.%d.s%s.json" % (r["model"], r["run"], r["ranks"], r["settings"]["seed"]))
    if not os.path.exists(path):
        with open(path, "w") as fh:
            json.dump(r, fh)
        n += 1
print("frontier.sh: %d records taken from %s" % (n, page))
PY
fi

start_all=$(date +%s)
while read -r id model ranks seeds row opts; do
    case $id in '' | '#'*) continue ;; esac
    [ -z "$only" ] || [[ $id =~ $only ]] || continue
    mopts=$(model_opts "$model")
    over=
    [ "$ranks" -gt "$cores" ] && over=--oversubscribe
    for seed in ${seeds//,/ }; do
        name=$model.$id.$ranks.s$seed
        rec=$records/$name.json
        if [ "$keep" = 1 ] && [ -s "$rec" ]; then
            echo "== $name: kept"
            continue
        fi
        echo "== $name (load $(cut -d' ' -f1-3 /proc/loadavg))"
        # shellcheck disable=SC2086  # option lists: several words
        if ! mpirun -np "$ranks" $over --bind-to none "$python" "$trainer" --row "$row" --label "$id" \
            --seed "$seed" --out "$rec.tmp" $mopts $opts $args </dev/null >"$records/$name.log" 2>&1; then
            cat "$records/$name.log" >&2
            rm -f "$rec.tmp" "$records/$name.log"
            echo "$me: the run $name failed" >&2
            exit 1
        fi
        grep '^train_lm.py:' "$records/$name.log"
        rm -f "$records/$name.log"
        "$python" - "$rec.tmp" "$model" "$id" <<'PY' && mv "$rec.tmp" "$rec"
import json, sys
path, model, run = sys.argv[1:]
rec = json.load(open(path))
rec["model"], rec["run"] = model, run
json.dump(rec, open(path, "w"))
PY
    done
done <"$runs"
echo "== frontier runs: $(($(date +%s) - start_all)) s"
commit=$(git -C "$CC_COLL_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
"$python" "$report" --collect "$records" --out "$out_dir/frontier.json" \
    --meta "commit=$commit" "date=$(date -u +%Y-%m-%d)" "command=scripts/quality/frontier.sh" "args=$args" || exit 1
"$python" "$report" --dir "$out_dir" --doc "$doc"
