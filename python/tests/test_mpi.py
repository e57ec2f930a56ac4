# SPDX-License-Identifier: BSD-3-Clause
"""cc_coll under MPI, run on every rank:

    mpirun -np 4 python3 python/tests/test_mpi.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). A failure on any rank aborts the whole job, so no rank waits
forever in a collective its peer has left.
"""

import contextlib
import dataclasses
import gc
import math
import os
import sys
import unittest
import unittest.mock
import weakref

import numpy as np
from mpi4py import MPI

import cc_coll
from cc_coll import Dtype, Method, Op, Sparsifier, Status


def error_class(status):
    """The exception class of `status`: its name in CamelCase + Error
    (INVALID_ARG: InvalidArgError, MPI: MPIError)."""
    words = {"MPI": "MPI", "EF": "EF", "CUDA": "CUDA"}
    return getattr(cc_coll, "".join(words.get(w, w.capitalize()) for w in Status(status).name.split("_")) + "Error")

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size

NUMPY_DTYPES = (np.float32, np.float64, np.float16)
SHAPES = ((1000,), (7, 13), (2, 3, 4, 5), (), (3, 0))


def integer_valued(shape, dtype, seed, bound=100):
    """Integers in [-bound, bound] so that every sum is exact in any dtype."""
    rng = np.random.default_rng(seed)
    return rng.integers(-bound, bound + 1, size=shape).astype(dtype)


def bits(a):
    """The array's bit patterns, for bit-identical comparisons."""
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def mpi_reference(x, op, dtype=None):
    """The reduction computed with mpi4py's Allreduce. MPI has no 16-bit
    floats: those are summed in float32 and rounded, as libcc_coll specifies
    (exact here, the values being small integers)."""
    if dtype == Dtype.BF16:
        x32 = cc_coll.from_bfloat16(x).reshape(x.shape)
    elif x.dtype == np.float16:
        x32 = x.astype(np.float32)
    else:
        x32 = x
    out = np.empty_like(x32)
    WORLD.Allreduce(x32, out, op=MPI.SUM)
    if op == Op.AVG:
        out = out / out.dtype.type(SIZE)
    if dtype == Dtype.BF16:
        return cc_coll.to_bfloat16(out).reshape(x.shape)
    return out.astype(x.dtype)


def mpi_reduce_scatter_reference(x, op, dtype=None):
    """mpi4py's Reduce_scatter_block of x (recvcount * SIZE elements) into
    recvcount, with the 16-bit rule of mpi_reference."""
    if dtype == Dtype.BF16:
        x32 = cc_coll.from_bfloat16(x)
    elif x.dtype == np.float16:
        x32 = x.astype(np.float32)
    else:
        x32 = np.ascontiguousarray(x)
    x32 = x32.reshape(-1)
    out = np.empty(x32.size // SIZE, dtype=x32.dtype)
    WORLD.Reduce_scatter_block(x32, out, op=MPI.SUM)
    if op == Op.AVG:
        out = out / out.dtype.type(SIZE)
    if dtype == Dtype.BF16:
        return cc_coll.to_bfloat16(out)
    return out.astype(x.dtype)


def distinct_magnitudes(n, dtype, seed):
    """A random permutation of 1..n with random signs: no two magnitudes tie,
    so each rank's top k is unique whatever the tie rule, and the sums over
    the ranks are exact in float32/float64 (n * SIZE < 2**24)."""
    rng = np.random.default_rng(seed)
    return (rng.permutation(n) + 1).astype(dtype) * rng.choice(np.array([-1, 1], dtype=dtype), size=n)


# SKETCH lays a buffer (or a reduce-scatter shard) out in blocks of 1024
# elements; element i lands in column i % 1024 of its three sub-tables.
SKETCH_BLOCK = 1024


def sketch_data(blocks, dtype, shards=1, shared=64, own=128):
    """Integer data for exact SKETCH checks: `shards` shards of `blocks`
    blocks each, with distinct magnitudes (as distinct_magnitudes), whose
    k = shared + own largest magnitudes lie at `shared` indices common to all
    ranks and `own` indices of this rank alone. Every one of them has a
    column (index within its shard, mod 1024) that no other of them, on any
    rank, has: the union support has at most one element per sketch column,
    so peeling decodes it exactly whatever the sketch's size and seed.
    Returns (x, k, density) with ceil(density * x.size) == k."""
    rc = blocks * SKETCH_BLOCK
    n = shards * rc
    k = shared + own
    assert shared + SIZE * own <= SKETCH_BLOCK
    x = distinct_magnitudes(n, dtype, seed=1000 + RANK)
    common, mine = np.random.default_rng(1), np.random.default_rng(2000 + RANK)

    def place(rng, columns):
        return rng.integers(0, shards, len(columns)) * rc + rng.integers(0, blocks, len(columns)) * SKETCH_BLOCK \
            + np.asarray(columns)

    idx = np.concatenate([place(common, range(shared)),
                          place(mine, [shared + RANK + SIZE * j for j in range(own)])])
    big = n + 1 + mine.permutation(k)
    x[idx] = big.astype(dtype) * np.sign(x[idx])
    return x, k, (k - 0.5) / n


def top_k(x, k):
    """x with all but its k largest magnitudes set to zero."""
    out = np.zeros_like(x)
    keep = np.argsort(-np.abs(x), kind="stable")[:k]
    out[keep] = x[keep]
    return out


def same_sketch_result(a, b):
    """Equal values (then bit-identical, but for the sign of a zero): a sum
    that cancels to zero can be decoded from a sketch cell of sign -1 as
    -0.0 where MPI and TOPK give +0.0."""
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b) \
        and np.array_equal(bits(a[a != 0]), bits(b[b != 0]))


def same_on_all_ranks(a):
    mine = bytes(np.ascontiguousarray(a).view(np.uint8))
    return all(other == mine for other in WORLD.allgather(mine))


class Base(unittest.TestCase):
    def setUp(self):
        self.comm = cc_coll.Comm(WORLD)

    def tearDown(self):
        self.comm.close()


class Passthrough(Base):
    """Method NONE is MPI_Allreduce: bit-identical to mpi4py's Allreduce."""

    def check(self, x, op, dtype=None, method=Method.NONE):
        ref = mpi_reference(x, op, Dtype[dtype.upper()] if isinstance(dtype, str) else dtype)
        before = x.copy()
        # out of place
        out = np.full_like(x, 7)
        r = self.comm.allreduce(x, out, op=op, method=method, dtype=dtype)
        self.assertIs(r, out)
        self.assertTrue(np.array_equal(bits(out), bits(ref)), (x.dtype, x.shape, op))
        self.assertTrue(np.array_equal(bits(x), bits(before)), "sendbuf changed")
        # in place, recvbuf omitted
        y = x.copy()
        self.assertIs(self.comm.allreduce(y, op=op, method=method, dtype=dtype), y)
        self.assertTrue(np.array_equal(bits(y), bits(ref)))
        # in place, recvbuf is sendbuf
        z = x.copy()
        self.assertIs(self.comm.allreduce(z, z, op=op, method=method, dtype=dtype), z)
        self.assertTrue(np.array_equal(bits(z), bits(ref)))

    def test_float_dtypes_sum_and_avg(self):
        for dtype in NUMPY_DTYPES:
            for shape in SHAPES:
                for op in (Op.SUM, Op.AVG, "sum", "AVG"):
                    with self.subTest(dtype=dtype, shape=shape, op=op):
                        self.check(integer_valued(shape, dtype, seed=RANK), Op[op.upper()] if isinstance(op, str) else op)

    def test_method_spellings(self):
        x = integer_valued((64,), np.float32, seed=RANK + 10)
        for method in (Method.NONE, "none", 0):
            self.check(x, Op.SUM, method=method)

    def test_bfloat16(self):
        for shape in ((1000,), (5, 6)):
            for op in (Op.SUM, Op.AVG):
                x = cc_coll.to_bfloat16(integer_valued(shape, np.float32, seed=RANK, bound=30)).reshape(shape)
                self.check(x, op, dtype=Dtype.BF16)
                self.check(x, op, dtype="bf16")

    def test_results_agree_across_ranks(self):
        x = np.random.default_rng(RANK).standard_normal(4096)
        out = self.comm.allreduce(x, np.empty_like(x), op="avg", method="none")
        self.assertTrue(same_on_all_ranks(out))

    def test_fortran_handle_and_subcommunicator(self):
        x = integer_valued((100,), np.float64, seed=RANK)
        with cc_coll.Comm(WORLD.py2f()) as c:
            self.assertEqual((c.rank, c.size), (RANK, SIZE))
            ref = mpi_reference(x, Op.SUM)
            self.assertTrue(np.array_equal(c.allreduce(x, np.empty_like(x)), ref))
        sub = WORLD.Split(RANK % 2, RANK)
        try:
            with cc_coll.Comm(sub) as c:
                self.assertEqual((c.rank, c.size), (sub.rank, sub.size))
                ref = np.empty_like(x)
                sub.Allreduce(x, ref)
                self.assertTrue(np.array_equal(c.allreduce(x, np.empty_like(x), method="none"), ref))
        finally:
            sub.Free()


class Topk(Base):
    def test_density_one_equals_mpi(self):
        for dtype in NUMPY_DTYPES:
            x = integer_valued((2, 500), dtype, seed=RANK + 3)
            for op in (Op.SUM, Op.AVG):
                ref = mpi_reference(x, op)
                out = np.empty_like(x)
                for _ in range(3):  # the residual stays zero: every call is exact
                    self.comm.allreduce(x, out, op=op, method="topk", density=1.0, ef=True)
                    self.assertTrue(np.array_equal(bits(out), bits(ref)), (dtype, op))
                self.assertFalse(self.comm.ef_residual(out).any())

    def running_mean_error(self, grad, steps, ef, key):
        """Max relative error of the running mean of `steps` TOPK averages
        of the constant `grad`, sampled after steps/10 and after steps."""
        exact = mpi_reference(grad.astype(np.float64), Op.AVG)
        out = np.empty_like(grad)
        total = np.zeros(grad.shape, dtype=np.float64)
        errors = {}
        for t in range(1, steps + 1):
            self.comm.allreduce(grad, out, op=Op.AVG, method=Method.TOPK, density=0.01, ef=ef, ef_key=key)
            total += out
            if t in (steps // 10, steps):
                errors[t] = np.abs(total / t - exact).max() / np.abs(exact).max()
        self.assertTrue(same_on_all_ranks(total))
        return errors, total, exact

    def test_running_mean_converges_with_ef(self):
        n, steps = 2000, 1000
        grad = np.random.default_rng(100 + RANK).standard_normal(n).astype(np.float32)
        self.comm.reset_stats()
        errors, total, exact = self.running_mean_error(grad, steps, ef=True, key=1)
        # EF: the error falls like 1/t (the residual stays bounded)
        self.assertLess(errors[steps], 0.1, errors)
        self.assertLess(errors[steps], errors[steps // 10] / 4, errors)
        # Exact bookkeeping: sum over steps of the results
        #   = mean over ranks of (steps * grad - final residual)
        residual = self.comm.ef_residual(np.empty_like(grad), ef_key=1)
        self.assertGreater(np.abs(residual).max(), 0)
        mean_residual = mpi_reference(residual, Op.AVG)
        np.testing.assert_allclose(total, steps * exact - mean_residual,
                                   rtol=0, atol=1e-4 * steps * np.abs(exact).max())
        # the sparse path really ran: k = 20 (index, value) pairs + header per rank and call
        s = self.comm.stats()
        self.assertEqual(s.calls, steps)
        self.assertEqual(s.bytes_uncompressed, steps * n * 4)
        self.assertLess(s.bytes_wire, s.bytes_uncompressed / 10)

        # Without EF the same elements are sent every time: no convergence.
        no_ef, _, _ = self.running_mean_error(grad, steps // 10, ef=False, key=2)
        self.assertGreater(no_ef[steps // 10], 0.5, no_ef)

    def test_ef_store(self):
        n = 1000
        grad = np.random.default_rng(RANK).standard_normal(n).astype(np.float32)
        self.assertEqual(self.comm.ef_bytes(), 0)
        a, b = np.empty_like(grad), np.empty_like(grad)
        # without ef_key a residual is named by its recvbuf: two buffers, two residuals
        self.comm.allreduce(grad, a, method="topk", density=0.01, ef=True)
        self.comm.allreduce(grad, b, method="topk", density=0.01, ef=True)
        self.assertEqual(self.comm.ef_bytes(), 2 * n * 4)
        self.assertTrue(self.comm.ef_residual(a).any())
        self.comm.ef_reset(a)
        self.assertFalse(self.comm.ef_residual(a).any())
        self.assertEqual(self.comm.ef_bytes(), n * 4)
        # ef=False neither reads nor creates a residual
        self.comm.allreduce(grad, a, method="topk", density=0.01, ef=False)
        self.assertEqual(self.comm.ef_bytes(), n * 4)
        self.comm.ef_reset_all()
        self.assertEqual(self.comm.ef_bytes(), 0)
        # float64 residuals are binary64
        g64 = grad.astype(np.float64)
        self.comm.allreduce(g64, np.empty_like(g64), method="topk", density=0.01, ef=True, ef_key=5)
        self.assertEqual(self.comm.ef_bytes(), n * 8)


class Sketch(Base):
    """Method SKETCH through Comm.allreduce and its parameters."""

    def test_density_one_equals_mpi(self):
        # Every element kept: the sketch would outweigh the buffer, so the
        # call is the dense allreduce, exactly MPI's.
        for dtype in NUMPY_DTYPES:
            x = integer_valued((2, 500), dtype, seed=RANK + 5)
            for op in (Op.SUM, Op.AVG):
                ref = mpi_reference(x, op)
                out = np.empty_like(x)
                for _ in range(2):
                    r = self.comm.allreduce(x, out, op=op, method=Method.SKETCH, density=1.0, ef=True)
                    self.assertIs(r, out)
                    self.assertTrue(np.array_equal(bits(out), bits(ref)), (dtype, op))
                self.assertFalse(self.comm.ef_residual(out).any())
                y = x.copy()
                self.comm.allreduce(y, op=op, method="sketch", density=1.0, ef=False)
                self.assertTrue(np.array_equal(bits(y), bits(ref)), (dtype, op, "in place"))

    def test_lossless_equals_topk(self):
        # SKETCH (load factor 0.75) and TOPK both compute the exact sum of the
        # same per-rank top-k selections when the sketch decodes losslessly.
        for dtype in (np.float32, np.float64):
            x, k, density = sketch_data(12, dtype)
            selected = top_k(x, k)
            expected = np.empty_like(x)
            WORLD.Allreduce(selected, expected, op=MPI.SUM)
            kept = (selected != 0).astype(np.int32)
            WORLD.Allreduce(MPI.IN_PLACE, kept, op=MPI.MAX)
            support = int(np.count_nonzero(kept))  # the union of the selections
            self.comm.reset_stats()
            sk = self.comm.allreduce(x, np.empty_like(x), method="sketch", density=density, ef=False,
                                     sparsifier="topk", load_factor=0.75, seed=12345)
            s = self.comm.stats()
            tk = self.comm.allreduce(x, np.empty_like(x), method="topk", density=density, ef=False)
            self.assertTrue(np.array_equal(bits(tk), bits(expected)), dtype)
            self.assertTrue(same_sketch_result(sk, tk), dtype)
            self.assertTrue(same_on_all_ranks(sk))
            # the sketch path ran, and peeling recovered every support element
            self.assertEqual(s.calls, 1)
            self.assertEqual(s.sketch_elements, support)
            self.assertEqual(s.sketch_peeled, support)
            self.assertLess(s.bytes_wire, s.bytes_uncompressed / 2)
            # AVG divides the same sum
            sk = self.comm.allreduce(x, np.empty_like(x), op="avg", method=Method.SKETCH, density=density,
                                     ef=False, load_factor=0.75)
            tk = self.comm.allreduce(x, np.empty_like(x), op="avg", method="topk", density=density, ef=False)
            self.assertTrue(same_sketch_result(sk, tk), (dtype, "avg"))

    def test_error_feedback_and_seed(self):
        # EF keeps exactly what was not sent; the seed changes the layout but
        # not a lossless result.
        x, k, density = sketch_data(12, np.float32)
        selected = top_k(x, k)
        expected = mpi_reference(selected, Op.SUM)
        for key, seed in enumerate((0, 1, (1 << 64) - 1), start=300):
            self.comm.reset_stats()
            out = self.comm.allreduce(x, np.empty_like(x), method="sketch", density=density, ef=True,
                                      ef_key=key, load_factor=0.5, seed=seed)
            self.assertTrue(same_sketch_result(out, expected), seed)
            s = self.comm.stats()
            self.assertEqual(s.sketch_peeled, s.sketch_elements)
            np.testing.assert_array_equal(self.comm.ef_residual(out, ef_key=key), x - selected)

    def test_threshold_sparsifier(self):
        # 90% of the elements (the same positions on every rank) are tiny;
        # zero_fraction 0.95 lets the ladder's top rung, 0.5, zero exactly
        # those, so the result is the exact sum of the others: one per
        # sketch column (peeling is exact).
        blocks = 10
        n = blocks * SKETCH_BLOCK
        kept = np.zeros(n, dtype=bool)
        kept[[((c * 7) % blocks) * SKETCH_BLOCK + c for c in range(SKETCH_BLOCK)]] = True
        x = integer_valued((n,), np.float32, seed=90 + RANK, bound=50)
        x[x == 0] = 1
        x[~kept] = np.float32(2.0 ** -10)
        expected = mpi_reference(np.where(kept, x, np.float32(0)), Op.SUM)
        self.comm.reset_stats()
        out = self.comm.allreduce(x, np.empty_like(x), method="sketch", sparsifier=Sparsifier.THRESHOLD,
                                  zero_fraction=0.95, load_factor=0.5, ef=True, ef_key=77)
        self.assertTrue(same_sketch_result(out, expected))
        s = self.comm.stats()
        self.assertEqual((s.sketch_elements, s.sketch_peeled), (SKETCH_BLOCK, SKETCH_BLOCK))
        # error feedback keeps exactly what was not sent
        residual = self.comm.ef_residual(out, ef_key=77)
        np.testing.assert_array_equal(residual, np.where(kept, 0.0, 2.0 ** -10))
        # zero_fraction 0 keeps everything (no element is below 0.5): the
        # dense path, exactly MPI's sum
        y = x.copy()
        y[~kept] = 3
        out = self.comm.allreduce(y, np.empty_like(y), method="sketch", sparsifier="threshold",
                                  zero_fraction=0.0, ef=False)
        self.assertTrue(np.array_equal(bits(out), bits(mpi_reference(y, Op.SUM))))

    def test_parameters_from_environment_defaults(self):
        # Fields left at None take the communicator's configuration: these
        # calls must simply succeed with method SKETCH and the defaults.
        x = distinct_magnitudes(4096, np.float64, seed=RANK)
        out = self.comm.allreduce(x, np.empty_like(x), method="sketch", ef=False)
        self.assertTrue(same_on_all_ranks(out))


class ReduceScatter(Base):
    """Comm.reduce_scatter against mpi4py's Reduce_scatter_block."""

    def check(self, x, op, recv_shape=None, dtype=None, **kw):
        rc = x.size // SIZE
        ref = mpi_reduce_scatter_reference(x, op, Dtype[dtype.upper()] if isinstance(dtype, str) else dtype)
        before = x.copy()
        # out of place
        out = np.full(recv_shape if recv_shape is not None else (rc,), 7, dtype=x.dtype)
        r = self.comm.reduce_scatter(x, out, op=op, dtype=dtype, **kw)
        self.assertIs(r, out)
        self.assertTrue(np.array_equal(bits(out.reshape(-1)), bits(ref)), (x.dtype, x.shape, op, kw))
        self.assertTrue(np.array_equal(bits(x), bits(before)), "sendbuf changed")
        # in place, recvbuf omitted: a view of the first rc elements
        y = x.copy()
        r = self.comm.reduce_scatter(y, op=op, dtype=dtype, **kw)
        self.assertEqual(r.shape, (rc,))
        self.assertTrue(rc == 0 or np.shares_memory(r, y))
        self.assertTrue(np.array_equal(bits(r), bits(ref)), (x.dtype, x.shape, op, kw, "in place"))
        self.assertTrue(np.array_equal(bits(y.reshape(-1)[:rc]), bits(ref)))
        # in place, recvbuf is sendbuf
        z = x.copy()
        r = self.comm.reduce_scatter(z, z, op=op, dtype=dtype, **kw)
        self.assertTrue(np.array_equal(bits(r), bits(ref)))

    def test_none_equals_mpi(self):
        for dtype in NUMPY_DTYPES:
            for shape, recv_shape in (((SIZE * 1000,), None), ((SIZE, 7, 3), (7, 3)), ((SIZE * 5, 2), (10,)),
                                      ((0,), None), ((SIZE, 0), (0,))):
                for op in (Op.SUM, Op.AVG, "avg"):
                    with self.subTest(dtype=dtype, shape=shape, op=op):
                        x = integer_valued(shape, dtype, seed=RANK + 20)
                        self.check(x, Op[op.upper()] if isinstance(op, str) else op, recv_shape, method="none")

    def test_none_bfloat16(self):
        x = cc_coll.to_bfloat16(integer_valued((SIZE * 300,), np.float32, seed=RANK, bound=30))
        for op in (Op.SUM, Op.AVG):
            self.check(x, op, dtype=Dtype.BF16, method=Method.NONE)
            self.check(x, op, dtype="bf16", method=0)

    def test_topk_and_sketch_density_one_equal_mpi(self):
        for method in (Method.TOPK, "sketch"):
            for key, dtype in enumerate(NUMPY_DTYPES, start=500):  # a residual per dtype
                for op in (Op.SUM, Op.AVG):
                    with self.subTest(method=method, dtype=dtype, op=op):
                        x = integer_valued((SIZE, 257), dtype, seed=RANK + 30)
                        self.check(x, op, method=method, density=1.0, ef=True, ef_key=key)
                        # every element was sent: the residual stays zero
                        self.assertFalse(self.comm.ef_residual(x, ef_key=key).any())

    def test_sketch_lossless(self):
        # SKETCH picks each rank's top k over the whole buffer; with peeling
        # complete every rank gets the exact sum of those selections in its
        # shard.
        for dtype in (np.float32, np.float64):
            x, k, density = sketch_data(4, dtype, shards=SIZE)
            rc = x.size // SIZE
            ref = mpi_reduce_scatter_reference(top_k(x, k), Op.SUM)
            self.comm.reset_stats()
            out = self.comm.reduce_scatter(x, np.empty(rc, dtype=dtype), method="sketch", density=density,
                                           ef=False, load_factor=0.75)
            self.assertTrue(same_sketch_result(out, ref), dtype)
            s = self.comm.stats()
            self.assertEqual(s.calls, 1)
            self.assertEqual(s.bytes_uncompressed, x.size * x.itemsize)
            self.assertLess(s.bytes_wire, s.bytes_uncompressed)
            self.assertEqual(s.sketch_peeled, s.sketch_elements)
            # each rank decoded its shard of the union of the selections
            kept = (top_k(x, k) != 0).astype(np.int32)
            WORLD.Allreduce(MPI.IN_PLACE, kept, op=MPI.MAX)
            self.assertEqual(s.sketch_elements, int(np.count_nonzero(kept[RANK * rc:(RANK + 1) * rc])))

    def test_topk_error_feedback(self):
        # TOPK sends a top k of each shard and keeps the rest in the residual:
        # summed over the calls, the results are the exact reduce-scatter of
        # (steps * sendbuf - final residual).
        rc = 2000
        x = distinct_magnitudes(rc * SIZE, np.float32, seed=60 + RANK)
        total = np.zeros(rc, dtype=np.float64)
        steps = 200
        for _ in range(steps):
            out = self.comm.reduce_scatter(x, np.empty(rc, dtype=np.float32), method="topk", density=0.05,
                                           ef=True, ef_key=600)
            total += out
        exact = mpi_reduce_scatter_reference(x.astype(np.float64), Op.SUM)
        residual = self.comm.ef_residual(x, ef_key=600)
        # sum of the results = steps * exact - (reduce-scatter of the residuals)
        np.testing.assert_allclose(total, steps * exact - mpi_reduce_scatter_reference(residual, Op.SUM),
                                   rtol=0, atol=1e-3 * steps * np.abs(exact).max())


class Errors(Base):
    def assertStatus(self, status, fn, *args, **kwargs):
        with self.assertRaises(cc_coll.Error) as cm:
            fn(*args, **kwargs)
        self.assertIsInstance(cm.exception.status, Status)
        self.assertEqual(cm.exception.status, status, str(cm.exception))
        # raised as the status's own subclass (InvalidArgError, ...)
        self.assertIs(type(cm.exception), error_class(status))
        return cm.exception

    def test_non_contiguous(self):
        x = np.zeros(100, dtype=np.float32)
        with self.assertRaisesRegex(ValueError, "sendbuf is not C-contiguous"):
            self.comm.allreduce(x[::2])
        with self.assertRaisesRegex(ValueError, "recvbuf is not C-contiguous"):
            self.comm.allreduce(x[:50], x[::2])
        f = np.asfortranarray(np.zeros((4, 5), dtype=np.float64))
        with self.assertRaisesRegex(ValueError, "sendbuf is not C-contiguous"):
            self.comm.allreduce(f)

    def test_mismatched_dtypes_and_shapes(self):
        x = np.zeros(10, dtype=np.float32)
        with self.assertRaisesRegex(TypeError, "recvbuf has dtype float64 but sendbuf has float32"):
            self.comm.allreduce(x, np.zeros(10, dtype=np.float64))
        with self.assertRaisesRegex(ValueError, r"recvbuf has shape \(2, 5\) but sendbuf has \(10,\)"):
            self.comm.allreduce(x, np.zeros((2, 5), dtype=np.float32))
        with self.assertRaisesRegex(TypeError, "dtype int32"):
            self.comm.allreduce(np.zeros(10, dtype=np.int32))
        with self.assertRaisesRegex(TypeError, "dtype uint16"):
            self.comm.allreduce(np.zeros(10, dtype=np.uint16))  # bfloat16 must be asked for
        with self.assertRaisesRegex(TypeError, "dtype=BF16 needs a uint16 array"):
            self.comm.allreduce(x, dtype=Dtype.BF16)
        with self.assertRaisesRegex(TypeError, "dtype=F64 needs a float64 array"):
            self.comm.allreduce(x, dtype=Dtype.F64)
        with self.assertRaises(TypeError):
            self.comm.allreduce(np.zeros(10, dtype=">f4"))  # non-native byte order
        with self.assertRaises(TypeError):
            self.comm.allreduce([1.0, 2.0])

    def test_read_only(self):
        x = np.zeros(10, dtype=np.float32)
        x.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "sendbuf is read-only"):
            self.comm.allreduce(x)
        out = self.comm.allreduce(x, np.empty_like(x))  # a read-only sendbuf is fine out of place
        self.assertFalse(out.any())
        with self.assertRaisesRegex(ValueError, "recvbuf is read-only"):
            self.comm.allreduce(np.zeros(10, dtype=np.float32), x)

    def test_bad_density(self):
        x = np.ones(100, dtype=np.float32)
        for density in (0.0, -0.5, 1.5, math.nan, math.inf):
            e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce, x, method="topk", density=density)
            self.assertIn("density", e.message)
            self.assertIn("density", str(e))
            self.assertTrue(str(e).startswith("CC_COLL_ERR_INVALID_ARG: "), str(e))
        self.assertTrue(np.all(x == 1), "a failed call changed the buffer")

    def test_bad_ef_op_method(self):
        x = np.ones(100, dtype=np.float32)
        e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce, x, method="topk", ef=2)
        self.assertIn("ef", e.message)
        self.assertStatus(Status.INVALID_OP, self.comm.allreduce, x, op=7)
        self.assertStatus(Status.INVALID_METHOD, self.comm.allreduce, x, method=9)
        with self.assertRaisesRegex(ValueError, "op = 'max' is not one of 'sum', 'avg'"):
            self.comm.allreduce(x, op="max")
        with self.assertRaisesRegex(ValueError, "method = 'zip'"):
            self.comm.allreduce(x, method="zip")

    def test_sketch_parameters(self):
        x = np.ones(100, dtype=np.float32)
        for load_factor in (0.0, -1.0, 20.0, math.nan):
            e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce, x, method="sketch",
                                  load_factor=load_factor)
            self.assertIn("load_factor", e.message)
        for zero_fraction in (1.0, -0.1, math.nan):
            e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce, x, method="sketch",
                                  sparsifier="threshold", zero_fraction=zero_fraction)
            self.assertIn("zero_fraction", e.message)
        e = self.assertStatus(Status.INVALID_ARG, self.comm.allreduce, x, method="sketch", sparsifier=5)
        self.assertIn("sparsifier", e.message)
        with self.assertRaisesRegex(ValueError, "sparsifier = 'bloom'"):
            self.comm.allreduce(x, method="sketch", sparsifier="bloom")
        with self.assertRaises(TypeError):
            self.comm.allreduce(x, method="sketch", seed=1.5)
        self.assertStatus(Status.INVALID_ARG, self.comm.reduce_scatter, np.ones(SIZE * 10, dtype=np.float32),
                          method="sketch", load_factor=20.0)
        self.assertTrue(np.all(x == 1), "a failed call changed the buffer")

    def test_reduce_scatter_arguments(self):
        x = np.zeros(SIZE * 10, dtype=np.float32)
        if SIZE > 1:
            with self.assertRaisesRegex(ValueError, "not a multiple of the communicator size"):
                self.comm.reduce_scatter(np.zeros(SIZE * 10 + 1, dtype=np.float32))
        with self.assertRaisesRegex(ValueError, "recvbuf has 11 elements"):
            self.comm.reduce_scatter(x, np.zeros(11, dtype=np.float32))
        with self.assertRaisesRegex(TypeError, "recvbuf has dtype float64 but sendbuf has float32"):
            self.comm.reduce_scatter(x, np.zeros(10, dtype=np.float64))
        with self.assertRaisesRegex(ValueError, "sendbuf is not C-contiguous"):
            self.comm.reduce_scatter(np.zeros(SIZE * 20, dtype=np.float32)[::2])
        with self.assertRaisesRegex(ValueError, "recvbuf is not C-contiguous"):
            self.comm.reduce_scatter(x, np.zeros(20, dtype=np.float32)[::2])
        ro = np.zeros(10, dtype=np.float32)
        ro.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "recvbuf is read-only"):
            self.comm.reduce_scatter(x, ro)
        with self.assertRaises(TypeError):
            self.comm.reduce_scatter(list(x))
        if SIZE > 1:
            # a recvbuf inside sendbuf but not at its start overlaps: the library says so
            e = self.assertStatus(Status.INVALID_ARG, self.comm.reduce_scatter, x, x[1:11])
            self.assertIn("overlap", e.message)
        self.assertStatus(Status.INVALID_OP, self.comm.reduce_scatter, x, op=3)
        self.assertStatus(Status.INVALID_METHOD, self.comm.reduce_scatter, x, method=9)

    def test_closed_comm(self):
        c = cc_coll.Comm(WORLD)
        self.assertFalse(c.closed)
        c.close()
        c.close()  # idempotent
        self.assertTrue(c.closed)
        x = np.ones(10, dtype=np.float32)
        e = self.assertStatus(Status.INVALID_COMM, c.allreduce, x)
        self.assertIn("not a live communicator", e.message)
        self.assertTrue(np.all(x == 1))
        self.assertStatus(Status.INVALID_COMM, c.reduce_scatter, x)
        for fn in (c.stats, c.reset_stats, c.ef_bytes, c.state_bytes, c.ef_reset_all, lambda: c.rank,
                   lambda: c.size):
            self.assertStatus(Status.INVALID_COMM, fn)
        self.assertEqual(repr(c), "<cc_coll.Comm closed>")

    def test_context_manager(self):
        with cc_coll.Comm(WORLD) as c:
            self.assertEqual(repr(c), "<cc_coll.Comm rank %d of %d>" % (RANK, SIZE))
        self.assertTrue(c.closed)
        self.assertStatus(Status.INVALID_COMM, c.stats)
        # closed also when the block raises
        with self.assertRaises(KeyError):
            with cc_coll.Comm(WORLD) as c:
                raise KeyError("x")
        self.assertTrue(c.closed)

    def test_comm_null(self):
        self.assertStatus(Status.INVALID_ARG, cc_coll.Comm, MPI.COMM_NULL)


@contextlib.contextmanager
def progress(mode):
    """CC_COLL_PROGRESS=mode for the Comms created in the block (the library
    reads the environment when a communicator is created)."""
    old = os.environ.get("CC_COLL_PROGRESS")
    os.environ["CC_COLL_PROGRESS"] = mode
    try:
        yield
    finally:
        if old is None:
            del os.environ["CC_COLL_PROGRESS"]
        else:
            os.environ["CC_COLL_PROGRESS"] = old


def torch_or_none():
    try:
        import torch
        import torch.futures  # noqa: F401
        return torch
    except ImportError:
        return None


class NonBlocking(Base):
    """iallreduce, ireduce_scatter and iallreduce_group: the blocking calls'
    results, bit for bit, through Request objects; mpi4py initialises MPI
    with MPI_THREAD_MULTIPLE, so the progress thread runs them (auto), and
    the caller-driven mode is checked too."""

    N = 3000

    def inputs(self, step, seed=0):
        rng = np.random.default_rng(1000 * step + 17 * RANK + seed)
        return {
            "topk": rng.standard_normal(self.N).astype(np.float32),
            "none": rng.standard_normal(self.N),
            "inplace": rng.standard_normal(self.N).astype(np.float32),
            "group": [rng.standard_normal(self.N).astype(np.float32), rng.standard_normal(50)],
            "rs": rng.standard_normal(self.N * SIZE).astype(np.float32),
        }

    def workload(self, comm, x, post):
        """The calls of one step on `comm`: posted (post=True: a list of
        Requests) or blocking (their results)."""
        ar = comm.iallreduce if post else comm.allreduce
        return [
            ar(x["topk"], np.empty_like(x["topk"]), op="avg", method="topk", density=0.05, ef_key=1),
            ar(x["none"], np.empty_like(x["none"]), method="none"),
            ar(x["inplace"], method="topk", density=0.02, ef_key=2),
            (comm.iallreduce_group if post else comm.allreduce_group)(
                x["group"], [np.empty_like(a) for a in x["group"]],
                params=[dict(method="topk", density=0.1, ef_key=3), dict(method="none")]),
            (comm.ireduce_scatter if post else comm.reduce_scatter)(
                x["rs"], method="topk", density=0.1, ef_key=4),
        ]

    def assertSameBits(self, a, b, what):
        if isinstance(a, list):
            self.assertEqual(len(a), len(b), what)
            for i, (u, v) in enumerate(zip(a, b)):
                self.assertSameBits(u, v, "%s[%d]" % (what, i))
            return
        self.assertEqual((a.dtype, a.shape), (b.dtype, b.shape), what)
        self.assertTrue(np.array_equal(bits(a), bits(b)), what)

    def check_equals_blocking(self, mode, complete):
        """Three steps of the workload posted on one communicator and
        completed by complete(requests) (returning their results), and the
        same calls blocking on another: equal results and residuals."""
        with progress(mode):
            nb, ref = cc_coll.Comm(WORLD), cc_coll.Comm(WORLD)
        try:
            for step in range(3):
                x, y = self.inputs(step), self.inputs(step)
                requests = self.workload(nb, x, post=True)
                self.assertTrue(all(isinstance(r, cc_coll.Request) for r in requests))
                got = complete(requests, step)
                want = self.workload(ref, y, post=False)
                for i, (g, w) in enumerate(zip(got, want)):
                    self.assertSameBits(g, w, "%s progress, step %d, call %d" % (mode, step, i))
                # in place: the results are the caller's arrays
                self.assertIs(got[2], x["inplace"])
                self.assertTrue(np.shares_memory(got[4], x["rs"]))
                self.assertTrue(np.array_equal(got[1], mpi_reference(x["none"], Op.SUM)))
                for r in requests:
                    self.assertTrue(r.done)
                    self.assertEqual((r.status, r.message), (Status.OK, ""))
                    r.free()
            for key, like in ((1, y["topk"]), (2, y["inplace"]), (3, y["group"][0]), (4, y["rs"])):
                self.assertSameBits(nb.ef_residual(like, ef_key=key), ref.ef_residual(like, ef_key=key),
                                    "%s progress, residual %d" % (mode, key))
            self.assertEqual(nb.stats().bytes_wire, ref.stats().bytes_wire)
        finally:
            nb.close()
            ref.close()

    def test_equal_blocking_completed_in_order(self):
        for mode in ("auto", "caller"):
            self.check_equals_blocking(mode, lambda requests, step: [r.wait() for r in requests])

    def test_equal_blocking_completed_out_of_order(self):
        def complete(requests, step):
            # a rank- and step-dependent order: some wait(), some test() loops
            order = np.random.default_rng(100 * RANK + step).permutation(len(requests))
            results = [None] * len(requests)
            for n, i in enumerate(order):
                if n % 2:
                    while not requests[i].test():
                        pass
                    results[i] = requests[i].wait()
                else:
                    results[i] = requests[i].wait()
            return results

        for mode in ("auto", "caller"):
            self.check_equals_blocking(mode, complete)

    def test_waitall(self):
        def complete(requests, step):
            first = requests[(RANK + step) % len(requests)]
            first.wait()  # waiting again in waitall returns at once
            return cc_coll.waitall(requests)

        for mode in ("auto", "caller"):
            self.check_equals_blocking(mode, complete)
        x = integer_valued((100,), np.float64, seed=RANK)
        out = np.empty_like(x)
        with self.comm.iallreduce(x, out) as r:
            results = cc_coll.waitall([None, r, None])
        self.assertIsNone(results[0])
        self.assertIs(results[1], out)
        self.assertIsNone(results[2])
        self.assertEqual(cc_coll.waitall([]), [])
        self.assertTrue(np.array_equal(out, mpi_reference(x, Op.SUM)))
        with self.assertRaisesRegex(TypeError, r"requests\[0\] must be a cc_coll.Request"):
            cc_coll.waitall([out])

    def test_arrays_live_until_completion(self):
        # A request freed (or collected) in flight still runs to its end:
        # its arrays stay alive until then, then are released.
        x = integer_valued((4096,), np.float32, seed=RANK)
        out = np.full_like(x, -1)
        alive = weakref.ref(out)
        if RANK == 0:
            r = self.comm.iallreduce(x, out, method="none")
            del out
            in_flight = not r.done  # on two or more ranks, until the others post after the barrier
            self.assertTrue(in_flight or SIZE == 1)
            del r
            gc.collect()
            if in_flight:
                self.assertIsNotNone(alive(), "recvbuf released while its request was in flight")
        WORLD.Barrier()
        if RANK != 0:
            self.comm.iallreduce(x, out, method="none").free()
            del out
        # a blocking call on the communicator completes the requests in flight
        self.comm.allreduce(np.zeros(1))
        gc.collect()
        self.assertIsNone(alive(), "recvbuf kept after its request completed")

    def test_torch_future(self):
        torch = torch_or_none()
        if torch is None:
            self.skipTest("torch is not importable")
        if "libasan" in os.environ.get("LD_PRELOAD", ""):
            # The futures' error path throws C++ exceptions inside
            # libtorch_python, which AddressSanitizer, preloaded into an
            # interpreter that does not link it, cannot intercept.
            self.skipTest("torch's C++ exceptions under a preloaded AddressSanitizer")
        x = integer_valued((1000,), np.float32, seed=RANK)
        out = np.empty_like(x)
        with self.comm.iallreduce(x, out, op="avg") as r:
            future = r.to_torch_future()
            self.assertIsInstance(future, torch.futures.Future)
            chained = future.then(lambda f: f.value().sum())
            self.assertIs(future.wait(), out)
            self.assertTrue(future.done())
            self.assertTrue(np.array_equal(out, mpi_reference(x, Op.AVG)))
            self.assertEqual(chained.wait(), out.sum())
        # a torch tensor's memory, through a numpy view of it
        t = torch.arange(64, dtype=torch.float64) * (RANK + 1)
        view = t.numpy()
        with self.comm.iallreduce(view, method="topk", density=1.0) as r:
            self.assertIs(r.to_torch_future().wait(), view)
        self.assertTrue(torch.equal(t, torch.arange(64, dtype=torch.float64) * (SIZE * (SIZE + 1) // 2)))
        if SIZE > 1:
            # The ranks disagree on the method: the future carries the Error.
            y = np.ones(100, dtype=np.float32)
            with self.comm.iallreduce(y, method="topk" if RANK == 0 else "none", density=0.5) as r:
                with self.assertRaises(cc_coll.Error) as cm:
                    r.to_torch_future().wait()
                self.assertEqual(cm.exception.status, Status.MISMATCH)
                self.assertIn("method", cm.exception.message)
                self.assertEqual(cm.exception.message, r.message)
            self.assertTrue(np.all(y == 1))

    def test_torch_future_without_torch(self):
        with self.comm.iallreduce(np.ones(4)) as r:
            r.wait()
            with unittest.mock.patch.dict(sys.modules, {"torch": None, "torch.futures": None}):
                with self.assertRaisesRegex(ImportError, "to_torch_future needs PyTorch"):
                    r.to_torch_future()

    def assertStatus(self, status, fn, *args, **kwargs):
        with self.assertRaises(cc_coll.Error) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.status, status, str(cm.exception))
        self.assertIs(type(cm.exception), error_class(status))
        return cm.exception

    def test_misuse(self):
        x = np.ones(1024, dtype=np.float32)
        out = np.zeros_like(x)
        r = self.comm.iallreduce(x, out)
        self.assertIs(r.comm, self.comm)
        self.assertIs(r.wait(), out)
        self.assertIs(r.wait(), out)  # waiting again returns at once
        self.assertTrue(r.test())
        self.assertFalse(r.freed)
        r.free()
        r.free()  # idempotent
        self.assertTrue(r.freed)
        self.assertEqual(repr(r), "<cc_coll.Request freed>")
        # A freed request: the library's error, through the package's type.
        for call in (r.wait, r.test, lambda: r.done, lambda: r.status, lambda: r.message,
                     lambda: cc_coll.waitall([r])):
            e = self.assertStatus(Status.INVALID_ARG, call)
            self.assertIn("is not a live request", e.message)
        with self.comm.iallreduce(x, out) as r2:
            pass
        self.assertTrue(r2.freed)
        self.assertStatus(Status.INVALID_ARG, r2.wait)
        # waitall waits for the others before reporting the dead handle
        out3 = np.zeros_like(x)
        with self.comm.iallreduce(x, out3) as r3:
            e = self.assertStatus(Status.INVALID_ARG, cc_coll.waitall, [r3, r])
            self.assertTrue(r3.done)
        self.assertTrue(np.all(out3 == SIZE))
        # Argument errors raise at once and post nothing.
        with self.assertRaisesRegex(ValueError, "sendbuf is not C-contiguous"):
            self.comm.iallreduce(x[::2])
        self.assertStatus(Status.INVALID_ARG, self.comm.iallreduce, x, method="topk", density=2.0)
        self.assertStatus(Status.INVALID_ARG, self.comm.iallreduce_group, [x], params=dict(method="lowrank", rank=0))
        if SIZE > 1:
            with self.assertRaisesRegex(ValueError, "not a multiple of the communicator size"):
                self.comm.ireduce_scatter(np.ones(SIZE * 3 + 1))
        self.assertTrue(np.all(x == 1))
        if SIZE > 1:
            # rank 0's request waits for the others, who post after the
            # barrier: meanwhile its recvbuf cannot be another request's.
            y = np.zeros(2048, dtype=np.float32)
            if RANK == 0:
                first = self.comm.iallreduce(x, y[:1024])
                e = self.assertStatus(Status.INVALID_ARG, self.comm.iallreduce, x, y[512:1536])
                self.assertIn("in flight", e.message)
                self.assertEqual(repr(first), "<cc_coll.Request in flight>")
            WORLD.Barrier()
            if RANK != 0:
                first = self.comm.iallreduce(x, y[:1024])
            self.assertTrue(np.shares_memory(first.wait(), y))
            self.assertTrue(np.all(y[:1024] == SIZE))
            self.assertEqual(repr(first), "<cc_coll.Request done>")
            first.free()
        # closing the communicator completes its requests; their handles
        # stay readable until freed
        c = cc_coll.Comm(WORLD)
        out4 = np.zeros_like(x)
        r4 = c.iallreduce(x, out4)
        c.close()
        self.assertTrue(r4.done)
        self.assertIs(r4.wait(), out4)
        self.assertTrue(np.all(out4 == SIZE))
        r4.free()
        self.assertStatus(Status.INVALID_COMM, c.iallreduce, x)


class Stats(Base):
    def test_counts_calls(self):
        s = self.comm.stats()
        self.assertIsInstance(s, cc_coll.Stats)
        self.assertEqual([f.name for f in dataclasses.fields(s)],
                         ["calls", "bytes_uncompressed", "bytes_wire", "time_compress", "time_communicate",
                          "time_decompress", "sketch_elements", "sketch_peeled", "time_total",
                          "auto_calls", "auto_lossy_calls", "auto_predicted", "auto_explored_calls", "auto_measured"])
        self.assertEqual(s.calls, 0)
        self.assertEqual(s.ratio, 1.0)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            s.calls = 1
        x = np.ones(1000, dtype=np.float32)
        for _ in range(3):
            self.comm.allreduce(x, np.empty_like(x), method="none")
        s = self.comm.stats()
        self.assertEqual(s.calls, 3)
        self.assertEqual(s.bytes_uncompressed, 3 * 1000 * 4)
        self.assertEqual(s.bytes_wire, 3 * 1000 * 4)
        self.assertEqual(s.ratio, 1.0)
        self.assertGreaterEqual(s.time_communicate, 0.0)
        self.assertEqual(s.as_dict()["bytes_wire"], s.bytes_wire)
        # the dict interface of earlier versions still answers, deprecated
        with self.assertWarns(DeprecationWarning):
            self.assertEqual(s["calls"], 3)
        self.assertEqual(set(s), set(s.as_dict()))
        self.assertIn("bytes_wire", s)
        # failed calls do not count
        with self.assertRaises(cc_coll.Error):
            self.comm.allreduce(x, method="topk", density=2.0)
        self.assertEqual(self.comm.stats().calls, 3)
        self.comm.allreduce(x.astype(np.float64))
        self.assertEqual(self.comm.stats().calls, 4)
        self.assertEqual(self.comm.stats().bytes_uncompressed, 3 * 4000 + 8000)
        # a reduce-scatter counts recvcount * size elements
        self.comm.reduce_scatter(np.ones(SIZE * 100, dtype=np.float32), np.empty(100, dtype=np.float32),
                                 method="none")
        s = self.comm.stats()
        self.assertEqual(s.calls, 5)
        self.assertEqual(s.bytes_uncompressed, 3 * 4000 + 8000 + SIZE * 400)
        self.assertEqual((s.sketch_elements, s.sketch_peeled), (0, 0))
        self.comm.reset_stats()
        self.assertEqual(self.comm.stats().calls, 0)

    def test_rank_size(self):
        self.assertEqual((self.comm.rank, self.comm.size), (RANK, SIZE))


def run_tests(module, what):
    """Runs the unittest cases of `module` on every rank; aborts the whole job
    when any rank fails, so that no rank is left waiting. Returns 0."""
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2 if RANK == 0 else 1)
    result = unittest.main(module=module, testRunner=runner, exit=False).result
    ok = result.wasSuccessful()
    if not ok:
        sys.stderr.write("rank %d of %d: FAILED\n" % (RANK, SIZE))
        sys.stderr.flush()
        WORLD.Abort(1)
    # every rank passed its tests; agree before leaving
    if not all(WORLD.allgather(ok)):
        WORLD.Abort(1)
    if RANK == 0:
        print("%s passed on %d ranks (libcc_coll %s)" % (what, SIZE, cc_coll.version()))
    return 0


def main():
    return run_tests(__name__, "cc_coll Python MPI tests")


if __name__ == "__main__":
    sys.exit(main())
