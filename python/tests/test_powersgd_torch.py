# SPDX-License-Identifier: BSD-3-Clause
"""LOWRANK beside PyTorch's own PowerSGD hook, run on every rank:

    mpirun -np 2 python3 python/tests/test_powersgd_torch.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). Needs PyTorch with torch.distributed (Debian: python3-torch); a
missing PyTorch is a failure, not a skip.

Each rank feeds the same gradients, a bucket of several tensors of different
shapes (a 1-D bias and a small matrix among them, which neither side
compresses), to

  - torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook.powerSGD_hook
    over a gloo process group of the same ranks, through a duck-typed
    GradBucket, and
  - cc_coll.Comm.allreduce_group with one LOWRANK Params per tensor (shape
    (shape[0], rest), the same rank, start_iter and min_compression_rate,
    error feedback and warm start on; and again with no shapes at all, where
    the package views n-d arrays as (shape[0], rest) and the library sends
    1-D arrays densely, so that it compresses what the hook compresses),

for several steps: two plain allreduces, then compressed steps with warm
start and error feedback. Both start from the same Q: drawn here, given to
libcc_coll with lowrank_set_q and to the hook by replacing torch.randn during
its first compressed step. After every step the test compares, per tensor,
libcc_coll's P and Q (lowrank_state) with the hook's
state.p_memory_dict / q_memory_dict, the results, and the error-feedback
residuals of the compressed tensors, and the bytes on the wire (the
factors of the tensors the hook compresses, the others whole), to a
relative tolerance of 1e-4
(float32) or 1e-10 (float64) of each array's largest magnitude. Ranks 1 and
2 run Gram-Schmidt on both sides, rank 4 QR.
"""

import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
from mpi4py import MPI

import cc_coll

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size

try:
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
except Exception as exc:  # a missing or broken PyTorch fails the test
    if RANK == 0:
        sys.stderr.write(
            "FAILED: test_powersgd_torch.py needs PyTorch with torch.distributed and its PowerSGD hook "
            "(Debian: apt-get install python3-torch), but importing it under %s failed: %s: %s\n"
            % (sys.executable, type(exc).__name__, exc))
        sys.stderr.flush()
    sys.exit(1)

# The bucket: shapes of the gradient tensors, in bucket order. Two tensors
# share a shape (the hook lays their P and Q out next to each other, not in
# bucket order); (32,), (10,) and (400,) are 1-D (biases, a norm weight),
# which the hook never compresses, and (3, 5) fails the compression test at
# every rank (8 r 2 >= 15), so neither side compresses them. (The
# near-square view libcc_coll once gave 1-D tensors would have compressed
# (32,) at rank 1 and (400,) at ranks 1 to 4.)
SHAPES = [(32, 16), (32,), (16, 4, 3, 3), (8, 24), (3, 5), (32, 16), (10,), (400,)]
START_ITER = 2               # PowerSGDState needs > 1 with error feedback or warm start
MIN_COMPRESSION_RATE = 2.0
STEPS = 7                    # 2 plain, 5 compressed
TOLERANCE = {np.float32: 1e-4, np.float64: 1e-10}
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}

#: (dtype name, rank) -> {"P": max relative difference, "Q": ..., "result": ..., "residual": ...}
MEASURED = {}


def matrix_shape(shape):
    """The hook's view: tensor.view(shape[0], -1)."""
    return shape[0], int(np.prod(shape[1:], dtype=np.int64))


def compressed(shape, rank):
    """The hook's _should_compress, with r = min(rows, cols, rank)."""
    n, m = matrix_shape(shape)
    r = min(n, m, rank)
    return (n + m) * r * MIN_COMPRESSION_RATE < n * m, r


def gradients(step, dtype):
    """This rank's gradients of one step: a fixed matrix with decaying
    singular values (well separated, so the power iteration is well
    conditioned and two float implementations follow the same subspace),
    scaled per step and rank, plus noise."""
    out = []
    for i, shape in enumerate(SHAPES):
        fixed = np.random.default_rng(1000 + i)
        n, m = matrix_shape(shape)
        k = min(n, m)
        u = np.linalg.qr(fixed.standard_normal((n, k)))[0]
        v = np.linalg.qr(fixed.standard_normal((m, k)))[0]
        base = (u * 2.0 ** -np.arange(k)) @ v.T
        rng = np.random.default_rng([step, RANK, i])
        g = base * (1 + 0.2 * rng.standard_normal()) + 0.01 * rng.standard_normal((n, m))
        out.append(g.reshape(shape).astype(dtype))
    return out


class Bucket:
    """What powerSGD_hook uses of dist.GradBucket (which has no Python
    constructor): one flat buffer and per-tensor views into it."""

    def __init__(self, grads):
        self._buffer = torch.cat([torch.from_numpy(g).reshape(-1) for g in grads])
        self._views, offset = [], 0
        for g in grads:
            self._views.append(self._buffer[offset:offset + g.size].view(g.shape))
            offset += g.size

    def buffer(self):
        return self._buffer

    def index(self):
        return 0

    def gradients(self):
        return self._views

    def is_last(self):
        return True


class ReplacedRandn:
    """torch.randn returning the given Qs, in the order the hook draws them."""

    def __init__(self, qs):
        self.qs = list(qs)
        self.original = torch.randn

    def __call__(self, *shape, dtype=None, **kwargs):
        q = torch.from_numpy(self.qs.pop(0)).to(dtype)
        assert tuple(q.shape) == tuple(shape[-2:]), (q.shape, shape)
        return q.reshape(shape)

    def __enter__(self):
        torch.randn = self
        return self

    def __exit__(self, *exc):
        torch.randn = self.original
        return False


def torch_layout(rank):
    """The indices of the compressed tensors in the order of the hook's P and
    Q memory: grouped by matrix shape, groups in order of first appearance."""
    groups = {}
    for i, shape in enumerate(SHAPES):
        if compressed(shape, rank)[0]:
            groups.setdefault(matrix_shape(shape), []).append(i)
    return [i for group in groups.values() for i in group]


def relative(a, b):
    """max |a - b| over the largest magnitude of b."""
    scale = float(np.abs(b).max()) if b.size else 0.0
    return float(np.abs(a - b).max()) / scale if scale > 0 else float(np.abs(a - b).max(initial=0.0))


def agree_on_all_ranks(ok):
    return all(WORLD.allgather(bool(ok)))


class AgainstTorch(unittest.TestCase):
    def run_steps(self, dtype, rank, shapes_given=True):
        """shapes_given: every Params has the shape (shape[0], rest), 1-D
        tensors (n, 1); otherwise none has one, and the package's own rule
        applies: arrays of two or more dimensions get that view, 1-D arrays
        none (so the library sends them densely)."""
        tol = TOLERANCE[dtype]
        comm = cc_coll.Comm(WORLD)
        self.addCleanup(comm.close)
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=rank,
                                       start_powerSGD_iter=START_ITER, min_compression_rate=MIN_COMPRESSION_RATE,
                                       use_error_feedback=True, warm_start=True)
        params = [cc_coll.Params(method="lowrank", shape=matrix_shape(s) if shapes_given else None, rank=rank,
                                 start_iter=START_ITER, min_compression_rate=MIN_COMPRESSION_RATE, warm_start=True,
                                 ef=True, ef_key=100 + i) for i, s in enumerate(SHAPES)]
        layout = torch_layout(rank)
        self.assertTrue(layout, "nothing is compressed at rank %d" % rank)
        outs = [np.empty(s, dtype=dtype) for s in SHAPES]
        # The first Q of every compressed tensor, the same on every rank.
        q_rng = np.random.default_rng(7 + rank)
        q0 = {i: q_rng.standard_normal((matrix_shape(SHAPES[i])[1], compressed(SHAPES[i], rank)[1]))
              .astype(dtype) for i in layout}
        worst = {"P": 0.0, "Q": 0.0, "result": 0.0, "residual": 0.0}

        for step in range(STEPS):
            grads = gradients(step, dtype)
            first_compressed = step == START_ITER
            # libcc_coll
            if first_compressed:
                for i in layout:
                    comm.lowrank_set_q(outs[i], q0[i].astype(np.float64), params=params[i])
            comm.reset_stats()
            comm.allreduce_group(grads, outs, op="avg", params=params)
            # bytes on the wire: the factors of what the hook compresses,
            # the other tensors whole
            itemsize = np.dtype(dtype).itemsize
            wire = sum(outs[i].nbytes for i in range(len(SHAPES))) if step < START_ITER else sum(
                sum(matrix_shape(SHAPES[i])) * compressed(SHAPES[i], rank)[1] * itemsize if i in layout
                else outs[i].nbytes for i in range(len(SHAPES)))
            self.assertEqual(comm.stats().bytes_wire, wire, "step %d: bytes_wire" % step)
            # PyTorch
            bucket = Bucket(grads)
            if first_compressed:
                with ReplacedRandn(q0[i] for i in layout) as randn:
                    result = powersgd.powerSGD_hook(state, bucket).wait()
                self.assertEqual(randn.qs, [], "the hook drew fewer Qs than there are compressed tensors")
            else:
                result = powersgd.powerSGD_hook(state, bucket).wait()
            self.assertEqual(state.iter, step + 1)

            # results, tensor by tensor
            offset = 0
            for i, shape in enumerate(SHAPES):
                n = outs[i].size
                expected = result[offset:offset + n].numpy().reshape(shape)
                offset += n
                d = relative(outs[i], expected)
                worst["result"] = max(worst["result"], d)
                self.assertLess(d, tol, "step %d tensor %d %s: result" % (step, i, shape))
            if step < START_ITER:
                for i in range(len(SHAPES)):
                    self.assertEqual(comm.lowrank_state(outs[i], ef_key=100 + i).rank, 0)
                continue

            # P and Q of the compressed tensors, in the hook's layout
            p_torch = state.p_memory_dict[0].numpy()
            q_torch = state.q_memory_dict[0].numpy()
            error_torch = state.error_dict[0].numpy()
            p_off = q_off = 0
            for i in layout:
                rows, cols = matrix_shape(SHAPES[i])
                r = compressed(SHAPES[i], rank)[1]
                s = comm.lowrank_state(outs[i], ef_key=100 + i)
                self.assertEqual((s.rows, s.cols, s.rank, s.calls), (rows, cols, r, step + 1))
                p_ref = p_torch[p_off:p_off + rows * r].reshape(rows, r)
                q_ref = q_torch[q_off:q_off + cols * r].reshape(cols, r)
                p_off += rows * r
                q_off += cols * r
                dp, dq = relative(s.p, p_ref), relative(s.q, q_ref)
                worst["P"], worst["Q"] = max(worst["P"], dp), max(worst["Q"], dq)
                self.assertLess(dp, tol, "step %d tensor %d %s: P" % (step, i, SHAPES[i]))
                self.assertLess(dq, tol, "step %d tensor %d %s: Q" % (step, i, SHAPES[i]))
                # the residual M - M^ (PyTorch keeps local - average for the
                # uncompressed tensors too; libcc_coll keeps none for them)
                start = sum(int(np.prod(SHAPES[j], dtype=np.int64)) for j in range(i))
                e_ref = error_torch[start:start + rows * cols]
                e = comm.ef_residual(outs[i], ef_key=100 + i).reshape(-1)
                de = relative(e, e_ref)
                worst["residual"] = max(worst["residual"], de)
                self.assertLess(de, 10 * tol, "step %d tensor %d %s: residual" % (step, i, SHAPES[i]))
            self.assertEqual((p_off, q_off), (p_torch.size, q_torch.size))
            for i in set(range(len(SHAPES))) - set(layout):
                s = comm.lowrank_state(outs[i], ef_key=100 + i)
                self.assertEqual((s.rank, s.calls), (0, step + 1), "tensor %d %s" % (i, SHAPES[i]))
                self.assertFalse(comm.ef_residual(outs[i], ef_key=100 + i).any())

        measured = {k: max(WORLD.allgather(v)) for k, v in worst.items()}
        if shapes_given:
            MEASURED[(np.dtype(dtype).name, rank)] = measured

    def test_rank1_gram_schmidt(self):
        self.run_steps(np.float32, 1)

    def test_rank2_gram_schmidt(self):
        self.run_steps(np.float32, 2)

    def test_rank4_qr(self):
        self.run_steps(np.float32, 4)

    def test_float64(self):
        for rank in (2, 4):
            with self.subTest(rank=rank):
                self.run_steps(np.float64, rank)

    def test_default_views_are_the_hooks(self):
        # Without a shape, allreduce_group views an n-d LOWRANK array as
        # (shape[0], rest), as the hook does, and sends a 1-D array densely,
        # as the hook does: the hook's choice of what to compress, step by
        # step, at ranks 1 (where the near-square view would have compressed
        # the (32,) bias) and 2.
        for rank in (1, 2):
            with self.subTest(rank=rank):
                self.run_steps(np.float32, rank, shapes_given=False)

    def test_default_view_is_the_hooks(self):
        # The state after one call without shapes: the view of each n-d
        # tensor the hook compresses; nothing for 1-D tensors.
        comm = cc_coll.Comm(WORLD)
        self.addCleanup(comm.close)
        grads = gradients(0, np.float32)
        outs = [np.empty_like(g) for g in grads]
        comm.allreduce_group(grads, outs, op="avg", params=[
            {"method": "lowrank", "rank": 2, "ef_key": 300 + i, "min_compression_rate": MIN_COMPRESSION_RATE}
            for i in range(len(grads))])
        for i, shape in enumerate(SHAPES):
            s = comm.lowrank_state(outs[i], ef_key=300 + i)
            self.assertEqual(s.calls, 1, shape)
            if compressed(shape, 2)[0]:
                self.assertEqual((s.rows, s.cols), matrix_shape(shape), shape)
            else:
                self.assertEqual((s.rows, s.cols, s.rank), (0, 0, 0), shape)


def main():
    torch.set_num_threads(1)
    # A gloo process group over the same ranks, rendezvous through a file in
    # a directory that rank 0 creates.
    path = tempfile.mkdtemp(prefix="cc_coll_powersgd_") if RANK == 0 else None
    path = WORLD.bcast(path, root=0)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(path, "rendezvous"),
                            rank=RANK, world_size=SIZE)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2 if RANK == 0 else 1)
    result = unittest.main(module=__name__, testRunner=runner, exit=False).result
    ok = result.wasSuccessful()
    if RANK == 0 and not ok:
        shutil.rmtree(path, ignore_errors=True)
    if not ok:
        sys.stderr.write("rank %d of %d: FAILED\n" % (RANK, SIZE))
        sys.stderr.flush()
        WORLD.Abort(1)
    if not agree_on_all_ranks(ok):
        if RANK == 0:
            shutil.rmtree(path, ignore_errors=True)
        WORLD.Abort(1)
    dist.barrier()
    WORLD.Barrier()
    if RANK == 0:
        shutil.rmtree(path, ignore_errors=True)
        print("largest relative differences, libcc_coll %s vs torch %s powerSGD_hook on %d ranks:"
              % (cc_coll.version(), torch.__version__, SIZE))
        print("  %-8s %4s  %9s  %9s  %9s  %9s" % ("dtype", "rank", "P", "Q", "result", "residual"))
        for (dtype, rank), m in sorted(MEASURED.items()):
            print("  %-8s %4d  %9.2e  %9.2e  %9.2e  %9.2e" % (dtype, rank, m["P"], m["Q"], m["result"],
                                                            m["residual"]))
        print("cc_coll PowerSGD agreement with PyTorch passed on %d ranks" % SIZE)
    # The gloo process group is not destroyed: in PyTorch 1.13 the hook's
    # future callbacks can drop the last reference to it on a gloo worker
    # thread, whose destructor then joins that very thread and aborts
    # ("Resource deadlock avoided"). Finalise MPI and leave without running
    # destructors instead.
    sys.stdout.flush()
    sys.stderr.flush()
    MPI.Finalize()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
