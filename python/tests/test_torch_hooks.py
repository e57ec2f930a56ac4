# SPDX-License-Identifier: BSD-3-Clause
"""cc_coll.torch's DDP communication hooks in real DDP training, run on every
rank:

    mpirun -np 2 python3 python/tests/test_torch_hooks.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). Needs PyTorch with torch.distributed (Debian: python3-torch);
without it the test prints "python_torch_hooks: skipped: ..." and CTest
reports it skipped.

A tiny model (two Linear layers and a bias-only layer) trains a few steps
with DistributedDataParallel over a gloo process group of the same ranks,
on CPU, with SGD and momentum:

  - method NONE (compression_hook and allreduce_hook): parameters
    bit-identical to DDP without a hook (its own gloo allreduce); on one or
    two ranks a sum is independent of its order, so gloo's and MPI's agree;
  - TOPK, SKETCH (flat bucket, and per gradient with a LayerPolicy), LOWRANK,
    in one bucket and in several: after every step, per tensor of every
    bucket, the error-feedback invariant: what each rank sent (its input plus
    its previous residual minus its new one, residuals read back with
    Comm.ef_residual under the hook's ef_keys), averaged over the ranks,
    is the bucket's result, to float rounding; TOPK's residual keeps all but
    at most ceil(density n) elements of input plus previous residual; the
    parameters are bit-identical on all ranks;
  - reduce_scatter_hook (sharded steps): NONE gives this rank's shard of
    the average (bit-identical to MPI's sum / P on one and two ranks); TOPK
    keeps the error-feedback invariant over the gathered shards; bad
    arguments and LOWRANK are refused with ValueError;
  - checkpoint: training saved after N steps (hook state, model, optimizer)
    and continued M steps equals, bit for bit, a fresh run (new gloo group,
    new Comm, new model) that loads the checkpoint and runs the M steps; a
    corrupt compression state is refused with cc_coll.Error and changes
    nothing.
A failure on any rank aborts the whole job.
"""

import math
import pickle
import unittest

import numpy as np
from mpi4py import MPI

import api_checks  # noqa: E402 (python/tests)
import torch_mpi  # noqa: E402 (python/tests)

import cc_coll

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size

torch, dist, DDP = torch_mpi.import_torch("python_torch_hooks")

import cc_coll.torch as cct  # noqa: E402 (after the check for PyTorch)

STEPS = 6
START_ITER = 2
LR = 0.05


class BiasOnly(torch.nn.Module):
    """A layer with nothing but a bias (a 1-D parameter)."""

    def __init__(self, n):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(n))

    def forward(self, x):
        return x + self.bias


def make_net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8), BiasOnly(8))


def batch(step):
    """This rank's batch of a step: the same on every run."""
    g = torch.Generator().manual_seed(1000 * step + RANK)
    x = torch.randn(12, 16, generator=g)
    y = torch.randn(12, 8, generator=g)
    return x, y


def flat_params(module):
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).numpy().copy()


def same_on_all_ranks(array):
    blobs = WORLD.allgather(array.tobytes())
    return all(b == blobs[0] for b in blobs)


class FirstBucketBytes:
    """DDP's first bucket holds up to dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB
    in PyTorch 1.13) whatever bucket_cap_mb says; lowered for a run, so that
    the tiny model spans several buckets."""

    def __init__(self, nbytes):
        self.nbytes = nbytes

    def __enter__(self):
        self.saved = dist._DEFAULT_FIRST_BUCKET_BYTES
        if self.nbytes is not None:
            dist._DEFAULT_FIRST_BUCKET_BYTES = self.nbytes
        return self

    def __exit__(self, *exc):
        dist._DEFAULT_FIRST_BUCKET_BYTES = self.saved
        return False


class Run:
    """One DDP training run on its own gloo group; with `config`, a
    CompressionState of it on `comm` (given the model unless
    model_keys is False) for `hook`."""

    def __init__(self, comm=None, hook=None, config=None, seed=0, small_buckets=False, model_keys=True):
        self.group = dist.new_group(backend="gloo")
        self.net = make_net(seed)
        self.small_buckets = small_buckets
        self.state = None
        if config is not None:
            self.state = cct.CompressionState(comm, model=self.net if model_keys else None, **config)
        self.hook = hook
        self.ddp = None
        self.opt = None

    def start(self, model_state=None, opt_state=None):
        if model_state is not None:
            self.net.load_state_dict(model_state)
        kwargs = dict(process_group=self.group)
        if self.small_buckets:
            kwargs["bucket_cap_mb"] = 200 / 2 ** 20    # about one parameter a bucket
        with FirstBucketBytes(200 if self.small_buckets else None):
            self.ddp = DDP(self.net, **kwargs)
        if self.hook is not None:
            self.ddp.register_comm_hook(self.state, self.hook)
        self.opt = torch.optim.SGD(self.ddp.parameters(), lr=LR, momentum=0.9)
        if opt_state is not None:
            self.opt.load_state_dict(opt_state)
        return self

    def step(self, step, after_backward=None):
        x, y = batch(step)
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.ddp(x), y)
        loss.backward()
        if after_backward is not None:
            after_backward(step)
        self.opt.step()
        return float(loss)


class Recorder:
    """compression_hook, recording each bucket's input and result."""

    def __init__(self):
        self.records = {}
        self.__name__ = self.__qualname__ = "recorder"  # DDP's register_comm_hook reads them

    def __call__(self, state, bucket):
        index, inp = bucket.index(), bucket.buffer().detach().clone()
        fut = cct.compression_hook(state, bucket)

        def record(f):
            out = f.value()
            self.records[index] = (inp.numpy().astype(np.float64), out.detach().numpy().astype(np.float64))
            return out

        return fut.then(record)


class Hooks(unittest.TestCase):
    def comm(self):
        c = cc_coll.Comm(WORLD)
        self.addCleanup(c.close)
        return c

    # -- method NONE against DDP's own allreduce -----------------------------

    def test_none_is_ddps_allreduce(self):
        reference = Run().start()
        for s in range(STEPS):
            reference.step(s)
        expected = flat_params(reference.net)
        for hook in (cct.compression_hook, cct.allreduce_hook):
            for small in (False, True):
                with self.subTest(hook=hook.__name__, small_buckets=small):
                    run = Run(self.comm(), hook, dict(method="none"), small_buckets=small).start()
                    state = run.state
                    for s in range(STEPS):
                        run.step(s)
                    got = flat_params(run.net)
                    if SIZE <= 2:
                        self.assertTrue(np.array_equal(got.view(np.uint32), expected.view(np.uint32)),
                                        "max difference %g" % np.abs(got - expected).max())
                    else:  # other sum orders: the rounding of a few steps
                        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
                    self.assertTrue(same_on_all_ranks(got))
                    self.assertEqual(state.iter, STEPS)
                    self.assertEqual(state.comm.ef_bytes(), 0)

    # -- error feedback ---------------------------------------------------------

    def check_ef(self, small_buckets=False, model_keys=True, **config):
        comm = self.comm()
        recorder = Recorder()
        run = Run(comm, recorder, dict(config, start_iter=START_ITER), small_buckets=small_buckets,
                  model_keys=model_keys).start()
        state = run.state
        residuals = {}              # ef_key -> this rank's residual after the last step
        compressed_steps = 0

        def check(step):
            self.assertEqual(state.inflight, 0)
            self.assertTrue(recorder.records, "the hook saw no bucket")
            compressed = False
            for index, (inp, out) in sorted(recorder.records.items()):
                for e in state.layout(index):
                    # this tensor's input and result, in its own order
                    x = np.concatenate([inp[o:o + n] for o, n in e.segments])
                    y = np.concatenate([out[o:o + n] for o, n in e.segments])
                    if e.ef_key is None:
                        sent = x
                    else:
                        compressed = True
                        new = comm.ef_residual(np.empty(e.count, np.float32), ef_key=e.ef_key)
                        prev = residuals.get(e.ef_key, np.zeros(e.count))
                        sent = x + prev - new
                        residuals[e.ef_key] = new
                        if e.method == cc_coll.Method.TOPK:
                            k = math.ceil(state.density_at(step) * e.count)
                            kept = new != 0
                            self.assertGreaterEqual(int(kept.sum()), e.count - k, "bucket %d %s" % (index, e))
                            np.testing.assert_allclose(new[kept], (x + prev)[kept], rtol=1e-6, atol=1e-7)
                    average = WORLD.allreduce(sent) / SIZE
                    scale = max(float(np.abs(y).max()), 1e-30)
                    self.assertLess(float(np.abs(average - y).max()) / scale, 1e-5,
                                    "step %d bucket %d %s: sent + residual != input + previous residual"
                                    % (step, index, e))
            recorder.records.clear()
            self.assertEqual(compressed, step >= START_ITER, "step %d" % step)
            return compressed

        for s in range(STEPS):
            run.step(s, after_backward=check)
            compressed_steps += s >= START_ITER
        self.assertEqual(state.iter, STEPS)
        self.assertGreater(comm.ef_bytes(), 0)
        got = flat_params(run.net)
        self.assertTrue(np.isfinite(got).all())
        self.assertTrue(same_on_all_ranks(got), "parameters differ between ranks")
        return state

    def test_topk_flat_bucket(self):
        state = self.check_ef(method="topk", density=0.1)
        self.assertEqual([e.ef_key for e in state.layout(0)], [state.ef_key(0)])
        # DDP's rebuilt bucket holds the gradients in reverse: sent in the model's order
        self.assertEqual([n for _, n in state.layout(0)[0].segments], [32 * 16, 32, 8 * 32, 8, 8])

    def test_topk_flat_bucket_without_model(self):
        state = self.check_ef(method="topk", density=0.1, model_keys=False)
        self.assertEqual(state.layout(0)[0].segments, ((0, state.layout(0)[0].count),))

    def test_topk_small_buckets(self):
        state = self.check_ef(method="topk", density=0.1, small_buckets=True)
        self.assertGreater(len(state._buckets), 1)

    def test_topk_layer_policy(self):
        state = self.check_ef(method="topk", density=0.1, policy=cct.LayerPolicy(min_elements=200))
        methods = {e.shape: e.method for e in state.layout(0)}
        self.assertEqual(methods[(32, 16)], cc_coll.Method.TOPK)
        self.assertEqual(methods[(8, 32)], cc_coll.Method.TOPK)
        self.assertEqual(methods[(32,)], cc_coll.Method.NONE)
        self.assertEqual(methods[(8,)], cc_coll.Method.NONE)

    def test_sketch(self):
        self.check_ef(method="sketch", density=0.2)

    # -- a ramp instead of a switch, AUTO, a budgeted policy ----------------------

    def test_topk_ramp(self):
        # the density goes 0.2 -> 0.025 over 3 steps after the dense ones
        # (below TOPK's dense fallback); check_ef checks each step's kept
        # count against density_at(step)
        state = self.check_ef(method="topk", density=0.025, ramp_steps=3, ramp_density=0.2,
                              policy=cct.LayerPolicy(min_elements=200))
        self.assertAlmostEqual(state.density_at(START_ITER), 0.2)
        self.assertAlmostEqual(state.density_at(START_ITER + 1), 0.1)
        self.assertAlmostEqual(state.density_at(START_ITER + 3), 0.025)
        self.assertAlmostEqual(state.density_at(START_ITER + 100), 0.025)
        lowrank = cct.CompressionState(self.comm(), method="lowrank", rank=2, start_iter=2, ramp_steps=4)
        self.assertEqual([lowrank.rank_at(s) for s in range(2, 8)], [8, 6, 4, 3, 2, 2])

    def test_ramp_bytes_fall(self):
        comm = self.comm()
        run = Run(comm, cct.compression_hook, dict(method="topk", density=0.02, start_iter=1, ramp_steps=4,
                                                  ramp_density=0.32, policy=cct.LayerPolicy(min_elements=200)))
        run.start()
        wire = []
        for s in range(6):
            run.step(s)
            wire.append(comm.stats().bytes_wire)
        per_step = np.diff([0] + wire)
        if SIZE > 1:
            ramp = list(per_step[1:6])
            self.assertEqual(ramp, sorted(ramp, reverse=True), per_step)
            self.assertGreater(ramp[0], ramp[-1])
        self.assertTrue(same_on_all_ranks(flat_params(run.net)))

    def test_auto(self):
        comm = self.comm()
        run = Run(comm, cct.compression_hook, dict(method="auto", density=0.1, rank=2, start_iter=1)).start()
        for s in range(4):
            run.step(s)
        stats = comm.stats()
        self.assertGreater(stats.auto_calls, 0)
        self.assertTrue(same_on_all_ranks(flat_params(run.net)))
        self.assertEqual(run.state.method, cc_coll.Method.AUTO)
        self.assertTrue(all(np.isfinite(flat_params(run.net))))

    # -- PyTorch's names, logging, the helper thread ------------------------------

    def test_pytorch_names(self):
        comm = self.comm()
        torch_style = cct.CompressionState(comm, method="lowrank", matrix_approximation_rank=4,
                                           start_powerSGD_iter=3, min_compression_rate=3, use_error_feedback=False,
                                           warm_start=False)
        ours = cct.CompressionState(comm, method="lowrank", rank=4, start_iter=3, min_compression_rate=3, ef=False,
                                    warm_start=False)
        for s in (torch_style, ours):
            self.assertEqual((s.rank, s.start_iter, s.min_compression_rate, s.ef, s.warm_start), (4, 3, 3, False, False))
        self.assertEqual(torch_style._method_params, ours._method_params)
        # both spellings: fine when they agree, a ValueError naming both when they do not
        both = cct.CompressionState(comm, method="lowrank", rank=4, matrix_approximation_rank=4)
        self.assertEqual(both.rank, 4)
        for ours_name, torch_name, a, b in (("rank", "matrix_approximation_rank", 1, 4),
                                            ("start_iter", "start_powerSGD_iter", 2, 10),
                                            ("ef", "use_error_feedback", True, False)):
            with self.subTest(ours_name):
                with self.assertRaisesRegex(ValueError, "%s=%r and %s=%r" % (ours_name, a, torch_name, b)):
                    cct.CompressionState(comm, method="lowrank", **{ours_name: a, torch_name: b})
        with self.assertRaisesRegex(ValueError, "matrix_approximation_rank"):
            cct.CompressionState(comm, method="lowrank", matrix_approximation_rank=0)  # checked as rank is
        # the defaults still read as values in help()
        import inspect
        sig = inspect.signature(cct.CompressionState)
        self.assertEqual((repr(sig.parameters["rank"].default), repr(sig.parameters["start_iter"].default),
                          repr(sig.parameters["ef"].default)), ("1", "2", "True"))
        self.assertEqual(cct.CompressionState(comm).rank, 1)

    def test_help_and_type_hints(self):
        import pydoc
        self.assertEqual(api_checks.undocumented(cct), [])
        self.assertEqual(api_checks.unannotated(cct), [])
        text = pydoc.render_doc(cct.CompressionState, renderer=pydoc.plaintext)
        for name in ("matrix_approximation_rank", "start_powerSGD_iter", "use_error_feedback", "log_every"):
            self.assertIn(name, text)

    def test_log_every(self):
        import logging

        class Collect(logging.Handler):
            def __init__(self):
                super().__init__(logging.INFO)
                self.messages = []

            def emit(self, record):
                self.messages.append(record.getMessage())

        handler = Collect()
        log = logging.getLogger("cc_coll.torch")
        log.addHandler(handler)
        level = log.level
        log.setLevel(logging.INFO)
        self.addCleanup(log.removeHandler, handler)
        self.addCleanup(log.setLevel, level)
        comm = self.comm()
        run = Run(comm, cct.compression_hook, dict(method="auto", density=0.1, rank=2, start_iter=1,
                                                   log_every=2)).start()
        for s in range(7):
            run.step(s)
        if RANK != 0:
            self.assertEqual(handler.messages, [])
            return
        self.assertEqual([m.split(" (")[0] for m in handler.messages], ["step 2", "step 4", "step 6"])
        wire = [int(m.split(" bytes on the wire")[0].rsplit(" ", 1)[1]) for m in handler.messages]
        self.assertTrue(all(w > 0 for w in wire), handler.messages)
        self.assertLessEqual(sum(wire), comm.stats().bytes_wire)  # each record: since the previous one
        self.assertIn("auto, last 2 steps", handler.messages[0])
        self.assertIn("AUTO compressed", handler.messages[-1])
        with self.assertRaisesRegex(ValueError, "log_every"):
            cct.CompressionState(comm, log_every=-1)

    def test_one_helper_thread(self):
        # the futures of every bucket of every step complete on one thread
        import threading
        threads = []

        def hook(state, bucket):
            def seen(fut):
                threads.append(threading.current_thread())
                return fut.value()
            return cct.compression_hook(state, bucket).then(seen)

        run = Run(self.comm(), hook, dict(method="topk", density=0.1, start_iter=1), small_buckets=True).start()
        for s in range(4):
            run.step(s)
        self.assertGreater(len(run.state._buckets), 1)
        helpers = {id(t) for t in threads if t is not threading.main_thread()}
        self.assertGreater(len(threads), 4)
        self.assertLessEqual(len(helpers), 1, "%d helper threads for %d futures" % (len(helpers), len(threads)))

    def test_layer_policy_for_model(self):
        class LM(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(50, 16)        # 800
                self.ln = torch.nn.LayerNorm(16)             # 32
                self.body = torch.nn.Linear(16, 64)          # 1024 + 64
                self.head = torch.nn.Linear(64, 50, bias=False)   # 3200

        m = LM()
        total = sum(p.numel() for p in m.parameters())
        every = cct.LayerPolicy.for_model(m, budget=1.0, min_elements=0)
        self.assertEqual(every.exact_params, frozenset({id(m.emb.weight), id(m.ln.weight), id(m.ln.bias),
                                                        id(m.body.bias), id(m.head.weight)}))
        self.assertFalse(every(m.head.weight, m.head.weight))
        self.assertTrue(every(m.body.weight, m.body.weight))
        # 2%: the 1-D parameters (96 elements of 5120) fit, the embedding does not
        small = cct.LayerPolicy.for_model(m, budget=0.02, min_elements=0)
        self.assertEqual(small.exact_params, frozenset({id(m.ln.weight), id(m.ln.bias), id(m.body.bias)}))
        self.assertAlmostEqual(small.exact_fraction, 96 / total)
        self.assertTrue(small(m.emb.weight, m.emb.weight))
        # the output layer alone
        head = cct.LayerPolicy.for_model(m, budget=1.0, exact=("output",), min_elements=0)
        self.assertEqual(head.exact_params, frozenset({id(m.head.weight)}))
        none = cct.LayerPolicy.for_model(m, budget=0.0)
        self.assertEqual(none.exact_params, frozenset())
        self.assertRaises(ValueError, cct.LayerPolicy.for_model, m, budget=1.5)
        self.assertRaises(ValueError, cct.LayerPolicy.for_model, m, exact=("bias", "nope"))
        self.assertRaises(ValueError, cct.LayerPolicy.for_model, m, exact="bias")

    def test_lowrank(self):
        state = self.check_ef(method="lowrank", rank=2, min_compression_rate=2.0)
        comm = state.comm
        for e in state.layout(0):
            if len(e.shape) > 1:
                s = comm.lowrank_state(np.empty(e.shape, np.float32), ef_key=e.ef_key)
                self.assertEqual((s.rows, s.cols, s.rank), (e.shape[0], e.count // e.shape[0], 2))
                self.assertEqual(s.calls, STEPS - START_ITER)
            else:
                self.assertIsNone(e.ef_key)

    def test_lowrank_small_buckets(self):
        self.check_ef(method="lowrank", rank=1, small_buckets=True)

    def test_lowrank_without_model(self):
        state = self.check_ef(method="lowrank", rank=1, model_keys=False)
        layout = state.layout(0)
        self.assertEqual([e.ef_key for e in layout if e.ef_key is not None],
                         [state.ef_key(0, i) for i, e in enumerate(layout) if len(e.shape) > 1])

    # -- checkpoints ------------------------------------------------------------

    def check_checkpoint(self, n, m, small_buckets=False, **config):
        # Run A: N steps, checkpoint, M more.
        config = dict(config, start_iter=START_ITER)
        a = Run(self.comm(), cct.compression_hook, config, small_buckets=small_buckets).start()
        for s in range(n):
            a.step(s)
        saved = pickle.dumps({"hook": a.state.state_dict(), "model": a.net.state_dict(),
                              "optimizer": a.opt.state_dict(), "step": n})
        for s in range(n, n + m):
            a.step(s)
        expected = flat_params(a.net)
        # Run B: a new group, Comm and model (another initialisation), resumed.
        ckpt = pickle.loads(saved)
        b = Run(self.comm(), cct.compression_hook, config, seed=1, small_buckets=small_buckets)
        b.state.load_state_dict(ckpt["hook"])
        self.assertEqual(b.state.iter, n)
        b.start(ckpt["model"], ckpt["optimizer"])
        for s in range(ckpt["step"], n + m):
            b.step(s)
        got = flat_params(b.net)
        self.assertTrue(np.array_equal(got.view(np.uint32), expected.view(np.uint32)),
                        "resumed run differs: max difference %g" % np.abs(got - expected).max())
        self.assertEqual(b.state.comm.state_export(), a.state.comm.state_export())

    def test_checkpoint_topk(self):
        self.check_checkpoint(3, 3, method="topk", density=0.1)

    def test_checkpoint_sketch(self):
        self.check_checkpoint(3, 2, method="sketch", density=0.2)

    def test_checkpoint_topk_policy_small_buckets(self):
        # gradients keyed by parameter: DDP's first step after the restart
        # has other buckets than the run it resumes
        self.check_checkpoint(3, 3, method="topk", density=0.1, policy=cct.LayerPolicy(min_elements=200),
                              small_buckets=True)

    def test_checkpoint_lowrank_small_buckets(self):
        self.check_checkpoint(3, 3, method="lowrank", rank=1, small_buckets=True)

    def test_checkpoint_lowrank(self):
        self.check_checkpoint(4, 3, method="lowrank", rank=2)

    def test_corrupt_checkpoint_is_refused(self):
        run = Run(self.comm(), cct.compression_hook, dict(method="topk", density=0.1, start_iter=0)).start()
        for s in range(2):
            run.step(s)
        good = run.state.state_dict()
        self.assertGreater(len(good["comm_state"]), 0)
        fresh = cct.CompressionState(self.comm(), method="topk", density=0.1, start_iter=0)
        before = fresh.comm.state_export()
        bad = dict(good)
        blob = bytearray(good["comm_state"])
        blob[len(blob) // 2] ^= 0xFF
        bad["comm_state"] = bytes(blob)
        with self.assertRaises(cc_coll.Error) as cm:
            fresh.load_state_dict(bad)
        self.assertEqual(cm.exception.status, cc_coll.Status.INVALID_ARG)
        self.assertEqual(fresh.iter, 0)
        self.assertEqual(fresh.comm.state_export(), before)
        truncated = dict(good, comm_state=good["comm_state"][:-9])
        self.assertRaises(cc_coll.Error, fresh.load_state_dict, truncated)
        self.assertRaises(ValueError, fresh.load_state_dict, {"iter": 3})
        self.assertEqual(fresh.iter, 0)
        fresh.load_state_dict(good)
        self.assertEqual(fresh.iter, 2)
        self.assertEqual(fresh.comm.state_export(), good["comm_state"])

    # -- sharded steps: reduce_scatter_hook ------------------------------------------

    def test_reduce_scatter_none_is_the_average_shard(self):
        # method NONE: this rank's shard of the average, as MPI's sum / P
        # (exact on one and two ranks, where the sum's order cannot matter)
        state = cct.CompressionState(self.comm(), method="none")
        shard = 37
        for step in range(3):
            g = torch.randn(shard * SIZE, generator=torch.Generator().manual_seed(100 * step + RANK))
            full = np.empty(g.numel(), np.float32)
            WORLD.Allreduce(g.numpy(), full)
            expected = (full / np.float32(SIZE))[RANK * shard:(RANK + 1) * shard]
            out = torch.empty(shard)
            fut = cct.reduce_scatter_hook(state, g, out)
            self.assertIs(fut.wait(), out)
            if SIZE <= 2:
                self.assertTrue(np.array_equal(out.numpy(), expected))
            else:
                np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-6)
            # in place: the shard lands in grad's first elements
            g2 = g.clone()
            got = cct.reduce_scatter_hook(state, g2).wait()
            self.assertEqual(got.data_ptr(), g2.data_ptr())
            self.assertTrue(np.array_equal(got.numpy(), out.numpy()))

    def test_reduce_scatter_error_feedback_invariant(self):
        # TOPK with error feedback: what each rank sent (input + previous
        # residual - new residual), averaged over the ranks, is the result;
        # the shards of all ranks together are that average
        comm = self.comm()
        state = cct.CompressionState(comm, method="topk", density=0.1, start_iter=1)
        shard = 50
        n = shard * SIZE
        key = state.shard_key(7)
        previous = np.zeros(n, np.float32)
        for step in range(4):
            state.iter = step
            g = torch.randn(n, generator=torch.Generator().manual_seed(10 * step + RANK))
            sent_in = g.numpy().copy()
            out = cct.reduce_scatter_hook(state, g, torch.empty(shard), key=7).wait()
            whole = np.empty(n, np.float32)
            WORLD.Allgather(out.numpy(), whole)
            if step == 0:  # dense: start_iter
                residual = np.zeros(n, np.float32)
            else:
                residual = comm.ef_residual(np.empty(n, np.float32), ef_key=key).copy()
                # (residuals are kept in the work type and read back
                # rounded: the unkept elements agree to float rounding)
                moved = sent_in + previous - residual
                kept = np.count_nonzero(np.abs(moved) > 1e-6 * (1 + np.abs(sent_in + previous)))
                self.assertLessEqual(kept, SIZE * math.ceil(0.1 * shard))
            sent = np.ascontiguousarray(sent_in + previous - residual, dtype=np.float32)
            total = np.empty(n, np.float32)
            WORLD.Allreduce(sent, total)
            np.testing.assert_allclose(whole, total / np.float32(SIZE), rtol=1e-5, atol=1e-6)
            previous = residual

    def test_reduce_scatter_arguments(self):
        comm = self.comm()
        state = cct.CompressionState(comm, method="topk", density=0.1)
        if SIZE > 1:
            with self.assertRaisesRegex(ValueError, "multiple of the"):
                cct.reduce_scatter_hook(state, torch.zeros(SIZE * 3 + 1))
        with self.assertRaisesRegex(ValueError, "1-D"):
            cct.reduce_scatter_hook(state, torch.zeros(SIZE, 2))
        with self.assertRaisesRegex(ValueError, "output must be"):
            cct.reduce_scatter_hook(state, torch.zeros(SIZE * 4), torch.zeros(5))
        with self.assertRaisesRegex(ValueError, "output must be"):
            cct.reduce_scatter_hook(state, torch.zeros(SIZE * 4), torch.zeros(4, dtype=torch.float64))
        with self.assertRaisesRegex(ValueError, "keys are ints"):
            cct.reduce_scatter_hook(state, torch.zeros(SIZE * 4), key=-1)
        low = cct.CompressionState(comm, method="lowrank", start_iter=0)
        with self.assertRaisesRegex(ValueError, "LOWRANK has no reduce-scatter"):
            cct.reduce_scatter_hook(low, torch.zeros(SIZE * 4))
        self.assertEqual(state.inflight, 0)

    # -- CUDA tensors: the library's device path --------------------------------------

    @unittest.skipUnless(torch.cuda.is_available() and cc_coll.build_info()["cuda"],
                         "needs a CUDA device and a libcc_coll built with CUDA")
    def test_cuda_tensors(self):
        torch.cuda.set_device(0)
        comm = self.comm()
        # a Comm call on a CUDA tensor (DeviceArray): NONE equals the host's
        x = torch.randn(1000, generator=torch.Generator().manual_seed(RANK))
        host = comm.allreduce(x.numpy().copy(), op="avg", method="none")
        dev = x.cuda()
        comm.iallreduce(cc_coll.DeviceArray(dev), op="avg", method="none").wait()
        self.assertTrue(np.array_equal(dev.cpu().numpy(), host))
        # the element codecs: the device codec is the host's bit for bit, so a
        # call without error feedback equals the host's
        for method in ("half", "quant", "onebit"):
            host = comm.allreduce(x.numpy().copy(), op="avg", method=method, ef=False)
            dev = x.cuda()
            comm.iallreduce(cc_coll.DeviceArray(dev), op="avg", method=method, ef=False).wait()
            self.assertTrue(np.array_equal(dev.cpu().numpy(), host), method)
        # the DDP hook on a CUDA model: NONE bit-identical to DDP's default
        # hook on one and two ranks; LOWRANK, QUANT and ONEBIT keep replicas
        # identical
        for method, kw in (("none", {}), ("lowrank", dict(rank=1, start_iter=1)), ("quant", dict(start_iter=1)),
                           ("onebit", dict(start_iter=1))):
            net = make_net().cuda()
            model = DDP(net, device_ids=[0], process_group=dist.new_group(backend="gloo"))
            state = cct.CompressionState(comm, method=method, model=net, **kw)
            model.register_comm_hook(state, cct.compression_hook)
            ref = DDP(make_net().cuda(), device_ids=[0], process_group=dist.new_group(backend="gloo"))
            for step in range(3):
                for m in (model, ref):
                    xb, yb = batch(step)
                    m.zero_grad()
                    torch.nn.functional.mse_loss(m(xb.cuda()), yb.cuda()).backward()
                    with torch.no_grad():
                        for p in m.parameters():
                            p -= LR * p.grad
            got = flat_params(net.cpu())
            self.assertTrue(same_on_all_ranks(got))
            if method == "none" and SIZE <= 2:
                self.assertTrue(np.array_equal(got, flat_params(ref.module.cpu())))
        # reduce_scatter_hook on a CUDA flat gradient
        g = torch.randn(8 * SIZE, generator=torch.Generator().manual_seed(RANK))
        full = np.empty(g.numel(), np.float32)
        WORLD.Allreduce(g.numpy(), full)
        out = cct.reduce_scatter_hook(cct.CompressionState(comm, method="none"), g.cuda(),
                                      torch.empty(8, device="cuda")).wait()
        np.testing.assert_allclose(out.cpu().numpy(), (full / SIZE)[RANK * 8:(RANK + 1) * 8], rtol=1e-6)

    # -- arguments ----------------------------------------------------------------

    def test_arguments(self):
        comm = self.comm()
        self.assertRaises(ValueError, cct.CompressionState, comm, method="nope")
        self.assertRaises(TypeError, cct.CompressionState, comm, policy=3)
        self.assertRaises(ValueError, cct.CompressionState, comm, start_iter=-1)
        self.assertRaises(ValueError, cct.CompressionState, comm, density="0.1")
        self.assertRaises(ValueError, cct.CompressionState, comm, ramp_steps=-1)
        self.assertRaises(ValueError, cct.CompressionState, comm, ramp_density=0)
        self.assertRaises(ValueError, cct.CompressionState, comm, ramp_rank=0)
        p = cct.LayerPolicy(min_elements=100)
        self.assertTrue(p(torch.zeros(10, 10)))
        self.assertFalse(p(torch.zeros(99, 1)))
        self.assertFalse(p(torch.zeros(1000)))
        self.assertTrue(cct.LayerPolicy(min_elements=100, compress_1d=True)(torch.zeros(1000)))
        s = cct.CompressionState(comm, method="topk")
        self.assertNotEqual(s.ef_key(0), s.ef_key(0, 0))
        self.assertNotEqual(s.ef_key(1, 0), s.ef_key(0, 0))



if __name__ == "__main__":
    torch_mpi.main(__name__, "cc_coll.torch DDP hooks passed on %d ranks (torch %s, libcc_coll %s)"
                   % (SIZE, torch.__version__, cc_coll.version()))
