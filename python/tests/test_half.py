# SPDX-License-Identifier: BSD-3-Clause
"""Method HALF through the Python package, run on every rank:

    mpirun -np 2 python3 python/tests/test_half.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). The package keeps no list of methods: these checks show that
HALF, which it learns from the library's registry, works through it with
numpy arrays (docs/algorithms.md, section 9):

  - Method.HALF exists, named "half", with its capabilities (lossy,
    reduce-scatter, an AUTO candidate; no point-to-point, no matrix view,
    not selecting);
  - allreduce of float32 with bfloat16 on the wire (the default
    CC_COLL_HALF_FORMAT): every rank gets the same bits, the sum of the
    ranks' inputs rounded to bfloat16, added in binary32 in rank order and
    rounded once more (error feedback off; with it on, the first call
    gives the same bits), within bfloat16 rounding of the exact sum;
    iallreduce gives the same bits; AVG is the sum divided by the ranks;
  - CC_COLL_HALF_FORMAT=fp16 in the environment of a new Comm: the same with
    binary16, 8 times closer to the exact sum than bfloat16 allows;
  - reduce_scatter: each rank's block of the sum of the rounded inputs,
    with no second rounding;
  - compressed point-to-point with HALF is refused (Status.NOT_SUPPORTED).
A failure on any rank aborts the whole job.
"""

import os
import sys
import unittest
import unittest.mock

import numpy as np
from mpi4py import MPI

import cc_coll
from cc_coll import Method, MethodCap, Status

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size

N = 10007  # not a multiple of the ranks: a short last block

# Unit roundoff of each format (half an ulp, relative): 8 and 11 significant bits.
BF16_U = 2.0 ** -8
FP16_U = 2.0 ** -11


def inputs(rank, n=N, salt=0):
    """Rank `rank`'s float32 input: mixed signs and magnitudes in
    [2^-6, 2^6), inside both formats' normal range."""
    rng = np.random.default_rng(1000 * salt + rank)
    mag = np.exp2(rng.uniform(-6.0, 6.0, n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float32)


def round_bf16(a):
    """float32 values rounded to bfloat16 (nearest, ties to even)."""
    return cc_coll.from_bfloat16(cc_coll.to_bfloat16(a))


def round_fp16(a):
    """float32 values rounded to binary16 (nearest, ties to even)."""
    return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)


def summed(rounding, salt=0, n=N):
    """The ranks' inputs rounded, added in binary32 in rank order."""
    acc = np.zeros(n, dtype=np.float32)
    for q in range(SIZE):
        acc = acc + rounding(inputs(q, n, salt))
    return acc


def exact_sum_and_bound(salt=0, n=N):
    """(the exact sum in float64, the sum of the magnitudes) of the ranks' inputs."""
    xs = [inputs(q, n, salt).astype(np.float64) for q in range(SIZE)]
    return sum(xs), sum(np.abs(x) for x in xs)


def same_on_all_ranks(a):
    blobs = WORLD.allgather(a.tobytes())
    return all(b == blobs[0] for b in blobs)


class Half(unittest.TestCase):
    def comm(self):
        c = cc_coll.Comm(WORLD)
        self.addCleanup(c.close)
        return c

    def assert_within_rounding(self, got, u, salt=0):
        """Each element within two roundings (u relative each: the inputs',
        then the sum's) of the exact sum, measured against the sum of the
        inputs' magnitudes (cancellation leaves no relative bound)."""
        exact, mags = exact_sum_and_bound(salt, got.size)
        err = np.abs(got.astype(np.float64) - exact)
        bound = 2 * u * (1 + 2 * u) * mags
        worst = int(np.argmax(err / bound))
        self.assertTrue(np.all(err <= bound), "element %d: error %.3e, bound %.3e"
                        % (worst, err[worst], bound[worst]))

    def test_registry(self):
        m = Method.HALF
        self.assertEqual(m.name, "HALF")
        self.assertEqual(cc_coll.Params(method="half").method, m)
        self.assertTrue(m.caps & MethodCap.LOSSY)
        self.assertTrue(m.caps & MethodCap.REDUCE_SCATTER)
        self.assertTrue(m.caps & MethodCap.AUTO_CANDIDATE)
        for cap in (MethodCap.P2P, MethodCap.MATRIX, MethodCap.SELECTS):
            self.assertFalse(m.caps & cap, cap)
        self.assertIn("HALF_FORMAT", m.summary)
        self.assertIn("HALF_FORMAT", [s["name"] for s in cc_coll.settings()])

    def test_allreduce_bf16(self):
        c = self.comm()
        x = inputs(RANK)
        expected = round_bf16(summed(round_bf16))
        got = c.allreduce(x, np.empty_like(x), method="half", ef=False)
        self.assertTrue(same_on_all_ranks(got))
        self.assertTrue(np.array_equal(got.view(np.uint32), expected.view(np.uint32)),
                        "%d of %d elements differ from the model" % (np.count_nonzero(got != expected), N))
        self.assert_within_rounding(got, BF16_U)
        # Lossy indeed: most elements differ from the binary32 sum.
        self.assertGreater(np.count_nonzero(got != summed(lambda a: a)), N // 2)
        # Method.HALF as well as its name; in place; non-blocking.
        y = x.copy()
        c.allreduce(y, method=Method.HALF, ef=False)
        self.assertTrue(np.array_equal(y.view(np.uint32), got.view(np.uint32)))
        z = c.iallreduce(x, np.empty_like(x), method="half", ef=False).wait()
        self.assertTrue(np.array_equal(z.view(np.uint32), got.view(np.uint32)))
        # AVG: the decoded sum divided by the ranks.
        avg = c.allreduce(x, np.empty_like(x), op="avg", method="half", ef=False)
        self.assertTrue(np.array_equal(avg, got / np.float32(SIZE)))

    def test_allreduce_bf16_error_feedback(self):
        """With error feedback (the default) the first call gives the same
        bits, and the result and the ranks' residuals add up to the inputs
        (two-stage error feedback), to binary32 rounding of the sum; the
        next call carries the residuals."""
        c = self.comm()
        x = inputs(RANK, salt=1)
        first = c.allreduce(x, np.empty_like(x), method="half", ef_key=7)
        expected = round_bf16(summed(round_bf16, salt=1))
        self.assertTrue(np.array_equal(first.view(np.uint32), expected.view(np.uint32)))
        residual = c.ef_residual(first, ef_key=7)
        self.assertTrue(np.any(residual != 0))
        exact, mags = exact_sum_and_bound(salt=1)
        gap = np.abs(first.astype(np.float64) + sum(WORLD.allgather(residual)) - exact)
        self.assertTrue(np.all(gap <= 2.0 ** -22 * mags), "largest gap %.3e" % gap.max())
        second = c.allreduce(x, np.empty_like(x), method="half", ef_key=7)
        self.assertTrue(same_on_all_ranks(second))
        self.assertTrue(np.all(np.isfinite(second)))
        self.assertFalse(np.array_equal(second, first))

    def test_allreduce_fp16_from_environment(self):
        with unittest.mock.patch.dict(os.environ, {"CC_COLL_HALF_FORMAT": "fp16"}):
            c = self.comm()
        self.assertEqual({s["name"]: s["value"] for s in cc_coll.settings()}.get("HALF_FORMAT"), "bf16")
        x = inputs(RANK, salt=2)
        got = c.allreduce(x, np.empty_like(x), method="half", ef=False)
        expected = round_fp16(summed(round_fp16, salt=2))
        self.assertTrue(same_on_all_ranks(got))
        self.assertTrue(np.array_equal(got.view(np.uint32), expected.view(np.uint32)),
                        "%d of %d elements differ from the model" % (np.count_nonzero(got != expected), N))
        self.assert_within_rounding(got, FP16_U, salt=2)
        # The communicator made without the variable still sends bfloat16.
        b = self.comm().allreduce(x, np.empty_like(x), method="half", ef=False)
        self.assertTrue(np.array_equal(b.view(np.uint32), round_bf16(summed(round_bf16, salt=2)).view(np.uint32)))

    def test_nonfinite_values_are_sent_never_kept(self):
        """NaN, an infinity and (fp16) a finite value past 65504 reach the
        result as MPI_SUM would have them (NaN, inf); the residuals stay
        finite: 0 where the kept error would not be (docs/algorithms.md
        1.3), in both stages of error feedback."""
        with unittest.mock.patch.dict(os.environ, {"CC_COLL_HALF_FORMAT": "fp16"}):
            c = self.comm()
        x = inputs(RANK, salt=4)
        x[[5, 17, 1000]] = 1.0
        if RANK == 0:
            x[5], x[17], x[1000] = np.nan, np.inf, 1e5
        got = c.allreduce(x, np.empty_like(x), method="half", ef_key=11)
        self.assertTrue(np.isnan(got[5]))
        self.assertEqual(got[17], np.inf)
        self.assertEqual(got[1000], np.inf)   # 1e5 + the others' 1.0 has no binary16
        residual = c.ef_residual(got, ef_key=11)
        self.assertTrue(np.all(np.isfinite(residual)), "non-finite residual at %s"
                        % np.flatnonzero(~np.isfinite(residual))[:5])
        if RANK == 0:
            self.assertEqual(residual[5], 0)
            self.assertEqual(residual[17], 0)
            self.assertEqual(residual[1000], 0)
        # The next call is finite where its input is.
        y = inputs(RANK, salt=5)
        again = c.allreduce(y, np.empty_like(y), method="half", ef_key=11)
        self.assertTrue(np.all(np.isfinite(again)))

    def test_reduce_scatter(self):
        c = self.comm()
        block = 1001
        x = inputs(RANK, block * SIZE, salt=3)
        got = c.reduce_scatter(x, np.empty(block, dtype=np.float32), method="half", ef=False)
        expected = summed(round_bf16, salt=3, n=block * SIZE)[RANK * block:(RANK + 1) * block]
        self.assertTrue(np.array_equal(got.view(np.uint32), expected.view(np.uint32)))

    def test_no_point_to_point(self):
        """Refused on the sender, before any message (nothing to receive)."""
        c = self.comm()
        with self.assertRaises(cc_coll.Error) as cm:
            c.send(inputs(RANK, 64), (RANK + 1) % SIZE, 5, method="half")
        self.assertEqual(cm.exception.status, Status.NOT_SUPPORTED)

if __name__ == "__main__":
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2 if RANK == 0 else 1)
    ok = unittest.main(argv=sys.argv[:1], testRunner=runner, exit=False).result.wasSuccessful()
    if not all(WORLD.allgather(ok)):
        sys.stderr.write("rank %d of %d: FAILED\n" % (RANK, SIZE))
        sys.stderr.flush()
        WORLD.Abort(1)
    if RANK == 0:
        print("python_half: %d ranks: PASS" % SIZE)
