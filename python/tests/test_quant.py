# SPDX-License-Identifier: BSD-3-Clause
"""Methods QUANT and ONEBIT through the Python package, run on every rank:

    mpirun -np 2 python3 python/tests/test_quant.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). The package learns both from the library's registry; these
checks hold the library's results, bit for bit, against a numpy model of
the codec and the algorithm (docs/algorithms.md, section 10; the layout in
docs/wire.md, "QUANT and ONEBIT blocks"):

  - Method.QUANT and Method.ONEBIT exist, with their capabilities (lossy,
    reduce-scatter, AUTO candidates; no point-to-point, no matrix view, no
    density) and their settings;
  - allreduce of float32, error feedback off, at the default settings (4
    bits max-min in chunks of 256; signs in chunks of 1024): every rank
    gets the model's bits: each rank's block of m = ceil(n / P) elements
    coded chunk by chunk (the last block padded with zeros), decoded and
    added in binary32 in rank order by its owner, the sum coded again and
    decoded; AVG is that divided by the ranks;
  - CC_COLL_QUANT_BITS=3, CC_COLL_QUANT_SCHEME=norm, CC_COLL_QUANT_CHUNK=40
    in the environment of a new Comm: the model with those settings;
  - with error feedback the first call gives the same bits, and the result
    and the ranks' residuals add up to the inputs;
  - reduce_scatter: each rank's decoded sum of its block, coded once;
  - compressed point-to-point is refused (Status.NOT_SUPPORTED).
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
F = np.float32


def inputs(rank, n=N, salt=0):
    """Rank `rank`'s float32 input, normal with a few larger values."""
    rng = np.random.default_rng(1000 * salt + rank)
    x = rng.standard_normal(n)
    x[rng.random(n) < 0.01] *= 20
    return x.astype(F)


def code_chunk(seg, scheme, bits):
    """The decoded values of one chunk (quant_kernels.hpp, in binary32)."""
    levels = (1 << bits) - 1
    if scheme == "sign":
        # 32 lanes, each summed in order, then the tree 16, 8, 4, 2, 1.
        a = np.abs(seg)
        lane = np.zeros(32, dtype=F)
        for l in range(min(32, seg.size)):
            lane[l] = np.add.accumulate(a[l::32], dtype=F)[-1]
        off = 16
        while off:
            lane[:off] = lane[:off] + lane[off:2 * off]
            off //= 2
        mean = F(np.float64(lane[0]) / seg.size)
        offset, step = -mean, F(2.0 * np.float64(mean))
        q = (seg >= 0).astype(np.int32)
    else:
        if scheme == "maxmin":
            lo, hi = seg.min() + F(0), seg.max() + F(0)
            offset, step = lo, F((np.float64(hi) - np.float64(lo)) / levels)
        else:
            amax = np.abs(seg).max()
            offset, step = -amax, F(2.0 * np.float64(amax) / levels)
        inv = F(1) / step if step > 0 else F(0)
        t = (seg - offset) * inv + F(0.5)
        q = np.clip(t, F(0), F(levels)).astype(np.int32)
    return offset + q.astype(F) * step


def code_block(v, scheme, bits, chunk):
    return np.concatenate([code_chunk(v[c:c + chunk], scheme, bits) for c in range(0, v.size, chunk)])


def model_allreduce(xs, scheme, bits, chunk, stages=2):
    """The element-codec allreduce of the ranks' inputs xs (stages=1: the
    reduce-scatter's blocks, no second coding)."""
    n = xs[0].size
    m = -(-n // SIZE)
    padded = [np.concatenate([x, np.zeros(SIZE * m - n, dtype=F)]) for x in xs]
    out = []
    for b in range(SIZE):
        acc = np.zeros(m, dtype=F)
        for x in padded:
            acc = acc + code_block(x[b * m:(b + 1) * m], scheme, bits, chunk)
        acc[max(0, min(m, n - b * m)):] = 0  # the padding of the sum is zero before it is coded
        out.append(code_block(acc, scheme, bits, chunk) if stages == 2 else acc)
    return np.concatenate(out)[:n]


def same_on_all_ranks(a):
    blobs = WORLD.allgather(a.tobytes())
    return all(b == blobs[0] for b in blobs)


class Quant(unittest.TestCase):
    def comm(self, env=None):
        with unittest.mock.patch.dict(os.environ, env or {}):
            c = cc_coll.Comm(WORLD)
        self.addCleanup(c.close)
        return c

    def assert_bits(self, got, want):
        self.assertTrue(np.array_equal(got.view(np.uint32), want.view(np.uint32)),
                        "%d of %d elements differ from the model" % (np.count_nonzero(got != want), got.size))

    def test_registry(self):
        names = [s["name"] for s in cc_coll.settings()]
        for m, setting in ((Method.QUANT, "QUANT_BITS"), (Method.ONEBIT, "ONEBIT_CHUNK")):
            self.assertEqual(cc_coll.Params(method=m.name.lower()).method, m)
            self.assertEqual(m.caps, MethodCap.LOSSY | MethodCap.REDUCE_SCATTER | MethodCap.AUTO_CANDIDATE)
            self.assertIn(setting, names)

    def test_allreduce_defaults(self):
        c = self.comm()
        x = inputs(RANK)
        xs = [inputs(q) for q in range(SIZE)]
        for method, scheme, bits, chunk in (("quant", "maxmin", 4, 256), ("onebit", "sign", 1, 1024)):
            got = c.allreduce(x, np.empty_like(x), method=method, ef=False)
            self.assertTrue(same_on_all_ranks(got))
            want = model_allreduce(xs, scheme, bits, chunk)
            self.assert_bits(got, want)
            avg = c.allreduce(x, np.empty_like(x), op="avg", method=method, ef=False)
            self.assert_bits(avg, want / F(SIZE))

    def test_allreduce_settings_from_environment(self):
        c = self.comm({"CC_COLL_QUANT_BITS": "3", "CC_COLL_QUANT_SCHEME": "norm", "CC_COLL_QUANT_CHUNK": "40"})
        x = inputs(RANK, salt=1)
        got = c.allreduce(x, np.empty_like(x), method="quant", ef=False)
        self.assert_bits(got, model_allreduce([inputs(q, salt=1) for q in range(SIZE)], "norm", 3, 40))
        # A communicator made without the variables keeps the defaults.
        b = self.comm().allreduce(x, np.empty_like(x), method="quant", ef=False)
        self.assert_bits(b, model_allreduce([inputs(q, salt=1) for q in range(SIZE)], "maxmin", 4, 256))

    def test_error_feedback(self):
        c = self.comm()
        x = inputs(RANK, salt=2)
        xs = [inputs(q, salt=2) for q in range(SIZE)]
        for key, (method, scheme, bits, chunk) in enumerate((("quant", "maxmin", 4, 256),
                                                             ("onebit", "sign", 1, 1024))):
            first = c.allreduce(x, np.empty_like(x), method=method, ef_key=key + 1)
            self.assert_bits(first, model_allreduce(xs, scheme, bits, chunk))
            residual = c.ef_residual(first, ef_key=key + 1)
            exact = sum(v.astype(np.float64) for v in xs)
            mags = sum(np.abs(v.astype(np.float64)) for v in xs)
            gap = np.abs(first.astype(np.float64) + sum(WORLD.allgather(residual)) - exact)
            # binary32 rounding of the residuals and the owner's sum
            self.assertTrue(np.all(gap <= 2.0 ** -20 * (mags + np.abs(exact) + 1)), "largest gap %.3e" % gap.max())

    def test_reduce_scatter(self):
        c = self.comm()
        block = 1001
        x = inputs(RANK, block * SIZE, salt=3)
        xs = [inputs(q, block * SIZE, salt=3) for q in range(SIZE)]
        got = c.reduce_scatter(x, np.empty(block, dtype=F), method="quant", ef=False)
        want = model_allreduce(xs, "maxmin", 4, 256, stages=1)[RANK * block:(RANK + 1) * block]
        self.assert_bits(got, want)

    def test_no_point_to_point(self):
        c = self.comm()
        for method in ("quant", "onebit"):
            with self.assertRaises(cc_coll.Error) as cm:
                c.send(inputs(RANK, 64), (RANK + 1) % SIZE, 5, method=method)
            self.assertEqual(cm.exception.status, Status.NOT_SUPPORTED)


if __name__ == "__main__":
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2 if RANK == 0 else 1)
    ok = unittest.main(argv=sys.argv[:1], testRunner=runner, exit=False).result.wasSuccessful()
    if not all(WORLD.allgather(ok)):
        sys.stderr.write("rank %d of %d: FAILED\n" % (RANK, SIZE))
        sys.stderr.flush()
        WORLD.Abort(1)
    if RANK == 0:
        print("python_quant: %d ranks: PASS" % SIZE)
