"""Averages a gradient-like array over all ranks, first exactly and then with
TOPK compression (1% of the elements per rank, error feedback on).

    mpirun -np 2 python3 python/examples/allreduce.py
"""
import numpy as np
from mpi4py import MPI

import cc_coll

world = MPI.COMM_WORLD
rng = np.random.default_rng(seed=world.rank)
grad = rng.standard_normal(10_000).astype(np.float32)     # this rank's gradient
exact = np.empty_like(grad)
world.Allreduce(grad, exact)                             # reference: mpi4py
exact /= world.size

with cc_coll.Comm(world) as comm:
    # Method NONE is MPI_Allreduce itself.
    avg = comm.allreduce(grad, np.empty_like(grad), op="avg", method="none")
    assert np.array_equal(avg, exact)

    # TOPK sends 1% of the elements; what it leaves out is fed back into the
    # next call (error feedback), so the running mean of the results
    # converges to the exact average.
    comm.reset_stats()
    out = np.empty_like(grad)
    total = np.zeros(grad.shape, dtype=np.float64)
    steps = 500
    for step in range(1, steps + 1):
        comm.allreduce(grad, out, op=cc_coll.Op.AVG, method="topk", density=0.01, ef=True)
        total += out
    error = np.abs(total / steps - exact).max() / np.abs(exact).max()

    stats = comm.stats()
    if comm.rank == 0:
        print("libcc_coll %s on %d ranks" % (cc_coll.version(), comm.size))
        print("running mean after %d TOPK steps: max relative error %.3g" % (steps, error))
        print("TOPK bytes on the wire / uncompressed: %d / %d"
              % (stats.bytes_wire, stats.bytes_uncompressed))
    assert error < 0.2, error
