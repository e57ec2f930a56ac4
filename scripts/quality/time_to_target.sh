#!/bin/bash
# time_to_target.sh: wall-clock time until the validation loss reaches the
# uncompressed run's final value (and that +1%, +3%), on the emulated cluster
# (scripts/cluster/cc_cluster.sh: 2 hosts, one rank each, links at each rate
# of CC_Q_TTT_RATES), for the rows of CC_Q_TTT_RUNS: DDP's dense hook,
# PyTorch's powerSGD_hook and PostLocalSGDOptimizer, and libcc_coll's
# compressed local steps. Each run trains model a
# (docs/quality/benchmark.md) for its full length, evaluating every
# CC_Q_TTT_EVAL steps; the clock is the training time (the slowest rank's
# steps, evaluations left out). Then
# scripts/quality/time_report.py writes docs/quality/time_to_target.json, the
# plots docs/quality/time_<rate>.png and the section of
# docs/quality/time_to_target.md (summed up in docs/quality.md).
# scripts/quality.sh calls it when its cluster step runs; alone, as root,
# after a build:
#
#   CC_COLL_SKIP_APT=1 scripts/quality/time_to_target.sh
#
# About 15 minutes on an idle 2-core machine.
# Settings (environment):
#   CC_Q_TTT_RATES  link rates                      ["1gbit 10gbit"]
#   CC_Q_TTT_RUNS   runs: <id>:<row>[,<option>[=<value>]...] each
#                   ["ddp:ddp powersgd-r4:powersgd,--rank=4 postlocal4:postlocal,--local-steps=4
#                     local8-topk5-nest:local,--local-steps=8,--density=0.05,--outer-lr=0.8,--outer-momentum=0.5"]
#   CC_Q_TTT_EVAL   evaluation period in steps      [50]
#   CC_Q_TTT_ARGS   more train_lm.py options for every run (the smoke test's tiny model) []
#   CC_Q_DIR        results folder                  [docs/quality]
#   CC_Q_TTT_DOC    the page                        [$CC_Q_DIR/time_to_target.md]
# Exit status: 0 when every run finished and the page was written, 1 when a
# run failed, 2 for a setup error.
# shellcheck source=scripts/common.sh
. "$(dirname "$0")/../common.sh"
set -o pipefail

me=time_to_target.sh
cc_coll_help "${1:-}"
[ "$#" -eq 0 ] || die "no arguments expected (settings come from the environment; see --help)"
rates=${CC_Q_TTT_RATES:-1gbit 10gbit}
runs=${CC_Q_TTT_RUNS:-ddp:ddp powersgd-r4:powersgd,--rank=4 postlocal4:postlocal,--local-steps=4 local8-topk5-nest:local,--local-steps=8,--density=0.05,--outer-lr=0.8,--outer-momentum=0.5}
eval_every=${CC_Q_TTT_EVAL:-50}
args=${CC_Q_TTT_ARGS:-}
out_dir=${CC_Q_DIR:-$CC_COLL_ROOT/docs/quality}
doc=${CC_Q_TTT_DOC:-$out_dir/time_to_target.md}
python=/usr/bin/python3
trainer=$CC_COLL_ROOT/scripts/quality/train_lm.py
[ "$(id -u)" = 0 ] || die "the emulated cluster needs root (network namespaces)"
[[ $eval_every =~ ^[1-9][0-9]*$ ]] || die "CC_Q_TTT_EVAL: not a positive whole number: '$eval_every'"
for item in $runs; do
    [[ $item =~ ^[a-z0-9.-]+:[a-z-]+(,--[a-z-]+(=[^,]*)?)*$ ]] ||
        die "CC_Q_TTT_RUNS: '$item' is not <id>:<row>[,--<option>[=<value>]...]"
done
case " $runs " in *" ddp:ddp "*) ;; *) die "CC_Q_TTT_RUNS must hold ddp:ddp (the target is its final loss)" ;; esac
cc_coll_need_cluster_tools || exit 2
lib=$CC_COLL_BUILD_DIR/libcc_coll.so
[ -e "$lib" ] || die "$lib was not built (scripts/quality.sh builds it)"
export PYTHONPATH=$CC_COLL_ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export CC_COLL_LIBRARY=$lib
export OPENBLAS_NUM_THREADS=1
cd "$CC_COLL_ROOT" || exit 2
stage=$(mktemp -d /tmp/cc_ttt.XXXXXX)
trap 'rm -rf "$stage"' EXIT
records=()
lb=$(cut -d' ' -f1-3 /proc/loadavg)
for rate in $rates; do
    for item in $runs; do
        id=${item%%:*}
        rest=${item#*:}
        row=${rest%%,*}
        opts=
        [ "$rest" != "$row" ] && opts=${rest#*,}
        opts=${opts//,/ }
        name=$rate.$id
        echo "== $rate, $id (load $(cut -d' ' -f1-3 /proc/loadavg))"
        # GLOO_SOCKET_IFNAME: gloo (DDP's broadcasts, the ddp, powersgd and
        # postlocal rows' traffic) on the emulated link too.
        if ! scripts/cluster/cc_cluster.sh -N 2 -r "$rate" -t 1800 -p ccttt -- sh -c "\$CC_CLUSTER_MPIRUN \
            -x PYTHONPATH -x CC_COLL_LIBRARY -x OPENBLAS_NUM_THREADS -x GLOO_SOCKET_IFNAME=eth0 $python $trainer \
            --row $row --label $id --eval-every $eval_every --out $stage/$name.json $opts $args" \
            >"$stage/$name.log" 2>&1; then
            cat "$stage/$name.log" >&2
            echo "$me: the run $name failed; nothing rewritten" >&2
            exit 1
        fi
        grep '^train_lm.py:' "$stage/$name.log"
        "$python" - "$stage/$name.json" "$rate" "$id" <<'PY'
import json, sys
path, rate, run = sys.argv[1:]
rec = json.load(open(path))
rec["rate"], rec["run"] = rate, run
rec.pop("digests", None)
json.dump(rec, open(path, "w"))
PY
        records+=("$stage/$name.json")
    done
done
la=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$CC_COLL_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p "$out_dir"
"$python" "$CC_COLL_ROOT/scripts/quality/time_report.py" --collect "${records[@]}" --out "$out_dir/time_to_target.json" \
    --meta "commit=$commit" "date=$(date -u +%Y-%m-%d)" "load_before=$lb" "load_after=$la" \
    "command=scripts/quality/time_to_target.sh" "eval_every=$eval_every" "args=$args" || exit 1
"$python" "$CC_COLL_ROOT/scripts/quality/time_report.py" --dir "$out_dir" --doc "$doc"
