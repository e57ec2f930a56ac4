"""An ordinary mpi4py program (nothing of libcc_coll): the preload tests run
it under LD_PRELOAD=libcc_coll_preload.so.

    python3 mpi4py_allreduce.py compressed   the float32 Allreduce must show
                                             top-k compression with error
                                             feedback
    python3 mpi4py_allreduce.py exact        every call must be exact

Either way the integer and small Allreduce calls must be bit-identical to the
locally computed sums. Rank 0 prints "mpi4py_allreduce: ... PASS" on stderr
after MPI.Finalize() when every rank passed.
"""
import sys

import numpy as np
from mpi4py import MPI

N = 300000  # 1.14 MiB of float32: above the 1 MiB default threshold
STEPS = 200


def values(r, salt, dtype):
    """Deterministic per-rank input every rank can compute."""
    rng = np.random.default_rng(1000 * salt + r)
    if dtype == np.float32:
        return rng.uniform(-1.0, 1.0, N).astype(np.float32)
    return rng.integers(-1000, 1001, N).astype(dtype)


def rel_err(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main():
    mode = sys.argv[1] if len(sys.argv) == 2 else ""
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if mode not in ("compressed", "exact"):
        if rank == 0:
            print("usage: mpi4py_allreduce.py compressed|exact", file=sys.stderr)
        comm.Abort(2)
    compressed = mode == "compressed"
    failures = 0

    def check(ok, what):
        nonlocal failures
        if not ok:
            print(f"mpi4py_allreduce: rank {rank}: FAIL: {what}", file=sys.stderr, flush=True)
            failures += 1

    # Eligible: float32 SUM, out of place, the same buffers every step (the
    # error-feedback residual is keyed by the receive buffer's address).
    g = values(rank, 1, np.float32)
    exact = sum(values(q, 1, np.float32).astype(np.float64) for q in range(size))
    recv = np.empty_like(g)
    acc = np.zeros(N)
    for t in range(1, STEPS + 1):
        comm.Allreduce(g, recv, op=MPI.SUM)
        acc += recv
        if t == 1:
            err1 = rel_err(acc / t, exact)
    err_t = rel_err(acc / STEPS, exact)
    if rank == 0:
        print(f"mpi4py_allreduce: float32 out of place: step 1 error {err1:.3e}, step {STEPS} error {err_t:.3e}")
    if compressed:
        check(err1 > 0.5, f"float32 step 1 error {err1:.3e}: not compressed")
        check(err_t < 0.5 * err1, f"float32 running mean does not converge: {err1:.3e} -> {err_t:.3e}")
    else:
        check(err1 < 1e-6 and err_t < 1e-6, f"float32 not exact: {err1:.3e} {err_t:.3e}")

    # Eligible: float32 SUM in place, one call on a fresh buffer.
    buf = g.copy()
    comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    e = rel_err(buf.astype(np.float64), exact)
    check(e > 0.5 if compressed else e < 1e-6, f"float32 in place: error {e:.3e}")

    # Ineligible: int64 and int32 SUM (1.14 MiB and more), float32 MAX, a
    # small float32 SUM: bit-identical to the exact result.
    for dtype in (np.int64, np.int32):
        a = values(rank, 2, dtype)
        b = np.empty_like(a)
        comm.Allreduce(a, b, op=MPI.SUM)
        want = sum(values(q, 2, dtype) for q in range(size))
        check(np.array_equal(b, want), f"{np.dtype(dtype).name} sum differs from the exact sum")
    a = values(rank, 3, np.int32).astype(np.float32)
    b = np.empty_like(a)
    comm.Allreduce(a, b, op=MPI.MAX)
    want = np.max([values(q, 3, np.int32).astype(np.float32) for q in range(size)], axis=0)
    check(np.array_equal(b, want), "float32 MAX differs from the exact maximum")
    small = values(rank, 4, np.int32)[:1000].astype(np.float32)
    comm.Allreduce(MPI.IN_PLACE, small, op=MPI.SUM)
    want = sum(values(q, 4, np.int32)[:1000] for q in range(size)).astype(np.float32)
    check(np.array_equal(small, want), "small float32 sum in place differs from the exact sum")

    total = np.array([failures], dtype=np.int32)
    comm.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)
    sys.stdout.flush()
    MPI.Finalize()
    if rank == 0:
        if total[0] == 0:
            print(f"mpi4py_allreduce: {size} ranks, {mode}: PASS", file=sys.stderr)
        else:
            print(f"mpi4py_allreduce: {total[0]} checks FAILED", file=sys.stderr)
    sys.exit(0 if total[0] == 0 else 1)


if __name__ == "__main__":
    main()
