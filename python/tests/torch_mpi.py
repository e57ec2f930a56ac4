# SPDX-License-Identifier: BSD-3-Clause
"""What the PyTorch tests that run under mpirun share (test_torch_hooks.py,
test_local_steps.py, test_compressed_adam.py): the check for PyTorch, and
main(): a default gloo process group over MPI_COMM_WORLD's ranks, the
module's unittest run on every rank, an MPI_Abort of the whole job when a
rank fails, and the exit."""

import os
import shutil
import sys
import tempfile
import unittest

from mpi4py import MPI

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size


def import_torch(tag):
    """(torch, torch.distributed, DistributedDataParallel); without them,
    rank 0 prints "<tag>: skipped: ..." (what CTest's skip expression
    matches) and every rank exits 0."""
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ImportError as exc:
        if RANK == 0:
            print("%s: skipped: PyTorch with torch.distributed cannot be imported under %s: %s"
                  % (tag, sys.executable, exc))
        sys.exit(0)
    return torch, dist, DDP


def main(module, passed):
    """Runs `module`'s tests on every rank with a default gloo group over
    the same ranks (rendezvous through a file in a folder rank 0 creates);
    aborts the job when any rank fails, else prints `passed` on rank 0. The
    gloo groups are not destroyed (PyTorch 1.13 can drop their last
    reference on a gloo worker thread and abort): MPI is finalised and the
    process leaves without running destructors."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    path = WORLD.bcast(tempfile.mkdtemp(prefix="cc_coll_torch_test_") if RANK == 0 else None, root=0)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(path, "rendezvous"),
                            rank=RANK, world_size=SIZE)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2 if RANK == 0 else 1)
    ok = unittest.main(module=module, testRunner=runner, exit=False).result.wasSuccessful()
    if not ok or not all(WORLD.allgather(ok)):
        if RANK == 0:
            shutil.rmtree(path, ignore_errors=True)
        sys.stderr.write("rank %d of %d: FAILED\n" % (RANK, SIZE))
        sys.stderr.flush()
        WORLD.Abort(1)
    dist.barrier()
    WORLD.Barrier()
    if RANK == 0:
        shutil.rmtree(path, ignore_errors=True)
        print(passed)
    sys.stdout.flush()
    sys.stderr.flush()
    MPI.Finalize()
    os._exit(0)
