# SPDX-License-Identifier: BSD-3-Clause
"""cc_coll's optimizers with compressed synchronous steps (CompressedAdam and
DGCSGD, cc_coll/_compressed_adam.py), run on every rank:

    mpirun -np 2 python3 python/tests/test_compressed_adam.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). Needs PyTorch with torch.distributed; without it the test prints
"python_compressed_adam: skipped: ..." and CTest reports it skipped.

A tiny model (two Linear layers and a bias-only layer; an embedding model
for the row masks) trains a few steps on CPU, each rank on its own batches:

  CompressedAdam
  - warm-up: parameters bit-identical, step by step, to
    torch.optim.AdamW(foreach=False) on the exactly averaged gradients
    (float32 and float64, two parameter groups);
  - after the freeze (TOPK, SKETCH, LOWRANK, EF21, masks, refresh):
    parameters and momentum bit-identical on every rank (SHA-256 of the
    bytes gathered with mpi4py);
  - method NONE after the freeze: m is the mean of the u_i and the update
    uses the frozen v (reference computed by hand, float tolerance);
  - TOPK: what each rank sent (u_i + previous residual - new residual; at
    most ceil(density n) elements), averaged over the ranks, is m;
  - EF21: H is the running sum of the averages of the c_i = h_i - h_i',
    h_i + e = u_i, m = H, and each c_i holds at most ceil(density n)
    elements; a refresh step sets h_i = H = m;
  - refresh="exponential": the warm-up and refresh steps send the dense
    size (Comm.stats().bytes_wire), the others less, and v changes on
    exactly those steps;
  - mask_zero_rows: embedding rows unused in the warm-up keep zero
    momentum, residual, h and H after it, while used later;
  - checkpoints: N steps, save, M more equals bit for bit a fresh model,
    Comm and optimizer that load the state and run the M steps; corrupt
    or mismatched states are refused and change nothing;
  - DDP (gloo) with optimizer_hook: the warm-up matches DDP's own
    averaging with AdamW bit for bit, local gradients after the freeze,
    averaged ones on refresh steps, replicas bit-identical;
  - bad arguments raise ValueError or TypeError.
  DGCSGD
  - warm-up bit-identical to torch.optim.SGD (momentum, Nesterov, weight
    decay) on the averaged gradients;
  - replicas bit-identical (TOPK, SKETCH, clipping, ramp, Nesterov);
  - momentum factor masking: the velocity is zero exactly at the sent
    coordinates and momentum u + g elsewhere; the residual is zero there;
    the parameters move by lr times the average sent;
  - the ramp's densities and the number of elements sent per step;
  - checkpoint round trip bit-identical.
A failure on any rank aborts the whole job.
"""

import hashlib
import io
import math
import unittest

import numpy as np
from mpi4py import MPI

import torch_mpi  # noqa: E402 (python/tests)

import cc_coll

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size

torch, dist, DDP = torch_mpi.import_torch("python_compressed_adam")

from cc_coll._compressed_adam import (ADAM_KEY_BASE, DGC_KEY_BASE, CompressedAdam,  # noqa: E402
                                      DGCSGD)
from cc_coll._local_steps import optimizer_hook  # noqa: E402

HYPER = dict(lr=0.01, betas=(0.8, 0.99), eps=1e-7, weight_decay=0.05)


class BiasOnly(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(n))

    def forward(self, x):
        return x + self.bias


def make_net(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8),
                               BiasOnly(8)).to(dtype)


class EmbNet(torch.nn.Module):
    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = torch.nn.Embedding(20, 6)
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, idx):
        return self.fc(self.emb(idx).mean(dim=1))


def batch(step, dtype=torch.float32):
    """This rank's batch of a step: the same on every run."""
    g = torch.Generator().manual_seed(1000 * step + RANK)
    return torch.randn(12, 16, generator=g).to(dtype), torch.randn(12, 8, generator=g).to(dtype)


def backward(net, step, dtype=torch.float32):
    x, y = batch(step, dtype)
    for p in net.parameters():
        p.grad = None
    loss = torch.nn.functional.mse_loss(net(x), y)
    loss.backward()
    return float(loss)


def train(net, opt, step, dtype=torch.float32):
    loss = backward(net, step, dtype)
    opt.step()
    return loss


def emb_backward(net, step, rows):
    g = torch.Generator().manual_seed(77 * step + RANK)
    idx = torch.randint(0, rows, (8, 3), generator=g)
    for p in net.parameters():
        p.grad = None
    torch.nn.functional.mse_loss(net(idx), torch.randn(8, 4, generator=g)).backward()


def average_grads(net):
    """The exact average of the gradients over the ranks (mpi4py; on one or
    two ranks the library's AVG gives the same bits)."""
    for p in net.parameters():
        g = p.grad.detach().numpy()
        out = np.empty_like(g)
        WORLD.Allreduce(g, out, op=MPI.SUM)
        p.grad.copy_(torch.from_numpy(out / SIZE))


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def same_on_all_ranks(tensors):
    d = WORLD.allgather(digest(tensors))
    return all(x == d[0] for x in d)


def agree(ok):
    """ok on every rank (collective, so a failure stops every rank alike)."""
    return all(WORLD.allgather(bool(ok)))


def bits_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.numpy().tobytes() == b.numpy().tobytes()


def params_of(net):
    return [p.detach().clone() for p in net.parameters()]


def flat(t):
    return t.detach().view(-1).numpy()


def residual(comm, p, key):
    return torch.from_numpy(comm.ef_residual(flat(p), ef_key=key)).view(p.shape).to(p.dtype)


def roundtrip(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf)


class Base(unittest.TestCase):
    def comm(self):
        c = cc_coll.Comm(WORLD)
        self.addCleanup(c.close)
        return c


class Adam(Base):
    # -- warm-up: AdamW bit for bit --------------------------------------------

    def test_warmup_is_adamw(self):
        for dtype in (torch.float32, torch.float64):
            with self.subTest(dtype=dtype):
                net, ref = make_net(dtype=dtype), make_net(dtype=dtype)
                groups = lambda n: [{"params": list(n.parameters())[:2]},        # noqa: E731
                                    {"params": list(n.parameters())[2:], "lr": 0.02, "weight_decay": 0.0}]
                opt = CompressedAdam(groups(net), self.comm(), freeze_step=5, method="topk", **HYPER)
                ropt = torch.optim.AdamW(groups(ref), foreach=False, **HYPER)
                for s in range(5):
                    self.assertTrue(opt.averaging_gradients())
                    train(net, opt, s, dtype)
                    backward(ref, s, dtype)
                    average_grads(ref)
                    ropt.step()
                    ok = all(bits_equal(a.detach(), b.detach()) for a, b in zip(net.parameters(), ref.parameters()))
                    self.assertTrue(agree(ok), "step %d: parameters differ from AdamW's" % s)
                self.assertFalse(opt.averaging_gradients())
                self.assertTrue(opt.frozen)
                self.assertEqual((opt.steps, opt.v_updates), (5, 5))

    # -- replicas ---------------------------------------------------------------

    def test_replicas_bit_identical(self):
        configs = [dict(method="topk", density=0.1, refresh="exponential"),
                   dict(method="sketch", density=0.2),
                   dict(method="lowrank", rank=2),
                   dict(method="lowrank", rank=2, estimate="ef21"),
                   dict(method="topk", density=0.1, estimate="ef21", mask_zero_rows=True, refresh="exponential"),
                   dict(method="topk", density=0.1, ef=False),
                   dict(method="none")]
        for config in configs:
            with self.subTest(**config):
                net = make_net()
                opt = CompressedAdam(net.parameters(), self.comm(), freeze_step=2, **config, **HYPER)
                for s in range(7):
                    loss = train(net, opt, s)
                    self.assertTrue(math.isfinite(loss))
                    self.assertTrue(same_on_all_ranks(list(net.parameters())), "step %d: replicas differ" % s)
                    self.assertTrue(same_on_all_ranks([opt.state[p]["exp_avg"] for p in net.parameters()]))

    # -- method NONE: the hand-made reference ----------------------------------

    def test_none_after_freeze_is_mean_momentum(self):
        net = make_net()
        F = 2
        opt = CompressedAdam(net.parameters(), self.comm(), freeze_step=F, method="none", **HYPER)
        for s in range(F):
            train(net, opt, s)
        beta1, beta2 = HYPER["betas"]
        lr, eps, wd = HYPER["lr"], HYPER["eps"], HYPER["weight_decay"]
        frozen = [opt.state[p]["exp_avg_sq"].clone() for p in net.parameters()]
        for s in range(F, F + 4):
            backward(net, s)
            before = [(p.detach().double().clone(), opt.state[p]["exp_avg"].double().clone(), p.grad.double())
                      for p in net.parameters()]
            opt.step()
            ok = True
            for (p0, m0, g), p, v0 in zip(before, net.parameters(), frozen):
                u = beta1 * m0 + (1 - beta1) * g
                m = torch.from_numpy(WORLD.allreduce(u.numpy()) / SIZE)
                v_hat = v0.double() / (1 - beta2 ** F)
                expect = p0 * (1 - lr * wd) - lr * (m / (1 - beta1 ** (s + 1))) / (v_hat.sqrt() + eps)
                ok &= torch.allclose(opt.state[p]["exp_avg"].double(), m, rtol=1e-5, atol=1e-7)
                ok &= torch.allclose(p.detach().double(), expect, rtol=1e-5, atol=1e-7)
                ok &= bits_equal(opt.state[p]["exp_avg_sq"], v0)
            self.assertTrue(agree(ok), "step %d differs from the reference" % s)

    # -- error feedback -----------------------------------------------------------

    def test_topk_error_feedback_invariant(self):
        comm = self.comm()
        net = make_net()
        density = 0.1
        opt = CompressedAdam(net.parameters(), comm, freeze_step=2, method="topk", density=density, **HYPER)
        beta1 = HYPER["betas"][0]
        params = list(net.parameters())
        for s in range(7):
            backward(net, s)
            prev = [residual(comm, p, ADAM_KEY_BASE + i) for i, p in enumerate(params)]
            u = [opt.state[p]["exp_avg"].mul(beta1).add_(p.grad, alpha=1 - beta1) for p in params]
            opt.step()
            if s < 2:
                continue
            ok = True
            for i, p in enumerate(params):
                m = opt.state[p]["exp_avg"].double()
                if p.dim() > 1:
                    new = residual(comm, p, ADAM_KEY_BASE + i)
                    sent = (u[i] + prev[i]) - new
                    ok &= int((sent != 0).sum()) <= math.ceil(density * p.numel())
                else:
                    sent = u[i]
                    ok &= not residual(comm, p, ADAM_KEY_BASE + i).any()
                avg = torch.from_numpy(WORLD.allreduce(sent.double().numpy()) / SIZE)
                ok &= torch.allclose(avg, m, rtol=1e-5, atol=1e-7)
            self.assertTrue(agree(ok), "step %d: the average sent is not m" % s)
        self.assertGreater(comm.ef_bytes(), 0)

    def test_ef21_estimates(self):
        comm = self.comm()
        net = make_net()
        density = 0.1
        opt = CompressedAdam(net.parameters(), comm, freeze_step=2, method="topk", density=density,
                             estimate="ef21", **HYPER)
        beta1 = HYPER["betas"][0]
        params = list(net.parameters())
        matrices = [i for i, p in enumerate(params) if p.dim() > 1]
        self.assertEqual(sorted(i for i, p in enumerate(params) if "H" in opt.state[p]), matrices)
        sums = {i: torch.zeros_like(params[i], dtype=torch.float64) for i in matrices}
        for s in range(7):
            backward(net, s)
            h_old = {i: opt.state[params[i]]["h"].clone() for i in matrices}
            u = [opt.state[p]["exp_avg"].mul(beta1).add_(p.grad, alpha=1 - beta1) for p in params]
            opt.step()
            ok = True
            for i in matrices:
                p, st = params[i], opt.state[params[i]]
                if s < 2:
                    ok &= not st["h"].any() and not st["H"].any()
                    continue
                c = (st["h"] - h_old[i]).double()
                ok &= int((c != 0).sum()) <= math.ceil(density * p.numel())
                sums[i] += torch.from_numpy(WORLD.allreduce(c.numpy()) / SIZE)
                ok &= torch.allclose(st["H"].double(), sums[i], rtol=1e-5, atol=1e-6)
                e = residual(comm, p, ADAM_KEY_BASE + i)
                ok &= torch.allclose(st["h"] + e, u[i], rtol=1e-5, atol=1e-6)
                ok &= bits_equal(st["exp_avg"], st["H"])
            self.assertTrue(agree(ok), "step %d: EF21's estimates are off" % s)
            self.assertTrue(same_on_all_ranks([opt.state[params[i]]["H"] for i in matrices]))

    def test_ef21_refresh_resets_estimates(self):
        net = make_net()
        opt = CompressedAdam(net.parameters(), self.comm(), freeze_step=2, method="topk", density=0.1,
                             estimate="ef21", refresh="exponential", **HYPER)
        for s in range(5):
            train(net, opt, s)
            st = opt.state[net[0].weight]
            reset = bits_equal(st["h"], st["exp_avg"]) and bits_equal(st["H"], st["exp_avg"])
            self.assertTrue(agree(reset == (s == 4) or SIZE == 1 and s >= 2), "step %d" % s)

    # -- refresh ------------------------------------------------------------------

    def test_refresh_steps_are_dense(self):
        comm = self.comm()
        net = make_net()
        opt = CompressedAdam(net.parameters(), comm, freeze_step=2, method="topk", density=0.05,
                             refresh="exponential", **HYPER)
        dense = sum(p.numel() * p.element_size() for p in net.parameters())
        expected_dense = {0, 1, 4, 8}
        self.assertEqual({s for s in range(20) if opt.averaging_gradients(s)}, {0, 1, 4, 8, 16})
        for s in range(10):
            v = [opt.state[p]["exp_avg_sq"].clone() for p in net.parameters()]
            before = comm.stats().bytes_wire
            train(net, opt, s)
            sent = comm.stats().bytes_wire - before
            changed = any(not bits_equal(a, opt.state[p]["exp_avg_sq"]) for a, p in zip(v, net.parameters()))
            if s in expected_dense:
                self.assertEqual(sent, dense, "step %d" % s)
                self.assertTrue(changed, "step %d: v not updated" % s)
            else:
                self.assertLess(sent, dense, "step %d" % s)
                self.assertFalse(changed, "step %d: v changed while frozen" % s)
        self.assertEqual(opt.v_updates, 4)
        self.assertTrue(same_on_all_ranks(list(net.parameters())))

    # -- masks --------------------------------------------------------------------

    def test_masks_hold_unused_rows_at_zero(self):
        for config in (dict(method="topk", density=0.2), dict(method="topk", density=0.2, estimate="ef21"),
                       dict(method="lowrank", rank=2), dict(method="sketch", density=0.3, refresh="exponential")):
            with self.subTest(**config):
                comm = self.comm()
                net = EmbNet()
                F = 3
                opt = CompressedAdam(net.parameters(), comm, freeze_step=F, mask_zero_rows=True, **config, **HYPER)
                emb = net.emb.weight
                for s in range(9):
                    emb_backward(net, s, rows=10 if s < F else 20)
                    used_late = bool(emb.grad[10:].abs().sum() > 0)
                    opt.step()
                    st = opt.state[emb]
                    if s < F:
                        continue
                    self.assertTrue(agree(used_late))
                    self.assertEqual(st["rows_seen"].tolist(), [True] * 10 + [False] * 10)
                    ok = not st["exp_avg"][10:].any() and bool(st["exp_avg"][:10].any())
                    ok &= not residual(comm, emb, ADAM_KEY_BASE + 0)[10:].any()
                    if "H" in st:
                        ok &= not st["h"][10:].any() and not st["H"][10:].any()
                    ok &= bool(opt.state[net.fc.weight]["rows_seen"].all())
                    self.assertTrue(agree(ok), "step %d: masked rows moved" % s)
                self.assertTrue(same_on_all_ranks(list(net.parameters())))

    # -- checkpoints ------------------------------------------------------------

    def check_checkpoint(self, n, m, **config):
        a_net = make_net()
        a = CompressedAdam(a_net.parameters(), self.comm(), freeze_step=2, **config, **HYPER)
        for s in range(n):
            train(a_net, a, s)
        saved = roundtrip({"model": a_net.state_dict(), "opt": a.state_dict()})
        for s in range(n, n + m):
            train(a_net, a, s)
        b_net = make_net(seed=5)
        b_net.load_state_dict(saved["model"])
        b = CompressedAdam(b_net.parameters(), WORLD, freeze_step=2, **config, **HYPER)   # its own Comm
        self.addCleanup(b.close)
        b.load_state_dict(saved["opt"])
        self.assertEqual(b.steps, n)
        for s in range(n, n + m):
            train(b_net, b, s)
        ok = all(bits_equal(x.detach(), y.detach()) for x, y in zip(a_net.parameters(), b_net.parameters()))
        ok &= b.comm.state_export() == a.comm.state_export()
        self.assertTrue(agree(ok), "the resumed run differs")

    def test_checkpoint(self):
        for config in (dict(method="topk", density=0.1, refresh="exponential"),
                       dict(method="sketch", density=0.2, estimate="ef21"),
                       dict(method="lowrank", rank=2, estimate="ef21", refresh="exponential"),
                       dict(method="lowrank", rank=2)):
            with self.subTest(**config):
                self.check_checkpoint(3, 4, **config)

    def test_bad_state_is_refused(self):
        net = make_net()
        opt = CompressedAdam(net.parameters(), self.comm(), freeze_step=1, method="topk", density=0.1,
                             mask_zero_rows=True, **HYPER)
        for s in range(3):
            train(net, opt, s)
        good = opt.state_dict()
        fresh = CompressedAdam(make_net().parameters(), self.comm(), freeze_step=1, method="topk", density=0.1,
                               mask_zero_rows=True, **HYPER)
        before = fresh.state_dict()
        corrupt = dict(good, comm_state=good["comm_state"][:-3])
        self.assertRaises(cc_coll.Error, fresh.load_state_dict, corrupt)
        self.assertRaises(ValueError, fresh.load_state_dict, dict(good, format="other/1"))
        self.assertRaises(ValueError, fresh.load_state_dict, {})
        bad_shape = roundtrip(good)
        bad_shape["state"][0]["exp_avg"] = torch.zeros(3)
        self.assertRaises(ValueError, fresh.load_state_dict, bad_shape)
        missing = roundtrip(good)
        del missing["state"][1]["exp_avg_sq"]
        self.assertRaises(ValueError, fresh.load_state_dict, missing)
        self.assertRaises(ValueError, fresh.load_state_dict, dict(good, rank=RANK + 1))
        other = CompressedAdam(make_net().parameters(), self.comm(), freeze_step=1, method="sketch", **HYPER)
        self.assertRaises(ValueError, other.load_state_dict, good)
        after = fresh.state_dict()
        self.assertEqual(fresh.steps, 0)
        self.assertEqual(after["comm_state"], before["comm_state"])
        for i in before["state"]:
            for k in before["state"][i]:
                self.assertTrue(bits_equal(before["state"][i][k], after["state"][i][k]))
        fresh.load_state_dict(good)
        self.assertEqual((fresh.steps, fresh.v_updates), (3, 1))

    # -- DDP ----------------------------------------------------------------------

    def test_ddp_optimizer_hook(self):
        F = 3
        net = make_net()
        ddp = DDP(net, process_group=dist.new_group(backend="gloo"))
        opt = CompressedAdam(ddp.parameters(), self.comm(), freeze_step=F, method="topk", density=0.1,
                             refresh="exponential", **HYPER)
        ddp.register_comm_hook(opt, optimizer_hook)
        ref_net = make_net()
        ref = DDP(ref_net, process_group=dist.new_group(backend="gloo"))
        ropt = torch.optim.AdamW(ref.parameters(), foreach=False, **HYPER)
        for s in range(8):
            x, y = batch(s)
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            self.assertTrue(opt._ddp_hooked)
            averaged = same_on_all_ranks([p.grad for p in net.parameters()])
            self.assertEqual(averaged, opt.averaging_gradients() or SIZE == 1, "step %d" % s)
            opt.step()
            self.assertFalse(opt._ddp_hooked)
            if s < F:
                ropt.zero_grad()
                torch.nn.functional.mse_loss(ref(x), y).backward()
                ropt.step()
                ok = all(bits_equal(a.detach(), b.detach()) for a, b in zip(net.parameters(), ref_net.parameters()))
                self.assertTrue(agree(ok), "step %d: differs from DDP + AdamW" % s)
            self.assertTrue(same_on_all_ranks(list(net.parameters())), "step %d: replicas differ" % s)

    # -- arguments ------------------------------------------------------------------

    def test_arguments(self):
        comm = self.comm()
        ps = list(make_net().parameters())
        for kw in (dict(density=0), dict(density=1.5), dict(freeze_step=0), dict(freeze_step=2.5),
                   dict(freeze_step=True), dict(method="nope"), dict(method="auto"), dict(refresh="linear"),
                   dict(estimate="ef14"), dict(betas=(1.0, 0.9)), dict(betas=(0.9,)), dict(lr=-1.0),
                   dict(eps=float("nan")), dict(weight_decay=-0.1), dict(rank=0), dict(key_base=-1)):
            with self.subTest(**kw):
                self.assertRaises(ValueError, CompressedAdam, ps, comm, **kw)
        self.assertRaises(ValueError, CompressedAdam, [{"params": ps, "lr": -2.0}], comm)
        self.assertRaises(TypeError, CompressedAdam, ps, comm, method=1.5)
        self.assertRaises(TypeError, CompressedAdam, ps, comm, policy=3)
        self.assertRaises(TypeError, CompressedAdam, ps, comm, seed="x")
        for bad in (torch.nn.Parameter(torch.zeros(4, 3).t()), torch.nn.Parameter(torch.zeros(4, dtype=torch.half)),
                    torch.zeros(4, dtype=torch.int64)):
            self.assertRaises(TypeError, CompressedAdam, [bad], comm)
        opt = CompressedAdam(ps, WORLD, method="lowrank", freeze_step=3)
        self.assertIn("lowrank", repr(opt))
        self.assertFalse(opt.comm.closed)
        self.assertRaises(NotImplementedError, opt.add_param_group, {"params": [torch.nn.Parameter(torch.ones(2))]})
        opt.close()
        self.assertTrue(opt.comm.closed)
        kept = CompressedAdam(ps, comm)
        kept.close()
        self.assertFalse(comm.closed)
        # DGCSGD
        self.assertRaises(TypeError, DGCSGD, ps, comm)                       # lr is required
        for kw in (dict(method="lowrank"), dict(density=0), dict(clip_norm=0.0), dict(warmup_steps=-1),
                   dict(ramp_steps=1.5), dict(ramp_density=2.0), dict(momentum=1.5), dict(momentum=0.0, nesterov=True),
                   dict(lr=-0.1)):
            with self.subTest(dgc=kw):
                self.assertRaises(ValueError, DGCSGD, ps, comm, **dict(dict(lr=0.1), **kw))
        self.assertRaises(TypeError, DGCSGD, ps, comm, 0.1, nesterov="yes")
        self.assertRaises(TypeError, DGCSGD, [torch.zeros(3, dtype=torch.int32)], comm, 0.1)
        self.assertIn("topk", repr(DGCSGD(ps, comm, 0.1)))


class DGC(Base):
    def test_warmup_is_sgd(self):
        for nesterov in (False, True):
            with self.subTest(nesterov=nesterov):
                net, ref = make_net(), make_net()
                hyper = dict(lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=nesterov)
                opt = DGCSGD(net.parameters(), self.comm(), warmup_steps=4, **hyper)
                ropt = torch.optim.SGD(ref.parameters(), foreach=False, **hyper)
                for s in range(4):
                    self.assertTrue(opt.averaging_gradients())
                    train(net, opt, s)
                    backward(ref, s)
                    average_grads(ref)
                    ropt.step()
                    ok = all(bits_equal(a.detach(), b.detach()) for a, b in zip(net.parameters(), ref.parameters()))
                    self.assertTrue(agree(ok), "step %d: differs from SGD" % s)
                self.assertFalse(opt.averaging_gradients())

    def test_replicas_bit_identical(self):
        for config in (dict(method="topk", density=0.05, clip_norm=0.5, warmup_steps=1, ramp_steps=3),
                       dict(method="sketch", density=0.1, nesterov=True, weight_decay=1e-3),
                       dict(method="topk", density=0.02, nesterov=True, clip_norm=10.0)):
            with self.subTest(**config):
                net = make_net()
                opt = DGCSGD(net.parameters(), self.comm(), lr=0.05, **config)
                for s in range(6):
                    self.assertTrue(math.isfinite(train(net, opt, s)))
                    self.assertTrue(same_on_all_ranks(list(net.parameters())), "step %d: replicas differ" % s)

    def test_momentum_factor_masking(self):
        comm = self.comm()
        net = make_net()
        lr, mom = 0.05, 0.9
        opt = DGCSGD(net.parameters(), comm, lr=lr, momentum=mom, method="topk", density=0.1, warmup_steps=1)
        params = list(net.parameters())
        for s in range(6):
            backward(net, s)
            u_before = [opt.state[p]["momentum_buffer"].clone() for p in params]
            e_before = [residual(comm, p, DGC_KEY_BASE + i) for i, p in enumerate(params)]
            p_before = params_of(net)
            opt.step()
            if s < 1:
                continue
            ok = True
            for i, p in enumerate(params):
                u = u_before[i].mul(mom).add_(p.grad)
                got = opt.state[p]["momentum_buffer"]
                if p.dim() > 1:
                    e_after = residual(comm, p, DGC_KEY_BASE + i)
                    sent = (u + e_before[i]) - e_after
                    kept = sent != 0
                    ok &= int(kept.sum()) == math.ceil(0.1 * p.numel())
                    ok &= not got[kept].any() and bits_equal(got[~kept], u[~kept])
                    ok &= not e_after[kept].any()
                    ok &= bits_equal(sent, opt.last_sent[i])
                else:
                    sent = u
                    ok &= bits_equal(got, u)
                avg = torch.from_numpy(WORLD.allreduce(sent.double().numpy()) / SIZE)
                step = (p_before[i] - p.detach()).double() / lr
                ok &= torch.allclose(step, avg, rtol=1e-4, atol=1e-5)
            self.assertTrue(agree(ok), "step %d: masking or the update is off" % s)

    def test_ramp(self):
        comm = self.comm()
        net = make_net()
        opt = DGCSGD(net.parameters(), comm, lr=0.05, method="topk", density=0.02, warmup_steps=2, ramp_steps=4,
                     ramp_density=0.1)
        r = 0.1   # every step on TOPK's sparse path (2 x 8 ceil(0.1 n) < 4 n bytes)
        expected = [r, r, r, r ** 0.75 * 0.02 ** 0.25, r ** 0.5 * 0.02 ** 0.5, r ** 0.25 * 0.02 ** 0.75, 0.02, 0.02]
        for s, d in enumerate(expected):
            self.assertAlmostEqual(opt.density_at(s), d, places=12)
        w = net[0].weight
        counts = []
        for s in range(len(expected)):
            train(net, opt, s)
            if s >= 2:
                counts.append(int((opt.last_sent[0] != 0).sum()))
        self.assertEqual(counts, [math.ceil(d * w.numel()) for d in expected[2:]])
        self.assertEqual(DGCSGD(net.parameters(), comm, lr=0.1, density=0.3).density_at(0), 0.3)

    def test_checkpoint(self):
        config = dict(lr=0.05, method="topk", density=0.05, warmup_steps=1, ramp_steps=2, nesterov=True)
        a_net = make_net()
        a = DGCSGD(a_net.parameters(), self.comm(), **config)
        for s in range(3):
            train(a_net, a, s)
        saved = roundtrip({"model": a_net.state_dict(), "opt": a.state_dict()})
        for s in range(3, 6):
            train(a_net, a, s)
        b_net = make_net(seed=3)
        b_net.load_state_dict(saved["model"])
        b = DGCSGD(b_net.parameters(), self.comm(), **config)
        self.assertRaises(cc_coll.Error, b.load_state_dict, dict(saved["opt"], comm_state=b"junk"))
        self.assertRaises(ValueError, b.load_state_dict, dict(saved["opt"], format="x"))
        self.assertEqual(b.steps, 0)
        b.load_state_dict(saved["opt"])
        for s in range(3, 6):
            train(b_net, b, s)
        ok = all(bits_equal(x.detach(), y.detach()) for x, y in zip(a_net.parameters(), b_net.parameters()))
        self.assertTrue(agree(ok), "the resumed run differs")



if __name__ == "__main__":
    torch_mpi.main(__name__, "CompressedAdam and DGCSGD passed on %d ranks (torch %s, libcc_coll %s)"
                   % (SIZE, torch.__version__, cc_coll.version()))
