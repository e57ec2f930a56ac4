#!/usr/bin/python3
"""dense_allreduce.py: the dense allreduce of the quality benchmark's
gradient (432,128 floats) four ways, on every rank, as docs/quality/results.md
quotes them (run it on the emulated cluster, root, from the checkout, with
the library built in build/):

    PYTHONPATH=python CC_COLL_LIBRARY=build/libcc_coll.so scripts/cluster/cc_cluster.sh -N 2 -r 1gbit -- \\
        sh -c '$CC_CLUSTER_MPIRUN [--mca coll_libnbc_iallreduce_algorithm 1] -x PYTHONPATH -x CC_COLL_LIBRARY \\
               -x GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 scripts/quality/dense_allreduce.py'

Prints the mean time of 20 calls (after one untimed call, between barriers)
of mpi4py's MPI_Allreduce, gloo's all_reduce (torch.distributed),
cc_coll allreduce (method NONE) and cc_coll iallreduce + wait; the four are
measured in turn twice and the second round is printed.
"""
import time

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import cc_coll
from gloo_mpi import finish, init_gloo

N = 432128
CALLS = 20


def main():
    world = MPI.COMM_WORLD
    rdv = init_gloo("cc_dense_")
    comm = cc_coll.Comm(world)
    a = np.random.default_rng(world.rank).random(N, dtype=np.float32)
    b = np.empty_like(a)
    t = torch.from_numpy(a.copy())

    def timed(f):
        f()
        world.Barrier()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            f()
        world.Barrier()
        return (time.perf_counter() - t0) / CALLS * 1e3

    ways = (("mpi4py MPI_Allreduce", lambda: world.Allreduce(a, b)),
            ("gloo all_reduce", lambda: dist.all_reduce(t)),
            ("cc_coll allreduce NONE", lambda: comm.allreduce(a.copy(), method="none")),
            ("cc_coll iallreduce NONE + wait", lambda: comm.iallreduce(a.copy(), method="none").wait()))
    for _ in range(2):
        ms = [(name, timed(f)) for name, f in ways]
    if world.rank == 0:
        print("%d ranks, %d floats, mean of %d calls:" % (world.size, N, CALLS))
        for name, v in ms:
            print("  %-32s %6.2f ms" % (name, v))
    finish(rdv, comm)


if __name__ == "__main__":
    main()
