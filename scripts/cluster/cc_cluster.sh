#!/bin/bash
# cc_cluster.sh: an emulated, bandwidth-limited cluster on one machine (root).
#
# N network namespaces (<prefix>-h0 .. <prefix>-h{N-1}), one per "host", each
# joined by a veth pair to a bridge in a switch namespace (<prefix>-sw); tbf
# shapes both directions of every host's link to the given rate, so every
# host-to-host path, and every host's total in and out, is rate-limited. The
# command runs inside <prefix>-h0 under a hard timeout, with CC_CLUSTER_MPIRUN
# set to an mpirun prefix that places one rank on each host and keeps all MPI
# traffic on the shaped links. Everything is torn down on exit. See
# docs/cluster.md.
# shellcheck disable=SC2317  # cleanup functions run from traps
set -u

me=cc_cluster.sh
script_dir=$(cd "$(dirname "$0")" && pwd)
agent=$script_dir/cc_cluster_rsh.sh

usage() {
    cat <<EOF
usage: $me [options] -- <command ...>

Runs <command> inside host 0 of an emulated cluster of network namespaces
whose links are rate-limited with tc, then tears the cluster down. Needs root.

options:
  -N hosts    number of hosts, 2..4 (default 2)
  -n ranks    ranks per host, 1..4 (default 1); ranks of one host talk over
              shared memory, ranks of different hosts over the shaped links
  -r rate     link rate in tc syntax: 100mbit, 1gbit, 10gbit, 500kbit, ...
              (default 1gbit); applies to each host's outgoing and incoming
              traffic
  -d delay    added one-way delay on each host's outgoing traffic, e.g. 0.1ms
              (default none; needs the kernel's netem qdisc)
  -t seconds  hard timeout for the command (default 600); exit status 124
              when it fires
  -p prefix   prefix of the namespace names (default ccx)
  -v          verbose: show the setup and, at the end, each link's tc counters
  -h          this help

The command sees:
  CC_CLUSTER_MPIRUN    mpirun prefix: -n ranks on each host, -np N*n, TCP only on
                       the emulated links, root allowed
  CC_CLUSTER_HOSTFILE  the hostfile (one address per host, slots=n)
  CC_CLUSTER_RANKS_PER_HOST  n
  CC_CLUSTER_HOSTS     N
  CC_CLUSTER_RATE, CC_CLUSTER_DELAY, CC_CLUSTER_SUBNET

example:
  $me -N 2 -r 1gbit -- sh -c '\$CC_CLUSTER_MPIRUN build/examples/cc_coll_demo --mib 64'

Exit status: the command's (124 on timeout); 2 for a usage or setup error.
EOF
}

die() {
    echo "$me: $*" >&2
    exit 2
}

hosts=2
per_host=1
rate=1gbit
delay=
tmo=600
prefix=ccx
verbose=0
while getopts ":N:n:r:d:t:p:vh" opt; do
    case $opt in
        N) hosts=$OPTARG ;;
        n) per_host=$OPTARG ;;
        r) rate=$OPTARG ;;
        d) delay=$OPTARG ;;
        t) tmo=$OPTARG ;;
        p) prefix=$OPTARG ;;
        v) verbose=1 ;;
        h) usage; exit 0 ;;
        :) die "option -$OPTARG needs a value (try -h)" ;;
        *) die "unknown option -$OPTARG (try -h)" ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || die "no command given (usage: $me [options] -- <command ...>; try -h)"

case $hosts in
    2 | 3 | 4) ;;
    *) die "-N must be 2, 3 or 4 (got '$hosts')" ;;
esac
case $per_host in
    1 | 2 | 3 | 4) ;;
    *) die "-n must be 1, 2, 3 or 4 ranks per host (got '$per_host')" ;;
esac
ranks=$((hosts * per_host))
case $tmo in
    '' | *[!0-9]* | 0) die "-t must be a positive whole number of seconds (got '$tmo')" ;;
esac
[[ $prefix =~ ^[A-Za-z0-9_]{1,16}$ ]] || die "-p must be 1..16 letters, digits or '_' (got '$prefix')"

# Rate in bits per second from tc's syntax (bit/kbit/mbit/gbit/tbit, bps (bytes)
# /kbps/mbps/gbps/tbps, with the IEC forms kibit/mibit/... too).
rate_bps() {
    local v unit m
    [[ $1 =~ ^([0-9]+(\.[0-9]+)?)([A-Za-z]*)$ ]] || return 1
    v=${BASH_REMATCH[1]}
    unit=$(echo "${BASH_REMATCH[3]}" | tr '[:upper:]' '[:lower:]')
    case $unit in
        bit | '') m=1 ;;
        kbit) m=1000 ;; mbit) m=1000000 ;; gbit) m=1000000000 ;; tbit) m=1000000000000 ;;
        kibit) m=1024 ;; mibit) m=1048576 ;; gibit) m=1073741824 ;; tibit) m=1099511627776 ;;
        bps) m=8 ;;
        kbps) m=8000 ;; mbps) m=8000000 ;; gbps) m=8000000000 ;; tbps) m=8000000000000 ;;
        kibps) m=8192 ;; mibps) m=8388608 ;; gibps) m=8589934592 ;; tibps) m=8796093022208 ;;
        *) return 1 ;;
    esac
    awk -v v="$v" -v m="$m" 'BEGIN { printf "%.0f\n", v * m }'
}
bps=$(rate_bps "$rate") || die "-r: cannot read rate '$rate' (examples: 100mbit, 1gbit, 10gbit)"
[ "$bps" -ge 8000 ] 2>/dev/null || die "-r: rate '$rate' is too low (at least 8kbit)"
if [ -n "$delay" ]; then
    [[ $delay =~ ^[0-9]+(\.[0-9]+)?(us|usec|usecs|ms|msec|msecs|s|sec|secs)$ ]] ||
        die "-d: cannot read delay '$delay' (examples: 100us, 0.1ms, 2ms)"
fi

[ "$(id -u)" = 0 ] || die "must run as root (it creates network namespaces and tc qdiscs)"
for tool in ip tc timeout mpirun unshare flock awk; do
    command -v "$tool" >/dev/null 2>&1 || case $tool in
        ip | tc) die "'$tool' not found: install iproute2 (apt-get install iproute2)" ;;
        mpirun) die "'mpirun' not found: install Open MPI (apt-get install openmpi-bin)" ;;
        *) die "'$tool' not found: install coreutils / util-linux" ;;
    esac
done
[ -x "$agent" ] || die "the rsh agent $agent is missing or not executable"
case $agent in
    *[[:space:]]*) die "the path of the rsh agent contains white space, which mpirun cannot take: $agent" ;;
esac

# Names and addresses. Addresses are used only inside the namespaces made here.
net=${CC_CLUSTER_NET:-10.213.0}
[[ $net =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "CC_CLUSTER_NET must be three octets, e.g. 10.213.0 (got '$net')"
subnet=$net.0/24
sw=$prefix-sw
hostns() { echo "$prefix-h$1"; }
hostaddr() { echo "$net.$(($1 + 1))"; }

log() { [ "$verbose" = 1 ] && echo "$me: $*" >&2; return 0; }

# One run per prefix at a time: a second one would tear down the first's hosts.
lockfile=/run/cc_cluster.$prefix.lock
exec 9>"$lockfile" || die "cannot open $lockfile"
flock -n 9 || die "another $me run with prefix '$prefix' is active (use -p to pick another prefix)"

# Namespaces of this prefix: ours, or leftovers of an interrupted run.
our_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}-(h[0-9]+|sw)\$" || true
}

teardown() {
    local ns pids tries
    for ns in $(our_namespaces); do
        # Processes still inside (an orted or rank left behind): end them by
        # pid first, so the namespace really goes away.
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        if [ -n "${pids// /}" ]; then
            log "ending processes left in $ns: $pids"
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null
            tries=0
            while [ $tries -lt 50 ] && [ -n "$(ip netns pids "$ns" 2>/dev/null)" ]; do
                sleep 0.1
                tries=$((tries + 1))
            done
            pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
            # shellcheck disable=SC2086
            [ -n "${pids// /}" ] && kill -KILL $pids 2>/dev/null
        fi
        ip netns del "$ns" 2>/dev/null || echo "$me: warning: could not delete namespace $ns" >&2
    done
}

link_stats() {
    local i ns
    for ((i = 0; i < hosts; i++)); do
        ns=$(hostns "$i")
        echo "$me: $ns out: $(ip netns exec "$ns" tc -s qdisc show dev eth0 2>/dev/null | awk '/Sent/ {print $2" bytes, "$4" pkts, dropped "$7; exit}' | tr -d ',')" >&2
        echo "$me: $ns in:  $(ip netns exec "$sw" tc -s qdisc show dev "p$i" 2>/dev/null | awk '/Sent/ {print $2" bytes, "$4" pkts, dropped "$7; exit}' | tr -d ',')" >&2
    done
}

tmpdir=
child=
status=2
cleanup() {
    trap - EXIT INT TERM HUP
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null
        # timeout relays the signal to the command and its process group; give
        # mpirun a moment to end its ranks before the namespaces go.
        for _ in $(seq 50); do
            kill -0 "$child" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$child" 2>/dev/null
    fi
    [ "$verbose" = 1 ] && [ -n "$(our_namespaces)" ] && link_stats
    teardown
    [ -n "$tmpdir" ] && rm -rf "$tmpdir"
    log "torn down"
}
on_signal() {
    echo "$me: interrupted (signal $1); tearing down" >&2
    cleanup
    exit $((128 + $2))
}
trap cleanup EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM
trap 'on_signal HUP 1' HUP

# Leftovers of a previous, interrupted run with this prefix.
if [ -n "$(our_namespaces)" ]; then
    echo "$me: removing leftovers of an earlier run: $(our_namespaces | tr '\n' ' ')" >&2
    teardown
fi

run() {
    "$@" || {
        echo "$me: setup failed: $*" >&2
        exit 2
    }
}

# tbf: a bucket of ~1 ms at the line rate (at least 64 KiB, so that veth's
# 64 KiB GSO packets pass whole) and a queue of up to 20 ms.
burst=${CC_CLUSTER_TBF_BURST:-$(awk -v b="$bps" 'BEGIN { x = b / 8 / 1000; if (x < 65536) x = 65536; printf "%.0f\n", x }')}
tbf_latency=${CC_CLUSTER_TBF_LATENCY:-20ms}
shape() { # <namespace> <device>
    run ip netns exec "$1" tc qdisc add dev "$2" root handle 1: tbf rate "$rate" burst "$burst" latency "$tbf_latency"
}

log "creating $hosts hosts ($prefix-h0..$prefix-h$((hosts - 1))) on $subnet, links at $rate${delay:+, delay $delay}"
run ip netns add "$sw"
run ip netns exec "$sw" ip link set lo up
run ip netns exec "$sw" ip link add name br0 type bridge
run ip netns exec "$sw" ip link set br0 up
nsmap=
for ((i = 0; i < hosts; i++)); do
    ns=$(hostns "$i")
    run ip netns add "$ns"
    run ip netns exec "$ns" ip link set lo up
    run ip netns exec "$ns" ip link add name eth0 type veth peer name "p$i" netns "$sw"
    run ip netns exec "$ns" ip addr add "$(hostaddr "$i")/24" dev eth0
    run ip netns exec "$ns" ip link set eth0 up
    run ip netns exec "$sw" ip link set "p$i" master br0
    run ip netns exec "$sw" ip link set "p$i" up
    shape "$ns" eth0    # host -> switch
    shape "$sw" "p$i"   # switch -> host
    if [ -n "$delay" ]; then
        ip netns exec "$ns" tc qdisc add dev eth0 parent 1:1 handle 10: netem delay "$delay" limit 100000 2>/dev/null ||
            {
                echo "$me: -d needs the netem qdisc, which this kernel lacks (CONFIG_NET_SCH_NETEM); run without -d" >&2
                exit 2
            }
    fi
    nsmap="$nsmap $(hostaddr "$i")=$ns"
done
nsmap=${nsmap# }

# Every host must reach every other one through the switch.
for ((i = 1; i < hosts; i++)); do
    ip netns exec "$(hostns 0)" ping -c 1 -W 2 "$(hostaddr "$i")" >/dev/null 2>&1 ||
        ip netns exec "$(hostns 0)" ping -c 1 -W 2 "$(hostaddr "$i")" >/dev/null 2>&1 ||
        { command -v ping >/dev/null 2>&1 && die "host 0 cannot reach $(hostaddr "$i")"; }
done

tmpdir=$(mktemp -d /tmp/cc_cluster.XXXXXX) || die "mktemp failed"
hostfile=$tmpdir/hostfile
for ((i = 0; i < hosts; i++)); do
    echo "$(hostaddr "$i") slots=$per_host"
done >"$hostfile"

# - plm_rsh_agent: orted reaches each host through ip netns exec;
# - pml ob1 + btl tcp,self: no UCX, no shared memory between hosts; tcp only
#   on the cluster's subnet, and the runtime's own traffic (oob) too. With
#   several ranks per host, vader too: Open MPI uses it only between ranks
#   it places on the same host (the same orted, in that host's namespace),
#   as on a real node; ranks of different hosts still go through the links;
# - --bind-to none: each host's orted believes it owns the machine and would
#   bind its rank to core 0, piling every rank onto one core.
btls=tcp,self
[ "$per_host" -gt 1 ] && btls=tcp,vader,self
mpirun_cmd="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --hostfile $hostfile -np $ranks"
mpirun_cmd="$mpirun_cmd --bind-to none --mca plm_rsh_agent $agent --mca plm_rsh_no_tree_spawn 1"
mpirun_cmd="$mpirun_cmd --mca pml ob1 --mca btl $btls --mca btl_tcp_if_include $subnet --mca oob_tcp_if_include $subnet"
# - mpi_yield_when_idle: with more ranks than cores the ranks oversubscribe the
#   machine, which Open MPI cannot see (it sees only the slots of each host); it would yield
#   when idle on a node it knew to be oversubscribed, so say it here. Without
#   it, 4 busy-polling ranks on 2 cores turn a 4 KiB allreduce from ~0.2 ms
#   into ~20 ms. CC_CLUSTER_YIELD=0|1 overrides.
yield=${CC_CLUSTER_YIELD:-auto}
if [ "$yield" = auto ]; then
    yield=0
    [ "$ranks" -gt "$(nproc)" ] && yield=1
fi
case $yield in
    0 | 1) ;;
    *) die "CC_CLUSTER_YIELD must be 0, 1 or auto (got '$yield')" ;;
esac
[ "$yield" = 1 ] && mpirun_cmd="$mpirun_cmd --mca mpi_yield_when_idle 1"
# - CC_COLL_THREADS and OPENBLAS_NUM_THREADS: the emulated hosts share this
#   machine's cores, but each rank's launcher says it is alone on its host,
#   so by default every rank would take all the cores for its kernels and
#   its BLAS. Each rank gets its share, nproc / ranks (at least 1), unless
#   the caller set the variable (then its value is passed on).
share=$(($(nproc) / ranks))
[ "$share" -lt 1 ] && share=1
for v in CC_COLL_THREADS OPENBLAS_NUM_THREADS; do
    if printenv "$v" > /dev/null; then mpirun_cmd="$mpirun_cmd -x $v"; else mpirun_cmd="$mpirun_cmd -x $v=$share"; fi
done

export CC_CLUSTER_MPIRUN="$mpirun_cmd"
export CC_CLUSTER_HOSTFILE="$hostfile"
export CC_CLUSTER_HOSTS="$hosts"
export CC_CLUSTER_RANKS_PER_HOST="$per_host"
export CC_CLUSTER_RATE="$rate"
export CC_CLUSTER_DELAY="$delay"
export CC_CLUSTER_SUBNET="$subnet"
export CC_CLUSTER_NSMAP="$nsmap"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

log "hosts: $nsmap"
log "CC_CLUSTER_MPIRUN=$CC_CLUSTER_MPIRUN"
log "running in $(hostns 0) (timeout ${tmo}s): $*"

# The command runs in host 0's namespace and in a UTS namespace named after it.
# timeout puts it in a process group of its own and, on expiry or on a
# TERM/INT relayed from the trap, signals the whole group.
# shellcheck disable=SC2016  # $0/$@ belong to the inner shell
timeout -k 10 "$tmo" ip netns exec "$(hostns 0)" unshare --uts \
    /bin/sh -c 'hostname "$0" && exec "$@"' "$(hostns 0)" "$@" 9>&- &
child=$!
wait "$child"
status=$?
child=
[ "$status" = 124 ] && echo "$me: the command timed out after ${tmo}s" >&2
log "command exited with status $status"
exit "$status"
