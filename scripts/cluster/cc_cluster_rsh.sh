#!/bin/sh
# rsh agent for scripts/cluster/cc_cluster.sh: Open MPI's mpirun calls it as
#   cc_cluster_rsh.sh [options...] <host> <command words...>
# (through --mca plm_rsh_agent) to start its orted on <host>. <host> is one of
# the emulated cluster's addresses; CC_CLUSTER_NSMAP (set by cc_cluster.sh)
# maps it to the network namespace that holds it:
#   CC_CLUSTER_NSMAP="10.213.0.1=ccx-h0 10.213.0.2=ccx-h1 ..."
# The command runs in that namespace, in a UTS namespace of its own whose
# hostname is the namespace's name, so that every emulated host has a
# distinct hostname (Open MPI names session directories after it).
set -eu

me=cc_cluster_rsh.sh
# Skip options an rsh/ssh-style caller may put before the host (plm_rsh_args).
while [ $# -gt 0 ]; do
    case $1 in
        -*) shift ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "$me: usage: $me [options] <host> <command...>" >&2
    exit 2
fi
host=$1
shift
if [ -z "${CC_CLUSTER_NSMAP:-}" ]; then
    echo "$me: CC_CLUSTER_NSMAP is not set (run me only through scripts/cluster/cc_cluster.sh)" >&2
    exit 2
fi

ns=
for entry in $CC_CLUSTER_NSMAP; do
    if [ "${entry%%=*}" = "$host" ]; then
        ns=${entry#*=}
        break
    fi
done
if [ -z "$ns" ]; then
    echo "$me: host '$host' is not in this emulated cluster ($CC_CLUSTER_NSMAP)" >&2
    exit 2
fi

# "$*": mpirun hands over one shell command line, possibly split into words.
# shellcheck disable=SC2016  # $0/$1 belong to the inner shell
exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' "$ns" "$*"
