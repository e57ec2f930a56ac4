#!/bin/sh
# run_if_ucx.sh MPIEXEC ARGS... PROGRAM [POSTFLAGS...]
# Runs the given mpiexec command line. First the same command with the
# program's --probe argument (MPI_Init and a barrier only) is run; when that
# fails and its output names UCX or the PML, the UCX PML cannot start here,
# and the script exits 77 (CTest SKIP_RETURN_CODE) after showing why; any
# other probe failure is a failure. Otherwise the real command's status is
# returned.
if [ "$#" -lt 2 ]; then
    echo "usage: $0 MPIEXEC ARGS... PROGRAM" >&2
    exit 2
fi
probe_out=$("$@" --probe 2>&1)
probe_rc=$?
if [ "$probe_rc" -ne 0 ]; then
    echo "$probe_out"
    # A sanitizer report (its stack may name UCX) is a failure, not a skip.
    if printf '%s\n' "$probe_out" | grep -qE 'Sanitizer|runtime error: '; then
        echo "FAIL: the probe stopped with a sanitizer report (exit status $probe_rc)"
        exit 1
    fi
    if printf '%s\n' "$probe_out" | grep -qiE 'ucx|pml'; then
        echo "SKIP: MPI does not start with the UCX PML here (probe exit status $probe_rc)"
        exit 77
    fi
    echo "FAIL: the probe failed for a reason other than UCX (exit status $probe_rc)"
    exit 1
fi
exec "$@"
