# SPDX-License-Identifier: BSD-3-Clause
"""cc_coll's LOWRANK method, grouped allreduce, low-rank state and compressed
point-to-point under MPI, run on every rank:

    mpirun -np 4 python3 python/tests/test_mpi_lowrank_p2p.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). A failure on any rank aborts the whole job. The agreement with
PyTorch's own PowerSGD hook is test_powersgd_torch.py.
"""

import math
import os
import sys
import unittest

import numpy as np
from mpi4py import MPI

import cc_coll
from cc_coll import Dtype, Params, Status

from test_mpi import Base, bits, integer_valued, mpi_reference, run_tests, same_on_all_ranks

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size
SIDE_TAG = 4242  # mpi4py messages beside the library's


def low_rank_terms(rows, cols, r, dtype, seed):
    """This rank's A diag(c) B^T: A and B are the same on every rank, c is
    this rank's, so the sum over the ranks has rank <= r and LOWRANK at rank
    r recovers it up to rounding."""
    shared = np.random.default_rng(seed)
    a = shared.standard_normal((rows, r))
    b = shared.standard_normal((cols, r))
    c = np.random.default_rng([seed, RANK]).uniform(0.5, 2.0, r)
    return ((a * c) @ b.T).astype(dtype)


def exact_average(x):
    """The float64 average of x over the ranks."""
    out = np.empty(x.shape, dtype=np.float64)
    WORLD.Allreduce(x.astype(np.float64), out, op=MPI.SUM)
    return out / SIZE


def relative(a, b):
    return float(np.abs(np.asarray(a, dtype=np.float64) - b).max()) / max(float(np.abs(b).max()), 1e-300)


def capped_comm(cap):
    """A Comm created with CC_COLL_STATE_MAX_BYTES = cap (collective)."""
    os.environ["CC_COLL_STATE_MAX_BYTES"] = str(cap)
    try:
        return cc_coll.Comm(WORLD)
    finally:
        del os.environ["CC_COLL_STATE_MAX_BYTES"]


class Errors:
    """assertStatus for Base subclasses."""

    def assertStatus(self, status, fn, *args, **kwargs):
        with self.assertRaises(cc_coll.Error) as cm:
            fn(*args, **kwargs)
        self.assertIsInstance(cm.exception.status, Status)
        self.assertEqual(cm.exception.status, status, str(cm.exception))
        return cm.exception


class LowRank(Errors, Base):
    """Method LOWRANK through Comm.allreduce."""

    def test_recovers_low_rank_sums(self):
        for dtype, tol, base in ((np.float32, 1e-4, 10), (np.float64, 1e-10, 20)):
            for r, key in ((1, base), (2, base + 1), (4, base + 2)):
                with self.subTest(dtype=dtype, rank=r):
                    x = low_rank_terms(64, 48, r, dtype, seed=r)
                    for op in ("avg", "sum"):
                        out = self.comm.allreduce(x, np.empty_like(x), op=op, method="lowrank", rank=r,
                                                  ef_key=key + (op == "sum") * 100)
                        expected = exact_average(x) * (SIZE if op == "sum" else 1)
                        self.assertLess(relative(out, expected), tol, op)
                        self.assertTrue(same_on_all_ranks(out))
                    s = self.comm.lowrank_state(out, ef_key=key)
                    self.assertEqual((s.rows, s.cols, s.rank, s.calls), (64, 48, r, 1))
                    # P is orthonormal; P Q^T is the result
                    np.testing.assert_allclose(s.p.T @ s.p, np.eye(r), atol=1e-5)
                    self.assertLess(relative(s.p @ s.q.T, exact_average(x)), tol)

    def test_error_feedback_invariant(self):
        # Per rank: sum of the results + final residual = sum of the inputs.
        shape, steps = (40, 30), 20
        total_in = np.zeros(shape)
        total_out = np.zeros(shape)
        out = np.empty(shape)
        for step in range(steps):
            g = np.random.default_rng([step, RANK]).standard_normal(shape)
            total_in += g
            total_out += self.comm.allreduce(g, out, op="avg", method="lowrank", rank=1, ef=True, ef_key=200,
                                             start_iter=0)
            self.assertTrue(same_on_all_ranks(out))
        e = self.comm.ef_residual(out, ef_key=200)
        self.assertGreater(np.abs(e).max(), 0)
        self.assertLess(relative(total_out + e, total_in), 1e-10)
        self.assertEqual(self.comm.lowrank_state(out, ef_key=200).calls, steps)
        # Without EF nothing is kept.
        before = self.comm.ef_bytes()
        self.comm.allreduce(g, out, op="avg", method="lowrank", rank=1, ef=False, ef_key=201)
        self.assertEqual(self.comm.ef_bytes(), before)

    def test_start_iter_and_compression_test(self):
        x = integer_valued((32, 24), np.float32, seed=RANK)
        out = np.empty_like(x)
        kw = dict(op="avg", method="lowrank", rank=2, start_iter=3, ef_key=30)
        for call in range(1, 4):  # plain allreduces, no residual
            self.comm.allreduce(x, out, **kw)
            np.testing.assert_allclose(out, mpi_reference(x, cc_coll.Op.AVG), rtol=1e-6)
            s = self.comm.lowrank_state(out, ef_key=30)
            self.assertEqual((s.rank, s.calls, s.p.shape, s.q.shape), (0, call, (s.rows, 0), (s.cols, 0)))
            self.assertEqual(self.comm.ef_bytes(), 0)
        self.comm.allreduce(x, out, **kw)
        s = self.comm.lowrank_state(out, ef_key=30)
        self.assertEqual((s.rows, s.cols, s.rank, s.calls), (32, 24, 2, 4))
        self.assertEqual(self.comm.ef_bytes(), x.nbytes)
        # (32 + 24) * 2 * 8 >= 32 * 24: failing the compression test is a plain allreduce
        y = integer_valued((32, 24), np.float64, seed=RANK)
        out = self.comm.allreduce(y, np.empty_like(y), op="sum", method="lowrank", rank=2,
                                  min_compression_rate=8, ef_key=31)
        self.assertTrue(np.array_equal(bits(out), bits(mpi_reference(y, cc_coll.Op.SUM))))
        self.assertEqual(self.comm.lowrank_state(out, ef_key=31).rank, 0)

    def test_default_matrix_view(self):
        # An n-d array is viewed as (shape[0], rest), like torch's view(shape[0], -1)
        x = low_rank_terms(4, 15, 1, np.float32, seed=40).reshape(4, 3, 5)
        kw = dict(op="avg", method="lowrank", rank=1, min_compression_rate=1)
        out = self.comm.allreduce(x, np.empty_like(x), ef_key=40, **kw)
        self.assertEqual(out.shape, (4, 3, 5))
        self.assertLess(relative(out, exact_average(x)), 1e-4)
        s = self.comm.lowrank_state(out, ef_key=40)
        self.assertEqual((s.rows, s.cols), (4, 15))
        # an explicit shape wins (one int: rows, cols = count / rows)
        for shape, key in (((12, 5), 41), (12, 42), ((20, 0), 43)):
            self.comm.allreduce(x, np.empty_like(x), ef_key=key, shape=shape, **kw)
            s = self.comm.lowrank_state(x, ef_key=key)
            self.assertEqual((s.rows, s.cols), (12, 5) if key != 43 else (20, 3), shape)
        # a 1-D array without a shape is sent densely, as powerSGD_hook sends
        # biases: MPI_Allreduce bit for bit, no factors, the call counted
        y = integer_valued((60,), np.float32, seed=RANK)
        out = self.comm.allreduce(y, np.empty(60, np.float32), ef_key=44, **kw)
        self.assertTrue(np.array_equal(bits(out), bits(mpi_reference(y, cc_coll.Op.AVG))))
        self.assertEqual(self.comm.lowrank_state(y, ef_key=44)[:4], (0, 0, 0, 1))
        # shape (0, 0), or 0, asks for the library's near-square view: ceil(sqrt(60)) = 8
        for shape, key in (((0, 0), 47), (0, 48)):
            self.comm.allreduce(x.reshape(-1), np.empty(60, np.float32), ef_key=key, shape=shape, **kw)
            self.assertEqual(self.comm.lowrank_state(x, ef_key=key)[:3], (8, 8, 1), shape)
        # the view also applies when LOWRANK is the communicator's method (CC_COLL_METHOD)
        os.environ["CC_COLL_METHOD"] = "lowrank"
        try:
            c = cc_coll.Comm(WORLD)
        finally:
            del os.environ["CC_COLL_METHOD"]
        with c:
            c.allreduce(x, np.empty_like(x), ef_key=45, rank=1, min_compression_rate=1)
            self.assertEqual(c.lowrank_state(x, ef_key=45)[:3], (4, 15, 1))
            c.allreduce(x, np.empty_like(x), ef_key=46, method="none")  # no view for other methods
            self.assertEqual(c.lowrank_state(x, ef_key=46).rank, 0)

    def test_state_round_trip(self):
        # Without EF a step depends only on the input and the warm-start Q:
        # a Q read back with lowrank_state and installed with lowrank_set_q on
        # another communicator reproduces the next step bit for bit.
        for key, dtype in ((50, np.float32), (51, np.float64)):
            g1 = np.random.default_rng([50, RANK]).standard_normal((24, 18)).astype(dtype)
            g2 = np.random.default_rng([51, RANK]).standard_normal((24, 18)).astype(dtype)
            p = Params(method="lowrank", rank=3, ef=False, warm_start=True, ef_key=key)
            self.comm.allreduce(g1, np.empty_like(g1), op="avg", params=p)
            q1 = self.comm.lowrank_state(g1, ef_key=key).q
            self.assertEqual(q1.shape, (18, 3))
            out2 = self.comm.allreduce(g2, np.empty_like(g2), op="avg", params=p)
            with cc_coll.Comm(WORLD) as other:
                s = other.lowrank_state(g1, ef_key=key)
                self.assertEqual((s.rows, s.cols, s.rank, s.calls), (0, 0, 0, 0))
                self.assertEqual((s.p.shape, s.q.shape), ((0, 0), (0, 0)))
                other.lowrank_set_q(g2, q1, params=p)
                s = other.lowrank_state(g2, ef_key=key)
                self.assertEqual((s.rows, s.cols, s.rank, s.calls), (24, 18, 3, 0))
                np.testing.assert_array_equal(s.q, q1)
                again = other.allreduce(g2, np.empty_like(g2), op="avg", params=p)
            self.assertTrue(np.array_equal(bits(again), bits(out2)), dtype)
            self.comm.ef_reset(g1, ef_key=key)
            self.assertEqual(self.comm.lowrank_state(g1, ef_key=key).calls, 0)

    def test_set_q_shapes(self):
        x = np.zeros((6, 2, 5), dtype=np.float32)
        # the view (6, 10) at rank 2: Q is 10 x 2, as an array or flat
        self.comm.lowrank_set_q(x, np.ones((10, 2)), rank=2, ef_key=60)
        self.comm.lowrank_set_q(x, np.ones(20), rank=2, ef_key=60)
        self.comm.lowrank_set_q(x, [[1.0, 0.0]] * 10, rank=2, ef_key=60)
        s = self.comm.lowrank_state(x, ef_key=60)
        self.assertEqual((s.rows, s.cols, s.rank), (6, 10, 2))
        np.testing.assert_array_equal(s.q, [[1.0, 0.0]] * 10)
        # r = min(rows, cols, rank); the communicator's rank (1) when none is given
        self.comm.lowrank_set_q(x, np.ones((10, 6)), rank=9, ef_key=61)
        self.comm.lowrank_set_q(x, np.ones((10, 1)), ef_key=62)
        for q, kw in ((np.ones((10, 1)), {"rank": 2}), (np.ones((2, 10)), {"rank": 2}), (np.ones(21), {"rank": 2}),
                      (np.ones((5, 2, 2)), {"rank": 2}), (np.ones((10, 2)), {"rank": 2, "shape": (5, 12)})):
            with self.assertRaisesRegex(ValueError, "needs Q of cols x r", msg=str(kw)):
                self.comm.lowrank_set_q(x, q, ef_key=63, **kw)
        # a shape the library refuses comes back from the library, whatever q is
        e = self.assertStatus(Status.INVALID_ARG, self.comm.lowrank_set_q, x, np.ones(3), shape=(7, 0), ef_key=64)
        self.assertIn("shape", e.message)
        # a 1-D array without a shape is sent densely: it has no Q to set
        v = np.zeros(60, dtype=np.float32)
        e = self.assertStatus(Status.INVALID_ARG, self.comm.lowrank_set_q, v, np.ones((8, 1)), ef_key=65)
        self.assertIn("sent densely", e.message)
        # with shape (0, 0) it is the near-square 8 x 8
        self.comm.lowrank_set_q(v, np.ones((8, 2)), rank=2, shape=(0, 0), ef_key=65)
        self.assertEqual(self.comm.lowrank_state(v, ef_key=65)[:3], (8, 8, 2))
        with self.assertRaisesRegex(ValueError, "needs Q of cols x r"):
            self.comm.lowrank_set_q(v, np.ones((10, 2)), rank=2, shape=0, ef_key=66)

    def test_parameter_errors(self):
        x = np.ones((16, 8), dtype=np.float32)
        for kw, name in (({"rank": 0}, "rank"), ({"rank": 70000}, "rank"), ({"rank": -1}, "rank"),
                         ({"min_compression_rate": 0.5}, "min_compression_rate"),
                         ({"min_compression_rate": math.nan}, "min_compression_rate"),
                         ({"min_compression_rate": math.inf}, "min_compression_rate"),
                         ({"warm_start": 2}, "warm_start"), ({"shape": (0, 8)}, "rows = 0 with"),
                         ({"shape": (5, 0)}, "5"), ({"shape": (4, 8)}, "count")):
            with self.subTest(**kw):
                e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce, x, method="lowrank", **kw)
                self.assertIn(name, e.message)
        self.assertTrue(np.all(x == 1), "a failed call changed the buffer")
        self.assertStatus(Status.NOT_SUPPORTED, self.comm.reduce_scatter, np.ones(SIZE * 8, dtype=np.float32),
                          method="lowrank")
        for bad in ({"rank": 1.5}, {"shape": "16x8"}, {"warm_start": "on"}, {"start_iter": -1.0}):
            with self.assertRaises(TypeError, msg=str(bad)):
                self.comm.allreduce(x, method="lowrank", **bad)
        with self.assertRaises(ValueError):
            self.comm.allreduce(x, method="lowrank", start_iter=-1)
        with self.assertRaises(TypeError):
            self.comm.allreduce(x, params=["lowrank"])

    def test_params_object_and_keywords(self):
        x = low_rank_terms(20, 12, 2, np.float64, seed=70)
        p = Params(method="lowrank", rank=2, ef_key=70)
        a = self.comm.allreduce(x, np.empty_like(x), op="avg", params=p)
        self.assertLess(relative(a, exact_average(x)), 1e-10)
        # keywords go over params: another key, another state
        self.comm.allreduce(x, np.empty_like(x), op="avg", params=p, ef_key=71, rank=1)
        self.assertEqual(self.comm.lowrank_state(x, params=p.replace(ef_key=71)).rank, 1)
        self.assertEqual(self.comm.lowrank_state(x, params={"ef_key": 70}).calls, 1)
        self.assertEqual(self.comm.ef_residual(x, params=p).shape, x.shape)


class StateCap(Errors, Base):
    """Comm.state_bytes and CC_COLL_STATE_MAX_BYTES on collective LOWRANK
    state (the point-to-point channels: PointToPoint.test_state_cap)."""

    def test_state_bytes_and_cap(self):
        x = low_rank_terms(64, 48, 1, np.float32, seed=7)
        out = np.empty_like(x)
        kw = dict(op="avg", method="lowrank", rank=1, ef=False)
        self.assertEqual(self.comm.state_bytes(), 0)
        self.comm.allreduce(x, out, ef_key=1, **kw)
        step = self.comm.state_bytes()
        # a fixed entry plus P and Q, (64 + 48) x 1 binary32 values
        self.assertGreater(step, (64 + 48) * 4)
        # EF off keeps no residual; the LOWRANK state is counted apart
        self.assertEqual(self.comm.ef_bytes(), 0)
        with capped_comm(2 * step + step // 2) as c:
            for key in (1, 2):
                c.allreduce(x, out, ef_key=key, **kw)
            self.assertEqual(c.state_bytes(), 2 * step)
            out[...] = 7
            e = self.assertStatus(Status.EF_LIMIT, c.allreduce, x, out, ef_key=3, **kw)
            self.assertIn("CC_COLL_STATE_MAX_BYTES", e.message)
            self.assertIn("from %d to %d bytes" % (2 * step, 3 * step), e.message)
            self.assertTrue((out == 7).all(), "a refused call leaves recvbuf alone")
            self.assertEqual(c.state_bytes(), 2 * step)
            self.assertEqual(c.lowrank_state(out, ef_key=3).calls, 0)
            # a reset gives the key's bytes back, and a new key fits
            c.ef_reset(out, ef_key=1)
            self.assertEqual(c.state_bytes(), step)
            c.allreduce(x, out, ef_key=3, **kw)
            self.assertEqual(c.state_bytes(), 2 * step)
            c.ef_reset_all()
            self.assertEqual(c.state_bytes(), 0)


class Group(Errors, Base):
    """Comm.allreduce_group."""

    def bucket(self, key):
        """A DDP-like bucket: LOWRANK matrices with exactly recoverable sums,
        a bias the LOWRANK compression test leaves uncompressed, NONE tensors
        of three dtypes, a TOPK tensor at density 1, and their params (the
        lossy tensors' ef_keys from `key`: named by their recvbufs instead, a
        new result array could reuse the address of an old one on some ranks
        and not on others, and the ranks would disagree on its call count)."""
        tensors = [
            low_rank_terms(64, 48, 2, np.float32, seed=80),                      # LOWRANK, r = 2
            integer_valued((48,), np.float32, seed=RANK),                        # LOWRANK, (48, 1): dense
            integer_valued((7, 13), np.float64, seed=RANK + 1),                  # NONE
            low_rank_terms(30, 20, 1, np.float64, seed=81).reshape(30, 4, 5),    # LOWRANK, (30, 20), r = 1
            integer_valued((100,), np.float32, seed=RANK + 2),                   # TOPK, density 1
            integer_valued((5, 6), np.float16, seed=RANK + 3),                   # NONE
        ]
        params = [Params(method="lowrank", rank=2, ef_key=key),
                  Params(method="lowrank", rank=2, shape=(48, 1), ef_key=key + 1),
                  Params(method="none"), {"method": "lowrank", "rank": 1, "ef_key": key + 3},
                  Params(method="topk", density=1.0, ef_key=key + 4), None]
        return tensors, params

    def check_results(self, tensors, outs, op):
        o = cc_coll.Op[op.upper()]
        for i in (2, 5):   # NONE: MPI_Allreduce itself
            self.assertTrue(np.array_equal(bits(outs[i]), bits(mpi_reference(tensors[i], o))), i)
        for i in (1, 4):   # exact integers: plain allreduce and TOPK at density 1
            np.testing.assert_allclose(outs[i], mpi_reference(tensors[i], o), rtol=1e-6)
        scale = SIZE if op == "sum" else 1
        self.assertLess(relative(outs[0], scale * exact_average(tensors[0])), 1e-4)
        self.assertLess(relative(outs[3], scale * exact_average(tensors[3])), 1e-10)

    def test_mixed_bucket(self):
        tensors, _ = self.bucket(0)
        before = [t.copy() for t in tensors]
        for key, op in ((100, "avg"), (200, "sum")):
            with self.subTest(op=op):
                _, params = self.bucket(key)
                self.comm.reset_stats()
                outs = [np.full_like(t, 7) for t in tensors]
                r = self.comm.allreduce_group(tensors, outs, op=op, params=params)
                self.assertEqual(len(r), len(tensors))
                for a, b in zip(r, outs):
                    self.assertIs(a, b)
                self.check_results(tensors, outs, op)
                for t, b in zip(tensors, before):
                    self.assertTrue(np.array_equal(bits(t), bits(b)), "sendbuf changed")
                self.assertEqual(self.comm.stats().calls, len(tensors))
                # the compressed tensors' states, named by their recvbufs
                self.assertEqual(self.comm.lowrank_state(outs[0], ef_key=key)[:4], (64, 48, 2, 1))
                self.assertEqual(self.comm.lowrank_state(outs[3], ef_key=key + 3)[:4], (30, 20, 1, 1))
                s = self.comm.lowrank_state(outs[1], ef_key=key + 1)   # never compressed
                self.assertEqual((s.rank, s.calls, s.p.size, s.q.size), (0, 1, 0, 0))
        # in place: recvbufs None, or entries None or the sendbuf itself
        for key, recvbufs in ((300, None), (400, [None] * 6), (500, "self")):
            _, params = self.bucket(key)
            copies = [t.copy() for t in tensors]
            r = self.comm.allreduce_group(copies, copies if recvbufs == "self" else recvbufs, op="avg",
                                          params=params)
            for a, b in zip(r, copies):
                self.assertIs(a, b)
            self.check_results(tensors, copies, "avg")
        # half in place, half not
        _, params = self.bucket(600)
        copies = [t.copy() for t in tensors]
        outs = [None if i % 2 else np.empty_like(t) for i, t in enumerate(tensors)]
        r = self.comm.allreduce_group(copies, outs, op="avg", params=params)
        self.check_results(tensors, r, "avg")
        for i in range(1, 6, 2):
            self.assertIs(r[i], copies[i])

    def test_biases_sent_densely(self):
        # A model's gradients with LOWRANK for all: what powerSGD_hook
        # compresses (ndim >= 2 and (rows + cols) r 2 < rows cols) goes as
        # factors, the 1-D tensors (biases; the 400-element one the
        # near-square view would have compressed) and a matrix failing the
        # test go densely: bytes on the wire, exact results, no factors.
        grads = [
            ("conv.weight", low_rank_terms(16, 27, 2, np.float32, seed=95).reshape(16, 3, 3, 3)),
            ("conv.bias", integer_valued((16,), np.float32, seed=RANK)),
            ("fc.weight", low_rank_terms(32, 64, 2, np.float32, seed=96)),
            ("fc.bias", integer_valued((32,), np.float32, seed=RANK + 1)),
            ("norm.weight", integer_valued((400,), np.float32, seed=RANK + 2)),
            ("head.weight", integer_valued((4, 5), np.float32, seed=RANK + 3)),   # (4 + 5) 2 2 >= 20: dense
        ]
        rank = 2
        for op in ("avg", "sum"):
            with self.subTest(op=op):
                params = [Params(method="lowrank", rank=rank, ef_key=900 + 10 * (op == "sum") + i)
                          for i in range(len(grads))]
                self.comm.reset_stats()
                outs = self.comm.allreduce_group([g for _, g in grads], [np.empty_like(g) for _, g in grads],
                                                 op=op, params=params)
                wire = n_compressed = 0
                for (name, g), out, p in zip(grads, outs, params):
                    rows = g.shape[0]
                    cols = g.size // rows
                    r = min(rows, cols, rank)
                    compress = g.ndim >= 2 and (rows + cols) * r * 2 < rows * cols
                    s = self.comm.lowrank_state(out, params=p)
                    self.assertEqual(s.calls, 1, name)
                    if compress:
                        n_compressed += 1
                        wire += (rows + cols) * r * 4
                        self.assertEqual(s[:3], (rows, cols, r), name)
                        scale = SIZE if op == "sum" else 1
                        self.assertLess(relative(out, scale * exact_average(g)), 1e-4, name)
                    else:
                        wire += g.nbytes
                        self.assertEqual(s[:3], (0, 0, 0), name)
                        self.assertTrue(np.array_equal(bits(out), bits(mpi_reference(g, cc_coll.Op[op.upper()]))),
                                        name)
                self.assertEqual(self.comm.stats().bytes_wire, wire)
                self.assertEqual(n_compressed, 2)   # the conv and fc weights

    def test_single_params_and_dtypes(self):
        xs = [low_rank_terms(16, 12, 1, np.float32, seed=90 + i) for i in range(3)]
        outs = self.comm.allreduce_group(xs, [np.empty_like(x) for x in xs], op="avg",
                                         params=Params(method="lowrank", rank=1))
        for x, o in zip(xs, outs):
            self.assertLess(relative(o, exact_average(x)), 1e-4)
        # one dict per tensor
        outs = self.comm.allreduce_group(xs, [np.empty_like(x) for x in xs], op="avg",
                                         params=[{"method": "lowrank", "rank": 1, "ef_key": i} for i in range(3)])
        for x, o in zip(xs, outs):
            self.assertLess(relative(o, exact_average(x)), 1e-4)
        # bfloat16 through dtype (one for all, or one per tensor)
        bf = [cc_coll.to_bfloat16(integer_valued((10,), np.float32, seed=RANK + i, bound=30)) for i in range(2)]
        for dtype in (Dtype.BF16, ["bf16", Dtype.BF16]):
            outs = self.comm.allreduce_group(bf, [np.empty_like(b) for b in bf], params={"method": "none"},
                                             dtype=dtype)
            for b, o in zip(bf, outs):
                self.assertTrue(np.array_equal(o, mpi_reference(b, cc_coll.Op.SUM, Dtype.BF16)))
        # an empty group does nothing
        self.assertEqual(self.comm.allreduce_group([]), [])
        self.assertEqual(self.comm.allreduce_group((), None, params=[]), [])

    def test_argument_errors(self):
        xs = [np.ones(10, dtype=np.float32), np.ones((4, 5), dtype=np.float64)]
        with self.assertRaisesRegex(ValueError, "recvbufs has 1 entries for 2 tensors"):
            self.comm.allreduce_group(xs, [np.empty(10, np.float32)])
        with self.assertRaisesRegex(ValueError, "params has 3 entries for 2 tensors"):
            self.comm.allreduce_group(xs, params=[None] * 3)
        with self.assertRaisesRegex(ValueError, "dtype has 1 entries"):
            self.comm.allreduce_group(xs, dtype=[None])
        with self.assertRaisesRegex(TypeError, "recvbufs\\[1\\] has dtype float32 but sendbufs\\[1\\] has float64"):
            self.comm.allreduce_group(xs, [None, np.empty((4, 5), np.float32)])
        with self.assertRaisesRegex(ValueError, "recvbufs\\[0\\] has shape"):
            self.comm.allreduce_group(xs, [np.empty((2, 5), np.float32), None])
        with self.assertRaisesRegex(ValueError, "sendbufs\\[1\\] is not C-contiguous"):
            self.comm.allreduce_group([xs[0], np.ones((4, 10))[:, ::2]])
        with self.assertRaisesRegex(TypeError, "sendbufs must be a sequence"):
            self.comm.allreduce_group(xs[0])
        with self.assertRaisesRegex(TypeError, "numpy.ndarray"):
            self.comm.allreduce_group([[1.0, 2.0]])
        with self.assertRaisesRegex(TypeError, "recvbufs must be None or a sequence"):
            self.comm.allreduce_group(xs, np.empty(10))
        with self.assertRaisesRegex(TypeError, "params\\[1\\]"):
            self.comm.allreduce_group(xs, params=[None, {"colour": 1}])
        with self.assertRaises(TypeError):
            self.comm.allreduce_group(xs, params=[None, "lowrank"])
        with self.assertRaisesRegex(ValueError, "tensors 0 and 1 have the same ef_key 5"):
            self.comm.allreduce_group(xs, params={"method": "lowrank", "ef_key": 5})
        with self.assertRaisesRegex(ValueError, "op = 'max'"):
            self.comm.allreduce_group(xs, op="max")
        # the library names the tensor
        e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce_group, xs,
                              params=[None, {"method": "lowrank", "rank": 0}])
        self.assertIn("params[1]", e.message)
        e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce_group, xs,
                              params=[None, {"method": "lowrank", "shape": (3, 0)}])
        self.assertIn("tensor 1", e.message)
        buf = np.ones(20, dtype=np.float32)
        e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce_group, [np.ones(10, np.float32)] * 2,
                              [buf[:10], buf[5:15]])
        self.assertIn("overlap", e.message)
        self.assertStatus(Status.INVALID_OP, self.comm.allreduce_group, xs, op=5)
        for x in xs:
            self.assertTrue(np.all(x == 1), "a failed call changed a buffer")

    @unittest.skipIf(SIZE == 1, "needs ranks that can disagree")
    def test_ranks_that_disagree(self):
        # Ranks that pass different groups all get MISMATCH (no hang, no
        # exchange of mismatched buffers).
        xs = [np.ones((16, 12), dtype=np.float32), np.ones(5, dtype=np.float32)]
        rank = 1 if RANK == 0 else 2
        e = self.assertStatus(Status.MISMATCH, self.comm.allreduce_group, xs, op="avg",
                              params={"method": "lowrank", "rank": rank})
        self.assertTrue(e.message)
        counts = [np.ones(5 + (RANK == 0), dtype=np.float32)]
        self.assertStatus(Status.MISMATCH, self.comm.allreduce_group, counts)
        # the communicator still works
        out = self.comm.allreduce_group(xs, [np.empty_like(x) for x in xs], op="avg")
        self.assertTrue(all(np.all(o == 1) for o in out))


class PointToPoint(Errors, Base):
    """Comm.send / recv / p2p_tag_ub / lep_residual / lep_reset. Ranks are
    paired 0 -> 1, 2 -> 3 (a rank without a partner only checks errors)."""

    def setUp(self):
        super().setUp()
        self.peer = RANK ^ 1 if (RANK ^ 1) < SIZE else None
        self.sender = RANK % 2 == 0

    def pair(self, test):
        """Run test(peer, sender) on paired ranks; all ranks then agree."""
        if self.peer is not None:
            test(self.peer, self.sender)
        WORLD.Barrier()

    def test_tag_ub_and_errors(self):
        ub = self.comm.p2p_tag_ub()
        self.assertGreater(ub, 0)
        x = np.ones(10, dtype=np.float32)
        e = self.assertStatus(Status.INVALID_ARG, self.comm.send, x, RANK, 0)
        self.assertIn("dest", e.message)
        self.assertStatus(Status.INVALID_ARG, self.comm.send, x, SIZE, 0)
        self.assertStatus(Status.INVALID_ARG, self.comm.recv, x, -5, 0)
        other = (RANK + 1) % SIZE
        if other != RANK:
            self.assertStatus(Status.INVALID_ARG, self.comm.send, x, other, -1)
            e = self.assertStatus(Status.INVALID_ARG, self.comm.send, x, other, ub + 1)
            self.assertIn("tag", e.message)
            self.assertStatus(Status.NOT_SUPPORTED, self.comm.send, x, other, 0, method="sketch")
            self.assertStatus(Status.INVALID_ARG, self.comm.send, x, other, 0, compress=2)
        with self.assertRaises(TypeError):
            self.comm.send(x, 1.0, 0)
        with self.assertRaises(TypeError):
            self.comm.send(x, 0, 0, compress="yes")
        with self.assertRaises(ValueError):
            self.comm.recv(x[::2], 0, 0)
        ro = np.ones(4)
        ro.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "buf is read-only"):
            self.comm.recv(ro, 0, 0)
        with self.assertRaises(TypeError):
            self.comm.send(x, 0, 0, colour=1)

    def test_uncompressed_is_exact(self):
        def run(peer, sender):
            for tag, (dtype, cdtype) in enumerate(((np.float32, None), (np.float64, None), (np.float16, None),
                                                   (np.uint16, Dtype.BF16))):
                x = integer_valued((3, 7), np.float32 if cdtype else dtype, seed=100 + tag)
                if cdtype:
                    x = cc_coll.to_bfloat16(x).reshape(3, 7)
                if sender:
                    self.comm.send(x, peer, tag, compress=False, dtype=cdtype)
                else:
                    got = self.comm.recv(np.full_like(x, 9), peer, tag, dtype=cdtype)
                    self.assertTrue(np.array_equal(bits(got), bits(x)), dtype)
            # method NONE compressed is the data as it is
            y = integer_valued(50, np.float64, seed=7)
            if sender:
                self.comm.send(y, peer, 9, method="none")
            else:
                self.assertTrue(np.array_equal(self.comm.recv(np.empty_like(y), peer, 9, method="none"), y))
        self.pair(run)

    def test_lowrank_recovers_low_rank_data(self):
        def run(peer, sender):
            for dtype, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
                # a (16, 4, 5) array of rank 2 in its view (16, 20)
                shared = np.random.default_rng(111)
                x = (shared.standard_normal((16, 2)) @ shared.standard_normal((2, 20))).astype(dtype)
                x = x.reshape(16, 4, 5)
                kw = dict(method="lowrank", rank=2)
                if sender:
                    self.comm.send(x, peer, 20, **kw)
                    e = self.comm.lep_residual(x, peer, 20)
                    self.assertLess(np.abs(e).max(), tol * np.abs(x).max() * 10)
                    self.comm.lep_reset(peer, 20)
                else:
                    got = self.comm.recv(np.zeros_like(x), peer, 20, **kw)
                    self.assertLess(relative(got, x.astype(np.float64)), tol)
        self.pair(run)

    def test_state_cap(self):
        x = low_rank_terms(64, 48, 1, np.float32, seed=8)
        kw = dict(method="lowrank", rank=1, ef=True)

        def measure(peer, sender):
            if sender:
                self.comm.send(x, peer, 1, **kw)
            else:
                self.comm.recv(np.empty_like(x), peer, 1, **kw)
                self.assertEqual(self.comm.state_bytes(), 0, "a receiver keeps no LOWRANK state")
        self.pair(measure)
        step = WORLD.allreduce(self.comm.state_bytes() if self.sender else 0, op=MPI.MAX)
        if self.peer is not None:
            self.assertGreater(step, (64 + 48) * 4)

        with capped_comm(2 * step + step // 2) as c:
            def run(peer, sender):
                if not sender:
                    for tag in (1, 2, 3):  # none for the refused send
                        c.recv(np.empty_like(x), peer, tag, **kw)
                    return
                for tag in (1, 2):
                    c.send(x, peer, tag, **kw)
                self.assertEqual(c.state_bytes(), 2 * step)
                ef = c.ef_bytes()
                e = self.assertStatus(Status.EF_LIMIT, c.send, x, peer, 3, **kw)
                self.assertIn("CC_COLL_STATE_MAX_BYTES", e.message)
                self.assertEqual(c.state_bytes(), 2 * step)
                self.assertEqual(c.ef_bytes(), ef, "a refused send keeps no new residual")
                c.lep_reset(peer, 1)
                self.assertEqual(c.state_bytes(), step)
                c.send(x, peer, 3, **kw)
                c.ef_reset_all()
                self.assertEqual(c.state_bytes(), 0)
            self.pair(run)

    def test_lep_invariant_and_flush(self):
        shape, steps = (24, 16), 10
        kw = dict(method="lowrank", rank=1, ef_key=7)

        def run(peer, sender):
            total = np.zeros(shape)
            buf = np.empty(shape)
            for step in range(steps):
                if sender:
                    g = np.random.default_rng([120, step]).standard_normal(shape)
                    self.comm.send(g, peer, 30, **kw)
                    total += g
                else:
                    total += self.comm.recv(buf, peer, 30, **kw)
            if sender:
                e = self.comm.lep_residual(buf, peer, 30, ef_key=7)
                self.assertGreater(np.abs(e).max(), 0)
                self.assertEqual(self.comm.ef_bytes(), buf.nbytes)
                WORLD.Send(total, dest=peer, tag=SIDE_TAG)
                WORLD.Send(e, dest=peer, tag=SIDE_TAG)
                # an uncompressed send flushes the residual into the message
                z = np.zeros(shape)
                self.comm.send(z, peer, 30, compress=False, ef_key=7)
                self.assertFalse(self.comm.lep_residual(buf, peer, 30, ef_key=7).any())
                WORLD.Send(e, dest=peer, tag=SIDE_TAG)
                self.comm.lep_reset(peer, 30, ef_key=7)
                self.assertEqual(self.comm.ef_bytes(), 0)
            else:
                sent, e = np.empty(shape), np.empty(shape)
                WORLD.Recv(sent, source=peer, tag=SIDE_TAG)
                WORLD.Recv(e, source=peer, tag=SIDE_TAG)
                # what arrived + what the sender still holds = what was sent
                self.assertLess(relative(total + e, sent), 1e-10)
                flushed = self.comm.recv(buf, peer, 30, **kw)
                WORLD.Recv(e, source=peer, tag=SIDE_TAG)
                np.testing.assert_allclose(flushed, e, rtol=0, atol=1e-12)
        self.pair(run)

    def test_topk(self):
        def run(peer, sender):
            x = np.random.default_rng(130).permutation(200).astype(np.float32) + 1
            kw = dict(method="topk", density=0.05, ef=False)
            if sender:
                self.comm.send(x, peer, 40, **kw)
            else:
                got = self.comm.recv(np.zeros_like(x), peer, 40, **kw)
                np.testing.assert_array_equal(got, np.where(x > 190, x, 0))
        self.pair(run)

    def test_mismatch_on_both_sides(self):
        def run(peer, sender):
            x = np.arange(12, dtype=np.float32).reshape(3, 4)
            if sender:
                self.assertStatus(Status.MISMATCH, self.comm.send, x, peer, 50, compress=False)
                self.assertStatus(Status.MISMATCH, self.comm.send, x, peer, 51, method="lowrank", rank=1,
                                  min_compression_rate=1)
                self.assertFalse(self.comm.lep_residual(x, peer, 51).any())
            else:
                buf = np.full(13, 5, dtype=np.float32)   # another count
                self.assertStatus(Status.MISMATCH, self.comm.recv, buf, peer, 50)
                self.assertTrue(np.all(buf == 5), "a failed receive wrote the buffer")
                buf = np.full((3, 4), 5, dtype=np.float32)   # another rank
                self.assertStatus(Status.MISMATCH, self.comm.recv, buf, peer, 51, method="lowrank", rank=2,
                                  min_compression_rate=1)
                self.assertTrue(np.all(buf == 5))
        self.pair(run)


def main():
    return run_tests(__name__, "cc_coll LOWRANK, group and p2p Python tests")


if __name__ == "__main__":
    sys.exit(main())
