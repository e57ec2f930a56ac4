# SPDX-License-Identifier: BSD-3-Clause
"""cc_coll.torch's compression_hook with method="half" in DDP training, run
on every rank:

    mpirun -np 2 python3 python/tests/test_half_torch.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). Needs PyTorch with torch.distributed (Debian: python3-torch);
without it the test prints "python_half_torch: skipped: ..." and CTest
reports it skipped.

A tiny model trains a few steps with DistributedDataParallel over a gloo
process group of the same ranks, on CPU, the hook compressing every bucket
with HALF from the first step (start_iter=0), bfloat16 and, with
CC_COLL_HALF_FORMAT=fp16 in the environment of its Comm, binary16: the
losses are finite and fall, the parameters are bit-identical on all ranks,
and the first step's bucket (no residual yet) is the ranks' average within
two roundings of the format. reduce_scatter_hook with HALF gives this
rank's shard of the average within one bfloat16 rounding. A failure on any
rank aborts the whole job.
"""

import math
import os
import unittest
import unittest.mock

import numpy as np
from mpi4py import MPI

import torch_mpi  # noqa: E402 (python/tests)

import cc_coll

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size

torch, dist, DDP = torch_mpi.import_torch("python_half_torch")

import cc_coll.torch as cct  # noqa: E402 (after the check for PyTorch)

STEPS = 8


def make_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))


def batch(step):
    """This rank's batch of a step: a fixed linear target plus noise."""
    g = torch.Generator().manual_seed(1000 * step + RANK)
    x = torch.randn(32, 16, generator=g)
    w = torch.Generator().manual_seed(7)
    y = x @ torch.randn(16, 8, generator=w) * 0.5 + 0.01 * torch.randn(32, 8, generator=g)
    return x, y


def flat_params(module):
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).numpy().copy()


class FirstBucket:
    """compression_hook, keeping the first step's input and result of each bucket."""

    def __init__(self):
        self.records = {}
        self.__name__ = self.__qualname__ = "first_bucket"  # DDP's register_comm_hook reads them

    def __call__(self, state, bucket):
        first = state.iter == 0
        index, inp = bucket.index(), bucket.buffer().detach().clone()
        fut = cct.compression_hook(state, bucket)
        if not first:
            return fut

        def record(f):
            out = f.value()
            self.records[index] = (inp.numpy().astype(np.float64), out.detach().numpy().astype(np.float64))
            return out

        return fut.then(record)


class HalfHook(unittest.TestCase):
    def train(self, u, rounding, env):
        with unittest.mock.patch.dict(os.environ, env):
            comm = cc_coll.Comm(WORLD)
        self.addCleanup(comm.close)
        net = make_net()
        state = cct.CompressionState(comm, method="half", start_iter=0, model=net)
        self.assertEqual(state.method, cc_coll.Method.HALF)
        hook = FirstBucket()
        ddp = DDP(net, process_group=dist.new_group(backend="gloo"))
        ddp.register_comm_hook(state, hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for s in range(STEPS):
            x, y = batch(s)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            losses.append(float(loss))
        self.assertTrue(all(math.isfinite(v) for v in losses), losses)
        self.assertLess(losses[-1], losses[0], losses)
        params = flat_params(net)
        self.assertTrue(np.all(np.isfinite(params)))
        blobs = WORLD.allgather(params.tobytes())
        self.assertTrue(all(b == blobs[0] for b in blobs), "parameters differ between ranks")
        # The first step's buckets: the average of the ranks' inputs, within
        # two roundings (the inputs', the sum's) of the sum of magnitudes
        # (and half the smallest binary16 subnormal per rounding); with a
        # power-of-two number of ranks the sum, SIZE times the average, is
        # exactly a value of the format.
        self.assertTrue(hook.records)
        for index, (inp, out) in sorted(hook.records.items()):
            ins = WORLD.allgather(inp)
            exact = sum(ins) / SIZE
            bound = 2 * u * (1 + 2 * u) * sum(np.abs(a) for a in ins) / SIZE + 2.0 ** -24
            self.assertTrue(np.all(np.abs(out - exact) <= bound), "bucket %d" % index)
            if SIZE & (SIZE - 1) == 0:
                total = (out * SIZE).astype(np.float32)
                self.assertTrue(np.array_equal(rounding(total), total), "bucket %d: not in the format" % index)
        return losses

    def test_reduce_scatter_hook(self):
        """reduce_scatter_hook with HALF: this rank's shard of the average,
        within one bfloat16 rounding (the inputs'; the sum is not rounded
        again) of the exact one."""
        comm = cc_coll.Comm(WORLD)
        self.addCleanup(comm.close)
        state = cct.CompressionState(comm, method="half", start_iter=0)
        s = 257
        g = torch.Generator().manual_seed(RANK)
        flat = torch.randn(SIZE * s, generator=g)
        ins = WORLD.allgather(flat.numpy().astype(np.float64))
        shard = cct.reduce_scatter_hook(state, flat.clone(), key=0).wait().numpy().astype(np.float64)
        exact = (sum(ins) / SIZE)[RANK * s:(RANK + 1) * s]
        mags = (sum(np.abs(a) for a in ins) / SIZE)[RANK * s:(RANK + 1) * s]
        u = 2.0 ** -8
        self.assertEqual(shard.shape, (s,))
        self.assertTrue(np.all(np.abs(shard - exact) <= u * (1 + 2 * u) * mags))
        self.assertTrue(np.any(shard != exact))

    def test_bf16(self):
        self.train(2.0 ** -8, lambda a: cc_coll.from_bfloat16(cc_coll.to_bfloat16(a)), {})

    def test_fp16(self):
        self.train(2.0 ** -11, lambda a: a.astype(np.float16).astype(np.float32), {"CC_COLL_HALF_FORMAT": "fp16"})


if __name__ == "__main__":
    torch_mpi.main(__name__, "python_half_torch: %d ranks: PASS" % SIZE)
