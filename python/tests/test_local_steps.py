# SPDX-License-Identifier: BSD-3-Clause
"""cc_coll.torch.LocalStepsOptimizer (compressed local steps) in real
training, run on every rank:

    mpirun -np 2 python3 python/tests/test_local_steps.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). Needs PyTorch with torch.distributed (Debian: python3-torch);
without it the test prints "python_local_steps: skipped: ..." and CTest
reports it skipped.

A tiny model (two Linear layers, a BatchNorm whose running statistics differ
per rank) trains with AdamW, each rank on its own batches:

  - the warm-up averages the gradients exactly: without DDP (step() does
    it) and with DDP and optimizer_hook, the parameters equal those of
    synchronous training (DDP's own averaging) bit for bit on 1-2 ranks;
  - method NONE: each synchronisation moves the anchor by the mean over the
    ranks of the parameters' change (gathered with mpi4py, float64
    reference), with and without the outer Nesterov momentum, and the
    float buffers are averaged;
  - TOPK with error feedback: the error-feedback invariant per parameter
    (what each rank sent, its change plus its previous residual minus its
    new one, averaged over the ranks, is the anchor's move), and TOPK's
    residual keeps all but at most ceil(density n) of its input;
  - every method: replicas bit-identical after every synchronisation, bytes
    on the wire dense in the warm-up, zero between synchronisations, fewer
    than dense at them;
  - the ramp: H and the density go geometrically from 1 and ramp_density to
    local_steps and density;
  - overlap: the anchors stay bit-identical while the parameters carry each
    rank's local progress; synchronize() makes the replicas bit-identical;
  - checkpoints: a run saved mid-interval and resumed in a fresh optimizer
    on a fresh Comm continues bit-identically; a state of another format
    is refused and changes nothing;
  - bad arguments raise ValueError / TypeError.
A failure on any rank aborts the whole job.
"""

import copy
import math
import unittest

import numpy as np
from mpi4py import MPI

import torch_mpi  # noqa: E402 (python/tests)

import cc_coll

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size

torch, dist, DDP = torch_mpi.import_torch("python_local_steps")

import cc_coll.torch as cct  # noqa: E402 (after the check for PyTorch)

LR = 0.01


def make_net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 8))


def batch(step):
    """This rank's batch of a step: the same on every run, other on each rank."""
    g = torch.Generator().manual_seed(1000 * step + RANK)
    return torch.randn(12, 16, generator=g), torch.randn(12, 8, generator=g)


def flat(tensors):
    return torch.cat([t.detach().reshape(-1).double() for t in tensors]).numpy().copy()


def same_on_all_ranks(array):
    blobs = WORLD.allgather(np.ascontiguousarray(array).tobytes())
    return all(b == blobs[0] for b in blobs)


def train_step(module, opt, step):
    x, y = batch(step)
    opt.zero_grad()
    torch.nn.functional.mse_loss(module(x), y).backward()
    opt.step()


class Watch:
    """Wraps the inner optimizer's step: keeps the parameters right after
    each inner step (before a synchronisation changes them)."""

    def __init__(self, inner, params):
        self.after_inner = None
        step = inner.step

        def watched(*args, **kwargs):
            out = step(*args, **kwargs)
            self.after_inner = flat(params)
            return out

        inner.step = watched


class LocalSteps(unittest.TestCase):
    def comm(self):
        c = cc_coll.Comm(WORLD)
        self.addCleanup(c.close)
        return c

    def make(self, comm, seed=0, inner_cls=torch.optim.AdamW, **kw):
        net = make_net(seed)
        inner = inner_cls(net.parameters(), lr=LR)
        opt = cct.LocalStepsOptimizer(inner, comm, model=net, **kw)
        return net, inner, opt

    # -- the warm-up ----------------------------------------------------------

    def same_as_ddp(self, got, expected):
        # On one and two ranks a sum does not depend on its order, so MPI's
        # average is gloo's bit for bit; beyond, they add in other orders.
        if SIZE <= 2:
            self.assertEqual(got.tobytes(), expected.tobytes())
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)

    def test_warmup_is_synchronous_training(self):
        # SGD: Adam would magnify the rounding of the pre-BatchNorm bias's
        # gradient (zero but for rounding) on 3+ ranks
        steps = 4
        group = dist.new_group(backend="gloo")
        ref = make_net()
        ddp = DDP(ref, process_group=group)
        ref_opt = torch.optim.SGD(ddp.parameters(), lr=LR)
        for s in range(steps):
            train_step(ddp, ref_opt, s)
        expected = flat(ref.parameters())
        # without DDP: step() averages the gradients itself
        net, _, opt = self.make(self.comm(), inner_cls=torch.optim.SGD, warmup_steps=steps, method="topk")
        for s in range(steps):
            self.assertTrue(opt.averaging_gradients())
            train_step(net, opt, s)
        self.same_as_ddp(flat(net.parameters()), expected)
        # with DDP and optimizer_hook
        net2, _, opt2 = self.make(self.comm(), inner_cls=torch.optim.SGD, warmup_steps=steps, method="topk")
        ddp2 = DDP(net2, process_group=dist.new_group(backend="gloo"))
        ddp2.register_comm_hook(opt2, cct.optimizer_hook)
        for s in range(steps):
            train_step(ddp2, opt2, s)
        self.same_as_ddp(flat(net2.parameters()), expected)
        self.assertFalse(opt2.averaging_gradients())
        # afterwards the hook leaves each rank its own gradient, and the
        # replicas meet again at the synchronisation
        before = flat(net2.parameters())
        train_step(ddp2, opt2, steps)
        moved = flat(net2.parameters()) - before
        if SIZE > 1:
            self.assertFalse(same_on_all_ranks(moved), "the local step used averaged gradients")
        for s in range(steps + 1, steps + 4):
            train_step(ddp2, opt2, s)
        self.assertEqual(opt2.syncs, 1)
        self.assertTrue(same_on_all_ranks(flat(net2.parameters())))

    # -- method NONE: the anchor moves by the mean change ----------------------

    def check_exact_average(self, outer_lr, outer_momentum):
        comm = self.comm()
        H = 3
        net, inner, opt = self.make(comm, warmup_steps=2, local_steps=H, method="none", outer_lr=outer_lr,
                                    outer_momentum=outer_momentum)
        params = list(net.parameters())
        watch = Watch(inner, params)
        bufs = [b for b in net.buffers() if b.dtype == torch.float32]
        momentum = None
        anchor = None
        for s in range(2 + 4 * H):
            syncs = opt.syncs
            if s == 2:
                anchor = flat(params)
            train_step(net, opt, s)
            if s < 2:
                continue
            if opt.syncs == syncs:
                if SIZE > 1:
                    self.assertFalse(same_on_all_ranks(flat(params)))
                continue
            mine = watch.after_inner - anchor
            mean = np.mean(WORLD.allgather(mine), axis=0)
            if outer_momentum:
                momentum = mean if momentum is None else outer_momentum * momentum + mean
                update = mean + outer_momentum * momentum
            else:
                update = mean
            expected = anchor + outer_lr * update
            got = flat(params)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
            self.assertTrue(same_on_all_ranks(got), "replicas differ after synchronisation %d" % opt.syncs)
            self.assertTrue(same_on_all_ranks(flat(bufs)), "the buffers were not averaged")
            anchor = got
        self.assertEqual(opt.syncs, 4)

    def test_none_plain_average(self):
        self.check_exact_average(1.0, 0.0)

    def test_none_outer_nesterov(self):
        self.check_exact_average(0.7, 0.9)

    # -- TOPK: the error-feedback invariant -----------------------------------

    def test_topk_error_feedback(self):
        comm = self.comm()
        density, H = 0.1, 2
        net, inner, opt = self.make(comm, warmup_steps=1, local_steps=H, method="topk", density=density,
                                    policy=cct.LayerPolicy(min_elements=64))
        params = list(net.parameters())
        watch = Watch(inner, params)
        compressed = [i for i, p in enumerate(params) if p.dim() > 1 and p.numel() >= 64]
        self.assertEqual(compressed, [0, 4])
        residual = {i: np.zeros(params[i].numel(), np.float32) for i in compressed}
        anchor = None
        for s in range(1 + 5 * H):
            syncs = opt.syncs
            if s == 1:
                anchor = [p.detach().clone() for p in params]
            train_step(net, opt, s)
            if s < 1 or opt.syncs == syncs:
                continue
            after = watch.after_inner
            at = 0
            for i, p in enumerate(params):
                n = p.numel()
                delta = (after[at:at + n] - anchor[i].reshape(-1).double().numpy())
                moved = p.detach().reshape(-1).double().numpy() - anchor[i].reshape(-1).double().numpy()
                at += n
                if i not in compressed:
                    np.testing.assert_allclose(moved, np.mean(WORLD.allgather(delta), axis=0), rtol=1e-5,
                                               atol=1e-7)
                    continue
                new = comm.ef_residual(np.zeros(n, np.float32), ef_key=cct.LOCAL_KEY_BASE + i)
                sent = delta + residual[i] - new
                np.testing.assert_allclose(moved, np.mean(WORLD.allgather(sent), axis=0), rtol=1e-4, atol=1e-6)
                # all but at most k of the input stay in the residual
                inp = delta + residual[i]
                sent_count = np.count_nonzero((new == 0) & (np.abs(inp) > 1e-12))
                self.assertLessEqual(sent_count, math.ceil(density * n))
                self.assertGreater(sent_count, 0)
                residual[i] = new
            anchor = [p.detach().clone() for p in params]
            self.assertTrue(same_on_all_ranks(flat(params)))
        self.assertEqual(opt.syncs, 5)

    # -- every method: identical replicas, bytes -------------------------------

    def test_methods_bytes_and_identity(self):
        dense = sum(p.numel() for p in make_net().parameters()) * 4
        for method, extra in (("topk", dict(density=0.05)), ("sketch", dict(density=0.05)),
                              ("lowrank", dict(rank=2)), ("none", {})):
            with self.subTest(method=method):
                comm = self.comm()
                net, _, opt = self.make(comm, warmup_steps=2, local_steps=3, method=method,
                                        policy=cct.LayerPolicy(min_elements=64), **extra)
                wire = []
                for s in range(2 + 3 * 3):
                    syncs = opt.syncs
                    train_step(net, opt, s)
                    wire.append(comm.stats().bytes_wire)
                    if opt.syncs != syncs:
                        self.assertTrue(same_on_all_ranks(flat(net.parameters())))
                per_step = np.diff([0] + wire)
                if SIZE == 1:
                    continue   # one rank sends nothing
                self.assertTrue(all(b >= dense for b in per_step[:2]), per_step)
                local = per_step[2:]
                self.assertEqual([i for i, b in enumerate(local) if b], [2, 5, 8])
                if method == "none":
                    self.assertTrue(all(b >= dense for b in local[[2, 5, 8]]))
                elif method == "sketch":   # a sketch has at least 3 x 1024 cells: more than this tiny model
                    self.assertTrue(all(b > 0 for b in local[[2, 5, 8]]), local)
                else:
                    self.assertTrue(all(0 < b < dense for b in local[[2, 5, 8]]), local)

    # -- the ramp --------------------------------------------------------------

    def test_ramp(self):
        comm = self.comm()
        _, _, opt = self.make(comm, warmup_steps=10, local_steps=8, density=0.01, ramp_steps=100,
                              ramp_density=0.16)
        self.assertEqual(opt.local_steps_at(10), 1)
        self.assertEqual(opt.local_steps_at(110), 8)
        self.assertEqual(opt.local_steps_at(60), round(8 ** 0.5))
        self.assertAlmostEqual(opt.density_at(10), 0.16)
        self.assertAlmostEqual(opt.density_at(60), 0.04)
        self.assertAlmostEqual(opt.density_at(500), 0.01)
        hs = [opt.local_steps_at(s) for s in range(10, 120)]
        ds = [opt.density_at(s) for s in range(10, 120)]
        self.assertEqual(hs, sorted(hs))
        self.assertEqual(ds, sorted(ds, reverse=True))
        _, _, flat_opt = self.make(comm, local_steps=8, density=0.01)
        self.assertEqual((flat_opt.local_steps_at(0), flat_opt.density_at(0)), (8, 0.01))

    # -- overlap ---------------------------------------------------------------

    def test_overlap(self):
        comm = self.comm()
        net, _, opt = self.make(comm, warmup_steps=1, local_steps=2, method="topk", density=0.1, overlap=True)
        params = list(net.parameters())
        for s in range(7):   # the last step posts an average
            train_step(net, opt, s)
            if opt.anchor is not None:
                self.assertTrue(same_on_all_ranks(flat(opt.anchor)))
        self.assertGreaterEqual(opt.syncs, 2)
        if SIZE > 1:
            self.assertFalse(same_on_all_ranks(flat(params)))
        self.assertRaises(cc_coll.Error, opt.state_dict)
        opt.synchronize()
        self.assertFalse(opt.in_flight)
        self.assertTrue(same_on_all_ranks(flat(params)))
        self.assertEqual(flat(params).tobytes(), flat(opt.anchor).tobytes())
        opt.state_dict()   # nothing in flight now

    # -- checkpoints -------------------------------------------------------------

    def test_checkpoint_resumes_bit_identically(self):
        kw = dict(warmup_steps=2, local_steps=3, method="topk", density=0.1, outer_lr=0.8, outer_momentum=0.5)
        n_first, n_more = 7, 7   # saved between synchronisations (since != 0)
        net, _, opt = self.make(self.comm(), **kw)
        for s in range(n_first):
            train_step(net, opt, s)
        self.assertNotEqual(opt._since, 0)
        saved_model = {k: v.clone() for k, v in net.state_dict().items()}
        saved = copy.deepcopy(opt.state_dict())   # as torch.save would keep it
        for s in range(n_first, n_first + n_more):
            train_step(net, opt, s)
        expected = flat(net.parameters())
        # a fresh model, optimizer and Comm resume from the checkpoint
        net2, _, opt2 = self.make(self.comm(), seed=5, **kw)
        net2.load_state_dict(saved_model)
        opt2.load_state_dict(saved)
        for s in range(n_first, n_first + n_more):
            train_step(net2, opt2, s)
        self.assertEqual(flat(net2.parameters()).tobytes(), expected.tobytes())
        self.assertEqual((opt2.steps, opt2.syncs), (opt.steps, opt.syncs))
        # refused, nothing changed
        before = opt2.state_dict()
        self.assertRaises(ValueError, opt2.load_state_dict, {"format": "other"})
        bad = dict(before)
        bad["anchor"] = [torch.zeros(3)]
        self.assertRaises(ValueError, opt2.load_state_dict, bad)
        bad = dict(before)
        bad["comm_state"] = b"corrupt"
        self.assertRaises(cc_coll.Error, opt2.load_state_dict, bad)
        self.assertEqual(opt2.comm.state_export(), before["comm_state"])
        self.assertEqual(opt2.steps, before["steps"])

    # -- arguments ----------------------------------------------------------------

    def test_arguments(self):
        comm = self.comm()
        net = make_net()
        inner = torch.optim.AdamW(net.parameters(), lr=LR)
        bad = (dict(local_steps=0), dict(local_steps=2.5), dict(method="nope"), dict(density=0.0),
               dict(density=1.5), dict(warmup_steps=-1), dict(ramp_steps=-3), dict(outer_lr=0.0),
               dict(outer_momentum=1.0), dict(ramp_density=2.0), dict(rank=0))
        for kw in bad:
            with self.subTest(**kw):
                self.assertRaises(ValueError, cct.LocalStepsOptimizer, inner, comm, **kw)
        self.assertRaises(TypeError, cct.LocalStepsOptimizer, "adam", comm)
        self.assertRaises(TypeError, cct.LocalStepsOptimizer, inner, comm, policy=3)
        half = torch.nn.Linear(4, 4).half()
        self.assertRaises(TypeError, cct.LocalStepsOptimizer, torch.optim.SGD(half.parameters(), lr=0.1), comm)
        self.assertRaises(NotImplementedError, cct.LocalStepsOptimizer(inner, comm).add_param_group, {})



if __name__ == "__main__":
    torch_mpi.main(__name__, "cc_coll.torch LocalStepsOptimizer passed on %d ranks (torch %s, libcc_coll %s)"
                   % (SIZE, torch.__version__, cc_coll.version()))
