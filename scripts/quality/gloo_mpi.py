"""The gloo process group of the quality scripts (train_lm.py,
dense_allreduce.py) over the ranks of MPI_COMM_WORLD, and their exit."""
import os
import sys
import tempfile

from mpi4py import MPI


def init_gloo(prefix):
    """torch.distributed's default group: gloo over MPI_COMM_WORLD's ranks,
    rendezvous through a file in a folder rank 0 creates; returns the folder."""
    import torch.distributed as dist
    world = MPI.COMM_WORLD
    folder = world.bcast(tempfile.mkdtemp(prefix=prefix) if world.rank == 0 else None)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(folder, "rendezvous"),
                            rank=world.rank, world_size=world.size)
    return folder


def finish(folder, comm=None):
    """Closes `comm` (a cc_coll.Comm), removes the rendezvous folder and
    leaves: PyTorch 1.13 can abort while destroying a gloo group at exit
    (docs/pytorch.md), so MPI is finalised and the process exits without
    running destructors."""
    world = MPI.COMM_WORLD
    if comm is not None:
        comm.close()
    world.Barrier()
    if world.rank == 0:
        os.remove(os.path.join(folder, "rendezvous"))
        os.rmdir(folder)
    sys.stdout.flush()
    sys.stderr.flush()
    MPI.Finalize()
    os._exit(0)
