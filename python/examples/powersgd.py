"""Averages a bucket of gradient-like arrays (weight matrices and a bias)
over all ranks with LOWRANK (PowerSGD, rank 4), in one grouped call per step:
the weights travel as rank-4 factors, the bias uncompressed, and error
feedback carries what the factors miss into the next step.

    mpirun -np 2 python3 python/examples/powersgd.py
"""
import numpy as np
from mpi4py import MPI

import cc_coll

world = MPI.COMM_WORLD
rng = np.random.default_rng(seed=world.rank)
# This rank's gradients: two weights (viewed as 128 x 256 and 64 x 144, like
# torch's view(shape[0], -1)) and a bias; constant here, so that the running
# mean of the results can be checked against the exact average.
shapes = [(128, 256), (64, 16, 3, 3), (128,)]
grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
exact = []
for g in grads:
    avg = np.empty_like(g)
    world.Allreduce(g, avg)
    exact.append(avg / world.size)

with cc_coll.Comm(world) as comm:
    # One Params per tensor; the ef_key names each tensor's residual and Q.
    params = [cc_coll.Params(method="lowrank", rank=4, ef_key=i) for i in range(len(shapes))]
    outs = [np.empty_like(g) for g in grads]
    totals = [np.zeros(s) for s in shapes]
    steps = 500
    for step in range(steps):
        comm.allreduce_group(grads, outs, op="avg", params=params)
        for total, out in zip(totals, outs):
            total += out

    stats = comm.stats()
    state = comm.lowrank_state(outs[0], ef_key=0)
    errors = [np.abs(t / steps - e).max() / np.abs(e).max() for t, e in zip(totals, exact)]
    if comm.rank == 0:
        print("libcc_coll %s on %d ranks" % (cc_coll.version(), comm.size))
        print("weight 0: %d x %d matrix, rank %d factors P %s and Q %s"
              % (state.rows, state.cols, state.rank, state.p.shape, state.q.shape))
        # Two decimals: the factors' rounding, hence the third digit,
        # depends on the BLAS's kernels for the CPU (AVX2, AVX-512).
        print("running mean after %d steps: max relative error %s"
              % (steps, ", ".join("%.2f" % e for e in errors)))
        print("bytes on the wire / uncompressed: %d / %d"
              % (stats.bytes_wire, stats.bytes_uncompressed))
    assert max(errors) < 0.1, errors
