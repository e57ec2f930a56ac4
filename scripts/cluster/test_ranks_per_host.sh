#!/bin/bash
# test_ranks_per_host.sh: checks scripts/cluster/cc_cluster.sh with several
# ranks per host (CTest: cluster_ranks_per_host): on 2 hosts x 2 ranks,
#   - ranks 0, 1 run on host 0 and ranks 2, 3 on host 1 (their hostnames);
#   - 32 MiB from rank 0 to rank 1 (same host) stay off the shaped link
#     (shared memory), 32 MiB from rank 0 to rank 2 go through it (the
#     link's tc counters, cc_cluster.sh -v).
# Needs root, ip and tc, and /usr/bin/python3 with mpi4py for the build's
# MPI; skipped, saying so, without them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
skip() { echo "cluster_ranks_per_host: skipped: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "not root (network namespaces)"
for tool in ip tc; do command -v "$tool" >/dev/null 2>&1 || skip "'$tool' not found (iproute2)"; done
"$python" -c 'import mpi4py' 2>/dev/null || skip "$python cannot import mpi4py"
tmp=$(mktemp -d /tmp/cc_cluster_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/p2p.py" <<'PY'
import socket, sys
import numpy as np
from mpi4py import MPI
w = MPI.COMM_WORLD
names = w.gather(socket.gethostname(), root=0)
if w.rank == 0:
    print("hosts:", " ".join(names))
peer = int(sys.argv[1])
a = np.ones(8 << 20, np.float32)  # 32 MiB
if w.rank == 0:
    w.Send(a, dest=peer)
elif w.rank == peer:
    w.Recv(a, source=0)
    assert a.sum() == a.size
w.Barrier()
PY
fail=0
for peer in 1 2; do
    out=$("$here/cc_cluster.sh" -N 2 -n 2 -v -t 120 -p cctst -- \
        sh -c "\$CC_CLUSTER_MPIRUN $python $tmp/p2p.py $peer" 2>&1) || { echo "$out"; echo "FAILED: the run to rank $peer"; exit 1; }
    hosts=$(printf '%s\n' "$out" | sed -n 's/^hosts: //p')
    sent=$(printf '%s\n' "$out" | awk '/cctst-h0 out:/ {print $4; exit}')
    echo "rank 0 -> rank $peer: hosts of ranks 0..3: $hosts; host 0's link carried $sent bytes"
    [ "$hosts" = "cctst-h0 cctst-h0 cctst-h1 cctst-h1" ] || { echo "FAILED: placement"; fail=1; }
    case $peer in
        1) [ "${sent:-0}" -lt 1048576 ] || { echo "FAILED: a same-host send crossed the link"; fail=1; } ;;
        2) [ "${sent:-0}" -gt 33554432 ] || { echo "FAILED: the cross-host send did not cross the link"; fail=1; } ;;
    esac
done
[ "$fail" = 0 ] && echo "cluster_ranks_per_host: passed"
exit "$fail"
