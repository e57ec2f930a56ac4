# SPDX-License-Identifier: BSD-3-Clause
"""Checkpoints of the compression state (Comm.state_export / state_import)
under MPI, run on every rank:

    mpirun -np 2 python3 python/tests/test_mpi_checkpoint.py

(with PYTHONPATH=python and CC_COLL_LIBRARY=build/libcc_coll.so.0, as CTest
sets them). A training loop with TOPK, SKETCH, a LOWRANK bucket and, on two
or more ranks, compressed point-to-point messages is stopped after N steps,
its blob saved as a training checkpoint would (pickled with the rest of a
state dict), and resumed on a new Comm: the remaining steps are bit-identical
to an uninterrupted run. Corrupt and foreign blobs raise Error and change
nothing. A failure on any rank aborts the whole job.
"""

import pickle
import sys
import unittest

import numpy as np
from mpi4py import MPI

import cc_coll
from cc_coll import Params, Status

from test_mpi import run_tests

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size
N, M = 3, 3

BUCKET = [((48, 32), np.float32, 3), ((20, 10), np.float64, 2), ((30,), np.float32, 2)]


def data(step, tensor, shape, dtype):
    return np.random.default_rng([step, tensor, RANK]).standard_normal(shape).astype(dtype)


def train_step(comm, step):
    """One step: every result this rank received, as bytes."""
    out = []
    g = data(step, 0, (1000,), np.float32)
    out.append(comm.allreduce(g, np.empty_like(g), op="avg", method="topk", density=0.05, ef_key=1))
    g = data(step, 1, (3000,), np.float32)
    out.append(comm.allreduce(g, np.empty_like(g), op="avg", method="sketch", density=0.02, ef_key=2))
    bucket = [data(step, 10 + i, shape, dtype) for i, (shape, dtype, _) in enumerate(BUCKET)]
    params = [Params(method="lowrank", rank=r, warm_start=True, start_iter=1, ef_key=100 + i)
              for i, (_, _, r) in enumerate(BUCKET)]
    comm.allreduce_group(bucket, op="avg", params=params)
    out.extend(bucket)
    if SIZE >= 2 and RANK ^ 1 < SIZE:
        peer = RANK ^ 1
        x = data(step, 20, (24, 20), np.float32)
        y = np.empty_like(x)
        lowrank = Params(method="lowrank", rank=2)
        for phase in range(2):
            if (phase == 0) == (RANK % 2 == 0):
                comm.send(x, peer, 5, params=lowrank)
            else:
                comm.recv(y, peer, 5, params=lowrank)
        out.append(y)
    return b"".join(np.ascontiguousarray(a).tobytes() for a in out)


class Checkpoint(unittest.TestCase):
    def test_resume_is_bit_identical(self):
        with cc_coll.Comm(WORLD) as a:
            whole = [train_step(a, s) for s in range(N + M)]
            end = a.state_export()
        with cc_coll.Comm(WORLD) as b:
            for s in range(N):
                self.assertEqual(train_step(b, s), whole[s])
            blob = b.state_export()
            self.assertIsInstance(blob, bytes)
            self.assertGreater(b.ef_bytes(), 0)
            self.assertGreater(b.state_bytes(), 0)
            saved = pickle.dumps({"step": N, "comm_state": blob})
        restored = pickle.loads(saved)
        with cc_coll.Comm(WORLD) as c:
            c.state_import(restored["comm_state"])
            self.assertEqual(c.state_export(), blob)
            for s in range(restored["step"], N + M):
                self.assertEqual(train_step(c, s), whole[s], "step %d after the resume" % s)
            self.assertEqual(c.state_export(), end)

    def test_accepted_buffers(self):
        with cc_coll.Comm(WORLD) as a:
            train_step(a, 0)
            blob = a.state_export()
            for form in (bytearray(blob), memoryview(blob), np.frombuffer(blob, dtype=np.uint8)):
                with cc_coll.Comm(WORLD) as c:
                    c.state_import(form)
                    self.assertEqual(c.state_export(), blob)

    def test_bad_blobs_change_nothing(self):
        with cc_coll.Comm(WORLD) as a:
            train_step(a, 0)
            blob = a.state_export()
            flipped = bytearray(blob)
            flipped[len(blob) // 2] ^= 1
            version = bytearray(blob)
            version[4] = 7
            cases = [(blob[:-1], Status.INVALID_ARG, "truncated"),
                     (bytes(flipped), Status.INVALID_ARG, "checksum"),
                     (bytes(version), Status.VERSION_MISMATCH, "format version 7"),
                     (b"not a blob at all", Status.INVALID_ARG, "not a libcc_coll state blob"),
                     (b"", Status.INVALID_ARG, "not a libcc_coll state blob")]
            if SIZE >= 2:
                # the blob of the next rank
                other = WORLD.sendrecv(blob, dest=(RANK + 1) % SIZE, source=(RANK - 1) % SIZE)
                cases.append((other, Status.MISMATCH, "every rank restores the blob it exported"))
            for bad, status, words in cases:
                with self.subTest(words=words):
                    with self.assertRaises(cc_coll.Error) as ctx:
                        a.state_import(bad)
                    self.assertEqual(ctx.exception.status, status)
                    self.assertIn(words, str(ctx.exception))
                    self.assertEqual(a.state_export(), blob)

    def test_closed_comm(self):
        c = cc_coll.Comm(WORLD)
        c.close()
        with self.assertRaises(cc_coll.Error) as ctx:
            c.state_export()
        self.assertEqual(ctx.exception.status, Status.INVALID_COMM)


def main():
    return run_tests(__name__, "cc_coll Python checkpoint tests")


if __name__ == "__main__":
    sys.exit(main())
