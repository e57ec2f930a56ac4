"""Trains a small classifier with PyTorch DDP on CPU (gloo), its gradients
averaged by libcc_coll through the cc_coll.torch communication hook:
PowerSGD (LOWRANK, rank 2) on the weight matrices, the biases sent densely,
error feedback and warm start on, after two dense steps.

    mpirun -np 2 python3 python/examples/train_ddp.py
"""
import os
import sys
import tempfile

from mpi4py import MPI

import cc_coll

try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError as exc:
    print("train_ddp.py: skipped: PyTorch cannot be imported: %s" % exc)
    sys.exit(0)
import cc_coll.torch as cct

world = MPI.COMM_WORLD
torch.set_num_threads(1)
# DDP's own process group (it broadcasts the initial parameters), gloo over
# the same ranks; rendezvous through a file rank 0 names.
path = world.bcast(tempfile.mkdtemp(prefix="train_ddp_") if world.rank == 0 else None)
dist.init_process_group("gloo", init_method="file://" + os.path.join(path, "rendezvous"),
                        rank=world.rank, world_size=world.size)

# Synthetic data: 10 classes, each a Gaussian blob in 64 dimensions; every
# rank draws its own batches.
torch.manual_seed(0)
centres = torch.randn(10, 64) * 0.3
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
model = DDP(net)
comm = cc_coll.Comm(world)
state = cct.CompressionState(comm, method="lowrank", rank=2, start_iter=2, model=net)
model.register_comm_hook(state, cct.compression_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

g = torch.Generator().manual_seed(1 + world.rank)
for step in range(40):
    labels = torch.randint(0, 10, (64,), generator=g)
    x = centres[labels] + torch.randn(64, 64, generator=g)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), labels)
    loss.backward()                         # the hook averages each bucket
    opt.step()
    if step == 0:
        first = loss.item()
    if world.rank == 0 and step % 10 in (0, 9):
        print("step %2d  loss %.4f" % (step, loss.item()))

stats = comm.stats()
checkpoint = state.state_dict()             # with the model's and optimizer's
if world.rank == 0:
    print("bytes on the wire / uncompressed: %d / %d (%.1fx less)"
          % (stats.bytes_wire, stats.bytes_uncompressed, stats.ratio))
    print("checkpoint: hook step %d, compression state %d bytes" % (checkpoint["iter"], len(checkpoint["comm_state"])))
assert loss.item() < 0.5 * first, (first, loss.item())
comm.close()
world.Barrier()
if world.rank == 0:
    os.remove(os.path.join(path, "rendezvous"))
    os.rmdir(path)
dist.destroy_process_group()
